"""The I/O side of ingest: find files, decompress, dedupe by sha256, parse, commit.

Parsers stay pure; this module owns everything that touches disk. Every file ends in the
manifest with its counts, and every record it held is either a row of the format's primary
table or a quarantine row (checked here: a parser that breaks conservation is a bug, and its
file is quarantined whole rather than half-written).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import BinaryIO

import polars as pl
import zstandard

from ingest.base import FormatSpec, ParseContext, ParseResult, count_newlines, whole_file_quarantine
from ingest.registry import SNIFF_BYTES, detect, formats
from warehouse.schemas import conform
from warehouse.store import Warehouse

# Line-oriented files larger than this are parsed in chunks. Below 32 MiB (glibc's
# largest dynamic mmap threshold) freed chunk buffers are recycled by malloc; larger ones are
# fresh mappings that page-fault on every chunk (5x slower reading, benchmarks/bench_kernel.py).
CHUNK_BYTES = 24 << 20
_PROBE = 1 << 16  # bytes read at a time when looking for a chunk's last newline
BATCH_ROWS = 2_000_000  # small files are committed together up to this many rows


class UserError(Exception):
    """A mistake in what the user asked for; the CLI prints it as one line."""


@dataclass
class FileReport:
    path: str
    format: str
    sha256: str
    records: int = 0
    rows_ok: int = 0
    rows_quarantined: int = 0
    bytes: int = 0
    skipped: bool = False  # already in the manifest


def iter_files(paths: list[str | Path]) -> list[Path]:
    """Expand directories recursively (sorted, hidden files skipped); missing paths are errors."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"no such file or directory: {p}")
        if p.is_dir():
            out.extend(
                f
                for f in sorted(p.rglob("*"))
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts)
            )
        else:
            out.append(p)
    return out


def open_source(raw: BinaryIO) -> BinaryIO:
    """Wrap an open binary stream, transparently decompressing gzip or zstd (by magic bytes,
    not name). The caller keeps ownership of ``raw``."""
    magic = raw.read(4)
    raw.seek(0)
    if magic[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw)
    if magic == b"\x28\xb5\x2f\xfd":
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=False))
    return raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # peek() is how we sniff


def file_sha256(path: Path) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


def parse_chunks(spec: FormatSpec, fh: BinaryIO, ctx: ParseContext, plain: bool) -> Iterator[ParseResult]:
    """Checked results of ``spec.parse`` over a line-oriented stream's chunks, in file order.
    Chunks are parsed concurrently on all cores (parsers are pure; Polars and NumPy release the
    GIL); at most cores + 1 chunks are in flight."""
    pool, pending, line = _pool(), deque(), 0
    for block, newlines in _chunks(fh, plain):
        pending.append(pool.submit(spec.parse, block, replace(ctx, line_offset=line)))
        line += newlines
        if len(pending) > _WORKERS:
            yield _checked(spec, pending.popleft().result())
    while pending:
        yield _checked(spec, pending.popleft().result())


_WORKERS = os.cpu_count() or 1


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_WORKERS, thread_name_prefix="parse")


def _chunks(fh: BinaryIO, plain: bool) -> Iterator[tuple[bytes, int]]:
    """(block, newlines in it): blocks of at most CHUNK_BYTES that end on a line boundary (a
    longer line stays whole). A plain file is read with ``pread``, one copy per block; a
    decompressing stream is read forward and re-joined at the cut."""
    fd = _regular_fd(fh) if plain else None
    for block in _stream_blocks(fh) if fd is None else _file_blocks(fd, fh.tell()):
        yield block, count_newlines(block)


def _regular_fd(fh: BinaryIO) -> int | None:
    try:
        fd = fh.fileno()
    except (AttributeError, OSError):  # in-memory streams; io.UnsupportedOperation is an OSError
        return None
    return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _file_blocks(fd: int, pos: int) -> Iterator[bytes]:
    while (end := _line_end(fd, pos)) > pos and (block := os.pread(fd, end - pos, pos)):
        yield block
        pos += len(block)


