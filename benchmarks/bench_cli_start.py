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
import resource
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


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh ``goodput`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([*GOODPUT, *argv], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def add_home_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--home", type=Path, help=f"a demo-built home (default {DEFAULT_HOME}, built if missing)"
    )


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_home_option(ap)
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per command (default 5)")
    args = ap.parse_args()
    home = demo_home(args.home)
    print(
        f"home {home}; {args.runs} runs per command; load average {os.getloadavg()[0]:.1f} on "
        f"{os.cpu_count()} cores"
    )
    print(f"{'command':14s} {'fastest s':>10s} {'median s':>9s} {'CPU s':>6s}")
    for name, argv in COMMANDS.items():
        runs = [timed(["--home", str(home), *argv]) for _ in range(args.runs)]
        walls = [w for w, _ in runs]
        cpu = statistics.median(c for _, c in runs)
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
