"""What every layout shares once its records are read into the canonical text columns: the
event's time (absolute, epoch, or relative to ``--time-origin``), its component class, the
reasons a record cannot be stored, and the ``health_events`` rows."""

from __future__ import annotations

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import split_rejected
from ingest.base import stand_ins
from ingest.component_names import CLASS_NAMES
from ingest.times import parse_times
from warehouse.schemas import FAULT_SEP
from warehouse.schemas import conform

# canonical text columns a layout fills (null where its records say nothing)
CANON = (
    "system",
    "host",
    "time",
    "kind",
    "fault",
    "cause",
    "sub_cause",
    "component",
    "component_class",
    "code",
    "severity",
    "action",
    "message",
)
# --time-unit: seconds per unit of a time relative to --time-origin
TIME_UNITS = {"days": 86400.0, "hours": 3600.0, "minutes": 60.0, "s": 1.0, "ms": 0.001}


def category(expr: pl.Expr) -> pl.Expr:
    """A source's name for a cause as a lower-case category: ``GpuXidError`` ->
    ``gpu_xid_error``, ``Human Error`` -> ``human_error``."""
    return (
        expr.str.strip_chars()
        .str.replace_all(r"([A-Z]+)([A-Z][a-z])", "${1}_${2}")
        .str.replace_all(r"([a-z0-9])([A-Z])", "${1}_${2}")
        .str.to_lowercase()
        .str.replace_all(r"[\s\-]+", "_")
        .replace("", None)
    )


def joined(*parts: pl.Expr) -> pl.Expr:
    """The parts that are present, general to specific, as one fault (null: none is)."""
    return pl.concat_str(
        [p.str.strip_chars() for p in parts], separator=FAULT_SEP, ignore_nulls=True
    ).replace("", None)


def event_times(ctx: ParseContext) -> tuple[pl.Expr, pl.Expr]:
    """(naive UTC time, why a present time text gives none) of each record's ``time`` text,
    or its ``time_s`` (epoch seconds) where the layout read a number. With ``--time-origin``
    every time is a number of ``--time-unit`` after it; else an ISO-8601 / export form, epoch
    seconds or milliseconds; a bare small number is refused (a relative time needs its
    origin)."""
    text = pl.col("time").str.strip_chars()
    number = text.cast(pl.Float64, strict=False)
    origin = ctx.options.get("time_origin")
    if origin is not None:
        unit = ctx.options.get("time_unit") or "s"
        since = pl.duration(microseconds=(number * TIME_UNITS[unit] * 1e6).round().cast(pl.Int64))
        time = pl.lit(origin, pl.Datetime("us")) + since
        why = pl.when(text.is_not_null() & number.is_null()).then(
            pl.format(
                f"time '{{}}' is not a number: --time-origin reads every time as {unit} after "
                f"{origin:%Y-%m-%dT%H:%M:%S}",
                text,
            )
        )
        return time, why
    absolute, dst = parse_times(text, ctx.tz, ctx.options.get("time_format"))
    epoch_ms = pl.when(text.str.contains(r"^\d{12,13}(?:\.\d+)?$")).then(
        pl.from_epoch((number * 1e3).cast(pl.Int64), time_unit="us")
    )
    epoch_s = pl.from_epoch((pl.col("time_s") * 1e6).round().cast(pl.Int64), time_unit="us")
    time = pl.coalesce(epoch_s, absolute, epoch_ms)
    why = (
        pl.when(dst.is_not_null())
        .then(dst)
        .when(time.is_null() & number.is_not_null())
        .then(
            pl.format(
                "time '{}' is a number, not a date: times relative to a start need "
                "--time-origin ISO and --time-unit days|hours|s",
                text,
            )
        )
        .when(time.is_null() & text.is_not_null())
        .then(pl.format("unreadable time '{}'", text))
    )
    return time, why


def component_class() -> pl.Expr:
    """The layout's class, else the component's common name looked up
    (``ingest.component_names``), else the component as given, lower case."""
    name = pl.col("component").str.strip_chars().str.to_lowercase()
    return pl.coalesce(
        pl.col("component_class"), name.replace_strict(CLASS_NAMES, default=None), name
    ).replace("", None)


def finish(
    ev: pl.DataFrame, ctx: ParseContext, source: str, host_guessed: bool = False
) -> ParseResult:
    """``health_events`` rows and quarantine rows of a layout's records: ``line``, ``raw``,
    ``_shape`` (the record could not be read) and ``_error`` (the layout refuses it) and the
    ``CANON`` columns (``kind``: start, end, healthy or info), ``time_s`` optional."""
    for c in (*CANON, "_shape", "_error"):
        if c not in ev.columns:
            ev = ev.with_columns(pl.lit(None, pl.Utf8).alias(c))
    if "time_s" not in ev.columns:
        ev = ev.with_columns(time_s=pl.lit(None, pl.Float64))
    time, why = event_times(ctx)
    ev = ev.with_columns(_time=time, _why=why)
    bad_time = implausible_time(pl.col("_time"), ctx)
    host = pl.coalesce(pl.col("host").str.strip_chars().replace("", None), pl.lit(ctx.host))
    ev = ev.with_columns(
        host=host,
        _err=pl.coalesce(
            "_shape",
            "_error",
            pl.when(host.is_null()).then(
                pl.lit("no host (node): name its field with --map host=<theirs>, or --host")
            ),
            pl.when(pl.col("time").is_null() & pl.col("time_s").is_null()).then(
                pl.lit("no time: the event cannot be placed (a field of another name: --map time=)")
            ),
            "_why",
            pl.when(bad_time.is_not_null()).then(pl.format("time: {}", bad_time)),
            pl.when(pl.col("kind").is_null()).then(
                pl.lit("no event kind (start, end, a status): name its field with --map kind=")
            ),
        ),
    )
    ok, q = split_rejected(ev, "_err")
    rows = conform(
        "health_events",
        ok.select(
            time="_time",
            system=pl.coalesce(
                pl.col("system").str.strip_chars().replace("", None), pl.lit(ctx.cluster)
            ),
            host="host",
            kind="kind",
            fault="fault",
            cause=category(pl.col("cause")),
            sub_cause=pl.col("sub_cause").str.strip_chars().replace("", None),
            component_class=component_class(),
            code="code",
            severity=pl.col("severity").str.to_lowercase(),
            action="action",
            message="message",
            source=pl.lit(source),
            source_file=pl.lit(ctx.path),
            source_line="line",
        ),
    )
    return ParseResult(
        {"health_events": rows} if rows.height else {},
        q,
        rows.height + q.height,
        stand_ins=stand_ins(ctx, None, host_guessed and rows.height > 0),
    )
