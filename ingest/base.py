"""What every parser shares: the context it is given, the result it returns, its registration.

A parser is a pure function ``parse(data: bytes, ctx: ParseContext) -> ParseResult``: no file
or network I/O, so it can be fuzzed and benchmarked. The runner (``ingest.runner``) does the I/O.

Conservation contract: ``records`` counts the logical records the parser recognised (a sacct
job with its steps folded in, one log event, one sample); each one lands as exactly one row in
the format's ``primary`` table, as one quarantine row, or as one of ``duplicates``. Lines that
are not records at all (headers, blank lines, comments, trailers) are not counted.

Exact duplicate records: a record repeated within a file is stored once and counted in the
manifest's ``rows_duplicate``, never quarantined (it is not a rejected record). A parser emits
the repeat as an ordinary row and the warehouse's ``record_key`` dedupe (``Batch.add``) drops
and counts it; only where a repeat would change the parser's own output (sacct numbering the
attempts of a JobID, kernel repeat merging, ...) does the parser drop it itself and report how
many in ``ParseResult.duplicates`` (``drop_repeats``, ``settle_repeats``). Either way a repeat of
a rejected record is rejected again: one quarantine row per line, with the same reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pyarrow as pa

from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import quarantine_frame


@dataclass(frozen=True)
class ParseContext:
    path: str = "<memory>"  # written to source_file
    cluster: str = "default"
    # ``cluster`` was given (``--cluster``, a source's ``cluster``): it is the cluster of every
    # record, whatever cluster a record names (``record_cluster``); else it is only the cluster of
    # records that name none
    cluster_given: bool = False
    tz: str = "UTC"  # zone of timestamps that carry none
    host: str | None = None  # host for files that do not name one
    time: datetime | None = None  # sample time for scrapes that carry none (UTC)
    mtime: datetime | None = None  # the file's modification time (UTC), last resort
    fields: tuple[str, ...] | None = None  # headerless sacct: the field order
    delimiter: str | None = None
    column_map: dict[str, str] = field(default_factory=dict)  # canonical -> theirs
    line_offset: int = 0  # when the runner feeds a file in chunks
    options: dict = field(default_factory=dict)  # format-specific knobs
    # Plausible times (UTC): a record dated outside [not_before, not_after] is quarantined, not
    # stored (one skewed clock must not rescale every exposure). None: ingest time + 1 day.
    not_before: datetime = datetime(2000, 1, 1)
    not_after: datetime | None = None

    def latest_plausible(self) -> datetime:
        return self.not_after or (datetime.now(UTC).replace(tzinfo=None) + timedelta(days=1))


@dataclass
class ParseResult:
    tables: dict[str, pl.DataFrame]
    quarantine: pl.DataFrame
    records: int
    duplicates: int = 0  # exact repeats the parser dropped itself (counted in rows_duplicate)
    # what the file, not its records or the options, supplied (``STAND_INS``): recorded in the
    # manifest and announced by the command line
    stand_ins: frozenset[str] = frozenset()

    @staticmethod
    def empty_quarantine() -> pl.DataFrame:
        return pl.DataFrame(schema=QUARANTINE_COLUMNS)


# What a file can supply for its records: the file's modification time stood in for record
# times (no timestamp in the records, no --time), the host was taken from the file name (no
# host in the records, no --host).
STAND_IN_TIME, STAND_IN_HOST = "file time", "host from file name"
STAND_INS = (STAND_IN_TIME, STAND_IN_HOST)


def stand_ins(
    ctx: ParseContext, rows: pl.DataFrame | None, host_guessed: bool = False
) -> frozenset[str]:
    """The stand-ins ``rows`` (a parse's good rows) carry: the file time where some row's
    ``time`` is the file's modification time and no --time was given (records never carry the
    file's own microsecond), and the host when the parser says it applied the one it guessed."""
    out = set()
    if (
        ctx.time is None
        and ctx.mtime is not None
        and rows is not None
        and "time" in rows.columns
        and rows.height
        and (rows["time"].dt.replace_time_zone(None) == ctx.mtime).any()
    ):
        out.add(STAND_IN_TIME)
    if host_guessed and ctx.host is None:
        out.add(STAND_IN_HOST)
    return frozenset(out)


# A detector's top confidence: the content carries the format's own signature. No detector
# returns more, so ``registry.detect`` stops at the first format that returns it.
CERTAIN = 95


@dataclass(frozen=True)
class FormatSpec:
    """Registers a parser. Each ``ingest`` module that defines ``FORMAT`` (built by
    ``FormatSpec.declare``) is found by ``ingest.registry`` without being listed anywhere."""

    name: str  # the --format value
    primary: str  # table that receives one row per good record
    parse: Callable[[bytes, ParseContext], ParseResult]
    # Content sniffing: (first 64 KiB, file name) -> confidence 0..CERTAIN (0 = not this format).
    detect: Callable[[bytes, str], int]
    description: str = ""
    # Large files of this format may be fed in chunks split at line boundaries.
    line_oriented: bool = False
    # Two-stage parsers, whose records span lines (merged repeats, boot banners): ``extract``
    # turns one chunk into parser-private partial state (chunk, context with its line_offset),
    # and ``merge`` (the chunks' partials in file order, the file's context) finishes them as one
    # file. The runner calls these instead of ``parse`` on line-oriented files, so chunking
    # changes nothing and the finishing work runs once per file, not once per chunk.
    extract: Callable[[bytes, ParseContext], object] | None = None
    merge: Callable[[list, ParseContext], ParseResult] | None = None
    # Many small files at once: ``parse_many([(data, context), ...])`` returns what ``parse``
    # returns for each file, in order, from one pass over all of them. The runner hands it its
    # small files (whole, decompressed) by the task, for formats whose files come by the
    # thousand (a scrape per host and day), so a parse's fixed cost is paid once per task.
    parse_many: Callable[[list[tuple[bytes, ParseContext]]], list[ParseResult]] | None = None

    @classmethod
    def declare(
        cls,
        namespace: dict,
        *,
        primary: str,
        description: str,
        line_oriented: bool = False,
        name: str | None = None,
    ) -> FormatSpec:
        """A format module's spec, declared last in the module:
        ``FORMAT = FormatSpec.declare(globals(), primary=..., description=...)``.

        The module states only what is its own. The rest it has already said by convention,
        found in ``namespace`` (the module's globals): its functions by their names, ``parse``
        and ``detect`` always, ``parse_many`` and the ``extract``/``merge`` pair where it
        defines them; its ``--format`` name is its module's (``ipmi_sdr`` -> ``ipmi-sdr``)
        unless ``name`` says otherwise."""
        name = name or namespace["__name__"].rpartition(".")[2].replace("_", "-")
        missing = [f for f in ("parse", "detect") if f not in namespace]
        if missing:
            raise TypeError(f"format {name!r} defines no {' or '.join(missing)}")
        if ("extract" in namespace) != ("merge" in namespace):
            raise TypeError(f"format {name!r}: extract and merge come together")
        hooks = ("extract", "merge", "parse_many")
        return cls(
            name=name,
            primary=primary,
            parse=namespace["parse"],
            detect=namespace["detect"],
            description=description,
            line_oriented=line_oriented,
            **{hook: namespace[hook] for hook in hooks if hook in namespace},
        )


def numbered_lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """The text of ``data`` as one row per line: ``line`` (1-based, plus the chunk's
    ``ctx.line_offset``) and ``raw`` (without its newline or a trailing CR). Invalid UTF-8 is
    replaced, never fatal; a final newline adds no row. The lines are Arrow views into
    ``data`` cut at the newlines NumPy finds: no decoded copy, no Python loop."""
    data = valid_utf8(data)
    ends = np.concatenate([np.flatnonzero(s == 10) + i for i, s in _slices(data)] or [[]]).astype(
        np.int64
    )
    if len(data) and data[-1] != 10:  # the last line has no newline
        ends = np.append(ends, len(data))
    # pieces line, newline, line, newline, ...: every other piece is a line
    cuts = np.empty(2 * len(ends) + 1, np.int64)
    cuts[0] = 0
    cuts[1::2] = ends
    cuts[2::2] = np.minimum(ends + 1, len(data))
    raw = text_pieces(data, cuts).gather_every(2)
    return pl.DataFrame({"raw": raw}).select(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64) + ctx.line_offset,
        raw=pl.col("raw").str.strip_suffix("\r"),
    )


