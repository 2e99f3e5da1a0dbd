"""Input files found, opened and hashed: directories walked, gzip and zstd decompressed by their
magic bytes, a byte order mark read past, the sha256 of a file's raw bytes and of the bytes an
ingest would parse (an incomplete last line held back), and files still being written told
apart. No parsing and no warehouse here.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import time
from pathlib import Path
from typing import BinaryIO

import zstandard

from ingest import chunks
from ingest.base import FormatSpec
from ingest.registry import SNIFF_BYTES
from ingest.registry import detect


class UserError(Exception):
    """A mistake in what the user asked for; the CLI prints it as one line."""


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


def display_name(path: Path) -> str:
    """A path as stored and printed: bytes that are not UTF-8 (a file name from another
    locale) are kept visible as backslash escapes instead of breaking the writers."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def compression(magic: bytes) -> str | None:
    """ "gzip" or "zstd" by a stream's first 4 bytes; None: not compressed."""
    return "gzip" if magic[:2] == b"\x1f\x8b" else "zstd" if magic == b"\x28\xb5\x2f\xfd" else None


def open_source(raw: BinaryIO) -> BinaryIO:
    """Wrap an open binary stream, transparently decompressing gzip or zstd (by magic bytes,
    not name). The caller keeps ownership of ``raw``. A compressed stream that ends before its
    end marker (a truncated file) raises EOFError when its end is read."""
    magic = raw.read(4)
    raw.seek(0)
    if compression(magic) == "gzip":
        return gzip.GzipFile(fileobj=raw)
    if compression(magic) == "zstd":
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


def text_head(fh: BinaryIO) -> bytes:
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


def sha_of(path: Path) -> str | None:
    """``file_sha256`` of a regular file; None for anything else or a file that cannot be
    read."""
    try:
        return file_sha256(path)[0] if path.is_file() else None
    except OSError:
        return None


def parsed_sha256(path: Path) -> tuple[str, int, int]:
    """(sha256, count) of the bytes an ingest of ``path`` would parse now (an incomplete last
    line held back, as ``read_parsed`` does), and the file's size: what the manifest will
    record."""
    with open(path, "rb") as fh:
        total = os.fstat(fh.fileno()).st_size
        _, size, sha = read_parsed(fh, total, display_name(path), None)
    return sha, size, total


def read_parsed(
    fh: BinaryIO, total: int, name: str, forced: FormatSpec | None
) -> tuple[bytes | None, int, str]:
    """(bytes, count, sha256) of what an ingest parses of the open file ``fh`` of ``total``
    bytes: the count up to ``parsed_size`` and their sha256. A small file (at most
    CHUNK_BYTES) is read once, hashed and returned; a larger one is hashed from the same open
    descriptor and left on disk (None), so what is hashed is what is parsed."""
    data = fh.read() if total <= chunks.CHUNK_BYTES else None
    size = parsed_size(data, total, name, forced, fh.fileno())
    sha = (
        hashlib.sha256(memoryview(data)[:size]).hexdigest()
        if data is not None
        else _fd_sha256(fh.fileno(), size)
    )
    return data, size, sha


def parsed_size(
    data: bytes | None, size: int, name: str, forced: FormatSpec | None, fd: int | None = None
) -> int:
    """How much of a file (``data``, else the open file ``fd``) of ``size`` bytes to parse: all of
    it, except that the last line of an uncompressed file in a line-oriented format, when it has
    no newline yet (a log or scrape being written, or copied, or a command's output cut short),
    is held back; the manifest records the bytes parsed, and the file, when it has grown, is
    read again (what was stored already is counted as duplicates)."""

    def read(n: int, at: int) -> bytes:
        return data[at : at + n] if data is not None else os.pread(fd, n, at)

    if size == 0 or read(1, size - 1) == b"\n" or compression(read(4, 0)):
        return size
    head = read(SNIFF_BYTES + len(BOM), 0)
    spec = forced or detect(head.removeprefix(BOM)[:SNIFF_BYTES], name)
    if spec is None or not spec.line_oriented:
        return size
    if data is not None:
        return data.rfind(b"\n") + 1
    return chunks.last_line_end(fd, 0, size) or 0


def _fd_sha256(fd: int, size: int) -> str:
    h, pos = hashlib.sha256(), 0
    while pos < size and (block := os.pread(fd, min(1 << 22, size - pos), pos)):
        h.update(block)
        pos += len(block)
    return h.hexdigest()


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
