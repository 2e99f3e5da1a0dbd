"""``ipmitool sdr`` / ``sdr list`` / ``sdr elist`` / ``sensor`` text to ``bmc_sensors``.

One record = one sensor line. Layouts, told apart per line by the number of ``|`` columns:

- ``sdr`` / ``sdr list``: ``name | reading | status``            (``Planar 12V | 12.04 Volts | ok``)
- ``sdr elist`` / ``sdr type``: ``name | id | status | entity | reading``
  (``Power Supply 1 | 06h | ok | 10.1 | 0 Watts, Presence detected, Failure detected``)
- ``ipmitool sensor``: ``name | value | unit | status | thresholds x6``

Readings: ``27 degrees C`` / ``4.80 Volts`` -> value and unit (short form: ``C``, ``V``, ``W``,
``RPM``, ``%``); a hex state mask ``0x00`` -> its integer with unit ``mask``; anything else
(``no reading``, ``disabled``, ``Not Readable``, ``Device Present``) keeps a null value. Such a
line is still a reading of that sensor, so it is a row, not a quarantine. ``status`` is the
status column (``ok``, ``ns``, ``cr`` ...), followed by the reading's state text where it has
one (``ok: Presence detected, Failure detected``, ``ns: Not Readable``): a discrete sensor's
state lives only there. ``sensor_type`` follows from the unit (``temperature``, ``fan``,
``voltage``, ``current``, ``power``), else null: SDR lines do not carry the IPMI sensor type.

Time: ``ctx.time`` (``--time``), else the file's modification time; without either, or when it
lies outside the plausible window, every line is quarantined with that reason. A reading that
is not finite (``1e999 Volts``) is quarantined. Identical lines are kept: an SDR dump has no
record ids, and boards do repeat a sensor name with the same reading (two ``Temp`` sensors). Host:
``ctx.host``, else the file name up to its first dot.
"""

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
from ingest.bmc_common import host_from_path
from warehouse.schemas import conform

_STATUS = r"(?:ok|ns|nc|cr|nr|lnr|lcr|lnc|unc|ucr|unr|na|n/a)"
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


def _lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    df = numbered_lines(data, ctx)
    s = pl.col("raw").str.strip_chars()
    return df.filter((s != "") & ~s.str.starts_with("#"))


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    df = _lines(data, ctx)
    df = df.with_columns(p=pl.col("raw").str.split("|").list.eval(pl.element().str.strip_chars()))
    df = df.with_columns(nf=pl.col("p").list.len())

    def f(i):
        return pl.col("p").list.get(i, null_on_oob=True)

    nf = pl.col("nf")
    sensor_unit = (
        pl.when(f(2).str.to_lowercase().is_in(["discrete", "unspecified", "na", ""]))
        .then(f(1))
        .otherwise(pl.format("{} {}", f(1), f(2)))
    )
    reading = pl.when(nf == 3).then(f(1)).when(nf == 5).then(f(4)).when(nf >= 6).then(sensor_unit)
    status = pl.when(nf == 3).then(f(2)).when(nf == 5).then(f(2)).when(nf >= 6).then(f(3))
    when = ctx.time or ctx.mtime
    error = (
        pl.when(~nf.is_in([3, 5]) & (nf < 6))
        .then(
            pl.lit(
                "not an ipmitool sdr/sensor line (want 'name | reading | status' or sdr elist "
                "columns)"
            )
        )
        .when(f(0) == "")
        .then(pl.lit("sensor line without a sensor name"))
        .when(pl.lit(when is None))
        .then(pl.lit("no reading time: pass --time (the sdr output carries none)"))
        .when(~pl.col("value").is_finite().fill_null(True))
        .then(pl.format("non-finite reading: {}", "reading"))
        .otherwise(implausible_time(pl.lit(when, pl.Datetime("us")), ctx))
    )
    df = df.with_columns(reading=reading, status=status.str.to_lowercase())
    df = df.with_columns(value=split_reading(pl.col("reading"))[0]).with_columns(error=error)
    ok, q = split_rejected(df)
    table = _readings(ok, ctx, when) if ok.height else None
    guessed = table is not None and table["host"].is_not_null().any()
    return ParseResult(
        {"bmc_sensors": table} if table is not None else {},
        q,
        ok.height + q.height,
        stand_ins=stand_ins(ctx, table, guessed),
    )


def split_reading(reading: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """``0 Watts, Presence detected`` -> (0.0, ``W``, ``Presence detected``); see module doc."""
    r = reading.str.strip_chars()
    m = r.str.extract_groups(rf"^(?P<num>{_NUM})(?:\s+(?P<unit>[^,]+?))?\s*(?:,\s*(?P<rest>.*))?$")
    num, unit, rest = (m.struct.field(k) for k in ("num", "unit", "rest"))
    is_mask = r.str.contains(r"^0x[0-9a-fA-F]+$")
    mask = r.str.strip_prefix("0x").str.to_integer(base=16, strict=False).cast(pl.Float64)
    value = pl.when(is_mask).then(mask).otherwise(num.cast(pl.Float64, strict=False))
    unit = (
        pl.when(is_mask)
        .then(pl.lit("mask"))
        .when(num.is_not_null())
        .then(
            pl.when(unit.str.to_lowercase().is_in(["unspecified", "discrete"]))
            .then(None)
            .otherwise(sc.unit_expr(unit))
        )
    )
    no_value = r.str.contains(r"(?i)^(?:na|n/a)\b")
    state = pl.when(is_mask | no_value).then(None).when(num.is_not_null()).then(rest).otherwise(r)
    return value, unit, state.replace("", None)


def _readings(ok: pl.DataFrame, ctx: ParseContext, when) -> pl.DataFrame:
    value, unit, state = split_reading(pl.col("reading"))
    status = pl.col("status").replace("", None)
    host = ctx.host or host_from_path(ctx.path)
    out = ok.select(
        time=pl.lit(when, pl.Datetime("us")),
        cluster=pl.lit(ctx.cluster),
        host=pl.lit(host, pl.Utf8),
        sensor=pl.col("p").list.get(0),
        value=value,
        unit=unit,
        status=pl.when(state.is_null())
        .then(status)
        .otherwise(pl.concat_str(status.fill_null("?"), pl.lit(": "), state)),
        source=pl.lit("ipmi"),
        source_file=pl.lit(ctx.path),
        source_line=pl.col("line"),
    ).with_columns(
        sensor_type=pl.col("unit").replace_strict(
            sc.UNIT_SENSOR_TYPE, default=None, return_dtype=pl.Utf8
        )
    )
    return conform("bmc_sensors", out)


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    if re.search(rf"(?im)^[^|\n]+\|\s*[0-9a-f]{{2}}h\s*\|\s*{_STATUS}\s*\|\s*\d+\.\d+\s*\|", text):
        return 90  # sdr elist
    if re.search(rf"(?im)^[^|\n]+\|[^|\n]+\|\s*{_STATUS}\s*$", text):
        return 80  # sdr list
    if re.search(rf"(?im)^[^|\n]+\|\s*(?:{_NUM}|na)\s*\|[^|\n]+\|\s*{_STATUS}\s*\|", text):
        return 70  # ipmitool sensor
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="bmc_sensors",
    description="ipmitool sdr / sdr list / sdr elist / sensor text",
    line_oriented=True,
)
