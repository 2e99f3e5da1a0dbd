"""Start-up time of the quick commands: `goodput fit` (print the stored table), `goodput sql`,
`goodput project` (with and without `--json`), `goodput nodes` (the stored lemon-node scores and
their projected gain) and `--help` / `--version`, each from a fresh process on a demo-built home.

    .venv/bin/python -m benchmarks.bench_cli_start [--home DIR] [--runs 5]

Without ``--home`` the home is ``benchmarks/out/cli-start-home``, built once by `goodput demo`
(a few minutes) and reused. Each command runs ``--runs`` times; the target is on the fastest run
(what the command costs when it has a core: the load of other processes only adds to it), the
median and the CPU seconds are printed beside it with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target

REPO = Path(__file__).resolve().parent.parent
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
DEFAULT_HOME = REPO / "benchmarks" / "out" / "cli-start-home"
LIMIT_S = 2.0
COMMANDS = {
    "--help": ["--help"],
    "--version": ["--version"],
    "fit": ["fit"],
    "sql": [
        "sql",
        "select component_class, rate_per_1k_unit_days from failure_rates where selected",
    ],
    "project --json": ["project", "--json"],
    "project": ["project"],
    "nodes": ["nodes"],
}
TARGETED = ("fit", "sql", "project --json", "project", "nodes")


def measured(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one fresh ``goodput`` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*GOODPUT, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"goodput {' '.join(argv)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def timing_options(doc: str, runs: int) -> tuple[int, Path]:
    """The command line of a benchmark that times fresh ``goodput`` processes on a demo home
    (its docstring ``doc``): (``--runs``, default ``runs``; the home, built if missing)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument(
        "--home", type=Path, help=f"a demo-built home (default {DEFAULT_HOME}, built if missing)"
    )
    ap.add_argument("--runs", type=int, default=runs, help=f"fresh processes (default {runs})")
    args = ap.parse_args()
    return args.runs, demo_home(args.home)


def demo_home(home: Path | None) -> Path:
    """``home``, else ``DEFAULT_HOME``, built by `goodput demo` when it holds no warehouse."""
    home = home or DEFAULT_HOME
    if not (home / "warehouse.duckdb").exists():
        print(f"building {home} with `goodput demo` ...", flush=True)
        subprocess.run(
            [*GOODPUT, "--home", str(home), "demo"], cwd=REPO, check=True, stdout=subprocess.DEVNULL
        )
    return home


def main() -> int:
    n_runs, home = timing_options(__doc__, runs=5)
    print(
        f"home {home}; {n_runs} runs per command; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print(f"{'command':14s} {'fastest s':>10s} {'median s':>9s} {'CPU s':>6s}")
    for name, argv in COMMANDS.items():
        runs = [measured(["--home", str(home), *argv]) for _ in range(n_runs)]
        walls = [r[0] for r in runs]
        cpu = statistics.median(r[1] for r in runs)
        print(
            f"{name:14s} {min(walls):10.2f} {statistics.median(walls):9.2f} {cpu:6.2f}", flush=True
        )
        if name in TARGETED:
            target(
                f"goodput {name} starts and answers in < {LIMIT_S:g} s",
                min(walls) < LIMIT_S,
                f"fastest {min(walls):.2f} s, median {statistics.median(walls):.2f} s, CPU "
                f"{cpu:.2f} s, load {os.getloadavg()[0]:.1f}",
            )


if __name__ == "__main__":
    run_benchmark(main)
