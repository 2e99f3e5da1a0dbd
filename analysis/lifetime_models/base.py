"""What every lifetime model shares, written once: the survival data (``Sample``), the
left-truncated, right- / interval-censored likelihood, its maximisation with Wald CIs, AIC, the
lifelines cross-check, and the distribution side (``sample``, residual life, mean).

A model module declares only its math (see ``weibull.py``): the parameter names, how the
unconstrained optimisation vector ``theta`` maps to them, the cumulative hazard ``H(t)`` and its
inverse, the log density, the mean and the matching lifelines fitter. Everything below works for
any model from those pieces:

* likelihood, per unit with entry age ``a``, exit age ``t`` and, for interval-censored failures,
  last age known healthy ``l``:  exact failure ``log f(t) - log S(a)``; right-censored
  ``log S(t) - log S(a)``; interval ``log(S(l) - S(t)) - log S(a)``  (``log S = -H``);
* MLE by BFGS (analytic gradient where the model gives one), covariance = inverse of the
  observed information, 95% Wald CIs on ``theta`` mapped through each parameter's transform;
  AIC = 2k - 2 log L;
* ``sample(n, rng)`` = ``H^-1(E)``, E ~ Exp(1); residual life of a unit of age ``a`` =
  ``H^-1(H(a) + E) - a`` (the conditional law given survival to ``a``).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

# scipy (special, optimize, stats: about a second to import) loads inside the functions that
# need it, so reading and projecting stored fits (`goodput project`, `nodes`, `fit`) needs none
Z95 = 1.959963984540054  # the normal's 97.5% quantile (scipy.special.ndtri(0.975))


@dataclass
class Sample:
    """Survival data of one class/stratum/window as NumPy arrays (hours of age)."""

    entry: np.ndarray
    upper: np.ndarray  # failure / censoring age (``duration``)
    lower: np.ndarray  # last age known healthy (= upper for exact failures)
    event: np.ndarray  # bool
    interval: np.ndarray  # bool: failure known only within (lower, upper]

    @property
    def n(self) -> int:
        return len(self.upper)

    @property
    def n_events(self) -> int:
        return int(self.event.sum())

    @property
    def exposure(self) -> float:
        return float(np.sum(self.upper - self.entry))

    def take(self, idx: np.ndarray) -> Sample:
        return Sample(
            *(a[idx] for a in (self.entry, self.upper, self.lower, self.event, self.interval))
        )


def hessian(f, x: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """Central-difference Hessian of a scalar function (the interval-censored path)."""
    k = len(x)
    H = np.empty((k, k))
    for i in range(k):
        for j in range(i, k):
            ei, ej = np.eye(k)[i] * h, np.eye(k)[j] * h
            H[i, j] = H[j, i] = (
                f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)
            ) / (4 * h * h)
    return H


class LogLik:
    """Left-truncated, right- / interval-censored log-likelihood of any model, vectorized.

    Subclasses may add ``value_grad(theta) -> (value, gradient)`` (no interval-censored rows);
    without it the fit uses numerical derivatives."""

    def __init__(self, model: type[LifetimeModel], s: Sample):
        self.model = model
        ex = s.event & ~s.interval
        self.t_exact = s.upper[ex]
        self.t_rc = s.upper[~s.event]
        self.t_ic_hi = s.upper[s.interval]
        self.t_ic_lo = s.lower[s.interval]
        self.t_entry = s.entry[s.entry > 0]

    value_grad = None

    def grad(self, theta: np.ndarray) -> np.ndarray:
        return self.value_grad(theta)[1]

    def __call__(self, theta: np.ndarray) -> float:
        d = self.model.from_theta(theta)
        ll = np.sum(d.log_pdf(self.t_exact)) - np.sum(d.cumulative_hazard(self.t_rc))
        ll += np.sum(d.cumulative_hazard(self.t_entry))
        if len(self.t_ic_hi):
            s_hi = -d.cumulative_hazard(self.t_ic_hi)
            s_lo = np.where(self.t_ic_lo > 0, -d.cumulative_hazard(self.t_ic_lo), 0.0)
            diff = np.clip(s_hi - s_lo, -np.inf, -1e-300)
            ll += np.sum(s_lo + np.log(-np.expm1(diff)))
        return float(ll)


def param_dict(params) -> dict[str, float]:
    """{name: value} from a ``failure_rates.params`` JSON string or dict (values either numbers
    or ``{"value": v, "ci_low": ..., "ci_high": ...}``)."""
    if isinstance(params, str):
        params = json.loads(params)
    out = {}
    for k, v in params.items():
        if isinstance(v, dict):
            v = v.get("value")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = float(v)
    return out


class LifetimeModel:
    """A parametric lifetime law: an instance is one distribution (fitted or given); the class
    methods fit it. Subclasses declare the class variables and the ``*_`` math below."""

    name: ClassVar[str]
    # (ours, lifelines' fitted name) for each parameter, in order: the one declaration of the
    # parameters (``params``, the keys of ``failure_rates.params``, are its first names)
    lifelines_names: ClassVar[tuple[tuple[str, str], ...]]
    params: ClassVar[tuple[str, ...]]
    theta_names: ClassVar[tuple[str, ...]]  # the unconstrained vector the optimiser moves
    lifelines_fitter: ClassVar[str]  # lifelines class name (or override ``make_lifelines_fitter``)
    # fitted on every unit even when the others use a subsample: its MLE needs only the
    # sufficient statistics (events, exposure)
    full_data: ClassVar[bool] = False
    # the parameter that reads as the age trend (1 = a constant hazard, below = infant
    # mortality, above = wear-out); ``failure_rates``' shape columns hold the value of the one
    # model that declares it (``lifetime_models.age_trend_model``)
    age_trend_parameter: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "lifelines_names" in cls.__dict__:
            cls.params = tuple(ours for ours, _ in cls.lifelines_names)

    def __init__(self, **params: float):
        missing = [p for p in self.params if p not in params]
        if missing:
            raise ValueError(f"{self.name}: missing parameter(s) {', '.join(missing)}")
        for p in self.params:
            setattr(self, p, float(params[p]))

    def __repr__(self) -> str:
        args = ", ".join(f"{p}={getattr(self, p):.6g}" for p in self.params)
        return f"{type(self).__name__}({args})"

    # -------------------------------------------------------------- the model's math (declare)
    def cumulative_hazard(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def inverse_cumulative_hazard(self, h: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def log_pdf(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def mean(self) -> float:
        raise NotImplementedError

    @classmethod
    def from_theta(cls, theta: np.ndarray) -> LifetimeModel:
        """The distribution at ``theta``: its parameters as ``params_ci`` maps them."""
        point = cls.params_ci(np.asarray(theta, float), np.zeros(len(theta)))
        return cls.from_params({k: v[0] for k, v in point.items()})

    @classmethod
    def theta0(cls, s: Sample) -> np.ndarray:
        raise NotImplementedError

    @classmethod
    def params_ci(cls, theta: np.ndarray, se: np.ndarray) -> dict[str, tuple[float, float, float]]:
        """Each declared parameter as (estimate, 95% low, 95% high) from ``theta`` and its SEs."""
        raise NotImplementedError

    # -------------------------------------------------------------- the distribution (shared)
    def rate(self) -> float:
        """The long-run failure rate per hour of a unit position renewed on failure: 1 / mean."""
        return 1.0 / self.mean()

    @property
    def memoryless(self) -> bool:
        """True when a unit's age does not change its hazard (the exponential, or a law whose
        age-trend parameter is exactly 1): its fleet age then cannot move its rate."""
        p = self.age_trend_parameter
        return p is not None and getattr(self, p) == 1.0

    @classmethod
    def from_params(cls, params) -> LifetimeModel:
        """The distribution from a ``failure_rates.params`` JSON string or a dict."""
        return cls(**{k: v for k, v in param_dict(params).items() if k in cls.params})

    def log_sf(self, t: np.ndarray) -> np.ndarray:
        return -self.cumulative_hazard(np.asarray(t, dtype=float))

    def sf(self, t: np.ndarray) -> np.ndarray:
        return np.exp(self.log_sf(t))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lifetimes (hours from age 0) by inversion of the cumulative hazard."""
        return self.inverse_cumulative_hazard(rng.exponential(size=n))

    def residual_sample(self, age, rng: np.random.Generator, n: int | None = None) -> np.ndarray:
        """Remaining life of units that have survived to ``age`` hours (scalar with ``n``, or
        one draw per element of an array of ages): ``H^-1(H(age) + E) - age``."""
        age = np.asarray(age, dtype=float)
        if n is not None:
            age = np.broadcast_to(age, (n,))
        e = rng.exponential(size=age.shape)
        return np.maximum(
            self.inverse_cumulative_hazard(self.cumulative_hazard(age) + e) - age, 0.0
        )

    # -------------------------------------------------------------- fitting (shared)
    @classmethod
    def loglik(cls, s: Sample) -> LogLik:
        return LogLik(cls, s)

    @classmethod
    def exact_fit(cls, s: Sample) -> dict | None:
        """A closed-form MLE where the model has one (else None: maximise numerically)."""
        return None

    @classmethod
    def fit(cls, s: Sample, start: np.ndarray | None = None) -> dict:
        """MLE and 95% Wald CIs. ``start``: a warm start (the whole-period fit seeds the
        monthly windows). Returns loglik, k, converged, theta, its covariance ``cov`` and params
        {name: (v, lo, hi)}."""
        ll = cls.loglik(s)
        theta0 = cls.theta0(s)
        if start is not None and len(start) == len(theta0) and np.all(np.isfinite(start)):
            theta0 = np.asarray(start, dtype=float)
        from scipy import optimize

        if s.interval.any() or ll.value_grad is None:  # numeric derivatives

            def neg_value(th):
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    v = ll(th)
                return -v if np.isfinite(v) else np.inf

            res = optimize.minimize(
                neg_value, theta0, method="BFGS", options={"gtol": 1e-6 * max(1.0, s.n)}
            )
        else:

            def neg(th):
                with np.errstate(over="ignore", invalid="ignore"):
                    v, g = ll.value_grad(th)
                if not (np.isfinite(v) and np.all(np.isfinite(g))):  # wild line-search step
                    return np.inf, np.zeros_like(th)
                return -v, -g

            res = optimize.minimize(
                neg, theta0, jac=True, method="BFGS", options={"gtol": 1e-7 * max(1.0, s.n)}
            )
        theta = res.x
        cov = cls.covariance(s, theta, ll)
        se = np.sqrt(np.diag(cov)) if cov is not None else np.full(len(theta), np.nan)
        loglik = ll(theta)
        return {
            "loglik": loglik,
            "k": len(theta),
            "converged": bool(cov is not None and np.isfinite(loglik)),
            "theta": theta,
            "cov": cov,
            "params": cls.params_ci(theta, se),
        }

    @classmethod
    def covariance(cls, s: Sample, theta: np.ndarray, ll: LogLik | None = None):
        """Covariance of ``theta`` at the MLE: the inverse of the observed information (central
        differences of the analytic gradient, or of the likelihood itself where there is none
        or rows are interval-censored); None where it is not positive definite."""
        ll = ll if ll is not None else cls.loglik(s)
        if s.interval.any() or ll.value_grad is None:
            H = -hessian(ll, theta)
        else:
            h = 1e-5
            steps = np.eye(len(theta)) * h
            H = -np.column_stack([ll.grad(theta + e) - ll.grad(theta - e) for e in steps]) / (2 * h)
            H = (H + H.T) / 2
        try:
            cov = np.linalg.inv(H)
        except np.linalg.LinAlgError:
            return None
        ok = np.all(np.isfinite(cov)) and np.all(np.diag(cov) > 0)
        return cov if ok else None

    def theta(self) -> np.ndarray:
        """The unconstrained vector of this distribution (the inverse of ``from_theta``)."""
        raise NotImplementedError

    def expected_failures(self, s: Sample) -> float:
        """Failures the law expects over the sample's at-risk spans, from each unit's entry to
        its exit age: sum of H(exit) - H(entry)."""
        with np.errstate(divide="ignore", over="ignore"):
            return float(np.sum(self.cumulative_hazard(s.upper) - self.cumulative_hazard(s.entry)))

    @classmethod
    def window_rate(cls, fit: dict, s: Sample) -> tuple[float, float, float] | None:
        """The fitted law's failure rate per unit-hour over the sample's own at-risk spans (its
        expected failures over them / their exposure: the rate the units showed at the ages
        they had, whatever the law) with a 95% CI by the delta method on its log from the fit's
        covariance; None without a usable fit."""
        theta, cov = fit.get("theta"), fit.get("cov")
        if theta is None or cov is None or s.exposure <= 0 or not fit.get("converged"):
            return None

        def log_rate(th) -> float:
            e = cls.from_theta(th).expected_failures(s)
            return math.log(e / s.exposure) if e > 0 and np.isfinite(e) else math.nan

        g0 = log_rate(theta)
        steps = 1e-5 * np.maximum(1.0, np.abs(theta))
        grad = np.array(
            [
                (log_rate(theta + e) - log_rate(theta - e)) / (2 * h)
                for e, h in zip(np.diag(steps), steps, strict=True)
            ]
        )
        var = float(grad @ cov @ grad)
        if not (np.isfinite(g0) and np.isfinite(var)):
            return None
        se = math.sqrt(max(var, 0.0))
        return math.exp(g0), math.exp(g0 - Z95 * se), math.exp(g0 + Z95 * se)

    @staticmethod
    def aic(fit: dict) -> float:
        return 2 * fit["k"] - 2 * fit["loglik"] if fit["converged"] else float("nan")

    # -------------------------------------------------------------- lifelines (shared)
    @classmethod
    def make_lifelines_fitter(cls):
        import lifelines

        return getattr(lifelines, cls.lifelines_fitter)()

    @classmethod
    def lifelines_params(cls, trip) -> dict[str, tuple[float, float, float]]:
        """Our parameters from lifelines' summary; ``trip(name)`` = (coef, lower, upper)."""
        return {ours: trip(theirs) for ours, theirs in cls.lifelines_names}

    @classmethod
    def fit_lifelines(cls, s: Sample) -> dict:
        """The same fit by lifelines' own fitter (``fit(..., entry=)`` or
        ``fit_interval_censoring``); its Wald CIs from lifelines' variance matrix."""
        f = cls.make_lifelines_fitter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if s.interval.any():
                hi = np.where(s.event, s.upper, np.inf)
                lo = np.where(s.event, s.lower, s.upper)
                # lifelines' convention: exact iff lower == upper, an interval row is "censored"
                f.fit_interval_censoring(
                    lo, hi, event_observed=s.event & ~s.interval, entry=s.entry
                )
            else:
                f.fit(s.upper, s.event, entry=s.entry)
        summ = f.summary

        def trip(name: str) -> tuple[float, float, float]:
            row = summ.loc[name]
            return (float(row["coef"]), float(row["coef lower 95%"]), float(row["coef upper 95%"]))

        params = cls.lifelines_params(trip)
        theta = cls.from_params({k: v[0] for k, v in params.items()}).theta()
        return {
            "loglik": float(f.log_likelihood_),
            "k": len(f._fitted_parameter_names),
            "params": params,
            "converged": True,
            "theta": theta,
            "cov": cls.covariance(s, theta),
        }


def log_ci(est: float, se: float) -> tuple[float, float, float]:
    """(exp(est), exp(est - z se), exp(est + z se)): a Wald CI on a log-scale parameter
    (an unidentified parameter's huge SE gives an infinite bound, not an overflow)."""

    def exp(x):
        return math.exp(x) if x < 709.0 else math.inf

    return (exp(est), exp(est - Z95 * se), exp(est + Z95 * se))
