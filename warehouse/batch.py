"""Staged, atomic ingest batches: rows are matched against the stored records by their record
key (out of core, in DuckDB), written into ``_staging/<batch>``, switched visible by a COMMIT
marker and moved into place; recovery rolls a committed stage forward and discards the rest.
"""

from __future__ import annotations

import json
import os
import posixpath
from contextlib import ExitStack
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from tempfile import TemporaryDirectory

import duckdb
import polars as pl

from warehouse._sql import deduped
from warehouse._sql import duck_type
from warehouse._sql import sql_str
from warehouse._sql import typed_scan
from warehouse._utils import join
from warehouse._utils import mtime
from warehouse._utils import parquet_writer
from warehouse._utils import split_partitions
from warehouse._utils import with_partition
from warehouse.catalog import Catalog
from warehouse.interrupt import stop_if_pressed
from warehouse.layout import COPIES
from warehouse.layout import Layout
from warehouse.layout import file_column
from warehouse.layout import has_copies
from warehouse.lock import WriterLock
from warehouse.schemas import TABLES
from warehouse.schemas import Table
from warehouse.schemas import conform
from warehouse.storage import Storage

STALE_STAGE_S = 6 * 3600  # object storage: an uncommitted stage idle this long is abandoned
FAULT_ENV = "GOODPUT_FAULT_EXIT_AFTER_RENAMES"  # tests: os._exit mid-commit after N renames

# Batches this process committed: after an environment error (disk full) the CLI says whether
# anything was stored
COMMITS = [0]


class Staging:
    """A warehouse's batches: opening one, recovering crashed ones, committing. Its files are
    ``storage``'s, laid out by ``layout``; a batch is written under ``lock`` and matches its
    records through ``catalog``'s connections."""

    def __init__(self, storage: Storage, layout: Layout, lock: WriterLock, catalog: Catalog):
        self.storage = storage
        self.layout = layout
        self.lock = lock
        self.catalog = catalog

    def recover(self) -> None:
        """Finish what crashed writers left: roll committed stages forward, discard uncommitted
        ones. A stage whose writer is alive holds its lock and is left alone (the sensor and
        parallel runs open the warehouse while an ingest stages). Object storage may be shared
        by other machines, whose locks we cannot see: there an uncommitted stage is discarded
        only after ``STALE_STAGE_S`` without a write."""
        s = self.storage
        s.fs.invalidate_cache()  # see Catalog.connect()
        for stage in self.layout.stages():
            with self.lock.stage_lock(posixpath.basename(stage), wait=False) as held:
                if not held:
                    continue
                if s.fs.exists(join(stage, "COMMIT")):
                    self.roll_forward(stage)
                elif s.local or self._idle_s(stage) > STALE_STAGE_S:
                    s.rm_tree(stage)

    def _idle_s(self, stage: str) -> float:
        """Seconds since the last write into a stage."""
        infos = self.storage.fs.find(stage, detail=True).values()
        return datetime.now().timestamp() - max((mtime(i) for i in infos), default=0.0)

    def roll_forward(self, stage: str) -> None:
        """Move a committed stage's files into place (replacing same-named files), then delete
        the files its ``DELETE`` list names (paths relative to the root; written by forget),
        then the stage. Repeating it after a crash at any point finishes the same work."""
        s = self.storage
        src = s.find(stage)
        dst = [s.root + f[len(stage) :] for f in src]
        crash_after = int(os.environ.get(FAULT_ENV, "-1"))  # fault injection (tests/test_faults.py)
        if s.local:
            for i, (a, b) in enumerate(zip(src, dst, strict=True)):
                if i == crash_after:
                    os._exit(70)
                s.fs.makedirs(posixpath.dirname(b), exist_ok=True)
                s.fs.mv(a, b)  # a rename: atomic
        elif src:
            s.fs.mv(src, dst)  # concurrent server-side copies, then one bulk delete
        deletes = join(stage, "DELETE")
        if s.fs.exists(deletes):
            gone = [s.path(rel) for rel in json.loads(s.fs.cat_file(deletes))]
            gone = [f for f in gone if s.fs.exists(f)]
            if gone:
                s.fs.rm(gone)
        s.rm_tree(stage)

    def open(self, batch_id: str) -> Batch:
        """A new batch, its stage locked; the caller commits or aborts it, under the writer
        lock."""
        return Batch(self, batch_id)

    @contextmanager
    def batch(self, batch_id: str):
        """Stage rows for ingest tables; they become visible together when the block exits
        without error, and not at all otherwise."""
        with self.lock.writer():
            b = Batch(self, batch_id)
            try:
                yield b
            except BaseException:
                b.abort()
                raise
            b.commit()


