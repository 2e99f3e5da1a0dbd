"""Training jobs' step times with planted slow episodes and their truth: the input the step-time
analysis (``analysis.slowness.steps``) is validated on (``benchmarks/validate_slow_steps.py``,
``tests/test_slow_steps.py``); ``sample_data.writers.training_log`` writes them as the
frameworks' logs.

A job runs ``n_steps`` steps of ``base_step_s`` each with multiplicative normal noise (its own and
a slow drift); during an
episode every step takes ``factor`` times its healthy time; independently a few steps stall (a
data-loader or garbage-collection stall of 2-10 s) and every ``ckpt_every`` steps a checkpoint
save adds ``ckpt_s`` to one step. Stalls and saves are not slowness: the truth of an episode is
its steps' healthy time x (factor - 1), in seconds and in GPU-hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
from scipy.signal import lfilter

_PHI = 0.995  # the drift's memory: its level holds for some hundreds of steps


@dataclass(frozen=True)
class Episode:
    first_step: int  # 0-based index of its first slow step
    steps: int
    factor: float


@dataclass(frozen=True)
class StepJob:
    job_id: str
    n_gpus: int
    start: datetime
    n_steps: int
    base_step_s: float
    noise: float  # s.d. of a step's time, as a share of the base
    log_interval: int  # steps per logged line
    episodes: tuple[Episode, ...] = ()
    stall_share: float = 0.001  # share of steps that stall
    ckpt_every: int = 0  # a save every so many steps (0: none)
    ckpt_s: float = 0.0
    framework: str = "megatron"  # megatron | torchtitan: the log layout the writer uses
    seed: int = 0
    ranks: int = 0  # > 0: the log has per-rank compute timers, the slow rank named below
    slow_rank: int = 0


def step_durations(job: StepJob) -> tuple[np.ndarray, np.ndarray]:
    """(healthy, actual) seconds of every step."""
    rng = np.random.default_rng(job.seed)
    # noise that drifts (an AR(1) of half the step noise's s.d.: data and system load change
    # slowly) beside the steps' own
    shocks = rng.standard_normal(job.n_steps) * job.noise / 2 * (1 - _PHI**2) ** 0.5
    drift = lfilter([1.0], [1.0, -_PHI], shocks)
    healthy = job.base_step_s * (1 + job.noise * rng.standard_normal(job.n_steps) + drift)
    factor = np.ones(job.n_steps)
    for ep in job.episodes:
        factor[ep.first_step : ep.first_step + ep.steps] = ep.factor
    stalls = np.where(rng.random(job.n_steps) < job.stall_share, rng.uniform(2, 10, job.n_steps), 0)
    actual = healthy * factor + stalls
    if job.ckpt_every:
        actual[job.ckpt_every - 1 :: job.ckpt_every] += job.ckpt_s
    return healthy, actual


def log_lines(job: StepJob) -> pl.DataFrame:
    """One row per logged line: the iteration it reports, when it was logged (the end of its
    interval) and the mean seconds per step over its interval."""
    _, actual = step_durations(job)
    n = job.n_steps // job.log_interval * job.log_interval
    per_line = actual[:n].reshape(-1, job.log_interval)
    ends = np.cumsum(per_line.sum(axis=1))
    return pl.DataFrame(
        {
            "iteration": np.arange(1, len(ends) + 1) * job.log_interval,
            "time": [job.start + timedelta(seconds=float(s)) for s in ends],
            "step_s": per_line.mean(axis=1),
        }
    )


def truth(job: StepJob) -> pl.DataFrame:
    """One row per episode: its start and end, factor, extra seconds and slow GPU-hours, and
    whether the job's log ends inside it (persistent)."""
    healthy, actual = step_durations(job)
    starts = np.concatenate([[0.0], np.cumsum(actual)])
    rows = []
    for i, ep in enumerate(job.episodes):
        last = ep.first_step + ep.steps
        extra = float(healthy[ep.first_step : last].sum() * (ep.factor - 1))
        rows.append(
            {
                "job_id": job.job_id,
                "episode": i + 1,
                "start_time": job.start + timedelta(seconds=float(starts[ep.first_step])),
                "end_time": job.start + timedelta(seconds=float(starts[last])),
                "first_iteration": ep.first_step + 1,
                "last_iteration": last,
                "factor": ep.factor,
                "extra_s": extra,
                "slow_gpu_hours": extra / 3600 * job.n_gpus,
                "persistent": last >= job.n_steps // job.log_interval * job.log_interval,
            }
        )
    return pl.DataFrame(
        rows,
        schema={
            "job_id": pl.Utf8,
            "episode": pl.Int64,
            "start_time": pl.Datetime("us"),
            "end_time": pl.Datetime("us"),
            "first_iteration": pl.Int64,
            "last_iteration": pl.Int64,
            "factor": pl.Float64,
            "extra_s": pl.Float64,
            "slow_gpu_hours": pl.Float64,
            "persistent": pl.Boolean,
        },
    )


def random_jobs(n: int, seed: int, slow: bool, first_id: int = 700000) -> list[StepJob]:
    """``n`` jobs of 4 to 36 hours on 8 to 4,096 GPUs, logged every 1 to 20 steps, half of them
    in torchtitan's layout; with ``slow``, each has one to three episodes of 20 minutes to 6
    hours slowed 1.1x to 2.5x (some still running when the log ends)."""
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n):
        base = float(rng.uniform(1.0, 8.0))
        n_steps = int(rng.uniform(4, 36) * 3600 / base)
        interval = int(rng.choice([1, 5, 10, 20]))
        episodes = _episodes(rng, n_steps, base, interval) if slow else ()
        jobs.append(
            StepJob(
                job_id=str(first_id + i),
                n_gpus=int(rng.choice([8, 64, 256, 1024, 4096])),
                start=datetime(2026, 1, 5) + timedelta(hours=float(rng.uniform(0, 24 * 20))),
                n_steps=n_steps,
                base_step_s=base,
                noise=float(rng.uniform(0.005, 0.03)),
                log_interval=interval,
                episodes=episodes,
                ckpt_every=int(rng.choice([0, 500, 2000])),
                ckpt_s=float(rng.uniform(5, 60)),
                framework="torchtitan" if i % 2 else "megatron",
                seed=seed * 1000 + i,
            )
        )
    return jobs


def _episodes(rng, n_steps: int, base: float, interval: int) -> tuple[Episode, ...]:
    """One to three episodes, apart from each other and from the log's first line."""
    out: list[Episode] = []
    lo = 2 * interval  # the log's first line has no interval to compare
    for _ in range(int(rng.integers(1, 4))):
        steps = max(1, int(rng.uniform(20 * 60, 6 * 3600) / base))
        if lo + steps > n_steps:
            break
        to_end = rng.random() < 0.15
        first = n_steps - steps if to_end else int(rng.integers(lo, n_steps - steps + 1))
        gap = interval * 4
        if any(
            first < e.first_step + e.steps + gap and e.first_step < first + steps + gap for e in out
        ):
            continue
        out.append(Episode(first, steps, float(rng.uniform(1.1, 2.5))))
    return tuple(sorted(out, key=lambda e: e.first_step))
