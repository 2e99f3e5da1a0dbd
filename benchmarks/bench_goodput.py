"""Goodput engine speed: analytic sweep, Monte Carlo replicas, measured goodput.

    .venv/bin/python -m benchmarks.bench_goodput [--scenarios 100000] [--replicas 1000]

Targets (issue 7): 100k analytic scenarios in < 1 s; 1,000 Monte Carlo replicas of a
16,384-GPU, 54-day job in < 30 s on a 2-core machine. Prints best-of-3 wall times.
"""

from __future__ import annotations

import time

import numpy as np
import polars as pl

from analysis.class_rates import ClassRates
from analysis.goodput_measured import measure
from analysis.job import Job
from analysis.lifetime_models.weibull import Weibull
from analysis.montecarlo import simulate
from analysis.projection import daly_interval
from analysis.projection import project
from analysis.rate_sources import llama3_rates
from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target


def best_of(fn, n=3):
    times, out = [], None
    for _ in range(n):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    args = options(scenarios=100_000, replicas=1000, attempts=1_000_000)
    rng = np.random.default_rng(0)
    rates = llama3_rates()

    n = rng.integers(8, 200_001, args.scenarios)
    cost = rng.uniform(5, 600, args.scenarios)
    restart = rng.uniform(60, 3600, args.scenarios)
    job = Job(gpus_per_node=8, ckpt_cost_s=cost, restart_s=restart)  # one scenario per element
    t, p = best_of(lambda: project(rates, job, n, samples=0))
    print(
        f"analytic: {args.scenarios:,} scenarios (Λ(N), Young, Daly, useful fraction) in {t:.3f} "
        f"s; mean goodput {p.goodput.mean():.3f}"
    )
    target(f"{args.scenarios:,} analytic scenarios < 1 s", t < 1, f"{t:.3f} s")
    t, p = best_of(lambda: project(rates, job, n, samples=100), n=1)
    print(f"analytic: {args.scenarios:,} scenarios with 100-draw CI bands in {t:.3f} s")

    m = 54 * 24 / 419
    tau = float(daly_interval(60 / 3600, m))
    cfg = Job(16_384, wall_hours=54 * 24, interval_hours=tau)
    t, res = best_of(lambda: simulate(rates, cfg, replicas=args.replicas, seed=1))
    s = res.summary()
    print(
        f"monte carlo: {args.replicas:,} replicas x 16,384 GPUs x 54 days, exponential, unlimited "
        f"spares: {t:.2f} s; goodput {s['mean']:.4f} [{s['p2_5']:.4f}, {s['p97_5']:.4f}], "
        f"{s['mean_failures']:.0f} failures/job"
    )
    target(f"{args.replicas:,} Monte Carlo replicas < 30 s", t < 30, f"{t:.2f} s")
    shaped = ClassRates(
        rates.classes,
        rates.rate,
        rates.ci_low,
        rates.ci_high,
        laws=tuple(Weibull.unit(0.8 if c in ("gpu", "gpu_sram") else 1.3) for c in rates.classes),
    )
    cfg2 = Job(
        16_384,
        wall_hours=54 * 24,
        interval_hours=tau,
        ckpt_blocking_s=10,
        restart_sigma=0.5,
        requeue_prob=0.1,
        queue_wait_s=1800,
        spares=16,
        repair_hours=24,
        repair_sigma=0.7,
    )
    t, res = best_of(
        lambda: simulate(
            shaped, cfg2, replicas=args.replicas, seed=1, rate_draws=shaped.sample(args.replicas, 2)
        )
    )
    s = res.summary()
    print(
        "monte carlo: same job, Weibull lifetimes, async ckpt, lognormal restarts, 10% requeues, "
        f"16 spares, rate draws: {t:.2f} s; goodput {s['mean']:.4f} [{s['p2_5']:.4f}, "
        f"{s['p97_5']:.4f}]"
    )

    k = args.attempts
    jobs = rng.integers(0, k // 3, k)
    start = (1_767_225_600 + np.sort(rng.integers(0, 10**7, k))) * 1_000_000  # from 2026-01-01
    dur = rng.integers(60, 86_400, k) * 1_000_000
    att = pl.DataFrame(
        {
            "cluster": "c",
            "scheduler": "slurm",
            "job_id": jobs.astype(str),
            "name": "x",
            "user": "u",
            "state": rng.choice(["COMPLETED", "FAILED", "NODE_FAIL"], k),
            "n_gpus": rng.integers(1, 512, k),
            "start_time": pl.Series(start).cast(pl.Datetime("us")),
        }
    ).with_columns(
        (pl.col("start_time") + pl.Series(dur).cast(pl.Duration("us"))).alias("end_time")
    )
    t, out = best_of(lambda: measure(att), n=1)
    print(f"measured goodput: {k:,} attempts -> {out.height:,} job chains in {t:.2f} s")


if __name__ == "__main__":
    run_benchmark(main)
