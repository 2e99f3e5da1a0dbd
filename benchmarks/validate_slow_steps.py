"""Slow periods from training logs (``analysis.slowness.steps``) against planted truth, and the
training-log parser's speed on a log of a million iterations.

    python -m benchmarks.validate_slow_steps [--jobs 20] [--seeds 3] [--iterations 1000000]

Per seed, ``--jobs`` jobs with one to three slow episodes of known start, end and factor and as
many without (``sample_data.slow_steps.random_jobs``: 4-36 h, 8-4,096 GPUs, step noise with
drift, stalls and checkpoint saves; half logged as Megatron-LM, half as torchtitan) are written
as logs (``sample_data.writers.training_log``), ingested into a fresh warehouse
(``goodput ingest``'s runner) and analysed. Targets: slow GPU-hours within 5% of the truth over
the slow jobs of every seed; a slow period claimed in <= 5% of the jobs without slowness; and a
Megatron-LM log of ``--iterations`` step lines (with its min/max timer blocks every 100) parsed
in < 10 s on 2 cores, read in chunks as the runner reads it.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from datetime import datetime
from pathlib import Path

import polars as pl

from analysis.slowness.steps import slow_periods
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from ingest.formats.training_log import FORMAT
from ingest.parsing import parse_file
from ingest.runner import ingest_paths
from sample_data.slow_steps import StepJob
from sample_data.slow_steps import log_lines
from sample_data.slow_steps import random_jobs
from sample_data.slow_steps import truth
from sample_data.writers.training_log import megatron
from sample_data.writers.training_log import write
from warehouse.store import Warehouse

WITHIN = 0.05
CLAIMS = 0.05
PARSE_S = 10.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def one_seed(seed: int, n: int, work: Path) -> dict:
    slow = random_jobs(n, seed, slow=True)
    clean = random_jobs(n, seed + 10_000, slow=False, first_id=800_000)
    jobs = slow + clean
    logs = work / f"logs-{seed}"
    for job in jobs:
        write(job, logs)
    wh = Warehouse(work / f"home-{seed}")
    ingest_paths(wh, [logs], "auto", ParseContext())
    gpus = pl.DataFrame(
        {
            "cluster": ["default"] * len(jobs),
            "job_id": [j.job_id for j in jobs],
            "n_gpus": [j.n_gpus for j in jobs],
        },
        schema={"cluster": pl.Utf8, "job_id": pl.Utf8, "n_gpus": pl.Int32},
    )
    periods, _ = slow_periods(
        wh.read("training_steps"), gpus, wh.read("step_timers"), wh.read("rank_scores")
    )
    true = pl.concat([truth(j) for j in slow])
    slow_ids = {j.job_id for j in slow}
    found = periods.filter(pl.col("job_id").is_in(slow_ids))
    per_job = (
        true.group_by("job_id")
        .agg(pl.col("slow_gpu_hours").sum().alias("true"))
        .join(
            found.group_by("job_id").agg(pl.col("slow_gpu_hours").sum().alias("est")),
            on="job_id",
            how="left",
        )
        .with_columns(pl.col("est").fill_null(0.0))
    )
    # an episode is found when a period of its job overlaps it
    hits = true.join(found, on="job_id", suffix="_p").filter(
        (pl.col("start_time_p") < pl.col("end_time"))
        & (pl.col("end_time_p") > pl.col("start_time"))
    )
    return {
        "true": float(true["slow_gpu_hours"].sum()),
        "est": float(found["slow_gpu_hours"].sum()),
        "jobs_within": int((abs(per_job["est"] / per_job["true"] - 1) <= WITHIN).sum()),
        "slow_jobs": len(slow),
        "episodes": true.height,
        "found": hits.select("job_id", "episode").unique().height,
        "claimed_clean": periods.filter(~pl.col("job_id").is_in(slow_ids))["job_id"].n_unique(),
        "clean_jobs": len(clean),
        "rows": wh.read("training_steps").height,
    }


def parse_speed(iterations: int, work: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, rows) of the runner's chunked parse of a Megatron-LM log of
    ``iterations`` step lines."""
    job = StepJob(
        job_id="900001",
        n_gpus=1024,
        start=datetime(2026, 1, 5),
        n_steps=iterations,
        base_step_s=3.58,
        noise=0.01,
        log_interval=1,
        seed=1,
    )
    lines = megatron(job, log_lines(job)).splitlines()
    timers = [
        "(min, max) time across ranks (ms):",
        "    forward-backward ...............................: (3561.68, 3562.21)",
        "    optimizer ......................................: (12.01, 12.40)",
    ]
    path = work / "train-900001.out"
    with open(path, "w") as fh:
        for i, line in enumerate(lines):
            fh.write(line + "\n")
            if i and i % 100 == 0:
                fh.write("\n".join(timers) + "\n")
    print(f"log: {path.stat().st_size / 2**20:.0f} MiB, {iterations:,} iterations")
    rows = 0
    t0, c0 = time.perf_counter(), _cpu()
    with open(path, "rb") as fh:
        for _, res in parse_file(fh, path.name, FORMAT, ParseContext(path=str(path))):
            rows += res.tables["training_steps"].height
    return time.perf_counter() - t0, _cpu() - c0, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20, help="slow jobs per seed (and as many clean)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=1_000_000)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        work = Path(tmp)
        results = []
        print(
            "seed  slow GPU-h true   estimated   error   jobs within 5%   episodes found   "
            "clean claimed"
        )
        for seed in range(1, args.seeds + 1):
            r = one_seed(seed, args.jobs, work)
            results.append(r)
            error = r["est"] / r["true"] - 1
            print(
                f"{seed:4}  {r['true']:14,.1f}  {r['est']:10,.1f}  {error:+6.2%}   "
                f"{r['jobs_within']:3}/{r['slow_jobs']:<3}          "
                f"{r['found']:3}/{r['episodes']:<3}          {r['claimed_clean']}/{r['clean_jobs']}"
            )
        worst = max(abs(r["est"] / r["true"] - 1) for r in results)
        target(
            f"slow GPU-hours within {WITHIN:.0%} of the truth in every seed "
            f"({args.seeds} x {args.jobs} slow jobs)",
            worst <= WITHIN,
            f"largest error {worst:.2%}",
        )
        claimed = sum(r["claimed_clean"] for r in results)
        clean = sum(r["clean_jobs"] for r in results)
        target(
            f"a slow period claimed in <= {CLAIMS:.0%} of jobs without slowness",
            claimed <= CLAIMS * clean,
            f"{claimed} of {clean} jobs",
        )
        wall, cpu, rows = parse_speed(args.iterations, work)
        target(
            f"a step log of {args.iterations:,} iterations parses in < {PARSE_S:.0f} s on 2 cores",
            wall < PARSE_S and rows == args.iterations,
            f"{wall:.1f} s wall, {cpu:.1f} CPU-s, {rows:,} steps, load {os.getloadavg()[0]:.1f}",
        )


if __name__ == "__main__":
    run_benchmark(main)
