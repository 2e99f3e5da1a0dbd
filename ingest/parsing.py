"""One input parsed by its format: the format sniffed from the text (or forced), a
line-oriented file's chunks parsed on every core by threads, any other file parsed whole up to
MAX_WHOLE_BYTES, an empty or unrecognised file as one quarantine record.

Every result is checked for conservation here: each record the parser read is a row of the
format's primary table, a quarantine row or a counted exact duplicate. A parser that breaks it
is a bug, and its file is quarantined whole (``failure``), rather than half-written, and not
marked done, so a fixed parser reads it again.
"""

from __future__ import annotations

import io
import os
import zlib
from collections import deque
from collections.abc import Callable
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from typing import BinaryIO

import zstandard

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import whole_file_quarantine
from ingest.chunks import MAX_LINE_BYTES
from ingest.chunks import LongLine
from ingest.chunks import line_blocks
from ingest.files import open_source
from ingest.files import text_head
from ingest.registry import detect
from ingest.registry import formats
from warehouse import interrupt
from warehouse.schemas import quarantine_frame

# A format that is not line-oriented (JSON, YAML, ...) is parsed whole: its text, decompressed,
# may be at most this long. A longer one (or a small .gz that inflates to gigabytes) is
# quarantined unread, never held in memory.
MAX_WHOLE_BYTES = 256 << 20


class Unreadable(Exception):
    """A file that cannot be read at all (corrupt or truncated compression at its start): it is
    quarantined and not marked done, so a later ingest tries it again."""


def checked(spec: FormatSpec, result: ParseResult) -> ParseResult:
    """``result``, after checking conservation: a RuntimeError when its rows, quarantine rows
    and duplicates do not add up to the records it read."""
    ok = result.tables.get(spec.primary)
    n_ok = 0 if ok is None else ok.height
    if n_ok + result.quarantine.height + result.duplicates != result.records:
        raise RuntimeError(
            f"conservation violated: {result.records} records read, {n_ok} rows + "
            f"{result.quarantine.height} quarantined + {result.duplicates} duplicates"
        )
    return result


def quarantined(data: bytes, error: str) -> ParseResult:
    """A whole file as one quarantine record, for ``error``."""
    return ParseResult(tables={}, quarantine=whole_file_quarantine(data, error), records=1)


def failure(spec: FormatSpec | None, exc: Exception) -> tuple[str, ParseResult]:
    """(format name, result) of a file that could not be read (``Unreadable``) or that its
    parser failed on: the whole file quarantined, with the reason."""
    if isinstance(exc, Unreadable):
        return ("unknown", quarantined(b"", str(exc)))
    return (spec.name if spec else "unknown", quarantined(b"", f"parser error: {exc!r}"))


def reraise_interrupt(exc: Exception) -> None:
    """Ctrl-C that DuckDB turned into an ``Exception`` while a query ran
    (``warehouse.interrupt``): a KeyboardInterrupt again, never a "parser failure" quarantine
    row of the file."""
    if interrupt.is_interrupt(exc):
        raise KeyboardInterrupt from exc


def parse_bytes(
    data: bytes, name: str, fmt: str | None, ctx: ParseContext
) -> tuple[list[tuple[str, ParseResult]], bool]:
    """A small file's (format, result) list and whether it is done (False: it could not be read
    or its parser failed; quarantined whole and tried again by a later ingest). Never raises for
    the file's content: this is what worker processes run."""
    spec = formats()[fmt] if fmt else None
    try:
        return list(parse_file(io.BytesIO(data), name, spec, ctx)), True
    except Exception as exc:  # noqa: BLE001 - a parser bug must not lose the file: quarantine it whole
        reraise_interrupt(exc)
        return [failure(spec, exc)], False


def parse_file(
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
            head = text_head(fh)
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            raise Unreadable(f"cannot decompress: {exc}") from None
        if not head.strip():
            yield (spec.name if spec else "unknown"), quarantined(head, "empty file")
            return
        if spec is None:
            spec = detect(head, name)
        if spec is None:
            yield (
                "unknown",
                quarantined(head, "format not recognised from content or name; pass --format"),
            )
            return
        try:
            if spec.line_oriented:
                for res in parse_chunks(spec, fh, ctx, plain=fh is raw, end=end, read=read):
                    yield spec.name, res
            else:
                yield spec.name, checked(spec, spec.parse(_whole_text(fh), ctx))
        except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
            # truncated or corrupt compression: not marked done, so a complete copy is read later
            raise Unreadable(f"cannot read or decompress: {exc}") from None


def _whole_text(fh: BinaryIO) -> bytes:
    data = fh.read(MAX_WHOLE_BYTES + 1)
    if len(data) > MAX_WHOLE_BYTES:
        raise Unreadable(
            f"longer than {MAX_WHOLE_BYTES >> 20} MiB decompressed, the limit for a file read "
            "whole: not read"
        )
    return data


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
    long: list[tuple[int, LongLine]] = []
    if spec.extract is None:
        yield from (checked(spec, r) for r in _staged(spec.parse, fh, ctx, plain, end, long, read))
    else:
        if parts := list(
            _staged(spec.extract, fh, ctx, plain, end, long, read)
        ):  # none: only long lines
            yield checked(spec, spec.merge(parts, ctx))
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


def _staged(
    stage: Callable[[bytes, ParseContext], object],
    fh: BinaryIO,
    ctx: ParseContext,
    plain: bool,
    end: int | None,
    long: list[tuple[int, LongLine]],
    read: Callable[[int], None] | None = None,
) -> Iterator:
    """``stage`` of each chunk (with its line offset), in file order. Chunks are parsed
    concurrently on all cores (parsers are pure; Polars and NumPy release the GIL); at most
    cores + 1 chunks are in flight. Lines too long to parse go to ``long`` (line number, line).
    ``read``: see ``parse_chunks``."""
    pool, pending, line, seen = _pool(), deque(), 0, 0
    for block, newlines in line_blocks(fh, plain, end):
        seen += block.size if isinstance(block, LongLine) else len(block)
        if read is not None:
            read(seen)
        if isinstance(block, LongLine):
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
