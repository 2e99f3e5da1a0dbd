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
    <root>/.sources_apart                                       marker: Dedupe tables laid out
                                                                as above
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

import os
from pathlib import Path

import fsspec
from fsspec.implementations.local import LocalFileSystem

from warehouse.batch import COMMITS
from warehouse.batch import FAULT_ENV
from warehouse.batch import Batch
from warehouse.batch import Staging
from warehouse.catalog import Catalog
from warehouse.catalog import ReadOnlyViolation
from warehouse.derived import Derived
from warehouse.files import SCRATCH_ENV
from warehouse.files import Files
from warehouse.files import WarehouseError
from warehouse.files import duck_type
from warehouse.files import literal_path
from warehouse.files import resolve_home
from warehouse.files import resolve_parquet_uri
from warehouse.forget import Forget
from warehouse.layout import SOURCES_MARKER
from warehouse.layout import TIMES_UTC_MARKER
from warehouse.layout import Layout
from warehouse.lock import WarehouseBusy
from warehouse.lock import WriterLock

# the names callers import from here: the warehouse's one public entry point
__all__ = [
    "COMMITS",
    "FAULT_ENV",
    "SOURCES_MARKER",
    "TIMES_UTC_MARKER",
    "Batch",
    "ReadOnlyViolation",
    "Warehouse",
    "WarehouseBusy",
    "WarehouseError",
    "duck_type",
    "literal_path",
    "resolve_home",
]


class Warehouse(WriterLock, Staging, Forget, Derived, Catalog, Layout, Files):
    """One warehouse (a home and its Parquet root): each base class holds one concern, in its
    own module (lock, batch, forget, derived, catalog, layout, files)."""

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
            raise WarehouseError(
                f"cannot use ${SCRATCH_ENV} {self.scratch}: {exc.strerror or exc}"
            ) from None
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
