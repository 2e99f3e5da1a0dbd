"""Lognormal lifetimes: log age is normal; the hazard rises, peaks and then falls (early
defects that clear, a common shape for solder / manufacturing flaws).

    log T ~ Normal(mu, sigma),   S(t) = Phi(-(log t - mu) / sigma),
    f(t) = phi((log t - mu) / sigma) / (sigma t),   mean = exp(mu + sigma^2 / 2)

In log-time z = (log t - mu) / sigma (b = -log sigma): log S = log Phi(-z), log f(z) =
-z^2/2 - log(2 pi)/2. Parameters: ``mu_log_hours`` (lifelines' mu_) and ``sigma`` (sigma_).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.lifetime_models.base import Z95
from analysis.lifetime_models.base import log_ci
from analysis.lifetime_models.log_location_scale import LogLocationScale

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class LogNormal(LogLocationScale):
    name = "lognormal"
    lifelines_names = (("mu_log_hours", "mu_"), ("sigma", "sigma_"))
    theta_names = ("mu", "minus_log_sigma")
    lifelines_fitter = "LogNormalFitter"

    @staticmethod
    def z_logsf(z):
        from scipy.special import log_ndtr  # here, not at the top: see base.py

        return log_ndtr(-z)

    z_logpdf = staticmethod(lambda z: -0.5 * z * z - HALF_LOG_2PI)

    @staticmethod
    def z_sf_terms(z):
        from scipy.special import log_ndtr

        lsf = log_ndtr(-z)  # the one expensive call: log S, reused for the Mills ratio
        zc = np.minimum(z, 30.0)  # inverse Mills ratio phi/(1-Phi); ~ z + 1/z far in the tail
        mills = np.exp(np.minimum(-0.5 * zc * zc - HALF_LOG_2PI - lsf, 700.0))
        return lsf, -np.where(z < 30.0, mills, z + 1.0 / np.maximum(z, 30.0))

    @staticmethod
    def z_pdf_terms(z):
        return -0.5 * z * z - HALF_LOG_2PI, -z

    @staticmethod
    def z_of_cumulative_hazard(h):
        from scipy.special import ndtri_exp

        return -ndtri_exp(-h)  # log Phi(-z) = -h, accurate far in the tail

    @classmethod
    def b0(cls, log_failure_ages):
        return -math.log(max(np.std(log_failure_ages), 0.1))

    def mu_b(self):
        return self.mu_log_hours, -math.log(self.sigma)

    def mean(self) -> float:
        return math.exp(self.mu_log_hours + 0.5 * self.sigma**2)

    @classmethod
    def params_ci(cls, theta, se):
        mu, se_mu = theta[0], se[0]
        sig = log_ci(-theta[1], se[1])
        return {"mu_log_hours": (mu, mu - Z95 * se_mu, mu + Z95 * se_mu), "sigma": sig}


MODEL = LogNormal
