"""The I/O side of ingest: find files, decompress, dedupe by sha256, parse, commit.

Parsers stay pure; this module owns everything that touches disk. Every file ends in the
manifest with its counts, and every record it held is either a row of the format's primary
table, a quarantine row or a counted exact duplicate (checked here: a parser that breaks
conservation is a bug, and its file is quarantined whole rather than half-written).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import multiprocessing
import os
import signal
import stat
import time
import zlib
from collections import deque
from collections.abc import Callable
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from dataclasses import replace
from datetime import UTC
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import BinaryIO

import duckdb
import numpy as np
import polars as pl
import zstandard

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import newline_counts
from ingest.base import whole_file_quarantine
from ingest.registry import SNIFF_BYTES
from ingest.registry import detect
from ingest.registry import formats
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame
from warehouse.store import Warehouse

# Line-oriented files larger than this are parsed in chunks. Below 32 MiB (glibc's
# largest dynamic mmap threshold) freed chunk buffers are recycled by malloc; larger ones are
# fresh mappings that page-fault on every chunk (5x slower reading, benchmarks/bench_kernel.py).
CHUNK_BYTES = 24 << 20
_PROBE = 1 << 16  # bytes read at a time when looking for a chunk's last newline
BATCH_ROWS = 2_000_000  # small files are committed together up to this many rows


class Unreadable(Exception):
    """A file that cannot be read at all (corrupt or truncated compression at its start): it is
    quarantined and not marked done, so a later ingest tries it again."""


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
    rows_duplicate: int = (
        0  # exact repeats: already stored, repeated in the file, or dropped by the parser
    )
    skipped: bool = False  # already in the manifest
    error: str | None = None  # could not be read at all (reason): nothing recorded as done
    done: bool = True  # gets a manifest row (False: quarantined, to be tried again)
    held_back: int = 0  # bytes of an incomplete last line, not read yet (``_parsed_size``)
    stand_ins: frozenset[str] = (
        frozenset()
    )  # what the file supplied for its records (``base.STAND_INS``)


def iter_files(paths: list[str | Path], unreadable: dict[Path, str] | None = None) -> list[Path]:
    """Expand directories recursively (sorted, hidden files skipped); missing paths are errors.
    A directory that cannot be listed is put in the list itself, with the reason in
    ``unreadable`` (given: the ingest reports and quarantines it; else it is left out)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"no such file or directory: {p}")
        if p.is_dir():
            found, failed = [], []
            for root, dirs, names in os.walk(
                p, onerror=failed.append
            ):  # symlinked dirs are not followed
                dirs[:] = [d for d in dirs if not d.startswith(".")]  # never walk .git, .venv, ...
                found += [Path(root, n) for n in names if not n.startswith(".")]
            out.extend(f for f in sorted(found) if f.is_file())
            if unreadable is not None:
                for exc in failed:
                    unreadable[Path(exc.filename)] = (
                        f"cannot list directory: {exc.strerror or exc}: its files were not read"
                    )
                    out.append(Path(exc.filename))
        else:
            out.append(p)
    return out


def _compressed(magic: bytes) -> str | None:
    """ "gzip" or "zstd" by a stream's first 4 bytes; None: not compressed."""
    return "gzip" if magic[:2] == b"\x1f\x8b" else "zstd" if magic == b"\x28\xb5\x2f\xfd" else None


def open_source(raw: BinaryIO) -> BinaryIO:
    """Wrap an open binary stream, transparently decompressing gzip or zstd (by magic bytes,
    not name). The caller keeps ownership of ``raw``. A compressed stream that ends before its
    end marker (a truncated file) raises EOFError when its end is read."""
    magic = raw.read(4)
    raw.seek(0)
    if _compressed(magic) == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if _compressed(magic) == "zstd":
        return io.BufferedReader(_Zstd(raw), 1 << 20)
    return raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # peek() is how we sniff


