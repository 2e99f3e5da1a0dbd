"""Rows (dicts) to typed frames of the warehouse tables, and the rows a table cannot store
split off as quarantine rows."""

from datetime import datetime

import polars as pl

from ingest.base import ParseContext
from ingest.base import implausible_time
from warehouse.schemas import TABLES
from warehouse.schemas import quarantine_frame


def implausible(col: str, ctx: ParseContext) -> pl.Expr:
    return pl.format(f"{col}: {{}}", implausible_time(pl.col(col), ctx))


def attempt_error(ctx: ParseContext) -> pl.Expr:
    """Why an attempt cannot be stored (a time outside the plausible window, an end before its
    start), else null."""
    return (
        pl.when(pl.col("end_time") < pl.col("start_time"))
        .then(
            pl.format(
                "end_time {} is before start_time {}",
                *(pl.col(c).dt.to_string("%Y-%m-%dT%H:%M:%S") for c in ("end_time", "start_time")),
            )
        )
        .otherwise(
            pl.coalesce(
                implausible("submit_time", ctx),
                implausible("start_time", ctx),
                implausible("end_time", ctx),
            )
        )
    )


def split_bad(df: pl.DataFrame, error: pl.Expr) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows without an error, their quarantine rows): a rejected row is one quarantine row
    whose raw text is the row as parsed (its object's JSON is not kept)."""
    df = df.with_columns(_error=error)
    bad = df.filter(pl.col("_error").is_not_null())
    raw = (
        bad.drop("_error").select(pl.struct(pl.all()).struct.json_encode()).to_series()
        if bad.height
        else []
    )
    return (
        df.filter(pl.col("_error").is_null()).drop("_error"),
        quarantine_frame(bad["source_line"], raw, bad["_error"]),
    )


def typed_frame(table: str, rows: list[dict]) -> pl.DataFrame:
    """Rows to a typed frame; a value of the wrong type (odd input objects) becomes null."""
    schema = TABLES[table].columns

    def fit(v, dtype):
        if dtype == pl.Utf8:
            return v if isinstance(v, str) else None
        if isinstance(dtype, pl.Datetime):
            return v if isinstance(v, datetime) else None
        if isinstance(dtype, pl.List):
            return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
        if dtype.is_integer():
            return v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**31 else None
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return pl.DataFrame(
        [{c: fit(r.get(c), t) for c, t in schema.items()} for r in rows],
        schema=schema,
        orient="row",
    )
