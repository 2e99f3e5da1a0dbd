"""Report sections, one module each, found by scanning this package (like ``ingest.registry``
finds formats): a module declaring ``KEY``, ``TITLE``, ``ORDER``, ``TABLES`` and
``build(ctx: dashboards.section.ReportContext) -> dashboards.section.Section`` is a section of
the report, placed by ``ORDER`` (``build`` returning None leaves it out: a section about data
only some warehouses hold, such as failure records). Adding a section is adding one file here."""

from __future__ import annotations

from types import ModuleType

from warehouse.plugins import discover

CONTRACT = ("KEY", "TITLE", "ORDER", "TABLES", "build")


def registry() -> list[ModuleType]:
    """Every section module in this package, in report order (``ORDER``, then ``KEY``). A
    module missing part of the contract, or a key used twice, is a programming error: raise."""
    found = discover(__name__, "KEY", required=CONTRACT)
    return sorted(found.values(), key=lambda m: (m.ORDER, m.KEY))


def tables() -> tuple[str, ...]:
    """Every warehouse table some section reads, each once."""
    return tuple(dict.fromkeys(name for m in registry() for name in m.TABLES))