class _Zstd(io.RawIOBase):
    """A zstd stream's frames, decompressed. ``zstandard``'s stream reader ends a truncated
    stream as if it were complete; this one feeds a decompressor 4 KiB of input at a time
    (at most ~175 MB of output per feed, even for a bomb of RLE blocks) and knows whether the
    last frame reached its end."""

    def __init__(self, raw: BinaryIO):
        self._raw, self._zd = raw, zstandard.ZstdDecompressor()
        self._obj, self._out, self._at = self._zd.decompressobj(), b"", 0
        self._fed = False  # whether the current frame has had input

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while self._at == len(self._out):
            piece = self._raw.read(4096)
            if not piece:
                if not self._obj.eof and self._fed:
                    raise EOFError("zstd stream ends before the end of its frame (truncated file)")
                return 0
            self._out, self._at = self._decompress(piece), 0
        n = min(len(buf), len(self._out) - self._at)
        buf[:n] = self._out[self._at : self._at + n]
        self._at += n
        return n

    def _decompress(self, piece: bytes) -> bytes:
        out = []
        while piece:
            if self._obj.eof:  # the next frame of a multi-frame file
                self._obj = self._zd.decompressobj()
            self._fed = True
            out.append(self._obj.decompress(piece))
            piece = self._obj.unused_data if self._obj.eof else b""
        return b"".join(out)


BOM = b"\xef\xbb\xbf"  # UTF-8 byte order mark, written by Windows tools: not part of the text


def _text_head(fh: BinaryIO) -> bytes:
    """The first SNIFF_BYTES of a stream's text, read past a byte order mark (which is not
    given to the parser either)."""
    if fh.peek(len(BOM))[: len(BOM)] == BOM:
        fh.read(len(BOM))
    return fh.peek(SNIFF_BYTES)[:SNIFF_BYTES]


def file_sha256(path: Path) -> tuple[str, int]:
    h, n = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
            n += len(block)
    return h.hexdigest(), n


def parsed_sha256(path: Path) -> tuple[str, int, int]:
    """(sha256, count) of the bytes an ingest of ``path`` would parse now (an incomplete last
    line held back, as ``_read_parsed`` does), and the file's size: what the manifest will
    record."""
    with open(path, "rb") as fh:
        total = os.fstat(fh.fileno()).st_size
        _, size, sha = _read_parsed(fh, total, display_name(path), None)
    return sha, size, total


def _read_parsed(
    fh: BinaryIO, total: int, name: str, forced: FormatSpec | None
) -> tuple[bytes | None, int, str]:
    """(bytes, count, sha256) of what an ingest parses of the open file ``fh`` of ``total``
    bytes: the count up to ``_parsed_size`` and their sha256. A small file (at most
    CHUNK_BYTES) is read once, hashed and returned; a larger one is hashed from the same open
    descriptor and left on disk (None), so what is hashed is what is parsed."""
    data = fh.read() if total <= CHUNK_BYTES else None
    size = _parsed_size(fh, data, total, name, forced)
    sha = (
        hashlib.sha256(memoryview(data)[:size]).hexdigest()
        if data is not None
        else _fd_sha256(fh.fileno(), size)
    )
    return data, size, sha


def parse_chunks(
    spec: FormatSpec,
    fh: BinaryIO,
    ctx: ParseContext,
    plain: bool,
    end: int | None = None,
    read: Callable[[int], None] | None = None,
) -> Iterator[ParseResult]:
    """Checked results of ``spec.parse`` over a line-oriented stream's chunks, in file order; for a
    two-stage format one result, ``spec.merge`` of the chunks' ``spec.extract`` partials. A plain
    file is read up to ``end`` (default: its size). ``read``: called with the bytes (of text)
    read so far, as each chunk is read."""
    long: list[tuple[int, _LongLine]] = []
    if spec.extract is None:
        yield from (_checked(spec, r) for r in _staged(spec.parse, fh, ctx, plain, end, long, read))
    else:
        if parts := list(
            _staged(spec.extract, fh, ctx, plain, end, long, read)
        ):  # none: only long lines
            yield _checked(spec, spec.merge(parts, ctx))
    if long:
        why = (
            f"line of {{:,}} bytes is longer than the limit of {MAX_LINE_BYTES >> 20} MiB: not read"
        )
        q = quarantine_frame(
            [n for n, _ in long],
            [x.head.decode("utf-8", "replace") for _, x in long],
            [why.format(x.size) for _, x in long],
        )
        yield ParseResult({}, q, len(long))


# A line of a line-oriented file longer than this is not given to the parser (a 200 MB line
# would take gigabytes to parse): it is quarantined, and skipped without being held in memory.
MAX_LINE_BYTES = 1 << 20


@dataclass
class _LongLine:
    head: bytes  # its first 500 bytes, for the quarantine row
    size: int


