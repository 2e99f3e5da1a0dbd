"""Recovery of truth: do the 95% CIs of the Weibull fit cover the true shape and scale, and the
Weibull row's rate CI the rate the units showed?

    python -m benchmarks.validate_survival_coverage [--seeds 20] [--units 3000]

Simulates left-truncated, right-censored Weibull lifetimes (installs spread over two years
before and during a one-year observation window, random removals) for classes with known
shape / scale, fits them with ``analysis.survival.failure_rates`` and reports, per class, the
fraction of seeds whose 95% CIs contain the true shape and the true scale (target >= 90%), how
often AIC prefers Weibull over Exponential (expected always when the shape is far from 1), and
how often the Weibull row's rate CI holds the true law's rate over the units' own spans (its
expected failures there / their exposure; target >= 90% per class).
Exits non-zero when a target is missed.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from analysis import survival as sv
from analysis.lifetime_models.weibull import Weibull
from analysis.survival.common import lifetime_sample
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.lifetimes import simulate_lifetimes

LAWS = {
    "infant": (0.6, 20_000.0),
    "random": (1.0, 15_000.0),
    "wearout": (2.0, 6_000.0),
    "steep": (3.0, 9_000.0),
}


def main() -> None:
    args = options(seeds=20, units=3000)
    hits = {c: {"shape": 0, "scale": 0, "both": 0, "aic_weibull": 0, "rate": 0} for c in LAWS}
    for seed in range(args.seeds):
        lt = simulate_lifetimes(
            LAWS, args.units, np.random.default_rng(seed), removal_rate_per_hour=1 / 40_000
        )
        fr = sv.failure_rates(lt, window=None).filter(pl.col("stratum") == "all")
        for cls, (shape, scale) in LAWS.items():
            rows = fr.filter(pl.col("component_class") == cls)
            aic = dict(rows.select("model", "aic").iter_rows())
            p = json.loads(rows.filter(pl.col("model") == "weibull")["params"][0])
            ks = p["shape"]["ci_low"] <= shape <= p["shape"]["ci_high"]
            ls = p["scale_hours"]["ci_low"] <= scale <= p["scale_hours"]["ci_high"]
            hits[cls]["shape"] += ks
            hits[cls]["scale"] += ls
            hits[cls]["both"] += ks and ls
            hits[cls]["aic_weibull"] += aic["weibull"] < aic["exponential"]
            spans = lifetime_sample(lt.filter(pl.col("component_class") == cls))
            truth = Weibull(shape=shape, scale_hours=scale).expected_failures(spans)
            truth *= HOURS_PER_1K_UNIT_DAYS / spans.exposure
            wb = rows.filter(pl.col("model") == "weibull").row(0, named=True)
            hits[cls]["rate"] += wb["rate_ci_low"] <= truth <= wb["rate_ci_high"]
    ok = True
    print(
        f"{'class':8s} {'shape':>5s} {'scale':>9s}  shape-cov scale-cov  both  AIC weibull<exp  "
        f"rate-cov   ({args.seeds} seeds, {args.units} units/class before truncation)"
    )
    for cls, (shape, scale) in LAWS.items():
        h = {k: v / args.seeds for k, v in hits[cls].items()}
        far = abs(shape - 1) >= 0.4
        print(
            f"{cls:8s} {shape:5.1f} {scale:9.0f}  {h['shape']:9.0%} {h['scale']:9.0%} "
            f"{h['both']:5.0%}  {h['aic_weibull']:14.0%}  {h['rate']:8.0%}"
            f"{'  (shape far from 1)' if far else ''}"
        )
        ok &= h["shape"] >= 0.9 and h["scale"] >= 0.9 and (not far or h["aic_weibull"] == 1.0)
        ok &= h["rate"] >= 0.9
    target(
        "95% Weibull shape, scale and rate CI coverage >= 90% per class; AIC picks Weibull when "
        "shape is far from 1",
        ok,
        f"{args.seeds} seeds",
    )


if __name__ == "__main__":
    run_benchmark(main)
