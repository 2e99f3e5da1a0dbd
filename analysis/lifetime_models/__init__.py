"""Parametric lifetime models, one module each (``weibull.py`` ...), found without a list.

A module that sets ``MODEL = SomeModel`` (a ``base.LifetimeModel`` subclass) is a candidate
everywhere: ``failure_rates`` fits it per class/stratum/window and selects by AIC, and callers
turn a fitted row back into a distribution with ``get(row['model']).from_params(row['params'])``
(``sample``, ``residual_sample``, ``mean``, ``cumulative_hazard``, ``sf``). Adding a model is one
new module.
"""

from __future__ import annotations

from functools import cache

from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.base import Sample
from warehouse.plugins import discover

__all__ = ["LifetimeModel", "Sample", "age_trend_model", "get", "models", "names"]


@cache
def models() -> dict[str, type[LifetimeModel]]:
    """Every registered model by name; the exponential (closed form, all units) first."""
    found = {
        name: module.MODEL
        for name, module in discover(
            __name__,
            "MODEL",
            lambda m: isinstance(m, type) and issubclass(m, LifetimeModel),
            lambda m: m.name,
        ).items()
    }
    return dict(sorted(found.items(), key=lambda kv: (not kv[1].full_data, kv[0])))


def names() -> tuple[str, ...]:
    return tuple(models())


def get(name: str) -> type[LifetimeModel]:
    try:
        return models()[name]
    except KeyError:
        raise ValueError(
            f"unknown lifetime model {name!r} (known: {', '.join(models())})"
        ) from None


@cache
def age_trend_model() -> type[LifetimeModel]:
    """The one registered model that declares an ``age_trend_parameter``: its value is the age
    trend every ``failure_rates`` row of a class carries (``analysis.survival.shape``)."""
    found = [m for m in models().values() if m.age_trend_parameter]
    if len(found) != 1:
        raise RuntimeError(
            f"exactly one lifetime model must declare age_trend_parameter, found {len(found)}"
        )
    return found[0]
