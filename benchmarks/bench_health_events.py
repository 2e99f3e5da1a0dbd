"""A published-style fault trace read as health events: ingest and pairing time.

    .venv/bin/python -m benchmarks.bench_health_events [--servers 300] [--days 365] [--scale 10]

Writes ``sample_data.fault_trace`` (``--servers`` servers over ``--days`` days, nested causes,
times in days after its start) as JSON lines under /tmp, then times ``goodput ingest``'s path
(``ingest.runner.ingest_paths`` into a fresh warehouse, with ``--map`` and ``--time-origin`` as
the command line passes them) and the build's pairing step
(``analysis.health_events.refresh_health_failures``), each with its CPU seconds. Target: the
trace of a few hundred servers over a year is ingested and paired in < 10 s on 2 cores. A trace
``--scale`` times as large (servers) is timed too, for how the two steps grow.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from sample_data.fault_trace import ORIGIN
from sample_data.fault_trace import fault_trace

MAP = {"cause": "fault_type.Level", "component": "fault_type.Class", "sub_cause": "fault_type.Desc"}
LIMIT_S = 10.0


def timed(fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def measure(servers: int, days: float, root: Path) -> tuple[float, float]:
    """(ingest s, pairing s) of one trace; prints its sizes and both steps."""
    from analysis.health_events import refresh_health_failures
    from ingest.runner import ingest_paths
    from warehouse.store import Warehouse

    trace = fault_trace(servers=servers, days=days, seed=44)
    path = root / f"trace-{servers}.jsonl"
    path.write_bytes(trace.ndjson())
    wh = Warehouse(root / f"home-{servers}")
    ctx = ParseContext(column_map=MAP, options={"time_origin": ORIGIN, "time_unit": "days"})
    [report], ingest_s, ingest_cpu = timed(lambda: ingest_paths(wh, [path], "auto", ctx))
    counts, pair_s, pair_cpu = timed(lambda: refresh_health_failures(wh))
    print(
        f"{servers:,} servers x {days:g} days: {trace.records.height:,} events "
        f"({path.stat().st_size / 2**20:.1f} MiB), {counts['failures']:,} failures "
        f"({counts['open']} open); ingest {ingest_s:.2f} s ({ingest_cpu:.2f} CPU-s, "
        f"{report.rows_ok:,} rows, {report.rows_quarantined} quarantined), pairing "
        f"{pair_s:.2f} s ({pair_cpu:.2f} CPU-s)"
    )
    assert report.rows_quarantined == 0 and report.rows_ok == trace.records.height
    return ingest_s, pair_s


def main() -> int | None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=300)
    ap.add_argument("--days", type=float, default=365.0)
    ap.add_argument("--scale", type=int, default=10, help="the larger trace: servers x this")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        ingest_s, pair_s = measure(args.servers, args.days, Path(tmp))
        target(
            f"{args.servers} servers x {args.days:g} days ingested and paired < {LIMIT_S:g} s",
            ingest_s + pair_s < LIMIT_S,
            f"{ingest_s + pair_s:.2f} s",
        )
        if args.scale > 1:
            measure(args.servers * args.scale, args.days, Path(tmp))
    return None


if __name__ == "__main__":
    run_benchmark(main)
