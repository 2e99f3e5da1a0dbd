"""``ipmitool sel list`` / ``sel elist`` text to ``hw_events`` (one record = one SEL entry line).

``  10b | 09/06/26 | 23:13:59 HKT | Temperature #0xc3 | Upper Non-recoverable going high | Asserted``

- Record ids are hex and only order the log; they are not kept.
- Dates: ipmitool up to 1.8.18 prints ``%m/%d/%Y`` (always month first); later releases print
  ``%x %X %Z`` of the reading host's locale: ``MM/DD/YY`` in C / en_US, ``DD/MM/YY`` in many others,
  12-hour ``10:32:35 PM`` in some. For two-digit-year dates the order is chosen per file:
  ``ctx.options['date_order']`` (``mdy``/``dmy``) if given, else the order under which every
  date is valid, then the one with fewer backward steps in file order (a SEL is chronological),
  then the shorter span (``09/06/26 23:13`` followed by ``10/06/26 00:01`` is one night, not a
  month), then ``mdy``. Two-digit years are 20YY (19YY from 70 up, the IPMI epoch).
- A zone after the time is read through ``ZONE_OFFSETS`` (fixed offsets of unambiguous
  abbreviations and ``+08:00`` forms); ambiguous ones (``CST``, ``IST``, ``BST``, ``MST``, ``GST``)
  and unknown ones are read as ``ctx.tz``, as are times without a zone.
- ``Pre-Init`` entries carry seconds since BMC start, not a date: they are quarantined ("Pre-Init
  timestamp, no real date"): every ``hw_events`` row has a time, because attribution joins on it.
- ``sel elist`` names the sensor (``Temperature Inlet Temp1``), ``sel list`` numbers it
  (``Temperature #0x6a``): the type prefix gives ``component_class`` (``sel_sensor_classes``), the
  rest is ``component_id``. ``code`` is the event text (``Upper Critical going high``): it names
  the failure mode across platforms, where sensor numbers are per-board. ``action`` is
  ``Asserted`` / ``Deasserted``; a deasserted entry is a recovery and has severity ``info``.
- An optional 7th column (``Reading 40 > Threshold 40 degrees C``) joins the message.
- Not records: blank lines, ``#`` comments, the ``SEL has no more entries`` trailer and the
  ``SEL has no entries`` of an empty log. Any other
  line that is not a SEL entry is quarantined, as is an entry dated outside the plausible window
  (a BMC clock never set reads 1970 or 2000-01-01). An exact repeat of an earlier line (two
  dumps of one SEL concatenated) is an ordinary row here: the warehouse stores the entry once
  and counts the repeat as a duplicate (``rows_duplicate``).
- Host: ``ctx.host``, else the file name up to its first dot (``gpu-node-001.sel.txt``).
"""  # noqa: E501 (line 3 is a verbatim SEL entry line; splitting it would misquote it)

from __future__ import annotations

import re

import polars as pl

from ingest import sel_sensor_classes as sc
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import numbered_lines
from ingest.base import split_rejected
from ingest.base import stand_ins
from ingest.bmc_common import event_rows
from ingest.bmc_common import host_from_path
from ingest.times import wall_clock

# Abbreviations with one meaning in practice -> minutes east of UTC.
ZONE_OFFSETS: dict[str, int] = {
    "UTC": 0, "GMT": 0, "Z": 0, "WET": 0, "WEST": 60, "CET": 60, "CEST": 120, "MET": 60,
    "MEST": 120, "EET": 120, "EEST": 180, "MSK": 180, "PKT": 300, "ICT": 420,
    "WIB": 420, "HKT": 480, "SGT": 480, "AWST": 480, "PHT": 480, "KST": 540, "JST": 540,
    "ACST": 570, "AEST": 600, "AEDT": 660, "NZST": 720, "NZDT": 780, "EST": -300, "EDT": -240,
    "CDT": -300, "MDT": -360, "PST": -480, "PDT": -420, "AKST": -540,
    "AKDT": -480, "HST": -600,
}  # fmt: skip

_ROW = re.compile(r"^\s*[0-9a-fA-F]+\s*\|")
_TRAILER = r"(?i)^\s*SEL has no (?:more )?entries\s*$"  # end of a listing; an empty SEL


def _lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    df = numbered_lines(data, ctx)
    stripped = pl.col("raw").str.strip_chars()
    return df.filter(
        (stripped != "") & ~stripped.str.starts_with("#") & ~pl.col("raw").str.contains(_TRAILER)
    )