def _cut_long_lines(block: bytes) -> Iterator[tuple[bytes | _LongLine, int]]:
    """(piece, newlines in it) of a block, with each line longer than MAX_LINE_BYTES as a
    ``_LongLine``."""
    if (n := _newlines_if_short(block)) is not None:
        yield block, n
        return
    nl = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    starts = np.concatenate(([0], nl + 1))
    ends = np.concatenate((nl, [len(block)]))
    first = 0  # first line of the piece not yet yielded
    for i in np.flatnonzero(ends - starts > MAX_LINE_BYTES).tolist():
        if i > first:
            yield block[starts[first] : starts[i]], i - first
        yield (
            _LongLine(block[starts[i] : starts[i] + 500], int(ends[i] - starts[i])),
            int(i < len(nl)),
        )
        first = i + 1
    if starts[first] < len(block):
        yield block[starts[first] :], len(nl) - first


def _newlines_if_short(block: bytes) -> int | None:
    """The newlines in ``block`` when none of its lines is longer than MAX_LINE_BYTES, else
    None. Counted per half-limit slice: a longer line covers a whole slice, with no newline."""
    half = MAX_LINE_BYTES // 2
    counts = newline_counts(block, half)
    full = counts if len(block) % half == 0 else counts[:-1]
    return sum(counts) if len(block) <= MAX_LINE_BYTES or all(full) else None


def _staged(
    stage: Callable[[bytes, ParseContext], object],
    fh: BinaryIO,
    ctx: ParseContext,
    plain: bool,
    end: int | None,
    long: list[tuple[int, _LongLine]],
    read: Callable[[int], None] | None = None,
) -> Iterator:
    """``stage`` of each chunk (with its line offset), in file order. Chunks are parsed
    concurrently on all cores (parsers are pure; Polars and NumPy release the GIL); at most
    cores + 1 chunks are in flight. Lines too long to parse go to ``long`` (line number, line).
    ``read``: see ``parse_chunks``."""
    pool, pending, line, seen = _pool(), deque(), 0, 0
    for block, newlines in _chunks(fh, plain, end):
        seen += block.size if isinstance(block, _LongLine) else len(block)
        if read is not None:
            read(seen)
        if isinstance(block, _LongLine):
            long.append((line + 1, block))
            line += newlines
            continue
        pending.append(pool.submit(stage, block, replace(ctx, line_offset=line)))
        line += newlines
        if len(pending) > _WORKERS:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


_WORKERS = os.cpu_count() or 1


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(_WORKERS, thread_name_prefix="parse")


def _chunks(
    fh: BinaryIO, plain: bool, end: int | None = None
) -> Iterator[tuple[bytes | _LongLine, int]]:
    """(block, newlines in it): blocks of at most CHUNK_BYTES that end on a line boundary (a
    longer line stays whole), and each line longer than MAX_LINE_BYTES as a ``_LongLine``
    (one longer than a chunk is never read whole). A plain file is
    read with ``pread`` up to ``end`` (default: its size), one copy per block; a decompressing
    stream is read forward and re-joined at the cut."""
    fd = _regular_fd(fh) if plain else None
    for block in _stream_blocks(fh) if fd is None else _file_blocks(fd, fh.tell(), end):
        if isinstance(block, _LongLine):
            yield block, 1
        else:
            yield from _cut_long_lines(block)


def _regular_fd(fh: BinaryIO) -> int | None:
    try:
        fd = fh.fileno()
    except (AttributeError, OSError):  # in-memory streams; io.UnsupportedOperation is an OSError
        return None
    return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _file_blocks(fd: int, pos: int, size: int | None) -> Iterator[bytes | _LongLine]:
    size = os.fstat(fd).st_size if size is None else size
    while (end := _line_end(fd, pos, size)) > pos:
        if end - pos > max(CHUNK_BYTES, MAX_LINE_BYTES):  # one line, too long: not read
            yield _LongLine(os.pread(fd, 500, pos), end - pos - (os.pread(fd, 1, end - 1) == b"\n"))
            pos = end
        elif block := os.pread(fd, end - pos, pos):
            yield block
            pos += len(block)
        else:
            return


def _line_end(fd: int, pos: int, size: int) -> int:
    """Offset just past the last newline in [pos, pos + CHUNK_BYTES), found by probing backwards
    from the end; else just past the next newline; else ``size`` (the end of what is read)."""
    end = pos + CHUNK_BYTES
    if end >= size:
        return size
    if (cut := _last_line_end(fd, pos, end)) is not None:
        return cut
    while end < size and (probe := os.pread(fd, min(_PROBE, size - end), end)):
        if (i := probe.find(b"\n")) >= 0:
            return end + i + 1
        end += len(probe)
    return min(end, size)


