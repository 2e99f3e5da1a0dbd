"""Exponential lifetimes: a constant hazard, no ageing.

    h(t) = 1 / scale,    H(t) = t / scale,    S(t) = exp(-t / scale),    mean = scale

Parameters: ``scale_hours`` (the MTBF); ``rate_per_hour`` = 1 / scale is reported beside it.
With left truncation and right censoring the MLE is closed-form from two sufficient statistics,
events d and at-risk exposure E = sum(duration - entry): rate = d / E, log L = d log(rate) - d,
with the exact Poisson (Garwood, chi-square) 95% CI, so it is fitted on every unit
(``exact_fit``); interval-censored data fall back to the shared numerical MLE.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.lifetime_models.base import Sample
from analysis.lifetime_models.base import log_ci
from analysis.lifetime_models.base import param_dict
from analysis.lifetime_models.log_location_scale import MinExtremeValue


def poisson_rate_ci(events, exposure_hours) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rate per unit-hour and its exact (Garwood) 95% CI; vectorized over arrays. The bounds are
    chi2.ppf(0.025, 2d) / 2 and chi2.ppf(0.975, 2d + 2) / 2 events, computed as the regularized
    gamma inverse they equal (scipy.special, not the slower-to-import scipy.stats)."""
    from scipy.special import gammaincinv  # here, not at the top: see base.py

    d = np.asarray(events, dtype=float)
    e = np.asarray(exposure_hours, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(e > 0, d / e, np.nan)
        low = np.where((d > 0) & (e > 0), gammaincinv(d, 0.025) / e, 0.0)
        low = np.where(e > 0, low, np.nan)
        high = np.where(e > 0, gammaincinv(d + 1, 0.975) / e, np.nan)
    return rate, low, high


class Exponential(MinExtremeValue):
    name = "exponential"
    lifelines_names = (("scale_hours", "lambda_"),)
    theta_names = ("log_scale",)
    lifelines_fitter = "ExponentialFitter"
    full_data = True
    fixed_b = 0.0

    @property
    def memoryless(self) -> bool:
        return True

    @classmethod
    def unit(cls) -> Exponential:
        """Mean-1 lifetimes: a class known only by its rate runs this law at that rate (law
        time = hours x rate), which also serves a rate of 0 and draws above it."""
        return cls(scale_hours=1.0)

    def mu_b(self):
        return math.log(self.scale_hours) if self.scale_hours > 0 else -math.inf, 0.0

    def cumulative_hazard(self, t):
        return np.asarray(t, dtype=float) / self.scale_hours

    def inverse_cumulative_hazard(self, h):
        return np.asarray(h, dtype=float) * self.scale_hours

    def mean(self) -> float:
        return self.scale_hours

    @classmethod
    def from_params(cls, params):
        d = param_dict(params)
        if "scale_hours" not in d and "rate_per_hour" in d:  # zero events: scale is infinite
            rate = d["rate_per_hour"]
            d["scale_hours"] = 1.0 / rate if rate > 0 else math.inf
        return super().from_params(d)

    @staticmethod
    def _with_rate(scale: tuple[float, float, float]) -> dict:
        def inv(v):
            return 1.0 / v if v > 0 else math.inf

        return {
            "scale_hours": scale,
            "rate_per_hour": (inv(scale[0]), inv(scale[2]), inv(scale[1])),
        }

    @classmethod
    def params_ci(cls, theta, se):
        return cls._with_rate(log_ci(theta[0], se[0]))

    @classmethod
    def lifelines_params(cls, trip):
        return cls._with_rate(trip("lambda_"))

    @classmethod
    def exact_fit(cls, s: Sample) -> dict | None:
        if s.interval.any():
            return None
        d, e = s.n_events, s.exposure
        if e <= 0:
            return {"loglik": float("nan"), "k": 1, "converged": False, "params": {}}
        lam = d / e
        loglik = d * math.log(lam) - lam * e if d > 0 else 0.0
        _, lo, hi = poisson_rate_ci(d, e)
        rate = (lam, float(lo), float(hi))
        scale = tuple(1 / v if v > 0 else float("inf") for v in (rate[0], rate[2], rate[1]))
        return {
            "loglik": loglik,
            "k": 1,
            "converged": True,  # closed form; 0 events is the boundary MLE 0 with a Garwood CI
            "params": {"rate_per_hour": rate, "scale_hours": scale},
        }


MODEL = Exponential
