"""Survival fits of ``component_lifetimes``: one module per reason to change.

* ``rates``: failure rates per class, stratum and window, every registered lifetime model, and
  the one selected row that summaries and projections quote (``failure_rates``); rate draws for
  projection bands (``rate_samples``).
* ``windows``: the monthly windows (observation split at month boundaries, partial and
  low-exposure months).
* ``shape``: the Weibull age reading (infant mortality / wear-out / the data cannot tell).
* ``rate_trend``: the calendar trend test per class (``rate_trends``).
* ``curves``: Kaplan-Meier and Nelson-Aalen curves (``survival_curves``).
* ``competing``: Aalen-Johansen cumulative incidence of a node's first failure by cause.
* ``cox``: Cox proportional hazards (``hazard_ratios``).
* ``fits``: the three tables in one call and their refresh in a warehouse.

The names below are the package's public entry points (what the pipeline, the report and the
projection import); everything else is imported from its module.
"""

from analysis.survival.cox import hazard_ratios
from analysis.survival.curves import MIN_AT_RISK
from analysis.survival.curves import survival_curves
from analysis.survival.fits import fit_all
from analysis.survival.fits import refresh_fits
from analysis.survival.rate_trend import TREND_ALPHA
from analysis.survival.rate_trend import rate_trends
from analysis.survival.rates import failure_rates
from analysis.survival.rates import fit_model
from analysis.survival.rates import model_mean
from analysis.survival.rates import rate_samples
from analysis.survival.shape import age_reading
from analysis.survival.shape import age_shape

__all__ = [
    "MIN_AT_RISK",
    "TREND_ALPHA",
    "age_reading",
    "age_shape",
    "failure_rates",
    "fit_all",
    "fit_model",
    "hazard_ratios",
    "model_mean",
    "rate_samples",
    "rate_trends",
    "refresh_fits",
    "survival_curves",
]
