"""The I/O side of ingest: find files, decompress, dedupe by sha256, parse, commit.

Parsers stay pure; this module owns everything that touches disk. Every file ends in the
manifest with its counts, and every record it held is either a row of the format's primary
table, a quarantine row or a counted exact duplicate (checked here: a parser that breaks conservation is a bug, and its
file is quarantined whole rather than half-written).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import math
import multiprocessing
import os
import stat
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import nullcontext
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
    rows_duplicate: int = 0  # exact repeats: already stored, repeated in the file, or dropped by the parser
    skipped: bool = False  # already in the manifest
    error: str | None = None  # could not be read at all (reason): nothing recorded as done
    done: bool = True  # gets a manifest row (False: quarantined, to be tried again)


def iter_files(paths: list[str | Path]) -> list[Path]:
    """Expand directories recursively (sorted, hidden files skipped); missing paths are errors."""
    out: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"no such file or directory: {p}")
        if p.is_dir():
            found = []
            for root, dirs, names in os.walk(p):  # symlinked directories are not followed
                dirs[:] = [d for d in dirs if not d.startswith(".")]  # never walk .git, .venv, ...
                found += [Path(root, n) for n in names if not n.startswith(".")]
            out.extend(f for f in sorted(found) if f.is_file())
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
    """Checked results of ``spec.parse`` over a line-oriented stream's chunks, in file order; for a
    two-stage format one result, ``spec.merge`` of the chunks' ``spec.extract`` partials."""
    if spec.extract is None:
        yield from (_checked(spec, r) for r in _staged(spec.parse, fh, ctx, plain))
    else:
        yield _checked(spec, spec.merge(list(_staged(spec.extract, fh, ctx, plain)), ctx))


def _staged(stage: Callable[[bytes, ParseContext], object], fh: BinaryIO, ctx: ParseContext, plain: bool) -> Iterator:
    """``stage`` of each chunk (with its line offset), in file order. Chunks are parsed
    concurrently on all cores (parsers are pure; Polars and NumPy release the GIL); at most
    cores + 1 chunks are in flight."""
    pool, pending, line = _pool(), deque(), 0
    for block, newlines in _chunks(fh, plain):
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
    if n_ok + result.quarantine.height + result.duplicates != result.records:
        raise RuntimeError(
            f"conservation violated: {result.records} records read, {n_ok} rows + "
            f"{result.quarantine.height} quarantined + {result.duplicates} duplicates"
        )
    return result


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
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            raise Unreadable(f"cannot decompress: {exc}") from None
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
                for res in parse_chunks(spec, fh, ctx, plain=fh is raw):
                    yield spec.name, res
            else:
                yield spec.name, _checked(spec, spec.parse(fh.read(), ctx))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            yield spec.name, _quarantined(b"", f"cannot read or decompress: {exc}")


def ingest_paths(
    wh: Warehouse,
    paths: list[str | Path],
    fmt: str = "auto",
    ctx: ParseContext | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
    replace_existing: bool = False,
    jobs: int | None = None,
) -> list[FileReport]:
    """Ingest files and directories into the warehouse; returns one report per file.

    Holds the warehouse's writer lock throughout, so two ingests never interleave.
    ``replace_existing``: first forget what these paths (and these exact files) produced
    earlier, then ingest them again (``goodput ingest --replace``). ``jobs``: processes that
    parse files (default: every core); the tables written are the same for any number. Workers
    are spawned, so a script calling this with jobs > 1 needs the usual
    ``if __name__ == "__main__":`` guard (the CLI, Dagster and notebooks need nothing)."""
    ctx = ctx or ParseContext()
    files = checked_files(paths, fmt, jobs)
    jobs = default_jobs() if jobs is None else jobs
    with wh.writer():
        return _ingest(wh, files, None if fmt == "auto" else fmt, ctx, progress, replace_existing, jobs)


def checked_files(paths: list[str | Path], fmt: str = "auto", jobs: int | None = None) -> list[Path]:
    """The files ``ingest_paths`` reads, after the checks it makes before touching the
    warehouse (an unknown format, a bad job count, a missing path: one-line UserError), as
    absolute paths: a file is known by its content and where it is, so the same relative path
    read from two directories (two clusters' dumps) is two files."""
    if fmt != "auto" and fmt not in formats():
        raise UserError(f"unknown format {fmt!r}; choose auto or one of: {', '.join(sorted(formats()))}")
    if jobs is not None and jobs < 1:
        raise UserError(f"jobs (--jobs) must be at least 1, not {jobs}")
    return [Path(os.path.abspath(p)) for p in iter_files(paths)]


