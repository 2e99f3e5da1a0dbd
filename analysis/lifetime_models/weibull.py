"""Weibull lifetimes: a hazard that falls (shape < 1, infant mortality), stays constant
(shape = 1, the exponential) or rises (shape > 1, wear-out) as a power of age.

    H(t) = (t / scale)^shape,    h(t) = shape / scale * (t / scale)^(shape - 1),
    S(t) = exp(-H(t)),           mean = scale * Gamma(1 + 1 / shape)

In log-time z = shape * (log t - log scale): log S = -e^z, log f(z) = z - e^z.
Parameters: ``shape`` (k, lifelines' rho_) and ``scale_hours`` (lambda_).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.lifetime_models.base import log_ci
from analysis.lifetime_models.log_location_scale import MinExtremeValue


class Weibull(MinExtremeValue):
    name = "weibull"
    lifelines_names = (("shape", "rho_"), ("scale_hours", "lambda_"))
    theta_names = ("log_scale", "log_shape")
    lifelines_fitter = "WeibullFitter"
    age_trend_parameter = "shape"

    @classmethod
    def unit(cls, shape: float) -> Weibull:
        """The Weibull of ``shape`` with mean 1 (run at a class's rate, like
        ``Exponential.unit``)."""
        return cls(shape=shape, scale_hours=1.0 / math.gamma(1.0 + 1.0 / shape))

    def mu_b(self):
        return math.log(self.scale_hours), math.log(self.shape)

    def cumulative_hazard(self, t):
        return (np.asarray(t, dtype=float) / self.scale_hours) ** self.shape

    def inverse_cumulative_hazard(self, h):
        return self.scale_hours * np.asarray(h, dtype=float) ** (1.0 / self.shape)

    def mean(self) -> float:
        return self.scale_hours * math.gamma(1.0 + 1.0 / self.shape)

    @classmethod
    def params_ci(cls, theta, se):
        return {"shape": log_ci(theta[1], se[1]), "scale_hours": log_ci(theta[0], se[0])}


MODEL = Weibull