def _zone_offset(zone: pl.Expr) -> pl.Expr:
    """Minutes east of UTC for a zone suffix, or null (then ``ctx.tz`` applies)."""
    named = zone.str.to_uppercase().replace_strict(
        ZONE_OFFSETS, default=None, return_dtype=pl.Int32
    )
    m = zone.str.extract_groups(r"^(?:UTC|GMT)?([+-])(\d{1,2}):?(\d{2})?$")
    sign = pl.when(m.struct.field("1") == "-").then(-1).otherwise(1)
    numeric = sign * (
        m.struct.field("2").cast(pl.Int32) * 60 + m.struct.field("3").cast(pl.Int32).fill_null(0)
    )
    return pl.coalesce(named, numeric.cast(pl.Int32))


def _dates(df: pl.DataFrame) -> pl.DataFrame:
    """Month-first and day-first readings of each distinct (a, b, year) date, null where the
    calendar date does not exist under that order."""
    uniq = df.select("a", "b", "year").unique().drop_nulls()
    for name, month, day in (("mdy", "a", "b"), ("dmy", "b", "a")):
        s = pl.format("{}-{}-{}", "year", pl.col(month).str.zfill(2), pl.col(day).str.zfill(2))
        uniq = uniq.with_columns(s.str.to_date("%Y-%m-%d", strict=False).alias(name))
    return df.join(uniq, on=["a", "b", "year"], how="left", maintain_order="left")


def _choose_order(df: pl.DataFrame, ctx: ParseContext) -> bool:
    """True for month-first. See the module docstring for the rule."""
    forced = str(ctx.options.get("date_order", "")).lower()
    if forced in ("mdy", "dmy"):
        return forced == "mdy"
    scores = {}
    for month_first, col in ((True, "mdy"), (False, "dmy")):
        t = df.select(pl.col(col).cast(pl.Datetime("us")) + pl.col("tod")).to_series()
        valid = t.drop_nulls()
        backward = int((valid.diff().dt.total_seconds() < 0).sum()) if valid.len() > 1 else 0
        span = (valid.max() - valid.min()).total_seconds() if valid.len() > 1 else 0.0
        scores[month_first] = (int(t.is_null().sum()), backward, span, 0 if month_first else 1)
    return min(scores, key=scores.get)


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    df = _times(_date_and_clock(_lines(data, ctx)), ctx)
    ok, quarantine = split_rejected(df.with_columns(error=_error(ctx)))
    table = _events(ok, ctx) if ok.height else None
    tables = {"hw_events": table} if table is not None else {}
    guessed = table is not None and table["host"].is_not_null().any()
    return ParseResult(
        tables, quarantine, ok.height + quarantine.height, stand_ins=stand_ins(ctx, table, guessed)
    )


def _part(i: int) -> pl.Expr:
    """The ``i``-th ``|``-separated field of a line (null past the last)."""
    return pl.col("p").list.get(i, null_on_oob=True)


def _date_and_clock(df: pl.DataFrame) -> pl.DataFrame:
    """The lines split into fields, their date and clock parts read (24-hour ``hh``)."""
    parts = pl.col("raw").str.split("|").list.eval(pl.element().str.strip_chars())
    df = df.with_columns(p=parts, is_row=pl.col("raw").str.contains(_ROW.pattern))
    df = df.with_columns(nf=pl.col("p").list.len(), d=_part(1), c=_part(2))
    date = pl.col("d").str.extract_groups(r"^(\d{1,2})/(\d{1,2})/(\d{2}|\d{4})$")
    clock = pl.col("c").str.extract_groups(
        r"^(\d{1,2}):(\d{2}):(\d{2})(?:\s*([AaPp][Mm]))?(?:\s*(\S+))?$"
    )
    df = df.with_columns(date=date, clock=clock).with_columns(
        a=pl.col("date").struct.field("1"),
        b=pl.col("date").struct.field("2"),
        yy=pl.col("date").struct.field("3"),
        hh=pl.col("clock").struct.field("1").cast(pl.Int64),
        mm=pl.col("clock").struct.field("2").cast(pl.Int64),
        ss=pl.col("clock").struct.field("3").cast(pl.Int64),
        ampm=pl.col("clock").struct.field("4").str.to_uppercase(),
        zone=pl.col("clock").struct.field("5"),
    )
    yy = pl.col("yy")
    hh = pl.col("hh")
    return df.with_columns(
        two_digit=yy.str.len_chars() == 2,
        year=pl.when(yy.str.len_chars() == 4)
        .then(yy)
        .otherwise(
            pl.when(yy.cast(pl.Int32) >= 70).then(pl.lit("19")).otherwise(pl.lit("20")) + yy
        ),
        hh=pl.when(pl.col("ampm") == "PM")
        .then(hh % 12 + 12)
        .when(pl.col("ampm") == "AM")
        .then(hh % 12)
        .otherwise(hh),
        pre_init=pl.col("d").str.to_lowercase().str.replace_all(r"[^a-z]", "") == "preinit",
    )


