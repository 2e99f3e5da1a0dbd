"""Time parsing shared by parsers: local or export time strings to naive UTC, Slurm durations."""

from __future__ import annotations

import polars as pl

NULL_TIMES = ["", "Unknown", "None", "N/A", "(null)", "0"]


def local_to_utc(expr: pl.Expr, tz: str, fmt: str | None = None) -> pl.Expr:
    """Parse zone-less timestamps written in ``tz``; return naive UTC (null when unparseable).

    Ambiguous wall-clock times at a DST fall-back take the earlier instant; times that do not
    exist (spring-forward gap) become null rather than a wrong instant. Where a record carries
    evidence to decide (a job's Elapsed), use ``local_candidates`` instead.
    """
    return local_candidates(expr, tz, fmt)[0]


def local_candidates(expr: pl.Expr, tz: str, fmt: str | None = None) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(earliest, latest, nonexistent) readings of zone-less timestamps written in ``tz``: the
    two naive UTC instants a wall-clock time can be (they differ only in the hour a DST
    fall-back repeats; both null when unparseable or in a spring-forward gap), and whether
    the text is a valid time that does not exist in ``tz`` (Boolean)."""
    parsed = expr.str.strip_chars().str.to_datetime(format=fmt, strict=False, time_unit="us")
    if tz.upper() == "UTC":
        return parsed, parsed, pl.lit(False)
    early, late = (
        parsed.dt.replace_time_zone(tz, ambiguous=a, non_existent="null").dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        for a in ("earliest", "latest")
    )
    return early, late, parsed.is_not_null() & early.is_null()


def slurm_duration_s(expr: pl.Expr) -> pl.Expr:
    """``[D-]HH:MM:SS[.fff]`` / ``MM:SS`` / ``MM:SS.fff`` to seconds; UNLIMITED etc. to null."""
    s = expr.str.strip_chars()
    m = s.str.extract_groups(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
    days = m.struct.field("1").cast(pl.Float64).fill_null(0)
    hours = m.struct.field("2").cast(pl.Float64).fill_null(0)
    mins = m.struct.field("3").cast(pl.Float64)
    secs = m.struct.field("4").cast(pl.Float64)
    return days * 86400 + hours * 3600 + mins * 60 + secs


# Tried in order; zone-aware forms first. All are applied vectorized and coalesced.
AWARE_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z")
NAIVE_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
    "%Y-%m-%d", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y", "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M", "%d.%m.%Y", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
)  # fmt: skip


def parse_times(expr: pl.Expr, tz: str, fmt: str | None = None) -> pl.Expr:
    """Several export time forms, vectorized: the first format that parses wins; naive UTC."""
    s = expr.str.strip_chars().str.replace(r"[zZ]$", "+00:00").str.replace(r" UTC$", "+00:00")
    aware = pl.coalesce(
        [s.str.to_datetime(f, strict=False, time_zone="UTC", time_unit="us") for f in AWARE_FORMATS]
    ).dt.replace_time_zone(None)
    naive_formats = (fmt,) if fmt else NAIVE_FORMATS
    naive = pl.coalesce([s.str.to_datetime(f, strict=False, time_unit="us") for f in naive_formats])
    epoch = pl.when(s.str.contains(r"^\d{9,10}(?:\.\d+)?$")).then(
        pl.from_epoch((s.cast(pl.Float64, strict=False) * 1e6).cast(pl.Int64), time_unit="us")
    )
    if tz.upper() != "UTC":
        naive = (
            naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
            .dt.convert_time_zone("UTC")
            .dt.replace_time_zone(None)
        )
    zoned = s.str.contains(r"[+-]\d{2}:?\d{2}$")
    return pl.when(zoned).then(aware).otherwise(pl.coalesce(naive, epoch))