def count_newlines(data: bytes) -> int:
    """``data.count(b"\\n")`` in a third of the time."""
    return sum(newline_counts(data, 1 << 20))


def newline_counts(data: bytes, size: int) -> list[int]:
    """Newlines in each ``size``-byte slice of ``data``."""
    return [int(np.count_nonzero(s == 10)) for _, s in _slices(data, size)]


def _slices(data: bytes, size: int = 1 << 20):
    """(offset, uint8 view) of 1 MiB slices: NumPy scans in slices so that a comparison's
    temporary stays small and cached."""
    a = np.frombuffer(data, np.uint8)
    return ((i, a[i : i + size]) for i in range(0, len(a), size))


def valid_utf8(data: bytes) -> bytes:
    """``data`` itself when it is valid UTF-8 (ASCII is checked fastest), else a copy with
    U+FFFD for each invalid sequence."""
    if data.isascii():
        return data
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace").encode("utf-8")


def text_pieces(buf: bytes, cuts: np.ndarray) -> pl.Series:
    """Zero-copy Utf8 pieces ``buf[cuts[i]:cuts[i+1]]``. ``buf`` must be valid UTF-8
    (``valid_utf8``) and the cuts ascending, within it and on character boundaries: Arrow does
    not check."""
    arr = pa.Array.from_buffers(
        pa.large_string(), len(cuts) - 1, [None, pa.py_buffer(cuts), pa.py_buffer(buf)]
    )
    return pl.from_arrow(arr)


