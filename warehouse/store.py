"""The warehouse: Parquet datasets (the truth) plus a DuckDB catalog of views.

The home directory is local (DESIGN.md). The Parquet root is ``<home>/parquet`` unless
``--warehouse-uri`` / ``$GOODPUT_WAREHOUSE_URI`` names another directory or an S3 prefix
(``s3://bucket/prefix``; credentials and endpoint come from the standard AWS variables):

    <root>/<table>/[<partition>=<value>/]part-<batch>.parquet   ingest tables, one file per batch
    <root>/<table>/[<partition>=<value>/]data.parquet           derived tables, replaced whole
    <root>/_staging/<batch>/...                                 a batch being committed
    <home>/warehouse.duckdb                                     views over the Parquet
    <home>/reports/  <home>/landing/  <home>/.catalog.lock

Every Parquet file operation goes through one fsspec filesystem (the local disk, or s3fs), and
the DuckDB connections of ``connect()`` have that filesystem registered, so the same SQL reads
either root without DuckDB's httpfs extension (which cannot always be downloaded).

Atomicity: an ingest batch is written completely into ``_staging/<batch>``, then a COMMIT
marker is written, then files are moved into place and the staging folder removed. Any later
open rolls a committed batch forward and deletes an uncommitted one, so a crash never leaves a
half-written batch visible. On a local disk a move is an atomic rename; on object storage it is
a copy then a delete, and rolling forward again after a crash is harmless: the marker says the
staged files are complete, and copying one again writes the same bytes. Single files (derived
tables) are written to a temp name and renamed on a local disk; on object storage a PUT is
all-or-nothing already, so they are written in place. Idempotence: the manifest holds the
sha256 of every ingested file and batch file names derive from content, so re-ingesting
writes nothing.
"""

from __future__ import annotations

import fcntl
import os
import posixpath
import uuid
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import IO

import duckdb
import fsspec
import polars as pl
from fsspec.implementations.local import LocalFileSystem

from warehouse.schemas import TABLES, VIEWS, Table, conform

_DUCK_TYPES = {
    pl.Utf8: "VARCHAR",
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}


_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
STALE_STAGE_S = 6 * 3600  # object storage: an uncommitted stage idle this long is abandoned


class WarehouseError(Exception):
    """A warehouse location the user got wrong (scheme, bucket, credentials); the CLI prints it
    as one line."""


def duck_type(dtype: pl.DataType) -> str:
    if isinstance(dtype, pl.Datetime):
        return "TIMESTAMP"
    if isinstance(dtype, pl.List):
        return duck_type(dtype.inner) + "[]"
    return _DUCK_TYPES[dtype.base_type()]


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


