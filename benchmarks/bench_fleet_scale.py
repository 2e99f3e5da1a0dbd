"""End to end at fleet scale: ``goodput ingest`` and ``goodput build`` on simulated fleets of
several sizes, with the peak memory of every step, next to DuckDB scanning the same files.

    python -m benchmarks.bench_fleet_scale [--nodes 128 512] [--skip-steps]

Per size N (default 128 and 512; 2048 is the Llama 3 fleet: not run yet, about 40 min of ingest
and 25 min of build on 2 idle cores going by the CPU times at 128 nodes):

1. A simulated fleet, ``goodput simulate --out benchmarks/out/fleet-N --nodes N --gpus-per-node 8
   --days 54 --seed 3 --fault-scale 1 --scrape-interval 1h``, written once and reused (its
   ``ground_truth.json`` marks it complete).
2. ``goodput ingest`` then ``goodput build`` into a fresh warehouse (benchmarks/out/home-N), each
   a child process: wall time, rows/s, peak RSS (``os.wait4`` rusage of that child alone).
3. The heavy build steps again, one child process each, for their own peak RSS and wall time:
   gpu_hourly (every date), dcgm counter events, GPU replacements, component lifetimes.
4. DuckDB itself on the same files, in one child: ``read_csv`` of every ``.prom.gz`` as lines
   with a regex extracting name, labels, value and timestamp; ``read_csv`` of the sacct dump;
   every other source file read as lines. Ingest wall / this wall is the DuckDB-scan ratio.

CPU seconds (user + system, from the same rusage) are printed beside wall times: on a shared
machine they are the steadier measure. TARGET lines: peak RSS of ingest and of build < 4 GB at every size and within 1.5x from the
smallest to the largest size run; ingest within 3x of the DuckDB scan at every size.
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

from benchmarks.targets import status, target

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
GB = 1024**3
RSS_LIMIT = 4 * GB
RSS_GROWTH = 1.5
SCAN_RATIO = 3.0

# each heavy build step alone, in a child process of its own (argv[1] = warehouse home)
STEPS = {
    "gpu_hourly": (
        "from analysis import telemetry; from datetime import date; "
        "wh = W(sys.argv[1]); "
        "telemetry.refresh_gpu_hourly(wh, [date.fromisoformat(d) for d in wh.partition_mtimes('gpu_samples')], force=True)"
    ),
    "dcgm_counter_events": "from analysis import telemetry; telemetry.refresh_counter_events(W(sys.argv[1]))",
    "telemetry_gpu_replacements": "from analysis import telemetry; telemetry.refresh_gpu_replacements(W(sys.argv[1]))",
    "component_lifetimes": "from analysis import lifetimes; lifetimes.refresh_component_lifetimes(W(sys.argv[1]))",
}

# DuckDB reading the raw files: the floor an ingest is compared with
SCAN_SQL = r"""
SELECT count(*) AS n, count(m.name) AS samples FROM (
    SELECT regexp_extract(line, '^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)(?:\s+(-?\d+))?\s*$',
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
        "simulate", "--out", str(fleet), "--nodes", str(nodes), "--gpus-per-node", "8", "--days", "54",
        "--seed", "3", "--fault-scale", "1", "--scrape-interval", "1h",
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
               if os.path.isfile(p) and p not in prom and p not in sacct and not p.endswith('.json'))
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
out = {{}}
out['prom_lines'], out['samples'] = con.execute({SCAN_SQL!r}, {{'prom': prom, 'delim': chr(1)}}).fetchall()[0]
out['sacct_rows'] = con.execute("SELECT count(*) FROM read_csv($f, delim = '|', header = true, all_varchar = true)",
                                {{'f': sacct}}).fetchall()[0][0] if sacct else 0
out['other_lines'] = con.execute("SELECT count(*) FROM read_csv($f, columns = {{'line': 'VARCHAR'}}, delim = chr(1), "
                                 "quote = '', escape = '', header = false, auto_detect = false, null_padding = true)",
                                 {{'f': other}}).fetchall()[0][0] if other else 0
print(json.dumps(out))
"""


def measure(nodes: int, steps: bool) -> dict:
    fleet = ensure_fleet(nodes)
    home = OUT / f"home-{nodes}"
    shutil.rmtree(home, ignore_errors=True)
    logs = OUT / f"logs-{nodes}"
    logs.mkdir(parents=True, exist_ok=True)
    files = sum(1 for p in fleet.rglob("*") if p.is_file())
    res: dict = {"nodes": nodes, "files": files}

    wall, cpu, rss, rc = run_child(
        GOODPUT + ["ingest", "--home", str(home), str(fleet)], logs / "ingest.log"
    )
    if rc:
        raise SystemExit(f"ingest of {fleet} failed ({rc}); see {logs / 'ingest.log'}")
    rows = warehouse_rows(home)
    res["ingest"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss, "rows": rows}
    print(f"[{nodes} nodes] ingest: {files:,} files, {rows:,} rows in {wall:.1f} s, {cpu:.0f} CPU s "
          f"({rows / wall:,.0f} rows/s), peak RSS {rss / GB:.2f} GB", flush=True)  # fmt: skip

    wall, cpu, rss, rc = run_child(GOODPUT + ["build", "--home", str(home)], logs / "build.log")
    if rc:
        raise SystemExit(f"build failed ({rc}); see {logs / 'build.log'}")
    res["build"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss}
    print(f"[{nodes} nodes] build: {wall:.1f} s, {cpu:.0f} CPU s ({rows / wall:,.0f} ingested rows/s), "
          f"peak RSS {rss / GB:.2f} GB", flush=True)  # fmt: skip

    if steps:
        prelude = "import sys; from warehouse.store import Warehouse as W; "
        for name, code in STEPS.items():
            argv = [sys.executable, "-c", prelude + code, str(home)]
            wall, cpu, rss, rc = run_child(argv, logs / f"{name}.log")
            if rc:
                raise SystemExit(f"step {name} failed ({rc}); see {logs / (name + '.log')}")
            res[name] = {"wall_s": wall, "cpu_s": cpu, "rss": rss}
            print(
                f"[{nodes} nodes]   step {name:28s} {wall:6.1f} s, {cpu:6.1f} CPU s, peak RSS {rss / GB:.2f} GB",
                flush=True,
            )

    wall, cpu, rss, rc = run_child(
        [sys.executable, "-c", scan_script(fleet)], logs / "duckdb_scan.log"
    )
    if rc:
        raise SystemExit(f"DuckDB scan failed ({rc}); see {logs / 'duckdb_scan.log'}")
    counts = json.loads((logs / "duckdb_scan.log").read_text().strip().splitlines()[-1])
    res["scan"] = {"wall_s": wall, "cpu_s": cpu, "rss": rss, **counts}
    ratio = res["ingest"]["wall_s"] / wall
    res["scan_ratio"] = ratio
    print(f"[{nodes} nodes] DuckDB scan of the same files: {wall:.1f} s, {cpu:.0f} CPU s ({counts['samples']:,} "
          f"samples, {counts['sacct_rows']:,} sacct rows, {counts['other_lines']:,} other lines), peak RSS "
          f"{rss / GB:.2f} GB; ingest / scan = {ratio:.1f}x wall, {res['ingest']['cpu_s'] / cpu:.1f}x CPU",
          flush=True)  # fmt: skip
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[128, 512])
    ap.add_argument(
        "--skip-steps", action="store_true", help="only ingest, build and the DuckDB scan"
    )
    args = ap.parse_args()
    sizes = sorted(set(args.nodes))
    results = [measure(n, not args.skip_steps) for n in sizes]
    (OUT / "fleet_scale.json").write_text(json.dumps(results, indent=2))

    print(f"\n{'nodes':>6} {'GPUs':>7} {'rows':>12} {'ingest s':>9} {'rows/s':>10} {'ingest GB':>9} "
          f"{'build s':>8} {'build GB':>8} {'scan s':>7} {'ratio':>6}")  # fmt: skip
    for r in results:
        i, b, s = r["ingest"], r["build"], r["scan"]
        print(f"{r['nodes']:>6} {r['nodes'] * 8:>7} {i['rows']:>12,} {i['wall_s']:>9.1f} "
              f"{i['rows'] / i['wall_s']:>10,.0f} {i['rss'] / GB:>9.2f} {b['wall_s']:>8.1f} "
              f"{b['rss'] / GB:>8.2f} {s['wall_s']:>7.1f} {r['scan_ratio']:>6.1f}")  # fmt: skip

    first, last = results[0], results[-1]
    for step in ("ingest", "build"):
        peak = max(r[step]["rss"] for r in results)
        target(f"{step} peak RSS < 4 GB at every size", peak < RSS_LIMIT, f"max {peak / GB:.2f} GB")
        if len(results) > 1:
            growth = last[step]["rss"] / first[step]["rss"]
            target(
                f"{step} peak RSS within {RSS_GROWTH}x from {first['nodes']} to {last['nodes']} nodes",
                growth <= RSS_GROWTH,
                f"{first[step]['rss'] / GB:.2f} -> {last[step]['rss'] / GB:.2f} GB, {growth:.2f}x",
            )
    worst = max(results, key=lambda r: r["scan_ratio"])
    target(
        f"ingest within {SCAN_RATIO:g}x of the DuckDB scan at every size",
        worst["scan_ratio"] <= SCAN_RATIO,
        f"worst {worst['scan_ratio']:.1f}x at {worst['nodes']} nodes",
    )
    return status()


if __name__ == "__main__":
    sys.exit(main())
