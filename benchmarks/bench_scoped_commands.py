"""Scoped reading commands answer from the whole fleet's stored tables, filtered: the time of
each from a fresh process on the demo home and on a 2,048-node warehouse, with no Dagster
rebuild; and how fast `goodput sql` and tab completion start.

    .venv/bin/python -m benchmarks.bench_scoped_commands [--home DIR] [--big-home DIR]
                                                         [--make-big] [--runs 3]

``--home``: a demo-built home (default ``benchmarks/out/cli-start-home``, shared with
``bench_cli_start``, built by `goodput demo` when missing). ``--big-home``: a built 2,048-node
home (default ``benchmarks/out/scoped-home-2048``); ``--make-big`` makes it first when missing:
`goodput simulate --nodes 2048 --days 30 --seed 3 --scrape-interval 1d` (daily scrapes: the
scoped commands read jobs, interruptions, job chains and event hosts, not telemetry), then
`goodput ingest` and `goodput build` (tens of minutes on 2 shared cores); ``--build-big`` builds it
again. Without a big home its targets are not run and the output says so.

Per home, each scoped command (`losses --by cause`, `trend`, `compare --by account`, each with a
partition and a two-week window) runs ``--runs`` times; the first run of each is cold (no earlier
scoped run: nothing is cached for a filtered answer, and ``HOME/scopes`` must stay untouched).
`fit` with the same partition runs once to fill its scope cache (printed, no target) and then
warm. The target is on the fastest run (what a command costs when it has a core; the load of the
other processes only adds to it); the median, the CPU seconds and the load are printed beside it.

TARGET lines: on the demo home each scoped losses / trend / compare and warm fit < 3 s, and no
rebuild (``HOME/scopes`` unchanged by the filtered commands); `goodput sql` start < 1 s; tab
completion of a command name and of ``--partition`` values < 1 s; on the 2,048-node home each
scoped losses / trend / compare < 10 s; and where this run builds it, that build's peak RSS < 4 GB
(bench_fleet_scale's bar for a build).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.simulation import source_folders

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "out"
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
DEMO_HOME = OUT / "cli-start-home"
BIG_HOME = OUT / "scoped-home-2048"
BIG_FLEET = OUT / "scoped-fleet-2048"
DEMO_LIMIT_S, BIG_LIMIT_S, START_LIMIT_S = 3.0, 10.0, 1.0
BUILD_RSS_LIMIT_GB = 4.0  # bench_fleet_scale's bar for a build


def timed(argv: list[str], env: dict | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of one fresh process; file descriptors 8 and 9 (argcomplete's output and
    debug streams) go to /dev/null."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), 8)
        os.dup2(null.fileno(), 9)
        subprocess.run(
            argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL, env=env, pass_fds=(8, 9)
        )
        os.close(8)
        os.close(9)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(name: str, argv: list[str], runs: int, limit: float | None, env=None) -> float:
    """Run ``argv`` ``runs`` times; print fastest, median, CPU; a TARGET on the fastest."""
    got = [timed(argv, env) for _ in range(runs)]
    walls = [w for w, _ in got]
    cpu = statistics.median(c for _, c in got)
    print(
        f"{name:44s} first {walls[0]:6.2f}  fastest {min(walls):6.2f}  median "
        f"{statistics.median(walls):6.2f}  CPU {cpu:5.2f}",
        flush=True,
    )
    if limit is not None:
        target(
            f"{name} < {limit:g} s",
            min(walls) < limit,
            f"fastest {min(walls):.2f} s, first (cold) {walls[0]:.2f} s, median "
            f"{statistics.median(walls):.2f} s, CPU {cpu:.2f} s, load {os.getloadavg()[0]:.1f}",
        )
    return min(walls)


def scope_of(home: Path) -> list[str]:
    """A partition (the one with most attempts) and two weeks from a week after the data's
    first job: the slice every command is asked about."""
    from warehouse.store import Warehouse

    wh = Warehouse(home, read_only=True)
    with wh.connect() as con:
        part, first = con.execute(
            f"SELECT mode(partition), min(start_time) FROM ({wh.view_sql('job_attempts')})"
        ).fetchall()[0]
    start = (first + timedelta(days=7)).date()
    return ["--partition", part, "--from", str(start), "--to", str(start + timedelta(days=14))]


def scoped_commands(home: Path, runs: int, limit: float) -> None:
    flags = scope_of(home)
    print(f"home {home}; scope {' '.join(flags)}; {runs} runs each", flush=True)
    before = sorted((home / "scopes").rglob("*")) if (home / "scopes").exists() else []
    for command in (["losses", "--by", "cause"], ["trend"], ["compare", "--by", "account"]):
        measure(
            f"{home.name}: {' '.join(command)} (scoped)",
            [*GOODPUT, "--home", str(home), *command, *flags],
            runs,
            limit,
        )
    after = sorted((home / "scopes").rglob("*")) if (home / "scopes").exists() else []
    target(
        f"{home.name}: scoped losses, trend and compare rebuild nothing (HOME/scopes unchanged)",
        after == before,
        f"{len(after) - len(before)} new paths under {home / 'scopes'}",
    )
    if home == BIG_HOME:
        return
    fit = [*GOODPUT, "--home", str(home), "fit", "--partition", flags[1]]
    measure(f"{home.name}: fit (scoped, fills its cache if cold)", fit, 1, None)
    measure(f"{home.name}: fit (scoped, cache warm)", fit, runs, limit)


def startup(home: Path, runs: int) -> None:
    measure(
        "goodput sql start (select 1)",
        [*GOODPUT, "--home", str(home), "sql", "select 1"],
        runs,
        START_LIMIT_S,
    )
    for name, line in (
        ("tab completion of a command", "goodput lo"),
        ("tab completion of --partition values", f"goodput --home {home} losses --partition "),
    ):
        env = {
            **os.environ,
            "_ARGCOMPLETE": "1",
            "_ARGCOMPLETE_SHELL": "bash",
            "COMP_LINE": line,
            "COMP_POINT": str(len(line)),
            "COMP_TYPE": "9",
            "_ARGCOMPLETE_IFS": "\013",
        }
        measure(name, [sys.executable, "-m", "pipelines.cli"], runs, START_LIMIT_S, env)


def make_big() -> None:
    """Simulate and ingest the 2,048-node home (each step skipped when done), then build it
    (``build_big``) if it has not been built."""
    steps = [
        (
            BIG_FLEET / "ground_truth.json",
            ["simulate", "--out", str(BIG_FLEET), "--nodes", "2048", "--days", "30", "--seed",
             "3", "--scrape-interval", "1d"],
        ),
        (
            BIG_HOME / "parquet" / "job_attempts",
            ["--home", str(BIG_HOME), "ingest", *map(str, source_folders(BIG_FLEET)),
             "--cluster", "simfleet"],
        ),
    ]  # fmt: skip
    for done, argv in steps:
        if not done.exists():
            t0 = time.perf_counter()
            print(f"goodput {' '.join(argv[:3])} ...", flush=True)
            subprocess.run([*GOODPUT, *argv], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
            print(f"  {time.perf_counter() - t0:.0f} s", flush=True)
    if not (BIG_HOME / "parquet" / "interruptions").exists():
        build_big(BIG_HOME)


def build_big(home: Path) -> None:
    """``goodput build`` of ``home``: its wall time and peak RSS (the build process's, or its
    largest child's), with a TARGET on the RSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*GOODPUT, "--home", str(home), "build"], cwd=REPO, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall, gb = time.perf_counter() - t0, usage.ru_maxrss / 2**20
    print(f"goodput build of {home.name}: {wall:.0f} s, peak RSS {gb:.2f} GB", flush=True)
    target(f"build of {home.name}: peak RSS < {BUILD_RSS_LIMIT_GB:g} GB", gb < BUILD_RSS_LIMIT_GB,
           f"{gb:.2f} GB")  # fmt: skip
    if proc.returncode:
        raise SystemExit(f"goodput build of {home} exited {proc.returncode}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, default=DEMO_HOME, help="a demo-built home")
    ap.add_argument("--big-home", type=Path, default=BIG_HOME, help="a built 2,048-node home")
    ap.add_argument("--make-big", action="store_true", help="make the 2,048-node home if missing")
    ap.add_argument(
        "--build-big", action="store_true", help="build the 2,048-node home again, measured"
    )
    ap.add_argument("--runs", type=int, default=3, help="fresh processes per command (default 3)")
    args = ap.parse_args()
    if not (args.home / "warehouse.duckdb").exists():
        print(f"building {args.home} with `goodput demo` ...", flush=True)
        subprocess.run(
            [*GOODPUT, "--home", str(args.home), "demo"],
            cwd=REPO,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    scoped_commands(args.home, args.runs, DEMO_LIMIT_S)
    startup(args.home, args.runs)
    if args.make_big and args.big_home == BIG_HOME:
        make_big()
    if args.build_big:
        build_big(args.big_home)
    if (args.big_home / "parquet" / "interruptions").exists():
        scoped_commands(args.big_home, args.runs, BIG_LIMIT_S)
    else:
        print(
            f"no 2,048-node home at {args.big_home}: its targets were not run (--make-big makes "
            "one: simulate, ingest and build, tens of minutes on 2 cores)"
        )
    return None


if __name__ == "__main__":
    run_benchmark(main)