def _last_line_end(fd: int, pos: int, end: int) -> int | None:
    """Offset just past the last newline in [pos, end) of a file, read backwards from ``end``
    ``_PROBE`` bytes at a time; None when there is none."""
    hi = end
    while hi > pos:
        lo = max(pos, hi - _PROBE)
        if (i := os.pread(fd, hi - lo, lo).rfind(b"\n")) >= 0:
            return lo + i + 1
        hi = lo
    return None


def _stream_blocks(fh: BinaryIO) -> Iterator[bytes | _LongLine]:
    rest, skipping = b"", None  # skipping: the line longer than a chunk being read past
    while block := fh.read(CHUNK_BYTES):
        if skipping is not None:
            cut = block.find(b"\n")
            skipping.size += len(block) if cut < 0 else cut
            if cut < 0:
                continue
            yield skipping
            skipping, block = None, block[cut + 1 :]
        block = rest + block
        cut = block.rfind(b"\n")
        if cut < 0:
            if len(block) > max(CHUNK_BYTES, MAX_LINE_BYTES):
                skipping, rest = _LongLine(block[:500], len(block)), b""
            else:
                rest = block
            continue
        yield block[: cut + 1]
        rest = block[cut + 1 :]
    if skipping is not None:
        yield skipping
    if rest:
        yield rest


def _checked(spec: FormatSpec, result: ParseResult) -> ParseResult:
    ok = result.tables.get(spec.primary)
    n_ok = 0 if ok is None else ok.height
    if n_ok + result.quarantine.height + result.duplicates != result.records:
        raise RuntimeError(
            f"conservation violated: {result.records} records read, {n_ok} rows + "
            f"{result.quarantine.height} quarantined + {result.duplicates} duplicates"
        )
    return result


def _quarantined(data: bytes, error: str) -> ParseResult:
    return ParseResult(tables={}, quarantine=whole_file_quarantine(data, error), records=1)


def _parse_file(
    raw: BinaryIO,
    name: str,
    spec: FormatSpec | None,
    ctx: ParseContext,
    end: int | None = None,
    read: Callable[[int], None] | None = None,
) -> Iterator[tuple[str, ParseResult]]:
    """Yield (format name, result) per chunk of the (possibly compressed) stream ``raw``; a file
    nobody recognises, an empty file or a parser failure becomes a single quarantine record.
    ``end``: an uncompressed line-oriented file is read up to there (what was hashed). ``read``:
    see ``parse_chunks``."""
    with open_source(raw) as fh:
        try:
            head = _text_head(fh)
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            raise Unreadable(f"cannot decompress: {exc}") from None
        if not head.strip():
            yield (spec.name if spec else "unknown"), _quarantined(head, "empty file")
            return
        if spec is None:
            spec = detect(head, name)
        if spec is None:
            yield (
                "unknown",
                _quarantined(head, "format not recognised from content or name; pass --format"),
            )
            return
        try:
            if spec.line_oriented:
                for res in parse_chunks(spec, fh, ctx, plain=fh is raw, end=end, read=read):
                    yield spec.name, res
            else:
                yield spec.name, _checked(spec, spec.parse(_whole_text(fh), ctx))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            # truncated or corrupt compression: not marked done, so a complete copy is read later
            raise Unreadable(f"cannot read or decompress: {exc}") from None


# A format that is not line-oriented (JSON, YAML, ...) is parsed whole: its text, decompressed,
# may be at most this long. A longer one (or a small .gz that inflates to gigabytes) is
# quarantined unread, never held in memory.
MAX_WHOLE_BYTES = 256 << 20


def _whole_text(fh: BinaryIO) -> bytes:
    data = fh.read(MAX_WHOLE_BYTES + 1)
    if len(data) > MAX_WHOLE_BYTES:
        raise Unreadable(
            f"longer than {MAX_WHOLE_BYTES >> 20} MiB decompressed, the limit for a file read "
            "whole: not read"
        )
    return data


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