def _times(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Each entry's UTC ``time`` (the file's date order) and ``dst``: why DST leaves it open."""
    hh = pl.col("hh")
    valid_clock = (hh < 24) & (pl.col("mm") < 60) & (pl.col("ss") < 61)
    df = _dates(df).with_columns(
        tod=pl.when(valid_clock).then(
            pl.duration(hours=pl.col("hh"), minutes=pl.col("mm"), seconds=pl.col("ss"))
        )
    )
    month_first = _choose_order(df.filter(pl.col("is_row") & pl.col("two_digit")), ctx)
    forced_dmy = str(ctx.options.get("date_order", "")).lower() == "dmy"
    day = (
        pl.when(pl.col("two_digit") | pl.lit(forced_dmy))
        .then(pl.col("mdy" if month_first else "dmy"))
        .otherwise(pl.col("mdy"))
    )
    df = df.with_columns(
        naive=day.cast(pl.Datetime("us")) + pl.col("tod"), offset=_zone_offset(pl.col("zone"))
    )
    # a SEL lists its records in the order the BMC wrote them: that order places a repeated DST hour
    local, dst = wall_clock(pl.col("naive"), ctx.tz, [])
    zoned = pl.col("offset").is_not_null()
    return df.with_columns(
        time=pl.when(zoned)
        .then(pl.col("naive") - pl.duration(minutes=pl.col("offset")))
        .otherwise(local),
        dst=pl.when(~zoned & pl.col("is_row")).then(dst),
    )


def _error(ctx: ParseContext) -> pl.Expr:
    """Why a line cannot be stored (the first reason that applies), null for a good entry."""
    return (
        pl.when(~pl.col("is_row") | (pl.col("nf") < 5))
        .then(
            pl.lit(
                "not an ipmitool sel line (want 'id | date | time | sensor | event | direction')"
            )
        )
        .when(pl.col("pre_init"))
        .then(pl.lit("Pre-Init timestamp, no real date"))
        .when(pl.col("dst").is_not_null())
        .then("dst")
        .when(pl.col("time").is_null())
        .then(
            pl.format(
                "unreadable SEL date/time '{} {}'", _part(1).fill_null(""), _part(2).fill_null("")
            )
        )
        .otherwise(implausible_time(pl.col("time"), ctx))
    )


def _events(ok: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    direction = _part(5)
    is_dir = direction.str.contains(r"(?i)^(de)?asserted$")
    extra = (
        pl.concat_list(
            pl.when(is_dir).then(pl.lit(None, pl.Utf8)).otherwise(direction),
            pl.col("p").list.slice(6),
        )
        .list.drop_nulls()
        .list.join(" | ")
    )
    df = ok.select(
        "time",
        "line",
        "raw",
        record_id=_part(0).str.strip_chars(),
        sensor=_part(3),
        event=_part(4),
        action=pl.when(is_dir).then(direction),
        extra=extra,
        recovered=direction.str.to_lowercase() == "deasserted",
    )
    # per distinct sensor column: its type prefix and the id / name after it
    sensors = df.select("sensor").unique()
    stype, sname = sc.split_sensor(pl.col("sensor"))
    sensors = sensors.with_columns(stype=stype, sname=sname)
    df = df.join(sensors, on="sensor", how="left", nulls_equal=True, maintain_order="left")
    df = sc.with_class_and_severity(df, "stype", "sname", "event", "recovered")
    message = pl.format("{}: {}", "sensor", "event") + pl.when(pl.col("extra") != "").then(
        pl.lit("; ") + pl.col("extra")
    ).otherwise(pl.lit(""))
    host = ctx.host or host_from_path(ctx.path)
    return event_rows(
        df,
        ctx,
        "line",
        host,
        component_class=pl.col("component_class"),
        component_id=pl.col("sname").str.strip_prefix("#"),
        event_type=pl.lit("sel"),
        code=pl.col("event"),
        record_id=pl.col("record_id"),
        severity=pl.col("text_severity"),
        action=pl.col("action"),
        message=message,
        source=pl.lit("ipmi"),
    )


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    rows = re.compile(
        r"^\s*[0-9a-fA-F]+\s*\|\s*(?:\d{1,2}/\d{1,2}/\d{2,4}|Pre-Init)\s*\|",
        re.IGNORECASE | re.MULTILINE,
    )
    if rows.search(text):
        return 90
    if re.search(_TRAILER, text, re.MULTILINE):
        return 60
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="hw_events",
    description="ipmitool sel list / sel elist text",
    line_oriented=True,
)