def default_jobs(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """Parsing processes when none are asked for: one per core this process may run on, and
    no more than its cgroup's CPU quota (a Kubernetes pod's CPU limit: on a 64-core node a
    2-CPU pod sees 64 cores, and 64 parsers would exceed its memory limit)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
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
            quota, period = ((v1 / f).read_text().strip() for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
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
    stream: bool = False  # a large file: parsed in chunks, straight into its own batch
    results: list[tuple[str, ParseResult]] | None = None


def _prepared(files: list[Path], known: set[str], ctx: ParseContext) -> Iterator[_Item]:
    """Each file stat-ed, read (small ones) and hashed, in order; a file already in the
    warehouse, or met earlier in this run, is marked skipped and not read again."""
    for path in files:
        name = display_name(path)
        try:
            st = path.stat()
        except OSError as exc:
            yield _Item(path, FileReport(name, "", "", error=f"cannot read: {exc.strerror or exc}"))
            continue
        if not stat.S_ISREG(st.st_mode):
            yield _Item(path, FileReport(name, "", "", error="not a regular file (FIFO, socket or device): skipped"))
            continue
        # small files (nearly all) are read once: hashed, then parsed from memory
        try:
            data = path.read_bytes() if st.st_size <= CHUNK_BYTES else None
            sha = hashlib.sha256(data).hexdigest() if data is not None else file_sha256(path)[0]
        except OSError as exc:
            # quarantined without a sha256 and not marked done: the next ingest tries it again
            report = FileReport(name, "unknown", "", error=f"cannot read: {exc.strerror or exc}", done=False)
            yield _Item(path, report, results=[("unknown", _quarantined(b"", report.error))])
            continue
        report = FileReport(name, "", sha)
        if sha in known:
            report.skipped = True
            yield _Item(path, report)
            continue
        known.add(sha)
        report.bytes = st.st_size
        fctx = replace(ctx, path=name, mtime=datetime.fromtimestamp(st.st_mtime, UTC).replace(tzinfo=None))
        yield _Item(path, report, data=data, ctx=fctx, stream=data is None)


def parse_bytes(data: bytes, name: str, fmt: str | None, ctx: ParseContext) -> tuple[list[tuple[str, ParseResult]], bool]:
    """A small file's (format, result) list and whether it is done (False: it could not be read
    or its parser failed; quarantined whole and tried again by a later ingest). Never raises for
    the file's content: this is what worker processes run."""
    spec = formats()[fmt] if fmt else None
    try:
        return list(_parse_file(io.BytesIO(data), name, spec, ctx)), True
    except Unreadable as exc:
        return [("unknown", _quarantined(b"", str(exc)))], False
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the file: quarantine it whole
        return [(spec.name if spec else "unknown", _quarantined(b"", f"parser error: {exc!r}"))], False


def _parse_task(files: list[tuple[bytes, str, ParseContext]], fmt: str | None) -> list[tuple[list, bool]]:
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
            results = [_checked(spec, r) for r in spec.parse_many([(text, files[i][2]) for i, text in group])]
        except Exception:  # noqa: BLE001 - parsed one by one, a parser bug quarantines only its file
            results = [None] * len(group)
        for (i, _), res in zip(group, results, strict=True):
            out[i] = ([(name, res)], True) if res is not None else parse_bytes(files[i][0], files[i][1], fmt, files[i][2])
    return out  # type: ignore[return-value]


