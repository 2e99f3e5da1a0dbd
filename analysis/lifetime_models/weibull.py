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
from analysis.lifetime_models.log_location_scale import LogLocationScale


class Weibull(LogLocationScale):
    name = "weibull"
    params = ("shape", "scale_hours")
    theta_names = ("log_scale", "log_shape")
    lifelines_fitter = "WeibullFitter"
    lifelines_names = (("shape", "rho_"), ("scale_hours", "lambda_"))

    z_logsf = staticmethod(lambda z: -np.exp(z))
    z_logpdf = staticmethod(lambda z: z - np.exp(z))

    @staticmethod
    def z_sf_terms(z):
        ez = np.exp(z)
        return -ez, -ez

    @staticmethod
    def z_pdf_terms(z):
        ez = np.exp(z)
        return z - ez, 1.0 - ez

    @staticmethod
    def z_of_cumulative_hazard(h):
        with np.errstate(divide="ignore"):
            return np.log(h)

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
