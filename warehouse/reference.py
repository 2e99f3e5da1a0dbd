"""The table reference (``docs/tables.md``), generated from ``warehouse/schemas.py``:
``python -m warehouse.reference > docs/tables.md`` (a test checks that it is current)."""

from __future__ import annotations

import polars as pl

from warehouse.schemas import TABLES
from warehouse.schemas import VIEWS


def _type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return "timestamp (UTC)"
    return str(dtype).lower().replace("string", "varchar")


def reference() -> str:
    out = [
        "# Tables",
        "",
        "Generated from `warehouse/schemas.py` by `python -m warehouse.reference`; do not edit.",
        (
            "Every time is a UTC instant. `ingest` tables are appended by ingest and pull (each "
            "record once, by its"
        ),
        "record key); `derived` tables are rewritten by `goodput build`.",
        "",
        "| table | one row is | kind | partitioned by | record key |",
        "|---|---|---|---|---|",
    ]
    for t in TABLES.values():
        key = (
            "every column but provenance"
            if t.record_key == "content"
            else ", ".join(t.record_columns) or "-"
        )
        out.append(
            f"| [`{t.name}`](#{t.name}) | {t.grain} | {t.kind} | {t.partition or '-'} | {key} |"
        )
    for t in TABLES.values():
        out += ["", f"## {t.name}", "", t.grain + ".", "", "| column | type |", "|---|---|"]
        out += [f"| `{c}` | {_type(d)} |" for c, d in t.columns.items()]
    out += ["", "## Views", ""]
    out += [f"- `{name}`" for name in VIEWS]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