def _whole(data: bytes, name: str, spec: FormatSpec | None) -> tuple[FormatSpec | None, bytes]:
    """(format, decompressed text) of a small file that its format's ``parse_many`` can take
    whole (sniffed as ``_parse_file`` does, at most CHUNK_BYTES once decompressed); (None, b"")
    for any other file."""
    try:
        with open_source(io.BytesIO(data)) as fh:
            head = fh.peek(SNIFF_BYTES)[:SNIFF_BYTES] if hasattr(fh, "peek") else b""
            if not head.strip():
                return None, b""
            spec = spec or detect(head, name)
            if spec is None or spec.parse_many is None:
                return None, b""
            text = fh.read(CHUNK_BYTES + 1)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError):
        return None, b""
    return (spec, text) if len(text) <= CHUNK_BYTES else (None, b"")


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
    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) if pooled else None
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
            if it.data is not None and not it.stream:
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
    for it, (results, done) in zip(group, future.result() if future else [(None, True)] * len(group)):
        if future is not None:
            it.results, it.report.done, it.data = results, done, None
        yield it


def _ingest(wh, files, fmt, ctx, progress, replace_existing, jobs) -> list[FileReport]:
    if not replace_existing:
        return _ingest_into(wh, None, files, fmt, ctx, progress, jobs, set())
    # --replace: forget and the new rows in one batch, one commit: readers never see the gap,
    # and a failure or kill before the commit leaves the old rows
    targets = [display_name(p) for p in files] + [s for s in map(_sha_of, files) if s]
    with wh.batch(f"replace-{_batch_id(targets)}") as batch:
        forgotten = wh.forget_into(batch, targets)[1]
        return _ingest_into(wh, batch, files, fmt, ctx, progress, jobs, forgotten)


def _ingest_into(wh, shared, files, fmt, ctx, progress, jobs, forgotten: set[str]) -> list[FileReport]:
    """Ingest ``files`` in batches of their own, or all into the batch ``shared`` (whose commit
    is the caller's); ``forgotten``: manifest shas that batch removes."""
    known = wh.known_sha256() - forgotten
    # files a previous ingest could not finish (unreadable, parser failure) left quarantine
    # rows but no manifest row: they are replaced when the file is tried again
    failed = set(wh.read("quarantine", "sha256 IS NOT NULL")["sha256"].unique().to_list()) - known
    forced = formats()[fmt] if fmt else None
    reports: list[FileReport] = []
    pending: list[tuple[FileReport, list[tuple[str, ParseResult]]]] = []
    pending_rows = 0

    def flush():
        nonlocal pending, pending_rows
        if not pending:
            return
        retried = {r.sha256 for r, _ in pending if r.sha256 in failed}
        if retried and shared is not None:
            wh.delete_into(shared, {"quarantine": ("sha256", retried)})
        elif retried:
            wh.delete_rows({"quarantine": ("sha256", retried)})
        own = wh.batch(_batch_id([r.sha256 or r.path for r, _ in pending])) if shared is None else nullcontext(shared)
        with own as batch:
            # one Parquet part per table per batch, not per file: small files stay cheap to scan
            merged: dict[str, list[pl.DataFrame]] = {}
            for report, results in pending:
                for frames in _frames(report, results):
                    for name, df in frames.items():
                        if df.height:
                            merged.setdefault(name, []).append(conform(name, df))
            dropped = batch.add({name: pl.concat(dfs) for name, dfs in merged.items()})
            _count_duplicates([r for r, _ in pending], dropped)
            _quarantine_conflicts(batch, [r for r, _ in pending])
            batch.add(_manifest(batch.id, [r for r, _ in pending]))
        pending, pending_rows = [], 0

    pooled = jobs > 1 and _worth_a_pool(files)
    for i, it in enumerate(_parsed(_prepared(files, known, ctx), fmt, jobs, pooled)):
        if progress:
            progress(i, len(files), it.path)
        report = it.report
        reports.append(report)
        if it.stream:  # a large file: its chunks go straight to its own staged batch
            flush()
            _ingest_large(wh, it, forced, failed, shared)
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


