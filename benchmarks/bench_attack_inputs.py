"""Peak memory of ingest on hostile inputs (issue 32): each is ingested by ``goodput ingest`` in a
child process, whose peak RSS (``ru_maxrss``) is read after it exits. The fast versions of the
same attacks, with their outcomes, are tests/test_attack_inputs.py.

- a 200 MB kernel log that is one line (no newline): one quarantine row, read past in chunks;
- a 4 MB ``.json.gz`` that inflates to 4 GB of whitespace: quarantined after
  ``parsing.MAX_WHOLE_BYTES`` of decompressed text, never read whole;
- a sacct line whose hostlist names 10 million hosts: one quarantine row, hosts never made.

Target: every peak under 1 GB (the baseline RSS of the CLI, with Polars, DuckDB and Dagster
imported, is printed beside it). Inputs are generated under /tmp and deleted afterwards.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target

LIMIT_MB = 1024


def _peak_mb(argv: list[str], env: dict) -> tuple[float, float, str]:
    """(peak RSS MB, wall s, stderr tail) of one child process; ``ru_maxrss`` of the children
    is a running maximum, so each run is measured from a fresh grandchild."""
    probe = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], "
        "capture_output=True, text=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(p.returncode); "
        "sys.stderr.write(p.stderr[-600:])"
    )
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env, check=True
    )
    kb, rc = out.stdout.split()[:2]
    return int(kb) / 1024, time.perf_counter() - t0, f"exit {rc}: {out.stderr.strip()[-300:]}"


def _single_line(path: Path, mb: int) -> None:
    block = b"NVRM: Xid (PCI:0000:3b:00): 79, " + b"x" * (1 << 20)
    with path.open("wb") as fh:
        fh.write(b"2026-01-05T10:00:00+00:00 node-a kernel: ")
        for _ in range(mb):
            fh.write(block[: 1 << 20])
        fh.write(b"\n")  # complete: read past as one quarantined line (without it: held back)


def _json_bomb(path: Path, gb: int) -> None:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    spaces = b" " * (64 << 20)
    with path.open("wb") as fh:
        fh.write(z.compress(b'{"jobs": ['))
        for _ in range(gb * 16):
            fh.write(z.compress(spaces))
        fh.write(z.compress(b"]}") + z.flush())


def _hostlist(path: Path) -> None:
    path.write_text(
        "JobID|State|Start|End|Elapsed|NNodes|NodeList\n"
        "1|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|n[0-99999]x[0-99]\n"
        "2|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|gpu[1-2]\n"
    )


def main() -> None:
    args = options(line_mb=200, bomb_gb=4)
    tmp = Path(tempfile.mkdtemp(prefix="bench-attack-"))
    env = {**os.environ, "GOODPUT_SETTLE": "0"}
    goodput = [sys.executable, "-m", "pipelines.cli"]
    try:
        cases = {}
        (tmp / "line").mkdir()
        _single_line(tmp / "line" / "node-a.log", args.line_mb)
        cases[f"{args.line_mb} MB single-line kernel log"] = (tmp / "line", ["--format", "kernel"])
        (tmp / "bomb").mkdir()
        _json_bomb(tmp / "bomb" / "jobs.json.gz", args.bomb_gb)
        size = (tmp / "bomb" / "jobs.json.gz").stat().st_size
        cases[f"{size / 1e6:.1f} MB .json.gz inflating to {args.bomb_gb} GB"] = (
            tmp / "bomb",
            ["--format", "sacct-json"],
        )
        (tmp / "hosts").mkdir()
        _hostlist(tmp / "hosts" / "sacct.txt")
        cases["sacct hostlist of 10,000,000 hosts"] = (tmp / "hosts", [])
        (tmp / "empty").mkdir()
        base, _, _ = _peak_mb(
            [*goodput, "--home", str(tmp / "home0"), "ingest", str(tmp / "empty")], env
        )
        print(f"baseline (ingest of an empty directory): peak RSS {base:,.0f} MB")
        for i, (name, (src, extra)) in enumerate(cases.items()):
            peak, wall, tail = _peak_mb(
                [*goodput, "--home", str(tmp / f"home{i + 1}"), "ingest", str(src), *extra], env
            )
            print(
                f"{name}: peak RSS {peak:,.0f} MB, {wall:.1f} s "
                f"({tail.splitlines()[0] if tail else ''})"
            )
            print("   ", tail.replace("\n", "\n    "))
            target(f"{name}: peak RSS < {LIMIT_MB} MB", peak < LIMIT_MB, f"{peak:,.0f} MB")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        "max RSS of this process: "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB"
    )


if __name__ == "__main__":
    run_benchmark(main)
