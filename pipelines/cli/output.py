"""How reading commands print: aligned text tables, CSV or JSON (``--format``)."""

from __future__ import annotations

import json
import sys


def print_rows(rows: list[tuple]) -> None:
    """Rows of cells (the first is the heading) as aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def cell_text(v, digits: str = ".3g") -> str:
    return "-" if v is None else f"{v:{digits}}" if isinstance(v, float) else str(v)


def print_frame(df, fmt: str, text_rows=(), header=(), meta: dict | None = None) -> None:
    """``df`` on stdout: an aligned text table (``text_rows``: its rows as the report formats
    them), CSV (raw values, header first) or one JSON object (``meta`` and ``rows``)."""
    if fmt == "csv":
        sys.stdout.write(df.write_csv(datetime_format="%Y-%m-%dT%H:%M:%S"))
        return
    if fmt == "json":
        print(json.dumps({**(meta or {}), "rows": df.to_dicts()}, default=str))
        return
    rows = [header, *text_rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print(
            "  ".join(
                v.rjust(w) if i else v.ljust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )


def output_format(args) -> str:
    return "json" if args.json else args.format


def print_data(fmt: str, value: dict, frame) -> bool:
    """``--format json``: ``value`` as one JSON object; ``csv``: the rows of ``frame`` (the
    command's main table; the others are tables of their own, for ``goodput sql``). False for
    ``table``: the command prints its text."""
    if fmt == "json":
        print(json.dumps(value, default=str))
    elif fmt == "csv":
        print_frame(frame, "csv")
    else:
        return False
    return True


def print_where(wh) -> None:
    """The last lines of ``demo`` and ``build``: where the warehouse and its report are."""
    print(f"warehouse: {wh.db_path}")
    if (report := wh.reports / "goodput_report.html").exists():
        print(f"report:    {report}")
