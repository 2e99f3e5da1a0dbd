"""The fit table's rates and the projected band against the truth of many simulated fleets.

    python -m benchmarks.validate_fleets [--seeds 100] [--sizes 16 64] [--days 60] [--jobs 2]
        [--chain-nodes 16]

What is compared: a class's rate is the rate its units showed over the observation window at
the ages they had (``analysis.survival.rates``), and the truth is that same quantity, the
simulator's ``true_rate_per_1k_unit_days`` (its true laws' expected failures over every unit's
at-risk span in the window / the exposure; GPU slots' scales differ by the planted temperature
effect). A job's truth is its goodput at those true rates: ``analysis.projection.project`` of
the default job (16,384 GPUs, hardware classes, the interval the projection chose) once at the
fitted rates with its 95% band, once at the true ones.

1. The product's chain on one fleet (``--chain-nodes``): every source the lifetimes read is
   simulated and ingested (inventory, kernel log, BMC, DCGM; the schedulers' are not needed),
   the telemetry refreshers run and ``analysis.lifetimes`` builds the lifetimes, which must
   equal the simulator's own (``sample_data.lifetimes.fleet_lifetimes``) unit for unit, to
   the second the files round to. That takes about a minute a fleet; the statistics need
   hundreds of fits, so the many fleets start from the simulator's lifetimes.
2. ``--seeds`` fleets per size in ``--sizes`` (``sample_data.simulation.build_fleet``, Llama 3
   cause mix, ``--days``), in ``--jobs`` processes: ``failure_rates``, the projection's rates
   (``analysis.rate_sources.rates_from_failure_rates``) and the job.

TARGETs:
- the chain's lifetimes equal the simulator's;
- the gpu class's table CI covers its truth in 93-97% of fleets (the exact binomial 95%
  interval of the measured share overlaps 93-97%), and so does every class's pooled (classes
  with at least one expected failure);
- the projected rate of every class is the one the table prints;
- the job's 95% band covers its true goodput in >= 90% of fleets, and each side's misses are
  consistent with <= 5% (the one-sided exact 95% lower bound of the share is at most 5%).
Printed beside them: per class the coverage and median fitted / true rate; for gpu (Weibull
shape 0.8) the law's long-run rate 1 / mean against the truth, the fitted Weibull's 1 / mean,
how often the Weibull is selected; the band's median width above and below the point.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.targets import at_most_level
from benchmarks.targets import run_benchmark
from benchmarks.targets import share_interval
from benchmarks.targets import target

MIN_EXPECTED = 1.0  # classes with fewer expected failures in the window have nothing to cover
CHAIN_SOURCES = ("components", "kernel", "ipmi", "redfish", "dcgm")  # what lifetimes read
CHAIN_TOLERANCE_H = 2 / 3600  # install and failure times are written to the second


def chain_check(nodes: int, days: float, seed: int) -> tuple[bool, str]:
    """The product's lifetimes of one simulated fleet against the simulator's own."""
    from analysis.telemetry.counters import refresh_counter_events
    from analysis.telemetry.replacements import refresh_gpu_replacements
    from analysis.telemetry.rollups import refresh_gpu_hourly
    from benchmarks.validate_attribution import fleet_lifetimes as product_lifetimes
    from ingest.base import ParseContext
    from ingest.runner import ingest_paths
    from pipelines.cli.sample import llama3_cause_mix
    from sample_data.lifetimes import fleet_lifetimes
    from sample_data.simulation import build_fleet
    from sample_data.simulation import write_fleet
    from warehouse.store import Warehouse

    root = Path(tempfile.mkdtemp(prefix="validate-fleets-"))
    try:
        f = build_fleet(llama3_cause_mix(), nodes=nodes, days=days, seed=seed)
        write_fleet(f, root / "fleet")
        gt = json.loads((root / "fleet" / "ground_truth.json").read_text())
        wh = Warehouse(root / "home")
        ctx = ParseContext(cluster=gt["cluster"])
        ingest_paths(wh, [root / "fleet" / s for s in CHAIN_SOURCES], ctx=ctx)
        refresh_gpu_hourly(wh)
        refresh_counter_events(wh)
        refresh_gpu_replacements(wh)
        got = product_lifetimes(wh, gt)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    want = fleet_lifetimes(f)
    key = ["component_class", "unit_id"]
    j = want.join(got, on=key, how="full", suffix="_got", coalesce=True)
    missing = j.filter(pl.col("duration").is_null() | pl.col("duration_got").is_null()).height
    off = j.filter(
        ((pl.col("entry") - pl.col("entry_got")).abs() > CHAIN_TOLERANCE_H)
        | ((pl.col("duration") - pl.col("duration_got")).abs() > CHAIN_TOLERANCE_H)
        | (pl.col("event") != pl.col("event_got"))
    ).height
    return missing == 0 and off == 0, (
        f"{nodes} nodes, seed {seed}: {want.height:,} units, {want['event'].sum()} failures; "
        f"{missing} in one only, {off} with another entry, exit or outcome"
    )


def score(gt_laws: dict, fr: pl.DataFrame, rates, job) -> tuple[list[dict], dict]:
    """Per class with enough expected failures: truth, table CI, projected rate; and the job:
    its band and its goodput at the true rates."""
    from analysis.headline import selected_rates
    from analysis.lifetime_models.exponential import poisson_rate_ci
    from analysis.projection import project
    from analysis.projection import unit_counts
    from analysis.projection import useful_fraction
    from analysis.survival import model_mean
    from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS as PER_1K

    table = {r["component_class"]: r for r in selected_rates(fr).iter_rows(named=True)}
    weibull = {
        r["component_class"]: r
        for r in fr.filter(pl.col("model") == "weibull", pl.col("stratum") == "all").iter_rows(
            named=True
        )
    }
    classes = []
    for cls, law in gt_laws.items():
        if law["expected_failures"] < MIN_EXPECTED:
            continue
        truth, row = law["true_rate_per_1k_unit_days"], table.get(cls)
        i = rates.classes.index(cls) if cls in rates.classes else None
        wb = weibull.get(cls)
        mean = model_mean("weibull", wb["params"]) if wb and wb["converged"] else None
        # the long-run rate 1 / mean with the observed rate's relative (Garwood) CI: what a fit
        # table quoting 1 / mean would print
        long_run = PER_1K / mean if mean else float("nan")
        d, e = (row["n_events"], row["exposure_hours"]) if row else (0, 0.0)
        obs, low, high = (float(v) for v in poisson_rate_ci(d, e))
        rel_lo, rel_hi = (low / obs, high / obs) if obs > 0 else (np.nan, np.nan)
        classes.append({
            "class": cls,
            "truth": truth,
            "fitted": row["rate_per_1k_unit_days"] if row else float("nan"),
            "table_covered": bool(row and row["rate_ci_low"] <= truth <= row["rate_ci_high"]),
            "projected_is_printed": bool(
                row and i is not None and rates.rate[i] * PER_1K == row["rate_per_1k_unit_days"]
            ),
            "model": row["model"] if row else None,
            "law_long_run": PER_1K / law["scale_hours"] / math.gamma(1 + 1 / law["shape"]),
            "weibull_long_run": long_run,
            "weibull_shape": json.loads(wb["params"])["shape"]["value"] if mean else None,
            "long_run_covered": bool(long_run * rel_lo <= truth <= long_run * rel_hi),
        })  # fmt: skip
    p = project(rates, job)
    true_rate = np.array([gt_laws[c]["true_rate_per_1k_unit_days"] / PER_1K for c in rates.classes])
    units = unit_counts(rates.classes, job.n_gpus, job.gpus_per_node, rates.counts)[:, 0]
    truth_g = float(
        useful_fraction(
            p.interval_hours[0],
            job.blocking_s / 3600,
            job.restart_s / 3600,
            1 / (true_rate @ units),
        )
    )
    g, lo, hi = float(p.goodput[0]), float(p.goodput_ci_low[0]), float(p.goodput_ci_high[0])
    band = {"goodput": g, "truth": truth_g, "above": truth_g > hi, "below": truth_g < lo,
            "up": hi - g, "down": g - lo}  # fmt: skip
    return classes, band


def one_fleet(nodes: int, seed: int, days: float) -> tuple[list[dict], dict]:
    """Score one simulated fleet (``score``), from the simulator's lifetimes."""
    from analysis.job import Job
    from analysis.rate_sources import rates_from_failure_rates
    from analysis.survival import failure_rates
    from pipelines.cli.sample import llama3_cause_mix
    from sample_data.lifetimes import fleet_lifetimes
    from sample_data.simulation import build_fleet

    f = build_fleet(llama3_cause_mix(), nodes=nodes, days=days, seed=seed)
    fr = failure_rates(fleet_lifetimes(f), window=None)
    classes, band = score(f.laws, fr, rates_from_failure_rates(fr), Job())
    tag = {"nodes": nodes, "seed": seed}
    return [c | tag for c in classes], band | tag


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=100, help="fleets per size")
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--days", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=2, help="processes for the fleets")
    ap.add_argument("--chain-nodes", type=int, default=16)
    args = ap.parse_args(argv)

    t = time.perf_counter()
    ok, measured = chain_check(args.chain_nodes, args.days, seed=100)
    target("the product's chain rebuilds the simulator's lifetimes", ok, measured)
    print(f"(chain: {time.perf_counter() - t:.0f} s)", flush=True)

    t = time.perf_counter()
    todo = [(n, 100 + s, args.days) for n in args.sizes for s in range(args.seeds)]
    # spawned, not forked: a fork of a process whose polars threads ran can hang
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=spawn) as pool:
        done = list(pool.map(one_fleet, *zip(*todo, strict=True), chunksize=4))
    classes = pl.DataFrame([c for got, _ in done for c in got])
    bands = pl.DataFrame([b for _, b in done])
    print(f"({len(todo)} fleets: {time.perf_counter() - t:.0f} s)\n", flush=True)

    with pl.Config(tbl_rows=40, tbl_hide_dataframe_shape=True, float_precision=3):
        print(
            classes.group_by("class", "nodes")
            .agg(
                cases=pl.len(),
                table_ci_covers=pl.col("table_covered").mean(),
                median_fitted_over_truth=(pl.col("fitted") / pl.col("truth")).median(),
                weibull_selected=(pl.col("model") == "weibull").mean(),
            )
            .sort("class", "nodes")
        )
    gpu = classes.filter(pl.col("class") == "gpu")
    for nodes, g in gpu.group_by("nodes", maintain_order=True):
        law = (g["law_long_run"] / g["truth"]).median()
        wb = (g["weibull_long_run"] / g["truth"]).drop_nans()
        sel = g.filter(pl.col("model") == "weibull")
        print(
            f"gpu, {nodes[0]} nodes: true law's 1/mean / truth median {law:.3f}; fitted Weibull "
            f"1/mean / truth {wb.quantile(0.05):.2f}-{wb.quantile(0.95):.2f} (5-95%), median "
            f"{wb.median():.3f}, shape median {g['weibull_shape'].median():.3f} (true 0.8); "
            f"Weibull selected in {sel.height}/{g.height}: its rate / truth median "
            f"{(sel['fitted'] / sel['truth']).median() or float('nan'):.3f}, CI covers "
            f"{sel['table_covered'].sum()}/{sel.height}; its 1/mean with the observed rate's "
            f"relative CI would cover {sel['long_run_covered'].sum()}/{sel.height}"
        )
    for nodes, b in bands.group_by("nodes", maintain_order=True):
        print(
            f"job band, {nodes[0]} nodes: truth above {b['above'].sum()}, below "
            f"{b['below'].sum()} of {b.height}; median width {100 * b['up'].median():.1f} points "
            f"above the point, {100 * b['down'].median():.1f} below"
        )

    for which, df in (("gpu", gpu), ("every class's", classes)):
        k, n = int(df["table_covered"].sum()), df.height
        lo, hi = share_interval(k, n)
        target(
            f"{which} table rate CI covers the truth 93-97% (exact 95% interval of the share "
            "overlaps)",
            lo <= 0.97 and hi >= 0.93,
            f"{k}/{n} = {k / n:.1%}, interval {lo:.1%}-{hi:.1%}",
        )
    same = int(classes["projected_is_printed"].sum())
    target("the projected rate of every class is the table's", same == classes.height,
           f"{same} of {classes.height}")  # fmt: skip
    n = bands.height
    covered = n - int(bands["above"].sum()) - int(bands["below"].sum())
    target("job band covers the true goodput >= 90%", covered >= 0.9 * n,
           f"{covered}/{n} = {covered / n:.1%}")  # fmt: skip
    target("job band: truth above it (better than the band), consistent with <= 5%",
           *at_most_level(int(bands["above"].sum()), n))  # fmt: skip
    target("job band: truth below it (worse than the band), consistent with <= 5%",
           *at_most_level(int(bands["below"].sum()), n))  # fmt: skip


if __name__ == "__main__":
    run_benchmark(main)