class Warehouse:
    def __init__(self, home: str | os.PathLike | None = None, uri: str | os.PathLike | None = None):
        self.home = resolve_home(home)
        self.parquet = resolve_parquet_uri(uri, self.home)
        self.db_path = self.home / "warehouse.duckdb"
        self.reports = self.home / "reports"
        self.landing = self.home / "landing"
        for d in (self.reports, self.landing):
            d.mkdir(parents=True, exist_ok=True)
        self.fs, self._root = fsspec.core.url_to_fs(self.parquet)
        self.local = isinstance(self.fs, LocalFileSystem)
        if self.local:
            self.fs.makedirs(self._root, exist_ok=True)
        else:
            self._check_bucket()
        self._recover()

    def _check_bucket(self) -> None:
        """Fail on open, in one line, when the bucket is missing or unreachable: object stores
        create nothing up front, and a first write failing mid-batch says less."""
        bucket = self._root.split("/")[0]
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            raise WarehouseError(f"{self.parquet}: bucket {bucket!r} does not exist") from None
        except Exception as exc:  # noqa: BLE001 - credentials, endpoint, permissions: the user's setup
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise WarehouseError(
                f"{self.parquet}: cannot reach bucket {bucket!r} ({reason}); check "
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_DEFAULT_REGION"
            ) from None

    # ---------------------------------------------------------------- files
    def _path(self, *parts: str) -> str:
        """A path inside the Parquet root, in the filesystem's own form."""
        return _join(self._root, *parts)

    def _find(self, path: str) -> list[str]:
        """Parquet files under ``path`` (none if it does not exist), sorted."""
        return sorted(f for f in self.fs.find(path) if f.endswith(".parquet"))

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
        with self.fs.open(target, "wb") as fh:
            write(fh)
        if target != path:
            self.fs.mv(target, path)

    # ---------------------------------------------------------------- writing
    def _recover(self) -> None:
        """Finish what crashed writers left: roll committed stages forward, discard uncommitted
        ones. A stage whose writer is alive holds its lock and is left alone (the sensor and
        parallel runs open the warehouse while an ingest stages). Object storage may be shared
        by other machines, whose locks we cannot see: there an uncommitted stage is discarded
        only after ``STALE_STAGE_S`` without a write."""
        self.fs.invalidate_cache()  # see connect()
        try:
            stages = sorted(self.fs.ls(self._path("_staging"), detail=False))
        except FileNotFoundError:
            return
        for stage in stages:
            with self._stage_lock(posixpath.basename(stage), wait=False) as held:
                if not held:
                    continue
                if self.fs.exists(_join(stage, "COMMIT")):
                    self._roll_forward(stage)
                elif self.local or self._idle_s(stage) > STALE_STAGE_S:
                    self._rm_tree(stage)

    @contextmanager
    def _stage_lock(self, batch_id: str, wait: bool = True):
        """Yields whether this process holds the lock of a batch's stage: its writer's from
        staging to commit, released by the OS if the writer dies. Lock files live in the
        (local) home, so they work for an object-storage root too."""
        folder = self.home / ".staging-locks"
        folder.mkdir(exist_ok=True)
        path = folder / f"{batch_id}.lock"
        with open(path, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                path.unlink(missing_ok=True)

    def _idle_s(self, stage: str) -> float:
        """Seconds since the last write into a stage."""
        infos = self.fs.find(stage, detail=True).values()
        return datetime.now().timestamp() - max((_mtime(i) for i in infos), default=0.0)

    def _roll_forward(self, stage: str) -> None:
        src = self._find(stage)
        dst = [self._root + f[len(stage) :] for f in src]
        if self.local:
            for s, d in zip(src, dst, strict=True):
                self.fs.makedirs(posixpath.dirname(d), exist_ok=True)
                self.fs.mv(s, d)  # a rename: atomic
        elif src:
            self.fs.mv(src, dst)  # concurrent server-side copies, then one bulk delete
        self._rm_tree(stage)

    @contextmanager
    def batch(self, batch_id: str):
        """Stage rows for ingest tables; they become visible together when the block exits
        without error, and not at all otherwise."""
        b = Batch(self, batch_id)
        try:
            yield b
        except BaseException:
            b.abort()
            raise
        b.commit()

    def replace_table(self, name: str, df: pl.DataFrame, partitions: str = "all") -> None:
        """Write a derived table. ``partitions='touched'`` replaces only the partitions in
        ``df`` (incremental rollups); ``'all'`` replaces the whole table."""
        spec = TABLES[name]
        df = conform(name, df)
        written: set[str] = set()
        for rel, part in _split_partitions(spec, df):
            path = self._path(name, rel, "data.parquet")
            self._write(path, _parquet_writer(part))
            written.add(path)
        if spec.partition is None and not written:
            path = self._path(name, "data.parquet")
            self._write(path, _parquet_writer(spec.empty()))
            written.add(path)
        if partitions == "all":
            stale = [f for f in self._find(self._path(name)) if f not in written]
            if stale:
                self.fs.rm(stale)

    def drop_partition(self, name: str, value: str) -> None:
        """Delete one hive partition of a derived table (a rewrite that produced no rows)."""
        self._rm_tree(self._path(name, f"{TABLES[name].partition}={value}"))

    # ---------------------------------------------------------------- reading
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
            if f.endswith(".parquet") and part.startswith(prefix) and part != prefix + _NULL_PARTITION:
                value = part[len(prefix) :]
                out[value] = max(out.get(value, 0.0), _mtime(info))
        return out

    def connect(self, database: str = ":memory:", read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection that can run ``view_sql`` SQL: on object storage the fsspec
        filesystem is registered on it (the httpfs extension is not needed).

        s3fs caches listings, with each file's size, for the process: our own writes keep it
        current, other processes' (Dagster runs, the sensor) do not, so it starts empty for each
        connection; within one it spares a HEAD request per file DuckDB opens."""
        con = duckdb.connect(database, read_only=read_only)
        if not self.local:
            self.fs.invalidate_cache()
            con.register_filesystem(self.fs)
        return con

    def view_sql(self, name: str) -> str:
        """SELECT over one table's Parquet files with the declared column types."""
        spec = TABLES[name]
        if not self.files(name):
            cols = ", ".join(f'CAST(NULL AS {duck_type(t)}) AS "{c}"' for c, t in spec.columns.items())
            return f"SELECT {cols} WHERE false"
        exprs = []
        for c, t in spec.columns.items():
            src = f'"{c}"'
            if c == spec.partition:
                src = f"NULLIF(CAST({src} AS VARCHAR), '{_NULL_PARTITION}')"
            exprs.append(f'CAST({src} AS {duck_type(t)}) AS "{c}"')
        glob = f"{self.parquet}/{name}/**/*.parquet".replace("'", "''")
        # a column added to the schema after a file was written reads as null there: the empty
        # row set names every declared column and UNION BY NAME fills the gaps
        typed = ", ".join(
            f'CAST(NULL AS {"VARCHAR" if c == spec.partition else duck_type(t)}) AS "{c}"'
            for c, t in spec.columns.items()
        )
        sql = (
            f"SELECT {', '.join(exprs)} FROM (SELECT * FROM read_parquet('{glob}', hive_partitioning = true, "
            f"union_by_name = true) UNION ALL BY NAME SELECT {typed} WHERE false)"
        )
        return _deduped(sql, spec) if spec.dedupe else sql

    def read(self, name: str, where: str | None = None) -> pl.DataFrame:
        """A table as a Polars frame, read straight from Parquet (never blocks on the catalog)."""
        sql = f"SELECT * FROM ({self.view_sql(name)})" + (f" WHERE {where}" if where else "")
        with self.connect() as con:
            df = con.sql(sql).pl()
        return conform(name, df)

    def known_sha256(self) -> set[str]:
        return set(self.read("ingest_manifest")["sha256"].to_list())

    # ---------------------------------------------------------------- catalog
    @contextmanager
    def _catalog_lock(self):
        with open(self.home / ".catalog.lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def refresh_catalog(self) -> Path:
        """(Re)create every view in warehouse.duckdb. Serialized: DuckDB allows one writer.
        ``_parquet_root`` records the root the views read, as a home may be pointed at another."""
        root = self.parquet.replace("'", "''")
        with self._catalog_lock(), self.connect(str(self.db_path)) as con:
            for name in TABLES:
                con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {self.view_sql(name)}')
            for name, sql in VIEWS.items():
                con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')
            con.execute(f"CREATE OR REPLACE VIEW _parquet_root AS SELECT '{root}' AS uri")
        return self.db_path

    def _catalog(self) -> duckdb.DuckDBPyConnection:
        """A read-only catalog connection; the views are (re)built first when missing or made
        for another Parquet root."""
        if self.db_path.exists():
            con = self.connect(str(self.db_path), read_only=True)
            try:
                if con.execute("SELECT uri FROM _parquet_root").fetchall() == [(self.parquet,)]:
                    return con
            except duckdb.CatalogException:  # a catalog from before the root was recorded
                pass
            con.close()
        self.refresh_catalog()
        return self.connect(str(self.db_path), read_only=True)

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """Run a query against the catalog, read-only; returns the executed cursor
        (``fetchone`` / ``fetchall`` / ``pl``)."""
        return self._catalog().execute(query, params)

    def query(self, query: str) -> pl.DataFrame:
        """Run a query against the catalog, read-only, and return a Polars frame."""
        with self._catalog() as con:
            rel = con.sql(query)
            return rel.pl() if rel is not None else pl.DataFrame()


class Batch:
    """Part files staged under ``_staging/<id>``; committed by a marker, then moved in."""

    def __init__(self, wh: Warehouse, batch_id: str):
        self.wh, self.id = wh, batch_id
        self.stage = wh._path("_staging", batch_id)
        self._lock = ExitStack()  # held until commit or abort: recovery elsewhere keeps off
        self._lock.enter_context(wh._stage_lock(batch_id))
        wh._rm_tree(self.stage)
        self.seq = 0

    def add(self, frames: dict[str, pl.DataFrame]) -> None:
        for name, df in frames.items():
            if df.height == 0:
                continue
            df = conform(name, df)
            for rel, part in _split_partitions(TABLES[name], df):
                path = _join(self.stage, name, rel, f"part-{self.id}-{self.seq:05d}.parquet")
                self.wh._write(path, _parquet_writer(part), atomic=False)
        self.seq += 1

    def commit(self) -> None:
        with self._lock:
            self.wh._write(_join(self.stage, "COMMIT"), lambda fh: fh.write(b"ok"))
            self.wh._roll_forward(self.stage)

    def abort(self) -> None:
        with self._lock:
            self.wh._rm_tree(self.stage)


def _deduped(sql: str, spec: Table) -> str:
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
                aggs.append(f'first("{c}" ORDER BY {prefer}) FILTER (WHERE "{c}" IS NOT NULL) AS "{c}"')
        sql = (
            f"SELECT {', '.join(aggs)} FROM (SELECT *, row_number() OVER () AS _rid FROM ({sql})) "
            f"GROUP BY {', '.join(group)}"
        )
    if d.renumber:
        window = f"PARTITION BY {', '.join(d.renumber_within)} ORDER BY {', '.join(d.renumber_order)}"
        dtype = duck_type(spec.columns[d.renumber])
        sql = (
            f'SELECT * REPLACE (CAST(row_number() OVER ({window}) AS {dtype}) AS "{d.renumber}") '
            f"FROM ({sql})"
        )
    cols = ", ".join(f'"{c}"' for c in spec.columns)
    return f"SELECT {cols} FROM ({sql})"


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


def _join(*parts: str) -> str:
    return "/".join(p for p in parts if p)


def _parquet_writer(df: pl.DataFrame) -> Callable[[IO[bytes]], None]:
    return lambda fh: df.write_parquet(fh, compression="zstd", statistics=True)


def _mtime(info: dict) -> float:
    """Modification time of a listing entry: local disks give ``mtime``, S3 ``LastModified``."""
    t = info["mtime"] if "mtime" in info else info["LastModified"]
    return t.timestamp() if isinstance(t, datetime) else float(t)
