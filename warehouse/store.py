"""The warehouse: Parquet datasets (the truth) plus a DuckDB catalog of views.

The home directory is local (DESIGN.md). The Parquet root is ``<home>/parquet`` unless
``--warehouse-uri`` / ``$GOODPUT_WAREHOUSE_URI`` names another directory or an S3 prefix
(``s3://bucket/prefix``; credentials and endpoint come from the standard AWS variables):

    <root>/<table>/[<partition>=<value>/]part-<batch>.parquet   ingest tables, one file per batch
    <root>/<table>/[<partition>=<value>/]data.parquet           derived tables, replaced whole;
                                                                the canonical rows of a Dedupe table
    <root>/<table>/<partition>=<value>/<piece>.parquet          a derived partition kept in pieces
                                                                replaced one by one (hw_events'
                                                                counter events: one per day)
    <root>/_sources/<table>/[<partition>=<value>/]part-<batch>.parquet
                                                                a Dedupe table's rows per source
    <root>/_copies/<table>/[<partition>=<value>/]part-<batch>.parquet
                                                                records left out as repeats of
                                                                another file's stored row
    <root>/_staging/<batch>/...                                 a batch being committed
    <root>/.times_utc                                           marker: times stored UTC-adjusted
    <root>/.sources_apart                                       marker: Dedupe tables laid out as above
    <home>/warehouse.duckdb                                     views over the Parquet
    <home>/reports/  <home>/landing/  <home>/.writer.lock  <home>/.staging-locks/
    <scratch>/.duckdb_spill/  <scratch>/daily-*/                spills and a day's rollup files
                                                                before they are moved in place;
                                                                scratch is $GOODPUT_SCRATCH, else
                                                                the home

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
all-or-nothing already, so they are written in place. Readers never see part of a batch: the
views leave out files of batches whose COMMIT marker is still in ``_staging``.

One writer at a time (``Warehouse.writer``, an OS lock on ``<home>/.writer.lock``): ingest
batches, derived tables, the catalog and forget all write under it. Readers never take it:
``query`` / ``read`` / ``goodput sql`` build their views in memory from the Parquet, and the
catalog file is rewritten whole and renamed into place.

Tables with a ``Dedupe`` (warehouse/schemas.py: one job recorded by sacct text and --json, the
HELP/TYPE every scrape repeats) keep every source's row, the provenance ``forget`` removes, under
``_sources/<table>/``, and ``<table>/`` holds only the merged, canonical rows, so every engine
reading the files sees what the views show. The batch that stages new source rows (or forget's
rewrite of them) also stages the canonical ``data.parquet`` of each partition it touched,
recomputed out of core by DuckDB from that partition's source rows; the COMMIT marker switches
both.

Provenance: a record left out because a stored row from another file holds it is kept under
``_copies/<table>/`` (once per file); ``forget`` removes a file's rows and promotes, for each
removed record, another file's copy into its place, so it removes only what no other stored
file also provides.

Idempotence: the manifest holds the sha256 of every ingested file, and a batch stores only
records whose ``record_key`` (warehouse/schemas.py) is not stored yet, matched out of core by
DuckDB against the table's files of the same partition, reading only the stored rows within
the batch's range of each key column (time, host, ...).
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import posixpath
import re
import shutil
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import IO

import duckdb
import fsspec
import polars as pl
from fsspec.implementations.local import LocalFileSystem

from warehouse.schemas import STORED_TS, TABLES, VIEWS, Table, conform

_DUCK_TYPES = {
    pl.Utf8: "VARCHAR",
    pl.Int32: "INTEGER",
    pl.Int64: "BIGINT",
    pl.Float64: "DOUBLE",
    pl.Boolean: "BOOLEAN",
    pl.Date: "DATE",
}


_NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_SHA256 = re.compile(r"[0-9a-f]{64}")
STALE_STAGE_S = 6 * 3600  # object storage: an uncommitted stage idle this long is abandoned
FAULT_ENV = "GOODPUT_FAULT_EXIT_AFTER_RENAMES"  # tests: os._exit mid-commit after N renames
# warehouse.duckdb opens in DuckDB 1.5 and later: the `duckdb` command (PyPI duckdb-cli, in
# pyproject.toml) is 1.5 while the Python duckdb is 2.0, whose own storage 1.5 cannot read
CATALOG_STORAGE = "v1.5.0"
# DuckDB's budget for every query that reads a whole table or history (matching a batch against
# stored records, the daily rollups, counter events, covariates): it spills to disk beyond this,
# so a step's peak does not grow with the fleet (``Warehouse.connect_out_of_core``)
OUT_OF_CORE_MEMORY = "512MB"
READER_MEMORY = "2GB"  # user SQL (goodput sql): spills past it, or fails with DuckDB's one-line error
# in the Parquet root: its files' times are UTC-adjusted (older versions wrote naive UTC)
TIMES_UTC_MARKER = ".times_utc"  # hidden: ingesting a folder that holds the home skips it
# in the Parquet root: Dedupe tables keep their source rows in _sources/ (older versions kept
# them in the table's own folder, which the views merged)
SOURCES_MARKER = ".sources_apart"
SOURCES = "_sources"
# records a batch left out because another file's stored row holds them (provenance): forget
# promotes them when that row goes (``Batch.add``, ``Warehouse.forget_into``)
COPIES = "_copies"


class WarehouseError(Exception):
    """A warehouse location the user got wrong (scheme, bucket, credentials); the CLI prints it
    as one line."""


class ReadOnlyViolation(WarehouseError):
    """A statement that would write or reach outside the warehouse, given to the read-only
    SQL surface."""


_READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


class WarehouseBusy(WarehouseError):
    """Another process is writing this warehouse and the caller chose not to wait (longer)."""


# Batches this process committed: after an environment error (disk full) the CLI says whether
# anything was stored
COMMITS = [0]

# Per process: homes whose writer lock this process holds, with a re-entrant lock per home so
# nested writers (the CLI around a Dagster run whose assets write) share one acquisition.
_WRITERS: dict[Path, list] = {}
_WRITERS_GUARD = threading.Lock()


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


SCRATCH_ENV = "GOODPUT_SCRATCH"


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
    def __init__(
        self,
        home: str | os.PathLike | None = None,
        uri: str | os.PathLike | None = None,
        wait: bool | float = True,
        read_only: bool = False,
    ):
        """``wait``: what a writer does when another process holds the warehouse: True waits
        as long as it takes, a number waits that many seconds, False or 0 fails at once.
        ``read_only``: a reader's handle: creates nothing, needs no write permission, never
        takes the writer lock (nor recovers a crashed writer's stages: the views leave out a
        batch still committing), and refuses to write."""
        self.home = resolve_home(home)
        self.parquet = resolve_parquet_uri(uri, self.home)
        self.wait = wait
        self.read_only = read_only
        self.db_path = self.home / "warehouse.duckdb"
        self.reports = self.home / "reports"
        self.landing = self.home / "landing"
        # temporary files of out-of-core steps: a local disk even where the home is a shared
        # volume (Kubernetes: an emptyDir)
        self.scratch = Path(os.environ.get(SCRATCH_ENV) or self.home).expanduser().resolve()
        if self.home.exists() and not self.home.is_dir():
            raise WarehouseError(f"home {self.home} is a file, not a directory")
        if read_only:
            self.fs, self._root = fsspec.core.url_to_fs(self.parquet)
            self.local = isinstance(self.fs, LocalFileSystem)
            if not self.local:
                self._check_bucket()
            return
        try:
            for d in (self.reports, self.landing):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot use home {self.home}: {exc.strerror or exc}") from None
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot use ${SCRATCH_ENV} {self.scratch}: {exc.strerror or exc}") from None
        if not os.access(self.home, os.W_OK | os.X_OK):
            raise WarehouseError(f"cannot use home {self.home}: not writable")
        self.fs, self._root = fsspec.core.url_to_fs(self.parquet)
        self.local = isinstance(self.fs, LocalFileSystem)
        if self.local:
            self.fs.makedirs(self._root, exist_ok=True)
        else:
            self._check_bucket()
        try:  # finish what a crashed writer left, unless a live writer is at work
            with self.writer(wait=False):
                pass
        except WarehouseBusy:
            pass

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

    # ---------------------------------------------------------------- writer lock
    @property
    def lock_path(self) -> Path:
        return self.home / ".writer.lock"

    def lock_owner(self) -> str:
        """Who holds the writer lock, for messages: pid, host, command and age."""
        try:
            owner = json.loads(self.lock_path.read_text() or "{}")
        except (OSError, ValueError):
            owner = {}
        if not owner:
            return "another process"
        age = time.time() - owner.get("since", time.time())
        return f"pid {owner.get('pid')} on {owner.get('host')} ({owner.get('command')}), for {age:.0f}s"

    @contextmanager
    def writer(self, wait: bool | float | None = None):
        """Hold this warehouse's one writer lock (``<home>/.writer.lock``) for the block.

        Every write (ingest batches, derived tables, the catalog, forget) goes through here.
        Re-entrant within a process. The lock is an OS file lock, so a writer that dies
        (any signal, any host crash) releases it: a stale lock file is simply taken over.
        Another process's writer makes this one wait (``wait``: True = as long as it takes,
        with one line on stderr; a number = that many seconds; False / 0 = not at all) or
        raise ``WarehouseBusy`` naming the owner. Readers never take it. On first acquisition
        the warehouse is recovered (committed stages rolled forward, others discarded)."""
        if self.read_only:
            raise WarehouseError(f"warehouse {self.home} was opened read-only (a reader's command)")
        wait = self.wait if wait is None else wait
        with _WRITERS_GUARD:
            entry = _WRITERS.setdefault(self.home, [threading.RLock(), 0, None])
        rlock = entry[0]
        if not rlock.acquire(blocking=wait is not False and wait != 0):
            raise WarehouseBusy(f"warehouse {self.home} is being written by another thread of this process")
        try:
            if entry[1] == 0:
                entry[2] = self._take_lock(wait)
                try:
                    self._recover()
                    self._upgrade_times()
                    self._upgrade_sources()
                except BaseException:
                    _release(entry[2])
                    raise
            entry[1] += 1
            try:
                yield
            finally:
                entry[1] -= 1
                if entry[1] == 0:
                    _release(entry[2])
                    entry[2] = None
        finally:
            rlock.release()

    def _take_lock(self, wait: bool | float):
        with ExitStack() as stack:  # closes the file if taking the lock fails
            fh = stack.enter_context(open(self.lock_path, "a+"))
            deadline = None if wait is True else time.monotonic() + float(wait)
            told = False
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    owner = self.lock_owner()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise WarehouseBusy(
                            f"warehouse {self.home} is being written by {owner}; "
                            "try again later or pass --wait SECONDS"
                        ) from None
                    if not told:
                        print(f"goodput: waiting for the writer of {self.home}: {owner}", file=sys.stderr)
                        told = True
                    time.sleep(0.1)
            fh.seek(0)
            fh.truncate()
            owner = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:200],
                     "since": time.time()}
            fh.write(json.dumps(owner))
            fh.flush()
            stack.pop_all()  # success: the caller holds the lock (and the file) open
            return fh

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

    def _upgrade_times(self) -> None:
        """Once per Parquet root: rewrite the files an older version wrote with naive times
        (not UTC-adjusted; they held UTC) as ``STORED_TS``, so every engine reads them as
        instants, then write the ``TIMES_UTC_MARKER``. Each file is replaced atomically, and an
        interrupted upgrade resumes at the next open."""
        marker = self._path(TIMES_UTC_MARKER)
        if self.fs.exists(marker):
            return
        import pyarrow as pa  # here: importing it costs every command a second
        import pyarrow.parquet as pq

        old = []
        for f in self._find(self._root):
            if f.startswith(self._path("_staging") + "/"):
                continue
            with self.fs.open(f, "rb") as fh:
                schema = pq.read_schema(fh)
            if any(pa.types.is_timestamp(t.type) and t.type.tz is None for t in schema):
                old.append(f)
        if old:
            print(f"goodput: storing the times of {len(old)} Parquet files of {self.parquet} as UTC (once)",
                  file=sys.stderr)
        for f in old:
            with self.fs.open(f, "rb") as fh:
                df = pl.read_parquet(fh)
            self._write(f, _parquet_writer(df))
        self._write(marker, lambda fh: fh.write(b"times are stored as timestamp[us, tz=UTC]\n"))

    def _upgrade_sources(self) -> None:
        """Once per Parquet root: move the source rows an older version kept in a Dedupe
        table's own folder (``part-*.parquet``) to ``_sources/<table>/`` and write the table's
        canonical rows in their place, in one staged batch (a crash leaves the old layout or
        rolls forward to the new), then write the ``SOURCES_MARKER``."""
        marker = self._path(SOURCES_MARKER)
        if self.fs.exists(marker):
            return
        old = [f for name, spec in TABLES.items() if spec.dedupe for f in self._find(self._path(name))
               if posixpath.basename(f).startswith("part-")]
        if old:
            print(f"goodput: keeping the source rows of {len(old)} Parquet files of {self.parquet} apart "
                  "from their tables' merged rows (once)", file=sys.stderr)
            batch = Batch(self, f"sources-{uuid.uuid4().hex[:12]}")
            try:
                for f in old:
                    rel = f[len(self._root) + 1 :]
                    dest = _join(batch.stage, SOURCES, rel)
                    if self.local:
                        self.fs.makedirs(posixpath.dirname(dest), exist_ok=True)
                    self.fs.copy(f, dest)
                    batch.gone.append(rel)
                    name, part = rel.split("/", 1)
                    batch.touched.add((name, posixpath.dirname(part)))
            except BaseException:
                batch.abort()
                raise
            batch.commit()
        self._write(marker, lambda fh: fh.write(b"Dedupe tables: source rows in _sources/, canonical rows in the table\n"))

    def records_dir(self, name: str) -> str:
        """Where a table's ingested rows are stored, relative to the root: ``_sources/<table>``
        for a Dedupe table (its own folder holds the canonical rows), else the table's folder."""
        return _join(SOURCES, name) if TABLES[name].dedupe else name

    def record_files(self, name: str) -> list[str]:
        """The Parquet files (local paths or URIs) of a table's rows as ingested, one per
        source record: a Dedupe table's source rows, else the table's own files (``files``)."""
        return [self.parquet + f[len(self._root) :] for f in self._find(self._path(self.records_dir(name)))]

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
        """Move a committed stage's files into place (replacing same-named files), then delete
        the files its ``DELETE`` list names (paths relative to the root; written by forget),
        then the stage. Repeating it after a crash at any point finishes the same work."""
        src = self._find(stage)
        dst = [self._root + f[len(stage) :] for f in src]
        crash_after = int(os.environ.get(FAULT_ENV, "-1"))  # fault injection (tests/test_faults.py)
        if self.local:
            for i, (s, d) in enumerate(zip(src, dst, strict=True)):
                if i == crash_after:
                    os._exit(70)
                self.fs.makedirs(posixpath.dirname(d), exist_ok=True)
                self.fs.mv(s, d)  # a rename: atomic
        elif src:
            self.fs.mv(src, dst)  # concurrent server-side copies, then one bulk delete
        deletes = _join(stage, "DELETE")
        if self.fs.exists(deletes):
            gone = [self._path(rel) for rel in json.loads(self.fs.cat_file(deletes))]
            gone = [f for f in gone if self.fs.exists(f)]
            if gone:
                self.fs.rm(gone)
        self._rm_tree(stage)

    @contextmanager
    def batch(self, batch_id: str):
        """Stage rows for ingest tables; they become visible together when the block exits
        without error, and not at all otherwise."""
        with self.writer():
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
        with self.writer():
            self._replace_table(name, df, partitions)

    def _replace_table(self, name: str, df: pl.DataFrame, partitions: str) -> None:
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

    def replace_partition(self, name: str, value: str, frames: Iterable[pl.DataFrame]) -> int:
        """Replace one hive partition of a derived table with the rows of ``frames``, streamed
        chunk by chunk into its one Parquet file (``write_pieces``: the piece ``data``), so the
        partition never has to fit in memory. No rows: the partition is removed. Returns the
        rows written."""
        rows = 0
        folder, path = self._partition_file(name, value)
        with self.writer():
            with self.write_pieces(name, value) as write:
                for df in frames:
                    write("data", df)
                    rows += df.height
            for f in [f for f in self._find(folder) if f != path] if rows else [folder]:
                self._rm_tree(f)
        return rows

    @contextmanager
    def write_pieces(self, name: str, value: str):
        """Write files ("pieces") of one hive partition of a derived table, each
        ``<partition>/<piece>.parquet``: yields ``write(piece, df)``, which appends ``df`` to
        that piece (an empty ``df`` still makes the piece, with no rows), or, with ``piece`` a
        Series of piece names (one per row), each row to its own piece, converting ``df`` once
        (a chunk spanning many pieces costs one conversion, not one per piece). Rows stream to
        local files under the scratch folder, so no piece has to fit in memory; when the block
        ends without error each piece replaces its file, atomically (``_write``), in piece
        order. On error no file changes. Other files of the partition stay (``drop_pieces``)."""
        import pyarrow.parquet as pq  # not on the start path of read-only commands

        spec = TABLES[name]
        schema = _stored(spec.empty().drop(spec.partition)).to_arrow().schema
        folder = self._partition_file(name, value)[0]
        with self.writer(), TemporaryDirectory(prefix="pieces-", dir=self.scratch) as tmp:
            local = Path(tmp)
            with ExitStack() as files:
                writers: dict[str, pq.ParquetWriter] = {}

                def opened(piece: str) -> pq.ParquetWriter:
                    if piece not in writers:
                        out = pq.ParquetWriter(local / f"{piece}.parquet", schema, compression="zstd")
                        writers[piece] = files.enter_context(out)
                    return writers[piece]

                def write(piece: str | pl.Series, df: pl.DataFrame) -> None:
                    if isinstance(piece, str):
                        opened(piece)
                        groups = [(piece, None)]
                    else:  # (piece, its rows' indices), in order of first appearance
                        by_piece = pl.DataFrame({"piece": piece}).with_row_index("i")
                        groups = by_piece.group_by("piece", maintain_order=True).agg("i").iter_rows()
                    if not df.height:
                        return
                    table = _stored(conform(name, df).drop(spec.partition)).to_arrow().cast(schema)
                    for each, indices in groups:
                        opened(each).write_table(table if indices is None else table.take(indices))

                yield write
            for piece in sorted(writers):  # every file closed (complete) above
                with (local / f"{piece}.parquet").open("rb") as src:
                    self._write(_join(folder, f"{piece}.parquet"), lambda fh: shutil.copyfileobj(src, fh, 1 << 20))

    def piece_mtimes(self, name: str, value: str) -> dict[str, float]:
        """Piece (file name without ``.parquet``) -> modification time, of one hive partition
        of a derived table (none if it does not exist)."""
        folder = self._partition_file(name, value)[0]
        found = self.fs.find(folder, detail=True) if self.fs.exists(folder) else {}
        return {
            posixpath.basename(f)[: -len(".parquet")]: _mtime(info)
            for f, info in found.items() if f.endswith(".parquet") and posixpath.dirname(f) == folder
        }  # fmt: skip

    def drop_pieces(self, name: str, value: str, pieces: Iterable[str]) -> None:
        """Delete some pieces (``write_pieces``) of one hive partition of a derived table."""
        folder = self._partition_file(name, value)[0]
        with self.writer():
            for piece in pieces:
                self._rm_tree(_join(folder, f"{piece}.parquet"))

    def put_partition(self, name: str, value: str, local_file: Path) -> None:
        """``local_file`` (a Parquet file written elsewhere, e.g. by DuckDB's ``COPY``) becomes
        the one file of a derived table's hive partition, atomically, local or object storage."""
        with self.writer(), local_file.open("rb") as src:
            self._write(self._partition_file(name, value)[1], lambda fh: shutil.copyfileobj(src, fh, 1 << 20))

    def _partition_file(self, name: str, value: str) -> tuple[str, str]:
        """(folder, its one ``data.parquet``) of a derived table's hive partition."""
        folder = self._path(name, f"{TABLES[name].partition}={value}")
        return folder, _join(folder, "data.parquet")

    def drop_partition(self, name: str, value: str) -> None:
        """Delete one hive partition of a derived table (a rewrite that produced no rows)."""
        with self.writer():
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

    def connect(
        self, database: str = ":memory:", read_only: bool = False, storage: str | None = None
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection that can run ``view_sql`` SQL: on object storage the fsspec
        filesystem is registered on it (the httpfs extension is not needed). ``storage``: the
        oldest DuckDB storage version a new database file must open in.

        s3fs caches listings, with each file's size, for the process: our own writes keep it
        current, other processes' (Dagster runs, the sensor) do not, so it starts empty for each
        connection; within one it spares a HEAD request per file DuckDB opens."""
        config = {"storage_compatibility_version": storage} if storage else {}
        con = duckdb.connect(database, read_only=read_only, config=config)
        # stored times are TIMESTAMPTZ: this session converts them to and from naive UTC
        con.execute("SET TimeZone = 'UTC'")
        # a query past 2 s would draw DuckDB's progress bar over the CLI's output and into
        # Dagster's captured step logs
        con.execute("SET enable_progress_bar = false")
        if not self.local:
            self.fs.invalidate_cache()
            con.register_filesystem(self.fs)
        return con

    def connect_out_of_core(self) -> duckdb.DuckDBPyConnection:
        """``connect()`` whose queries stay within ``OUT_OF_CORE_MEMORY``, spilling to a
        temporary directory under the scratch folder ($GOODPUT_SCRATCH, else the home)."""
        con = self.connect()
        con.execute(f"SET memory_limit = '{OUT_OF_CORE_MEMORY}'")
        con.execute(f"SET temp_directory = {_sql_str(str(self.scratch / '.duckdb_spill'))}")
        return con

    def committed_stages(self) -> list[str]:
        """Batch ids whose COMMIT marker is written but whose files are still being moved in
        (a live writer mid-commit, or one that crashed there)."""
        try:
            commits = self.fs.glob(literal_path(self._path("_staging")) + "/*/COMMIT")
            return sorted(posixpath.basename(posixpath.dirname(f)) for f in commits)
        except FileNotFoundError:
            return []

    def view_sql(self, name: str, guard: bool | None = None, zoned: bool = False, root: str | None = None) -> str:
        """SELECT over one table's Parquet files with the declared column types.

        ``zoned``: times as stored, ``TIMESTAMPTZ`` (what the catalog and ``goodput sql`` show
        users); else naive ``TIMESTAMP`` holding UTC, the in-memory contract the analyses'
        SQL and Polars frames use (``warehouse/schemas.py``). ``root``: how the SQL names the
        Parquet root (default: its absolute path or URI; the catalog names it relative to the home).

        ``guard``: exclude the files of batches still committing (COMMIT marker in
        ``_staging``), checked when the query runs, so a reader never sees part of a batch even
        if its writer dies between two renames. None = only when such a batch exists now (a
        query inside this process, which holds or saw no writer); the catalog and the SQL
        surface always guard, since they read while others write."""
        spec = TABLES[name]
        if not self.files(name):
            cols = ", ".join(f'{_typed("NULL", t, zoned)} AS "{c}"' for c, t in spec.columns.items())
            return f"SELECT {cols} WHERE false"
        root = self.parquet if root is None else root
        files = _sql_str(f"{literal_path(root)}/{name}/**/*.parquet")
        scan = f"read_parquet({files}, hive_partitioning = true, union_by_name = true"
        if spec.kind == "ingest" and (guard or (guard is None and self.committed_stages())):
            commits = _sql_str(f"{literal_path(root)}/_staging/*/COMMIT")
            scan = (
                f"(SELECT * EXCLUDE (filename) FROM {scan}, filename = true) WHERE NOT EXISTS ("
                f"SELECT 1 FROM glob({commits}) g "
                f"WHERE contains(filename, '/part-' || split_part(g.file, '/', -2) || '-')))"
            )
        else:
            scan += ")"
        return _typed_scan(spec, scan, zoned)

    def read(self, name: str, where: str | None = None) -> pl.DataFrame:
        """A table as a Polars frame, read straight from Parquet (never blocks on the catalog)."""
        sql = f"SELECT * FROM ({self.view_sql(name)})" + (f" WHERE {where}" if where else "")
        with self.connect() as con:
            df = con.sql(sql).pl()
        return conform(name, df)

    def known_sha256(self) -> set[str]:
        return set(self.read("ingest_manifest")["sha256"].to_list())

    # ---------------------------------------------------------------- forget
    def forget(self, targets: list[str]) -> dict[str, int]:
        """Remove every row that ingested files produced, in every ingest table, with their
        manifest and quarantine rows, so they can be ingested again. ``targets`` are paths as
        recorded in the manifest, or sha256 digests standing for the path they were ingested
        under. A path means every version ingested under it: a log that grew stored only its
        new records the second time, so its versions stand or fall together. Returns rows
        removed per table.

        Atomic like a batch: each affected Parquet part is rewritten without those rows into a
        stage, parts left empty are listed in its ``DELETE`` file, and the COMMIT marker
        switches it over; a crash rolls it forward (before the marker: discards it). Derived
        tables follow at the next ``goodput build``."""
        with self.batch(f"forget-{uuid.uuid4().hex[:12]}") as batch:
            return self.forget_into(batch, targets)[0]

    def forget_into(self, batch: Batch, targets: list[str]) -> tuple[dict[str, int], set[str]]:
        """``forget`` staged into ``batch`` (committed with whatever else it holds: ``ingest
        --replace`` stages the files' new rows in the same batch, one commit). Returns rows
        removed per table and the sha256 digests whose manifest rows go."""
        manifest = self.read("ingest_manifest")
        wanted = list(set(targets))
        paths = set(manifest.filter(pl.col("sha256").is_in(wanted) | pl.col("path").is_in(wanted))["path"].to_list())
        paths |= set(self.read("quarantine").filter(pl.col("sha256").is_in(wanted))["source_file"].to_list())
        paths |= {t for t in wanted if not _SHA256.fullmatch(t)}
        if not paths:
            return {}, set()
        shas = set(manifest.filter(pl.col("path").is_in(list(paths)))["sha256"].to_list())
        where = {n: (_file_column(t), paths) for n, t in TABLES.items() if t.kind == "ingest"}
        batch.removed = {}
        removed = self.delete_into(batch, where)
        for name, spec in TABLES.items():
            if _has_copies(spec):
                self.delete_into(batch, {name: ("source_file", paths)}, _join(COPIES, name))
                if batch.removed.get(name):
                    self._promote(batch, name, pl.concat(batch.removed[name], how="diagonal_relaxed"))
        return removed, shas

    def _promote(self, batch: Batch, name: str, gone: pl.DataFrame) -> None:
        """Stage, in place of the removed rows ``gone``, another file's copy of each of their
        records (the first by file and line) that this batch keeps."""
        spec = TABLES[name]
        keys = [k for k in spec.record_columns if k != spec.partition]
        for rel, part in _split_partitions(spec, gone.select(spec.record_columns).unique()):
            files = [literal_path(f if self.local else f"{self.fs.protocol[0]}://{f}")
                     for f in batch._record_files(name, rel, _join(COPIES, name))]
            if not files:
                continue
            on = " AND ".join(f'c."{k}" IS NOT DISTINCT FROM g."{k}"' for k in keys)
            order = ", ".join(c for c in ("source_file", "source_line") if c in spec.columns)
            by = ", ".join(f'c."{k}"' for k in keys)
            with self.connect_out_of_core() as con:
                con.register("g", part.to_arrow())
                promoted = con.sql(
                    f"SELECT * FROM read_parquet($files, union_by_name = true) c SEMI JOIN g ON {on} "
                    f"QUALIFY row_number() OVER (PARTITION BY {by} "
                    f"ORDER BY {order}) = 1", params={"files": files}).pl()
            if promoted.height:
                if spec.partition:
                    value = rel.split("=", 1)[1]
                    promoted = promoted.with_columns(pl.lit(None if value == _NULL_PARTITION else value)
                                                     .cast(spec.columns[spec.partition]).alias(spec.partition))
                batch.add({name: promoted})

    def delete_rows(self, where: dict[str, tuple[str, set[str]] | pl.Expr]) -> dict[str, int]:
        """Remove from each table the rows whose column is one of the values
        (``{table: (column, values)}``), or that match a Polars predicate, in one atomic batch.
        Returns rows removed per table."""
        with self.batch(f"forget-{uuid.uuid4().hex[:12]}") as batch:
            return self.delete_into(batch, where)

    def delete_into(self, batch: Batch, where: dict[str, tuple[str, set[str]] | pl.Expr],
                    under: str | None = None) -> dict[str, int]:
        """``delete_rows`` staged into ``batch`` (from the table's records, or the files
        ``under`` another folder: its copies). The rows removed from records are kept in
        ``batch.removed`` where it is set (forget promotes copies of them)."""
        removed: dict[str, int] = {}
        for name, match in where.items():
            folder = self._path(under or self.records_dir(name))
            for f in batch.committed_files(folder):
                n = batch.rewrite_without(f, match)
                if n is not None:
                    removed[name] = removed.get(name, 0) + n[0]
                    if n[1]:
                        batch.gone.append(f[len(self._root) + 1 :])
                    if batch.removed is not None and under is None:
                        batch.removed.setdefault(name, []).append(n[2])
                    if TABLES[name].dedupe and under is None:  # its canonical rows follow in the same commit
                        batch.touched.add((name, posixpath.dirname(f[len(folder) + 1 :])))
        return removed

    # ---------------------------------------------------------------- catalog
    def refresh_catalog(self) -> Path:
        """(Re)create warehouse.duckdb: every view, written into a new file that is renamed over
        the old one, so a client holding the old file open (read-only) neither blocks this nor
        sees a half-made catalog; it sees the new views when it reconnects. ``_parquet_root``
        records the root the views read, as a home may be pointed at another.

        A Parquet root inside the home is named relative to it (``parquet/<table>/...``), so
        the home can be moved or copied: DuckDB resolves the paths against its working
        directory or ``file_search_path`` (README: open it from the home, or set that). The
        file is written in ``CATALOG_STORAGE`` so the DuckDB CLI we install opens it too."""
        root = self.catalog_root()
        tmp = self.home / f".warehouse.duckdb.{os.getpid()}.tmp"
        with self.writer(), TemporaryDirectory(prefix="goodput-catalog-") as build:
            # built in a temporary folder, then copied in: DuckDB reads a '?' in a database
            # path as the start of its options, so it cannot write one in a home named so
            made = str(Path(build) / "warehouse.duckdb")
            tmp.unlink(missing_ok=True)
            try:
                with self.connect(made, storage=CATALOG_STORAGE) as con:
                    con.execute(f"SET file_search_path = {_sql_str(str(self.home))}")
                    self._create_views(con, guard=True, zoned=True, root=root)
                    con.execute(f"CREATE OR REPLACE VIEW _parquet_root AS SELECT {_sql_str(root)} AS uri")
                shutil.copyfile(made, tmp)
                os.replace(tmp, self.db_path)
            finally:
                tmp.unlink(missing_ok=True)
        return self.db_path

    def catalog_root(self) -> str:
        """The Parquet root as the catalog's views name it: relative to the home when it lies
        inside it, else its absolute path or ``s3://`` URI."""
        if self.local and Path(self.parquet).is_relative_to(self.home):
            return Path(self.parquet).relative_to(self.home).as_posix()
        return self.parquet

    def _create_views(
        self, con: duckdb.DuckDBPyConnection, guard: bool | None = None, zoned: bool = False, root: str | None = None
    ) -> None:
        for name in TABLES:
            con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {self.view_sql(name, guard, zoned, root)}')
        for name, sql in VIEWS.items():
            con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')

    def reader(self, allow_files: list[str | os.PathLike] = (), spill: str | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection holding every view, made now from the Parquet (never
        stale, never touching warehouse.duckdb) and locked down for untrusted SQL: file access
        only under the Parquet root (and ``allow_files`` directories), no extension installs
        or loads, configuration locked. ``run_readonly`` adds the statement check. ``spill``:
        DuckDB's temporary directory, which its SQL may read (default ``.tmp`` under the working
        directory, where other files can lie): give a private, empty one."""
        con = self.connect()
        con.execute(f"SET memory_limit = '{READER_MEMORY}'")  # DuckDB's default: 80% of the machine
        if spill is not None:
            con.execute(f"SET temp_directory = {_sql_str(spill)}")
        self._create_views(con, guard=True, zoned=True)
        # the Parquet root (a directory or s3://bucket/prefix) and the opted-in directories only
        dirs = [self.parquet, *(str(Path(d).expanduser().resolve()) for d in allow_files)]
        dirs += [literal_path(d) for d in dirs]  # the views name the root as a glob, escaped
        listed = ", ".join("'" + d.rstrip("/").replace("'", "''") + "/'" for d in dirs)
        con.execute(f"SET allowed_directories = [{listed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")
        return con

    def run_readonly(self, query: str, allow_files: list[str | os.PathLike] = ()) -> pl.DataFrame:
        """Run user SQL (see ``readonly_relation``) and return the result as a Polars frame."""
        with self.readonly_relation(query, allow_files) as rel:
            return rel.pl() if rel is not None else pl.DataFrame()

    @contextmanager
    def readonly_relation(self, query: str, allow_files: list[str | os.PathLike] = ()):
        """User SQL as a DuckDB relation (None for a statement without a result), open while the
        block runs: only SELECT / EXPLAIN statements (no COPY, ATTACH, INSTALL, LOAD, SET, CREATE
        ...), against ``reader()``, within ``READER_MEMORY``. Raises ``ReadOnlyViolation`` or
        ``duckdb.Error``."""
        for stmt in duckdb.extract_statements(query):
            if stmt.type not in _READ_STATEMENTS:
                kind = stmt.type.name.replace("_STATEMENT", "")
                raise ReadOnlyViolation(f"{kind} statements are not allowed: goodput sql is read-only")
        with TemporaryDirectory(prefix="goodput-sql-") as spill, self.reader(allow_files, spill) as con:
            yield con.sql(query)

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """Run a query over the views (made from the Parquet now); returns the executed cursor
        (``fetchall`` / ``pl``)."""
        con = self.connect()
        self._create_views(con)
        return con.execute(query, params)

    def query(self, query: str) -> pl.DataFrame:
        """Run a query over the views (made from the Parquet now) and return a Polars frame."""
        with self.connect() as con:
            self._create_views(con)
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
        self.gone: list[str] = []  # committed files (relative to the root) the commit deletes
        self.touched: set[tuple[str, str]] = set()  # Dedupe (table, partition dir) to recompute
        self.removed: dict[str, list[pl.DataFrame]] | None = None  # forget: rows removed per table
        self.conflicts: list[pl.DataFrame] = []  # rows add() refused: same key, other values
        self._con: duckdb.DuckDBPyConnection | None = None

    def add(self, frames: dict[str, pl.DataFrame]) -> dict[str, dict[str | None, int]]:
        """Stage rows. Only records not stored yet are written (a table's ``record_key``:
        repeats within ``frames``, rows already in the warehouse or staged earlier in this
        batch are left out). Returns, per table, the rows left out per source file."""
        dropped: dict[str, dict[str | None, int]] = {}
        for name, df in frames.items():
            if df.height == 0:
                continue
            spec = TABLES[name]
            df = conform(name, df)
            keys = spec.record_columns
            if keys:
                df = df.with_row_index("_i")
                firsts = _first_of_each_key(df, keys)
                parts, same, other = [], [df["_i"].head(0)], []
                for rel, part in _split_partitions(spec, firsts):
                    seen, mine, disagree = self._stored(name, rel, part, keys)
                    same.append(mine)
                    other.append(disagree)
                    parts.append((rel, part.filter(~pl.col("_i").is_in(seen.implode())) if seen.len() else part))
                if sum(part.height for _, part in parts) < df.height:
                    kept = pl.concat([df["_i"].head(0), *(part["_i"] for _, part in parts)])
                    gone = df.filter(~pl.col("_i").is_in(kept.implode()))
                    if spec.values:
                        gone = self._conflicts(name, gone, firsts, pl.concat(other), keys)
                    if gone.height:
                        dropped[name] = dict(gone.group_by(_file_column(spec)).len().rows())
                    if _has_copies(spec):
                        self._add_copies(name, gone, firsts, pl.concat(same), keys)
                parts = [(rel, part.drop("_i")) for rel, part in parts]
            else:
                parts = list(_split_partitions(spec, df))
            for rel, part in parts:
                if part.height == 0:
                    continue
                path = _join(self.stage, self.wh.records_dir(name), rel, f"part-{self.id}-{self.seq:05d}.parquet")
                self.wh._write(path, _parquet_writer(part), atomic=False)
                if spec.dedupe:
                    self.touched.add((name, rel))
        self.seq += 1
        return dropped

    def _stored(
        self, name: str, rel: str, part: pl.DataFrame, keys: tuple[str, ...], folder: str | None = None
    ) -> tuple[pl.Series, pl.Series]:
        """Row indices (``_i``) of ``part`` whose record key is already stored in this
        partition (committed, or staged earlier in this batch), and those of them a stored row
        of the same file holds (``source_file``; all of them where the table has none).
        ``folder``: match against the files of another folder than the table's records (its
        copies). Out of core: DuckDB matches the
        stored files against the batch, keeping only the batch's keys in memory; the batch's
        range of each key column (``_key_ranges``) prunes stored files and row groups by their
        statistics (a batch holds some hosts' files: the other hosts' rows are never read)."""
        files = self._record_files(name, rel, folder)
        none = pl.Series("_i", [], pl.UInt32)
        if not files:
            return none, none, pl.DataFrame({"_i": none, "_other": [], "_was": []},
                                            schema={"_i": pl.UInt32, "_other": pl.Utf8, "_was": pl.Utf8})
        keys = tuple(k for k in keys if k != TABLES[name].partition)
        own = "source_file" if "source_file" in TABLES[name].columns and "source_file" not in keys else None
        values = TABLES[name].values if folder is None else ()
        urls = [literal_path(f if self.wh.local else f"{self.wh.fs.protocol[0]}://{f}") for f in files]
        on = " AND ".join(f'e."{k}" IS NOT DISTINCT FROM b."{k}"' for k in keys)
        cols = ", ".join(f'e."{k}"' for k in keys)
        # files written before a key column was declared read it as null
        spec = TABLES[name]
        typed = ", ".join(f'CAST(NULL AS {duck_type(spec.columns[k])}) AS "{k}"' for k in keys)
        ranges = _key_ranges(part, keys, spec)
        where = ("WHERE " + " AND ".join(ranges)) if ranges else ""
        con = self._connection()
        con.register("b", part.select("_i", *keys, *([own] if own else []), *values).to_arrow())
        file_col = f', e."{own}" AS _file' if own else ", NULL AS _file"
        value_cols = "".join(f', e."{v}"' for v in values)
        typed_values = "".join(f', CAST(NULL AS {duck_type(TABLES[name].columns[v])}) AS "{v}"' for v in values)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE hits AS SELECT DISTINCT {cols}{file_col}{value_cols} FROM "
            f"(SELECT * FROM read_parquet($files, union_by_name = true) "
            f"UNION ALL BY NAME SELECT {typed}{', NULL::VARCHAR AS source_file' if own else ''}{typed_values} "
            f"WHERE false) e SEMI JOIN b ON {on} {where}",
            {"files": urls},
        )
        same = f'e._file IS NOT DISTINCT FROM b."{own}"' if own else "true"
        differ = " OR ".join(f'e."{v}" IS DISTINCT FROM b."{v}"' for v in values) or "false"
        was = " || ', ' || ".join(f"""'{v} ' || coalesce(e."{v}"::VARCHAR, 'null')""" for v in values) or "NULL"
        hits = con.sql(
            f"SELECT b._i, bool_or({same}) AS same, bool_and(NOT ({differ})) AS agree, "
            f"first(e._file) FILTER (WHERE {differ}) AS _other, first({was}) FILTER (WHERE {differ}) AS _was "
            f"FROM b JOIN hits e ON {on} GROUP BY b._i"
        ).pl()
        con.unregister("b")
        # a record some stored row repeats exactly is a repeat, whatever others say
        disagree = hits.filter(~pl.col("agree") & ~pl.col("same")).select(
            pl.col("_i").cast(pl.UInt32), pl.col("_other").cast(pl.Utf8), pl.col("_was").cast(pl.Utf8))
        return hits["_i"].cast(pl.UInt32), hits.filter("same")["_i"].cast(pl.UInt32), disagree

    def _conflicts(self, name: str, gone: pl.DataFrame, firsts: pl.DataFrame, stored: pl.DataFrame,
                   keys: tuple[str, ...]) -> pl.DataFrame:
        """``gone`` (rows left out as repeats) without the conflicts among them, which are kept
        in ``self.conflicts`` (file, line, raw, error): rows whose key a stored row (``stored``:
        ``_i``, the other file, its values) or a row kept in this batch from another file holds
        with other ``values``."""
        spec = TABLES[name]
        vals = list(spec.values)
        file_col = _file_column(spec)
        kept = firsts.filter(~pl.col("_i").is_in(gone["_i"].implode()))  # stored by this batch
        twins = gone.filter(~pl.col("_i").is_in(firsts["_i"].implode())).join(
            kept.select(*keys, *[pl.col(v).alias(f"_kept_{v}") for v in vals], _other=file_col),
            on=list(keys), how="inner", nulls_equal=True)
        differ = pl.any_horizontal(pl.col(v).ne_missing(pl.col(f"_kept_{v}")) for v in vals)
        was = pl.concat_str([pl.format(f"{v} {{}}", pl.col(f"_kept_{v}").cast(pl.Utf8).fill_null("null"))
                             for v in vals], separator=", ")
        twins = twins.filter(differ & (pl.col("_other") != pl.col(file_col))).select("_i", "_other", _was=was)
        bad = pl.concat([stored, twins.cast({"_i": pl.UInt32})]).unique("_i", keep="first")
        if not bad.height:
            return gone
        rows = gone.join(bad, on="_i", how="inner")
        vals_here = pl.concat_str([pl.format(f"{v} {{}}", pl.col(v).cast(pl.Utf8).fill_null("null"))
                                   for v in vals], separator=", ")
        self.conflicts.append(rows.select(
            source_file=pl.col(file_col),
            line=pl.col("source_line") if "source_line" in rows.columns else pl.lit(None, pl.Int64),
            raw=pl.struct([c for c in rows.columns if c in spec.columns]).struct.json_encode().str.slice(0, 500),
            error=pl.format("conflicts with the stored record of {} ({}): {} here", "_other", "_was", vals_here),
        ))
        return gone.filter(~pl.col("_i").is_in(bad["_i"].implode()))

    def _add_copies(self, name: str, gone: pl.DataFrame, firsts: pl.DataFrame, same: pl.Series,
                    keys: tuple[str, ...]) -> None:
        """Stage, under ``_copies/<table>``, the rows of ``gone`` (left out as repeats) that
        no row of their own file holds: not a repeat within their file (the kept twin's file)
        nor of a stored row of it (``same``), nor copied for their file before."""
        twins = gone.filter(~pl.col("_i").is_in(firsts["_i"].implode())).join(
            firsts.select(*keys, _kept="source_file"), on=list(keys), how="inner", nulls_equal=True)
        mine = twins.filter(pl.col("_kept") == pl.col("source_file"))["_i"]
        copies = gone.filter(~pl.col("_i").is_in(pl.concat([mine, same.cast(mine.dtype)]).implode()))
        copies = copies.unique([*keys, "source_file"], keep="first", maintain_order=True)
        spec, folder = TABLES[name], _join(COPIES, name)
        for rel, part in _split_partitions(spec, copies):
            seen = self._stored(name, rel, part, (*keys, "source_file"), folder)[0]
            part = part.filter(~pl.col("_i").is_in(seen.implode())).drop("_i")
            if part.height:
                path = _join(self.stage, folder, rel, f"part-{self.id}-{self.seq:05d}.parquet")
                self.wh._write(path, _parquet_writer(part), atomic=False)

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """The batch's DuckDB connection for matching records (opening one costs ~20 ms, and a
        batch matches once per partition it touches), closed with the batch."""
        if self._con is None:
            self._con = self._lock.enter_context(self.wh.connect_out_of_core())
        return self._con

    def _record_files(self, name: str, rel: str, folder: str | None = None) -> list[str]:
        """A partition's stored rows as this batch will leave them: the committed files it
        neither rewrites nor deletes, and its staged ones (of the table's records, or of
        ``folder``)."""
        folder = _join(folder or self.wh.records_dir(name), rel)
        staged = self.wh._find(_join(self.stage, folder))
        replaced = {self.wh._root + f[len(self.stage) :] for f in staged}
        replaced |= {self.wh._path(g) for g in self.gone}
        return [f for f in self.wh._find(self.wh._path(folder)) if f not in replaced] + staged

    def stage_canonical(self) -> None:
        """Stage the canonical rows (``data.parquet``) of every Dedupe partition this batch
        touched: its source rows merged by the table's ``Dedupe`` (the SQL the views used to
        run), computed and written out of core by DuckDB. A partition left without source rows
        loses its canonical file."""
        for name, rel in sorted(self.touched):
            spec = TABLES[name]
            files = self._record_files(name, rel)
            if not files:
                self.gone += [f[len(self.wh._root) + 1 :] for f in self.wh._find(self.wh._path(name, rel))]
                continue
            urls = ", ".join(_sql_str(literal_path(f if self.wh.local else f"{self.wh.fs.protocol[0]}://{f}")) for f in files)
            scan = f"read_parquet([{urls}], hive_partitioning = {spec.partition is not None}, union_by_name = true)"
            drop = f' EXCLUDE ("{spec.partition}")' if spec.partition else ""
            query = f"SELECT *{drop} FROM ({_deduped(_typed_scan(spec, scan, zoned=True), spec)}) ORDER BY ALL"
            target = _join(self.stage, name, rel, "data.parquet")
            with self.wh.connect_out_of_core() as con, TemporaryDirectory() as tmp:
                out = target if self.wh.local else str(Path(tmp) / "data.parquet")
                if self.wh.local:
                    self.wh.fs.makedirs(posixpath.dirname(target), exist_ok=True)
                con.execute(f"COPY ({query}) TO {_sql_str(out)} (FORMAT parquet, COMPRESSION zstd)")
                if not self.wh.local:
                    self.wh.fs.put_file(out, target)

    def committed_files(self, folder: str) -> list[str]:
        """The committed Parquet files under ``folder`` (a path in the root) this batch does
        not delete."""
        gone = {self.wh._path(g) for g in self.gone}
        return [f for f in self.wh._find(folder) if f not in gone]

    def rewrite_without(self, file: str, match: tuple[str, set[str]] | pl.Expr):
        """Stage ``file`` (a committed part) rewritten without the rows ``match`` selects: a
        (column, values) pair or a predicate (its staged rewrite, if this batch made one
        already, is what is rewritten). None if it holds none, else (rows removed, whether
        the file is left empty and is to be deleted instead, the rows removed)."""
        staged = self.stage + file[len(self.wh._root) :]
        with self.wh.fs.open(staged if self.wh.fs.exists(staged) else file, "rb") as fh:
            df = pl.read_parquet(fh)
        if isinstance(match, tuple):
            if match[0] not in df.columns:
                return None
            match = pl.col(match[0]).is_in(list(match[1]))
        hit = match.fill_null(False)
        keep = df.filter(~hit)
        if keep.height == df.height:
            return None
        if keep.height:
            self.wh._write(self.stage + file[len(self.wh._root) :], _parquet_writer(keep), atomic=False)
        return df.height - keep.height, keep.height == 0, _with_partition(df.filter(hit), file)

    def commit(self) -> None:
        with self._lock:
            self.stage_canonical()
            if self.gone:
                gone = json.dumps(self.gone).encode()
                self.wh._write(_join(self.stage, "DELETE"), lambda fh: fh.write(gone), atomic=False)
            self.wh._write(_join(self.stage, "COMMIT"), lambda fh: fh.write(b"ok"))
            COMMITS[0] += 1
            self.wh._roll_forward(self.stage)

    def abort(self) -> None:
        with self._lock:
            self.wh._rm_tree(self.stage)


def _typed(expr: str, dtype: pl.DataType, zoned: bool) -> str:
    """``expr`` cast to a column's type; a time as ``TIMESTAMPTZ``, or as naive UTC when not
    ``zoned`` (files written before times were stored with their zone hold naive UTC, which
    the cast reads in the session's zone: UTC on ``Warehouse.connect``)."""
    cast = f"CAST({expr} AS {duck_type(dtype)})"
    if isinstance(dtype, pl.Datetime) and not zoned:
        return f"timezone('UTC', {cast})"
    return cast


def _typed_scan(spec: Table, scan: str, zoned: bool) -> str:
    """SELECT every declared column of ``spec``, typed, from ``scan`` (a FROM item reading the
    table's Parquet files, hive-partitioned)."""
    exprs = []
    for c, t in spec.columns.items():
        src = f'"{c}"'
        if c == spec.partition:
            src = f"NULLIF(CAST({src} AS VARCHAR), '{_NULL_PARTITION}')"
        exprs.append(f'{_typed(src, t, zoned)} AS "{c}"')
    # a column added to the schema after a file was written reads as null there: the empty
    # row set names every declared column and UNION BY NAME fills the gaps
    typed = ", ".join(
        f'CAST(NULL AS {"VARCHAR" if c == spec.partition else duck_type(t)}) AS "{c}"'
        for c, t in spec.columns.items()
    )
    return (
        f"SELECT {', '.join(exprs)} FROM (SELECT * FROM {scan} "
        f"UNION ALL BY NAME SELECT {typed} WHERE false)"
    )


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


def _has_copies(spec: Table) -> bool:
    """Whether a table keeps copies of records other files also provide (``_copies``): the
    ingest tables whose rows name the file they came from, but the quarantine (whose key
    names the file)."""
    return spec.kind == "ingest" and "source_file" in spec.columns and "source_file" not in spec.record_columns


def _with_partition(df: pl.DataFrame, file: str) -> pl.DataFrame:
    """``df`` (rows of a Parquet file) with the hive partition its path names, as text."""
    parts = [seg.split("=", 1) for seg in file.split("/") if "=" in seg]
    return df.with_columns(pl.lit(None if v == _NULL_PARTITION else v, pl.Utf8).alias(k) for k, v in parts)


def _first_of_each_key(df: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """``df.unique(keys, keep="first", maintain_order=True)``, fast when nearly every key is
    distinct (a batch of samples): only rows whose key hash repeats are compared in full."""
    twins = df.select(keys).hash_rows().is_duplicated()
    if not twins.any():
        return df
    firsts = df.filter(twins).unique(subset=list(keys), keep="first", maintain_order=True)["_i"]
    return df.filter(~twins | pl.col("_i").is_in(firsts.implode()))


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


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_RANGE_LITERAL_CHARS = 256  # longer strings (raw lines) make no useful range predicate


def _key_ranges(part: pl.DataFrame, keys: tuple[str, ...], spec: Table) -> list[str]:
    """SQL predicates ``e."k" BETWEEN lo AND hi`` over the stored rows ``e``, one per record-key
    column of ``part`` with no nulls whose type orders (times, strings, integers): a stored row
    outside any range cannot match, and DuckDB skips files and row groups by these."""
    out = []
    for k in keys:
        col, dtype = part[k], spec.columns[k]
        ordered = isinstance(dtype, pl.Datetime) or dtype == pl.Utf8 or dtype.is_integer()
        if not ordered or col.null_count() or not col.len():
            continue
        lo, hi = col.min(), col.max()
        if isinstance(dtype, pl.Datetime):
            bounds = f"TIMESTAMP '{lo}'", f"TIMESTAMP '{hi}'"
        elif dtype.is_integer():
            bounds = str(lo), str(hi)
        elif max(len(lo), len(hi)) <= _RANGE_LITERAL_CHARS:
            bounds = _sql_str(lo), _sql_str(hi)
        else:
            continue
        out.append(f'e."{k}" BETWEEN {bounds[0]} AND {bounds[1]}')
    return out


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


def _file_column(spec: Table) -> str:
    """The column naming the ingested file a row came from."""
    return "path" if spec.name == "ingest_manifest" else "source_file"


def _release(fh) -> None:
    """Drop a writer lock: empty the owner record, then unlock (closing releases the flock)."""
    try:
        fh.seek(0)
        fh.truncate()
        fh.flush()
    finally:
        fh.close()
