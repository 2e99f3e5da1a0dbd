"""What every parser shares: the context it is given, the result it returns, its registration.

A parser is a pure function ``parse(data: bytes, ctx: ParseContext) -> ParseResult``: no file
or network I/O, so it can be fuzzed and benchmarked. The runner (``ingest.runner``) does the I/O.

Conservation contract: ``records`` counts the logical records the parser recognised (a sacct
job with its steps folded in, one log event, one sample); each one lands as exactly one row in
the format's ``primary`` table or as one quarantine row. Lines that are not records at all
(headers, blank lines, comments, trailers) are not counted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from warehouse.schemas import QUARANTINE_COLUMNS, quarantine_frame


@dataclass(frozen=True)
class ParseContext:
    path: str = "<memory>"  # written to source_file
    cluster: str = "default"
    tz: str = "UTC"  # zone of timestamps that carry none
    host: str | None = None  # host for files that do not name one
    time: datetime | None = None  # sample time for scrapes that carry none (UTC)
    mtime: datetime | None = None  # the file's modification time (UTC), last resort
    fields: tuple[str, ...] | None = None  # headerless sacct: the field order
    delimiter: str | None = None
    column_map: dict[str, str] = field(default_factory=dict)  # canonical -> theirs
    as_of: datetime | None = None  # end of observation for units still in service
    line_offset: int = 0  # when the runner feeds a file in chunks
    options: dict = field(default_factory=dict)  # format-specific knobs


@dataclass
class ParseResult:
    tables: dict[str, pl.DataFrame]
    quarantine: pl.DataFrame
    records: int

    @staticmethod
    def empty_quarantine() -> pl.DataFrame:
        return pl.DataFrame(schema=QUARANTINE_COLUMNS)


@dataclass(frozen=True)
class FormatSpec:
    """Registers a parser. Each ``ingest`` module that defines ``FORMAT = FormatSpec(...)``
    is found by ``ingest.registry`` without being listed anywhere."""

    name: str  # the --format value
    primary: str  # table that receives one row per good record
    parse: Callable[[bytes, ParseContext], ParseResult]
    # Content sniffing: (first 64 KiB, file name) -> confidence 0..100 (0 = not this format).
    detect: Callable[[bytes, str], int]
    description: str = ""
    # Large files of this format may be fed in chunks split at line boundaries.
    line_oriented: bool = False


def numbered_lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """The text of ``data`` as one row per line: ``line`` (1-based, plus the chunk's
    ``ctx.line_offset``) and ``raw`` (without its newline or a trailing CR). Invalid UTF-8 is
    replaced, never fatal. Split in Polars, not a Python loop; a final newline adds no row."""
    text = data.decode("utf-8", errors="replace")
    raw = pl.Series("raw", [text]).str.split("\n").explode()
    if len(raw) and raw[-1] == "":
        raw = raw.head(-1)
    return pl.DataFrame({"raw": raw}).select(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64) + ctx.line_offset,
        raw=pl.col("raw").str.strip_suffix("\r"),
    )


def whole_file_quarantine(data: bytes, error: str, line: int = 1) -> pl.DataFrame:
    return quarantine_frame([line], [data[:500].decode("utf-8", "replace")], [error])
