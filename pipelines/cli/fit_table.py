"""The text table ``goodput fit`` prints from ``failure_rates``."""

from __future__ import annotations

import numpy as np
import polars as pl

from analysis.survival.rates import CLEAR_AIC
from analysis.survival.shape import SHAPE_ALPHA
from analysis.survival.shape import age_reading
from analysis.survival.windows import LOW_EXPOSURE_FRACTION
from pipelines.cli.output import table_lines


def _num(v: float | None, digits: int = 3) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 1e3 else f"{v:,.0f}"


def format_fit_table(
    failure_rates_df: pl.DataFrame, all_models: bool = False, window: str = "all"
) -> str:
    """Readable table of ``failure_rates`` (what ``goodput fit`` prints): the selected row of
    each class unless ``all_models``; each row's own rate per 1,000 unit-days and MTBF in hours
    with its 95% CI (the selected row's is the number projections use), AIC difference to the
    best candidate and Akaike weight."""
    df = failure_rates_df.filter(pl.col("window") == window)
    df = df.with_columns(
        daic=pl.col("aic") - pl.col("aic").min().over("component_class", "stratum")
    )
    if not all_models:
        df = df.filter(pl.col("selected"))
    df = df.sort("component_class", pl.col("stratum") != "all", "stratum", "aic", nulls_last=True)
    lines = [_row(r) for r in df.iter_rows(named=True)]
    return "\n".join(table_lines([_HEADER, *lines], rule=True) + _notes(df, window))


_HEADER = [
    "class",
    "stratum",
    "model",
    "sel",
    "n",
    "events",
    "rate/1k unit-days [95% CI]",
    "MTBF h [95% CI]",
    "dAIC",
    "weight",
    "Weibull shape [95% CI]",
    "Weibull age reading",
    "method",
]


def _row(r: dict) -> list[str]:
    """One fit's cells, in the order of ``_HEADER``."""
    shape = (
        f"{_num(r['shape'])} [{_num(r['shape_ci_low'])}, {_num(r['shape_ci_high'])}]"
        if r["shape"] is not None
        else "-"
    )
    rate = (
        f"{_num(r['rate_per_1k_unit_days'])} [{_num(r['rate_ci_low'])}, {_num(r['rate_ci_high'])}]"
        if r["rate_per_1k_unit_days"] is not None
        else "-"
    )
    if r["mean_extrapolated"]:
        rate += " ^"
    return [
        r["component_class"],
        r["stratum"],
        r["model"],
        "*" if r["selected"] else "",
        f"{r['n_units']:,}",
        f"{r['n_events']:,}",
        rate,
        f"{_num(r['mtbf_hours'])} [{_num(r['mtbf_ci_low'])}, {_num(r['mtbf_ci_high'])}]",
        _num(r["daic"]),
        "-" if r["aic_weight"] is None else f"{r['aic_weight']:.2f}",
        shape,
        age_reading(r) or "-",
        r["method"],
    ]


def _notes(df: pl.DataFrame, window: str) -> list[str]:
    """The lines under the table: what the columns mean, and for a month whether it is partial
    or some class's exposure is low."""
    out = [
        (
            "rate = failures per at-risk unit-time over the window (exponential: observed, exact "
            "Poisson CI; another model: the failures it expects over the units' at-risk spans, "
            "CI from its fit); MTBF = 1/rate; shape and age reading from the class's "
            f"Weibull fit, a direction only where shape = 1 is rejected after Holm across classes "
            f"(alpha {SHAPE_ALPHA:g})"
        ),
        (
            "* = selected, the rate summaries and projections use: the exponential unless a "
            f"model's AIC is lower by more than {CLEAR_AIC:g} and its mean lifetime lies within "
            "the observed ages"
        ),
    ]
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
