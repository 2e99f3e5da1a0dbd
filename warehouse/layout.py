"""The layout of the Parquet root beyond one folder per table, and the migrations that bring a
root written by an older version to it, once, under the writer lock: times stored UTC-adjusted
(``TIMES_UTC_MARKER``), and the source rows of Dedupe tables kept apart under ``_sources/``
(``SOURCES_MARKER``); a table's copies of records other files provide under ``_copies/``.
"""

from __future__ import annotations

import posixpath
import sys
import uuid

import polars as pl

from warehouse.files import _join
from warehouse.files import _parquet_writer
from warehouse.schemas import TABLES
from warehouse.schemas import Table

# in the Parquet root: its files' times are UTC-adjusted (older versions wrote naive UTC)
TIMES_UTC_MARKER = ".times_utc"  # hidden: ingesting a folder that holds the home skips it
# in the Parquet root: Dedupe tables keep their source rows in _sources/ (older versions kept
# them in the table's own folder, which the views merged)
SOURCES_MARKER = ".sources_apart"
SOURCES = "_sources"
# records a batch left out because another file's stored row holds them (provenance): forget
# promotes them when that row goes (``Batch.add``, ``Warehouse.forget_into``)
COPIES = "_copies"


class Layout:
    """Where a table's ingested rows are, and the once-per-root upgrades of older layouts."""

    def records_dir(self, name: str) -> str:
        """Where a table's ingested rows are stored, relative to the root: ``_sources/<table>``
        for a Dedupe table (its own folder holds the canonical rows), else the table's folder."""
        return _join(SOURCES, name) if TABLES[name].dedupe else name

    def record_files(self, name: str) -> list[str]:
        """The Parquet files (local paths or URIs) of a table's rows as ingested, one per
        source record: a Dedupe table's source rows, else the table's own files (``files``)."""
        return [
            self.parquet + f[len(self._root) :]
            for f in self._find(self._path(self.records_dir(name)))
        ]

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
            print(
                f"goodput: storing the times of {len(old)} Parquet files of {self.parquet} "
                "as UTC (once)",
                file=sys.stderr,
            )
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
        old = [
            f
            for name, spec in TABLES.items()
            if spec.dedupe
            for f in self._find(self._path(name))
            if posixpath.basename(f).startswith("part-")
        ]
        if old:
            print(
                f"goodput: keeping the source rows of {len(old)} Parquet files of {self.parquet} "
                "apart from their tables' merged rows (once)",
                file=sys.stderr,
            )
            from warehouse.batch import Batch  # batch.py builds on this layout

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
        self._write(
            marker,
            lambda fh: fh.write(
                b"Dedupe tables: source rows in _sources/, canonical rows in the table\n"
            ),
        )


def _has_copies(spec: Table) -> bool:
    """Whether a table keeps copies of records other files also provide (``_copies``): the
    ingest tables whose rows name the file they came from, but the quarantine (whose key
    names the file)."""
    return (
        spec.kind == "ingest"
        and "source_file" in spec.columns
        and "source_file" not in spec.record_columns
    )


def _file_column(spec: Table) -> str:
    """The column naming the ingested file a row came from."""
    return "path" if spec.name == "ingest_manifest" else "source_file"
