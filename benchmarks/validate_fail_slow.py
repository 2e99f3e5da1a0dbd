"""Fail-slow episodes planted by ``goodput simulate`` against what the product finds: slow
GPU-hours, the culprit node of each episode, and slow periods claimed where nothing ran slow.

    python -m benchmarks.validate_fail_slow [--seeds 20] [--nodes 8] [--days 7] [--rate 40]
        [--jobs 2]

Per seed, a fleet of ``--nodes`` 8-GPU Slurm nodes over ``--days`` with 5-minute DCGM scrapes
(``sample_data.simulation``; Llama 3's mix x 20) and fail-slow episodes at ``--rate`` per 1,000
GPU-days (``sample_data.fail_slow``: a GPU throttled to a known clock ratio with NVML's reasons,
or its PCIe link at x8); its sacct dump, DCGM scrapes and the training jobs' step logs are
ingested into a fresh warehouse (``goodput ingest``'s runner), the daily telemetry tables built
and ``slow_periods`` found and attributed (``analysis.slowness``). The same seed is also run
without episodes (``--rate 0``): every other file is the same, so any slow period there is a
false claim. Seeds run in ``--jobs`` processes. Targets:

* slow GPU-hours (``slow_periods``, step logs and telemetry alone) within 5% of the truth
  (``ground_truth.json``'s ``fail_slow``) over all fleets; per fleet printed beside it;
* the culprit node named in >= 90% of episodes that slowed a job for >= 10 minutes: a period
  of a job holding the episode's GPU, overlapping the episode, whose ``culprit_host`` is the
  episode's node (an episode on an idle GPU costs no job and is not counted);
* on the fleets without episodes, a slow period claimed in <= 5% of them (consistent with at
  most 5%: the exact one-sided bound, ``benchmarks.targets.at_most_level``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime
from pathlib import Path

import polars as pl

from analysis.slowness.steps import refresh_slow_periods
from analysis.telemetry.rollups import refresh_gpu_hourly
from benchmarks.targets import at_most_level
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data import fail_slow
from sample_data.simulation import build_fleet
from sample_data.simulation import write_fleet
from warehouse.store import Warehouse

WITHIN = 0.05
NAMED = 0.90
MIN_SLOWED_S = 600.0
SOURCES = ("slurm", "dcgm", "training")


def one_seed(seed: int, args, work: Path) -> tuple[dict, dict]:
    """The seed's fleet with episodes and without."""
    return one_fleet(seed, args, args.rate, work), one_fleet(seed, args, 0.0, work)


def one_fleet(seed: int, args, rate: float, work: Path) -> dict:
    """Simulate, ingest and analyse one fleet; the truth beside what was found."""
    f = build_fleet(llama3_cause_mix(), nodes=args.nodes, gpus_per_node=8, days=args.days,
                    seed=seed, fault_scale=20.0, scrape_interval_s=300, k8s_nodes=0,
                    fail_slow_rate=rate)  # fmt: skip
    out = work / f"fleet-{seed}-{rate:g}"
    write_fleet(f, out)
    truth = json.loads((out / "ground_truth.json").read_text())
    wh = Warehouse(work / f"home-{seed}-{rate:g}")
    ingest_paths(wh, [out / s for s in SOURCES], ctx=ParseContext(cluster=truth["cluster"]))
    refresh_gpu_hourly(wh)
    periods, _ = refresh_slow_periods(wh)
    return {
        "true": truth["fail_slow"]["slow_gpu_hours"],
        "est": float(periods["slow_gpu_hours"].sum()),
        "est_log": float(periods.filter(pl.col("source") == "step_log")["slow_gpu_hours"].sum()),
        "periods": periods.height,
        "episodes": _episodes(f),
        "named": _named(f, periods),
    }


def _episodes(f) -> list[tuple]:
    """(episode, job) of each episode and each attempt it slowed for >= MIN_SLOWED_S."""
    out = []
    for i, e in enumerate(f.slow_episodes):
        for a in f.attempts:
            if a.scheduler != "slurm" or not fail_slow.holds(a, e.node, e.gpu):
                continue
            s0, e0 = a.start + a.overhead_s, a.end if a.end is not None else f.horizon
            if min(e.end, e0) - max(e.start, s0) >= MIN_SLOWED_S:
                out.append((i, a.job_id))
    return out


def _named(f, periods: pl.DataFrame) -> set[int]:
    """The episodes a period of a job they slowed names the node of."""
    named = set()
    t0 = datetime.fromisoformat(f.start)
    rows = periods.with_columns(
        ((pl.col("start_time").dt.replace_time_zone(None) - t0).dt.total_seconds()).alias("s"),
        ((pl.col("end_time").dt.replace_time_zone(None) - t0).dt.total_seconds()).alias("e"),
    )
    for i, job in _episodes(f):
        e = f.slow_episodes[i]
        hit = rows.filter(
            (pl.col("job_id") == job)
            & (pl.col("s") < e.end)
            & (pl.col("e") > e.start)
            & (pl.col("culprit_host") == f.hosts[e.node])
        )
        if hit.height:
            named.add(i)
    return named


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--rate", type=float, default=40.0, help="episodes per 1,000 GPU-days")
    ap.add_argument("--jobs", type=int, default=2, help="processes")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    t0 = time.perf_counter()
    slow, clean = [], []
    print("seed  episodes  slowed>=10m  named   true GPU-h   found GPU-h (log)   error   clean")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp, ProcessPoolExecutor(args.jobs) as pool:
        done = pool.map(one_seed, range(args.seeds), [args] * args.seeds, [Path(tmp)] * args.seeds)
        for seed, (r, c) in enumerate(done):
            slow.append(r)
            clean.append(c)
            counted = {i for i, _ in r["episodes"]}
            error = r["est"] / r["true"] - 1 if r["true"] else float("nan")
            print(
                f"{seed:4}  {len(counted):8}  {len(r['episodes']):11}  {len(r['named']):5}   "
                f"{r['true']:10,.1f}   {r['est']:10,.1f} ({r['est_log']:,.1f})   {error:+6.1%}   "
                f"{c['periods']}"
            )
    true = sum(r["true"] for r in slow)
    est = sum(r["est"] for r in slow)
    within = sum(abs(r["est"] / r["true"] - 1) <= WITHIN for r in slow if r["true"])
    target(
        f"slow GPU-hours within {WITHIN:.0%} of the truth over {args.seeds} fleets",
        abs(est / true - 1) <= WITHIN,
        f"{est:,.1f} found of {true:,.1f} true: {est / true - 1:+.2%}; "
        f"{within} of {sum(1 for r in slow if r['true'])} fleets within {WITHIN:.0%} alone",
    )
    counted = sum(len({i for i, _ in r["episodes"]}) for r in slow)
    named = sum(len(r["named"]) for r in slow)
    target(
        f"the culprit node named in >= {NAMED:.0%} of episodes slowing a job >= "
        f"{MIN_SLOWED_S / 60:g} min",
        counted > 0 and named >= NAMED * counted,
        f"{named} of {counted} = {named / max(counted, 1):.1%}",
    )
    claimed = sum(c["periods"] > 0 for c in clean)
    ok, measured = at_most_level(claimed, len(clean))
    target("a slow period claimed in <= 5% of fleets without fail-slow episodes", ok, measured)
    print(f"{2 * args.seeds} fleets in {time.perf_counter() - t0:.0f} s wall")


if __name__ == "__main__":
    run_benchmark(main)