def _line_end(fd: int, pos: int) -> int:
    """Offset just past the last newline in [pos, pos + CHUNK_BYTES), found by probing backwards
    from the end; else just past the next newline; else the end of the file."""
    size = os.fstat(fd).st_size
    end = pos + CHUNK_BYTES
    if end >= size:
        return size
    hi = end
    while hi > pos:
        lo = max(pos, hi - _PROBE)
        if (i := os.pread(fd, hi - lo, lo).rfind(b"\n")) >= 0:
            return lo + i + 1
        hi = lo
    while probe := os.pread(fd, _PROBE, end):
        if (i := probe.find(b"\n")) >= 0:
            return end + i + 1
        end += len(probe)
    return end


def _stream_blocks(fh: BinaryIO) -> Iterator[bytes]:
    rest = b""
    while block := fh.read(CHUNK_BYTES):
        block = rest + block
        cut = block.rfind(b"\n")
        if cut < 0:
            rest = block
            continue
        yield block[: cut + 1]
        rest = block[cut + 1 :]
    if rest:
        yield rest


def _checked(spec: FormatSpec, result: ParseResult) -> ParseResult:
    ok = result.tables.get(spec.primary)
    n_ok = 0 if ok is None else ok.height
    if n_ok + result.quarantine.height != result.records:
        raise RuntimeError(
            f"conservation violated: {result.records} records read, {n_ok} rows + "
            f"{result.quarantine.height} quarantined"
        )
    return result


def _merged(spec: FormatSpec, results: list[ParseResult], ctx: ParseContext) -> ParseResult:
    """One file's chunk results as one, through the format's ``merge`` hook."""
    return results[0] if len(results) == 1 else _checked(spec, spec.merge(results, ctx))


def _quarantined(data: bytes, error: str) -> ParseResult:
    return ParseResult(tables={}, quarantine=whole_file_quarantine(data, error), records=1)


def _parse_file(
    raw: BinaryIO, name: str, spec: FormatSpec | None, ctx: ParseContext
) -> Iterator[tuple[str, ParseResult]]:
    """Yield (format name, result) per chunk of the (possibly compressed) stream ``raw``; a file
    nobody recognises, an empty file or a parser failure becomes a single quarantine record."""
    with open_source(raw) as fh:
        try:
            head = fh.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(fh, "peek") else b""
        except (OSError, EOFError, zstandard.ZstdError) as exc:
            yield "unknown", _quarantined(b"", f"cannot decompress: {exc}")
            return
        if not head.strip():
            yield (spec.name if spec else "unknown"), _quarantined(head, "empty file")
            return
        if spec is None:
            spec = detect(head, name)
        if spec is None:
            yield "unknown", _quarantined(
                head, "format not recognised from content or name; pass --format"
            )
            return
        try:
            if spec.line_oriented:
                chunks = parse_chunks(spec, fh, ctx, plain=fh is raw)
                if spec.merge is not None:
                    chunks = iter([_merged(spec, list(chunks), ctx)])
                for res in chunks:
                    yield spec.name, res
            else:
                yield spec.name, _checked(spec, spec.parse(fh.read(), ctx))
        except (OSError, EOFError, zstandard.ZstdError) as exc:
            yield spec.name, _quarantined(b"", f"cannot read or decompress: {exc}")


