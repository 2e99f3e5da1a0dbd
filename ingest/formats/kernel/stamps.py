"""Time layouts: a candidate line's stamp fields to naive UTC ``time``, or the reason it has
none (``time_error``)."""

from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl

from ingest.base import ParseContext
from ingest.base import implausible_time
from ingest.times import local_to_utc

from .boots import boot_times
from .patterns import REL_FIRST
from .patterns import REL_HEADER


def reltime_headers(buf: bytes, cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The ``[Jan21 04:41]`` minute headers of a ``dmesg --time-format=reltime`` chunk (line,
    month, day, hh:mm), so that a ``+delta`` line can take the minute of the header above it even
    when the header is no fault line or sits in an earlier chunk. Only reltime chunks are
    scanned."""
    rel = REL_FIRST.match(buf) or (
        cand.height
        and cand["raw"].str.contains(r"^[^\[]{0,20}\[(?:\s*\+\d|[A-Z][a-z]{2} ?\d)").any()
    )
    if not rel:
        return pl.DataFrame()
    found = [(m.start(), *(g.decode() for g in m.groups())) for m in REL_HEADER.finditer(buf)]
    if not found:
        return pl.DataFrame()
    newlines = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)
    at = np.array([f[0] for f in found], dtype=np.int64)
    return pl.DataFrame(
        {
            "line": np.searchsorted(newlines, at) + (ctx.line_offset + 1),
            "h_rmon": [f[1] for f in found],
            "h_rday": [f[2] for f in found],
            "h_rhm": [f[3] for f in found],
        },
        schema={"line": pl.Int64, "h_rmon": pl.Utf8, "h_rday": pl.Utf8, "h_rhm": pl.Utf8},
    )


_MAX_UPTIME_S = 100 * 365 * 86400  # an uptime beyond a century is a corrupt stamp


def times(df: pl.DataFrame, headers: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Add ``time`` (naive UTC) and ``time_error`` (why it is null, true for that line) from the
    prefix groups, the file's boot banners (``setting system clock``) and reltime headers."""
    tz = ctx.tz or "UTC"
    ref = ctx.time or ctx.mtime
    df = _with_reltime(df.sort("line"), headers)
    # a space in a strptime format matches any run of spaces (``Aug  2``): no normalising pass
    # a log is written in time order per host: that order decides the hour a DST fall-back repeats
    order = [pl.col("ihost").fill_null("")]
    ctime, ctime_dst = local_to_utc(pl.col("ctime"), tz, "%a %b %d %H:%M:%S %Y", order)
    iso, iso_dst = _iso(tz, order)
    sys_t, sys_dst = _syslog(ref, tz, order)
    up_s = pl.coalesce(
        pl.col("up").cast(pl.Float64, strict=False),
        pl.col("kmsg").cast(pl.Float64, strict=False) / 1e6,
        pl.col("j_mono").cast(pl.Float64, strict=False) / 1e6,
    )
    has_abs = pl.any_horizontal(
        pl.col(c).is_not_null() for c in ("ctime", "iso", "unix", "j_rt", "sys", "rel")
    )
    df = df.with_columns(
        abs_t=pl.when(pl.col("ctime").is_not_null())
        .then(ctime)
        .when(pl.col("iso").is_not_null())
        .then(iso)
        .when(pl.col("unix").is_not_null() | pl.col("j_rt").is_not_null())
        .then(_epoch())
        .when(pl.col("sys").is_not_null() | pl.col("rel").is_not_null())
        .then(sys_t),
        has_abs=has_abs,
        up_us=pl.when(up_s.is_between(0, _MAX_UPTIME_S)).then((up_s * 1e6).round().cast(pl.Int64)),
        has_up=up_s.is_not_null(),
    )
    df = boot_times(df, ctx)
    since_boot = pl.col("boot") + pl.duration(microseconds=pl.col("up_us"))
    time = (
        pl.when(pl.col("has_abs"))
        .then(pl.col("abs_t"))
        .when(pl.col("has_up"))
        .then(since_boot)
        .when(pl.col("rdelta").is_null())  # a reltime '+delta' line without its header has no time
        .then(pl.lit(ctx.time, dtype=pl.Datetime("us")))
    )
    err = _time_error(ref is None, up_s, ctime_dst, iso_dst, sys_dst)
    df = df.with_columns(time=time)
    return df.with_columns(
        time_error=pl.when(pl.col("time").is_null())
        .then(err)
        .otherwise(implausible_time(pl.col("time"), ctx))
    )


def _with_reltime(df: pl.DataFrame, headers: pl.DataFrame) -> pl.DataFrame:
    """``rel``: a reltime line's own ``[Mon DD HH:MM]`` minute, or for a ``+delta`` line the
    minute of the latest header above it."""
    if headers.height:
        df = df.join_asof(
            headers.sort("line"), on="line", strategy="backward", check_sortedness=False
        )
    else:
        df = df.with_columns(
            h_rmon=pl.lit(None, pl.Utf8), h_rday=pl.lit(None, pl.Utf8), h_rhm=pl.lit(None, pl.Utf8)
        )
    rel_own = pl.format("{} {} {}:00", "rmon", "rday", "rhm")
    rel_hdr = pl.when(pl.col("rdelta").is_not_null()).then(
        pl.format("{} {} {}:00", "h_rmon", "h_rday", "h_rhm")
    )
    return df.with_columns(rel=pl.coalesce(rel_own, rel_hdr))


def _iso(tz: str, order: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
    """(time, DST reason) of an ISO stamp: ``Z`` or an offset where it has one, else local."""
    iso_base = pl.col("iso").str.replace(" ", "T").str.replace(",", ".")
    off = pl.col("off").str.extract_groups(r"^([+-])(\d\d):?(\d\d)$")
    off_s = pl.when(off.struct.field("1") == "-").then(-1).otherwise(1) * (
        off.struct.field("2").cast(pl.Int64) * 3600 + off.struct.field("3").cast(pl.Int64) * 60
    )
    iso_naive = iso_base.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    iso_local, iso_dst = local_to_utc(iso_base, tz, "%Y-%m-%dT%H:%M:%S%.f", order)
    iso = (
        pl.when(pl.col("off") == "Z")
        .then(iso_naive)
        .when(pl.col("off").is_not_null())
        .then(iso_naive - pl.duration(seconds=off_s))
        .otherwise(iso_local)
    )
    return iso, iso_dst


def _epoch() -> pl.Expr:
    """The time of a journald ``short-unix`` stamp or ``__REALTIME_TIMESTAMP`` (null when out of
    range)."""
    epoch_us = pl.coalesce(
        (pl.col("unix").cast(pl.Float64, strict=False) * 1e6).round().cast(pl.Int64, strict=False),
        pl.col("j_rt").cast(pl.Int64, strict=False),
    )
    return pl.when(epoch_us.abs() < _MAX_UPTIME_S * 10**6).then(
        pl.from_epoch(epoch_us, time_unit="us")
    )


def _syslog(ref: datetime | None, tz: str, order: list[pl.Expr]) -> tuple[pl.Expr, pl.Expr]:
    """(time, DST reason) of a year-less syslog or reltime stamp: the year that puts it not
    after the reference time (``ref``); null without one."""
    if ref is None:
        return pl.lit(None, dtype=pl.Datetime("us")), pl.lit(None, pl.Utf8)
    fmt = "%Y %b %d %H:%M:%S%.f"
    sys_s = pl.coalesce("sys", "rel")
    this_year, this_dst = local_to_utc(pl.lit(f"{ref.year} ") + sys_s, tz, fmt, order)
    last_year, last_dst = local_to_utc(pl.lit(f"{ref.year - 1} ") + sys_s, tz, fmt, order)
    # clock skew / zone slack before deciding the line belongs to the previous year
    late = pl.lit(ref + timedelta(days=1), dtype=pl.Datetime("us"))
    this_wall = (pl.lit(f"{ref.year} ") + sys_s).str.to_datetime(fmt, strict=False, time_unit="us")
    this_first = (this_wall <= late).fill_null(False)
    return (
        pl.when(this_first).then(this_year).otherwise(last_year),
        pl.when(this_first).then(this_dst).otherwise(last_dst),
    )


def _time_error(
    no_ref: bool, up_s: pl.Expr, ctime_dst: pl.Expr, iso_dst: pl.Expr, sys_dst: pl.Expr
) -> pl.Expr:
    """Why a line's stamp gives no time, the first reason true for it (``*_dst``: what a local
    stamp's DST change says)."""
    unparseable = pl.lit("unparseable local timestamp")
    no_year = "timestamp has no year and no reference time; pass --time"
    return (
        pl.when(pl.col("sys").is_not_null() & no_ref)
        .then(pl.lit("syslog " + no_year))
        .when(pl.col("rel").is_not_null() & no_ref)
        .then(pl.lit("dmesg reltime " + no_year))
        .when(pl.col("rdelta").is_not_null() & pl.col("rel").is_null())
        .then(
            pl.lit(
                "dmesg reltime '+delta' stamp with no '[Mon DD HH:MM]' header line before it "
                "in the file"
            )
        )
        .when(pl.col("j_rt").is_not_null() | pl.col("unix").is_not_null())
        .then(pl.lit("epoch timestamp out of range"))
        .when(~pl.col("has_abs") & pl.col("has_up") & pl.col("up_us").is_null())
        .then(pl.format("uptime stamp {} s is out of range", up_s.cast(pl.Utf8)))
        .when(~pl.col("has_abs") & pl.col("has_up"))
        .then(
            pl.lit(
                "uptime stamp and no boot time (no 'setting system clock' line before it in "
                "this boot); pass the boot time as --time"
            )
        )
        .when(pl.col("dlt").is_not_null())
        .then(
            pl.lit(
                "dmesg delta stamp gives only the gap to the previous line, no time; pass --time"
            )
        )
        .when(~pl.col("has_abs"))
        .then(pl.lit("kernel line without a timestamp; pass --time"))
        .when(pl.col("ctime").is_not_null())
        .then(pl.coalesce(ctime_dst, unparseable))
        .when(pl.col("iso").is_not_null())
        .then(pl.coalesce(iso_dst, unparseable))
        .otherwise(pl.coalesce(sys_dst, unparseable))
    )