class Batch:
    """Part files staged under ``_staging/<id>``; committed by a marker, then moved in."""

    def __init__(self, staging: Staging, batch_id: str):
        self.staging, self.id = staging, batch_id
        self.storage, self.layout = staging.storage, staging.layout
        self.stage = staging.layout.stage(batch_id)
        self._lock = ExitStack()  # held until commit or abort: recovery elsewhere keeps off
        self._lock.enter_context(staging.lock.stage_lock(batch_id))
        self.storage.rm_tree(self.stage)
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
                for rel, part in split_partitions(spec, firsts):
                    seen, mine, disagree = self._stored(name, rel, part, keys)
                    same.append(mine)
                    other.append(disagree)
                    parts.append(
                        (
                            rel,
                            part.filter(~pl.col("_i").is_in(seen.implode()))
                            if seen.len()
                            else part,
                        )
                    )
                if sum(part.height for _, part in parts) < df.height:
                    kept = pl.concat([df["_i"].head(0), *(part["_i"] for _, part in parts)])
                    gone = df.filter(~pl.col("_i").is_in(kept.implode()))
                    if spec.values:
                        gone = self._conflicts(name, gone, firsts, pl.concat(other), keys)
                    if gone.height:
                        dropped[name] = dict(gone.group_by(file_column(spec)).len().rows())
                    if has_copies(spec):
                        self._add_copies(name, gone, firsts, pl.concat(same), keys)
                parts = [(rel, part.drop("_i")) for rel, part in parts]
            else:
                parts = list(split_partitions(spec, df))
            for rel, part in parts:
                if part.height == 0:
                    continue
                path = join(
                    self.stage,
                    self.layout.records_dir(name),
                    rel,
                    f"part-{self.id}-{self.seq:05d}.parquet",
                )
                self.storage.write(path, parquet_writer(part), atomic=False)
                if spec.dedupe:
                    self.touched.add((name, rel))
        self.seq += 1
        return dropped

    def _stored(
        self,
        name: str,
        rel: str,
        part: pl.DataFrame,
        keys: tuple[str, ...],
        folder: str | None = None,
    ) -> tuple[pl.Series, pl.Series]:
        """Row indices (``_i``) of ``part`` whose record key is already stored in this
        partition (committed, or staged earlier in this batch), and those of them a stored row
        of the same file holds (``source_file``; all of them where the table has none).
        ``folder``: match against the files of another folder than the table's records (its
        copies). Out of core: DuckDB matches the
        stored files against the batch, keeping only the batch's keys in memory; the batch's
        range of each key column (``_key_ranges``) prunes stored files and row groups by their
        statistics (a batch holds some hosts' files: the other hosts' rows are never read)."""
        files = self.record_files(name, rel, folder)
        none = pl.Series("_i", [], pl.UInt32)
        if not files:
            return (
                none,
                none,
                pl.DataFrame(
                    {"_i": none, "_other": [], "_was": []},
                    schema={"_i": pl.UInt32, "_other": pl.Utf8, "_was": pl.Utf8},
                ),
            )
        keys = tuple(k for k in keys if k != TABLES[name].partition)
        own = (
            "source_file"
            if "source_file" in TABLES[name].columns and "source_file" not in keys
            else None
        )
        values = TABLES[name].values if folder is None else ()
        urls = [self.storage.duck_path(f) for f in files]
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
        typed_values = "".join(
            f', CAST(NULL AS {duck_type(TABLES[name].columns[v])}) AS "{v}"' for v in values
        )
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE hits AS SELECT DISTINCT {cols}{file_col}{value_cols} "
            f"FROM (SELECT * FROM read_parquet($files, union_by_name = true) "
            f"UNION ALL BY NAME SELECT {typed}"
            f"{', NULL::VARCHAR AS source_file' if own else ''}{typed_values} "
            f"WHERE false) e SEMI JOIN b ON {on} {where}",
            {"files": urls},
        )
        same = f'e._file IS NOT DISTINCT FROM b."{own}"' if own else "true"
        differ = " OR ".join(f'e."{v}" IS DISTINCT FROM b."{v}"' for v in values) or "false"
        was = (
            " || ', ' || ".join(f"""'{v} ' || coalesce(e."{v}"::VARCHAR, 'null')""" for v in values)
            or "NULL"
        )
        hits = con.sql(
            f"SELECT b._i, bool_or({same}) AS same, bool_and(NOT ({differ})) AS agree, "
            f"first(e._file) FILTER (WHERE {differ}) AS _other, "
            f"first({was}) FILTER (WHERE {differ}) AS _was "
            f"FROM b JOIN hits e ON {on} GROUP BY b._i"
        ).pl()
        con.unregister("b")
        # a record some stored row repeats exactly is a repeat, whatever others say
        disagree = hits.filter(~pl.col("agree") & ~pl.col("same")).select(
            pl.col("_i").cast(pl.UInt32),
            pl.col("_other").cast(pl.Utf8),
            pl.col("_was").cast(pl.Utf8),
        )
        return hits["_i"].cast(pl.UInt32), hits.filter("same")["_i"].cast(pl.UInt32), disagree

    def _conflicts(
        self,
        name: str,
        gone: pl.DataFrame,
        firsts: pl.DataFrame,
        stored: pl.DataFrame,
        keys: tuple[str, ...],
    ) -> pl.DataFrame:
        """``gone`` (rows left out as repeats) without the conflicts among them, which are kept
        in ``self.conflicts`` (file, line, raw, error): rows whose key a stored row (``stored``:
        ``_i``, the other file, its values) or a row kept in this batch, of another file or of
        the same one (a scrape holding one sample twice, at 40 and at 90), holds with other
        ``values``."""
        spec = TABLES[name]
        vals = list(spec.values)
        file_col = file_column(spec)
        kept = firsts.filter(~pl.col("_i").is_in(gone["_i"].implode()))  # stored by this batch
        twins = gone.filter(~pl.col("_i").is_in(firsts["_i"].implode())).join(
            kept.select(*keys, *[pl.col(v).alias(f"_kept_{v}") for v in vals], _other=file_col),
            on=list(keys),
            how="inner",
            nulls_equal=True,
        )
        differ = pl.any_horizontal(pl.col(v).ne_missing(pl.col(f"_kept_{v}")) for v in vals)
        was = pl.concat_str(
            [
                pl.format(f"{v} {{}}", pl.col(f"_kept_{v}").cast(pl.Utf8).fill_null("null"))
                for v in vals
            ],
            separator=", ",
        )
        twins = twins.filter(differ).select("_i", "_other", _was=was)
        bad = pl.concat([stored, twins.cast({"_i": pl.UInt32})]).unique("_i", keep="first")
        if not bad.height:
            return gone
        rows = gone.join(bad, on="_i", how="inner")
        vals_here = pl.concat_str(
            [pl.format(f"{v} {{}}", pl.col(v).cast(pl.Utf8).fill_null("null")) for v in vals],
            separator=", ",
        )
        self.conflicts.append(
            rows.select(
                source_file=pl.col(file_col),
                line=pl.col("source_line")
                if "source_line" in rows.columns
                else pl.lit(None, pl.Int64),
                raw=pl.struct([c for c in rows.columns if c in spec.columns])
                .struct.json_encode()
                .str.slice(0, 500),
                error=pl.when(pl.col("_other") == pl.col(file_col))
                .then(
                    pl.format(
                        "conflicts with an earlier record of its own file ({}): {} here",
                        "_was",
                        vals_here,
                    )
                )
                .otherwise(
                    pl.format(
                        "conflicts with the stored record of {} ({}): {} here",
                        "_other",
                        "_was",
                        vals_here,
                    )
                ),
            )
        )
        return gone.filter(~pl.col("_i").is_in(bad["_i"].implode()))

    def _add_copies(
        self,
        name: str,
        gone: pl.DataFrame,
        firsts: pl.DataFrame,
        same: pl.Series,
        keys: tuple[str, ...],
    ) -> None:
        """Stage, under ``_copies/<table>``, the rows of ``gone`` (left out as repeats) that
        no row of their own file holds: not a repeat within their file (the kept twin's file)
        nor of a stored row of it (``same``), nor copied for their file before."""
        twins = gone.filter(~pl.col("_i").is_in(firsts["_i"].implode())).join(
            firsts.select(*keys, _kept="source_file"), on=list(keys), how="inner", nulls_equal=True
        )
        mine = twins.filter(pl.col("_kept") == pl.col("source_file"))["_i"]
        copies = gone.filter(
            ~pl.col("_i").is_in(pl.concat([mine, same.cast(mine.dtype)]).implode())
        )
        copies = copies.unique([*keys, "source_file"], keep="first", maintain_order=True)
        spec, folder = TABLES[name], join(COPIES, name)
        for rel, part in split_partitions(spec, copies):
            seen = self._stored(name, rel, part, (*keys, "source_file"), folder)[0]
            part = part.filter(~pl.col("_i").is_in(seen.implode())).drop("_i")
            if part.height:
                path = join(self.stage, folder, rel, f"part-{self.id}-{self.seq:05d}.parquet")
                self.storage.write(path, parquet_writer(part), atomic=False)

    def _connection(self) -> duckdb.DuckDBPyConnection:
        """The batch's DuckDB connection for matching records (opening one costs ~20 ms, and a
        batch matches once per partition it touches), closed with the batch."""
        if self._con is None:
            self._con = self._lock.enter_context(self.staging.catalog.connect_out_of_core())
        return self._con

    def record_files(self, name: str, rel: str, folder: str | None = None) -> list[str]:
        """A partition's stored rows as this batch will leave them: the committed files it
        neither rewrites nor deletes, and its staged ones (of the table's records, or of
        ``folder``)."""
        folder = join(folder or self.layout.records_dir(name), rel)
        staged = self.storage.find(join(self.stage, folder))
        replaced = {self.storage.root + f[len(self.stage) :] for f in staged}
        replaced |= {self.storage.path(g) for g in self.gone}
        return [
            f for f in self.storage.find(self.storage.path(folder)) if f not in replaced
        ] + staged

    def stage_canonical(self) -> None:
        """Stage the canonical rows (``data.parquet``) of every Dedupe partition this batch
        touched: its source rows merged by the table's ``Dedupe``, computed and written out of
        core by DuckDB. A partition left without source rows loses its canonical file."""
        for name, rel in sorted(self.touched):
            spec = TABLES[name]
            files = self.record_files(name, rel)
            if not files:
                self.gone += [
                    f[len(self.storage.root) + 1 :]
                    for f in self.storage.find(self.storage.path(name, rel))
                ]
                continue
            urls = ", ".join(sql_str(self.storage.duck_path(f)) for f in files)
            hive = spec.partition is not None
            scan = f"read_parquet([{urls}], hive_partitioning = {hive}, union_by_name = true)"
            drop = f' EXCLUDE ("{spec.partition}")' if spec.partition else ""
            merged = deduped(typed_scan(spec, scan, zoned=True), spec)
            query = f"SELECT *{drop} FROM ({merged}) ORDER BY ALL"
            target = join(self.stage, name, rel, "data.parquet")
            with self.staging.catalog.connect_out_of_core() as con, TemporaryDirectory() as tmp:
                out = target if self.storage.local else str(Path(tmp) / "data.parquet")
                if self.storage.local:
                    self.storage.fs.makedirs(posixpath.dirname(target), exist_ok=True)
                con.execute(f"COPY ({query}) TO {sql_str(out)} (FORMAT parquet, COMPRESSION zstd)")
                if not self.storage.local:
                    self.storage.fs.put_file(out, target)

    def committed_files(self, folder: str) -> list[str]:
        """The committed Parquet files under ``folder`` (a path in the root) this batch does
        not delete."""
        gone = {self.storage.path(g) for g in self.gone}
        return [f for f in self.storage.find(folder) if f not in gone]

    def rewrite_without(self, file: str, match: tuple[str, set[str]] | pl.Expr):
        """Stage ``file`` (a committed part) rewritten without the rows ``match`` selects: a
        (column, values) pair or a predicate (its staged rewrite, if this batch made one
        already, is what is rewritten). None if it holds none, else (rows removed, whether
        the file is left empty and is to be deleted instead, the rows removed)."""
        staged = self.stage + file[len(self.storage.root) :]
        with self.storage.fs.open(staged if self.storage.fs.exists(staged) else file, "rb") as fh:
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
            self.storage.write(
                self.stage + file[len(self.storage.root) :], parquet_writer(keep), atomic=False
            )
        return df.height - keep.height, keep.height == 0, with_partition(df.filter(hit), file)

    def commit(self) -> None:
        stop_if_pressed()  # Ctrl-C that a query swallowed: this batch is not whole
        with self._lock:
            self.stage_canonical()
            if self.gone:
                gone = json.dumps(self.gone).encode()
                self.storage.write(
                    join(self.stage, "DELETE"), lambda fh: fh.write(gone), atomic=False
                )
            self.storage.write(join(self.stage, "COMMIT"), lambda fh: fh.write(b"ok"))
            COMMITS[0] += 1
            self.staging.roll_forward(self.stage)

    def abort(self) -> None:
        with self._lock:
            self.storage.rm_tree(self.stage)


def _first_of_each_key(df: pl.DataFrame, keys: tuple[str, ...]) -> pl.DataFrame:
    """``df.unique(keys, keep="first", maintain_order=True)``, fast when nearly every key is
    distinct (a batch of samples): only rows whose key hash repeats are compared in full."""
    twins = df.select(keys).hash_rows().is_duplicated()
    if not twins.any():
        return df
    firsts = df.filter(twins).unique(subset=list(keys), keep="first", maintain_order=True)["_i"]
    return df.filter(~twins | pl.col("_i").is_in(firsts.implode()))


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
            bounds = sql_str(lo), sql_str(hi)
        else:
            continue
        out.append(f'e."{k}" BETWEEN {bounds[0]} AND {bounds[1]}')
    return out
