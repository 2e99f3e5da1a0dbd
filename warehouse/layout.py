"""The layout of the Parquet root beyond one folder per table: the source rows of Dedupe tables
kept apart under ``_sources/`` (``SOURCES_MARKER``), a table's copies of records other files
provide under ``_copies/``, batches being committed under ``_staging/``, and the marker of
times stored UTC-adjusted (``TIMES_UTC_MARKER``). ``warehouse/migrations.py`` brings a root an
older version wrote to it.
"""

from __future__ import annotations

import posixpath

from warehouse._sql import literal_path
from warehouse._utils import join
from warehouse.schemas import TABLES
from warehouse.schemas import Table
from warehouse.storage import Storage

# in the Parquet root: its files' times are UTC-adjusted (older versions wrote naive UTC)
TIMES_UTC_MARKER = ".times_utc"  # hidden: ingesting a folder that holds the home skips it
# in the Parquet root: Dedupe tables keep their source rows in _sources/ (older versions kept
# them in the table's own folder, which the views merged)
SOURCES_MARKER = ".sources_apart"
SOURCES = "_sources"
# records a batch left out because another file's stored row holds them (provenance): forget
# promotes them when that row goes (``Batch.add``, ``Removal.forget_into``)
COPIES = "_copies"
STAGING = "_staging"


def has_copies(spec: Table) -> bool:
    """Whether a table keeps copies of records other files also provide (``_copies``): the
    ingest tables whose rows name the file they came from, but the quarantine (whose key
    names the file)."""
    return (
        spec.kind == "ingest"
        and "source_file" in spec.columns
        and "source_file" not in spec.record_columns
    )


def file_column(spec: Table) -> str:
    """The column naming the ingested file a row came from."""
    return "path" if spec.name == "ingest_manifest" else "source_file"


class Layout:
    """Where a table's ingested rows and the batches being committed are, in one root."""

    def __init__(self, storage: Storage):
        self.storage = storage

    def records_dir(self, name: str) -> str:
        """Where a table's ingested rows are stored, relative to the root: ``_sources/<table>``
        for a Dedupe table (its own folder holds the canonical rows), else the table's folder."""
        return join(SOURCES, name) if TABLES[name].dedupe else name

    def record_files(self, name: str) -> list[str]:
        """The Parquet files (local paths or URIs) of a table's rows as ingested, one per
        source record: a Dedupe table's source rows, else the table's own files (``files``)."""
        s = self.storage
        return [s.public(f) for f in s.find(s.path(self.records_dir(name)))]

    def stage(self, batch_id: str) -> str:
        """The folder a batch is staged in (a path in the root)."""
        return self.storage.path(STAGING, batch_id)

    def stages(self) -> list[str]:
        """Every batch's stage folder, sorted (none if nothing is staged)."""
        try:
            return sorted(self.storage.fs.ls(self.storage.path(STAGING), detail=False))
        except FileNotFoundError:
            return []

    def committed_stages(self) -> list[str]:
        """Batch ids whose COMMIT marker is written but whose files are still being moved in
        (a live writer mid-commit, or one that crashed there)."""
        try:
            commits = self.storage.fs.glob(literal_path(self.storage.path(STAGING)) + "/*/COMMIT")
            return sorted(posixpath.basename(posixpath.dirname(f)) for f in commits)
        except FileNotFoundError:
            return []