def normalize_pci(expr: pl.Expr) -> pl.Expr:
    """``PCI:0019:01:00`` / ``00000000:CB:00.0`` -> ``0019:01:00.0`` (lowercase, 4-digit domain):
    the one spelling of a GPU's bus id, so kernel events and telemetry join on it."""
    g = expr.str.to_lowercase().str.extract_groups(
        r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})(?:\.([0-7]))?"
    )
    dom = g.struct.field("1").str.slice(-4)
    return pl.format(
        "{}:{}:{}.{}",
        dom,
        g.struct.field("2"),
        g.struct.field("3"),
        g.struct.field("4").fill_null("0"),
    )


def event_ids(keys: pl.Series) -> pl.Series:
    """Stable ids (16 hex digits of blake2b) of per-record key strings.

    Polars' own hash is not stable across versions. One hashlib call per output row (rows are
    events, not lines) costs about 1 us; a vectorized DuckDB ``md5`` costs ~25 ms per call, which
    dominates for the small per-host files hardware logs come in.
    """
    return pl.Series(
        "event_id",
        [hashlib.blake2b(k.encode(), digest_size=8).hexdigest() for k in keys],
        dtype=pl.Utf8,
    )


def record_cluster(reported: pl.Expr, ctx: ParseContext) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(cluster, reported_cluster, why the record cannot be stored) of records that name their
    own cluster (``reported``: sacct's Cluster). A cluster given is the cluster: two sites'
    slurmdbds that both say ``cluster`` are two clusters. A record's own name that differs from
    it is kept as ``reported_cluster`` (else null). Without one, the record's name is the
    cluster. A dump that names several clusters is never merged into the one given: the records
    of the others are rejected, with the reason."""
    if not ctx.cluster_given:
        return (
            pl.coalesce(reported, pl.lit(ctx.cluster)),
            pl.lit(None, pl.Utf8),
            pl.lit(None, pl.Utf8),
        )
    named = reported.drop_nulls().unique().sort()
    differs = (reported != ctx.cluster).fill_null(False)
    why = pl.format(
        "this dump holds records of clusters {}: the cluster given ({}) would merge them; read it "
        "without a given cluster, or one cluster at a time (sacct -M {})",
        named.str.join(", "),
        pl.lit(ctx.cluster),
        reported,
    )
    return (
        pl.lit(ctx.cluster),
        pl.when(differs).then(reported),
        pl.when(differs & (named.len() > 1)).then(why),
    )


def implausible_time(time: pl.Expr, ctx: ParseContext) -> pl.Expr:
    """A readable reason (Utf8) when ``time`` (naive UTC) lies outside the context's plausible
    window, else null. Parsers add it to their error column before splitting good from bad."""
    lo, hi = ctx.not_before, ctx.latest_plausible()
    return (
        pl.when(time < lo)
        .then(
            pl.format(
                "time {} is before {} (implausible clock)",
                time.dt.to_string("%Y-%m-%dT%H:%M:%S"),
                pl.lit(lo.isoformat()),
            )
        )
        .when(time > hi)
        .then(
            pl.format(
                "time {} is after {} (clock in the future)",
                time.dt.to_string("%Y-%m-%dT%H:%M:%S"),
                pl.lit(hi.isoformat(timespec="seconds")),
            )
        )
    )


def split_rejected(
    df: pl.DataFrame,
    error: str = "error",
    line: str = "line",
    raw: str = "raw",
    also: list[tuple[int, str, str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the rows whose ``error`` is null, the others as quarantine rows): the split every parser
    makes once one column says why each record cannot be stored (null: it can). The good rows
    keep every column, ``error`` too. ``also``: records rejected before the frame was built, as
    (line, raw, error), merged with the rejected rows in that tuple order."""
    bad = df.filter(pl.col(error).is_not_null())
    good = df.filter(pl.col(error).is_null())
    if also is None:
        return good, quarantine_frame(bad[line], bad[raw], bad[error])
    rows = sorted([*also, *bad.select(line, raw, error).iter_rows()])
    return good, quarantine_frame([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def drop_repeats(
    df: pl.DataFrame, subset: list[str], line: str = "line"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``df`` without the rows that repeat an earlier one exactly (the same ``subset`` values),
    and the dropped rows as (``line``, ``first``: the line of the row each repeats). For parsers
    whose output a repeat would change (see the module docstring); ``settle_repeats`` then
    decides what each repeat is."""
    marked = df.with_columns(_first=pl.col(line).first().over(subset))
    repeat = pl.col(line) != pl.col("_first")
    dropped = marked.filter(repeat).select(
        line=pl.col(line).cast(pl.Int64), first=pl.col("_first").cast(pl.Int64)
    )
    return marked.filter(~repeat).drop("_first"), dropped


def settle_repeats(
    repeats: pl.DataFrame, row_lines: pl.Series, quarantine: pl.DataFrame
) -> tuple[int, pl.DataFrame]:
    """What the ``repeats`` of ``drop_repeats`` are, given what their first lines made: a
    repeat of a line that made rows (``row_lines``: the line of every output row) is as many
    duplicates; a repeat of a rejected line is rejected again, with the same reason (as a
    repeated bad record is where the warehouse dedupes); a repeat of a line that made no record
    (a sacct step folded into its job) is nothing. Returns (duplicates, ``quarantine`` with the
    repeats' rows added)."""
    if repeats.height == 0:
        return 0, quarantine
    made = pl.DataFrame({"first": row_lines.cast(pl.Int64)})
    dups = repeats.join(made, on="first").height
    again = repeats.join(
        quarantine.select(first="line", raw="raw", error="error"), on="first"
    ).drop("first")
    if again.height == 0:
        return dups, quarantine
    return dups, pl.concat([quarantine, again.select(quarantine.columns).cast(quarantine.schema)])


def json_error(exc) -> str:
    """A ``json.JSONDecodeError`` as a readable reason: ``invalid JSON at line L column C:
    <what>``."""
    return f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg.removesuffix(' at')}"


def whole_file_quarantine(data: bytes, error: str, line: int = 1) -> pl.DataFrame:
    return quarantine_frame([line], [data[:500].decode("utf-8", "replace")], [error])
