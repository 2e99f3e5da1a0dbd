"""End to end at fleet scale: ``goodput ingest`` and ``goodput build`` on simulated fleets of
several sizes, with the peak memory of every step, next to DuckDB scanning the same files.

    python -m benchmarks.bench_fleet_scale [--nodes 128 512 2048] [--skip-steps] [--reuse-ingest]
                                           [--ingest-only]

Per size N (default 128, 512 and 2048, the Llama 3 fleet: 48-75 min in all on 2 idle cores,
plus 8 min to simulate the 2,048-node fleet the first time):

1. A simulated fleet, ``goodput simulate --out benchmarks/out/fleet-N --nodes N --gpus-per-node 8
   --days 54 --seed 3 --fault-scale 1 --scrape-interval 1h``, written once and reused (its
   ``ground_truth.json`` marks it complete).
2. ``goodput ingest`` then ``goodput build`` into a fresh warehouse (benchmarks/out/home-N), each
   a child process: wall time, rows/s, peak RSS (``os.wait4`` rusage of that child alone), and
   the CPU of the ingest's committing process alone (its parsers are child processes).
3. The heavy build steps again, one child process each, for their own peak RSS and wall time:
   gpu_hourly (every date), dcgm counter events (every day), GPU replacements, component lifetimes.
4. DuckDB itself on the same files, in one child: ``read_csv`` of every ``.prom.gz`` as lines
   with a regex extracting name, labels, value and timestamp; ``read_csv`` of the sacct dump;
   every other source file read as lines. Ingest wall / this wall is the DuckDB-scan ratio.
   ``--reuse-ingest``: steps 2 (ingest) and 4 (scan) are measured once per size and kept in
   ``home-N/ingest_result.json``; a later run resets only the derived tables of that warehouse
   and measures the build again (the build code changes more often than the ingest code).
5. The daily run: the ``build`` job of the Dagster definitions launched for one
   ``telemetry_days`` partition, in a child process. Day 1: a fresh warehouse holding the first
   day's DCGM scrapes and every other source. Day 54: the full warehouse of step 2 with the last
   day's daily tables removed (as after ingesting that day). Day 54 / day 1 (wall, peak RSS)
   says whether a daily run costs O(one day) or grows with the history.

``--ingest-only``: steps 1, 2 (ingest) and 4 only, with their TARGET lines (no build).

CPU seconds (user + system, from the same rusage) are printed beside wall times: on a shared
machine they are the steadier measure. TARGET lines: peak RSS of ingest and of build < 4 GB at
every size and within 1.5x from the smallest to the largest size run; ingest within 3x of the
DuckDB scan at every size (wall and CPU); the daily partition on the last day within 2x of the
first day (wall and peak RSS).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.simulation import source_folders

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
GB = 1024**3
RSS_LIMIT = 4 * GB
RSS_GROWTH = 1.5
SCAN_RATIO = 3.0
DAILY_RATIO = 2.0

# the build job for one telemetry_days partition, as the daily schedule launches it
# (argv[1] = warehouse home, argv[2] = the day)
DAILY_RUN = """
import os, sys, warnings
os.environ["GOODPUT_HOME"] = sys.argv[1]
from pipelines.assets import register_days
from pipelines.definitions import defs
from pipelines.run import instance_for
from warehouse.store import Warehouse
with warnings.catch_warnings(), instance_for(sys.argv[1]) as instance:
    warnings.simplefilter("ignore")
    register_days(instance, Warehouse(sys.argv[1]))  # as the ingest asset does
    job = defs.resolve_job_def("build")
    result = job.execute_in_process(
        instance=instance, partition_key=sys.argv[2], raise_on_error=False
    )
