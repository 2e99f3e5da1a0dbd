"""dcgm-exporter ``/metrics`` scrapes (Prometheus text format) to ``gpu_samples``.

One record = one sample line. A file may hold one scrape or many concatenated; any label set
(``Hostname``, ``UUID``, ``gpu``, ``device``, ``modelName``, MIG ``GPU_I_PROFILE``/``GPU_I_ID``,
``pod``/``namespace``/``container``). Sample time: the line's own millisecond timestamp, else
``--time``, else the file's modification time; an own timestamp that cannot be read or lies
outside the plausible window (``ParseContext.not_before`` .. ``latest_plausible()``) is
quarantined, never replaced by a fallback. DCGM "blank" sentinels (int32/int64 blanks and
their NOT_FOUND/NOT_SUPPORTED/NOT_PERMISSIONED neighbours, the FP64 blank 2**47 family) become a
row with a null value: the sample exists and says "unsupported". Quarantined, with the reason:
lines that are not samples; non-numeric values; ``NaN`` / ``+Inf`` / ``-Inf`` (not measurements:
they would poison every hourly mean); a line whose only number is a millisecond timestamp in a
scrape whose other lines carry one (its value is missing); a sample that names no GPU and no
host (no ``gpu``, ``UUID``, ``pci_bus_id`` or ``Hostname`` label: a GPU sample nobody can place;
``--host`` says the whole file is that host's, and then such samples are kept with that host and
a null GPU; a host guessed from the file name is not enough). Label values are unescaped (the
backslash, double quote and line feed escapes: ``gpu_labels.unquoted``), so a host is stored as
a pull of the same series stores it. An exact repeat of an earlier sample is an ordinary row
here: the warehouse stores it once and counts it as a duplicate (``rows_duplicate``); the same
sample with another value is a conflict it quarantines, in one file as between two. ``# HELP`` /
``# TYPE`` lines go to ``metric_metadata``
(unit taken from ``(in X)`` in the help text); so do the lines of dcgm-exporter's counters CSV
configuration (``DCGM_FI_X, gauge, help``), which therefore ingest as metadata with no samples.

Vectorized: the whole chunk is split into lines once and classified and dissected with Polars
regex expressions; label strings are parsed once per distinct label set (a scrape repeats the
same few label sets for every metric) and joined back. ``parse_many`` does this once for many
small files (the runner's tasks of scrape files), each row keeping its file; ``parse`` is its
one-file case.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime

import numpy as np
import polars as pl

from ingest.base import CERTAIN
from ingest.base import STAND_IN_HOST
from ingest.base import STAND_IN_TIME
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import count_newlines
from ingest.base import implausible_time
from ingest.base import normalize_pci
from ingest.base import numbered_lines
from ingest.base import valid_utf8
from ingest.gpu_labels import FOLDED_LABELS
from ingest.gpu_labels import LABEL_COLUMNS
from ingest.gpu_labels import folded_metric
from ingest.gpu_labels import host_from_path
from ingest.gpu_labels import is_str_blank
from ingest.gpu_labels import sentinel_to_null
from ingest.gpu_labels import unquoted
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

SOURCE = "dcgm"

# A sample line is "<key> <value>[ <ms timestamp>]" with key "name" or "name{labels}".
_TAIL = r"\s+[^\s}]+(?:\s+-?\d+)?\s*$"
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"  # a Prometheus metric name
_KEY = rf"^\s*(?P<metric>{_NAME})\s*(?:\{{(?P<labels>.*)\}})?$"
_KEY_ONLY = rf"^\s*{_NAME}\s*(?:\{{.*\}})?\s*$"
_META = rf"^#\s*(?P<kind>HELP|TYPE)\s+(?P<metric>{_NAME})(?:\s+(?P<text>.*))?$"
_CONFIG = r"^(?P<metric>[A-Z][A-Z0-9_]*)\s*,\s*(?P<type>[a-z]+)\s*,\s*(?P<help>.*)$"
_UNIT = r"\(in ([^)]+)\)"


def parse_number(raw: pl.Expr) -> pl.Expr:
    """Prometheus sample value text to float (NaN and +/-Inf accepted); null if not a number."""
    s = raw.str.strip_chars()
    return s.str.replace(r"^\+", "").cast(pl.Float64, strict=False)


def label_columns(labels: pl.Series) -> pl.DataFrame:
    """Parse distinct label strings into the gpu_samples label columns (one row per input),
    plus the ``FOLDED_LABELS`` (dropped once folded into the metric name). Values are unescaped
    (``gpu_labels.unquoted``): ``Hostname="gpu\\"07"`` is host ``gpu"07``, as pulled."""
    df = pl.DataFrame({"labels": labels})
    exprs = []
    folded = {lab: lab for lab in FOLDED_LABELS.values()}
    for label, col in {**LABEL_COLUMNS, **folded}.items():
        val = unquoted(
            pl.col("labels").str.extract(rf'(?:^|[,{{\s]){label}\s*=\s*"((?:[^"\\]|\\.)*)"', 1)
        )
        if col == "gpu":
            val = val.cast(pl.Int32, strict=False)
        elif col == "pci_bus":
            val = normalize_pci(val)
        else:
            val = pl.when(val == "").then(None).otherwise(val)
        exprs.append(val.alias(col))
    return df.with_columns(exprs)


# |ms| beyond this (year ~33,600) cannot be a clock reading and overflows microseconds
_MAX_MS = 10**15


def sample_time(ts_text: pl.Expr, fallback: pl.Expr) -> pl.Expr:
    """The sample's own ms timestamp when it has one (null if unreadable), else ``fallback``
    (its file's --time, else the file's mtime, else null)."""
    ms = ts_text.cast(pl.Int64, strict=False)
    own = pl.from_epoch(pl.when(ms.abs() < _MAX_MS).then(ms), time_unit="ms").cast(
        pl.Datetime("us")
    )
    return pl.when(ts_text.is_not_null()).then(own).otherwise(fallback)


def _epoch_ms(t: datetime) -> int:
    return int((t - datetime(1970, 1, 1)).total_seconds() * 1000)


def lone_timestamp(num: pl.Expr, ts_text: pl.Expr, ctx: ParseContext) -> pl.Expr:
    """True where a line without a timestamp holds, as its only number, a whole number that
    reads as a plausible millisecond timestamp while other lines of its file carry timestamps:
    the value is missing and the timestamp took its place."""
    lo, hi = _epoch_ms(ctx.not_before), _epoch_ms(ctx.latest_plausible())
    return (
        ts_text.is_not_null().any().over("file")
        & ts_text.is_null()
        & num.is_between(lo, hi).fill_null(False)
        & (num == num.floor()).fill_null(False)
    )


def metadata_frame(meta: pl.DataFrame, source: str) -> pl.DataFrame:
    """One metric_metadata row per file and metric from (file, path, metric, type, help) rows
    (HELP and TYPE merged), with its ``file``."""
    out = (
        meta.group_by("file", "path", "metric", maintain_order=True)
        .agg(pl.col("type").drop_nulls().first(), pl.col("help").drop_nulls().first())
        .with_columns(
            unit=pl.col("help").str.extract(_UNIT, 1).str.strip_chars(),
            source=pl.lit(source),
            source_file=pl.col("path"),
        )
    )
    return conform("metric_metadata", out.drop("file", "path")).with_columns(out["file"])


def numbered_files(files: list[tuple[bytes, ParseContext]]) -> pl.DataFrame:
    """The lines of many files as one frame: ``file`` (index in ``files``), ``line`` (1-based
    within its file, plus its context's ``line_offset``) and ``raw`` (as ``numbered_lines``: no
    newline or trailing CR, invalid UTF-8 replaced; a leading byte-order mark dropped). One
    NumPy split of the joined text, whatever the number of files."""
    texts = [valid_utf8(data.removeprefix(b"\xef\xbb\xbf")) for data, _ in files]
    counts = np.array(
        [count_newlines(t) + (bool(t) and not t.endswith(b"\n")) for t in texts], np.int64
    )
    # every file ends with a newline, so no line spans two files
    joined = b"".join(t if not t or t.endswith(b"\n") else t + b"\n" for t in texts)
    lines = numbered_lines(joined, ParseContext())
    file = np.repeat(np.arange(len(files), dtype=np.uint32), counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)  # each line's file's first line, 0-based
    offset = np.repeat(np.array([ctx.line_offset for _, ctx in files], np.int64), counts)
    return lines.select(
        file=pl.Series(file),
        line=pl.Series(np.arange(1, len(file) + 1, dtype=np.int64) - first + offset),
        raw="raw",
    )


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    return parse_many([(data, ctx)])[0]


def parse_many(files: list[tuple[bytes, ParseContext]]) -> list[ParseResult]:
    """``parse`` of each file, in order, done in one pass over all of them (the runner hands
    over its small files by the batch: the fixed cost of a parse is paid once per batch, not
    once per file). The contexts may differ only in ``path``, ``mtime`` and ``line_offset``;
    otherwise each file is parsed alone."""
    ctx = files[0][1]
    shared = replace(ctx, path="", mtime=None, line_offset=0)
    if any(replace(c, path="", mtime=None, line_offset=0) != shared for _, c in files[1:]):
        return [parse_many([f])[0] for f in files]
    per_file = _per_file(files, ctx)
    lines = numbered_files(files)
    # anchored regexes: the DFA stops at the first character that decides them
    lines = lines.with_columns(
        blank=pl.col("raw").str.contains(r"^\s*$"),
        comment=pl.col("raw").str.contains(r"^\s*#"),
        cfg=pl.col("raw").str.contains(r"^\s*[A-Z][A-Z0-9_]*\s*,"),
    )
    cfg_lines = lines.filter("cfg").with_columns(pl.col("raw").str.strip_chars())
    meta = _metadata(lines.filter("comment"), cfg_lines, per_file)
    body = lines.filter(~pl.col("blank") & ~pl.col("comment") & ~pl.col("cfg"))
    # lines that only looked like configuration rows are judged as samples (after their file's)
    body = pl.concat([body, cfg_lines.filter(~pl.col("raw").str.contains(_CONFIG))]).select(
        "file", "line", "raw"
    )
    parts = _judged(_sample_parts(body.sort("file", maintain_order=True), per_file, ctx), ctx)
    return _results(len(files), parts, meta, ctx)


def _per_file(files: list[tuple[bytes, ParseContext]], ctx: ParseContext) -> pl.DataFrame:
    """Per file of the batch: its number, path, and the host and time it stands in."""
    return pl.DataFrame(
        {
            "file": pl.Series(range(len(files)), dtype=pl.UInt32),
            "path": [c.path for _, c in files],
            "host_fallback": [ctx.host or host_from_path(c.path) for _, c in files],
            "fallback_time": [c.time or c.mtime for _, c in files],
        },
        schema_overrides={
            "path": pl.Utf8,
            "host_fallback": pl.Utf8,
            "fallback_time": pl.Datetime("us"),
        },
    )


def _metadata(
    meta_lines: pl.DataFrame, cfg_lines: pl.DataFrame, per_file: pl.DataFrame
) -> pl.DataFrame:
    """Metric metadata: ``# HELP`` / ``# TYPE`` comments and counters-CSV configuration lines,
    per file its comments' metrics first, then its configuration lines' (as parsed alone)."""
    m = meta_lines.select(
        "file", pl.col("raw").str.strip_chars().str.extract_groups(_META).alias("m")
    ).unnest("m")
    m = m.filter(pl.col("kind").is_not_null()).select(
        "file",
        "metric",
        type=pl.when(pl.col("kind") == "TYPE").then(pl.col("text").str.strip_chars()),
        help=pl.when(pl.col("kind") == "HELP").then(pl.col("text").str.strip_chars()),
    )
    cfg = (
        cfg_lines.select("file", pl.col("raw").str.extract_groups(_CONFIG).alias("c"))
        .unnest("c")
        .select("file", "metric", "type", pl.col("help").str.strip_chars())
    )
    meta = pl.concat([m, cfg.filter(pl.col("metric").is_not_null())], how="vertical")
    return meta.sort("file", maintain_order=True).join(
        per_file.select("file", "path"), on="file", how="left", maintain_order="left"
    )


def _sample_parts(body: pl.DataFrame, per_file: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Sample lines split into metric, label columns, value and time, with what their file
    stood in for (``stand_ins``). Cheap non-capturing regexes run over every line; name and
    labels are dissected once per distinct "name{labels}" key (a scrape repeats a few label
    sets for every metric)."""
    parts = body.with_columns(tail=pl.col("raw").str.extract(_TAIL, 0))
    parts = parts.with_columns(
        key=pl.col("raw").str.head(pl.col("raw").str.len_chars() - pl.col("tail").str.len_chars())
    )
    tail = (
        pl.col("tail")
        .str.replace_all("\t", " ", literal=True)
        .str.strip_chars()
        .str.split_exact(" ", 1)
    )
    parts = parts.with_columns(
        value=tail.struct.field("field_0"), ts=tail.struct.field("field_1").str.strip_chars()
    ).drop("tail")
    keys = parts.select(pl.col("key").unique())
    keys = keys.with_columns(pl.col("key").str.extract_groups(_KEY).alias("k")).unnest("k")
    keys = pl.concat(
        [keys, label_columns(keys["labels"].fill_null("")).drop("labels")], how="horizontal"
    )
    keys = keys.with_columns(
        metric=folded_metric(pl.col("metric"), pl.col),
        identified=pl.any_horizontal(
            pl.col(c).is_not_null() for c in ("host", "gpu", "uuid", "pci_bus")
        )
        | pl.lit(ctx.host is not None),
    ).drop("labels", *FOLDED_LABELS.values())
    parts = parts.join(keys, on="key", how="left", maintain_order="left").drop("key")
    parts = parts.join(per_file, on="file", how="left", maintain_order="left")
    return (
        parts.with_columns(  # what the file stood in for (``stand_ins``), per sample
            guessed_host=pl.col("host").is_null()
            & pl.col("host_fallback").is_not_null()
            & pl.lit(ctx.host is None),
            file_time=pl.col("ts").is_null()
            & pl.col("fallback_time").is_not_null()
            & pl.lit(ctx.time is None),
        )
        .with_columns(
            host=pl.coalesce("host", "host_fallback"),
            metric=pl.when(pl.col("value").is_not_null()).then(pl.col("metric")),
            num=parse_number(pl.col("value")),
            time=sample_time(pl.col("ts"), pl.col("fallback_time")),
        )
        .drop("host_fallback", "fallback_time")
    )


