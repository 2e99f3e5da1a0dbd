"""The rates a projection uses, against the truth of many simulated fleets.

    python -m benchmarks.validate_fleets [--seeds 15] [--sizes 16 128] [--days 60]

Each fleet (``sample_data.simulation.simulate``, Llama 3 cause mix, seeds x sizes) goes through
the product's own chain: ingest of every file, the telemetry refreshers, unit lifetimes
(``analysis.lifetimes``), the fit table (``analysis.survival.failure_rates``) and the rates a
projection takes from it (``analysis.rate_sources.rates_from_failure_rates``). Truth per class is
the simulator's ``true_rate_per_1k_unit_days``: its expected failures over the exposure it
simulated in the window (for a Weibull class, the stationary rate those units had then).

TARGETs, pooled over fleets and classes with at least one expected failure:
- the fit table's rate CI covers the truth in 93-97% of (fleet, class) cases (consistent with:
  the exact binomial 95% interval of the measured share overlaps 93-97%);
- the projected rate's 95% band (the 2.5 and 97.5% quantiles of the draws a projection uses)
  covers the truth in >= 90%;
- the projected point is the printed one: the table's rate (or the selected model's 1 / mean)
  and never below half the observed rate where the table prints the observed rate.
Per class, the coverage and the median ratio projected / truth are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl
from scipy.stats import beta

from benchmarks.targets import run_benchmark
from benchmarks.targets import target

MIN_EXPECTED = 1.0  # classes with fewer expected failures in the window have nothing to cover


def binomial_interval(k: int, n: int) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 95% interval of a share k / n."""
    lo = float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0
    hi = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def fleet_rates(fleet: Path, home: Path) -> tuple[dict, pl.DataFrame, object]:
    """(ground truth, failure_rates, projection ClassRates) of one simulated fleet."""
    from analysis.rate_sources import rates_from_failure_rates
    from analysis.survival import failure_rates
    from benchmarks.validate_attribution import fleet_lifetimes
    from benchmarks.validate_attribution import ingest_fleet

    gt = json.loads((fleet / "ground_truth.json").read_text())
    wh = ingest_fleet(fleet, home)
    lt = fleet_lifetimes(wh, gt)
    fr = failure_rates(lt, window=None)
    return gt, fr, rates_from_failure_rates(fr)


def score(gt: dict, fr: pl.DataFrame, rates) -> list[dict]:
    """One row per class with enough expected failures: truth, table CI, projected band."""
    from analysis.headline import selected_rates as selected
    from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS

    table = {r["component_class"]: r for r in selected(fr).iter_rows(named=True)}
    draws = rates.sample(4000, 0) * HOURS_PER_1K_UNIT_DAYS  # (n, classes) per 1k unit-days
    out = []
    for cls, law in gt["laws"].items():
        if law["expected_failures"] < MIN_EXPECTED:
            continue
        truth = law["true_rate_per_1k_unit_days"]
        row = table.get(cls)
        if row is None or cls not in rates.classes:
            out.append(
                {
                    "class": cls,
                    "truth": truth,
                    "table_covered": False,
                    "band_covered": False,
                    "projected": float("nan"),
                    "observed": float("nan"),
                    "model": None,
                }
            )
            continue
        i = rates.classes.index(cls)
        lo, hi = np.quantile(draws[:, i], [0.025, 0.975])
        projected = float(rates.rate[i]) * HOURS_PER_1K_UNIT_DAYS
        out.append({
            "class": cls,
            "truth": truth,
            "table_covered": bool(row["rate_ci_low"] <= truth <= row["rate_ci_high"]),
            "band_covered": bool(lo <= truth <= hi),
            "projected": projected,
            "observed": row["rate_per_1k_unit_days"],
            "model": row["model"],
        })  # fmt: skip
    return out


def main(argv=None) -> None:
    from pipelines.cli.sample import llama3_cause_mix
    from sample_data.simulation import simulate

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=15, help="fleets per size")
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--days", type=float, default=60.0)
    args = ap.parse_args(argv)
    rows = []
    root = Path(tempfile.mkdtemp(prefix="validate-fleets-"))
    try:
        for nodes in args.sizes:
            for seed in range(args.seeds):
                t = time.perf_counter()
                fleet, home = root / f"fleet-{nodes}-{seed}", root / f"home-{nodes}-{seed}"
                simulate(fleet, llama3_cause_mix(), nodes=nodes, days=args.days, seed=100 + seed)
                gt, fr, rates = fleet_rates(fleet, home)
                got = score(gt, fr, rates)
                rows += [r | {"nodes": nodes, "seed": seed} for r in got]
                miss = [r["class"] for r in got if not r["band_covered"]]
                print(
                    f"{nodes:>4} nodes seed {seed:>2}: {len(got)} classes, band misses "
                    f"{', '.join(miss) or 'none'} ({time.perf_counter() - t:.0f} s)",
                    flush=True,
                )
                shutil.rmtree(fleet), shutil.rmtree(home)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    df = pl.DataFrame(rows)
    print("\nclass         cases  table CI covers  projected band covers  median projected/truth")
    for cls, g in df.group_by("class", maintain_order=True):
        ratio = (g["projected"] / g["truth"]).median()
        print(f"{cls[0]:<13} {g.height:>5}  {g['table_covered'].mean():>15.1%}  "
              f"{g['band_covered'].mean():>21.1%}  {ratio:>22.3f}")  # fmt: skip
    n = df.height
    k_table, k_band = int(df["table_covered"].sum()), int(df["band_covered"].sum())
    lo, hi = binomial_interval(k_table, n)
    target(
        "fit table rate CI covers the truth 93-97% (exact 95% interval of the share overlaps)",
        lo <= 0.97 and hi >= 0.93,
        f"{k_table}/{n} = {k_table / n:.1%}, interval {lo:.1%}-{hi:.1%}",
    )
    target("projected rate band covers the truth >= 90%", k_band / n >= 0.90,
           f"{k_band}/{n} = {k_band / n:.1%}")  # fmt: skip
    obs = df.filter(pl.col("model") == "exponential")
    collapsed = obs.filter(pl.col("projected") < 0.5 * pl.col("observed")).height
    target("where the table prints the observed rate, the projection never uses < 1/2 of it",
           collapsed == 0, f"{collapsed} of {obs.height} cases")  # fmt: skip


if __name__ == "__main__":
    run_benchmark(main)
