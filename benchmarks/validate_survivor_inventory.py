"""Recovery of truth from a survivor-only inventory export (the usual CMDB + RMA shape).

    python -m benchmarks.validate_survivor_inventory [--seeds 20] [--units 4000]

An asset register lists the units in service when the observation window starts plus the units
installed and removed since; units that failed before the window are gone from it. Exposure
before the window must then not be counted (its failures are missing): units installed earlier
enter left-truncated at the window start. The export is generated from
``sample_data.lifetimes.simulate_lifetimes`` (known Weibull laws, installs spread over three years
before and during a one-year window) and goes through ``analysis.lifetimes`` and
``analysis.survival.failure_rates`` with the window given (``--observed-from``), and, for
contrast, with the window inferred from the earliest record (what an inventory alone allows).

Targets (each over the seeds): the 95% CI of each constant-hazard class's rate covers the true
rate in >= 90%; the Weibull shape CI covers the true shape in >= 90% for every class; a
constant-hazard class is labelled wear-out in <= 10%.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl

from analysis import survival as sv
from analysis.lifetimes import build_component_lifetimes
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.lifetimes import simulate_lifetimes
from warehouse.schemas import TABLES
from warehouse.schemas import conform

WINDOW_START = datetime(2025, 1, 1)
WINDOW_HOURS = 8760.0
LAWS = {  # class: (Weibull shape, scale in hours); shape 1 is a constant hazard 1/scale
    "psu": (1.0, 100_000.0),
    "nic": (1.0, 250_000.0),
    "gpu": (1.6, 60_000.0),
}


def true_rate_per_1k_unit_days(shape: float, scale: float) -> float | None:
    return 24_000.0 / scale if shape == 1.0 else None


def survivor_inventory(
    laws: dict[str, tuple[float, float]],
    n_units: int,
    seed: int,
    removal_rate_per_hour: float = 1 / 200_000,
) -> pl.DataFrame:
    """A ``component_history`` export: units alive at the window start and units installed
    since, with their removals (failed or decommissioned) up to the window end."""
    lt = simulate_lifetimes(
        laws,
        n_units,
        np.random.default_rng(seed),
        horizon_hours=WINDOW_HOURS,
        installed_before_hours=3 * 8760.0,
        removal_rate_per_hour=removal_rate_per_hour,
        start=WINDOW_START.isoformat(),
    )
    end = WINDOW_START + timedelta(hours=WINDOW_HOURS)
    installed = pl.col("observed_from") - pl.duration(
        microseconds=(pl.col("entry") * 3.6e9).cast(pl.Int64)
    )
    removed = pl.col("event") | (pl.col("observed_to") < end)
    return conform(
        "component_history",
        lt.select(
            "component_class",
            serial="unit_id",
            slot=pl.format(
                "{}/{}{}",
                "host",
                "component_class",
                pl.int_range(pl.len()).over("component_class", "host"),
            ),
            installed_at=installed,
            removed_at=pl.when(removed).then("observed_to"),
            removal_reason=pl.when("event")
            .then(pl.lit("failed (RMA)"))
            .when(removed)
            .then(pl.lit("decommissioned")),
            failed=pl.col("event"),
            source=pl.lit("cmdb"),
        ),
    )


def fit(inventory: pl.DataFrame, windowed: bool) -> pl.DataFrame:
    """The selected ``failure_rates`` row per class (all units, whole period) plus the
    exponential row's rate CI, with the window given or inferred from the earliest record."""
    lt = build_component_lifetimes(
        inventory,
        TABLES["gpu_hourly"].empty(),
        TABLES["hw_events"].empty(),
        as_of=WINDOW_START + timedelta(hours=WINDOW_HOURS),
        data_start=WINDOW_START if windowed else inventory["installed_at"].min(),
    )
    fr = sv.failure_rates(lt, window=None).filter(pl.col("stratum") == "all")
    weib = fr.filter(pl.col("model") == "weibull").select("component_class", shape_params="params")
    return (
        fr.filter(pl.col("model") == "exponential")
        .select(
            "component_class", "rate_per_1k_unit_days", "rate_ci_low", "rate_ci_high", "n_events"
        )
        .join(
            fr.filter(pl.col("model") == "weibull").select("component_class", "shape_reading"),
            on="component_class",
        )
        .join(weib, on="component_class", how="left")
    )


def score(fr: pl.DataFrame) -> dict[str, dict]:
    """Per class: rate covered by its CI, ratio to truth, shape covered, labelled wear-out."""
    out = {}
    for r in fr.iter_rows(named=True):
        shape, scale = LAWS[r["component_class"]]
        truth = true_rate_per_1k_unit_days(shape, scale)
        p = json.loads(r["shape_params"])["shape"] if r["shape_params"] else None
        out[r["component_class"]] = {
            "rate": r["rate_per_1k_unit_days"],
            "ratio": r["rate_per_1k_unit_days"] / truth if truth else None,
            "rate_covered": (r["rate_ci_low"] <= truth <= r["rate_ci_high"]) if truth else None,
            "shape_covered": p is not None and p["ci_low"] <= shape <= p["ci_high"],
            "wearout": (r["shape_reading"] or "").startswith("increasing"),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--units", type=int, default=4000)
    args = ap.parse_args()
    runs = {True: [], False: []}
    for seed in range(args.seeds):
        inv = survivor_inventory(LAWS, args.units, seed)
        for windowed in (True, False):
            runs[windowed].append(score(fit(inv, windowed)))
    print(
        f"{args.seeds} seeds, {args.units} units per class before the export drops the units "
        "failed before the window"
    )
    print(
        f"{'class':6s} {'window':>16s} {'rate/truth':>10s} {'rate-cov':>8s} {'shape-cov':>9s} "
        f"{'wear-out':>8s}"
    )
    for windowed, label in ((True, "--observed-from"), (False, "earliest record")):
        for cls in LAWS:
            rs = [r[cls] for r in runs[windowed]]
            ratio = [r["ratio"] for r in rs if r["ratio"] is not None]
            rc = [r["rate_covered"] for r in rs if r["rate_covered"] is not None]
            print(
                f"{cls:6s} {label:>16s} {np.median(ratio) if ratio else float('nan'):10.2f} "
                f"{(f'{sum(rc)}/{len(rc)}' if rc else '-'):>8s} "
                f"{sum(r['shape_covered'] for r in rs):>4d}/{len(rs):<4d} "
                f"{sum(r['wearout'] for r in rs):>4d}/{len(rs)}"
            )
    n = args.seeds
    for cls, (shape, _) in LAWS.items():
        rs = [r[cls] for r in runs[True]]
        if shape == 1.0:
            cov = sum(r["rate_covered"] for r in rs)
            target(
                f"survivor-only inventory, {cls} rate 95% CI covers the truth in >= 90% of seeds",
                cov >= 0.9 * n,
                f"{cov}/{n}",
            )
            wear = sum(r["wearout"] for r in rs)
            target(
                f"survivor-only inventory, constant-hazard {cls} labelled wear-out in <= 10% of "
                "seeds",
                wear <= 0.1 * n,
                f"{wear}/{n}",
            )
        cov = sum(r["shape_covered"] for r in rs)
        target(
            f"survivor-only inventory, {cls} Weibull shape 95% CI covers {shape} in >= 90% "
            "of seeds",
            cov >= 0.9 * n,
            f"{cov}/{n}",
        )


if __name__ == "__main__":
    run_benchmark(main)
