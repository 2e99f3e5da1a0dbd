"""The text table ``goodput fit`` prints from ``failure_rates``."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import polars as pl

from analysis.slowness.signals import MIN_EPISODE_S
from analysis.survival.rates import CLEAR_AIC
from analysis.survival.shape import INFANT_MORTALITY
from analysis.survival.shape import SHAPE_ALPHA
from analysis.survival.shape import WEAR_OUT
from analysis.survival.shape import age_reading
from analysis.survival.windows import LOW_EXPOSURE_FRACTION
from pipelines.cli.output import table_lines
from warehouse.schemas import FAIL_SLOW


def _num(v: float | None, digits: int = 3) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 1e3 else f"{v:,.0f}"


def format_fit_table(
    failure_rates_df: pl.DataFrame,
    all_models: bool = False,
    window: str = "all",
    width: int | None = None,
) -> str:
    """Readable table of ``failure_rates`` (what ``goodput fit`` prints): the selected row of
    each class unless ``all_models``, classes by their rate, highest first (a class's
    candidates by AIC); each row's own rate per 1,000 unit-days with its 95% CI (the selected
    row's is the number projections use), MTBF, the age reading, and with ``all_models`` the
    AIC difference to the best candidate and the Akaike weight. The table keeps to ``width``
    characters (default: the terminal's, ``$COLUMNS``, else 100): the columns that do not fit
    are left out, lowest priority first, and a note names them; the notes wrap to it."""
    width = width or table_width()
    df = failure_rates_df.filter(pl.col("window") == window)
    df = df.with_columns(
        daic=pl.col("aic") - pl.col("aic").min().over("component_class", "stratum")
    )
    if not all_models:
        df = df.filter(pl.col("selected"))
    # classes by the rate of their selected whole-fleet row, highest first
    rank = pl.col("rate_per_1k_unit_days").filter(pl.col("selected") & (pl.col("stratum") == "all"))
    df = df.with_columns(_rank=rank.max().over("component_class").fill_null(-1.0)).sort(
        pl.col("_rank"), "component_class", pl.col("stratum") != "all", "stratum", "aic",
        descending=[True, False, False, False, False], nulls_last=True,
    )  # fmt: skip
    columns = [c for c in COLUMNS if c.shown(df, all_models)]
    cells = {c.header: [c.cell(r) for r in df.iter_rows(named=True)] for c in columns}
    size = {c.header: max(len(c.header), *map(len, cells[c.header])) for c in columns}
    kept, used = set(), -2
    for c in sorted(columns, key=lambda c: c.priority):  # the most wanted that fit
        if used + 2 + size[c.header] <= width:
            kept.add(c.header)
            used += 2 + size[c.header]
    shown = [c.header for c in columns if c.header in kept]

    rows = [[cells[h][i] for h in shown] for i in range(df.height)]
    out = table_lines([shown, *rows], rule=True)
    left = [c.header for c in columns if c.header not in kept]
    notes = _notes(df, window)
    if left:
        notes.append(
            f"left out to fit {width} columns: {', '.join(left)} (set COLUMNS wider, or "
            "--format csv for every column)"
        )
    return "\n".join(out + [line for n in notes for line in textwrap.wrap(n, width)])


WIDTH = 100  # the table's width when neither $COLUMNS nor a terminal says


def table_width() -> int:
    """Characters a line of ``goodput fit`` may take: $COLUMNS, else the terminal's, else 100."""
    return shutil.get_terminal_size((WIDTH, 24)).columns


class _Column(NamedTuple):
    """A column of the fit table: its header, what its cells say, whether it is shown at all
    and its priority (0 first) when the width cannot hold every column."""

    header: str
    cell: Callable[[dict], str]
    priority: int
    shown: Callable[[pl.DataFrame, bool], bool] = lambda df, all_models: True


def _rate(r: dict) -> str:
    if r["rate_per_1k_unit_days"] is None:
        return "- (no finite mean)"
    rate = (
        f"{_num(r['rate_per_1k_unit_days'])} ({_num(r['rate_ci_low'])}-{_num(r['rate_ci_high'])})"
    )
    return rate + (" ^" if r["mean_extrapolated"] else "")


def _age(r: dict) -> str:
    """The age reading in a word or two: infant mortality, wear-out, cannot tell."""
    reading = age_reading(r)
    return {INFANT_MORTALITY: "infant mortality", WEAR_OUT: "wear-out"}.get(
        reading, "cannot tell" if reading else "-"
    )


def _shape(r: dict) -> str:
    if r["shape"] is None:
        return "-"
    return f"{_num(r['shape'])} ({_num(r['shape_ci_low'])}-{_num(r['shape_ci_high'])})"


COLUMNS = [
    _Column("class", lambda r: r["component_class"], 0),
    # where a class has strata its rows differ by them alone: kept with the class
    _Column("stratum", lambda r: r["stratum"], 0,
            lambda df, _: bool((df["stratum"] != "all").any()) if df.height else False),
    _Column("model", lambda r: r["model"] or "-", 2),  # a rate without a fitted model
    _Column("sel", lambda r: "*" if r["selected"] else "", 1, lambda df, every: every),
    _Column("units", lambda r: f"{r['n_units']:,}", 5),
    _Column("events", lambda r: f"{r['n_events']:,}", 3),
    _Column("rate/1k unit-days (95% CI)", _rate, 1),
    _Column("MTBF h", lambda r: _num(r["mtbf_hours"]), 4),
    _Column("age", _age, 4),
    _Column("Weibull k (95% CI)", _shape, 6),
    _Column("dAIC", lambda r: _num(r["daic"]), 3, lambda df, every: every),
    _Column("weight", lambda r: "-" if r["aic_weight"] is None else f"{r['aic_weight']:.2f}", 5,
            lambda df, every: every),
    _Column("method", lambda r: r["method"], 8),
]  # fmt: skip


def _notes(df: pl.DataFrame, window: str) -> list[str]:
    """The lines under the table: what the columns mean, and for a month whether it is partial
    or some class's exposure is low."""
    out = [
        (
            "rate = failures per at-risk unit-time over the window (exponential: observed, exact "
            "Poisson CI; another model: the failures it expects over the units' at-risk spans, "
            "CI from its fit); MTBF = 1/rate; classes by rate, highest first; age: the reading "
            "of the class's Weibull shape k, a direction (infant mortality k < 1, wear-out "
            f"k > 1) only where k = 1 is rejected after Holm across classes (alpha {SHAPE_ALPHA:g})"
        ),
        (
            "* = selected, the rate summaries and projections use: the exponential unless a "
            f"model's AIC is lower by more than {CLEAR_AIC:g} and its mean lifetime lies within "
            "the observed ages"
        ),
    ]
    if (df["component_class"] == FAIL_SLOW).any():
        out.append(
            f"{FAIL_SLOW} = GPU fail-slow episodes (>= {MIN_EPISODE_S / 60:g} min) per 1,000 "
            "GPU-days, apart from the "
            "fail-stop classes (no projection reads it); its models are the law of how long an "
            "episode lasts (hours), selected by AIC"
        )
    if df["mean_extrapolated"].fill_null(False).any():
        out.append(
            "^ = mean lifetime beyond the oldest observed unit age: the law's tail is extrapolated"
        )
    if window != "all" and df.height:
        partial = df.filter(pl.col("partial").fill_null(False))
        if partial.height:
            a, b = partial["period_start"].min(), partial["period_end"].max()
            out.append(
                f"{window} is a partial month: observed {a:%Y-%m-%d %H:%M} to {b:%Y-%m-%d %H:%M}"
            )
        low = df.filter(pl.col("low_exposure").fill_null(False))["component_class"].unique().sort()
        if low.len():
            out.append(
                f"low exposure (< {LOW_EXPOSURE_FRACTION:.0%} of the class's median month, "
                f"rates uncertain): {', '.join(low)}"
            )
    return out
