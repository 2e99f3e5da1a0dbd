"""Analytic goodput projection for a job on N GPUs from per-class failure rates.

Model (docs/design.md, goodput model):
- Job interruption rate Λ(N) = Σ_c n_c(N)·λ_c, where n_c counts the units of class c that a
  job on N GPUs carries (``UNIT_COUNTS``: per GPU, per node, or per job) and λ_c is the
  per-unit-hour rate. MTTI M = 1/Λ.
- Young's interval τ = √(2δM); Daly's higher-order interval
  τ = √(2δM)·[1 + ⅓√(δ/2M) + (1/9)(δ/2M)] − δ for δ < 2M, else M.
- Useful-time fraction from Daly's exact expected wall time for exponential failures
  (failures also strike during restarts): T_wall = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ, so the
  fraction is T_s/T_wall. Asynchronous checkpoints enter through the blocking part of δ only
  (the part that stalls training); the risk window of the background write is ignored here
  and simulated in ``analysis.montecarlo``.

Everything broadcasts over NumPy arrays so a sweep of 10^5 scenarios is one vector pass.

Running slow (``ClassRates.fail_slow``, ``analysis.slowness.at_scale``): a GPU slow until it is
detected ``job.slow_detect_hours`` after it started is replaced, one more interruption in Λ;
the job loses the share of its compute time it runs slow (``at_scale.lost_share``), so goodput
= useful fraction x (1 - that share). Rates without a fail-slow process leave it out.

Point and band: the point is the plug-in projection at each class's rate, the band the
2.5/97.5 percentiles over rate draws (``ClassRates.sample``; ``analysis.class_rates`` says
how the draws are made), the fail-slow rate drawn from its CI alongside
(``FailSlow.at_rate_draws``).
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from analysis.class_rates import UNIT_COUNTS
from analysis.class_rates import ClassRates
from analysis.job import Job
from analysis.taxonomy import DEFAULT_UNIT

if TYPE_CHECKING:
    from analysis.slowness.at_scale import FailSlow


def unit_counts(
    classes, n_gpus, gpus_per_node=8, counts: dict[str, tuple[str, int]] | None = None
) -> np.ndarray:
    """(classes, scenarios) unit counts n_c(N). Unknown classes count once per node."""
    table = {**UNIT_COUNTS, **(counts or {})}
    n = np.atleast_1d(np.asarray(n_gpus, dtype=float))
    g = np.broadcast_to(np.asarray(gpus_per_node, dtype=float), n.shape)
    nodes = np.ceil(n / g)
    out = np.empty((len(classes), n.size))
    for i, c in enumerate(classes):
        scope, k = table.get(c, DEFAULT_UNIT)
        out[i] = k * {"gpu": n, "node": nodes, "job": np.ones_like(n)}[scope]
    return out


def interruption_rate(
    rates: ClassRates | np.ndarray,
    n_gpus,
    gpus_per_node=8,
    classes=None,
    counts: dict[str, tuple[str, int]] | None = None,
) -> np.ndarray:
    """Λ(N) per hour. ``rates`` is a ClassRates or a (..., classes) array of per-unit rates."""
    if isinstance(rates, ClassRates):
        classes, r = rates.classes, rates.rate
        counts = {**(rates.counts or {}), **(counts or {})}
    else:
        r = np.asarray(rates, dtype=float)
    u = unit_counts(classes, n_gpus, gpus_per_node, counts)  # (C, K)
    return r @ u


def young_interval(ckpt_hours, mtti_hours):
    return np.sqrt(2.0 * np.asarray(ckpt_hours) * np.asarray(mtti_hours))


def daly_interval(ckpt_hours, mtti_hours):
    """Daly (2006) higher-order optimum; M itself when δ >= 2M."""
    d, m = np.broadcast_arrays(np.asarray(ckpt_hours, float), np.asarray(mtti_hours, float))
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def useful_fraction(interval_hours, ckpt_hours, restart_hours, mtti_hours):
    """T_s / T_wall with Daly's exact expected wall time (exponential failures)."""
    tau, d, r, m = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (interval_hours, ckpt_hours, restart_hours, mtti_hours))
    )
    with np.errstate(over="ignore", invalid="ignore"):
        wall_per_work = m * np.exp(r / m) * np.expm1((tau + d) / m) / tau
        return np.where(np.isfinite(wall_per_work), 1.0 / wall_per_work, 0.0)


