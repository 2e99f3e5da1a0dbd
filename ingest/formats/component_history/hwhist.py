"""HPE ``sat hwhist`` tables (``| xname | FRUID | Timestamp | EventType |``): Hardware State
Manager events of each FRU at each location, folded into one installation per stay."""

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import whole_file_quarantine
from ingest.times import parse_times

from .normalize import field
from .normalize import normalize
from .normalize import with_quarantine

HSM_EVENTS = ("added", "removed", "detected", "scanned")
_COLUMNS = ("xname", "fruid", "timestamp", "eventtype")


def parse_hwhist(lines: pl.DataFrame, data: bytes, ctx: ParseContext) -> ParseResult:
    """One record per FRU stay at one xname; a file whose first table row is not the header is
    one quarantined record."""
    names = (
        [h.strip().lower() for h in lines["raw"][0].strip().strip("|").split("|")]
        if lines.height
        else []
    )
    if not set(_COLUMNS) <= set(names):
        err = (
            "sat hwhist: the first table row is not the header "
            "'| xname | FRUID | Timestamp | EventType |'"
        )
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    at = {n: names.index(n) for n in _COLUMNS}
    df = _events(lines.slice(1), at, ctx).with_columns(_error=_event_error(len(names), at, ctx))
    bad = df.filter(pl.col("_error").is_not_null())
    stays, orphan = _stays(df.filter(pl.col("_error").is_null()))
    return with_quarantine(
        normalize(_canonical(stays), ctx), pl.concat([bad, orphan], how="diagonal_relaxed")
    )


def _events(rows: pl.DataFrame, at: dict[str, int], ctx: ParseContext) -> pl.DataFrame:
    """The table rows' fields: ``xname``, ``fruid``, ``ts`` (its text) and ``time``, ``event``
    (lower case), the field count ``nf`` and ``_dst`` (why a time in a DST change is not read)."""
    return (
        rows.with_columns(
            pl.col("raw")
            .str.strip_chars()
            .str.strip_chars("|")
            .str.split("|")
            .list.eval(pl.element().str.strip_chars())
            .alias("fields")
        )
        .with_columns(
            nf=pl.col("fields").list.len(),
            xname=field(at["xname"]),
            fruid=field(at["fruid"]),
            ts=field(at["timestamp"]),
            event=field(at["eventtype"]).str.to_lowercase(),
        )
        .with_columns(
            time=parse_times(pl.col("ts"), ctx.tz)[0], _dst=parse_times(pl.col("ts"), ctx.tz)[1]
        )
    )


def _event_error(n: int, at: dict[str, int], ctx: ParseContext) -> pl.Expr:
    """Why a row of ``_events`` is no HSM event of a FRU (the first reason that holds), else
    null; ``n`` is the header's column count."""
    text = pl.col("raw").str.strip_chars()
    return (
        pl.when(~text.str.starts_with("|") | ~text.str.ends_with("|"))
        .then(pl.lit("not a table row ('| xname | FRUID | Timestamp | EventType |')"))
        .when(pl.col("nf") != n)
        .then(pl.format(f"expected {n} '|'-separated columns as the header, found {{}}", "nf"))
        .when(pl.col("xname") == "")
        .then(pl.lit("empty xname"))
        .when(pl.col("fruid") == "")
        .then(pl.lit("empty FRUID"))
        .when(pl.col("_dst").is_not_null())
        .then(pl.format("Timestamp: {}", "_dst"))
        .when(pl.col("time").is_null())
        .then(pl.format("unreadable Timestamp '{}'", "ts"))
        .when(implausible_time(pl.col("time"), ctx).is_not_null())
        .then(pl.format("Timestamp: {}", implausible_time(pl.col("time"), ctx)))
        .when(~pl.col("event").is_in(HSM_EVENTS))
        .then(
            pl.format(
                "unknown EventType '{}' (want Added, Removed, Detected or Scanned)",
                field(at["eventtype"]),
            )
        )
    )


def _stays(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(each FRU's stays at each xname: first line and raw text, ``installed_at`` and
    ``removed_at`` texts; the ``Removed`` events with no earlier event there, with ``_error``).
    A Removed event ends a stay; the FRU's next event at that xname starts another."""
    removed = pl.col("event") == "removed"
    stays = (
        events.sort("fruid", "xname", "time", "line")
        .with_columns(
            stay=(removed.cast(pl.Int64).cum_sum() - removed.cast(pl.Int64)).over("fruid", "xname")
        )
        .group_by("fruid", "xname", "stay", maintain_order=True)
        .agg(
            line=pl.col("line").first(),
            raw=pl.col("raw").first(),
            installed_at=pl.col("ts").filter(~removed).first(),
            removed_at=pl.col("ts").filter(removed).first(),
        )
    )
    orphan = stays.filter(pl.col("installed_at").is_null()).with_columns(
        _error=pl.format(
            "Removed at {} with no earlier event of this FRU at {}", "removed_at", "xname"
        )
    )
    return stays.filter(pl.col("installed_at").is_not_null()), orphan


def _canonical(stays: pl.DataFrame) -> pl.DataFrame:
    """The stays as canonical columns: the FRUID (``Type.Maker.Part.Serial``) is the serial, its
    type the class, its middle the model; the xname's node the host, the rest the position. HSM
    does not say why a FRU left: never failed."""
    node = pl.col("xname").str.extract(r"^(x\d+c\d+s\d+b\d+n\d+)", 1)
    parts = pl.col("fruid").str.split(".")
    return stays.sort("line").select(
        "line",
        "raw",
        "installed_at",
        "removed_at",
        component_class=parts.list.first(),
        serial="fruid",
        model=pl.when(parts.list.len() > 2).then(
            parts.list.slice(1, parts.list.len() - 2).list.join(".")
        ),
        host=pl.coalesce(node, pl.col("xname").str.extract(r"^(.+?)[a-z]+\d+$", 1), "xname"),
        position=pl.coalesce(
            pl.when(node.is_not_null())
            .then(pl.col("xname").str.slice(node.str.len_chars()))
            .replace("", None),
            pl.col("xname").str.extract(r"([a-z]+\d+)$", 1),
        ),
        removal_reason=pl.when(pl.col("removed_at").is_not_null()).then(pl.lit("Removed")),
        failed=pl.lit("false"),
    )
