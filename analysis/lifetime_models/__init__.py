"""Parametric lifetime models, one module each (``weibull.py`` ...), found without a list.

A module that sets ``MODEL = SomeModel`` (a ``base.LifetimeModel`` subclass) is a candidate
everywhere: ``failure_rates`` fits it per class/stratum/window and selects by AIC, and callers
turn a fitted row back into a distribution with ``get(row['model']).from_params(row['params'])``
(``sample``, ``residual_sample``, ``mean``, ``cumulative_hazard``, ``sf``). Adding a model is one
new module.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from analysis.lifetime_models.base import LifetimeModel, Sample

__all__ = ["LifetimeModel", "Sample", "get", "models", "names"]


@cache
def models() -> dict[str, type[LifetimeModel]]:
    """Every registered model by name; the exponential (closed form, all units) first."""
    found: dict[str, type[LifetimeModel]] = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        model = getattr(importlib.import_module(f"{__name__}.{mod.name}"), "MODEL", None)
        if isinstance(model, type) and issubclass(model, LifetimeModel):
            found[model.name] = model
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
