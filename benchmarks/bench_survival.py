"""Time the survival fits on a 1M-unit fleet (target: under 10 s on a 2-core machine).

    python -m benchmarks.bench_survival [--units 1000000] [--no-windows]

Prints the time of each step: exposure-table rates + the four candidates per class / stratum
(vectorized MLE over every unit), monthly windows, KM / NA / Aalen-Johansen curves, Cox PH
(on a random subsample of ``COX_MAX_UNITS`` per class).
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from analysis import survival as sv
from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.lifetimes import simulate_lifetimes

LAWS = {
    "gpu": (0.7, 60_000.0),
    "gpu_memory": (1.0, 150_000.0),
    "nvlink": (1.0, 400_000.0),
    "nic": (1.2, 200_000.0),
    "psu": (2.0, 40_000.0),
    "host_memory": (0.9, 300_000.0),
    "cooling": (1.5, 80_000.0),
    "storage": (1.1, 250_000.0),
}


def main() -> None:
    args = options(units=1_000_000, no_windows=False)
    t = time.perf_counter()
    lt = simulate_lifetimes(
        LAWS,
        args.units // len(LAWS) * 5 // 4,
        np.random.default_rng(0),
        removal_rate_per_hour=1 / 50_000,
    )
    lt = lt.head(args.units).with_columns(
        temp_mean=pl.col("temp_mean") + (pl.col("event").cast(pl.Float64))
    )
    print(
        f"simulated {lt.height:,} units, {int(lt['event'].sum()):,} failures in "
        f"{time.perf_counter() - t:.1f} s"
    )
    notes: list[str] = []
    steps = {
        "failure_rates (whole period)": lambda: sv.failure_rates(lt, None, notes),
        "failure_rates (monthly windows)": lambda: sv.failure_rates(lt, "month", notes),
        "survival_curves (KM, NA, AJ)": lambda: sv.survival_curves(lt, notes),
        "hazard_ratios (Cox + PH test)": lambda: sv.hazard_ratios(lt, notes),
    }
    if args.no_windows:
        steps.pop("failure_rates (monthly windows)")
    for name, fn in steps.items():  # the breakdown, one step at a time
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        dt, dc = time.perf_counter() - t, time.process_time() - c
        print(f"{name:34s} {dt:7.2f} s wall {dc:7.2f} s cpu  ({out.height:,} rows)", flush=True)
    window = None if args.no_windows else "month"
    t, c = time.perf_counter(), time.process_time()
    sv.fit_all(lt, window)  # what the pipeline runs: the steps side by side
    total, cpu_total = time.perf_counter() - t, time.process_time() - c
    print(
        f"fit_all total (windows={'off' if args.no_windows else 'month'}): {total:.2f} s "
        f"wall, {cpu_total:.2f} s cpu "
        f"for {lt.height:,} units"
    )
    target(f"fit_all on {lt.height:,} units < 10 s wall", total < 10, f"{total:.2f} s")
    for n in notes:
        print("note:", n)


if __name__ == "__main__":
    run_benchmark(main)
