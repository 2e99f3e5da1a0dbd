"""Live sources: pull records from where fleet data lives (slurmdbd, a Prometheus-compatible TSDB,
Redfish BMCs) into the warehouse through the same parsers, record keys and quarantine as files.

``kinds()`` finds every module here that defines ``KIND`` (see ``sources.base`` for the contract);
``sources.pull`` runs them.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache


@cache
def kinds() -> dict:
    found = {}
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        if isinstance(getattr(module, "KIND", None), str):
            found[module.KIND] = module
    return found