print("success" if result.success else "failed")
sys.exit(0 if result.success else 1)
"""

# ``goodput ingest`` (argv[1] = home, argv[2] = fleet: its source folders, not the simulator's
# ground_truth.json), then the CPU of this process alone: the one that commits (parsers are its
# child processes), the serial part of an ingest
INGEST_RUN = """
import json, resource, sys
from pathlib import Path
from pipelines.cli import main
from sample_data.simulation import source_folders
sources = [str(p) for p in source_folders(sys.argv[2])]
status = main(["ingest", "--home", sys.argv[1], *sources])
own = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"committer_cpu_s": own.ru_utime + own.ru_stime}))
sys.exit(status)
"""

# each heavy build step alone, in a child process of its own (argv[1] = warehouse home)
STEPS = {
    "gpu_hourly": (
        "from analysis.telemetry import rollups; from datetime import date; wh = W(sys.argv[1]); "
        "rollups.refresh_gpu_hourly(wh, [date.fromisoformat(d) for d in "
        "wh.partition_mtimes('gpu_samples')], force=True)"
    ),
    # every day's counter events again (a build from scratch; a daily run computes one day)
    "dcgm_counter_events": (
        "from analysis.telemetry import counters; wh = W(sys.argv[1]); wh.drop_pieces('hw_events', "
        "counters.COUNTER_SOURCE, wh.piece_mtimes('hw_events', counters.COUNTER_SOURCE)); "
        "counters.refresh_counter_events(wh)"
    ),
    "telemetry_gpu_replacements": (
        "from analysis.telemetry import replacements; "
        "replacements.refresh_gpu_replacements(W(sys.argv[1]))"
    ),
    "component_lifetimes": (
        "from analysis import lifetimes; lifetimes.refresh_component_lifetimes(W(sys.argv[1]))"
    ),
}

# DuckDB reading the raw files: the floor an ingest is compared with
SCAN_SQL = r"""
SELECT count(*) AS n, count(m.name) AS samples FROM (
    SELECT regexp_extract(
               line, '^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$',
               ['name', 'labels', 'value', 'ts']) AS m
    FROM read_csv($prom, columns = {'line': 'VARCHAR'}, delim = $delim, quote = '', escape = '',
                  header = false, auto_detect = false, compression = 'gzip')
    WHERE NOT starts_with(line, '#')
)
"""


def run_child(argv: list[str], log: Path) -> tuple[float, float, int, int]:
    """(wall seconds, CPU seconds, peak RSS bytes, exit status) of one child process (rusage
    of that child and its own children alone), output to ``log``."""
    t0 = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status_, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status_)
    cpu = usage.ru_utime + usage.ru_stime
    return time.perf_counter() - t0, cpu, usage.ru_maxrss * 1024, proc.returncode


def ensure_fleet(nodes: int) -> Path:
    fleet = OUT / f"fleet-{nodes}"
    if (fleet / "ground_truth.json").exists():
        return fleet
    shutil.rmtree(fleet, ignore_errors=True)
    print(f"simulating {nodes} nodes -> {fleet} (cached for the next run)", flush=True)
    argv = GOODPUT + [
        "simulate", "--out", str(fleet), "--nodes", str(nodes), "--gpus-per-node", "8",
        "--days", "54", "--seed", "3", "--fault-scale", "1", "--scrape-interval", "1h",
    ]  # fmt: skip
    subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return fleet


def warehouse_rows(home: Path) -> int:
    """Rows in every table the ingest writes (the quarantine included)."""
    import duckdb

    from warehouse.schemas import TABLES

    total = 0
    with duckdb.connect() as con:
        for name, spec in TABLES.items():
            if spec.kind != "ingest" or not any((home / "parquet" / name).rglob("*.parquet")):
                continue
            glob = str(home / "parquet" / name / "**" / "*.parquet")
            total += con.sql(f"SELECT count(*) FROM read_parquet('{glob}')").fetchall()[0][0]
    return total


def scan_script(fleet: Path) -> str:
    """A child-process script: DuckDB reads every file of ``fleet``; prints JSON counts."""
    return f"""
import duckdb, glob, json, os
fleet = {str(fleet)!r}
prom = sorted(glob.glob(fleet + '/**/*.prom.gz', recursive=True))
sacct = sorted(glob.glob(fleet + '/**/sacct.txt', recursive=True))
other = sorted(p for p in glob.glob(fleet + '/**/*', recursive=True)
               if os.path.isfile(p) and p not in prom and p not in sacct
               and not p.endswith('.json'))
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
out = {{}}
out['prom_lines'], out['samples'] = con.execute(
    {SCAN_SQL!r}, {{'prom': prom, 'delim': chr(1)}}).fetchall()[0]
