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
from dataclasses import replace

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.class_rates import ci_draws
from analysis.lifetime_models.base import LifetimeModel
from analysis.numbers import mean_time
from analysis.projection import useful_fraction
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from warehouse.schemas import FAIL_SLOW

# the random stream of the fail-slow rate's draws (beside the fail-stop classes' own)
FAIL_SLOW_STREAM = 1

# the interruption class of a slow GPU replaced at detection (the Monte Carlo's failure stream)
REPLACED = "fail_slow_replaced"

# Alibaba FALCON (ATC '25, 10k+ GPUs): fail-slows delay large jobs 1.34x on average; the
# slowdown a job is assumed to run at while one of its GPUs is slow when the warehouse's slow
# periods measure none
FALCON_SLOWDOWN = 1.34


@dataclass(frozen=True)
class FailSlow:
    """The fleet's fail-slow process, as ``ClassRates.fail_slow`` carries it into every
    projection (``analysis.projection.project``, the Monte Carlo)."""

    rate: float  # episodes per GPU-hour (an array of draws in ``at_rate_draws``'s copies)
    duration: LifetimeModel  # of an episode, hours
    factor: float = FALCON_SLOWDOWN  # the job's slowdown while one of its GPUs is slow
    factor_source: str = "Alibaba FALCON's mean (ATC '25)"
    rate_ci: tuple[float, float] | None = None  # the rate's 95% bounds, per GPU-hour

    def at_rate_draws(self, n: int, seed: int) -> FailSlow | None:
        """This process with ``rate`` an (n, 1) array of draws from its CI (``ci_draws``, a
        stream of its own for ``seed``: projections with the same seed draw the same rates),
        for the bands of projections; None without a CI."""
        if self.rate_ci is None:
            return None
        rng = np.random.default_rng((seed, FAIL_SLOW_STREAM))
        rates = ci_draws(np.array([self.rate]), *(np.array([b]) for b in self.rate_ci), n, rng)
        return replace(self, rate=rates)

    def lost_share(self, n_gpus, detect_hours: float | None) -> np.ndarray:
        return lost_share(n_gpus, self, detect_hours)

    def replacements_per_hour(self, n_gpus, detect_hours: float | None) -> np.ndarray:
        return replacements_per_hour(n_gpus, self, detect_hours)

    def slow_fraction(self, n_gpus: int, detect_hours: float | None, hours, rng) -> np.ndarray:
        return slow_fraction(n_gpus, self, detect_hours, hours, rng)


def slowed_hours(duration: LifetimeModel, detect_hours: float | None) -> float:
    """E[min(D, T)]: hours one episode slows a job (``detect_hours`` None: never detected)."""
    if detect_hours is None or math.isinf(detect_hours):
        return float(duration.mean())
    if detect_hours <= 0:
        return 0.0
    # imported here: every projection imports this module, the quick commands no scipy
    from scipy.integrate import quad

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


# an episode never detected is followed to this quantile of its law: the episodes that start
# before a simulated window and still run in it (the window starts in the stationary state)
_TAIL_Q = 0.9999


