"""Monthly windows: each unit's observation split at calendar-month boundaries, and the calendar
span, partial months and low-exposure windows marked on ``failure_rates`` rows.

Exposure and events per month give the window's rate with a Poisson CI; parametric fits run
only in windows with enough events (ages inside the window are left-truncated at the window
start and censored at its end). No window is shorter than a day (a month observed less is
folded into its neighbour); ``period_start`` / ``period_end`` give the span a row covers,
``partial`` marks a month observed only in part, ``low_exposure`` one with under
``LOW_EXPOSURE_FRACTION`` of the class's median monthly exposure.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from warehouse.schemas import conform

US_PER_HOUR = 3.6e9
MIN_WINDOW_HOURS = 24.0  # a month observed for less than this is folded into its neighbour
LOW_EXPOSURE_FRACTION = 0.25  # window exposure below this share of the class's median: flagged


_PIECES_SCHEMA = {
    "component_class": pl.Utf8,
    "m": pl.Int64,
    "age_from": pl.Float64,
    "age_to": pl.Float64,
    "in_event": pl.Boolean,
}
_PERIODS_SCHEMA = {
    "component_class": pl.Utf8,
    "m": pl.Int64,
    "window": pl.Utf8,
    "period_start": pl.Datetime("us"),
    "period_end": pl.Datetime("us"),
    "partial": pl.Boolean,
}


def _month_label(m: int) -> str:
    """A month index (``year * 12 + month - 1``) as the window label ``YYYY-MM``."""
    return f"{m // 12:04d}-{m % 12 + 1:02d}"


def _month_index(e: pl.Expr) -> pl.Expr:
    """The month index (``year * 12 + month - 1``) of a datetime."""
    return e.dt.year().cast(pl.Int64) * 12 + e.dt.month().cast(pl.Int64) - 1


def month_pieces(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Observation split at calendar-month boundaries (vectorized: int ranges exploded, month
    starts looked up from a small table, no per-row strings).

    Returns (pieces, periods, notes): one piece per (unit, window) with integer month ``m``,
    ages ``age_from`` / ``age_to`` and ``in_event``; per (class, m) the window's ``window``
    label, the calendar span it covers (``period_start`` / ``period_end``) and ``partial``
    (covers less than its calendar month). An observation ending exactly on a month boundary
    opens no piece in the next month, and a month a class was observed for less than
    ``MIN_WINDOW_HOURS`` is folded into the neighbouring month (its pieces merged per unit),
    so no window has zero or sub-day length; ``notes`` says which were folded."""
    df = df.filter(pl.col("observed_from").is_not_null() & pl.col("observed_to").is_not_null())
    if df.height == 0:
        return pl.DataFrame(schema=_PIECES_SCHEMA), pl.DataFrame(schema=_PERIODS_SCHEMA), []
    frm = pl.col("observed_from").cast(pl.Datetime("us"))
    to = pl.col("observed_to").cast(pl.Datetime("us"))
    df = df.with_row_index("u").select(
        "component_class",
        "u",
        "entry",
        "duration",
        "event",
        f=frm.cast(pl.Int64),
        t=to.cast(pl.Int64),
        m0=_month_index(frm),
        # the last instant observed is just before observed_to: ending at 00:00 on the 1st
        # closes the previous month and opens no empty piece in the next
        m1=_month_index(pl.when(to > frm).then(to - pl.duration(microseconds=1)).otherwise(to)),
    )
    starts = _month_starts(int(df["m0"].min()), int(df["m1"].max()))
    out, notes = _fold_short_months(_split_at_months(df, starts))
    return (
        out.select(*_PIECES_SCHEMA).sort("component_class", "m", maintain_order=True),
        _periods(out, starts),
        notes,
    )


def _month_starts(lo: int, hi: int) -> dict[int, int]:
    """Month index -> its first instant in epoch microseconds, for months ``lo - 1`` to
    ``hi + 2`` (every month a piece can start or end in)."""
    epoch = np.datetime64("1970-01-01", "us")
    return {
        m: int((np.datetime64(f"{_month_label(m)}-01", "us") - epoch).astype(np.int64))
        for m in range(lo - 1, hi + 3)
    }


def _month_start(m: pl.Expr, starts: dict[int, int]) -> pl.Expr:
    """The first instant (epoch microseconds) of month index ``m``, from ``_month_starts``."""
    return m.replace_strict(starts, return_dtype=pl.Int64)


def _split_at_months(df: pl.DataFrame, starts: dict[int, int]) -> pl.DataFrame:
    """One row per (unit, month ``m``) its observation touches: the piece's span ``p0``/``p1``
    (epoch microseconds), its ages and whether the unit's event falls in it."""

    def month_start(e):
        return _month_start(e, starts)

    out = df.with_columns(m=pl.int_ranges("m0", pl.col("m1") + 1)).explode("m")
    out = (
        out.with_columns(
            p0=pl.max_horizontal(month_start(pl.col("m")), pl.col("f")),
            p1=pl.min_horizontal(month_start(pl.col("m") + 1), pl.col("t")),
        )
        .with_columns(
            age_from=pl.col("entry") + (pl.col("p0") - pl.col("f")) / US_PER_HOUR,
            last=pl.col("m") == pl.col("m1"),
            age_to=pl.col("entry") + (pl.col("p1") - pl.col("f")) / US_PER_HOUR,
        )
        .with_columns(
            age_to=pl.when(pl.col("last")).then(pl.col("duration")).otherwise(pl.col("age_to")),
            in_event=pl.col("event") & pl.col("last"),
        )
    )
    return out.filter(pl.col("age_to") >= pl.col("age_from"))


