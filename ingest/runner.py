"""Ingest entry points: files (``ingest_paths``) and in-memory documents (``parse_documents``,
``commit_documents``) read, parsed and committed to the warehouse.

Each file is opened once, read (a small one) and hashed here (``ingest.files``); files already
in the warehouse are skipped; small files are parsed in worker processes (``ingest.parallel``)
and committed here together, in file order, in batches of up to BATCH_ROWS rows; a large file is
parsed in chunks (``ingest.chunks``, ``ingest.parsing``) into a batch of its own. Every file ends
in the manifest with its counts (``ingest.staging``), and every record it held is either a row
of the format's primary table, a quarantine row or a counted exact duplicate (checked by
``ingest.parsing``): a parser that fails or breaks conservation has its file quarantined whole,
in a worker (``parsing.parse_bytes``) or here (``_ingest_large``), rather than half-written.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from dataclasses import replace
from datetime import UTC
from datetime import datetime
from pathlib import Path

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.files import BOM
from ingest.files import UserError
from ingest.files import compression
from ingest.files import display_name
from ingest.files import iter_files
from ingest.files import parsed_size
from ingest.files import read_parsed
from ingest.files import sha_of
from ingest.files import unsettled
from ingest.parallel import Item
from ingest.parallel import default_jobs
from ingest.parallel import parsed_items
from ingest.parallel import worth_a_pool
from ingest.parsing import failure
from ingest.parsing import parse_bytes
from ingest.parsing import parse_file
from ingest.parsing import quarantined
from ingest.parsing import reraise_interrupt
from ingest.registry import SNIFF_BYTES
from ingest.registry import formats
from ingest.staging import FileReport
from ingest.staging import Stale
from ingest.staging import batch_id
from ingest.staging import count_duplicates
from ingest.staging import frames
from ingest.staging import manifest
from ingest.staging import quarantine_conflicts
from ingest.staging import stage
from warehouse.store import Warehouse

BATCH_ROWS = 2_000_000  # small files are committed together up to this many rows


def ingest_paths(
    wh: Warehouse,
    paths: list[str | Path],
    fmt: str = "auto",
    ctx: ParseContext | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
    replace_existing: bool = False,
    jobs: int | None = None,
    settle_s: float = 0.0,
    reading: Callable[[Path, int, int | None], None] | None = None,
) -> list[FileReport]:
    """Ingest files and directories into the warehouse; returns one report per file.

    Holds the warehouse's writer lock throughout, so two ingests never interleave.
    ``replace_existing``: first forget what these paths (and these exact files) produced
    earlier, then ingest them again (``goodput ingest --replace``). ``jobs``: processes that
    parse files (default: every core); the tables written are the same for any number. Workers
    are spawned, so a script calling this with jobs > 1 needs the usual
    ``if __name__ == "__main__":`` guard (the CLI, Dagster and notebooks need nothing).
    ``settle_s``: a file whose size or modification time changes within this many seconds is
    still being written: it is not read (a warning and a quarantine row say so, cleared when
    it is read later); see ``unsettled``. ``reading``: called as a large file is read in chunks,
    with its path, the bytes read so far (decompressed) and its size (None when compressed)."""
    ctx = ctx or ParseContext()
    not_read: dict[Path, str] = {}
    files = checked_files(paths, fmt, jobs, not_read)
    jobs = default_jobs() if jobs is None else jobs
    not_read |= unsettled(
        [f for f in files if f not in not_read], settle_s
    )  # before the lock: may wait
    with wh.writer():
        return _ingest(
            wh,
            files,
            None if fmt == "auto" else fmt,
            ctx,
            progress,
            replace_existing,
            jobs,
            not_read,
            reading,
        )


def checked_files(paths: list[str | Path], fmt: str = "auto", jobs: int | None = None,
                  unreadable: dict[Path, str] | None = None) -> list[Path]:  # fmt: skip
    """The files ``ingest_paths`` reads, after the checks it makes before touching the
    warehouse (an unknown format, a bad job count, a missing path: one-line UserError), as
    absolute paths: a file is known by its content and where it is, so the same relative path
    read from two directories (two clusters' dumps) is two files; directories that cannot be
    listed as in ``iter_files``."""
    if fmt != "auto" and fmt not in formats():
        raise UserError(
            f"unknown format {fmt!r}; choose auto or one of: {', '.join(sorted(formats()))}"
        )
    if jobs is not None and jobs < 1:
        raise UserError(f"jobs (--jobs) must be at least 1, not {jobs}")
    return [Path(os.path.abspath(p)) for p in iter_files(paths, unreadable)]


def _ingest(
    wh, files, fmt, ctx, progress, replace_existing, jobs, not_read, reading=None
) -> list[FileReport]:
    retried = [] if replace_existing else _rejected_in_another_format(wh, files, fmt)
    if not replace_existing and not retried:
        return _ingest_into(wh, None, files, fmt, ctx, progress, jobs, set(), not_read, reading)
    # --replace: forget and the new rows in one batch, one commit: readers never see the gap,
    # and a failure or kill before the commit leaves the old rows
    targets = retried or [display_name(p) for p in files] + [s for s in map(sha_of, files) if s]
    with wh.batch(f"replace-{batch_id(targets)}") as batch:
        forgotten = wh.forget_into(batch, targets)[1]
        return _ingest_into(
            wh, batch, files, fmt, ctx, progress, jobs, forgotten, not_read, reading
        )


def _rejected_in_another_format(wh: Warehouse, files: list[Path], fmt: str | None) -> list[str]:
    """The sha256 of those of ``files`` whose every record was rejected when they were read in
    another format than the ``fmt`` now forced (e.g. not recognised: "pass --format"): they are
    read again in ``fmt``, replacing their quarantine rows in one commit, as ``--replace`` does."""
    if fmt is None:
        return []
    m = wh.read("ingest_manifest")
    return m.filter(
        pl.col("path").is_in([display_name(p) for p in files])
        & (pl.col("format") != fmt)
        & (pl.col("rows_ok") == 0)
        & (pl.col("rows_duplicate") == 0)
        & (pl.col("rows_quarantined") > 0)
    )["sha256"].to_list()


def _ingest_into(wh, shared, files, fmt, ctx, progress, jobs, forgotten: set[str], not_read,
                 reading=None) -> list[FileReport]:  # fmt: skip
    """Ingest ``files`` in batches of their own, or all into the batch ``shared`` (whose commit
    is the caller's); ``forgotten``: manifest shas that batch removes."""
    known = wh.known_sha256() - forgotten
    stale = Stale(wh, known, shared)
    stale.clear_listed([p for p in files if p.is_dir()] + [p.parent for p in files], not_read)
    forced = formats()[fmt] if fmt else None
    reports: list[FileReport] = []
    pending: list[tuple[FileReport, list[tuple[str, ParseResult]]]] = []
    pending_rows = 0

    def flush():
        nonlocal pending, pending_rows
        if not pending:
            return
        stale.clear([r for r, _ in pending])
        own = (
            wh.batch(batch_id([r.sha256 or r.path for r, _ in pending]))
            if shared is None
            else nullcontext(shared)
        )
        with own as batch:
            stage(batch, pending)
            batch.add(manifest(batch.id, [r for r, _ in pending]))
        stale.done([r for r, _ in pending])
        pending, pending_rows = [], 0

    pooled = jobs > 1 and worth_a_pool(files)
    for i, it in enumerate(
        parsed_items(_prepared(files, known, ctx, forced, not_read), fmt, jobs, pooled)
    ):
        if progress:
            progress(i, len(files), it.path)
        report = it.report
        reports.append(report)
        if report.skipped:  # stored already: what an earlier failed attempt at it left is stale
            stale.clear([report])
        if it.stream:  # a large file: its chunks go straight to its own staged batch
            flush()
            _ingest_large(wh, it, forced, stale, shared, reading)
        elif it.results is not None:
            if (
                forced is not None
                and not it.recognised
                and report.done
                and not any(r.records for _, r in it.results)
            ):
                it.results = [_no_record(forced, report)]
            pending.append((report, it.results))
            pending_rows += sum(sum(df.height for df in r.tables.values()) for _, r in it.results)
            if pending_rows >= BATCH_ROWS:
                flush()
    flush()
    return reports


def _ingest_large(
    wh: Warehouse,
    it: Item,
    forced: FormatSpec | None,
    stale: Stale,
    shared=None,
    reading: Callable[[Path, int, int | None], None] | None = None,
) -> None:
    """A file larger than ``chunks.CHUNK_BYTES``, streamed in chunks into a staged batch of its
    own, or into ``shared`` (its chunks are parsed on every core by threads). In a shared batch
    a parser failure fails the whole batch (``--replace``: the old rows stay)."""
    report, sha = it.report, it.report.sha256
    stale.clear([report])
    own = wh.batch(batch_id([sha])) if shared is None else nullcontext(shared)
    try:
        with own as batch, it.stream as raw:
            dropped: dict[str, dict] = {}
            size = (
                None if compression(os.pread(raw.fileno(), 4, 0)) else report.bytes
            )  # else: unknown text size
            read = None if reading is None else (lambda n: reading(it.path, n, size))
            for tables in frames(
                report, parse_file(raw, it.path.name, forced, it.ctx, report.bytes, read)
            ):
                for table, by_sha in batch.add(tables).items():
                    for k, n in by_sha.items():
                        dropped.setdefault(table, {})[k] = dropped.get(table, {}).get(k, 0) + n
            if forced is not None and not it.recognised and report.records == 0:
                for tables in frames(report, [_no_record(forced, report)]):
                    batch.add(tables)
            count_duplicates([report], dropped)
            quarantine_conflicts(batch, [report])
            batch.add(manifest(batch.id, [report]))
        stale.done([report])
    except Exception as exc:  # a parser bug must not lose the file: quarantine it whole
        reraise_interrupt(exc)
        if shared is not None:
            raise
        report.records = report.rows_ok = report.rows_quarantined = report.rows_duplicate = 0
        with wh.batch(batch_id([sha])) as batch:
            for tables in frames(report, [_parser_failure(report, forced, exc)]):
                batch.add(tables)


def _prepared(files: list[Path], known: set[str], ctx: ParseContext, forced: FormatSpec | None,
              not_read: dict[Path, str]) -> Iterator[Item]:  # fmt: skip
    """Each file opened once, read (small ones) and hashed, in order; a file already in the
    warehouse, or met earlier in this run, is marked skipped and not read again. What is
    hashed is what is parsed: the bytes read from one open descriptor, up to ``files.read_parsed``
    (a line-oriented file's incomplete last line is held back). ``not_read``: paths not to
    read, with the reason (quarantined, and cleared when they are read later)."""
    for path in files:
        name = display_name(path)
        if path in not_read:  # a directory that cannot be listed, a file still being written
            yield _not_read(path, not_read[path])
            continue
        try:
            if not stat.S_ISREG(
                path.stat().st_mode
            ):  # checked before opening: a FIFO's open blocks
                yield Item(
                    path,
                    FileReport(
                        name, "", "", error="not a regular file (FIFO, socket or device): skipped"
                    ),
                )
                continue
            fh = path.open("rb")  # a large file's stays open until it is parsed
        except OSError as exc:
            yield _not_read(path, f"cannot read: {exc.strerror or exc}")
            continue
        try:
            st = os.fstat(fh.fileno())
            # small files (nearly all) are read once: hashed, then parsed from memory
            data, size, sha = read_parsed(fh, st.st_size, name, forced)
        except OSError as exc:
            fh.close()
            yield _not_read(path, f"cannot read: {exc.strerror or exc}")
            continue
        report = FileReport(name, "", sha, held_back=st.st_size - size)
        incomplete = (
            size == 0 < st.st_size
        )  # nothing but an incomplete line: read when it is complete
        if data is not None or sha in known or incomplete:
            fh.close()
        if incomplete:
            yield _not_read(
                path,
                f"its only line has no newline yet ({st.st_size:,} bytes): not read until it is "
                "complete",
            )
            continue
        if sha in known:
            report.skipped = True
            yield Item(path, report)
            continue
        known.add(sha)
        report.bytes = size
        fctx = replace(
            ctx, path=name, mtime=datetime.fromtimestamp(st.st_mtime, UTC).replace(tzinfo=None)
        )
        yield Item(
            path,
            report,
            data=None if data is None else data[:size],
            ctx=fctx,
            stream=fh if data is None else None,
            recognised=forced is not None and _recognised(forced, data, fh, name),
        )


def _recognised(spec: FormatSpec, data: bytes | None, fh, name: str) -> bool:
    """Whether ``spec``'s own sniffer knows the file's (uncompressed) head."""
    n = SNIFF_BYTES + len(BOM)
    head = data[:n] if data is not None else os.pread(fh.fileno(), n, 0)
    if compression(head[:4]):
        return False
    return spec.detect(head.removeprefix(BOM)[:SNIFF_BYTES], name) > 0


def _not_read(path: Path, error: str) -> Item:
    """A file that could not be read: quarantined without a sha256 and not marked done, so the
    next ingest tries it again (and then clears this row)."""
    report = FileReport(display_name(path), "unknown", "", error=error, done=False)
    return Item(path, report, results=[("unknown", quarantined(b"", error))])


def _no_record(spec: FormatSpec, report: FileReport) -> tuple[str, ParseResult]:
    """A file in which the format forced on it found no record at all and whose content that
    format's sniffer does not know (the wrong ``--format``): quarantined whole, with that reason,
    and not marked done (no manifest row), so an ingest in another format, or detected, reads it
    again without ``--replace``."""
    report.done = False
    why = f"--format {spec.name} found no record in this file ({report.bytes:,} bytes)"
    return spec.name, quarantined(b"", why)


def _parser_failure(
    report: FileReport, spec: FormatSpec | None, exc: Exception
) -> tuple[str, ParseResult]:
    """A file the parser failed on as a whole: quarantined, and not marked done, so that a
    fixed parser (or a later run) reads it again."""
    report.done = False
    return failure(spec, exc)


@dataclass
class MemoryInput:
    """An in-memory input (a live source's response or command output) read as a file named
    ``name`` in format ``fmt``."""

    name: str
    data: bytes
    fmt: str | None  # None: detected from the content, as for files
    ctx: ParseContext


def parse_documents(
    docs: list[MemoryInput],
) -> list[tuple[FileReport, list[tuple[str, ParseResult]]]]:
    """Each of ``docs`` parsed with its format, with its report: the same parsers as files, an
    unfinished last line held back as from a file (``FileReport.held_back``). A document that
    fails to parse is quarantined whole and its report is not ``done``. Touches no warehouse,
    so it can run while another batch commits."""
    parsed = []
    for d in docs:
        if d.fmt is not None and d.fmt not in formats():
            raise UserError(f"{d.name}: unknown format {d.fmt!r}")
        # as for a file: an unfinished last line (output cut mid-line) waits for the next read
        size = parsed_size(d.data, len(d.data), d.name, formats()[d.fmt] if d.fmt else None)
        data = d.data[:size]
        report = FileReport(
            d.name, d.fmt or "", hashlib.sha256(data).hexdigest(), bytes=size,
            held_back=len(d.data) - size,
        )  # fmt: skip
        res, report.done = parse_bytes(data, d.name, d.fmt, replace(d.ctx, path=d.name))
        parsed.append((report, res))
    return parsed


def commit_documents(
    wh: Warehouse,
    parsed: list[tuple[FileReport, list[tuple[str, ParseResult]]]],
    batch_id: str,
    extra: Callable[[list[FileReport]], dict[str, pl.DataFrame]],
) -> list[FileReport]:
    """Commit ``parse_documents``' results in one batch, with the frames ``extra(reports)``
    makes from their counts (a pull's status row): the same record keys, duplicate counts and
    quarantine as files, and all of it or nothing is stored. No manifest row: a document is not
    a file (the caller records it). The caller holds the writer lock."""
    reports = [r for r, _ in parsed]
    with wh.batch(batch_id) as batch:
        stage(batch, parsed)
        batch.add(extra(reports))
    return reports
