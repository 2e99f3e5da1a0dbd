"""sacct ingest throughput on a 1M-line dump, next to DuckDB's read_csv of the same file.

    .venv/bin/python -m benchmarks.bench_sacct [--lines 1000000] [--runs 3]

DuckDB's CSV reader only splits fields; our parser also folds steps into jobs, expands
hostlists, normalizes states and times and numbers attempts. Target: within 3x of DuckDB.
Both run ``--runs`` times after a warm-up and the medians are compared; CPU seconds (every
thread of this process: DuckDB's and Polars' alike) and the load average are printed beside the
wall times, the steadier measure on a shared machine.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from ingest.formats.sacct import parse
from ingest.runner import ingest_paths
from warehouse.store import Warehouse

HEADER = (
    "JobID|JobIDRaw|JobName|Partition|Account|User|Submit|Start|End|Elapsed|State|ExitCode|"
    "NNodes|AllocCPUS|AllocTRES|NodeList|Cluster"
)


def make_dump(path: Path, lines: int, seed: int = 0) -> None:
    """A realistic dump: each job line followed by .batch, .extern and .0 steps."""
    rng = np.random.default_rng(seed)
    jobs = lines // 4
    ids = np.arange(1_000_000, 1_000_000 + jobs)
    start = 1_767_225_600 + np.sort(rng.integers(0, 60 * 86400, jobs))
    dur = rng.integers(60, 86400, jobs)
    nodes = rng.integers(1, 9, jobs)
    first = rng.integers(1, 900, jobs)
    states = rng.choice(
        ["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED by 1001", "TIMEOUT"],
        jobs,
        p=[0.8, 0.08, 0.02, 0.07, 0.03],
    )
    df = pl.DataFrame(
        {"id": ids, "start": start, "dur": dur, "nodes": nodes, "first": first, "state": states}
    )
    df = df.with_columns(
        s=pl.from_epoch("start").dt.strftime("%Y-%m-%dT%H:%M:%S"),
        e=pl.from_epoch(pl.col("start") + pl.col("dur")).dt.strftime("%Y-%m-%dT%H:%M:%S"),
        el=pl.format(
            "{}:{}:{}",
            (pl.col("dur") // 3600).cast(pl.Utf8).str.zfill(2),
            (pl.col("dur") % 3600 // 60).cast(pl.Utf8).str.zfill(2),
            (pl.col("dur") % 60).cast(pl.Utf8).str.zfill(2),
        ),
        nl=pl.format(
            "gpu-node-[{}-{}]",
            pl.col("first").cast(pl.Utf8).str.zfill(4),
            (pl.col("first") + pl.col("nodes") - 1).cast(pl.Utf8).str.zfill(4),
        ),
    )
    job = df.select(
        line=pl.format(
            "{}|{}|train|gpu|acct|user|{}|{}|{}|{}|{}|0:0|{}|{}|billing=1,cpu={},gres/gpu={},node={}|{}|fleet",
            "id",
            "id",
            "s",
            "s",
            "e",
            "el",
            "state",
            "nodes",
            pl.col("nodes") * 96,
            pl.col("nodes") * 96,
            pl.col("nodes") * 8,
            "nodes",
            "nl",
        ),
        k=pl.lit(0),
        id="id",
    )
    steps = [
        df.select(
            line=pl.format(
                "{}.{}|{}.{}|{}||acct|user|{}|{}|{}|{}|COMPLETED|0:0|1|96|cpu=96|gpu-node-0001|fleet",
                "id",
                pl.lit(step),
                "id",
                pl.lit(step),
                pl.lit(step),
                "s",
                "s",
                "e",
                "el",
            ),
            k=pl.lit(i + 1),
            id="id",
        )
        for i, step in enumerate(["batch", "extern", "0"])
    ]
    body = pl.concat([job, *steps]).sort("id", "k")["line"]
    path.write_text(HEADER + "\n" + "\n".join(body.to_list()) + "\n")


def main() -> None:
    args = options(lines=1_000_000, runs=3)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sacct.txt"
        make_dump(path, args.lines)
        data = path.read_bytes()
        n_lines = data.count(b"\n") - 1
        print(f"dump: {n_lines:,} lines, {len(data) / 1e6:.0f} MB")

        def duckdb_read():
            with duckdb.connect() as con:
                return con.execute(
                    f"SELECT * FROM read_csv('{path}', delim='|', header=true, all_varchar=true)"
                ).to_arrow_table()

        def ours():
            return parse(data, ParseContext(path=str(path)))

        rows, res = duckdb_read(), ours()  # warm-up: imports, page cache
        (duck, duck_cpu), (mine, mine_cpu) = _timed(duckdb_read, args.runs), _timed(ours, args.runs)
        print(
            f"median of {args.runs} runs, load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores"
        )
        print(
            f"duckdb read_csv:        {duck:6.2f} s, {duck_cpu:6.2f} CPU s  "
            f"{len(rows) / duck:12,.0f} lines/s"
        )
        print(
            f"goodput sacct parse:    {mine:6.2f} s, {mine_cpu:6.2f} CPU s  "
            f"{n_lines / mine:12,.0f} lines/s "
            f"({res.tables['job_attempts'].height:,} attempts)  ratio {mine / duck:.2f}x wall, "
            f"{mine_cpu / duck_cpu:.2f}x CPU of duckdb"
        )

        t = time.perf_counter()
        ingest_paths(Warehouse(Path(tmp) / "home"), [path])
        full = time.perf_counter() - t
        print(
            f"goodput ingest (+parquet, manifest): {full:6.2f} s  {n_lines / full:12,.0f} "
            f"lines/s  ratio {full / duck:.2f}x"
        )
        target("sacct parse within 3x of duckdb read_csv", mine <= 3 * duck, f"{mine / duck:.2f}x")


def _timed(fn, runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` calls."""
    walls, cpus = [], []
    for _ in range(runs):
        t, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


if __name__ == "__main__":
    run_benchmark(main)