out['sacct_rows'] = con.execute(
    "SELECT count(*) FROM read_csv($f, delim = '|', header = true, all_varchar = true)",
    {{'f': sacct}}).fetchall()[0][0] if sacct else 0
out['other_lines'] = con.execute(
    "SELECT count(*) FROM read_csv($f, columns = {{'line': 'VARCHAR'}}, delim = chr(1), "
    "quote = '', escape = '', header = false, auto_detect = false, null_padding = true)",
    {{'f': other}}).fetchall()[0][0] if other else 0
print(json.dumps(out))
"""


def reset_derived(home: Path) -> None:
    """Remove everything ``build`` writes (derived tables, derived partitions of ingest tables,
    the catalog), keeping what ``ingest`` wrote: the warehouse as right after the ingest."""
    from analysis.telemetry.counters import COUNTER_SOURCE
    from analysis.telemetry.replacements import REPLACEMENT_SOURCE
    from warehouse.schemas import TABLES

    for name, spec in TABLES.items():
        if spec.kind != "ingest":
            shutil.rmtree(home / "parquet" / name, ignore_errors=True)
    shutil.rmtree(home / "parquet" / "hw_events" / f"source={COUNTER_SOURCE}", ignore_errors=True)
    shutil.rmtree(
        home / "parquet" / "component_history" / f"source={REPLACEMENT_SOURCE}", ignore_errors=True
    )
    (home / "warehouse.duckdb").unlink(missing_ok=True)


def measure_ingest(nodes: int, fleet: Path, home: Path, logs: Path, reuse: bool) -> dict:
    """Ingest of the whole fleet and the DuckDB scan of the same files (kept for ``reuse``)."""
    saved = home / "ingest_result.json"
    if reuse and saved.exists():
        res = json.loads(saved.read_text())
        reset_derived(home)
        print(
            f"[{nodes} nodes] ingest and scan as measured before ({saved}); derived tables reset",
            flush=True,
        )
        return res
    shutil.rmtree(home, ignore_errors=True)
    files = sum(1 for p in fleet.rglob("*") if p.is_file())
    res: dict = {"files": files}
    wall, cpu, rss, rc = run_child(
        [sys.executable, "-c", INGEST_RUN, str(home), str(fleet)], logs / "ingest.log"
    )
    if rc:
        raise SystemExit(f"ingest of {fleet} failed ({rc}); see {logs / 'ingest.log'}")
    rows = warehouse_rows(home)
    committer = json.loads((logs / "ingest.log").read_text().strip().splitlines()[-1])
    res["ingest"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss, "rows": rows, **committer}
    wall, cpu, rss, rc = run_child(
        [sys.executable, "-c", scan_script(fleet)], logs / "duckdb_scan.log"
    )
    if rc:
        raise SystemExit(f"DuckDB scan failed ({rc}); see {logs / 'duckdb_scan.log'}")
    counts = json.loads((logs / "duckdb_scan.log").read_text().strip().splitlines()[-1])
    res["scan"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss, **counts}
    saved.write_text(json.dumps(res, indent=2))
    return res


def daily_run(home: Path, day: str, log: Path) -> dict:
    wall, cpu, rss, rc = run_child([sys.executable, "-c", DAILY_RUN, str(home), day], log)
    if rc:
        raise SystemExit(f"daily build of {day} failed ({rc}); see {log}")
    return {"day": day, "wall_s": wall, "cpu_s": cpu, "rss": rss}


def measure_daily(nodes: int, fleet: Path, home: Path, logs: Path) -> dict:
    """The build job for one day's partition: the first day in a warehouse holding that day of
    DCGM scrapes (and every other source), the last day in the full warehouse ``home`` (built)
    after its daily tables are removed, as if that day had just been ingested."""
    from analysis.telemetry.rollups import DAILY_OUTPUTS
    from warehouse.store import Warehouse

    days = sorted(p.name.removesuffix(".prom.gz") for p in (fleet / "dcgm").glob("*/*.prom.gz"))
    first, last = days[0], days[-1]
    one = OUT / f"home-{nodes}-day1"
    shutil.rmtree(one, ignore_errors=True)
    inputs = [str(p) for p in source_folders(fleet) if p.name != "dcgm"]
    inputs += [str(p) for p in sorted((fleet / "dcgm").glob(f"*/{first}.prom.gz"))]
    _, _, _, rc = run_child(
        GOODPUT + ["ingest", "--home", str(one), *inputs], logs / "ingest_day1.log"
    )
    if rc:
        raise SystemExit(f"ingest of day 1 failed ({rc}); see {logs / 'ingest_day1.log'}")
    day1 = daily_run(one, first, logs / "daily_day1.log")
    wh = Warehouse(home)
    for table in DAILY_OUTPUTS:
        wh.drop_partition(table, last)
    dayn = daily_run(home, last, logs / "daily_last.log")
    for label, r in (("day 1", day1), (f"day {len(set(days))}", dayn)):
        print(f"[{nodes} nodes] daily build partition {r['day']} ({label}): {r['wall_s']:.1f} s, "
              f"{r['cpu_s']:.0f} CPU s, peak RSS {r['rss'] / GB:.2f} GB", flush=True)  # fmt: skip
    return {"first": day1, "last": dayn, "n_days": len(set(days))}


def measure(
    nodes: int, steps: bool, reuse: bool = False, daily: bool = True, build: bool = True
) -> dict:
    fleet = ensure_fleet(nodes)
    home = OUT / f"home-{nodes}"
    logs = OUT / f"logs-{nodes}"
    logs.mkdir(parents=True, exist_ok=True)
    res: dict = {"nodes": nodes, **measure_ingest(nodes, fleet, home, logs, reuse)}
    files, i = res["files"], res["ingest"]
    rows = i["rows"]
    print(
        f"[{nodes} nodes] ingest: {files:,} files, {rows:,} rows in {i['wall_s']:.1f} s, "
        f"{i['cpu_s']:.0f} CPU s ({rows / i['wall_s']:,.0f} rows/s), peak RSS {i['rss'] / GB:.2f} "
        "GB",
        flush=True,
    )
    if "committer_cpu_s" in i:  # the serial part: what one more parser core cannot speed up
        print(f"[{nodes} nodes] ingest: the committing process {i['committer_cpu_s']:.0f} CPU s, "
              f"{i['committer_cpu_s'] / rows * 1e6:.2f} CPU-us a row", flush=True)  # fmt: skip
    if not build:
        return _scan_ratio(nodes, res)

    wall, cpu, rss, rc = run_child(GOODPUT + ["build", "--home", str(home)], logs / "build.log")
    if rc:
        raise SystemExit(f"build failed ({rc}); see {logs / 'build.log'}")
    res["build"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss}
    print(
        f"[{nodes} nodes] build: {wall:.1f} s, {cpu:.0f} CPU s ({rows / wall:,.0f} ingested "
        f"rows/s), peak RSS {rss / GB:.2f} GB",
        flush=True,
    )

    if steps:
        prelude = "import sys; from warehouse.store import Warehouse as W; "
        for name, code in STEPS.items():
            argv = [sys.executable, "-c", prelude + code, str(home)]
            wall, cpu, rss, rc = run_child(argv, logs / f"{name}.log")
            if rc:
                raise SystemExit(f"step {name} failed ({rc}); see {logs / (name + '.log')}")
            res[name] = {"wall_s": wall, "cpu_s": cpu, "rss": rss}
            print(
                f"[{nodes} nodes]   step {name:28s} {wall:6.1f} s, {cpu:6.1f} CPU s, peak RSS "
                f"{rss / GB:.2f} GB",
                flush=True,
            )
    if daily:
        res["daily"] = measure_daily(nodes, fleet, home, logs)
    return _scan_ratio(nodes, res)


def _scan_ratio(nodes: int, res: dict) -> dict:
    i, scan = res["ingest"], res["scan"]
    res["scan_ratio"] = i["wall_s"] / scan["wall_s"]
    res["scan_cpu_ratio"] = i["cpu_s"] / scan["cpu_s"]
    print(
        f"[{nodes} nodes] DuckDB scan of the same files: {scan['wall_s']:.1f} s, "
        f"{scan['cpu_s']:.0f} CPU s ({scan['samples']:,} samples, {scan['sacct_rows']:,} sacct "
        f"rows, {scan['other_lines']:,} other lines), peak RSS {scan['rss'] / GB:.2f} GB; ingest "
        f"/ scan = {res['scan_ratio']:.1f}x wall, {res['scan_cpu_ratio']:.1f}x CPU",
        flush=True,
    )
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[128, 512, 2048])
    ap.add_argument(
        "--skip-steps",
        action="store_true",
        help="only ingest, build, the daily run and the DuckDB scan",
    )
    ap.add_argument("--skip-daily", action="store_true", help="no daily partition runs")
    ap.add_argument(
        "--ingest-only", action="store_true", help="only the ingest and the DuckDB scan (no build)"
    )
    ap.add_argument(
        "--reuse-ingest",
        action="store_true",
        help=(
            "reuse the ingest and scan measured before for a size (home-N/ingest_result.json); "
            "measure the build again"
        ),
    )
    args = ap.parse_args()
    sizes = sorted(set(args.nodes))
    results = [
        measure(
            n,
            not args.skip_steps,
            args.reuse_ingest,
            not (args.skip_daily or args.ingest_only),
            not args.ingest_only,
        )
        for n in sizes
    ]
    (OUT / "fleet_scale.json").write_text(json.dumps(results, indent=2))

    print(
        f"\n{'nodes':>6} {'GPUs':>7} {'rows':>12} {'ingest s':>9} {'rows/s':>10} {'ingest GB':>9} "
        f"{'build s':>8} {'build GB':>8} {'scan s':>7} {'ratio':>6}"
    )
    for r in results:
        i, b, s = (
            r["ingest"],
            r.get("build", {"wall_s": float("nan"), "rss": float("nan")}),
            r["scan"],
        )
        print(f"{r['nodes']:>6} {r['nodes'] * 8:>7} {i['rows']:>12,} {i['wall_s']:>9.1f} "
              f"{i['rows'] / i['wall_s']:>10,.0f} {i['rss'] / GB:>9.2f} {b['wall_s']:>8.1f} "
              f"{b['rss'] / GB:>8.2f} {s['wall_s']:>7.1f} {r['scan_ratio']:>6.1f}")  # fmt: skip

    first, last = results[0], results[-1]
    for step in ("ingest",) if args.ingest_only else ("ingest", "build"):
        peak = max(r[step]["rss"] for r in results)
        target(f"{step} peak RSS < 4 GB at every size", peak < RSS_LIMIT, f"max {peak / GB:.2f} GB")
        if len(results) > 1:
            growth = last[step]["rss"] / first[step]["rss"]
            target(
                f"{step} peak RSS within {RSS_GROWTH}x from {first['nodes']} to {last['nodes']} "
                "nodes",
                growth <= RSS_GROWTH,
                f"{first[step]['rss'] / GB:.2f} -> {last[step]['rss'] / GB:.2f} GB, {growth:.2f}x",
            )
    for key, what in (("scan_ratio", "wall"), ("scan_cpu_ratio", "CPU")):
        worst = max(results, key=lambda r: r[key])
        target(
            f"ingest within {SCAN_RATIO:g}x of the DuckDB scan ({what} time) at every size",
            worst[key] <= SCAN_RATIO,
            f"worst {worst[key]:.1f}x at {worst['nodes']} nodes",
        )
    for r in results:
        if "daily" not in r:
            continue
        d = r["daily"]
        for key, what, unit in (("wall_s", "wall time", 1.0), ("rss", "peak RSS", GB)):
            ratio = d["last"][key] / d["first"][key]
            target(
                f"daily build partition, day {d['n_days']} within {DAILY_RATIO:g}x of day 1 "
                f"({what}), {r['nodes']} nodes",
                ratio <= DAILY_RATIO,
                f"{d['first'][key] / unit:.2f} -> {d['last'][key] / unit:.2f} "
                f"{'s' if unit == 1.0 else 'GB'}, {ratio:.2f}x",
            )


if __name__ == "__main__":
    run_benchmark(main)
