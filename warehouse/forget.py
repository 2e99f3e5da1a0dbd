"""Removing rows: the rows ingested files produced (``forget``, ``ingest --replace``), with
another file's copy of each removed record promoted in its place, or any rows matching a
predicate; staged into a batch and committed atomically like an ingest.
"""

from __future__ import annotations

import posixpath
import re
import uuid

import polars as pl

from warehouse._utils import NULL_PARTITION
from warehouse._utils import join
from warehouse._utils import split_partitions
from warehouse.batch import Batch
from warehouse.batch import Staging
from warehouse.layout import COPIES
from warehouse.layout import file_column
from warehouse.layout import has_copies
from warehouse.schemas import TABLES

_SHA256 = re.compile(r"[0-9a-f]{64}")


class Removal:
    """A warehouse's row removal, staged through ``staging`` (its storage, layout and catalog)."""

    def __init__(self, staging: Staging):
        self.staging = staging
        self.storage = staging.storage
        self.layout = staging.layout
        self.catalog = staging.catalog

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
        with self.staging.batch(f"forget-{uuid.uuid4().hex[:12]}") as batch:
            return self.forget_into(batch, targets)[0]

    def forget_into(self, batch: Batch, targets: list[str]) -> tuple[dict[str, int], set[str]]:
        """``forget`` staged into ``batch`` (committed with whatever else it holds: ``ingest
        --replace`` stages the files' new rows in the same batch, one commit). Returns rows
        removed per table and the sha256 digests whose manifest rows go."""
        manifest = self.catalog.read("ingest_manifest")
        wanted = list(set(targets))
        paths = set(
            manifest.filter(pl.col("sha256").is_in(wanted) | pl.col("path").is_in(wanted))[
                "path"
            ].to_list()
        )
        paths |= set(
            self.catalog.read("quarantine")
            .filter(pl.col("sha256").is_in(wanted))["source_file"]
            .to_list()
        )
        paths |= {t for t in wanted if not _SHA256.fullmatch(t)}
        if not paths:
            return {}, set()
        shas = set(manifest.filter(pl.col("path").is_in(list(paths)))["sha256"].to_list())
        where = {n: (file_column(t), paths) for n, t in TABLES.items() if t.kind == "ingest"}
        batch.removed = {}
        removed = self.delete_into(batch, where)
        for name, spec in TABLES.items():
            if has_copies(spec):
                self.delete_into(batch, {name: ("source_file", paths)}, join(COPIES, name))
                if batch.removed.get(name):
                    self.promote(
                        batch, name, pl.concat(batch.removed[name], how="diagonal_relaxed")
                    )
        return removed, shas

    def promote(self, batch: Batch, name: str, gone: pl.DataFrame) -> None:
        """Stage, in place of the removed rows ``gone``, another file's copy of each of their
        records (the first by file and line) that this batch keeps."""
        spec = TABLES[name]
        keys = [k for k in spec.record_columns if k != spec.partition]
        for rel, part in split_partitions(spec, gone.select(spec.record_columns).unique()):
            files = [
                self.storage.duck_path(f) for f in batch.record_files(name, rel, join(COPIES, name))
            ]
            if not files:
                continue
            on = " AND ".join(f'c."{k}" IS NOT DISTINCT FROM g."{k}"' for k in keys)
            order = ", ".join(c for c in ("source_file", "source_line") if c in spec.columns)
            by = ", ".join(f'c."{k}"' for k in keys)
            with self.catalog.connect_out_of_core() as con:
                con.register("g", part.to_arrow())
                promoted = con.sql(
                    f"SELECT * FROM read_parquet($files, union_by_name = true) c "
                    f"SEMI JOIN g ON {on} "
                    f"QUALIFY row_number() OVER (PARTITION BY {by} "
                    f"ORDER BY {order}) = 1",
                    params={"files": files},
                ).pl()
            if promoted.height:
                if spec.partition:
                    value = rel.split("=", 1)[1]
                    promoted = promoted.with_columns(
                        pl.lit(None if value == NULL_PARTITION else value)
                        .cast(spec.columns[spec.partition])
                        .alias(spec.partition)
                    )
                batch.add({name: promoted})

    def delete_rows(self, where: dict[str, tuple[str, set[str]] | pl.Expr]) -> dict[str, int]:
        """Remove from each table the rows whose column is one of the values
        (``{table: (column, values)}``), or that match a Polars predicate, in one atomic batch.
        Returns rows removed per table."""
        with self.staging.batch(f"forget-{uuid.uuid4().hex[:12]}") as batch:
            return self.delete_into(batch, where)

    def delete_into(
        self,
        batch: Batch,
        where: dict[str, tuple[str, set[str]] | pl.Expr],
        under: str | None = None,
    ) -> dict[str, int]:
        """``delete_rows`` staged into ``batch`` (from the table's records, or the files
        ``under`` another folder: its copies). The rows removed from records are kept in
        ``batch.removed`` where it is set (forget promotes copies of them)."""
        removed: dict[str, int] = {}
        for name, match in where.items():
            folder = self.storage.path(under or self.layout.records_dir(name))
            for f in batch.committed_files(folder):
                n = batch.rewrite_without(f, match)
                if n is not None:
                    removed[name] = removed.get(name, 0) + n[0]
                    if n[1]:
                        batch.gone.append(f[len(self.storage.root) + 1 :])
                    if batch.removed is not None and under is None:
                        batch.removed.setdefault(name, []).append(n[2])
                    if (
                        TABLES[name].dedupe and under is None
                    ):  # its canonical rows follow in the same commit
                        batch.touched.add((name, posixpath.dirname(f[len(folder) + 1 :])))
        return removed