def unsettled(files: list[Path], settle_s: float) -> dict[Path, str]:
    """The files not yet stable, with the reason: stable means size and modification time
    unchanged for ``settle_s`` seconds. A file last modified longer ago than that is stable at
    once; the others are watched (polled, together) until they are that old, for at most
    ``settle_s``, and any change meanwhile marks the file as still being written."""
    if settle_s <= 0:
        return {}

    def snap(p: Path) -> tuple[int, int] | None:
        try:
            st = p.stat()
        except OSError:
            return None  # reported when it is read
        return st.st_size, st.st_mtime_ns

    start = time.time()
    first = {p: snap(p) for p in files}
    watch = {p for p, s in first.items() if s and start - s[1] / 1e9 < settle_s}
    changed: dict[Path, str] = {}
    while watch:
        time.sleep(min(0.1, settle_s))
        now = time.time()
        for p in list(watch):
            if (s := snap(p)) != first[p]:
                changed[p] = (
                    "still being written (its size or modification time changed within the "
                    f"{settle_s:g} s settle time): not read yet"
                )
                watch.discard(p)
            elif now - s[1] / 1e9 >= settle_s or now - start >= settle_s:
                watch.discard(p)
    return changed


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


def default_jobs(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """Parsing processes when none are asked for: one per core this process may run on, and
    no more than its cgroup's CPU quota (a Kubernetes pod's CPU limit: on a 64-core node a
    2-CPU pod sees 64 cores, and 64 parsers would exceed its memory limit)."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    quota = _cgroup_cpus(cgroup)
    return max(1, min(cores, quota)) if quota else cores


def _cgroup_cpus(cgroup: Path) -> int | None:
    """CPUs the cgroup's quota allows (rounded up), from cgroup v2 ``cpu.max`` or v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; None when there is no quota."""
    try:
        if (cgroup / "cpu.max").exists():
            quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        else:
            v1 = cgroup / "cpu"
            quota, period = (
                (v1 / f).read_text().strip() for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            )
        if quota in ("max", "-1"):
            return None
        return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        return None


# Small files are parsed in a process pool, several per task (a task's pickling and round trip
# cost about as much as parsing one small file), while this process commits them in file order.
TASK_FILES = 64
TASK_BYTES = 4 << 20
POOL_MIN_FILES = 256  # fewer small files than this (and fewer bytes than POOL_MIN_BYTES) are
POOL_MIN_BYTES = 64 << 20  # parsed here: starting the workers would cost more than it saves


@dataclass
class _Item:
    """One file on its way through ``_ingest``: read and hashed here, parsed (maybe in a worker
    process), committed here in file order."""

    path: Path
    report: FileReport
    data: bytes | None = None  # a small file's bytes, to parse
    ctx: ParseContext | None = None
    stream: BinaryIO | None = None  # a large file, open: parsed in chunks into its own batch
    results: list[tuple[str, ParseResult]] | None = None


def _prepared(files: list[Path], known: set[str], ctx: ParseContext, forced: FormatSpec | None,
              not_read: dict[Path, str]) -> Iterator[_Item]:  # fmt: skip
    """Each file opened once, read (small ones) and hashed, in order; a file already in the
    warehouse, or met earlier in this run, is marked skipped and not read again. What is
    hashed is what is parsed: the bytes read from one open descriptor, up to ``_parsed_size``
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
                yield _Item(
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
            data, size, sha = _read_parsed(fh, st.st_size, name, forced)
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
            yield _Item(path, report)
            continue
        known.add(sha)
        report.bytes = size
        fctx = replace(
            ctx, path=name, mtime=datetime.fromtimestamp(st.st_mtime, UTC).replace(tzinfo=None)
        )
        yield _Item(
            path,
            report,
            data=None if data is None else data[:size],
            ctx=fctx,
            stream=fh if data is None else None,
        )


def _not_read(path: Path, error: str) -> _Item:
    """A file that could not be read: quarantined without a sha256 and not marked done, so the
    next ingest tries it again (and then clears this row)."""
    report = FileReport(display_name(path), "unknown", "", error=error, done=False)
    return _Item(path, report, results=[("unknown", _quarantined(b"", error))])


def _parsed_size(
    fh: BinaryIO, data: bytes | None, size: int, name: str, forced: FormatSpec | None
) -> int:
    """How much of a file to parse: all of it, except that the last line of an uncompressed
    file in a line-oriented format, when it has no newline yet (a log or scrape being written,
    or copied), is held back; the manifest records the bytes parsed, and the file, when it
    has grown, is read again (what was stored already is counted as duplicates)."""
    fd = fh.fileno()

    def read(n: int, at: int) -> bytes:
        return data[at : at + n] if data is not None else os.pread(fd, n, at)

    if size == 0 or read(1, size - 1) == b"\n" or _compressed(read(4, 0)):
        return size
    head = read(SNIFF_BYTES + len(BOM), 0)
    spec = forced or detect(head.removeprefix(BOM)[:SNIFF_BYTES], name)
    if spec is None or not spec.line_oriented:
        return size
    if data is not None:
        return data.rfind(b"\n") + 1
    return _last_line_end(fd, 0, size) or 0


def _fd_sha256(fd: int, size: int) -> str:
    h, pos = hashlib.sha256(), 0
    while pos < size and (block := os.pread(fd, min(1 << 22, size - pos), pos)):
        h.update(block)
        pos += len(block)
    return h.hexdigest()


def parse_bytes(
    data: bytes, name: str, fmt: str | None, ctx: ParseContext
) -> tuple[list[tuple[str, ParseResult]], bool]:
    """A small file's (format, result) list and whether it is done (False: it could not be read
    or its parser failed; quarantined whole and tried again by a later ingest). Never raises for
    the file's content: this is what worker processes run."""
    spec = formats()[fmt] if fmt else None
    try:
        return list(_parse_file(io.BytesIO(data), name, spec, ctx)), True
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the file: quarantine it whole
        _reraise_interrupt(exc)
        return [_failure(spec, exc)], False


