"""Helpers the warehouse's parts share: paths inside the Parquet root, hive partitions, and
Parquet files written with their times as stored (``STORED_TS``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import IO

import polars as pl

from warehouse.schemas import STORED_TS
from warehouse.schemas import Table

# the hive partition value of a null (DuckDB's and Polars' name for it)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def join(*parts: str) -> str:
    """A path of the Parquet root's filesystem: its parts joined by ``/``, empty ones left out."""
    return "/".join(p for p in parts if p)


def split_partitions(spec: Table, df: pl.DataFrame):
    """Yield (relative dir, "" when unpartitioned; frame without the partition column) per
    hive partition."""
    if spec.partition is None:
        if df.height:
            yield "", df
        return
    col = spec.partition
    for (value,), part in df.partition_by(col, as_dict=True, maintain_order=True).items():
        label = NULL_PARTITION if value is None else str(value)
        yield f"{col}={label}", part.drop(col)


def with_partition(df: pl.DataFrame, file: str) -> pl.DataFrame:
    """``df`` (rows of a Parquet file) with the hive partition its path names, as text."""
    parts = [seg.split("=", 1) for seg in file.split("/") if "=" in seg]
    return df.with_columns(
        pl.lit(None if v == NULL_PARTITION else v, pl.Utf8).alias(k) for k, v in parts
    )


def stored(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its times as ``STORED_TS`` (naive in memory means UTC), as files hold them."""
    naive = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime) and t.time_zone is None]
    return df.with_columns(pl.col(c).dt.replace_time_zone("UTC").cast(STORED_TS) for c in naive)


def parquet_writer(df: pl.DataFrame) -> Callable[[IO[bytes]], None]:
    """Write ``df`` with its times as ``STORED_TS``."""
    df = stored(df)
    return lambda fh: df.write_parquet(fh, compression="zstd", statistics=True)


def mtime(info: dict) -> float:
    """Modification time of a listing entry: local disks give ``mtime``, S3 ``LastModified``."""
    t = info["mtime"] if "mtime" in info else info["LastModified"]
    return t.timestamp() if isinstance(t, datetime) else float(t)
