"""The warehouse on disk: Parquet datasets (the truth) plus a DuckDB catalog of views.

Layout under the home directory (DESIGN.md):

    parquet/<table>/[<partition>=<value>/]part-<batch>.parquet   ingest tables, one file per batch
    parquet/<table>/[<partition>=<value>/]data.parquet           derived tables, replaced whole
    parquet/_staging/<batch>/...                                 a batch being committed
    warehouse.duckdb                                             views over the Parquet
    reports/  landing/

Atomicity: an ingest batch is written completely into ``_staging/<batch>``, then a COMMIT
marker is written, then files are renamed into place and the staging folder removed. Any
later open rolls a committed batch forward and deletes an uncommitted one, so a crash never
leaves a half-written batch visible. Single files (derived tables) are written to a temp name
and renamed. Idempotence: the manifest holds the sha256 of every ingested file and batch file
names derive from content, so re-ingesting writes nothing.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

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


class Warehouse:
    def __init__(self, home: str | os.PathLike | None = None):
        self.home = resolve_home(home)
        self.parquet = self.home / "parquet"
        self.db_path = self.home / "warehouse.duckdb"
        self.reports = self.home / "reports"
        self.landing = self.home / "landing"
        for d in (self.parquet, self.reports, self.landing):
            d.mkdir(parents=True, exist_ok=True)
        self._recover()

    # ---------------------------------------------------------------- writing
    def _recover(self) -> None:
        staging = self.parquet / "_staging"
        if not staging.exists():
            return
        for batch in sorted(staging.iterdir()):
            if (batch / "COMMIT").exists():
                self._roll_forward(batch)
            else:
                shutil.rmtree(batch)

    def _roll_forward(self, batch_dir: Path) -> None:
        for f in sorted(batch_dir.rglob("*.parquet")):
            dest = self.parquet / f.relative_to(batch_dir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f, dest)
        shutil.rmtree(batch_dir)

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
        root = self.parquet / name
        written: set[Path] = set()
        for rel, part in _split_partitions(spec, df):
            path = root / rel / "data.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
            part.write_parquet(tmp, compression="zstd", statistics=True)
            os.replace(tmp, path)
            written.add(path)
        if spec.partition is None and not written:
            path = root / "data.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
            spec.empty().write_parquet(tmp)
            os.replace(tmp, path)
            written.add(path)
        if partitions == "all" and root.exists():
            for f in root.rglob("*.parquet"):
                if f not in written:
                    f.unlink()

    # ---------------------------------------------------------------- reading
    def files(self, name: str) -> list[Path]:
        root = self.parquet / name
        return sorted(root.rglob("*.parquet")) if root.exists() else []

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
        glob = str(self.parquet / name / "**" / "*.parquet").replace("'", "''")
        sql = (
            f"SELECT {', '.join(exprs)} FROM read_parquet('{glob}', hive_partitioning = true, "
            f"union_by_name = true)"
        )
        return _deduped(sql, spec) if spec.dedupe else sql

    def read(self, name: str, where: str | None = None) -> pl.DataFrame:
        """A table as a Polars frame, read straight from Parquet (never blocks on the catalog)."""
        sql = f"SELECT * FROM ({self.view_sql(name)})" + (f" WHERE {where}" if where else "")
        with duckdb.connect() as con:
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
        """(Re)create every view in warehouse.duckdb. Serialized: DuckDB allows one writer."""
        with self._catalog_lock(), duckdb.connect(str(self.db_path)) as con:
            for name in TABLES:
                con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {self.view_sql(name)}')
            for name, sql in VIEWS.items():
                con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')
        return self.db_path

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """Run a query against the catalog, read-only; returns the executed cursor
        (``fetchone`` / ``fetchall`` / ``pl``). Views are created first if missing."""
        if not self.db_path.exists():
            self.refresh_catalog()
        con = duckdb.connect(str(self.db_path), read_only=True)
        return con.execute(query, params)

    def query(self, query: str) -> pl.DataFrame:
        """Run a query against the catalog, read-only, and return a Polars frame."""
        if not self.db_path.exists():
            self.refresh_catalog()
        with duckdb.connect(str(self.db_path), read_only=True) as con:
            rel = con.sql(query)
            return rel.pl() if rel is not None else pl.DataFrame()


class Batch:
    """Part files staged under ``_staging/<id>``; committed by a marker, then renamed in."""

    def __init__(self, wh: Warehouse, batch_id: str):
        self.wh, self.id = wh, batch_id
        self.stage = wh.parquet / "_staging" / batch_id
        if self.stage.exists():
            shutil.rmtree(self.stage)
        self.stage.mkdir(parents=True)
        self.seq = 0

    def add(self, frames: dict[str, pl.DataFrame]) -> None:
        for name, df in frames.items():
            if df.height == 0:
                continue
            df = conform(name, df)
            for rel, part in _split_partitions(TABLES[name], df):
                path = self.stage / name / rel / f"part-{self.id}-{self.seq:05d}.parquet"
                path.parent.mkdir(parents=True, exist_ok=True)
                part.write_parquet(path, compression="zstd", statistics=True)
        self.seq += 1

    def commit(self) -> None:
        _atomic_write_bytes(self.stage / "COMMIT", b"ok")
        self.wh._roll_forward(self.stage)

    def abort(self) -> None:
        shutil.rmtree(self.stage, ignore_errors=True)


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
    """Yield (relative dir, frame without the partition column) per hive partition."""
    if spec.partition is None:
        if df.height:
            yield Path("."), df
        return
    col = spec.partition
    for (value,), part in df.partition_by(col, as_dict=True, maintain_order=True).items():
        label = _NULL_PARTITION if value is None else str(value)
        yield Path(f"{col}={label}"), part.drop(col)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