def _failure(spec: FormatSpec | None, exc: Exception) -> tuple[str, ParseResult]:
    """(format name, result) of a file that could not be read (``Unreadable``) or that its
    parser failed on: the whole file quarantined, with the reason."""
    if isinstance(exc, Unreadable):
        return ("unknown", _quarantined(b"", str(exc)))
    return (spec.name if spec else "unknown", _quarantined(b"", f"parser error: {exc!r}"))


def _reraise_interrupt(exc: Exception) -> None:
    """Ctrl-C that DuckDB turned into its ``InterruptException`` (an ``Exception``) while a query
    ran: a KeyboardInterrupt again, never a "parser failure" quarantine row of the file."""
    if isinstance(exc, duckdb.InterruptException):
        raise KeyboardInterrupt from exc


def _parse_task(
    files: list[tuple[bytes, str, ParseContext]], fmt: str | None
) -> list[tuple[list, bool]]:
    """``parse_bytes`` of each small file, in order, except that the files of a format with
    ``parse_many`` are parsed together: one call per format for the whole task, so the fixed
    cost of a parse is paid once per task, not once per file. A file that cannot be read whole,
    is empty or is not recognised, and every file of a ``parse_many`` call that fails (a
    parser bug), goes through ``parse_bytes`` alone, as before."""
    out: list[tuple[list, bool] | None] = [None] * len(files)
    together: dict[str, list[tuple[int, bytes]]] = {}
    forced = formats()[fmt] if fmt else None
    for i, (data, name, _) in enumerate(files):
        spec, text = _whole(data, name, forced)
        if spec is None:
            out[i] = parse_bytes(data, name, fmt, files[i][2])
        else:
            together.setdefault(spec.name, []).append((i, text))
    for name, group in together.items():
        spec = formats()[name]
        try:
            results = [
                _checked(spec, r)
                for r in spec.parse_many([(text, files[i][2]) for i, text in group])
            ]
        except Exception:  # noqa: BLE001 - parsed one by one, a parser bug quarantines only its file
            results = [None] * len(group)
        for (i, _), res in zip(group, results, strict=True):
            out[i] = (
                ([(name, res)], True)
                if res is not None
                else parse_bytes(files[i][0], files[i][1], fmt, files[i][2])
            )
    return out  # type: ignore[return-value]


def _whole(data: bytes, name: str, spec: FormatSpec | None) -> tuple[FormatSpec | None, bytes]:
    """(format, decompressed text) of a small file that its format's ``parse_many`` can take
    whole (sniffed as ``_parse_file`` does, at most CHUNK_BYTES once decompressed); (None, b"")
    for any other file."""
    try:
        with open_source(io.BytesIO(data)) as fh:
            head = _text_head(fh)
            if not head.strip():
                return None, b""
            spec = spec or detect(head, name)
            if spec is None or spec.parse_many is None:
                return None, b""
            text = fh.read(CHUNK_BYTES + 1)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError):
        return None, b""
    # a longer text, or one with a line too long to parse, is parsed in chunks (``parse_bytes``)
    return (
        (spec, text)
        if len(text) <= CHUNK_BYTES and _newlines_if_short(text) is not None
        else (None, b"")
    )


