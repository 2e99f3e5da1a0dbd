"""The warehouse: Parquet datasets (the truth) plus a DuckDB catalog of views.

The home directory is local (docs/design.md). The Parquet root is ``<home>/parquet`` unless
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

import functools
import os

from warehouse._sql import duck_type
from warehouse._sql import literal_path
from warehouse.batch import COMMITS
from warehouse.batch import FAULT_ENV
from warehouse.batch import Batch
from warehouse.batch import Staging
from warehouse.catalog import Catalog
from warehouse.catalog import ReadOnlyViolation
from warehouse.derived import Derived
from warehouse.forget import Removal
from warehouse.layout import SOURCES_MARKER
from warehouse.layout import TIMES_UTC_MARKER
from warehouse.layout import Layout
from warehouse.lock import WarehouseBusy
from warehouse.lock import WriterLock
from warehouse.migrations import upgrade
from warehouse.storage import Storage
from warehouse.storage import WarehouseError
from warehouse.storage import resolve_home
from warehouse.storage import resolve_parquet_uri

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
    "resolve_parquet_uri",
]


def _by(part: str, method):
    """A ``Warehouse`` method that is ``method`` of one of its parts (looked up on the part
    object, so a part's subclass is honoured)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        return getattr(getattr(self, part), method.__name__)(*args, **kwargs)

    return call


class Warehouse:
    """One warehouse (a home and its Parquet root), made of parts, each in its own module:
    ``storage`` (the files), ``lock`` (the one writer), ``layout`` (where rows and stages
    are), ``catalog`` (connections, views, SQL), ``staging`` (ingest batches), ``derived``
    (derived-table writes) and ``removal`` (forget). Their public methods are this class's."""

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
        self.reports = self.home / "reports"
        self.landing = self.home / "landing"
        if self.home.exists() and not self.home.is_dir():
            raise WarehouseError(f"home {self.home} is a file, not a directory")
        if not read_only:
            try:
                for d in (self.reports, self.landing):
                    d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WarehouseError(
                    f"cannot use home {self.home}: {exc.strerror or exc}"
                ) from None
        self.storage = Storage(self.home, self.parquet)
        self.lock = WriterLock(self.home, wait, read_only, on_first=self._recover)
        self.layout = Layout(self.storage)
        self.catalog = self._catalog()
        self.staging = Staging(self.storage, self.layout, self.lock, self.catalog)
        self.derived = Derived(self.storage, self.lock)
        self.removal = Removal(self.staging)
        if read_only:
            if not self.storage.local:
                self.storage.check_bucket()
            return
        self.storage.create()
        try:  # finish what a crashed writer left, unless a live writer is at work
            with self.writer(wait=False):
                pass
        except WarehouseBusy:
            pass

    def _catalog(self) -> Catalog:
        """The query surface over this warehouse's files (a scope reads others too)."""
        return Catalog(self.storage, self.layout, self.lock)

    def _recover(self) -> None:
        """On taking the writer lock: finish crashed writers' batches, upgrade an older root."""
        self.staging.recover()
        upgrade(self.staging)

    @property
    def fs(self):
        return self.storage.fs

    @property
    def local(self) -> bool:
        return self.storage.local

    @property
    def scratch(self):
        return self.storage.scratch

    @property
    def db_path(self):
        return self.catalog.db_path

    @property
    def lock_path(self):
        return self.lock.path

    lock_owner = _by("lock", WriterLock.owner)
    writer = _by("lock", WriterLock.writer)
    writable = _by("storage", Storage.writable)
    partition_mtimes = _by("storage", Storage.partition_mtimes)
    records_dir = _by("layout", Layout.records_dir)
    record_files = _by("layout", Layout.record_files)
    committed_stages = _by("layout", Layout.committed_stages)
    files = _by("catalog", Catalog.files)
    connect = _by("catalog", Catalog.connect)
    connect_out_of_core = _by("catalog", Catalog.connect_out_of_core)
    view_sql = _by("catalog", Catalog.view_sql)
    read = _by("catalog", Catalog.read)
    known_sha256 = _by("catalog", Catalog.known_sha256)
    refresh_catalog = _by("catalog", Catalog.refresh_catalog)
    catalog_root = _by("catalog", Catalog.catalog_root)
    reader = _by("catalog", Catalog.reader)
    run_readonly = _by("catalog", Catalog.run_readonly)
    readonly_relation = _by("catalog", Catalog.readonly_relation)
    sql = _by("catalog", Catalog.sql)
    query = _by("catalog", Catalog.query)
    batch = _by("staging", Staging.batch)
    replace_table = _by("derived", Derived.replace_table)
    replace_partition = _by("derived", Derived.replace_partition)
    write_pieces = _by("derived", Derived.write_pieces)
    piece_mtimes = _by("derived", Derived.piece_mtimes)
    drop_pieces = _by("derived", Derived.drop_pieces)
    put_partition = _by("derived", Derived.put_partition)
    drop_partition = _by("derived", Derived.drop_partition)
    forget = _by("removal", Removal.forget)
    forget_into = _by("removal", Removal.forget_into)
    delete_rows = _by("removal", Removal.delete_rows)
    delete_into = _by("removal", Removal.delete_into)
