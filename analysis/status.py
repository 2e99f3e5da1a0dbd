"""Analysis step outcomes (``analysis_status``): an analysis whose inputs are absent raises
``MissingInputs``; the pipeline then writes its empty result and a 'skipped' row with the
reason instead of failing the run. Any other exception is a real failure."""

from __future__ import annotations

from datetime import UTC
from datetime import datetime

import polars as pl

from warehouse.schemas import conform


class MissingInputs(Exception):
    """The data holds nothing this analysis can work from (a reason for a user, one line)."""


def require(wh, analysis: str, tables: tuple[str, ...], any_of: bool = False) -> None:
    """Raise ``MissingInputs`` unless the tables (or, with ``any_of``, one of them) have rows."""
    have = {t: _has_rows(wh, t) for t in tables}
    missing = [t for t, ok in have.items() if not ok]
    if (any_of and len(missing) == len(tables)) or (not any_of and missing):
        joined = " or ".join(missing) if any_of else ", ".join(missing)
        raise MissingInputs(f"{analysis}: no rows in {joined}")


def _has_rows(wh, table: str) -> bool:
    if not wh.files(table):
        return False
    with wh.connect() as con:
        return bool(
            con.execute(
                f"SELECT count(*) FROM (SELECT 1 FROM ({wh.view_sql(table)}) LIMIT 1)"
            ).fetchall()[0][0]
        )


def status_row(analysis: str, status: str, reason: str | None, rows: int | None) -> pl.DataFrame:
    return conform(
        "analysis_status",
        pl.DataFrame(
            {
                "analysis": [analysis],
                "status": [status],
                "reason": [reason],
                "rows": [rows],
                "at": [datetime.now(UTC).replace(tzinfo=None)],
            },
            schema={
                "analysis": pl.Utf8,
                "status": pl.Utf8,
                "reason": pl.Utf8,
                "rows": pl.Int64,
                "at": pl.Datetime("us"),
            },
        ),
    )


def record(
    wh, analysis: str, status: str, reason: str | None = None, rows: int | None = None
) -> None:
    """Replace ``analysis``'s row of ``analysis_status`` (its own partition: steps running side
    by side never overwrite each other's rows)."""
    wh.replace_table(
        "analysis_status", status_row(analysis, status, reason, rows), partitions="touched"
    )