def running_slow(fs: FailSlow | None, n_gpus, detect_hours: float):
    """(replacements per hour, share of compute time kept) of a job on ``n_gpus`` GPUs from a
    fail-slow process: a slow GPU replaced is one more interruption, the time run slow is lost
    apart. (0, 1) without one. Its ``rate`` may be an (S, 1) array of draws
    (``FailSlow.at_rate_draws``): then (S, len(n_gpus)) arrays."""
    if fs is None:
        return 0.0, 1.0
    return fs.replacements_per_hour(n_gpus, detect_hours), 1.0 - fs.lost_share(n_gpus, detect_hours)


# ----------------------------------------------------------------------------- projections
# Draws of the fitted rates (and of which lifetime model fits them) behind a projection's 95%
# band: the 2.5% quantile of 400 draws sits within 0.8 percentile points (one standard error,
# sqrt(0.025 * 0.975 / 400)) of the true one.
RATE_DRAWS = 400


@dataclass
class Projection:
    """Arrays over scenarios (same length as ``n_gpus``)."""

    n_gpus: np.ndarray
    mtti_hours: np.ndarray
    young_hours: np.ndarray
    daly_hours: np.ndarray
    interval_hours: np.ndarray
    goodput: np.ndarray
    goodput_ci_low: np.ndarray
    goodput_ci_high: np.ndarray
    mtti_ci_low: np.ndarray
    mtti_ci_high: np.ndarray
    notes: dict = field(default_factory=dict)
    # (draws, scenarios) goodput of each rate draw: two projections with the same seed hold
    # the same draws, so a difference of theirs has a paired CI; None without uncertainty
    goodput_draws: np.ndarray | None = None
    # running slow (``ClassRates.fail_slow``): goodput = goodput_fail_stop x (1 -
    # slow_lost_share), the fail-stop part with slow GPUs replaced at slow_detect_hours among
    # its interruptions; all None when the rates carry no fail-slow process
    goodput_fail_stop: np.ndarray | None = None
    slow_lost_share: np.ndarray | None = None
    slow_detect_hours: float | None = None


def project(
    rates: ClassRates, job: Job, n_gpus=None, samples: int = RATE_DRAWS, seed: int = 0
) -> Projection:
    """Analytic goodput of ``job`` (or of it at each of the sizes ``n_gpus``, a sweep), with
    bands from rate uncertainty.

    ``job.interval_hours`` None = Daly's interval of the point estimate (δ = blocking part);
    the band keeps that chosen interval fixed, so it shows what the uncertain MTTI does to a
    job that has committed to an interval. ``ckpt_blocking_s`` < ``ckpt_cost_s`` models an
    asynchronous checkpoint (only the blocking part stalls training).
    """
    n = np.atleast_1d(np.asarray(job.n_gpus if n_gpus is None else n_gpus, dtype=float))
    d_h = np.asarray(job.blocking_s, float) / 3600.0
    r_h = np.asarray(job.restart_s, float) / 3600.0
    counts = {**(rates.counts or {}), **(job.counts or {})}
    u = unit_counts(rates.classes, n, job.gpus_per_node, counts)
    interval_hours = job.interval_hours
    fs, detect = rates.fail_slow, float(job.slow_detect_hours)
    rep, kept = running_slow(fs, n, detect)
    lam = rates.rate @ u + rep
    m = 1.0 / lam
    young = young_interval(d_h, m) * np.ones_like(n)
    daly = daly_interval(d_h, m) * np.ones_like(n)
    tau = daly if interval_hours is None else np.asarray(interval_hours, float) * np.ones_like(n)
    g_stop = useful_fraction(tau, d_h, r_h, m)
    g = g_stop * kept
    slow_draws = None if fs is None or samples <= 0 else fs.at_rate_draws(samples, seed)
    if rates.has_uncertainty() and samples > 0:
        draws = rates.sample(samples, seed)  # (S, C)
        rep_s, kept_s = (rep, kept) if slow_draws is None else running_slow(slow_draws, n, detect)
        ms = 1.0 / (draws @ u + rep_s)  # (S, K)
        gs = useful_fraction(tau[None, :], d_h, r_h, ms) * kept_s
        # the point is the plug-in (a class with no failure at rate 0, its draws all above 0):
        # a band whose draws all lie on one side of it reaches to the point
        glo, ghi = np.percentile(gs, [2.5, 97.5], axis=0)
        glo, ghi = np.minimum(glo, g), np.maximum(ghi, g)
        mlo, mhi = np.percentile(ms, [2.5, 97.5], axis=0)
        mlo, mhi = np.minimum(mlo, m), np.maximum(mhi, m)
        how = (
            "the fits' rate posteriors" if rates.samples is not None else "the fit CIs (lognormal)"
        )
        note = f"band: 2.5-97.5% over {samples} rate draws from {how}"
    else:
        glo, ghi, mlo, mhi, gs = g, g, m, m, None
        note = "no fit uncertainty (rates given without CI): band = point"
    if fs is None:
        return Projection(n, m, young, daly, tau, g, glo, ghi, mlo, mhi, {"band": note}, gs)
    note += (
        " (fail-slow at its fitted law, its rate drawn from its CI)"
        if slow_draws is not None
        else " (fail-slow at its fitted rate and law)"
    )
    lost = 1.0 - kept * np.ones_like(n)
    return Projection(n, m, young, daly, tau, g, glo, ghi, mlo, mhi, {"band": note}, gs,
                      g_stop, lost, detect)  # fmt: skip


