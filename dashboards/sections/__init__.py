"""Report sections, one module each, found by scanning this package (like ``ingest.registry``
finds formats): a module declaring ``KEY``, ``TITLE``, ``ORDER``, ``TABLES`` and
``build(ctx: dashboards.section.ReportContext) -> dashboards.section.Section`` is a section of
the report, placed by ``ORDER`` (``build`` returning None leaves it out: a section about data
only some warehouses hold, such as failure records). Adding a section is adding one file here."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

CONTRACT = ("KEY", "TITLE", "ORDER", "TABLES", "build")


def registry() -> list[ModuleType]:
    """Every section module in this package, in report order (``ORDER``, then ``KEY``). A
    module missing part of the contract, or a key used twice, is a programming error: raise."""
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        missing = [name for name in CONTRACT if not hasattr(module, name)]
        if missing:
            raise TypeError(
                f"report section {module.__name__} does not define {', '.join(missing)}"
            )
        if module.KEY in found:
            raise ValueError(
                f"report sections {found[module.KEY].__name__} and {module.__name__} "
                f"share the key {module.KEY!r}"
            )
        found[module.KEY] = module
    return sorted(found.values(), key=lambda m: (m.ORDER, m.KEY))


def tables() -> tuple[str, ...]:
    """Every warehouse table some section reads, each once."""
    return tuple(dict.fromkeys(name for m in registry() for name in m.TABLES))