def _ingest_large(wh: Warehouse, it: _Item, forced: FormatSpec | None, failed: set[str], shared=None) -> None:
    """A file larger than CHUNK_BYTES, streamed in chunks into a staged batch of its own, or
    into ``shared`` (its chunks are parsed on every core by threads). In a shared batch a
    parser failure fails the whole batch (``--replace``: the old rows stay)."""
    report, sha = it.report, it.report.sha256
    if sha in failed:
        if shared is not None:
            wh.delete_into(shared, {"quarantine": ("sha256", {sha})})
        else:
            wh.delete_rows({"quarantine": ("sha256", {sha})})
    own = wh.batch(_batch_id([sha])) if shared is None else nullcontext(shared)
    try:
        with own as batch, open(it.path, "rb") as raw:
            dropped: dict[str, dict] = {}
            for frames in _frames(report, _parse_file(raw, it.path.name, forced, it.ctx)):
                for table, by_sha in batch.add(frames).items():
                    for k, n in by_sha.items():
                        dropped.setdefault(table, {})[k] = dropped.get(table, {}).get(k, 0) + n
            _count_duplicates([report], dropped)
            _quarantine_conflicts(batch, [report])
            batch.add(_manifest(batch.id, [report]))
    except Exception as exc:
        if shared is not None:
            raise
        report.records = report.rows_ok = report.rows_quarantined = report.rows_duplicate = 0
        with wh.batch(_batch_id([sha])) as batch:
            for frames in _frames(report, [_parser_failure(report, forced, exc)]):
                batch.add(frames)


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


def _parser_failure(report: FileReport, spec: FormatSpec | None, exc: Exception) -> tuple[str, ParseResult]:
    """A file the parser failed on as a whole: quarantined, and not marked done, so that a
    fixed parser (or a later run) reads it again."""
    report.done = False
    if isinstance(exc, Unreadable):
        return ("unknown", _quarantined(b"", str(exc)))
    return (spec.name if spec else "unknown", _quarantined(b"", f"parser error: {exc!r}"))


def _count_duplicates(reports: list[FileReport], dropped: dict[str, dict[str | None, int]]) -> None:
    """Move records the warehouse already held from ``rows_ok`` to ``rows_duplicate``."""
    for r in reports:
        primary = formats()[r.format].primary if r.format in formats() else None
        n = dropped.get(primary, {}).get(r.path, 0) if primary else 0
        r.rows_ok -= n
        r.rows_duplicate += n


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
    batch.add({"quarantine": rows.with_columns(
        sha256=pl.col("source_file").replace_strict({p: r.sha256 for p, r in by_path.items()}, return_dtype=pl.Utf8),
        format=pl.col("source_file").replace_strict({p: r.format for p, r in by_path.items()}, return_dtype=pl.Utf8),
        ingested_at=pl.lit(datetime.now(UTC).replace(tzinfo=None)),
    )})


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
                "batch": [batch_id] * len(done),
                "ingested_at": [datetime.now(UTC).replace(tzinfo=None)] * len(done),
            },
            schema_overrides={"bytes": pl.Int64, "records_read": pl.Int64, "rows_ok": pl.Int64,
                              "rows_quarantined": pl.Int64, "rows_duplicate": pl.Int64},
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


def commit_documents(
    wh: Warehouse, docs: list[MemoryInput], batch_id: str,
    extra: Callable[[list[FileReport]], dict[str, pl.DataFrame]],
) -> list[FileReport]:
    """Parse ``docs`` with their formats and commit them in one batch, with the frames
    ``extra(reports)`` makes from their counts (a pull's status row): the same parsers, record
    keys, duplicate counts and quarantine as files, and all of it or nothing is stored. No
    manifest row: a document is not a file (the caller records it). The caller holds the
    writer lock. A document that fails to parse is quarantined whole and its report is not
    ``done``."""
    reports, results = [], []
    for d in docs:
        if d.fmt is not None and d.fmt not in formats():
            raise UserError(f"{d.name}: unknown format {d.fmt!r}")
        report = FileReport(d.name, d.fmt or "", hashlib.sha256(d.data).hexdigest(), bytes=len(d.data))
        res, report.done = parse_bytes(d.data, d.name, d.fmt, replace(d.ctx, path=d.name))
        reports.append(report)
        results.append(res)
    with wh.batch(batch_id) as batch:
        merged: dict[str, list[pl.DataFrame]] = {}
        for report, res in zip(reports, results, strict=True):
            for frames in _frames(report, res):
                for name, df in frames.items():
                    if df.height:
                        merged.setdefault(name, []).append(conform(name, df))
        dropped = batch.add({name: pl.concat(dfs) for name, dfs in merged.items()})
        _count_duplicates(reports, dropped)
        _quarantine_conflicts(batch, reports)
        batch.add(extra(reports))
    return reports
