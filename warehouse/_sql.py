"""SQL the warehouse's parts build: literals, stored column types, a table's typed scan and its
``Dedupe`` merge (DuckDB)."""

from __future__ import annotations

import glob

import polars as pl

from warehouse._utils import NULL_PARTITION
from warehouse.schemas import Table

_DUCK_TYPES = {
    pl.Utf8: "VARCHAR",
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}


def sql_str(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def literal_path(path: str) -> str:
    """``path`` as DuckDB and fsspec read it literally: their file arguments are glob
    patterns, so the ``[ ] * ?`` a directory name may hold are escaped (``[[]``, ``[*]``)."""
    return glob.escape(path)


def duck_type(dtype: pl.DataType) -> str:
    """The DuckDB type a column is stored as: times are ``TIMESTAMPTZ`` (``STORED_TS``)."""
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ"
    if isinstance(dtype, pl.List):
        return duck_type(dtype.inner) + "[]"
    return _DUCK_TYPES[dtype.base_type()]


def typed(expr: str, dtype: pl.DataType, zoned: bool) -> str:
    """``expr`` cast to a column's type; a time as ``TIMESTAMPTZ``, or as naive UTC when not
    ``zoned`` (files written before times were stored with their zone hold naive UTC, which
    the cast reads in the session's zone: UTC on ``Warehouse.connect``)."""
    cast = f"CAST({expr} AS {duck_type(dtype)})"
    if isinstance(dtype, pl.Datetime) and not zoned:
        return f"timezone('UTC', {cast})"
    return cast


def typed_scan(spec: Table, scan: str, zoned: bool) -> str:
    """SELECT every declared column of ``spec``, typed, from ``scan`` (a FROM item reading the
    table's Parquet files, hive-partitioned)."""
    exprs = []
    for c, t in spec.columns.items():
        src = f'"{c}"'
        if c == spec.partition:
            src = f"NULLIF(CAST({src} AS VARCHAR), '{NULL_PARTITION}')"
        exprs.append(f'{typed(src, t, zoned)} AS "{c}"')
    # a column added to the schema after a file was written reads as null there: the empty
    # row set names every declared column and UNION BY NAME fills the gaps
    nulls = ", ".join(
        f'CAST(NULL AS {"VARCHAR" if c == spec.partition else duck_type(t)}) AS "{c}"'
        for c, t in spec.columns.items()
    )
    return (
        f"SELECT {', '.join(exprs)} FROM (SELECT * FROM {scan} "
        f"UNION ALL BY NAME SELECT {nulls} WHERE false)"
    )


def deduped(sql: str, spec: Table) -> str:
    """Wrap a table's SELECT with its ``Dedupe``: merge rows per key (in turn), renumber."""
    d = spec.dedupe
    prefer = ", ".join(d.prefer)
    for key in d.keys:
        # rows with a null key part are never merged: each gets a group of its own
        alone = " OR ".join(f"({k}) IS NULL" for k in key)
        group = [f"({k})" for k in key] + [f"CASE WHEN {alone} THEN _rid END"]
        aggs = []
        for c, t in spec.columns.items():
            if isinstance(t, pl.List):
                aggs.append(f'first("{c}" ORDER BY len("{c}") DESC NULLS LAST, {prefer}) AS "{c}"')
            else:
                aggs.append(
                    f'first("{c}" ORDER BY {prefer}) FILTER (WHERE "{c}" IS NOT NULL) AS "{c}"'
                )
        sql = (
            f"SELECT {', '.join(aggs)} FROM (SELECT *, row_number() OVER () AS _rid FROM ({sql})) "
            f"GROUP BY {', '.join(group)}"
        )
    if d.renumber:
        window = (
            f"PARTITION BY {', '.join(d.renumber_within)} ORDER BY {', '.join(d.renumber_order)}"
        )
        dtype = duck_type(spec.columns[d.renumber])
        sql = (
            f'SELECT * REPLACE (CAST(row_number() OVER ({window}) AS {dtype}) AS "{d.renumber}") '
            f"FROM ({sql})"
        )
    cols = ", ".join(f'"{c}"' for c in spec.columns)
    return f"SELECT {cols} FROM ({sql})"
