"""How reading commands print: aligned text tables, CSV or JSON (``--format``)."""

from __future__ import annotations

import json
import sys


def table_lines(rows, numbers_right: bool = False, rule: bool = False) -> list[str]:
    """Rows of cells (the first is the heading) as aligned text lines, columns two spaces
    apart. ``numbers_right``: every column but the first right-aligned; ``rule``: a line of
    dashes under the heading."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    if rule:
        rows = [rows[0], ["-" * w for w in widths], *rows[1:]]
    return [
        "  ".join(
            v.rjust(w) if numbers_right and i else v.ljust(w)
            for i, (v, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


def print_rows(rows: list[tuple]) -> None:
    """Rows of cells (the first is the heading) as aligned columns."""
    print("\n".join(table_lines(rows)))


def cell_text(v, digits: str = ".3g") -> str:
    return "-" if v is None else f"{v:{digits}}" if isinstance(v, float) else str(v)


def print_frame(df, fmt: str, text_rows=(), header=(), meta: dict | None = None, wh=None) -> None:
    """``df`` on stdout: an aligned text table (``text_rows``: its rows as the report formats
    them), CSV (raw values, header first) or one JSON object (``meta`` and ``rows``), each naming
    the scope of the warehouse ``wh`` it was read from (``print_scope``)."""
    if fmt == "csv":
        sys.stdout.write(scoped(df, wh).write_csv(datetime_format="%Y-%m-%dT%H:%M:%S"))
        return
    if fmt == "json":
        print(json.dumps({**scope_meta(wh), **(meta or {}), "rows": df.to_dicts()}, default=str))
        return
    print_scope(wh)
    print("\n".join(table_lines([header, *text_rows], numbers_right=True)))


# How every reading command names the scope it answers for (the one rule): a table starts with
# a line "scope: <description>" when a scope is given (and says what was recomputed for it);
# JSON carries a "scope" object always (``analysis.scope.Scope.meta``: null bounds and
# dimensions for the whole fleet); CSV rows carry a "scope" column (the description) when a
# scope is given, so an unscoped CSV keeps the table's own columns.


def scope_meta(wh) -> dict:
    from analysis.scope import scope_of

    return {} if wh is None else {"scope": scope_of(wh).meta()}


def print_scope(wh) -> None:
    """The first line of a scoped table: the scope, and what was recomputed for it."""
    from analysis.scope import scope_of

    scope = scope_of(wh)
    if not scope.whole:
        note = getattr(wh, "note", "")
        print(f"scope: {scope.describe()}" + (f" ({note})" if note else ""))


def scoped(df, wh):
    """``df`` with the ``scope`` column of a scoped CSV."""
    import polars as pl

    from analysis.scope import scope_of

    scope = scope_of(wh)
    return df if scope.whole else df.with_columns(pl.lit(scope.describe()).alias("scope"))


def output_format(args) -> str:
    return "json" if args.json else args.format


def print_data(fmt: str, value: dict, frame, wh=None) -> bool:
    """``--format json``: ``value`` as one JSON object; ``csv``: the rows of ``frame`` (the
    command's main table; the others are tables of their own, for ``goodput sql``). False for
    ``table``: the scope line is printed and the command prints its text."""
    if fmt == "json":
        print(json.dumps({**scope_meta(wh), **value}, default=str))
    elif fmt == "csv":
        print_frame(frame, "csv", wh=wh)
    else:
        print_scope(wh)
        return False
    return True


def print_where(wh) -> None:
    """The last lines of ``demo`` and ``build``: where the warehouse and its report are."""
    print(f"warehouse: {wh.db_path}")
    if (report := wh.reports / "goodput_report.html").exists():
        print(f"report:    {report}")
