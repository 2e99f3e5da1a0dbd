"""Parse results staged in a warehouse batch, and the per-file accounting that goes with them.

A file's results become its tables' rows and quarantine rows (with its path, sha256 and
format), its ``FileReport`` counts are kept as they stream by, records the warehouse already
held are moved to duplicates and value conflicts to quarantine, and the files that are done get
their manifest rows. ``Stale`` removes the quarantine rows of earlier attempts that did not
finish when a file is tried again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from pathlib import Path

import polars as pl

from ingest.base import ParseResult
from ingest.registry import formats
from warehouse.schemas import conform
from warehouse.store import Warehouse


@dataclass
class FileReport:
    path: str
    format: str
    sha256: str
    records: int = 0
    rows_ok: int = 0
    rows_quarantined: int = 0
    bytes: int = 0
    rows_duplicate: int = (
        0  # exact repeats: already stored, repeated in the file, or dropped by the parser
    )
    skipped: bool = False  # already in the manifest
    error: str | None = None  # could not be read at all (reason): nothing recorded as done
    done: bool = True  # gets a manifest row (False: quarantined, to be tried again)
    held_back: int = 0  # bytes of an incomplete last line, not read yet (``files.read_parsed``)
    stand_ins: frozenset[str] = (
        frozenset()
    )  # what the file supplied for its records (``base.STAND_INS``)


def batch_id(files: list[str]) -> str:
    """Part files are named by batch, and a batch by its set of files (sha256): the same
    content gives the same names, and a file ingested again after `forget` never overwrites
    the parts of a batch it shared with other files (that set is not ingested twice)."""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:16]


def stage(batch, parsed: list[tuple[FileReport, list[tuple[str, ParseResult]]]]) -> None:
    """Stage parsed inputs' rows and quarantine rows in ``batch``, one Parquet part per table
    (not per input: small files stay cheap to scan), and update their reports: records the
    warehouse already held become duplicates, value conflicts quarantine rows."""
    merged: dict[str, list[pl.DataFrame]] = {}
    for report, results in parsed:
        for tables in frames(report, results):
            for name, df in tables.items():
                if df.height:
                    merged.setdefault(name, []).append(conform(name, df))
    reports = [r for r, _ in parsed]
    count_duplicates(reports, batch.add({name: pl.concat(dfs) for name, dfs in merged.items()}))
    quarantine_conflicts(batch, reports)


def count_duplicates(reports: list[FileReport], dropped: dict[str, dict[str | None, int]]) -> None:
    """Move records the warehouse already held from ``rows_ok`` to ``rows_duplicate``."""
    for r in reports:
        primary = formats()[r.format].primary if r.format in formats() else None
        n = dropped.get(primary, {}).get(r.path, 0) if primary else 0
        r.rows_ok -= n
        r.rows_duplicate += n


def quarantine_conflicts(batch, reports: list[FileReport]) -> None:
    """The records ``batch.add`` refused as conflicts (a stored record's key, other values):
    quarantine rows of their files, counted as quarantined instead of stored."""
    if not batch.conflicts:
        return
    rows = pl.concat(batch.conflicts)
    batch.conflicts.clear()
    by_path = {r.path: r for r in reports}
    for path, n in rows.group_by("source_file").len().rows():
        by_path[path].rows_ok -= n
        by_path[path].rows_quarantined += n
    batch.add(
        {
            "quarantine": rows.with_columns(
                sha256=pl.col("source_file").replace_strict(
                    {p: r.sha256 for p, r in by_path.items()}, return_dtype=pl.Utf8
                ),
                format=pl.col("source_file").replace_strict(
                    {p: r.format for p, r in by_path.items()}, return_dtype=pl.Utf8
                ),
                ingested_at=pl.lit(datetime.now(UTC).replace(tzinfo=None)),
            )
        }
    )


def frames(report: FileReport, results) -> Iterator[dict[str, pl.DataFrame]]:
    """One file's parse results and quarantine rows, as table frames; ``report`` is updated
    with the counts as results stream by."""
    now = datetime.now(UTC).replace(tzinfo=None)
    sha = pl.lit(report.sha256 or None, pl.Utf8)
    for name, res in results:
        report.format = name
        primary = formats()[name].primary if name in formats() else None
        report.records += res.records
        report.rows_ok += res.tables[primary].height if primary in res.tables else 0
        report.rows_quarantined += res.quarantine.height
        report.rows_duplicate += res.duplicates
        report.stand_ins |= res.stand_ins
        if res.quarantine.height == 0:  # most files: no frame to build
            yield res.tables
            continue
        q = res.quarantine.with_columns(
            source_file=pl.lit(report.path),
            sha256=sha,
            format=pl.lit(name),
            ingested_at=pl.lit(now),
        )
        yield {**res.tables, "quarantine": q}


def manifest(batch: str, reports: list[FileReport]) -> dict[str, pl.DataFrame]:
    """Manifest rows of the files that are done (a file that could not be read or parsed at
    all is left out, so it is tried again)."""
    done = [r for r in reports if r.done]
    return {
        "ingest_manifest": pl.DataFrame(
            {
                "path": [r.path for r in done],
                "sha256": [r.sha256 for r in done],
                "bytes": [r.bytes for r in done],
                "format": [r.format for r in done],
                "records_read": [r.records for r in done],
                "rows_ok": [r.rows_ok for r in done],
                "rows_quarantined": [r.rows_quarantined for r in done],
                "rows_duplicate": [r.rows_duplicate for r in done],
                "stand_ins": [", ".join(sorted(r.stand_ins)) or None for r in done],
                "batch": [batch] * len(done),
                "ingested_at": [datetime.now(UTC).replace(tzinfo=None)] * len(done),
            },
            schema_overrides={
                "stand_ins": pl.Utf8,
                "bytes": pl.Int64,
                "records_read": pl.Int64,
                "rows_ok": pl.Int64,
                "rows_quarantined": pl.Int64,
                "rows_duplicate": pl.Int64,
            },
        )
    }


class Stale:
    """Quarantine rows left by earlier attempts at files that did not finish (unreadable,
    truncated, permission denied, a parser failure: quarantined without a manifest row). When
    a file is tried again, under the same content or the same path, they are removed: the new
    attempt's rows (or its stored records) replace them."""

    def __init__(self, wh: Warehouse, known: set[str], shared=None):
        self.shared = shared  # a batch (--replace): the rows are removed in its commit
        q = wh.read("quarantine").select("source_file", "sha256")
        unfinished = q.filter(pl.col("sha256").is_null() | ~pl.col("sha256").is_in(list(known)))
        self.wh, self.known = wh, set(known)
        self.shas = set(unfinished["sha256"].drop_nulls().to_list())
        self.paths = set(unfinished["source_file"].to_list())

    def clear(self, reports: list[FileReport]) -> None:
        shas = {r.sha256 for r in reports} & self.shas
        paths = {r.path for r in reports} & self.paths
        if not shas and not paths:
            return
        sha = pl.col("sha256")
        unfinished = sha.is_null() | ~sha.is_in(list(self.known))
        self._delete(
            sha.is_in(list(shas)) | (pl.col("source_file").is_in(list(paths)) & unfinished)
        )
        self.shas -= shas
        self.paths -= paths

    def clear_listed(self, roots: list[Path], not_read: dict[Path, str]) -> None:
        """Rows of directories under ``roots`` that could not be listed before and now were."""
        listed = {p for p in self.paths if Path(p).is_dir() and Path(p) not in not_read
                  and any(Path(p).is_relative_to(r) for r in roots)}  # fmt: skip
        if listed:
            self._delete(pl.col("source_file").is_in(list(listed)) & pl.col("sha256").is_null())
            self.paths -= listed

    def done(self, reports: list[FileReport]) -> None:
        self.known |= {r.sha256 for r in reports if r.done}

    def _delete(self, match: pl.Expr) -> None:
        if self.shared is not None:
            self.wh.delete_into(self.shared, {"quarantine": match})
        else:
            self.wh.delete_rows({"quarantine": match})
