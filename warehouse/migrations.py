"""The once-per-root upgrades that bring a Parquet root an older version wrote to the layout of
``warehouse/layout.py``, run under the writer lock when a writer first takes it: times stored
UTC-adjusted (``TIMES_UTC_MARKER``), and the source rows of Dedupe tables kept apart under
``_sources/`` (``SOURCES_MARKER``). Each is resumed at the next open if interrupted.
"""

from __future__ import annotations

import posixpath
import sys
import uuid

import polars as pl

from warehouse._utils import join
from warehouse._utils import parquet_writer
from warehouse.batch import Staging
from warehouse.layout import SOURCES
from warehouse.layout import SOURCES_MARKER
from warehouse.layout import STAGING
from warehouse.layout import TIMES_UTC_MARKER
from warehouse.schemas import TABLES


def upgrade(staging: Staging) -> None:
    """Every upgrade the root of ``staging`` still needs, in order."""
    upgrade_times(staging)
    upgrade_sources(staging)


def upgrade_times(staging: Staging) -> None:
    """Once per Parquet root: rewrite the files an older version wrote with naive times
    (not UTC-adjusted; they held UTC) as ``STORED_TS``, so every engine reads them as
    instants, then write the ``TIMES_UTC_MARKER``. Each file is replaced atomically, and an
    interrupted upgrade resumes at the next open."""
    s = staging.storage
    marker = s.path(TIMES_UTC_MARKER)
    if s.fs.exists(marker):
        return
    import pyarrow as pa  # here: importing it costs every command a second
    import pyarrow.parquet as pq

    old = []
    for f in s.find(s.root):
        if f.startswith(s.path(STAGING) + "/"):
            continue
        with s.fs.open(f, "rb") as fh:
            schema = pq.read_schema(fh)
        if any(pa.types.is_timestamp(t.type) and t.type.tz is None for t in schema):
            old.append(f)
    if old:
        print(
            f"goodput: storing the times of {len(old)} Parquet files of {s.parquet} as UTC (once)",
            file=sys.stderr,
        )
    for f in old:
        with s.fs.open(f, "rb") as fh:
            df = pl.read_parquet(fh)
        s.write(f, parquet_writer(df))
    s.write(marker, lambda fh: fh.write(b"times are stored as timestamp[us, tz=UTC]\n"))


def upgrade_sources(staging: Staging) -> None:
    """Once per Parquet root: move the source rows an older version kept in a Dedupe
    table's own folder (``part-*.parquet``) to ``_sources/<table>/`` and write the table's
    canonical rows in their place, in one staged batch (a crash leaves the old layout or
    rolls forward to the new), then write the ``SOURCES_MARKER``."""
    s = staging.storage
    marker = s.path(SOURCES_MARKER)
    if s.fs.exists(marker):
        return
    old = [
        f
        for name, spec in TABLES.items()
        if spec.dedupe
        for f in s.find(s.path(name))
        if posixpath.basename(f).startswith("part-")
    ]
    if old:
        print(
            f"goodput: keeping the source rows of {len(old)} Parquet files of {s.parquet} "
            "apart from their tables' merged rows (once)",
            file=sys.stderr,
        )
        batch = staging.open(f"sources-{uuid.uuid4().hex[:12]}")
        try:
            for f in old:
                rel = f[len(s.root) + 1 :]
                dest = join(batch.stage, SOURCES, rel)
                if s.local:
                    s.fs.makedirs(posixpath.dirname(dest), exist_ok=True)
                s.fs.copy(f, dest)
                batch.gone.append(rel)
                name, part = rel.split("/", 1)
                batch.touched.add((name, posixpath.dirname(part)))
        except BaseException:
            batch.abort()
            raise
        batch.commit()
    s.write(
        marker,
        lambda fh: fh.write(
            b"Dedupe tables: source rows in _sources/, canonical rows in the table\n"
        ),
    )
