"""Files vs pull: a simulated fleet's DCGM scrape files ingested, and the same telemetry pulled
from a real Prometheus holding them (``tests/servers/prometheus.py``), give the same telemetry
tables, at 15 s, 60 s and 1 h scrape intervals.

    python -m benchmarks.validate_differential_pull [--nodes 4] [--days 3] [--seed 0]
                                                    [--scrapes 15 60 3600]

Each fleet is ``goodput simulate``'s (its default fault mix and Kubernetes nodes, whose GPUs'
``pod`` label changes as jobs come and go) at one scrape interval, cached under
``benchmarks/out/diff-fleet-...``. The pull uses the source's default options (every metric
family dcgm-exporter exports) over the fleet's whole span. TARGET line per interval: every
metric family of the files reaches gpu_hourly, whose rows agree (keys and n exactly; mean, min,
max, last within 1e-9 relative), and the counter events and node events are the same
(``tests.servers.prometheus.differences``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime
from datetime import timedelta
from pathlib import Path

from analysis.telemetry.counters import refresh_counter_events
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data import defaults
from sample_data.simulation import simulated
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.servers import prometheus as server
from warehouse.store import Warehouse

OUT = Path(__file__).resolve().parent / "out"
START = datetime(2026, 1, 5)


def _fleet(nodes: int, days: int, seed: int, scrape_s: int) -> list[Path]:
    out = simulated(
        OUT / f"diff-fleet-{nodes}n-{days}d-{scrape_s}s-seed{seed}",
        llama3_cause_mix(),
        nodes=nodes,
        gpus_per_node=defaults.GPUS_PER_NODE,
        days=days,
        seed=seed,
        fault_scale=defaults.FAULT_SCALE,
        scrape_interval_s=scrape_s,
        start=START.isoformat(),
    )
    return server.scrape_files(out)


def _compare(files: list[Path], days: int, scrape_s: int) -> None:
    t = time.perf_counter()
    data = server.blocks(files)
    print(f"{scrape_s} s: TSDB blocks ready in {time.perf_counter() - t:.0f} s")
    with tempfile.TemporaryDirectory(dir=OUT) as tmp, server.serve(data, Path(tmp)) as url:
        ingested, pulled = Warehouse(Path(tmp) / "files"), Warehouse(Path(tmp) / "pulled")
        t = time.perf_counter()
        ingest_paths(ingested, files)
        ingest_s = time.perf_counter() - t
        src = source_config({"name": "tsdb", "kind": "prometheus", "url": url}, kinds())
        t = time.perf_counter()
        reports = pull(pulled, [src], since=START, until=START + timedelta(days=days + 1))
        pull_s = time.perf_counter() - t
        for wh in (ingested, pulled):
            refresh_counter_events(wh)
        failed = [r.error for r in reports if r.status != "ok"]
        count = "SELECT count(*) AS n FROM {}"
        samples = ingested.query(count.format("gpu_samples"))["n"][0]
        hours = ingested.query(count.format("gpu_hourly"))["n"][0]
        rollups = pulled.query(count.format("gpu_rollups"))["n"][0]
        raw = pulled.query(count.format("gpu_samples"))["n"][0]
        events = ingested.query(count.format("hw_events"))["n"][0]
        diff = failed or server.differences(ingested, pulled)
    print(
        f"{scrape_s} s: files {samples:,} samples -> {hours:,} series-hours, {events:,} counter "
        f"events (ingest {ingest_s:.1f} s); pull {pull_s:.1f} s stored {rollups:,} rollup rows "
        f"and {raw:,} raw samples"
    )
    target(
        f"files vs pull at a {scrape_s} s scrape: the same metric families, gpu_hourly, counter "
        "events and node events",
        not diff,
        diff[0][:300] if diff else f"{hours:,} series-hours and {events:,} events equal",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--days", type=int, default=3)
    ap.add_argument("--seed", type=int, default=defaults.SEED)
    ap.add_argument("--scrapes", type=int, nargs="+", default=[15, 60, 3600])
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    for scrape_s in args.scrapes:
        _compare(_fleet(args.nodes, args.days, args.seed, scrape_s), args.days, scrape_s)


if __name__ == "__main__":
    run_benchmark(main)
