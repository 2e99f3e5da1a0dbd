"""Live sources: pull records from where fleet data lives (slurmdbd, a Prometheus-compatible TSDB,
Redfish BMCs) into the warehouse through the same parsers, record keys and quarantine as files.

``kinds()`` finds every module here that defines ``KIND`` (see ``sources.base`` for the contract);
``sources.pull`` runs them.
"""

from __future__ import annotations

from functools import cache

from warehouse.plugins import discover


@cache
def kinds() -> dict:
    """Every source kind's module, by ``KIND``."""
    return discover(__name__, "KIND", lambda kind: isinstance(kind, str))
