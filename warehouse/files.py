"""Where a warehouse's files live and how one is written: the home and the Parquet root (a local
directory or ``s3://bucket/prefix``) behind one fsspec filesystem, atomic single-file writes,
hive partition paths, and the types and time zone columns are stored with.
"""

from __future__ import annotations

import glob
import os
import posixpath
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

import fsspec
import polars as pl

from warehouse.schemas import STORED_TS
from warehouse.schemas import TABLES
from warehouse.schemas import Table

_DUCK_TYPES = {
    pl.Utf8: "VARCHAR",
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}

_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
SCRATCH_ENV = "GOODPUT_SCRATCH"


class WarehouseError(Exception):
    """A warehouse location the user got wrong (scheme, bucket, credentials); the CLI prints it
    as one line."""


def duck_type(dtype: pl.DataType) -> str:
    """The DuckDB type a column is stored as: times are ``TIMESTAMPTZ`` (``STORED_TS``)."""
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMPTZ"
    if isinstance(dtype, pl.List):
        return duck_type(dtype.inner) + "[]"
    return _DUCK_TYPES[dtype.base_type()]


def literal_path(path: str) -> str:
    """``path`` as DuckDB and fsspec read it literally: their file arguments are glob
    patterns, so the ``[ ] * ?`` a directory name may hold are escaped (``[[]``, ``[*]``)."""
    return glob.escape(path)


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """--home, else $GOODPUT_HOME, else ./goodput_home."""
    chosen = home or os.environ.get("GOODPUT_HOME") or "goodput_home"
    return Path(chosen).expanduser().resolve()


def resolve_parquet_uri(uri: str | os.PathLike | None, home: Path) -> str:
    """--warehouse-uri, else $GOODPUT_WAREHOUSE_URI, else <home>/parquet; returns an absolute
    local path or ``s3://bucket/prefix``."""
    chosen = str(uri or os.environ.get("GOODPUT_WAREHOUSE_URI") or home / "parquet")
    protocol = fsspec.utils.get_protocol(chosen)
    if protocol == "file":
        return str(Path(chosen.removeprefix("file://")).expanduser().resolve())
    if protocol != "s3" or not chosen.removeprefix("s3://").split("/")[0]:
        raise WarehouseError(
            f"warehouse URI {chosen!r}: use a local directory or s3://bucket/prefix"
        )
    return chosen.rstrip("/")


class Files:
    """The Parquet root's files (``fs``: the fsspec filesystem, ``_root``: the root in its
    form, ``parquet``: the root as users name it, ``local``: whether it is a local disk)."""

    def _path(self, *parts: str) -> str:
        """A path inside the Parquet root, in the filesystem's own form."""
        return _join(self._root, *parts)

    def _find(self, path: str) -> list[str]:
        """Parquet files under ``path`` (none if it does not exist), sorted."""
        return sorted(f for f in self.fs.find(path) if f.endswith(".parquet"))

    def writable(self) -> bool:
        """Whether this process may write the home (a reader decides whether to save)."""
        return os.access(self.home, os.W_OK | os.X_OK)

    def _rm_tree(self, path: str) -> None:
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def _write(self, path: str, write: Callable[[IO[bytes]], object], atomic: bool = True) -> None:
        """Write one file. ``atomic``: on a local disk through a temp name and a rename; on
        object storage the PUT itself is all-or-nothing, so the object is written in place."""
        target = path
        if self.local:
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            if atomic:
                target = _join(posixpath.dirname(path), f".{uuid.uuid4().hex}.tmp")
        try:
            with self.fs.open(target, "wb") as fh:
                write(fh)
        except BaseException:
            if target != path:  # a failed write leaves no temp file behind
                self.fs.rm(target)
            raise
        if target != path:
            self.fs.mv(target, path)

    def files(self, name: str, partition: str | None = None) -> list[str]:
        """A table's Parquet files (local paths or URIs), or only those of one hive partition."""
        rel = "" if partition is None else f"{TABLES[name].partition}={partition}"
        return [self.parquet + f[len(self._root) :] for f in self._find(self._path(name, rel))]

    def partition_mtimes(self, name: str) -> dict[str, float]:
        """Hive partition value -> newest modification time of its files (epoch seconds), from
        one listing; the null partition is left out."""
        prefix = f"{TABLES[name].partition}="
        out: dict[str, float] = {}
        for f, info in self.fs.find(self._path(name), detail=True).items():
            part = f.rsplit("/", 2)[-2]
            if (
                f.endswith(".parquet")
                and part.startswith(prefix)
                and part != prefix + _NULL_PARTITION
            ):
                value = part[len(prefix) :]
                out[value] = max(out.get(value, 0.0), _mtime(info))
        return out


def _split_partitions(spec: Table, df: pl.DataFrame):
    """Yield (relative dir, "" when unpartitioned; frame without the partition column) per
    hive partition."""
    if spec.partition is None:
        if df.height:
            yield "", df
        return
    col = spec.partition
    for (value,), part in df.partition_by(col, as_dict=True, maintain_order=True).items():
        label = _NULL_PARTITION if value is None else str(value)
        yield f"{col}={label}", part.drop(col)


def _with_partition(df: pl.DataFrame, file: str) -> pl.DataFrame:
    """``df`` (rows of a Parquet file) with the hive partition its path names, as text."""
    parts = [seg.split("=", 1) for seg in file.split("/") if "=" in seg]
    return df.with_columns(
        pl.lit(None if v == _NULL_PARTITION else v, pl.Utf8).alias(k) for k, v in parts
    )


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _stored(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its times as ``STORED_TS`` (naive in memory means UTC), as files hold them."""
    naive = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime) and t.time_zone is None]
    return df.with_columns(pl.col(c).dt.replace_time_zone("UTC").cast(STORED_TS) for c in naive)


def _parquet_writer(df: pl.DataFrame) -> Callable[[IO[bytes]], None]:
    """Write ``df`` with its times as ``STORED_TS``."""
    df = _stored(df)
    return lambda fh: df.write_parquet(fh, compression="zstd", statistics=True)


def _mtime(info: dict) -> float:
    """Modification time of a listing entry: local disks give ``mtime``, S3 ``LastModified``."""
    t = info["mtime"] if "mtime" in info else info["LastModified"]
    return t.timestamp() if isinstance(t, datetime) else float(t)
