"""The period-over-period change tests (``analysis/changes.py``) on fleets where nothing
changes: how often each calls a change that is not there.

    python -m benchmarks.validate_changes [--fleets 24] [--days 60]

Each fleet is the simulator's (``sample_data.simulation.build_fleet``: units in service at
stationary ages, constant fault and workload-failure rates, so no planted change) of 16, 32 or
64 nodes, 4 of them on Kubernetes, starting on a Monday; its sacct dump and Kubernetes files
are ingested into a fresh warehouse as a user would and its interruptions and measured goodput
built (``analysis.attribution``, ``analysis.goodput_measured``). Every week of
``goodput_trend``'s weeks is then compared with the week before it (``analysis.trend``'s
``window_changes``, as the trend table, ``goodput trend`` and the first screen compare): with
60 days, seven pairs of whole weeks and one of a 4-day partial last week against a whole one,
compared per hour. A test's false-change rate is the share of pairs it calls a change (p <
0.05); each must stay at or below 5% (``TARGET``), counted over all pairs and printed for the
partial ones apart. The count's own binomial standard error is printed beside it.

A test that never calls a change passes that trivially: printed beside (no target), its power,
the share of whole weeks of a fleet at four times the fault rates (the interruptions about
1.7-fold) it tells from the same week of the same fleet at the usual rates.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl

from analysis.assumptions import CKPT_INTERVAL_S
from analysis.attribution import refresh_interruptions
from analysis.changes import ALPHA
from analysis.changes import Changes
from analysis.goodput_measured import refresh_goodput_jobs
from analysis.trend import CHANGES
from analysis.trend import compare_samples
from analysis.trend import data_window
from analysis.trend import interruption_dispersion
from analysis.trend import period_starts
from analysis.trend import trend_frame
from analysis.trend import window_sample
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import build_fleet
from sample_data.writers import kubernetes
from sample_data.writers import sacct
from warehouse.store import Warehouse

SIZES = (16, 32, 64)
LIMIT = 0.05  # the false-change rate a test may have (its level)
FAULT_SCALE = 20.0  # the sample fleet's rates (times Llama 3's)
PLANTED = 4.0  # the fault rates of the fleets with a planted change (the small jobs' own
# failures do not scale with them: the interruptions rise about 1.7-fold)
WEEK = timedelta(weeks=1)


def fleet_tables(seed: int, nodes: int, days: float, work: Path, scale: float = FAULT_SCALE):
    """(job_attempts, interruptions, goodput_jobs) of one simulated fleet (``scale``: its fault
    and workload-failure rates, times Llama 3's), built as a user's warehouse would be."""
    f = build_fleet(llama3_cause_mix(), nodes=nodes, gpus_per_node=8, days=days, seed=seed,
                    fault_scale=scale, scrape_interval_s=0, k8s_nodes=4)  # fmt: skip
    out = work / f"fleet-{nodes}-{seed}-{scale:g}"
    kubernetes.write(f, out, defaultdict(list))
    sacct.write(f, out / "slurm" / "sacct.txt")
    wh = Warehouse(work / f"home-{nodes}-{seed}-{scale:g}")
    ingest_paths(wh, [out / "k8s", out / "slurm"])
    refresh_interruptions(wh, ckpt_interval_s=CKPT_INTERVAL_S)
    refresh_goodput_jobs(wh)
    return wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs")


def fleet_weeks(seed: int, nodes: int, days: float, work: Path) -> pl.DataFrame:
    """The weekly trend of one simulated fleet."""
    weeks = trend_frame(*fleet_tables(seed, nodes, days, work), "week")
    return weeks.with_columns(pl.lit(seed).alias("seed"), pl.lit(nodes).alias("nodes"))


def planted_pairs(seed: int, nodes: int, days: float, work: Path) -> list[Changes]:
    """Each whole week of a fleet at ``PLANTED`` times the rates against the same week of the
    same fleet (seed, size) at the usual rates: a change planted in the interruptions (and so
    in the losses and goodput), compared at the larger of the two fleets' dispersions."""
    spans, samples, scales = [], [], []
    for scale in (FAULT_SCALE, PLANTED * FAULT_SCALE):
        att, intr, jobs = fleet_tables(seed, nodes, days, work, scale)
        span = data_window(att)
        weeks = [w for w in period_starts(*span, "week") if w >= span[0] and w + WEEK <= span[1]]
        spans.append(set(weeks))
        samples.append({w: window_sample(att, intr, jobs, w, w + WEEK) for w in weeks})
        scales.append(interruption_dispersion(intr, span))
    common = sorted(spans[0] & spans[1])
    return [compare_samples(samples[1][w], samples[0][w], max(scales)) for w in common]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleets", type=int, default=24, help="fleets, spread over the sizes")
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--planted", type=int, default=6, help="fleets with a planted change")
    args = ap.parse_args()
    parts = []
    with tempfile.TemporaryDirectory(prefix="validate-changes-") as tmp:
        for i in range(args.fleets):
            nodes = SIZES[i % len(SIZES)]
            weeks = fleet_weeks(1000 + i, nodes, args.days, Path(tmp))
            parts.append(weeks)
            print(f"fleet {i + 1}/{args.fleets}: {nodes} nodes, {weeks.height} weeks", flush=True)
        planted = [
            c
            for i in range(args.planted)
            for c in planted_pairs(2000 + i, SIZES[i % len(SIZES)], args.days, Path(tmp))
        ]
    weeks = pl.concat(parts, how="vertical_relaxed")
    pairs = weeks.filter(pl.col("interruption_rate_p").is_not_null() | pl.col(
        "goodput_change_p").is_not_null())  # fmt: skip
    partial = pairs.filter(pl.col("partial"))
    print(f"\n{pairs.height} week pairs ({partial.height} a partial week against a whole one)")
    print(f"{'test':<16}{'pairs':>7}{'changes called':>16}{'rate':>8}{'s.e.':>7}"
          f"{'partial pairs':>15}{'called':>8}")  # fmt: skip
    for figure, (*_, p) in CHANGES.items():
        tested = pairs.filter(pl.col(p).is_not_null())
        called = int((tested[p] < ALPHA).sum())
        rate = called / tested.height if tested.height else float("nan")
        se = (rate * (1 - rate) / tested.height) ** 0.5 if tested.height else float("nan")
        part = partial.filter(pl.col(p).is_not_null())
        part_called = int((part[p] < ALPHA).sum())
        print(f"{figure:<16}{tested.height:>7}{called:>16}{rate:>8.1%}{se:>7.1%}"
              f"{part.height:>15}{part_called:>8}")  # fmt: skip
        target(
            f"{figure}: false changes on fleets without a change <= {LIMIT:.0%}",
            tested.height > 0 and rate <= LIMIT,
            f"{called} of {tested.height} week pairs, {rate:.1%} (s.e. {se:.1%})",
        )
    print(f"\npower: a week at {PLANTED:g}x the fault rates against the same week at 1x "
          f"({len(planted)} pairs; no target)")  # fmt: skip
    ratios = [c.interruptions.estimate for c in planted if c.interruptions.estimate]
    print(f"  interruptions per hour, planted / usual: median {np.median(ratios):.2f}")
    for figure in CHANGES:
        got = [getattr(c, figure) for c in planted]
        real = [c for c in got if c.p is not None]
        found = sum(c.real for c in real)
        print(f"  {figure:<16}{found} of {len(real)} called a change "
              f"({found / len(real) if real else float('nan'):.0%})")  # fmt: skip


if __name__ == "__main__":
    run_benchmark(main)
