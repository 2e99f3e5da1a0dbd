"""Plug-in discovery, one contract for every extension point: a plug-in is a module of a
package that declares an attribute (ingest formats ``FORMAT``, lifetime models ``MODEL``, live
source kinds ``KIND``, report sections ``KEY``), found by scanning the package, so adding one is
adding one file. It lives in ``warehouse/``, the package every layer may import; it knows
nothing of the warehouse.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType


def discover(
    package: str,
    attribute: str,
    accept: Callable[[object], bool] = lambda value: True,
    name: Callable[[object], str] = str,
    required: tuple[str, ...] = (),
) -> dict[str, ModuleType]:
    """The modules of ``package`` declaring ``attribute`` with a value ``accept`` takes, keyed
    by ``name(value)``, in module-name order; modules named ``_...`` are the package's helpers.

    ``required``: every module of the package is a plug-in and must declare these attributes
    (``attribute`` among them); one that does not is a programming error (``TypeError``). Two
    plug-ins with one name are too (``ValueError``)."""
    path = importlib.import_module(package).__path__
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        missing = [a for a in required if not hasattr(module, a)]
        if missing:
            raise TypeError(f"{module.__name__} does not define {', '.join(missing)}")
        value = getattr(module, attribute, None)
        if value is None or not accept(value):
            continue
        key = name(value)
        if key in found:
            raise ValueError(f"{found[key].__name__} and {module.__name__} share the name {key!r}")
        found[key] = module
    return found
