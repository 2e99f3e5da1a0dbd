"""Telemetry pulled from a real Prometheus (hourly rollups computed there) against the same
scrape files ingested: the same derived tables, how many points cross the wire, wall time.

    python -m benchmarks.bench_pull_prometheus [--nodes 2] [--days 2] [--scrape-s 15]

The issue's bar is a 64-node, 54-day fleet. At that fleet's 1 h scrape interval (the one
``bench_fleet_scale`` simulates) the ratio cannot be met by any rollup: an hour holds one raw
sample and its rollup is 2 to 5 points, so the source pulls such sparse series raw (option
``raw_per_hour``) and the wire carries exactly the samples. At the interval real fleets scrape
DCGM at (15 s: 240 samples an hour) it can, but 64 nodes x 54 days at 15 s is 3.6 billion
samples, which neither the simulator nor ``promtool`` turns into a TSDB on this machine in a
working session; so the default run measures a slice of such a fleet (``--nodes`` x
``--days``, same simulator, 15 s: the rollup path) and prints the on-paper figures for a
100k-GPU day from what it measured.

Steps: simulate the fleet (``benchmarks/out/prom-fleet-...``, reused); build TSDB blocks
(``tests/servers/prometheus.py``, cached) and serve them; (A) ``ingest_paths`` of the scrape
files, then the daily tables and counter events; (B) ``sources.pull.pull`` of the same span,
then the same. Every point of every answer the source receives is counted (a rollup value, a
raw sample, a baseline value), after B is timed. B's wall time is split into the wait for the
answers (of which the time requests were in flight: the TSDB's work and the transfer, summed
over concurrent requests), the parse and commit (with its CPU time), and the daily tables.
TARGET lines: gpu_hourly and counter events equal (floats within 1e-9 relative); points on the
wire <= raw samples / 50 where a series-hour holds 100 samples or more (a scrape of 36 s or
less), else <= the samples + 1%; wall time of B <= A.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from datetime import datetime
from datetime import timedelta
from pathlib import Path

from analysis.telemetry.counters import COUNTER_SOURCE
from analysis.telemetry.counters import refresh_counter_events
from analysis.telemetry.rollups import refresh_gpu_hourly
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulated
from sources import kinds
from sources import prometheus as source
from sources import pull as pulling
from sources.base import source_config
from sources.prometheus import client
from sources.prometheus.targets import host_groups
from sources.pull import pull
from tests.servers import prometheus as server
from warehouse.store import Warehouse

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
START = datetime(2026, 1, 5)
WIRE_RATIO = 50
SPARSE_OVERHEAD = 1.01
PAPER_GPUS = 100_000
PAPER_GPUS_PER_NODE = 8
PAPER_METRICS = 10  # series per GPU a dcgm-exporter default set exposes, about


def _fleet(nodes: int, days: int, scrape_s: int) -> Path:
    return simulated(
        OUT / f"prom-fleet-{nodes}n-{days}d-{scrape_s}s",
        llama3_cause_mix(),
        nodes=nodes,
        gpus_per_node=8,
        days=days,
        seed=3,
        fault_scale=30.0,
        scrape_interval_s=scrape_s,
        k8s_nodes=0,
        start=START.isoformat(),
    )


def _count_points(body: bytes) -> int:
    data = json.loads(body).get("data")
    if not isinstance(data, dict):
        return 0
    result = data.get("result") or []
    if data.get("resultType") == "matrix":
        return sum(len(s.get("values") or []) for s in result)
    return len(result) if data.get("resultType") == "vector" else 0


def _built(wh: Warehouse) -> None:
    refresh_gpu_hourly(wh)
    refresh_counter_events(wh)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--days", type=int, default=2)
    ap.add_argument("--scrape-s", type=int, default=15)
    args = ap.parse_args()
    fleet = _fleet(args.nodes, args.days, args.scrape_s)
    files = server.scrape_files(fleet)
    t = time.perf_counter()
    data = server.blocks(files)
    print(f"TSDB blocks ready in {time.perf_counter() - t:.0f} s ({len(files)} scrape files)")

    wire = {"requests": 0, "points": 0, "bytes": 0, "in_flight_s": 0.0}
    by_path: dict[str, int] = {}
    split = {
        "fetch_s": 0.0,
        "parse_s": 0.0,
        "parse_cpu_s": 0.0,
        "commit_s": 0.0,
        "commit_cpu_s": 0.0,
    }
    request, fetched = client.request, pulling.fetched
    parse, commit = pulling.parse_documents, pulling.commit_documents

    tally = threading.Lock()  # the source's requests run in threads
    answers: list[tuple[str, bytes]] = []  # their points counted once the pull is timed

    def counted(src, session, method, path, params):
        t = time.perf_counter()
        body = request(src, session, method, path, params)
        with tally:
            wire["in_flight_s"] += time.perf_counter() - t
            wire["requests"] += 1
            wire["bytes"] += len(body)
            answers.append((path, body))
        return body

    def waited(*a, **k):  # the time the pull waits for the kind's next document
        docs = fetched(*a, **k)
        while True:
            t = time.perf_counter()
            try:
                doc = next(docs)
            except StopIteration:
                return
            finally:
                split["fetch_s"] += time.perf_counter() - t
            yield doc

    def timed(key, fn):
        def run(*a, **k):
            t, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                split[f"{key}_s"] += time.perf_counter() - t
                if f"{key}_cpu_s" in split:  # this thread's CPU (others run meanwhile)
                    split[f"{key}_cpu_s"] += time.thread_time() - cpu

        return run

    client.request = counted  # every request of the source goes through it
    pulling.fetched, pulling.parse_documents = waited, timed("parse", parse)
    pulling.commit_documents = timed("commit", commit)
    with tempfile.TemporaryDirectory(dir=OUT) as tmp, server.serve(data, Path(tmp)) as url:
        ingested, pulled = Warehouse(Path(tmp) / "files"), Warehouse(Path(tmp) / "pulled")
        t = time.perf_counter()
        ingest_paths(ingested, files)
        file_only = time.perf_counter() - t
        _built(ingested)
        file_wall = time.perf_counter() - t
        src = source_config(
            {
                "name": "tsdb",
                "kind": "prometheus",
                "url": url,
                "timeout_s": 300,
                "metrics": sorted(_metrics(ingested)),
            },
            kinds(),
        )
        t = time.perf_counter()
        reports = pull(
            pulled,
            [src],
            since=START - timedelta(days=1),
            until=START + timedelta(days=args.days + 1),
        )
        pull_only = time.perf_counter() - t
        _built(pulled)
        pull_wall = time.perf_counter() - t
        for path, body in answers:
            n = _count_points(body)
            wire["points"] += n
            by_path[path] = by_path.get(path, 0) + n
        answers.clear()
        failed = [r.error for r in reports if r.status != "ok"]
        samples = ingested.query("SELECT count(*) AS n FROM gpu_samples")["n"][0]
        same_hourly, same_events = _same(ingested, pulled)
        rollup_rows = pulled.query("SELECT count(*) AS n FROM gpu_rollups")["n"][0]
        series_hours = ingested.query("SELECT count(*) AS n FROM gpu_hourly")["n"][0]
        raw_rows = pulled.query("SELECT count(*) AS n FROM gpu_samples")["n"][0]
    print(
        f"file ingest + daily tables: {file_wall:.1f} s for {samples:,} samples (ingest "
        f"{file_only:.1f} s, daily tables {file_wall - file_only:.1f} s)"
    )
    print(
        f"pull: {pull_only:.1f} s ({wire['requests']} requests, {wire['bytes'] / 1e6:.1f} MB), + "
        f"daily tables {pull_wall - pull_only:.1f} s; stored {rollup_rows:,} rollup rows and "
        f"{raw_rows:,} raw samples"
    )
    print(
        f"pull split: waiting for answers {split['fetch_s']:.1f} s (requests in flight "
        f"{wire['in_flight_s']:.1f} s summed: TSDB and transfer) and parse {split['parse_s']:.1f} "
        f"s (thread CPU {split['parse_cpu_s']:.1f} s), each answer parsed as it comes, a chunk "
        f"ahead of the commits, commit "
        f"{split['commit_s']:.1f} s (thread CPU {split['commit_cpu_s']:.1f} s), daily tables "
        f"{pull_wall - pull_only:.1f} s"
    )
    print(
        "points by endpoint (query_range: hourly rollups and the 5-min search of changed counter "
        f"hours; query: density probes, baselines and raw samples): {by_path}"
    )
    ratio = samples / max(wire["points"], 1)
    target("pull succeeded", not failed, failed[0] if failed else f"{len(reports)} windows ok")
    target(
        "pulled gpu_hourly equals the ingested files'", same_hourly, "float within 1e-9 relative"
    )
    target(
        "pulled counter events equal the ingested files'",
        same_events,
        "time, host, gpu, code, count",
    )
    # an hour's rollup is a few points, so the wire can only shrink an hour that holds many more
    # samples; at a sparse scrape the source pulls raw, a point a sample, and the bar is that it
    # sends no more than the samples plus the hourly rollups' few points
    per_hour = 3600 // args.scrape_s
    if per_hour >= 2 * WIRE_RATIO:
        bar, met = f"raw samples / {WIRE_RATIO}", ratio >= WIRE_RATIO
    else:
        bar = (
            f"raw samples x {SPARSE_OVERHEAD} ({args.scrape_s} s scrape: {per_hour} a series-hour)"
        )
        met = wire["points"] <= samples * SPARSE_OVERHEAD
    target(
        f"points on the wire <= {bar}",
        met,
        f"{wire['points']:,} points for {samples:,} samples: 1/{ratio:.3g}",
    )
    target(
        "pull wall time <= file ingest's",
        pull_wall <= file_wall,
        f"{pull_wall:.1f} s vs {file_wall:.1f} s",
    )
    _on_paper(series_hours, rollup_rows, raw_rows, len(reports), wire, split, args, src)


def _metrics(wh: Warehouse) -> set[str]:
    return set(
        wh.query("SELECT DISTINCT regexp_replace(metric, '\\{.*$', '') AS m FROM gpu_samples")["m"]
    )


def _same(a: Warehouse, b: Warehouse) -> tuple[bool, bool]:
    keys = ["hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric"]
    ha, hb = (
        a.read("gpu_hourly").sort(keys, nulls_last=True),
        b.read("gpu_hourly").sort(keys, nulls_last=True),
    )
    same = (
        ha.height == hb.height
        and ha.select(keys, "n").equals(hb.select(keys, "n"))
        and all(
            bool(((ha[c] - hb[c]).abs() <= 1e-9 * ha[c].abs().clip(lower_bound=1)).all())
            for c in ("mean", "min", "max", "last")
        )
    )
    q = (
        "SELECT time, host, component_id, code, count FROM hw_events WHERE source = "
        f"'{COUNTER_SOURCE}' ORDER BY ALL"
    )
    return same, a.query(q).equals(b.query(q))


def _on_paper(
    series_hours: int,
    rollup_rows: int,
    raw_rows: int,
    windows: int,
    wire: dict,
    split: dict,
    args,
    src,
) -> None:
    """A 100k-GPU day pulled hourly (the schedule), from the run's measured rates: stored rows and
    points per series-hour, commit CPU per stored row, and the requests beyond each pull's fixed
    ones (build info, host list, and per host group the density probe, the rollups and the
    counters' baseline, or the probe and the raw samples) per host-hour."""
    series = PAPER_GPUS * PAPER_METRICS
    paper_hours = series * 24
    hosts = PAPER_GPUS // PAPER_GPUS_PER_NODE
    hours_per_pull = 1 + source.OVERLAP / timedelta(hours=1)  # the new hour and the overlap again
    per_series_hour = (rollup_rows + raw_rows) / max(series_hours, 1)
    cpu_per_row = (split["parse_cpu_s"] + split["commit_cpu_s"]) / max(rollup_rows + raw_rows, 1)
    per_group = 3 if rollup_rows else 2
    slice_groups = len(host_groups(src, [str(i) for i in range(args.nodes)])[0])
    beyond = max(wire["requests"] - windows * (2 + slice_groups * per_group), 0)
    per_host_hour = beyond / (args.nodes * args.days * 24)
    paper_groups = len(host_groups(src, [str(i) for i in range(hosts)])[0])
    queries = 24 * (2 + paper_groups * per_group) + per_host_hour * hosts * 24 * hours_per_pull
    print(
        f"on paper, {PAPER_GPUS:,} GPUs x {PAPER_METRICS} series, one day ({paper_hours:,} "
        f"series-hours): rows a day {paper_hours * per_series_hour:,.0f} ({per_series_hour:.3f} "
        "stored rows per series-hour measured: "
        f"{'rollups and the raw samples of changed counters' if rollup_rows else 'raw samples'}; "
        f"vs {series * 5760:,} samples at 15 s), about "
        f"{paper_hours * wire['points'] / max(series_hours, 1) * hours_per_pull:,.0f} points on "
        f"the wire with the overlap re-read ({hours_per_pull:.0f} h per hourly pull)"
    )
    print(
        f"on paper: commit CPU a day {paper_hours * per_series_hour * cpu_per_row / 60:,.1f} min "
        f"({cpu_per_row * 1e6:.1f} CPU-us per stored row measured: parse and commit); queries a "
        f"day at most {queries:,.0f}: 24 hourly pulls x (2 + {paper_groups} host groups x "
        f"{per_group}) + {per_host_hour:.3f} changed-counter requests per host-hour measured x "
        f"{hosts:,} hosts x 24 h x {hours_per_pull:.0f} h re-read (an upper bound: a group of "
        f"{src.options['hosts_per_query']} hosts asks once for all its series changed in a "
        "metric's hour)"
    )


if __name__ == "__main__":
    run_benchmark(main)
