"""The query surface: DuckDB connections over the Parquet root, one typed view per table
(``view_sql``: declared columns, Dedupe merging, batches still committing left out), the
catalog file ``warehouse.duckdb``, and the locked-down read-only SQL of ``goodput sql``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import threading
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

import duckdb
import polars as pl

from warehouse._sql import literal_path
from warehouse._sql import sql_str
from warehouse._sql import typed
from warehouse._sql import typed_scan
from warehouse.layout import STAGING
from warehouse.layout import Layout
from warehouse.lock import WriterLock
from warehouse.schemas import TABLES
from warehouse.schemas import VIEWS
from warehouse.schemas import conform
from warehouse.storage import Storage
from warehouse.storage import WarehouseError

# warehouse.duckdb opens in DuckDB 1.5 and later: the `duckdb` command (PyPI duckdb-cli, in
# pyproject.toml) is 1.5 while the Python duckdb is 2.0, whose own storage 1.5 cannot read
CATALOG_STORAGE = "v1.5.0"
# DuckDB's budget for every query that reads a whole table or history (matching a batch against
# stored records, the daily rollups, counter events, covariates): it spills to disk beyond this,
# so a step's peak does not grow with the fleet (``Warehouse.connect_out_of_core``)
OUT_OF_CORE_MEMORY = "512MB"
READER_MEMORY = (
    "2GB"  # user SQL (goodput sql): spills past it, or fails with DuckDB's one-line error
)


class ReadOnlyViolation(WarehouseError):
    """A statement that would write or reach outside the warehouse, given to the read-only
    SQL surface."""


_READ_STATEMENTS = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


def named_views(query: str) -> list[str] | None:
    """The tables and views ``query`` reads (in ``TABLES`` / ``VIEWS``, with the tables the
    views read), so that only those views are made: each view binds its Parquet files when it
    is created. None (make every view) when DuckDB cannot tell, or when a query that names
    none of them looks at the catalog itself (``SHOW TABLES``, ``information_schema``,
    ``duckdb_views()``)."""
    try:
        names = duckdb.get_table_names(query, qualified=False)
    except duckdb.Error:
        return None
    wanted = {n for n in names if n in TABLES or n in VIEWS}
    if not wanted and _CATALOG_WORDS.search(query):
        return None
    for name in [n for n in wanted if n in VIEWS]:
        wanted |= _VIEW_TABLES[name]
    return [n for n in (*TABLES, *VIEWS) if n in wanted]


# the in-memory databases of ``Catalog.connect``: filesystem key -> (pid, database, the
# filesystem, kept alive so that its id stays its own)
_SHARED: dict[int | None, tuple] = {}
_SHARED_LOCK = threading.Lock()


@atexit.register
def _close_shared() -> None:
    """Close this process's shared databases before the interpreter tears DuckDB's module
    down (nanobind reports any of its objects still alive then as leaked)."""
    with _SHARED_LOCK:
        for pid, db, _fs in _SHARED.values():
            if pid == os.getpid():
                db.close()
        _SHARED.clear()


_CATALOG_WORDS = re.compile(
    r"\b(show|describe|summarize|information_schema|pg_catalog|sqlite_master|duckdb_\w+|"
    r"pragma\w*)\b",
    re.IGNORECASE,
)
_VIEW_TABLES = {
    n: duckdb.get_table_names(sql, qualified=False) & set(TABLES) for n, sql in VIEWS.items()
}


class Catalog:
    """A ``Warehouse``'s connections, views, catalog file and read-only SQL, over the files of
    ``storage``; the catalog file is written under ``lock``."""

    def __init__(self, storage: Storage, layout: Layout, lock: WriterLock):
        self.storage = storage
        self.layout = layout
        self.lock = lock
        self.db_path = storage.home / "warehouse.duckdb"

    def files(self, name: str, partition: str | None = None) -> list[str]:
        """A table's Parquet files (local paths or URIs), or only those of one hive partition."""
        return self.storage.table_files(name, partition)

    def connect(
        self,
        database: str = ":memory:",
        read_only: bool = False,
        storage: str | None = None,
        private: bool = False,
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection that can run ``view_sql`` SQL: on object storage the fsspec
        filesystem is registered on it (the httpfs extension is not needed). ``storage``: the
        oldest DuckDB storage version a new database file must open in.

        An in-memory connection is a cursor of one in-memory database this catalog keeps for
        the process (starting a database costs about 17 ms of CPU, a cursor 0.2 ms): its views,
        registered frames, temporary tables and session settings are its own, but a global
        setting (memory limit, temporary directory, access) would reach every other cursor, so
        a connection that sets one is ``private``: a database of its own.

        s3fs caches listings, with each file's size, for the process: our own writes keep it
        current, other processes' (Dagster runs, the sensor) do not, so it starts empty for each
        connection; within one it spares a HEAD request per file DuckDB opens."""
        if database == ":memory:" and not private:
            con = self._shared().cursor()
        else:
            config = {"storage_compatibility_version": storage} if storage else {}
            con = duckdb.connect(database, read_only=read_only, config=config)
            if not self.storage.local:
                con.register_filesystem(self.storage.fs)
        # stored times are TIMESTAMPTZ: this session converts them to and from naive UTC
        con.execute("SET TimeZone = 'UTC'")
        # a query past 2 s would draw DuckDB's progress bar over the CLI's output and into
        # Dagster's captured step logs
        con.execute("SET enable_progress_bar = false")
        if not self.storage.local:
            self.storage.fs.invalidate_cache()
        return con

    def _shared(self) -> duckdb.DuckDBPyConnection:
        """The in-memory database the cursors of ``connect()`` share: one per process (made
        again in a forked child: a database's threads do not survive a fork) and filesystem
        (the local disk, or one object store registered on it)."""
        key = None if self.storage.local else id(self.storage.fs)
        with _SHARED_LOCK:
            pid, db, _fs = _SHARED.get(key, (None, None, None))
            if pid != os.getpid():
                # no file cache across queries: a file replaced under the same name (a derived
                # table's data.parquet) is read anew, as a connection of its own would
                db = duckdb.connect(":memory:", config={"enable_external_file_cache": False})
                if not self.storage.local:
                    db.register_filesystem(self.storage.fs)
                _SHARED[key] = (os.getpid(), db, self.storage.fs)
            return _SHARED[key][1]

    def connect_out_of_core(self) -> duckdb.DuckDBPyConnection:
        """``connect()`` whose queries stay within ``OUT_OF_CORE_MEMORY``, spilling to a
        temporary directory under the scratch folder ($GOODPUT_SCRATCH, else the home)."""
        con = self.connect(private=True)
        con.execute(f"SET memory_limit = '{OUT_OF_CORE_MEMORY}'")
        con.execute(f"SET temp_directory = {sql_str(str(self.storage.scratch / '.duckdb_spill'))}")
        return con

    def view_sql(
        self, name: str, guard: bool | None = None, zoned: bool = False, root: str | None = None
    ) -> str:
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
            cols = ", ".join(f'{typed("NULL", t, zoned)} AS "{c}"' for c, t in spec.columns.items())
            return f"SELECT {cols} WHERE false"
        root = self.storage.parquet if root is None else root
        files = sql_str(f"{literal_path(root)}/{name}/**/*.parquet")
        scan = f"read_parquet({files}, hive_partitioning = true, union_by_name = true"
        if spec.kind == "ingest" and (guard or (guard is None and self.layout.committed_stages())):
            commits = sql_str(f"{literal_path(root)}/{STAGING}/*/COMMIT")
            scan = (
                f"(SELECT * EXCLUDE (filename) FROM {scan}, filename = true) WHERE NOT EXISTS ("
                f"SELECT 1 FROM glob({commits}) g "
                f"WHERE contains(filename, '/part-' || split_part(g.file, '/', -2) || '-')))"
            )
        else:
            scan += ")"
        return typed_scan(spec, scan, zoned)

    def read(self, name: str, where: str | None = None) -> pl.DataFrame:
        """A table as a Polars frame, read straight from Parquet (never blocks on the catalog)."""
        sql = f"SELECT * FROM ({self.view_sql(name)})" + (f" WHERE {where}" if where else "")
        with self.connect() as con:
            df = con.sql(sql).pl()
        return conform(name, df)

    def known_sha256(self) -> set[str]:
        return set(self.read("ingest_manifest")["sha256"].to_list())

    def refresh_catalog(self) -> Path:
        """(Re)create warehouse.duckdb: every view, written into a new file that is renamed over
        the old one, so a client holding the old file open (read-only) neither blocks this nor
        sees a half-made catalog; it sees the new views when it reconnects. ``_parquet_root``
        records the root the views read, as a home may be pointed at another.

        A Parquet root inside the home is named relative to it (``parquet/<table>/...``), so
        the home can be moved or copied: DuckDB resolves the paths against its working
        directory or ``file_search_path`` (docs/cli.md: open it from the home, or set that). The
        file is written in ``CATALOG_STORAGE`` so the DuckDB CLI we install opens it too."""
        root = self.catalog_root()
        tmp = self.storage.home / f".warehouse.duckdb.{os.getpid()}.tmp"
        with self.lock.writer(), TemporaryDirectory(prefix="goodput-catalog-") as build:
            # built in a temporary folder, then copied in: DuckDB reads a '?' in a database
            # path as the start of its options, so it cannot write one in a home named so
            made = str(Path(build) / "warehouse.duckdb")
            tmp.unlink(missing_ok=True)
            try:
                with self.connect(made, storage=CATALOG_STORAGE) as con:
                    con.execute(f"SET file_search_path = {sql_str(str(self.storage.home))}")
                    self.create_views(con, guard=True, zoned=True, root=root)
                    con.execute(
                        f"CREATE OR REPLACE VIEW _parquet_root AS SELECT {sql_str(root)} AS uri"
                    )
                shutil.copyfile(made, tmp)
                os.replace(tmp, self.db_path)
            finally:
                tmp.unlink(missing_ok=True)
        return self.db_path

    def catalog_root(self) -> str:
        """The Parquet root as the catalog's views name it: relative to the home when it lies
        inside it, else its absolute path or ``s3://`` URI."""
        parquet = self.storage.parquet
        if self.storage.local and Path(parquet).is_relative_to(self.storage.home):
            return Path(parquet).relative_to(self.storage.home).as_posix()
        return parquet

    def create_views(
        self,
        con: duckdb.DuckDBPyConnection,
        guard: bool | None = None,
        zoned: bool = False,
        root: str | None = None,
        names: list[str] | None = None,
        temp: bool = False,
    ) -> None:
        """The views of ``names`` (default: every table and view) on ``con``; ``temp``: the
        connection's own (a cursor of the shared database), else in its database."""
        kind = "TEMP VIEW" if temp else "VIEW"
        for name in TABLES if names is None else [n for n in names if n in TABLES]:
            con.execute(
                f'CREATE OR REPLACE {kind} "{name}" AS {self.view_sql(name, guard, zoned, root)}'
            )
        for name, sql in VIEWS.items():
            if names is None or name in names:
                con.execute(f'CREATE OR REPLACE {kind} "{name}" AS {sql}')

    def reader(
        self,
        allow_files: list[str | os.PathLike] = (),
        spill: str | None = None,
        names: list[str] | None = None,
    ) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection holding every view, made now from the Parquet (never
        stale, never touching warehouse.duckdb) and locked down for untrusted SQL: file access
        only under the Parquet root (and ``allow_files`` directories), no extension installs
        or loads, configuration locked. ``run_readonly`` adds the statement check. ``spill``:
        DuckDB's temporary directory, which its SQL may read (default ``.tmp`` under the working
        directory, where other files can lie): give a private, empty one. ``names``: the views
        to make (``named_views``; default every one)."""
        con = self.connect(private=True)
        con.execute(f"SET memory_limit = '{READER_MEMORY}'")  # DuckDB's default: 80% of the machine
        if spill is not None:
            con.execute(f"SET temp_directory = {sql_str(spill)}")
        self.create_views(con, guard=True, zoned=True, names=names)
        # the Parquet root (a directory or s3://bucket/prefix) and the opted-in directories only
        dirs = [self.storage.parquet, *(str(Path(d).expanduser().resolve()) for d in allow_files)]
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
                raise ReadOnlyViolation(
                    f"{kind} statements are not allowed: goodput sql is read-only"
                )
        with (
            TemporaryDirectory(prefix="goodput-sql-") as spill,
            self.reader(allow_files, spill, named_views(query)) as con,
        ):
            yield con.sql(query)

    def sql(self, query: str, params: list | None = None) -> duckdb.DuckDBPyConnection:
        """Run a query over the views (made from the Parquet now); returns the executed cursor
        (``fetchall`` / ``pl``)."""
        con = self.connect()
        self.create_views(con, names=named_views(query), temp=True)
        return con.execute(query, params)

    def query(self, query: str) -> pl.DataFrame:
        """Run a query over the views (made from the Parquet now) and return a Polars frame."""
        with self.connect() as con:
            self.create_views(con, names=named_views(query), temp=True)
            rel = con.sql(query)
            return rel.pl() if rel is not None else pl.DataFrame()
