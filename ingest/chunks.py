"""Big line-oriented files read in chunks: blocks of at most CHUNK_BYTES that end on a line
boundary, each with its newline count, and lines too long to parse cut out.

A plain file is read with ``pread`` (one copy per block); a decompressing stream is read forward
and re-joined at the cut. A line longer than MAX_LINE_BYTES is never handed on (and one longer
than a chunk never read whole): it comes out as a ``LongLine``, its first bytes and its size,
for the caller to quarantine. No parsing here: ``ingest.parsing`` parses the blocks.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from ingest.base import newline_counts

# Line-oriented files larger than this are parsed in chunks. Below 32 MiB (glibc's
# largest dynamic mmap threshold) freed chunk buffers are recycled by malloc; larger ones are
# fresh mappings that page-fault on every chunk (5x slower reading, benchmarks/bench_kernel.py).
# Read as ``chunks.CHUNK_BYTES`` wherever it is used, so that it is one setting.
CHUNK_BYTES = 24 << 20
_PROBE = 1 << 16  # bytes read at a time when looking for a chunk's last newline

# A line of a line-oriented file longer than this is not given to the parser (a 200 MB line
# would take gigabytes to parse): it is quarantined, and skipped without being held in memory.
MAX_LINE_BYTES = 1 << 20


@dataclass
class LongLine:
    head: bytes  # its first 500 bytes, for the quarantine row
    size: int


def line_blocks(
    fh: BinaryIO, plain: bool, end: int | None = None
) -> Iterator[tuple[bytes | LongLine, int]]:
    """(block, newlines in it): blocks of at most CHUNK_BYTES that end on a line boundary (a
    longer line stays whole), and each line longer than MAX_LINE_BYTES as a ``LongLine``
    (one longer than a chunk is never read whole). A plain file is
    read with ``pread`` up to ``end`` (default: its size), one copy per block; a decompressing
    stream is read forward and re-joined at the cut."""
    fd = _regular_fd(fh) if plain else None
    for block in _stream_blocks(fh) if fd is None else _file_blocks(fd, fh.tell(), end):
        if isinstance(block, LongLine):
            yield block, 1
        else:
            yield from _cut_long_lines(block)


def _cut_long_lines(block: bytes) -> Iterator[tuple[bytes | LongLine, int]]:
    """(piece, newlines in it) of a block, with each line longer than MAX_LINE_BYTES as a
    ``LongLine``."""
    if (n := newlines_if_short(block)) is not None:
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
            LongLine(block[starts[i] : starts[i] + 500], int(ends[i] - starts[i])),
            int(i < len(nl)),
        )
        first = i + 1
    if starts[first] < len(block):
        yield block[starts[first] :], len(nl) - first


def newlines_if_short(block: bytes) -> int | None:
    """The newlines in ``block`` when none of its lines is longer than MAX_LINE_BYTES, else
    None. Counted per half-limit slice: a longer line covers a whole slice, with no newline."""
    half = MAX_LINE_BYTES // 2
    counts = newline_counts(block, half)
    full = counts if len(block) % half == 0 else counts[:-1]
    return sum(counts) if len(block) <= MAX_LINE_BYTES or all(full) else None


def _regular_fd(fh: BinaryIO) -> int | None:
    try:
        fd = fh.fileno()
    except (AttributeError, OSError):  # in-memory streams; io.UnsupportedOperation is an OSError
        return None
    return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None


def _file_blocks(fd: int, pos: int, size: int | None) -> Iterator[bytes | LongLine]:
    size = os.fstat(fd).st_size if size is None else size
    while (end := _line_end(fd, pos, size)) > pos:
        if end - pos > max(CHUNK_BYTES, MAX_LINE_BYTES):  # one line, too long: not read
            yield LongLine(os.pread(fd, 500, pos), end - pos - (os.pread(fd, 1, end - 1) == b"\n"))
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
    if (cut := last_line_end(fd, pos, end)) is not None:
        return cut
    while end < size and (probe := os.pread(fd, min(_PROBE, size - end), end)):
        if (i := probe.find(b"\n")) >= 0:
            return end + i + 1
        end += len(probe)
    return min(end, size)


def last_line_end(fd: int, pos: int, end: int) -> int | None:
    """Offset just past the last newline in [pos, end) of a file, read backwards from ``end``
    ``_PROBE`` bytes at a time; None when there is none."""
    hi = end
    while hi > pos:
        lo = max(pos, hi - _PROBE)
        if (i := os.pread(fd, hi - lo, lo).rfind(b"\n")) >= 0:
            return lo + i + 1
        hi = lo
    return None


def _stream_blocks(fh: BinaryIO) -> Iterator[bytes | LongLine]:
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
                skipping, rest = LongLine(block[:500], len(block)), b""
            else:
                rest = block
            continue
        yield block[: cut + 1]
        rest = block[cut + 1 :]
    if skipping is not None:
        yield skipping
    if rest:
        yield rest
