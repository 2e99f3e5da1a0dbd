"""Every benchmark at its default size, one after another (``make bench``), then the table of
their ``TARGET`` lines; each benchmark's output is written to ``benchmarks/RESULTS.md`` under
its own heading with the machine, its load before and after, the date and the commit, replacing
that benchmark's previous entry (the others are kept). Exits non-zero when a target is missed
or a benchmark fails to run.

    .venv/bin/python -m benchmarks.run_all [--only bench_kernel bench_sacct ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import time
from datetime import UTC
from datetime import datetime
from pathlib import Path

BENCHMARKS = [
    "bench_sacct",
    "bench_telemetry",
    "bench_kernel",
    "bench_health_events",
    "bench_attack_inputs",
    "bench_survival",
    "bench_goodput",
    "bench_mc_spares",
    "bench_fleetsim",
    "bench_fleetsim_airesim",
    "validate_attribution",
    "validate_survival_coverage",
    "validate_survivor_inventory",
    "validate_claims",
    "validate_fleets",
    "validate_measured_goodput",
    "validate_differential_scope",
    "validate_changes",
    "validate_invariants",
    "validate_differential_sacct",
    "bench_fleet_scale",
    "bench_cli_start",
    "bench_scoped_commands",
    "bench_small_build",
    "bench_ui_vs_cli",
    "bench_report_size",
    "bench_pull_slurm",
    "bench_pull_prometheus",
    "validate_differential_pull",
    "bench_pull_redfish",
    "bench_pull_faults",
    "validate_public_datasets",
    "validate_references",
    "validate_stragglers",
    "validate_slow_steps",
    "validate_fail_slow",
]
RESULTS = Path(__file__).with_name("RESULTS.md")
_HEADER = """# Benchmark results

Written by `make bench` (`python -m benchmarks.run_all [--only NAME ...]`): one entry per
benchmark, its latest run, with the machine, its load, the date and the commit it ran on.
What each benchmark measures and its targets: `benchmarks/README.md`.
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="+", choices=BENCHMARKS, default=None)
    ap.add_argument(
        "--args",
        default="",
        help="arguments for the benchmark (with one --only); its entry is kept apart",
    )
    args = ap.parse_args()
    extra = args.args.split()
    if extra and (not args.only or len(args.only) != 1):
        ap.error("--args goes with one --only benchmark")
    names = args.only or [b for b in BENCHMARKS if Path(__file__).with_name(f"{b}.py").exists()]
    verdicts, failed = [], 0
    for name in names:
        print(f"\n=== benchmarks.{name}", flush=True)
        load0, t0 = os.getloadavg(), time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}", *extra],
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        wall, load1 = time.perf_counter() - t0, os.getloadavg()
        print(run.stdout, end="", flush=True)
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("TARGET ")]
        if run.returncode and not any(" FAIL: " in ln for ln in lines):
            lines.append(f"TARGET FAIL: benchmarks.{name} exited with status {run.returncode}")
        failed += run.returncode != 0
        verdicts += [f"{name:28s} {ln.removeprefix('TARGET ')}" for ln in lines]
        print(f"({wall:.0f} s)")
        record(" ".join([name, *extra]), run.stdout, wall, load0, load1)
    print("\n=== targets")
    print("\n".join(verdicts))
    return 1 if failed else 0


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{os.cpu_count()} cores, {mem:.0f} GiB, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def commit() -> str:
    def git(*a: str) -> str:
        return subprocess.run(
            ["git", *a], capture_output=True, text=True, check=False, cwd=Path(__file__).parent
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    # this file's own earlier entries are no change to what ran
    changed = git(
        "status", "--porcelain", "--untracked-files=no", "--",
        ":(top)", f":(top,exclude)benchmarks/{RESULTS.name}",
    )  # fmt: skip
    return head + (" with uncommitted changes" if changed else "")


def record(name: str, output: str, wall: float, load0: tuple, load1: tuple) -> None:
    """Replace ``name``'s entry in RESULTS.md with this run."""
    text = RESULTS.read_text() if RESULTS.exists() else _HEADER
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    entry = (
        f"<!-- bench:{name} -->\n## {name}\n\n"
        f"`python -m benchmarks.{name}` at {when}, commit {commit()}; {machine()}; load average "
        f"{load0[0]:.1f} before, {load1[0]:.1f} after; {wall:.0f} s.\n\n"
        f"```\n{output.rstrip()}\n```\n"
        f"<!-- /bench:{name} -->\n"
    )
    pattern = re.compile(
        rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->\n", re.DOTALL
    )
    text = (
        pattern.sub(lambda _: entry, text)
        if pattern.search(text)
        else text.rstrip("\n") + "\n\n" + entry
    )
    RESULTS.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
