"""Derived tables (what the analyses compute): replaced whole, a hive partition at a time, or in
pieces streamed to the scratch folder and moved into place; never staged like an ingest, since
a derived table is recomputed from the ingested ones.
"""

from __future__ import annotations

import posixpath
import shutil
from collections.abc import Iterable
from contextlib import ExitStack
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

import polars as pl

from warehouse._utils import join
from warehouse._utils import mtime
from warehouse._utils import parquet_writer
from warehouse._utils import split_partitions
from warehouse._utils import stored
from warehouse.lock import WriterLock
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.storage import Storage


class Derived:
    """A warehouse's derived-table writes into ``storage``, each under the writer ``lock``."""

    def __init__(self, storage: Storage, lock: WriterLock):
        self.storage = storage
        self.lock = lock

    def replace_table(self, name: str, df: pl.DataFrame, partitions: str = "all") -> None:
        """Write a derived table. ``partitions='touched'`` replaces only the partitions in
        ``df`` (incremental rollups); ``'all'`` replaces the whole table."""
        with self.lock.writer():
            self._replace_table(name, df, partitions)

    def _replace_table(self, name: str, df: pl.DataFrame, partitions: str) -> None:
        spec = TABLES[name]
        df = conform(name, df)
        written: set[str] = set()
        for rel, part in split_partitions(spec, df):
            path = self.storage.path(name, rel, "data.parquet")
            self.storage.write(path, parquet_writer(part))
            written.add(path)
        if spec.partition is None and not written:
            path = self.storage.path(name, "data.parquet")
            self.storage.write(path, parquet_writer(spec.empty()))
            written.add(path)
        if partitions == "all":
            stale = [f for f in self.storage.find(self.storage.path(name)) if f not in written]
            if stale:
                self.storage.fs.rm(stale)

    def replace_partition(self, name: str, value: str, frames: Iterable[pl.DataFrame]) -> int:
        """Replace one hive partition of a derived table with the rows of ``frames``, streamed
        chunk by chunk into its one Parquet file (``write_pieces``: the piece ``data``), so the
        partition never has to fit in memory. No rows: the partition is removed. Returns the
        rows written."""
        rows = 0
        folder, path = self._partition_file(name, value)
        with self.lock.writer():
            with self.write_pieces(name, value) as write:
                for df in frames:
                    write("data", df)
                    rows += df.height
            for f in [f for f in self.storage.find(folder) if f != path] if rows else [folder]:
                self.storage.rm_tree(f)
        return rows

    @contextmanager
    def write_pieces(self, name: str, value: str):
        """Write files ("pieces") of one hive partition of a derived table, each
        ``<partition>/<piece>.parquet``: yields ``write(piece, df)``, which appends ``df`` to
        that piece (an empty ``df`` still makes the piece, with no rows), or, with ``piece`` a
        Series of piece names (one per row), each row to its own piece, converting ``df`` once
        (a chunk spanning many pieces costs one conversion, not one per piece). Rows stream to
        local files under the scratch folder, so no piece has to fit in memory; when the block
        ends without error each piece replaces its file, atomically (``Storage.write``), in piece
        order. On error no file changes. Other files of the partition stay (``drop_pieces``)."""
        import pyarrow.parquet as pq  # not on the start path of read-only commands

        spec = TABLES[name]
        schema = stored(spec.empty().drop(spec.partition)).to_arrow().schema
        folder = self._partition_file(name, value)[0]
        with (
            self.lock.writer(),
            TemporaryDirectory(prefix="pieces-", dir=self.storage.scratch) as tmp,
        ):
            local = Path(tmp)
            with ExitStack() as files:
                writers: dict[str, pq.ParquetWriter] = {}

                def opened(piece: str) -> pq.ParquetWriter:
                    if piece not in writers:
                        out = pq.ParquetWriter(
                            local / f"{piece}.parquet", schema, compression="zstd"
                        )
                        writers[piece] = files.enter_context(out)
                    return writers[piece]

                def write(piece: str | pl.Series, df: pl.DataFrame) -> None:
                    if isinstance(piece, str):
                        opened(piece)
                        groups = [(piece, None)]
                    else:  # (piece, its rows' indices), in order of first appearance
                        by_piece = pl.DataFrame({"piece": piece}).with_row_index("i")
                        groups = (
                            by_piece.group_by("piece", maintain_order=True).agg("i").iter_rows()
                        )
                    if not df.height:
                        return
                    table = stored(conform(name, df).drop(spec.partition)).to_arrow().cast(schema)
                    for each, indices in groups:
                        opened(each).write_table(table if indices is None else table.take(indices))

                yield write
            for piece in sorted(writers):  # every file closed (complete) above
                with (local / f"{piece}.parquet").open("rb") as src:
                    self.storage.write(
                        join(folder, f"{piece}.parquet"),
                        lambda fh: shutil.copyfileobj(src, fh, 1 << 20),
                    )

    def piece_mtimes(self, name: str, value: str) -> dict[str, float]:
        """Piece (file name without ``.parquet``) -> modification time, of one hive partition
        of a derived table (none if it does not exist)."""
        folder = self._partition_file(name, value)[0]
        found = self.storage.fs.find(folder, detail=True) if self.storage.fs.exists(folder) else {}
        return {
            posixpath.basename(f)[: -len(".parquet")]: mtime(info)
            for f, info in found.items()
            if f.endswith(".parquet") and posixpath.dirname(f) == folder
        }  # fmt: skip

    def drop_pieces(self, name: str, value: str, pieces: Iterable[str]) -> None:
        """Delete some pieces (``write_pieces``) of one hive partition of a derived table."""
        folder = self._partition_file(name, value)[0]
        with self.lock.writer():
            for piece in pieces:
                self.storage.rm_tree(join(folder, f"{piece}.parquet"))

    def put_partition(self, name: str, value: str, local_file: Path) -> None:
        """``local_file`` (a Parquet file written elsewhere, e.g. by DuckDB's ``COPY``) becomes
        the one file of a derived table's hive partition, atomically, local or object storage."""
        with self.lock.writer(), local_file.open("rb") as src:
            self.storage.write(
                self._partition_file(name, value)[1],
                lambda fh: shutil.copyfileobj(src, fh, 1 << 20),
            )

    def _partition_file(self, name: str, value: str) -> tuple[str, str]:
        """(folder, its one ``data.parquet``) of a derived table's hive partition."""
        folder = self.storage.path(name, f"{TABLES[name].partition}={value}")
        return folder, join(folder, "data.parquet")

    def drop_partition(self, name: str, value: str) -> None:
        """Delete one hive partition of a derived table (a rewrite that produced no rows)."""
        with self.lock.writer():
            self.storage.rm_tree(self.storage.path(name, f"{TABLES[name].partition}={value}"))
