"""Log-location-scale families (exponential, Weibull, lognormal, log-logistic), shared.

Each is ``z = (log t - mu) * exp(b)`` with a standard law of ``z``: ``b`` = log shape (minus
log sigma for the lognormal, fixed 0 for the exponential). ``theta = (mu, b)`` is unconstrained,
and the likelihood gets an analytic gradient from two per-model functions of ``z``: log S and
its derivative, log f (without the ``b - log t`` Jacobian terms) and its derivative. A model
module declares those and its parameter mapping; this module does the rest.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.base import LogLik
from analysis.lifetime_models.base import Sample


class ZLogLik(LogLik):
    """The likelihood in log-time with the analytic gradient: dz/dmu = -e^b, dz/db = z."""

    def __init__(self, model: type[LogLocationScale], s: Sample):
        self.model = model
        ex = s.event & ~s.interval
        rc = ~s.event
        self.log_exact = np.log(s.upper[ex])
        self.log_rc = np.log(s.upper[rc])
        ic = s.interval
        self.log_ic_hi = np.log(s.upper[ic])
        lo = s.lower[ic]
        self.ic_lo_pos = lo > 0
        self.log_ic_lo = np.log(np.where(self.ic_lo_pos, lo, 1.0))
        self.log_entry = np.log(s.entry[s.entry > 0])
        self.sum_log_exact = float(self.log_exact.sum())

    def _mu_b(self, theta: np.ndarray) -> tuple[float, float]:
        fixed = self.model.fixed_b
        return theta[0], (fixed if fixed is not None else theta[1])

    def value_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        mu, b = self._mu_b(theta)
        k = math.exp(b)
        m = self.model
        z_ex, z_rc, z_en = ((x - mu) * k for x in (self.log_exact, self.log_rc, self.log_entry))
        (f_ex, d_ex), (f_rc, d_rc), (f_en, d_en) = (
            m.z_pdf_terms(z_ex),
            m.z_sf_terms(z_rc),
            m.z_sf_terms(z_en),
        )
        ll = len(z_ex) * b - self.sum_log_exact + f_ex.sum() + f_rc.sum() - f_en.sum()
        g_mu = -k * (d_ex.sum() + d_rc.sum() - d_en.sum())
        if m.fixed_b is not None:
            return float(ll), np.array([g_mu])
        g_b = len(z_ex) + (d_ex * z_ex).sum() + (d_rc * z_rc).sum() - (d_en * z_en).sum()
        return float(ll), np.array([g_mu, g_b])

    def __call__(self, theta: np.ndarray) -> float:
        mu, b = self._mu_b(theta)
        k = math.exp(b)
        m = self.model
        ll = np.sum(b - self.log_exact + m.z_logpdf((self.log_exact - mu) * k))
        ll += np.sum(m.z_logsf((self.log_rc - mu) * k))
        ll -= np.sum(m.z_logsf((self.log_entry - mu) * k))
        if len(self.log_ic_hi):
            s_hi = m.z_logsf((self.log_ic_hi - mu) * k)
            s_lo = np.where(self.ic_lo_pos, m.z_logsf((self.log_ic_lo - mu) * k), 0.0)
            diff = np.clip(s_hi - s_lo, -np.inf, -1e-300)
            ll += np.sum(s_lo + np.log(-np.expm1(diff)))
        return float(ll)


class LogLocationScale(LifetimeModel):
    """Subclasses declare ``z_logsf``, ``z_logpdf``, ``z_sf_terms``, ``z_pdf_terms``, the
    inverse of ``z -> -log S``, ``mu_b()`` (their parameters as mu, b) and the mappings."""

    fixed_b: ClassVar[float | None] = None  # the exponential fixes b = 0 (shape 1)

    # --- standard law of z
    @staticmethod
    def z_logsf(z: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def z_logpdf(z: np.ndarray) -> np.ndarray:
        """log density of log-time in z units, without the ``b - log t`` terms."""
        raise NotImplementedError

    @staticmethod
    def z_sf_terms(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log S and d log S / dz, sharing the expensive transcendental."""
        raise NotImplementedError

    @staticmethod
    def z_pdf_terms(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``z_logpdf`` and its derivative."""
        raise NotImplementedError

    @staticmethod
    def z_of_cumulative_hazard(h: np.ndarray) -> np.ndarray:
        """The z with -log S(z) = h."""
        raise NotImplementedError

    def mu_b(self) -> tuple[float, float]:
        raise NotImplementedError

    # --- shared
    def theta(self) -> np.ndarray:
        mu, b = self.mu_b()
        return np.array([mu] if self.fixed_b is not None else [mu, b])

    def _z(self, t) -> tuple[np.ndarray, float]:
        mu, b = self.mu_b()
        t = np.asarray(t, dtype=float)
        with np.errstate(divide="ignore"):
            return (np.log(t) - mu) * math.exp(b), b

    def cumulative_hazard(self, t):
        z, _ = self._z(t)
        return -self.z_logsf(z)

    def log_pdf(self, t):
        z, b = self._z(t)
        with np.errstate(divide="ignore"):
            return b - np.log(np.asarray(t, dtype=float)) + self.z_logpdf(z)

    def inverse_cumulative_hazard(self, h):
        mu, b = self.mu_b()
        return np.exp(mu + self.z_of_cumulative_hazard(np.asarray(h, dtype=float)) * math.exp(-b))

    @classmethod
    def loglik(cls, s: Sample) -> ZLogLik:
        return ZLogLik(cls, s)

    @classmethod
    def theta0(cls, s: Sample) -> np.ndarray:
        """mu from the exponential MLE, shape 1 (sigma from the spread of log failure ages)."""
        mu0 = math.log(max(s.exposure, 1e-9) / max(s.n_events, 1))
        if cls.fixed_b is not None:
            return np.array([mu0])
        return np.array([mu0, cls.b0(np.log(s.upper[s.event]))])

    @classmethod
    def b0(cls, log_failure_ages: np.ndarray) -> float:
        return 0.0


class MinExtremeValue(LogLocationScale):
    """log T = mu + b Z with Z standard minimum extreme value (Gumbel), S_Z(z) = exp(-e^z): the
    Weibull family (shape 1/b), and the exponential where b is fixed at 1. The z terms are
    written here once for both."""

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
