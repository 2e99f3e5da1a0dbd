"""Period-over-period changes with their uncertainty: whether a figure of one period differs
from the period before by more than chance gives, and how that is said. The first screen, the
trend section, the ``goodput_trend`` table and ``goodput trend`` all take their changes here
(``analysis.trend.window_changes`` gathers a period's counts for them).

Each change is a test of "no change" and a 95% CI (docs/statistics.md has the formulas):

* unexpected interruptions per hour of the period (and the MTBF, its inverse): the exact
  conditional test of two Poisson rates: given the k1 + k0 interruptions of both periods, k1
  is binomial with p = E1 r / (E1 r + E0) (E: hours, r: the rate ratio), so the binomial test
  of p = E1 / (E1 + E0) is the test of r = 1 and its Clopper-Pearson interval, mapped through
  r = p / (1 - p) x E0 / E1, the ratio's exact CI (``rate_ratio``). Interruptions cluster, so
  the counts are first divided by their dispersion over the data's weeks (``dispersion``, the
  quasi-Poisson scale, at least 1);
* measured goodput (GPU-hour weighted over the job chains ending in the period): the difference
  of two ratio estimators sum(y) / sum(w), each with its jackknife variance over its chains,
  and Student's t with Welch-Satterthwaite degrees of freedom on each side's effective number
  of chains (``ratio_difference``);
* the lost share (GPU-hours lost to unexpected interruptions per GPU-hour used): the difference
  of two compound-Poisson totals over their exposures, each with variance sum(lost^2) / used^2
  times the same dispersion, and the same t on each side's effective number of losses
  (``share_difference``).

Every figure is per hour or per GPU-hour, so a partial period (a 4-day last week) compares with
a whole one as it should. A change is worded as one only where its test rejects "no change" at
``ALPHA``; otherwise it reads "no change beyond noise", with the CI beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import replace

import numpy as np

ALPHA = 0.05  # a change is called one where its two-sided p is below this
LEVEL = 0.95  # its CI
NOISE = "no change beyond noise"
RATIO, DIFFERENCE = "ratio", "difference"


@dataclass(frozen=True)
class Change:
    """One figure's change against the period before: ``estimate`` (a ratio now / before, or a
    difference now - before) with its CI and the two-sided p of "no change" (None where the data
    cannot tell, e.g. no job chain in a period)."""

    kind: str  # RATIO | DIFFERENCE
    estimate: float | None
    ci_low: float | None
    ci_high: float | None
    p: float | None

    @property
    def real(self) -> bool:
        """Distinguishable from noise: "no change" rejected at ``ALPHA``."""
        return self.p is not None and self.p < ALPHA

    def inverse(self) -> Change:
        """A ratio's reciprocal (the MTBF's change from the rate's), with the same test."""
        flip = _reciprocal
        return replace(
            self, estimate=flip(self.estimate), ci_low=flip(self.ci_high), ci_high=flip(self.ci_low)
        )

    def words(self, unit: str = "points") -> str:
        """The change as the report and the CLI print it: the change and its CI where it is
        real, else "no change beyond noise" with the CI; a difference of fractions in points
        (``unit``), a ratio as a relative change (+34%)."""
        if self.p is None:
            return "n/a"
        ci = f"95% CI {self._shown(self.ci_low, unit)} to {self._shown(self.ci_high, unit)}"
        if self.kind == DIFFERENCE:
            ci += f" {unit}"
        if not self.real:
            return f"{NOISE} ({ci})" if self.ci_low is not None else NOISE
        shown = self._shown(self.estimate, unit) + (f" {unit}" if self.kind == DIFFERENCE else "")
        return f"{shown} ({ci})"

    def _shown(self, x: float | None, unit: str) -> str:
        if x is None:
            return "n/a"
        if self.kind == RATIO:
            return "+inf" if math.isinf(x) else f"{x - 1:+.0%}"
        return f"{100 * x:+.1f}" if unit == "points" else f"{x:+.3g}"


def _reciprocal(x: float | None) -> float | None:
    if x is None:
        return None
    return math.inf if x == 0 else 0.0 if math.isinf(x) else 1 / x


def dispersion(counts, hours) -> float:
    """How much more counts vary than Poisson counts would: Pearson's chi-square of ``counts``
    (events per period) against one constant rate over their ``hours``, over its degrees of
    freedom, at least 1. Interruptions cluster (a failing node ends several attempts, a broken
    job fails again), so weekly counts of a steady fleet vary up to three or four times as
    much as Poisson counts."""
    k, e = np.asarray(counts, float), np.asarray(hours, float)
    ok = e > 0
    if ok.sum() < 3 or k[ok].sum() == 0:
        return 1.0
    mu = k[ok].sum() / e[ok].sum() * e[ok]
    return max(1.0, float(((k[ok] - mu) ** 2 / mu).sum()) / (ok.sum() - 1))


