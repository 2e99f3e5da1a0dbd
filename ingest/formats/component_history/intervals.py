"""The inventory-intervals layout: ``serial | location | first seen | last seen`` rows (a blank
serial continues the one above) and `` | | EVENT | time`` rows marking the serial's failure."""

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import whole_file_quarantine
from ingest.times import parse_times

from .normalize import field
from .normalize import file_class
from .normalize import normalize
from .normalize import with_quarantine


def parse_intervals(lines: pl.DataFrame, data: bytes, ctx: ParseContext) -> ParseResult:
    """One record per interval row; the class comes from the file's name, else the whole file
    is one quarantined record saying so."""
    cls = file_class(ctx)
    if cls is None:
        err = (
            "component history: a 'serial | location | first seen | last seen' listing does "
            "not say which "
            "component it lists; name the file after it (e.g. gpu_history.txt, psu_history.txt)"
        )
        return ParseResult(
            {}, whole_file_quarantine(data, err, int(lines["line"][0]) if lines.height else 1), 1
        )
    df = _classified(lines)
    bad = df.filter(pl.col("_error").is_not_null())
    ivs = df.filter(pl.col("_error").is_null() & (pl.col("kind") == "interval")).with_columns(
        inst=parse_times(pl.col("a"), ctx.tz)[0], rem=parse_times(pl.col("b"), ctx.tz)[0]
    )
    ev = df.filter(pl.col("_error").is_null() & (pl.col("kind") == "event")).with_columns(
        t=parse_times(pl.col("b"), ctx.tz)[0], _dst=parse_times(pl.col("b"), ctx.tz)[1]
    )
    ivs, orphan = _with_events(ivs, ev)
    return with_quarantine(
        normalize(_canonical(ivs, cls), ctx), pl.concat([bad, orphan], how="diagonal_relaxed")
    )


def _classified(lines: pl.DataFrame) -> pl.DataFrame:
    """Each line's fields (``sn``, ``loc``, ``a``, ``b``), its ``kind`` (interval, event or
    bad), the ``serial`` it belongs to (a blank one continues the serial above) and ``_error``."""
    fields = pl.col("raw").str.split("|").list.eval(pl.element().str.strip_chars())
    df = lines.with_columns(fields=fields, nf=fields.list.len()).with_columns(
        sn=field(0), loc=field(1), a=field(2), b=field(3)
    )
    kind = (
        pl.when(pl.col("nf") != 4).then(pl.lit("bad"))
        .when(pl.col("loc") != "").then(pl.lit("interval"))
        .when((pl.col("sn") == "") & (pl.col("a") != "")).then(pl.lit("event"))
        .otherwise(pl.lit("bad"))
    )  # fmt: skip
    df = df.with_columns(kind=kind).with_columns(
        serial=pl.when((pl.col("kind") == "interval") & (pl.col("sn") != ""))
        .then("sn")
        .forward_fill()
    )
    return df.with_columns(_error=_line_error())


def _line_error() -> pl.Expr:
    """Why a line is neither an interval nor an event of a serial, else null."""
    return (
        pl.when(pl.col("nf") != 4)
        .then(
            pl.format(
                "expected 4 '|'-separated fields (serial | location | first seen | last seen, "
                "or ' | | EVENT | time'), found {}",
                "nf",
            )
        )
        .when(pl.col("kind") == "bad")
        .then(
            pl.lit(
                "neither an installation (a location in field 2) nor an event (its name in field 3)"
            )
        )
        .when(pl.col("serial").is_null())
        .then(
            pl.format(
                "a{} row with a blank serial before any serial",
                pl.when(pl.col("kind") == "event")
                .then(pl.lit("n event"))
                .otherwise(pl.lit(" continuation")),
            )
        )
    )


def _with_events(ivs: pl.DataFrame, ev: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the intervals with their events' ``reason``, latest time ``t_max`` and its text
    ``t_text``, the events no interval owns with ``_error``). An event belongs to the serial's
    latest installation that starts at or before it."""
    owner = (
        ev.join(ivs.select("serial", iline="line", inst="inst"), on="serial")
        .filter(pl.col("inst") <= pl.col("t"))
        .sort("inst", "iline")
        .group_by("line")
        .agg(pl.col("iline").last())
    )
    ev = ev.join(owner, on="line", how="left")
    orphan = ev.filter(pl.col("iline").is_null()).with_columns(
        _error=pl.when(pl.col("_dst").is_not_null())
        .then(pl.format("event time: {}", "_dst"))
        .when(pl.col("t").is_null())
        .then(pl.format("unreadable event time '{}'", "b"))
        .otherwise(
            pl.format(
                "{} at {} for serial {}: no readable installation of that serial starts at or "
                "before it",
                "a",
                "b",
                "serial",
            )
        )
    )
    fail = (
        ev.filter(pl.col("iline").is_not_null())
        .group_by("iline")
        .agg(reason=pl.col("a").unique(maintain_order=True).str.join(", "), t_max=pl.col("t").max(),
             t_text=pl.col("b").sort_by("t").last())
    )  # fmt: skip
    return ivs.join(fail, left_on="line", right_on="iline", how="left"), orphan


def _canonical(ivs: pl.DataFrame, cls: str) -> pl.DataFrame:
    """The intervals as canonical columns: a unit with an event failed, removed at the later of
    its last sighting and its latest event."""
    later = pl.col("t_max").is_not_null() & (
        pl.col("rem").is_null() | (pl.col("t_max") > pl.col("rem"))
    )
    return ivs.select(
        "line",
        "raw",
        "serial",
        component_class=pl.lit(cls),
        host=pl.col("loc"),
        position=pl.lit(cls),
        installed_at="a",
        removed_at=pl.when(later).then("t_text").otherwise("b"),
        removal_reason="reason",
        failed=pl.when(pl.col("t_max").is_not_null())
        .then(pl.lit("true"))
        .otherwise(pl.lit("false")),
    )
