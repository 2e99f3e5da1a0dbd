"""The format reference (``docs/formats.md``), generated from the registered formats:
``python -m ingest.reference > docs/formats.md`` (a test checks that it is current). What a
format reads and where its rows go come from its ``FormatSpec``; its quirks from its module's
docstring, written once, beside the code they describe."""

from __future__ import annotations

import inspect

from ingest.base import FormatSpec
from ingest.registry import format_modules


def _feeding(spec: FormatSpec) -> str:
    """How the runner hands the format's files to its parser, as its spec declares."""
    ways = []
    if spec.line_oriented:
        ways.append("large files in chunks split at line boundaries")
    if spec.extract is not None:
        ways.append("records that span lines finished once per file")
    if spec.parse_many is not None:
        ways.append("small files many at a time, in one pass")
    return "; ".join(ways) or "each file whole"


def reference() -> str:
    out = [
        "# Formats",
        "",
        (
            "Generated from the registered formats (`ingest/formats/`) by "
            "`python -m ingest.reference`; do not edit."
        ),
        (
            "A file's format is sniffed from its content unless `--format` names it. Each format "
            "stores one row per good record in its primary table ([tables](tables.md)); the "
            "notes under each format are its module's own: the layouts it accepts, the tables "
            "it also fills, and its quirks."
        ),
        "",
        "| format | reads | primary table |",
        "|---|---|---|",
    ]
    modules = format_modules()
    specs = [m.FORMAT for m in modules.values()]
    out += [f"| [`{s.name}`](#{s.name}) | {s.description} | `{s.primary}` |" for s in specs]
    for spec, module in zip(specs, modules.values()):
        path = module.__name__.replace(".", "/") + ("/" if hasattr(module, "__path__") else ".py")
        out += [
            "",
            f"## {spec.name}",
            "",
            f"- reads: {spec.description}",
            f"- primary table: [`{spec.primary}`](tables.md#{spec.primary})",
            f"- files: {_feeding(spec)}",
            f"- module: `{path}`",
            "",
            inspect.getdoc(module) or "",
        ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