def rate_ratio(k1: int, hours1: float, k0: int, hours0: float, scale: float = 1.0) -> Change:
    """Events per hour now (``k1`` in ``hours1``) against before (``k0`` in ``hours0``): the
    rate ratio, its exact 95% CI and the exact conditional test of equal rates (given k1 + k0,
    k1 is binomial with p = hours1 / (hours1 + hours0) when the rates are equal; Clopper-Pearson
    limits of p, mapped to the ratio; the two-sided p is twice the smaller tail, the test the CI
    inverts). ``scale`` (``dispersion``): the counts are taken as ``k / scale`` events, the
    quasi-Poisson correction for clustered events. None where a period has no hours; no events
    in either period: ratio unknown, nothing to call."""
    if hours1 <= 0 or hours0 <= 0:
        return Change(RATIO, None, None, None, None)
    if k1 + k0 == 0:
        return Change(RATIO, None, None, None, 1.0)
    # scipy.special, not scipy.stats (a second of CPU to import, paid by `goodput trend`): the
    # functions scipy.stats.beta's ppf, cdf and sf evaluate
    from scipy.special import betainc
    from scipy.special import betaincc
    from scipy.special import betaincinv

    x, n = k1 / scale, (k1 + k0) / scale
    share = hours1 / (hours1 + hours0)
    tail = (1 - LEVEL) / 2
    low = float(betaincinv(x, n - x + 1, tail)) if x > 0 else 0.0
    high = float(betaincinv(x + 1, n - x, 1 - tail)) if x < n else 1.0
    at_least = float(betainc(x, n - x + 1, share)) if x > 0 else 1.0  # P(X >= x)
    at_most = float(betaincc(x + 1, n - x, share)) if x < n else 1.0  # P(X <= x)

    def ratio(q: float) -> float:
        return math.inf if q >= 1 else q / (1 - q) * hours0 / hours1

    estimate = math.inf if k0 == 0 else (k1 / hours1) / (k0 / hours0)
    return Change(RATIO, estimate, ratio(low), ratio(high), min(1.0, 2 * min(at_least, at_most)))


def _welch(d: float, v1: float, n1: float, v0: float, n0: float) -> Change:
    """The difference ``d`` of two estimates with variances ``v1``, ``v0`` resting on ``n1``,
    ``n0`` effective units: its CI and two-sided p from Student's t with Welch-Satterthwaite
    degrees of freedom (each side's n - 1, at least 1)."""
    var = v1 + v0
    if var <= 0:
        return Change(DIFFERENCE, d, d, d, 1.0 if d == 0 else 0.0)
    from scipy.special import stdtr  # Student's t CDF and its inverse, as rate_ratio's
    from scipy.special import stdtrit

    parts = [v**2 / max(n - 1, 1.0) for v, n in ((v1, n1), (v0, n0)) if v > 0]
    df = var**2 / sum(parts)
    se = math.sqrt(var)
    q = float(stdtrit(df, 0.5 + LEVEL / 2))
    return Change(DIFFERENCE, d, d - q * se, d + q * se, float(2 * stdtr(df, -abs(d) / se)))


def effective_units(w: np.ndarray) -> float:
    """Kish's effective number of units of weights ``w``: (sum w)^2 / sum w^2 (n for equal
    weights, about 1 where one unit carries nearly all)."""
    s2 = float((w**2).sum())
    return float(w.sum()) ** 2 / s2 if s2 > 0 else 0.0


def _ratio_estimate(y: np.ndarray, w: np.ndarray) -> tuple[float, float, float] | None:
    """sum(y) / sum(w) over units, its jackknife variance and the units' effective number; None
    with fewer than 2 units or no weight. The jackknife, not the delta method's linearization:
    where a few units carry most of the weight (a week whose GPU-hours are two training
    chains'), the linearized variance is near 0 and calls 4 in 10 weeks of a steady fleet a
    change."""
    n = len(w)
    if n < 2 or w.sum() <= 0:
        return None
    rest = w.sum() - w
    if (rest <= 0).any():  # one unit holds all the weight: its leave-one-out ratio is undefined
        return float(y.sum() / w.sum()), math.inf, 1.0
    loo = (y.sum() - y) / rest
    var = (n - 1) / n * float(((loo - loo.mean()) ** 2).sum())
    return float(y.sum() / w.sum()), var, effective_units(w)


def ratio_difference(y1, w1, y0, w0) -> Change:
    """sum(y1) / sum(w1) - sum(y0) / sum(w0) (e.g. productive over wall GPU-hours of each
    period's job chains), with each side's jackknife variance over its units and Student's t on
    their effective number (``_welch``); None where a period has fewer than two units."""
    now, before = (_ratio_estimate(np.asarray(y, float), np.asarray(w, float))
                   for y, w in ((y1, w1), (y0, w0)))  # fmt: skip
    if now is None or before is None:
        return Change(DIFFERENCE, None, None, None, None)
    if math.isinf(now[1]) or math.isinf(before[1]):
        return Change(DIFFERENCE, now[0] - before[0], None, None, 1.0)
    return _welch(now[0] - before[0], now[1], now[2], before[1], before[2])


def share_difference(lost1, used1: float, lost0, used0: float, scale: float = 1.0) -> Change:
    """sum(lost1) / used1 - sum(lost0) / used0 (losses as a share of the GPU-hours used), each
    total compound Poisson (variance sum(lost^2), times ``scale``: the losses' events cluster
    as the counts do, ``dispersion``), with Student's t on the losses' effective number
    (``_welch``); None where a period used no GPU-hours."""
    if used1 <= 0 or used0 <= 0:
        return Change(DIFFERENCE, None, None, None, None)
    a, b = np.asarray(lost1, float), np.asarray(lost0, float)
    d = float(a.sum() / used1 - b.sum() / used0)
    return _welch(
        d,
        scale * float((a**2).sum()) / used1**2,
        effective_units(a),
        scale * float((b**2).sum()) / used0**2,
        effective_units(b),
    )


@dataclass(frozen=True)
class Changes:
    """A period against the one before: goodput (points), the lost share (points), unexpected
    interruptions per hour (ratio) and the MTBF (its inverse)."""

    goodput: Change
    lost_share: Change
    interruptions: Change

    @property
    def mtbf(self) -> Change:
        return self.interruptions.inverse()
