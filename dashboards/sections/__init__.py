"""Report sections, one module each, found by scanning this package (like ``ingest.registry``
finds formats): a module declaring ``KEY``, ``TITLE``, ``TABLES`` and
``build(ctx: dashboards.section.ReportContext) -> dashboards.section.Section`` is a section of
the report (``build`` returning None leaves it out: a section about data only some warehouses
hold, such as failure records). Where it stands is said once, for every section, in ``ORDER``.
Adding a section is adding one file here and its key to ``ORDER``."""

from __future__ import annotations

from types import ModuleType

from warehouse.plugins import discover

CONTRACT = ("KEY", "TITLE", "TABLES", "build")

# The report top to bottom, by section key (the module's name). The summary and the headline
# answer first, then what the fleet's failures are, the laws fitted to them and what they cost
# at scale; then slowness, the nodes and the data behind it all; the glossary last.
ORDER = (
    "summary",
    "headline",
    "references",
    "trend",
    "explore",
    "causes",
    "failure_rates",
    "survival",
    "rate_trend",
    "system_mtbf",
    "availability",
    "hazard_ratios",
    "goodput_scale",
    "sensitivity",
    "operations_whatif",
    "goodput_measured",
    "slowness",
    "breakdowns",
    "node_health",
    "data_quality",
    "coverage",
    "analyses",
    "glossary",
)


def registry() -> list[ModuleType]:
    """Every section module in this package, in report order (``ORDER``). A module missing part
    of the contract, a key used twice, a section module ``ORDER`` does not place, or a key in
    ``ORDER`` with no module is a programming error: raise."""
    found = discover(__name__, "KEY", required=CONTRACT)
    unplaced = sorted(set(found) - set(ORDER))
    if unplaced:
        raise TypeError(
            f"report section {', '.join(unplaced)} is not in dashboards.sections.ORDER: "
            "add its key where it belongs in the report"
        )
    missing = [key for key in ORDER if key not in found]
    if missing:
        raise TypeError(f"dashboards.sections.ORDER names {', '.join(missing)}: no such section")
    return [found[key] for key in ORDER]


def tables() -> tuple[str, ...]:
    """Every warehouse table some section reads, each once."""
    return tuple(dict.fromkeys(name for m in registry() for name in m.TABLES))