_FLAGS = ("non_numeric", "non_finite", "lone", "bad_time")


def _judged(parts: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """``parts`` with cheap predicates over every line (``_FLAGS``, ``is_bad``); the readable
    reason (``_error``) is only built for the bad ones."""
    lo, hi = ctx.not_before, ctx.latest_plausible()
    num, time = pl.col("num"), pl.col("time")
    parts = parts.with_columns(
        non_numeric=num.is_null() & ~is_str_blank(pl.col("value")),
        non_finite=(num.is_infinite() | num.is_nan()).fill_null(False),
        lone=lone_timestamp(num, pl.col("ts"), ctx),
        bad_time=(time.is_null() | (time < lo) | (time > hi)).fill_null(True),
    )
    is_bad = pl.col("metric").is_null() | pl.any_horizontal(*_FLAGS) | ~pl.col("identified")
    return parts.with_columns(is_bad=is_bad)


def _error(ctx: ParseContext) -> pl.Expr:
    """Why a bad sample line (``_judged``) cannot be stored."""
    time = pl.col("time")
    return (
        pl.when(pl.col("metric").is_null() & pl.col("raw").str.contains(_KEY_ONLY))
        .then(pl.lit("sample line has no value"))
        .when(pl.col("metric").is_null())
        .then(pl.lit("not a Prometheus sample line"))
        .when("non_numeric")
        .then(pl.lit("non-numeric sample value: ") + pl.col("value"))
        .when("non_finite")
        .then(pl.lit("non-finite sample value (not a measurement): ") + pl.col("value"))
        .when("lone")
        .then(
            pl.format(
                (
                    "sample has no value: its only number, {}, is a millisecond timestamp like "
                    "the other lines'"
                ),
                "value",
            )
        )
        .when(~pl.col("identified"))
        .then(
            pl.lit(
                "sample names no GPU and no host (no gpu, UUID, pci_bus_id or Hostname "
                "label); pass --host if the file is one host's scrape"
            )
        )
        .when(time.is_null() & pl.col("ts").is_not_null())
        .then(pl.format("timestamp {} ms is out of range", "ts"))
        .when(time.is_null())
        .then(pl.lit("sample has no timestamp and no --time or file time was given"))
        .otherwise(implausible_time(time, ctx))
    )


def _results(
    n_files: int, parts: pl.DataFrame, meta: pl.DataFrame, ctx: ParseContext
) -> list[ParseResult]:
    """The judged sample lines and metadata of a batch as one ``ParseResult`` per file."""
    bad = parts.filter("is_bad").with_columns(error=_error(ctx))
    good = parts.filter(~pl.col("is_bad"))
    stood_in = {
        f: (STAND_IN_HOST if h else None, STAND_IN_TIME if t else None)
        for f, h, t in good.group_by("file").agg(pl.col("guessed_host", "file_time").any()).rows()
    }
    good = good.drop("guessed_host", "file_time")
    samples = (
        good.drop("line", "raw", "value", "ts", "identified", "is_bad", "path", *_FLAGS)
        .with_columns(
            cluster=pl.lit(ctx.cluster),
            value=sentinel_to_null(pl.col("num")),
            date=pl.col("time").dt.date(),
            source=pl.lit(SOURCE),
            source_file=good["path"],
        )
        .drop("num")
    )
    tables = {
        "gpu_samples": conform("gpu_samples", samples.drop("file")).with_columns(samples["file"]),
        "metric_metadata": metadata_frame(meta, SOURCE),
        "quarantine": quarantine_frame(bad["line"], bad["raw"], bad["error"]).with_columns(
            bad["file"]
        ),
    }
    records = dict(parts.group_by("file").len().rows())
    split = {name: _by_file(df) for name, df in tables.items()}
    empty = {name: df.clear().drop("file") for name, df in tables.items()}
    return [
        ParseResult(
            tables={
                name: split[name].get(i, empty[name]) for name in ("gpu_samples", "metric_metadata")
            },
            quarantine=split["quarantine"].get(i, empty["quarantine"]),
            records=records.get(i, 0),
            stand_ins=frozenset(stood_in.get(i, ())) - {None},
        )
        for i in range(n_files)
    ]


def _by_file(df: pl.DataFrame) -> dict[int, pl.DataFrame]:
    """``df``'s rows per ``file``, in their order, without that column."""
    parts = df.partition_by("file", as_dict=True, include_key=False, maintain_order=True)
    return {key[0]: part for key, part in parts.items()}


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    if re.search(r"^DCGM_[A-Z0-9_]+(\{[^}\n]*\})?\s+[-+]?[0-9.NI]", text, re.MULTILINE):
        return CERTAIN
    if re.search(r"^# (HELP|TYPE) DCGM_", text, re.MULTILINE):
        return 90
    if re.search(r"^DCGM_FI_[A-Z0-9_]+\s*,\s*(gauge|counter|label)\s*,", text, re.MULTILINE):
        return 80
    if re.search(rf"^{_NAME}\{{[^}}\n]*\}}\s+[-+0-9.eE]+(\s+\d+)?$", text, re.MULTILINE):
        return 40  # some other Prometheus text exposition
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="gpu_samples",
    description=(
        "dcgm-exporter /metrics Prometheus text scrapes (also its counters CSV as metadata)"
    ),
    line_oriented=True,
)
