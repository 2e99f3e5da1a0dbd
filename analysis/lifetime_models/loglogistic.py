"""Log-logistic lifetimes: like the lognormal (a hazard that can rise then fall) with a closed
form survival; shape <= 1 gives a monotone decreasing hazard.

    S(t) = 1 / (1 + (t / scale)^shape),    H(t) = log(1 + (t / scale)^shape),
    mean = scale * (pi / shape) / sin(pi / shape)  for shape > 1 (infinite otherwise)

In log-time z = shape * (log t - log scale): log S = -log(1 + e^z), log f(z) = z - 2 log(1 + e^z).
Parameters: ``shape`` (lifelines' beta_) and ``scale_hours`` (alpha_).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.lifetime_models.base import log_ci
from analysis.lifetime_models.log_location_scale import LogLocationScale


class LogLogistic(LogLocationScale):
    name = "loglogistic"
    lifelines_names = (("shape", "beta_"), ("scale_hours", "alpha_"))
    theta_names = ("log_scale", "log_shape")
    lifelines_fitter = "LogLogisticFitter"

    z_logsf = staticmethod(lambda z: -np.logaddexp(0.0, z))
    z_logpdf = staticmethod(lambda z: z - 2.0 * np.logaddexp(0.0, z))

    @staticmethod
    def z_sf_terms(z):
        from scipy.special import expit  # here, not at the top: see base.py

        return -np.logaddexp(0.0, z), -expit(z)

    @staticmethod
    def z_pdf_terms(z):
        from scipy.special import expit

        return z - 2.0 * np.logaddexp(0.0, z), 1.0 - 2.0 * expit(z)

    @staticmethod
    def z_of_cumulative_hazard(h):
        h = np.asarray(h, dtype=float)
        with np.errstate(divide="ignore"):
            return h + np.log(-np.expm1(-h))  # log(e^h - 1) without overflow

    def mu_b(self):
        return math.log(self.scale_hours), math.log(self.shape)

    def mean(self) -> float:
        if self.shape <= 1.0:
            return math.inf
        a = math.pi / self.shape
        return self.scale_hours * a / math.sin(a)

    @classmethod
    def params_ci(cls, theta, se):
        return {"shape": log_ci(theta[1], se[1]), "scale_hours": log_ci(theta[0], se[0])}


MODEL = LogLogistic