def slow_fraction(n_gpus: int, fs: FailSlow, detect_hours: float | None, hours, rng) -> np.ndarray:
    """Per simulated job (``hours``: each one's window), the share of its window during which
    at least one of its ``n_gpus`` GPUs is slow: episodes start as a Poisson process at
    ``n_gpus`` x rate (from before the window, so it starts in the stationary state) and last
    min(D, T). All jobs' episodes at once: sorted by job and start, the union of each job's
    intervals is the sum of each episode's part past the latest end before it."""
    hours = np.asarray(hours, float)
    never = detect_hours is None or math.isinf(detect_hours)
    tail = fs.duration.inverse_cumulative_hazard(np.array([-math.log1p(-_TAIL_Q)]))
    lead = float(tail[0]) if never else float(detect_hours)
    span = hours + lead
    per_hour = n_gpus * fs.rate
    count = rng.poisson(per_hour * span)
    job = np.repeat(np.arange(hours.size), count)
    start = rng.random(job.size) * span[job] - lead
    dur = fs.duration.sample(job.size, rng)
    if not never:
        dur = np.minimum(dur, detect_hours)
    lo = np.clip(start, 0.0, hours[job])
    hi = np.clip(start + dur, 0.0, hours[job])
    # each job's times shifted past the one before it, so one running maximum serves them all
    shift = np.concatenate([[0.0], np.cumsum(hours + 1.0)[:-1]])[job]
    order = np.lexsort((lo, job))
    lo, hi, job = lo[order] + shift[order], hi[order] + shift[order], job[order]
    before = np.maximum.accumulate(np.concatenate([[-np.inf], hi]))[:-1]
    part = np.clip(hi - np.maximum(lo, before), 0.0, None)
    return np.bincount(job, part, hours.size) / np.where(hours > 0, hours, 1.0)


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
    """The fleet's fail-slow process: the rate, its CI and the duration law of the selected
    ``fail_slow`` row of ``failure_rates`` (None without one, or without a fitted law), and the
    slowdown the slow periods pinned on a GPU measured (their wall time over the work done in
    it), else ``FALCON_SLOWDOWN``."""
    rows = failure_rates.filter(
        (pl.col("component_class") == FAIL_SLOW)
        & pl.col("selected").fill_null(False)
        & pl.col("model").is_not_null()
    )
    if rows.height == 0:
        return None
    row = rows.row(0, named=True)
    law = lifetime_models.get(row["model"]).from_params(row["params"])
    bounds = (row["rate_ci_low"], row["rate_ci_high"])
    ci = (
        tuple(b / HOURS_PER_1K_UNIT_DAYS for b in bounds)
        if all(b is not None and math.isfinite(b) for b in bounds)
        else None
    )
    out = FailSlow(row["rate_per_1k_unit_days"] / HOURS_PER_1K_UNIT_DAYS, law, rate_ci=ci)
    pinned = slow_periods.filter(pl.col("culprit_gpu").is_not_null())
    wall = float(pinned["duration_hours"].sum()) if pinned.height else 0.0
    work = wall - float(pinned["extra_hours"].sum()) if pinned.height else 0.0
    if wall > 0 and 0 < work < wall:
        source = f"the {pinned.height} slow periods pinned on a GPU"
        return replace(out, factor=wall / work, factor_source=source)
    return out


def detection_rows(
    n_gpus: int, fs: FailSlow, detects: list[float | None], base: dict
) -> list[dict]:
    """Per detection time (hours; None: never): the job's share of compute time slow and lost,
    its replacements per day and its goodput, next to its goodput without running slow
    (``goodput_without_slow``). ``base`` is a ``goodput_projections`` row (mtti_hours,
    interval_hours, ckpt_cost_s, restart_s, goodput, slow_detect_hours): where it already
    counts fail-slow (slow_detect_hours set), its MTTI less the replacements at that
    detection time is the fail-stop one."""
    counted = base.get("slow_detect_hours")
    lam = 1.0 / base["mtti_hours"]
    if counted is not None and not math.isnan(counted):
        lam -= float(replacements_per_hour(n_gpus, fs, counted))
    ckpt, restart = base["ckpt_cost_s"] / 3600, base["restart_s"] / 3600
    without = (
        base["goodput"]
        if counted is None or math.isnan(counted)
        else float(useful_fraction(base["interval_hours"], ckpt, restart, 1.0 / lam))
    )
    out = []
    for t in detects:
        g = goodput(n_gpus, fs, t, 1.0 / lam, base["interval_hours"], ckpt, restart)
        out.append(
            {
                "detect_hours": t,
                "slow_gpus": float(slow_gpus(n_gpus, fs, t)),
                "slow_share": float(slow_share(n_gpus, fs, t)),
                "lost_share": float(lost_share(n_gpus, fs, t)),
                "replacements_per_day": float(replacements_per_hour(n_gpus, fs, t)) * 24,
                "goodput": float(np.asarray(g).ravel()[0]),
                "goodput_without_slow": without,
            }
        )
    return out


def running_slow_note(row: dict) -> str:
    """What a projection (a ``goodput_projections`` row or ``scenario.evaluate`` result) says of
    running slow: the points of goodput it takes at its detection time, or that fail-slow is
    left out for want of a measured rate."""
    lost, t = row.get("slow_lost_share"), row.get("slow_detect_hours")
    if lost is None or t is None or math.isnan(lost):
        return "fail-slow not included (no fail_slow rate in failure_rates)"
    when = "never detected" if math.isinf(t) else f"at detection in {mean_time(t)}"
    points = 100 * (row["goodput"] - row["goodput_fail_stop"])
    return f"includes running slow: {points:+.1f} points {when}"
