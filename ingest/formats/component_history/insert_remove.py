"""The insert / remove layout with events (``SN,location,insert,remove,[duration,out,]event``,
OLCF's Titan ``gc_full.csv``): installation rows, event rows of an installation, and every event
as a ``failures`` row too."""

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.times import parse_times
from warehouse.schemas import conform

from .normalize import field
from .normalize import file_class
from .normalize import header_key
from .normalize import normalize
from .normalize import with_quarantine

EVENT_CLASSES = {"DBE": "gpu_memory", "OTB": "gpu"}  # Titan's events in the docs/design.md taxonomy


def parse_insert_remove(recs: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    """One record per installation row (a row with an ``insert`` time) and per row that is
    neither an installation nor a readable event; event rows that are no installation are
    ``failures`` rows only."""
    df = _rows(recs, ctx)
    bad = df.filter(pl.col("_error").is_not_null())
    ivs = df.filter(pl.col("_error").is_null() & pl.col("ins").is_not_null()).with_columns(
        inst=parse_times(pl.col("ins"), ctx.tz)[0]
    )
    ev = df.filter(pl.col("_error").is_null() & pl.col("ins").is_null())
    ev = ev.with_columns(_error=_event_error(ctx))
    bad = pl.concat([bad, ev.filter(pl.col("_error").is_not_null())], how="diagonal_relaxed")
    ev = ev.filter(pl.col("_error").is_null())
    ivs = _with_events(ivs, ev)
    res = with_quarantine(normalize(_canonical(ivs, file_class(ctx) or "gpu"), ctx), bad)
    stored = (
        res.tables["component_history"]["source_line"]
        if res.tables
        else pl.Series([], dtype=pl.Int64)
    )
    events = pl.concat(
        [ivs.filter(pl.col("line").is_in(stored.implode()) & pl.col("ev").is_not_null()), ev],
        how="diagonal_relaxed",
    )
    failures = _failures(events, ctx)
    if failures.height:
        res.tables["failures"] = failures
    return res


def _rows(recs: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The data rows' fields by header name (``sn``, ``loc``, ``ins``, ``rem`` and its time
    ``t``, ``out``, ``ev``) and ``_error``: why a row is neither an installation nor an event."""
    header = [header_key(h) for h in recs["fields"][0]]
    at = {h: i for i, h in enumerate(header)}
    n = len(header)

    def value(name):
        return (
            field(at[name]).str.strip_chars().replace("", None)
            if name in at
            else pl.lit(None, pl.Utf8)
        )

    df = (
        recs.slice(1)
        .with_columns(
            sn=value("sn"),
            loc=value("location"),
            ins=value("insert"),
            rem=value("remove"),
            out=value("out").str.to_lowercase(),
            ev=value("event"),
            nf=pl.col("fields").list.len(),
        )
        .with_columns(
            t=parse_times(pl.col("rem"), ctx.tz)[0], _dst=parse_times(pl.col("rem"), ctx.tz)[1]
        )
    )
    error = (
        pl.when(pl.col("_shape").is_not_null())
        .then("_shape")
        .when(pl.col("nf") != n)
        .then(pl.format(f"expected {n} fields separated by ',' (as the header), found {{}}", "nf"))
        .when(pl.col("ins").is_null() & pl.col("ev").is_null())
        .then(pl.lit("neither an installation (no insert time) nor an event (no event)"))
    )
    return df.with_columns(_error=error)


def _event_error(ctx: ParseContext) -> pl.Expr:
    """Why an event row that is no installation cannot be stored, else null."""
    excluded = list(ctx.options.get("exclude_hosts", ()))
    return (
        pl.when(pl.col("_dst").is_not_null())
        .then(pl.format("event {}: {}", "ev", "_dst"))
        .when(pl.col("t").is_null())
        .then(pl.format("event {}: unreadable time '{}'", "ev", pl.col("rem").fill_null("")))
        .when(implausible_time(pl.col("t"), ctx).is_not_null())
        .then(pl.format("event time: {}", implausible_time(pl.col("t"), ctx)))
        .when(pl.col("loc").is_null())
        .then(pl.lit("event without a location"))
        .when(pl.col("loc").is_in(excluded))
        .then(pl.format("host {} excluded (--exclude-hosts)", "loc"))
    )


def _with_events(ivs: pl.DataFrame, ev: pl.DataFrame) -> pl.DataFrame:
    """The installations with ``_events``: the events of each, joined. An event row belongs to
    the serial's latest installation at that location starting at or before it."""
    owner = (
        ev.join(ivs.select("sn", "loc", iline="line", inst="inst"), on=["sn", "loc"])
        .filter(pl.col("inst") <= pl.col("t"))
        .sort("inst", "iline")
        .group_by("line")
        .agg(pl.col("iline").last())
    )
    attached = (
        ev.join(owner, on="line").group_by("iline")
        .agg(_events=pl.col("ev").unique(maintain_order=True).str.join(", "))
    )  # fmt: skip
    return ivs.join(attached, left_on="line", right_on="iline", how="left")


def _canonical(ivs: pl.DataFrame, cls: str) -> pl.DataFrame:
    """The installations as canonical columns. One not ``out`` and without its own event whose
    remove is the file's last time is still in service (removed_at null); an installation
    failed when it ended with an event, or was removed after one of its events."""
    last = ivs["t"].drop_nulls().max() if ivs.height else None
    in_service = (
        pl.col("ev").is_null()
        & (pl.col("out").fill_null("") != "true")
        & (pl.col("t") == pl.lit(last))
    )
    failed = pl.col("ev").is_not_null() | (pl.col("_events").is_not_null() & ~in_service)
    return ivs.select(
        "line",
        "raw",
        serial="sn",
        component_class=pl.lit(cls),
        host="loc",
        position=pl.lit(cls),
        installed_at="ins",
        removed_at=pl.when(in_service).then(pl.lit(None, pl.Utf8)).otherwise("rem"),
        removal_reason=pl.coalesce("ev", "_events"),
        failed=pl.when(failed).then(pl.lit("true")).otherwise(pl.lit("false")),
    )


def _failures(events: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """``failures`` rows of the event rows: start = the event time, no repair time."""
    return conform(
        "failures",
        events.sort("line").select(
            system=pl.lit(ctx.cluster),
            host="loc",
            start_time="t",
            repair_known=pl.lit(False),
            cause=pl.lit("hardware"),
            sub_cause="ev",
            component_class=pl.col("ev").replace_strict(EVENT_CLASSES, default=None),
            serial="sn",
            source=pl.lit("component-history"),
            source_file=pl.lit(ctx.path),
            source_line="line",
        ),
    )
