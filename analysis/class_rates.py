"""Per-class failure rates (``ClassRates``): the value every projection, what-if and Monte
Carlo run takes, with its uncertainty and each class's lifetime law.

Point and band (the same definitions in the analytic model and the Monte Carlo): the point
is the plug-in projection at each class's rate (a class with no failure has rate 0); the band
is the 2.5/97.5 percentiles over rate draws, so a zero-failure class's upper bound enters the
band only. Each class carries either CI bounds or an array of samples. Rates read from
``failure_rates`` carry samples from the fit itself (``analysis.rate_sources``). Without
samples the rate is drawn lognormal with the point estimate as median and
σ = ln(hi/lo)/(2·1.96), i.e. the CI read as ±1.96σ on the log scale (how a Poisson/likelihood
CI of a positive rate is usually built); a class with no events (point 0) draws a half-normal
whose 97.5% quantile is its upper bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from analysis.lifetime_models.base import Z95
from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.exponential import Exponential
from analysis.taxonomy import DEFAULT_UNIT
from analysis.taxonomy import UNITS

if TYPE_CHECKING:
    from analysis.slowness.at_scale import FailSlow

HALF_NORMAL_Q975 = 2.241402727604947  # 97.5% quantile of |N(0, 1)|

# Units per class (``analysis.taxonomy.UNITS``) plus the pseudo-class of an --mtti override.
UNIT_COUNTS: dict[str, tuple[str, int]] = {**UNITS, "all": ("job", 1)}


def ci_draws(
    rate: np.ndarray, lo: np.ndarray, hi: np.ndarray, n: int, rng: np.random.Generator
) -> np.ndarray:
    """(n, k) draws of k positive rates from their points and 95% bounds (module docstring):
    lognormal, a zero lower bound read from the upper one, a point of 0 half-normal; a rate
    without finite bounds is its point in every draw."""
    rate, lo, hi = (np.asarray(a, float) for a in (rate, lo, hi))
    ok = np.isfinite(lo) & np.isfinite(hi) & (lo > 0) & (hi > lo)
    sigma = np.zeros(rate.size)
    sigma[ok] = np.log(hi[ok] / lo[ok]) / (2 * Z95)
    # A zero lower bound with a positive point: take the upper bound as +1.96σ.
    zero = np.isfinite(hi) & (hi > 0) & ~ok & (rate > 0) & (hi > rate)
    sigma[zero] = np.log(hi[zero] / rate[zero]) / Z95
    # No events at all (point 0, upper bound > 0): a lognormal has no scale there, so draw a
    # half-normal whose 97.5% quantile is the upper bound.
    none_seen = np.isfinite(hi) & (hi > 0) & (rate <= 0)
    z = rng.standard_normal((n, rate.size))
    out = rate[None, :] * np.exp(sigma[None, :] * z)
    if none_seen.any():
        out[:, none_seen] = np.abs(z[:, none_seen]) * (hi[none_seen] / HALF_NORMAL_Q975)
    return out


@dataclass(frozen=True)
class ClassRates:
    """Per-class failure rates per unit-hour, with their uncertainty and lifetime laws.

    ``ci_low``/``ci_high`` are 95% bounds (NaN = unknown); ``samples`` (classes × S) wins over
    the CI when given. ``counts`` overrides ``UNIT_COUNTS`` for some classes (a rate per
    node-hour counts once per node); ``events`` and ``origins`` (per class: fit | interruptions
    | file) say where each rate came from, for the CLI's JSON and the report.

    Every class has a lifetime law, a ``lifetime_models`` instance (``laws``), that the analytic
    model needs only for a fleet age other than stationary and the Monte Carlo draws from:
    lifetimes in hours are the law's lifetimes divided by rate / ``law_rate``, the rate the law
    runs at as stated (a fitted law: 1 / its mean; a class known only by its rate: the mean-1
    exponential, ``Exponential.unit``, at law_rate 1, the default). ``law_names`` is what the
    JSON and the report call each law. ``age_laws``: per class, the (law, law_rate) a new or
    observed fleet age is projected with instead, law_rate being the class's rate at which the
    law runs at its own time scale (a fitted law that is not memoryless: itself at the class's
    rate over the window; an exponential class whose Weibull fit shows an age trend: that
    Weibull at the class's observed rate); None = ``laws``. ``starts``: the
    unit ages at job start (``analysis.fleet_age``: 'stationary', 'new' or AgeGroups) and
    ``fleet_age`` their labels, over the job horizon ``horizon_hours``
    (``with_fleet_age``; stationary by default). ``fail_slow``: the fleet's fail-slow process
    (``analysis.slowness.at_scale``), apart from the fail-stop classes; None: not measured, and
    a projection says it leaves running slow out.
    """

    classes: tuple[str, ...]
    rate: np.ndarray
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None
    samples: np.ndarray | None = None
    source: str = "given"
    counts: dict[str, tuple[str, int]] | None = None
    events: np.ndarray | None = None
    origins: tuple[str, ...] | None = None
    laws: tuple[LifetimeModel, ...] | None = None
    law_rate: np.ndarray | None = None
    law_names: tuple[str, ...] | None = None
    age_laws: tuple[tuple[LifetimeModel, float] | None, ...] | None = None
    starts: tuple | None = None
    fleet_age: tuple[str, ...] | None = None
    horizon_hours: float | None = None
    fail_slow: FailSlow | None = None

    def __post_init__(self):
        n = len(self.classes)

        def fill(name, value):
            return object.__setattr__(self, name, value)

        fill("rate", np.asarray(self.rate, dtype=float).reshape(n))
        for name in ("ci_low", "ci_high", "events"):
            v = getattr(self, name)
            if v is not None:
                fill(name, np.asarray(v, dtype=float).reshape(n))
        if self.samples is not None:
            fill("samples", np.asarray(self.samples, dtype=float).reshape(n, -1))
        if self.laws is None:
            fill("laws", (Exponential.unit(),) * n)
        fill("law_rate", np.ones(n) if self.law_rate is None else np.asarray(self.law_rate, float))
        if self.law_names is None:
            fill("law_names", tuple(law.name for law in self.laws))
        if self.age_laws is None:
            fill("age_laws", (None,) * n)
        if self.starts is None:
            fill("starts", ("stationary",) * n)
        if self.fleet_age is None:
            fill("fleet_age", ("stationary",) * n)

    @classmethod
    def from_mtti(cls, mtti_hours: float) -> ClassRates:
        """One per-job pseudo-class with rate 1/M: no fit uncertainty."""
        return cls(("all",), np.array([1.0 / mtti_hours]), source="mtti override")

    def has_uncertainty(self) -> bool:
        """Whether a rate draw differs from the point: samples or a CI of a class, or of the
        fail-slow rate."""
        if self.samples is not None:
            return True
        if self.fail_slow is not None and self.fail_slow.rate_ci is not None:
            return True
        if self.ci_low is None or self.ci_high is None:
            return False
        return bool(
            np.any(
                np.isfinite(self.ci_low) & np.isfinite(self.ci_high) & (self.ci_high > self.ci_low)
            )
        )

    def sample(self, n: int, rng: np.random.Generator | int | None = 0) -> np.ndarray:
        """(n, classes) rate draws: resampled ``samples``, else lognormal from the CI."""
        rng = np.random.default_rng(rng)
        if self.samples is not None:
            idx = rng.integers(0, self.samples.shape[1], size=n)
            return self.samples[:, idx].T.copy()
        if self.ci_low is None or self.ci_high is None:
            return np.repeat(self.rate[None, :], n, axis=0)
        return ci_draws(self.rate, self.ci_low, self.ci_high, n, rng)

    def scaled(self, multipliers: dict[str, float]) -> ClassRates:
        """Rates (and their uncertainty) with some classes multiplied (what-if)."""
        m = np.array([multipliers.get(c, 1.0) for c in self.classes])
        return replace(
            self,
            rate=self.rate * m,
            ci_low=None if self.ci_low is None else self.ci_low * m,
            ci_high=None if self.ci_high is None else self.ci_high * m,
            samples=None if self.samples is None else self.samples * m[:, None],
        )


def rate_rows(rates: ClassRates) -> list[dict]:
    """Per class: rate per unit-hour with its 95% CI, unit scope and count, source, events,
    the lifetime model and the fleet age its rate is for."""
    table = {**UNIT_COUNTS, **(rates.counts or {})}
    out = []
    for i, c in enumerate(rates.classes):
        scope, k = table.get(c, DEFAULT_UNIT)
        out.append(
            {
                "component_class": c,
                "rate_per_unit_hour": float(rates.rate[i]),
                "rate_ci_low": None
                if rates.ci_low is None or not np.isfinite(rates.ci_low[i])
                else float(rates.ci_low[i]),
                "rate_ci_high": None
                if rates.ci_high is None or not np.isfinite(rates.ci_high[i])
                else float(rates.ci_high[i]),
                "unit": scope,
                "units_per_scope": int(k),
                "source": (rates.origins or (rates.source,) * len(rates.classes))[i],
                "events": None
                if rates.events is None or not np.isfinite(rates.events[i])
                else int(rates.events[i]),
                "model": rates.law_names[i],
                "fleet_age": rates.fleet_age[i],
            }
        )
    return out