def ingest_paths(
    wh: Warehouse,
    paths: list[str | Path],
    fmt: str = "auto",
    ctx: ParseContext | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
) -> list[FileReport]:
    """Ingest files and directories into the warehouse; returns one report per file."""
    ctx = ctx or ParseContext()
    if fmt != "auto" and fmt not in formats():
        raise UserError(f"unknown format {fmt!r}; choose auto or one of: {', '.join(sorted(formats()))}")
    forced = None if fmt == "auto" else formats()[fmt]
    files = iter_files(paths)
    known = wh.known_sha256()
    reports: list[FileReport] = []
    pending: list[tuple[FileReport, Path, list[tuple[str, ParseResult]]]] = []
    pending_rows = 0

    def flush():
        nonlocal pending, pending_rows
        if not pending:
            return
        with wh.batch(pending[0][0].sha256[:16]) as batch:
            # one Parquet part per table per batch, not per file: small files stay cheap to scan
            merged: dict[str, list[pl.DataFrame]] = {}
            for report, path, results in pending:
                for frames in _frames(batch.id, report, path, results):
                    for name, df in frames.items():
                        if df.height:
                            merged.setdefault(name, []).append(conform(name, df))
            batch.add({name: pl.concat(dfs) for name, dfs in merged.items()})
        pending, pending_rows = [], 0

    for i, path in enumerate(files):
        if progress:
            progress(i, len(files), path)
        # small files (nearly all) are read once: hashed, then parsed from memory
        nbytes = path.stat().st_size
        data = path.read_bytes() if nbytes <= CHUNK_BYTES else None
        sha = hashlib.sha256(data).hexdigest() if data is not None else file_sha256(path)[0]
        report = FileReport(str(path), "", sha)
        reports.append(report)
        if sha in known:
            report.skipped = True
            continue
        known.add(sha)
        fctx = replace(
            ctx,
            path=str(path),
            mtime=datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None),
        )
        report.bytes = nbytes
        if data is None:  # stream it: chunks go straight to its own staged batch
            flush()
            try:
                with wh.batch(sha[:16]) as batch, open(path, "rb") as raw:
                    for frames in _frames(batch.id, report, path, _parse_file(raw, path.name, forced, fctx)):
                        batch.add(frames)
            except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the file: quarantine it whole
                report.records = report.rows_ok = report.rows_quarantined = 0
                with wh.batch(sha[:16]) as batch:
                    for frames in _frames(batch.id, report, path, [_parser_failure(forced, exc)]):
                        batch.add(frames)
            continue
        try:
            results = list(_parse_file(io.BytesIO(data), path.name, forced, fctx))
        except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the file: quarantine it whole
            results = [_parser_failure(forced, exc)]
        pending.append((report, path, results))
        pending_rows += sum(sum(df.height for df in r.tables.values()) for _, r in results)
        if pending_rows >= BATCH_ROWS:
            flush()
    flush()
    return reports


def _parser_failure(spec: FormatSpec | None, exc: Exception) -> tuple[str, ParseResult]:
    return (spec.name if spec else "unknown", _quarantined(b"", f"parser error: {exc!r}"))


def _frames(batch_id: str, report: FileReport, path: Path, results) -> Iterator[dict[str, pl.DataFrame]]:
    """One file's parse results, quarantine rows and (last) its manifest row, as table frames;
    ``report`` is updated with the counts as results stream by."""
    now = datetime.now(UTC).replace(tzinfo=None)
    for name, res in results:
        report.format = name
        primary = formats()[name].primary if name in formats() else None
        report.records += res.records
        report.rows_ok += res.tables[primary].height if primary in res.tables else 0
        report.rows_quarantined += res.quarantine.height
        q = res.quarantine.with_columns(
            source_file=pl.lit(str(path)),
            sha256=pl.lit(report.sha256),
            format=pl.lit(name),
            ingested_at=pl.lit(now),
        )
        yield {**res.tables, "quarantine": q}
    yield {
        "ingest_manifest": pl.DataFrame(
            {
                "path": [str(path)],
                "sha256": [report.sha256],
                "bytes": [report.bytes],
                "format": [report.format],
                "records_read": [report.records],
                "rows_ok": [report.rows_ok],
                "rows_quarantined": [report.rows_quarantined],
                "batch": [batch_id],
                "ingested_at": [now],
            }
        )
    }