def scale_points(
    lo: int = 8, hi: int = 200_000, per_decade: int = 8, gpus_per_node: int = 8
) -> np.ndarray:
    """Log-spaced job sizes from ``lo`` to ``hi`` GPUs, rounded to whole nodes."""
    pts = np.logspace(np.log10(lo), np.log10(hi), round(per_decade * np.log10(hi / lo)) + 1)
    pts = np.unique(np.maximum(gpus_per_node, np.round(pts / gpus_per_node) * gpus_per_node))
    return pts.astype(np.int64)


def projection_rows(
    p: Projection,
    scenario: str,
    method: str,
    rates_source: str,
    gpus_per_node: int,
    ckpt_cost_s: float,
    restart_s: float,
    spares: int | None = None,
    knob: str | None = None,
    knob_value=None,
    scope: str | None = None,
) -> pl.DataFrame:
    """``goodput_projections`` rows for a Projection (one per scenario)."""
    k = p.n_gpus.size
    kv = [None] * k if knob_value is None else np.broadcast_to(np.asarray(knob_value, float), (k,))
    return pl.DataFrame(
        {
            "scenario": [scenario] * k,
            "scope": [scope] * k,
            "method": [method] * k,
            "rates_source": [rates_source] * k,
            "n_gpus": p.n_gpus.astype(np.int64),
            "gpus_per_node": [int(gpus_per_node)] * k,
            "ckpt_cost_s": np.broadcast_to(np.asarray(ckpt_cost_s, float), (k,)),
            "restart_s": np.broadcast_to(np.asarray(restart_s, float), (k,)),
            "interval_hours": p.interval_hours,
            "spares": [spares] * k,
            "knob": [knob] * k,
            "knob_value": kv,
            "mtti_hours": p.mtti_hours,
            "mtti_ci_low": p.mtti_ci_low,
            "mtti_ci_high": p.mtti_ci_high,
            "optimal_interval_hours": p.daly_hours,
            "young_interval_hours": p.young_hours,
            "goodput": p.goodput,
            "goodput_ci_low": p.goodput_ci_low,
            "goodput_ci_high": p.goodput_ci_high,
            "goodput_fail_stop": p.goodput if p.goodput_fail_stop is None else p.goodput_fail_stop,
            "slow_lost_share": [None] * k if p.slow_lost_share is None else p.slow_lost_share,
            "slow_detect_hours": [p.slow_detect_hours] * k,
        },
        schema_overrides={
            "slow_lost_share": pl.Float64,
            "slow_detect_hours": pl.Float64,
            "spares": pl.Int32,
            "knob": pl.Utf8,
            "knob_value": pl.Float64,
            "scope": pl.Utf8,
        },
    )