def _fold_short_months(out: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Pieces with each class's sub-day months folded into its previous month (else the next;
    a unit's pieces in the two merged), and a note per fold. Loops over the short months only,
    a handful at most."""
    span = out.group_by("component_class", "m").agg(pl.col("p0").min(), pl.col("p1").max())
    short = span.filter((pl.col("p1") - pl.col("p0")) < MIN_WINDOW_HOURS * US_PER_HOUR)
    notes: list[str] = []
    if not short.height:
        return out, notes
    full = set(
        span.join(short, on=["component_class", "m"], how="anti")
        .select("component_class", "m")
        .iter_rows()
    )
    moves = []
    for cls, m, p0, p1 in short.select("component_class", "m", "p0", "p1").iter_rows():
        to_m = m - 1 if (cls, m - 1) in full else m + 1 if (cls, m + 1) in full else m
        if to_m != m:
            moves.append((cls, m, to_m))
            notes.append(
                f"{cls}: {_month_label(m)} observed only {(p1 - p0) / US_PER_HOUR:.1f} h, "
                f"folded into {_month_label(to_m)}"
            )
    if not moves:
        return out, notes
    fold = pl.DataFrame(moves, schema=["component_class", "m", "to_m"], orient="row")
    out = (
        out.join(fold, on=["component_class", "m"], how="left")
        .with_columns(m=pl.coalesce("to_m", "m"))
        .group_by("component_class", "u", "m", maintain_order=True)
        .agg(
            pl.col("age_from").min(),
            pl.col("age_to").max(),
            pl.col("in_event").any(),
            pl.col("p0").min(),
            pl.col("p1").max(),
        )
    )
    return out, notes


def _periods(out: pl.DataFrame, starts: dict[int, int]) -> pl.DataFrame:
    """Per (class, m): the window label, the calendar span its pieces cover and ``partial``."""

    def month_start(e):
        return _month_start(e, starts)

    labels = {m: _month_label(m) for m in starts}
    return (
        out.group_by("component_class", "m")
        .agg(pl.col("p0").min(), pl.col("p1").max())
        .with_columns(
            window=pl.col("m").replace_strict(labels, return_dtype=pl.Utf8),
            partial=(pl.col("p0") > month_start(pl.col("m")))
            | (pl.col("p1") < month_start(pl.col("m") + 1)),
            period_start=pl.col("p0").cast(pl.Datetime("us")),
            period_end=pl.col("p1").cast(pl.Datetime("us")),
        )
        .select(*_PERIODS_SCHEMA)
        .sort("component_class", "m")
    )


def monthly_exposure(df: pl.DataFrame) -> pl.DataFrame:
    """Split each unit's observation at calendar-month boundaries (vectorized).

    Returns one row per (unit, month) with window 'YYYY-MM', the ages at the piece's start and
    end (``age_from`` / ``age_to``; their difference is the exposure) and whether the failure
    falls in it (see ``month_pieces`` for boundaries and sub-day months).
    """
    pieces, periods, _ = month_pieces(df)
    return pieces.join(
        periods.select("component_class", "m", "window"), on=["component_class", "m"]
    ).select("component_class", "window", "age_from", "age_to", "in_event")


def mark_periods(
    rows: pl.DataFrame, df: pl.DataFrame, periods: pl.DataFrame | None
) -> pl.DataFrame:
    """The calendar span of every row, ``partial`` months and ``low_exposure`` windows (less
    than ``LOW_EXPOSURE_FRACTION`` of the class's median monthly exposure)."""
    whole = (
        df.group_by("component_class")
        .agg(
            period_start=pl.col("observed_from").min().cast(pl.Datetime("us")),
            period_end=pl.col("observed_to").max().cast(pl.Datetime("us")),
        )
        .with_columns(window=pl.lit("all"), partial=pl.lit(False))
    )
    spans = whole.select("component_class", "window", "period_start", "period_end", "partial")
    if periods is not None and periods.height:
        spans = pl.concat([spans, periods.drop("m")])
    rows = rows.join(spans, on=["component_class", "window"], how="left")
    monthly = pl.col("window") != "all"
    median = pl.col("exposure_hours").filter(monthly).median().over("component_class", "stratum")
    rows = rows.with_columns(
        partial=pl.col("partial").fill_null(False),
        low_exposure=monthly & (pl.col("exposure_hours") < LOW_EXPOSURE_FRACTION * median),
    )
    return conform("failure_rates", rows)
