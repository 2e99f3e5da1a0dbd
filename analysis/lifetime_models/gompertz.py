"""Gompertz lifetimes: a hazard that grows exponentially with age, the classic law of ageing
(wear-out that accelerates: fans, PSU capacitors, HBM late in life). None of the log-location-
scale models has it: the Weibull's hazard grows only as a power of age.

    h(t) = b * exp(c t),    H(t) = (b / c) * (exp(c t) - 1),    S(t) = exp(-H(t)),
    mean = exp(b / c) * E1(b / c) / c   (E1: the exponential integral)

Parameters: ``initial_rate_per_hour`` (b, the hazard at age 0) and ``growth_per_hour`` (c > 0;
the hazard doubles every log(2) / c hours; c -> 0 is the exponential, already a candidate).
Fitted on theta = (log b, log c) with an analytic gradient; lifelines has no Gompertz, so its
cross-check is a ``ParametricUnivariateFitter`` declaring the same cumulative hazard.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.base import LogLik
from analysis.lifetime_models.base import Sample
from analysis.lifetime_models.base import log_ci


class GompertzLogLik(LogLik):
    def __init__(self, model, s: Sample):
        super().__init__(model, s)
        self.sum_exact = float(self.t_exact.sum())

    def value_grad(self, theta):
        b, c = math.exp(theta[0]), math.exp(theta[1])
        h_ex, h_rc, h_en = (
            b / c * np.expm1(c * t) for t in (self.t_exact, self.t_rc, self.t_entry)
        )
        # dH/dlog c = b t e^(ct) - H
        d_ex, d_rc, d_en = (
            b * t * np.exp(c * t) - h
            for t, h in ((self.t_exact, h_ex), (self.t_rc, h_rc), (self.t_entry, h_en))
        )
        n = len(self.t_exact)
        ll = n * theta[0] + c * self.sum_exact - h_ex.sum() - h_rc.sum() + h_en.sum()
        g_b = n - h_ex.sum() - h_rc.sum() + h_en.sum()
        g_c = c * self.sum_exact - d_ex.sum() - d_rc.sum() + d_en.sum()
        return float(ll), np.array([g_b, g_c])


class Gompertz(LifetimeModel):
    name = "gompertz"
    lifelines_names = (("initial_rate_per_hour", "log_b_"), ("growth_per_hour", "log_c_"))
    theta_names = ("log_b", "log_c")

    def cumulative_hazard(self, t):
        b, c = self.initial_rate_per_hour, self.growth_per_hour
        with np.errstate(over="ignore"):
            return b / c * np.expm1(c * np.asarray(t, dtype=float))

    def inverse_cumulative_hazard(self, h):
        b, c = self.initial_rate_per_hour, self.growth_per_hour
        return np.log1p(c * np.asarray(h, dtype=float) / b) / c

    def log_pdf(self, t):
        t = np.asarray(t, dtype=float)
        return (
            math.log(self.initial_rate_per_hour)
            + self.growth_per_hour * t
            - self.cumulative_hazard(t)
        )

    def mean(self) -> float:
        x = self.initial_rate_per_hour / self.growth_per_hour
        if x < 500:
            from scipy import special  # here, not at the top: see base.py

            return math.exp(x) * float(special.exp1(x)) / self.growth_per_hour
        return (1 - 1 / x + 2 / x**2) / x / self.growth_per_hour  # asymptotic e^x E1(x)

    def theta(self) -> np.ndarray:
        return np.log([self.initial_rate_per_hour, self.growth_per_hour])

    @classmethod
    def loglik(cls, s: Sample) -> GompertzLogLik:
        return GompertzLogLik(cls, s)

    @classmethod
    def theta0(cls, s: Sample) -> np.ndarray:
        """b from the exponential MLE, c so the hazard grows e-fold over the mean exit age."""
        b0 = max(s.n_events, 1) / max(s.exposure, 1e-9)
        return np.array([math.log(b0), -math.log(max(float(np.mean(s.upper)), 1e-9))])

    @classmethod
    def params_ci(cls, theta, se):
        return {
            "initial_rate_per_hour": log_ci(theta[0], se[0]),
            "growth_per_hour": log_ci(theta[1], se[1]),
        }

    @classmethod
    def make_lifelines_fitter(cls):
        return _lifelines_fitter_class()()

    @classmethod
    def lifelines_params(cls, trip):
        out = {}
        for ours, theirs in cls.lifelines_names:
            v, lo, hi = trip(theirs)
            out[ours] = (math.exp(v), math.exp(lo), math.exp(hi))
        return out


def _lifelines_fitter_class():
    """lifelines' generic parametric fitter with the Gompertz cumulative hazard (autograd)."""
    from autograd import numpy as anp
    from lifelines.fitters import ParametricUnivariateFitter

    class GompertzFitter(ParametricUnivariateFitter):
        _fitted_parameter_names = ["log_b_", "log_c_"]  # noqa: RUF012 (lifelines API)
        _bounds = ((None, None), (None, None))

        def _create_initial_point(self, Ts, E, entry, weights):
            t = Ts[0] if isinstance(Ts, tuple) else Ts
            entry = np.zeros_like(t) if entry is None else entry
            b0 = max(float(np.sum(E)), 1.0) / max(float(np.sum(t - entry)), 1e-9)
            return np.array([math.log(b0), -math.log(max(float(np.mean(t)), 1e-9))])

        def _cumulative_hazard(self, params, times):
            b, c = anp.exp(params[0]), anp.exp(params[1])
            return b / c * anp.expm1(c * times)

    return GompertzFitter


MODEL = Gompertz