def _parsed(items: Iterator[_Item], fmt: str | None, jobs: int, pooled: bool) -> Iterator[_Item]:
    """``items`` in the same order, each small file's with its parse ``results``. Consecutive
    small files are parsed in tasks of up to TASK_FILES files / TASK_BYTES bytes (``_parse_task``);
    with ``pooled``, by ``jobs`` worker processes, at most 2 x jobs tasks ahead of the caller,
    else here, one task at a time. The tasks, and so the tables, are the same either way."""
    ahead: deque[tuple[list[_Item], Future | None]] = deque()
    group: list[_Item] = []
    size = 0
    # spawned: a fork of this process, whose Polars thread pool may be running, can deadlock;
    # and spawned workers are this process's children, so its rusage counts their CPU
    # workers ignore Ctrl-C (a terminal sends it to the whole process group): this process
    # stops them, and says so in one line
    pool = (
        ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=signal.signal,
            initargs=(signal.SIGINT, signal.SIG_IGN),
        )
        if pooled
        else None
    )
    limit = 2 * jobs if pooled else 0
    try:

        def submit() -> None:
            nonlocal group, size
            if group:
                task = [(it.data, it.path.name, it.ctx) for it in group]
                if pool is None:
                    future: Future = Future()
                    future.set_result(_parse_task(task, fmt))
                else:
                    future = pool.submit(_parse_task, task, fmt)
                ahead.append((group, future))
                group, size = [], 0

        for it in items:
            if it.data is not None:
                group.append(it)
                size += len(it.data)
                if len(group) >= TASK_FILES or size >= TASK_BYTES:
                    submit()
            else:
                submit()
                ahead.append(([it], None))
            while len(ahead) > limit:
                yield from _resolved(*ahead.popleft())
        submit()
        while ahead:
            yield from _resolved(*ahead.popleft())
    finally:  # also when the caller stops early (an error committing): queued tasks are dropped
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _resolved(group: list[_Item], future: Future | None) -> Iterator[_Item]:
    for it, (results, done) in zip(
        group, future.result() if future else [(None, True)] * len(group)
    ):
        if future is not None:
            it.results, it.report.done, it.data = results, done, None
        yield it


