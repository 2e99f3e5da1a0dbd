"""What fail-slow GPUs cost a synchronous job on N GPUs, and what detecting them is worth.

A GPU starts running slow as a Poisson process at ``rate`` per GPU-hour (the ``fail_slow`` row
of ``failure_rates``, ``analysis.slowness.rates``) and stays slow for a time D drawn from that
row's duration law, unless it is detected and replaced ``detect`` hours after it started. A
synchronous job runs at the speed of its slowest rank: while any of its GPUs is slow it runs
``factor`` times slower. Closed forms (each episode independent of the others):

* one episode slows the job for E[min(D, T)] = integral of the law's survival from 0 to T
  (its mean when never detected);
* the job's slow GPUs at a moment are the busy servers of an M/G/inf queue: Poisson with mean
  L = N x rate x E[min(D, T)], whatever the law, so the job runs slow a share 1 - e^-L of its
  compute time and loses (1 - e^-L)(1 - 1 / factor) of it;
* each episode still running at T is a replacement: N x rate x S(T) per hour, an interruption
  like a fail-stop one (restart, work since the last checkpoint);
* goodput = Daly's useful fraction at the fail-stop rate plus the replacements, times the
  share of compute time at full speed (slowness independent of when failures strike).

``tests/test_fail_slow_at_scale.py`` checks the first three against simulated episodes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.integrate import quad

from analysis import lifetime_models
from analysis.lifetime_models.base import LifetimeModel
from analysis.projection import useful_fraction
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from warehouse.schemas import FAIL_SLOW

# Alibaba FALCON (ATC '25, 10k+ GPUs): fail-slows delay large jobs 1.34x on average; the
# slowdown a job is assumed to run at while one of its GPUs is slow when the warehouse's slow
# periods measure none
FALCON_SLOWDOWN = 1.34


@dataclass(frozen=True)
class FailSlow:
    rate: float  # episodes per GPU-hour
    duration: LifetimeModel  # of an episode, hours
    factor: float = FALCON_SLOWDOWN  # the job's slowdown while one of its GPUs is slow
    factor_source: str = "Alibaba FALCON's mean (ATC '25)"


def slowed_hours(duration: LifetimeModel, detect_hours: float | None) -> float:
    """E[min(D, T)]: hours one episode slows a job (``detect_hours`` None: never detected)."""
    if detect_hours is None or math.isinf(detect_hours):
        return float(duration.mean())
    if detect_hours <= 0:
        return 0.0
    value, _ = quad(lambda t: float(duration.sf(np.array([t]))[0]), 0.0, detect_hours, limit=200)
    return value


def slow_gpus(n_gpus, fs: FailSlow, detect_hours: float | None) -> np.ndarray:
    """L: the mean number of a job's GPUs slow at once."""
    return np.asarray(n_gpus, float) * fs.rate * slowed_hours(fs.duration, detect_hours)


def slow_share(n_gpus, fs: FailSlow, detect_hours: float | None) -> np.ndarray:
    """The share of a job's compute time during which at least one of its GPUs is slow."""
    return -np.expm1(-slow_gpus(n_gpus, fs, detect_hours))


def lost_share(n_gpus, fs: FailSlow, detect_hours: float | None) -> np.ndarray:
    """The share of a job's compute time lost running slow."""
    return slow_share(n_gpus, fs, detect_hours) * (1.0 - 1.0 / fs.factor)


def replacements_per_hour(n_gpus, fs: FailSlow, detect_hours: float | None) -> np.ndarray:
    """Slow GPUs detected and replaced per hour of a job (each an interruption)."""
    if detect_hours is None or math.isinf(detect_hours):
        return np.zeros_like(np.asarray(n_gpus, float))
    survive = float(fs.duration.sf(np.array([max(detect_hours, 0.0)]))[0])
    return np.asarray(n_gpus, float) * fs.rate * survive


def goodput(
    n_gpus,
    fs: FailSlow,
    detect_hours: float | None,
    mtti_hours,
    interval_hours,
    ckpt_hours: float,
    restart_hours: float,
) -> np.ndarray:
    """Goodput of a job whose fail-stop interruptions come every ``mtti_hours`` with fail-slow
    GPUs detected after ``detect_hours`` (module docstring)."""
    lam = 1.0 / np.asarray(mtti_hours, float) + replacements_per_hour(n_gpus, fs, detect_hours)
    full = useful_fraction(interval_hours, ckpt_hours, restart_hours, 1.0 / lam)
    return full * (1.0 - lost_share(n_gpus, fs, detect_hours))


def from_warehouse(failure_rates: pl.DataFrame, slow_periods: pl.DataFrame) -> FailSlow | None:
    """The fleet's fail-slow process: the rate and duration law of the selected ``fail_slow``
    row of ``failure_rates`` (None without one, or without a fitted law), and the slowdown the
    slow periods pinned on a GPU measured (their wall time over the work done in it), else
    ``FALCON_SLOWDOWN``."""
    rows = failure_rates.filter(
        (pl.col("component_class") == FAIL_SLOW)
        & pl.col("selected").fill_null(False)
        & pl.col("model").is_not_null()
    )
    if rows.height == 0:
        return None
    row = rows.row(0, named=True)
    law = lifetime_models.get(row["model"]).from_params(row["params"])
    out = FailSlow(rate=row["rate_per_1k_unit_days"] / HOURS_PER_1K_UNIT_DAYS, duration=law)
    pinned = slow_periods.filter(pl.col("culprit_gpu").is_not_null())
    wall = float(pinned["duration_hours"].sum()) if pinned.height else 0.0
    work = wall - float(pinned["extra_hours"].sum()) if pinned.height else 0.0
    if wall > 0 and 0 < work < wall:
        n = pinned.height
        return FailSlow(out.rate, law, wall / work, f"the {n} slow periods pinned on a GPU")
    return out


def detection_rows(
    n_gpus: int, fs: FailSlow, detects: list[float | None], base: dict
) -> list[dict]:
    """Per detection time (hours; None: never): the job's share of compute time slow and lost,
    its replacements per day and its goodput, next to the fail-stop ``base`` (a
    ``goodput_projections`` row: mtti_hours, interval_hours, ckpt_cost_s, restart_s, goodput)."""
    out = []
    for t in detects:
        g = goodput(
            n_gpus, fs, t, base["mtti_hours"], base["interval_hours"],
            base["ckpt_cost_s"] / 3600, base["restart_s"] / 3600,
        )  # fmt: skip
        out.append(
            {
                "detect_hours": t,
                "slow_gpus": float(slow_gpus(n_gpus, fs, t)),
                "slow_share": float(slow_share(n_gpus, fs, t)),
                "lost_share": float(lost_share(n_gpus, fs, t)),
                "replacements_per_day": float(replacements_per_hour(n_gpus, fs, t)) * 24,
                "goodput": float(np.asarray(g).ravel()[0]),
                "goodput_fail_stop": base["goodput"],
            }
        )
    return out