def _ingest(
    wh, files, fmt, ctx, progress, replace_existing, jobs, not_read, reading=None
) -> list[FileReport]:
    retried = [] if replace_existing else _rejected_in_another_format(wh, files, fmt)
    if not replace_existing and not retried:
        return _ingest_into(wh, None, files, fmt, ctx, progress, jobs, set(), not_read, reading)
    # --replace: forget and the new rows in one batch, one commit: readers never see the gap,
    # and a failure or kill before the commit leaves the old rows
    targets = retried or [display_name(p) for p in files] + [s for s in map(_sha_of, files) if s]
    with wh.batch(f"replace-{_batch_id(targets)}") as batch:
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
    stale = _Stale(wh, known, shared)
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
            wh.batch(_batch_id([r.sha256 or r.path for r, _ in pending]))
            if shared is None
            else nullcontext(shared)
        )
        with own as batch:
            _stage(batch, pending)
            batch.add(_manifest(batch.id, [r for r, _ in pending]))
        stale.done([r for r, _ in pending])
        pending, pending_rows = [], 0

    pooled = jobs > 1 and _worth_a_pool(files)
    for i, it in enumerate(
        _parsed(_prepared(files, known, ctx, forced, not_read), fmt, jobs, pooled)
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
            pending.append((report, it.results))
            pending_rows += sum(sum(df.height for df in r.tables.values()) for _, r in it.results)
            if pending_rows >= BATCH_ROWS:
                flush()
    flush()
    return reports


def _worth_a_pool(files: list[Path]) -> bool:
    """Whether the small files are enough work to start worker processes for."""
    n = size = 0
    for p in files:
        try:
            st = p.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size <= CHUNK_BYTES:
            n, size = n + 1, size + st.st_size
        if n >= POOL_MIN_FILES or size >= POOL_MIN_BYTES:
            return True
    return False


def _ingest_large(
    wh: Warehouse,
    it: _Item,
    forced: FormatSpec | None,
    stale: _Stale,
    shared=None,
    reading: Callable[[Path, int, int | None], None] | None = None,
) -> None:
    """A file larger than CHUNK_BYTES, streamed in chunks into a staged batch of its own, or
    into ``shared`` (its chunks are parsed on every core by threads). In a shared batch a
    parser failure fails the whole batch (``--replace``: the old rows stay)."""
    report, sha = it.report, it.report.sha256
    stale.clear([report])
    own = wh.batch(_batch_id([sha])) if shared is None else nullcontext(shared)
    try:
        with own as batch, it.stream as raw:
            dropped: dict[str, dict] = {}
            size = (
                None if _compressed(os.pread(raw.fileno(), 4, 0)) else report.bytes
            )  # else: unknown text size
            read = None if reading is None else (lambda n: reading(it.path, n, size))
            for frames in _frames(
                report, _parse_file(raw, it.path.name, forced, it.ctx, report.bytes, read)
            ):
                for table, by_sha in batch.add(frames).items():
                    for k, n in by_sha.items():
                        dropped.setdefault(table, {})[k] = dropped.get(table, {}).get(k, 0) + n
            _count_duplicates([report], dropped)
            _quarantine_conflicts(batch, [report])
            batch.add(_manifest(batch.id, [report]))
        stale.done([report])
    except Exception as exc:  # a parser bug must not lose the file: quarantine it whole
        _reraise_interrupt(exc)
        if shared is not None:
            raise
        report.records = report.rows_ok = report.rows_quarantined = report.rows_duplicate = 0
        with wh.batch(_batch_id([sha])) as batch:
            for frames in _frames(report, [_parser_failure(report, forced, exc)]):
                batch.add(frames)


class _Stale:
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


def _batch_id(files: list[str]) -> str:
    """Part files are named by batch, and a batch by its set of files (sha256): the same
    content gives the same names, and a file ingested again after `forget` never overwrites
    the parts of a batch it shared with other files (that set is not ingested twice)."""
    return hashlib.sha256("\n".join(sorted(files)).encode()).hexdigest()[:16]


def display_name(path: Path) -> str:
    """A path as stored and printed: bytes that are not UTF-8 (a file name from another
    locale) are kept visible as backslash escapes instead of breaking the writers."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _sha_of(path: Path) -> str | None:
    try:
        return file_sha256(path)[0] if path.is_file() else None
    except OSError:
        return None


def _parser_failure(
    report: FileReport, spec: FormatSpec | None, exc: Exception
) -> tuple[str, ParseResult]:
    """A file the parser failed on as a whole: quarantined, and not marked done, so that a
    fixed parser (or a later run) reads it again."""
    report.done = False
    return _failure(spec, exc)


def _count_duplicates(reports: list[FileReport], dropped: dict[str, dict[str | None, int]]) -> None:
    """Move records the warehouse already held from ``rows_ok`` to ``rows_duplicate``."""
    for r in reports:
        primary = formats()[r.format].primary if r.format in formats() else None
        n = dropped.get(primary, {}).get(r.path, 0) if primary else 0
        r.rows_ok -= n
        r.rows_duplicate += n


def _stage(batch, parsed: list[tuple[FileReport, list[tuple[str, ParseResult]]]]) -> None:
    """Stage parsed inputs' rows and quarantine rows in ``batch``, one Parquet part per table
    (not per input: small files stay cheap to scan), and update their reports: records the
    warehouse already held become duplicates, value conflicts quarantine rows."""
    merged: dict[str, list[pl.DataFrame]] = {}
    for report, results in parsed:
        for frames in _frames(report, results):
            for name, df in frames.items():
                if df.height:
                    merged.setdefault(name, []).append(conform(name, df))
    reports = [r for r, _ in parsed]
    _count_duplicates(reports, batch.add({name: pl.concat(dfs) for name, dfs in merged.items()}))
    _quarantine_conflicts(batch, reports)


def _quarantine_conflicts(batch, reports: list[FileReport]) -> None:
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


def _frames(report: FileReport, results) -> Iterator[dict[str, pl.DataFrame]]:
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


def _manifest(batch_id: str, reports: list[FileReport]) -> dict[str, pl.DataFrame]:
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
                "batch": [batch_id] * len(done),
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
    """Each of ``docs`` parsed with its format, with its report: the same parsers as files. A
    document that fails to parse is quarantined whole and its report is not ``done``. Touches
    no warehouse, so it can run while another batch commits."""
    parsed = []
    for d in docs:
        if d.fmt is not None and d.fmt not in formats():
            raise UserError(f"{d.name}: unknown format {d.fmt!r}")
        report = FileReport(
            d.name, d.fmt or "", hashlib.sha256(d.data).hexdigest(), bytes=len(d.data)
        )
        res, report.done = parse_bytes(d.data, d.name, d.fmt, replace(d.ctx, path=d.name))
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
        _stage(batch, parsed)
        batch.add(extra(reports))
    return reports
