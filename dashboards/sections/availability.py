"""Availability per system in nines (95% CI), with repair-time and time-between-failure fits
and the root-cause mix: shown when the warehouse holds failure records or node outages."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis import lifetime_models
from dashboards import charts
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours
from dashboards.section import html_table
from dashboards.section import num
from dashboards.section import pct

KEY = "availability"
TITLE = "Availability, repair times and root causes"
TABLES = ("availability", "repair_fits", "root_causes")


def systems(availability: pl.DataFrame) -> pl.DataFrame:
    return (
        availability.filter((pl.col("level") == "system") & pl.col("nines").is_not_null())
        .with_columns(label=pl.format("{} ({})", "system", "source"))
        .sort("nines")
    )


def chart(df: pl.DataFrame) -> alt.LayerChart:
    """Nines of availability per system (more is better) with the bootstrap 95% CI."""
    y = alt.Y("label:N", sort=df["label"].to_list(), title="system (source)")
    tip = [
        "label:N",
        "failures:Q",
        "nodes:Q",
        alt.Tooltip("availability:Q", format=".5f"),
        alt.Tooltip("nines:Q", format=".2f"),
        charts.hours_tip("mttr_hours", "MTTR"),
        charts.hours_tip("mtbf_hours", "system MTBF"),
        alt.Tooltip("failures_per_node_year:Q", format=".3g", title="failures / node-year"),
    ]
    rule = (
        alt.Chart(df)
        .mark_rule(strokeWidth=2)
        .encode(
            y=y,
            x=alt.X("nines_ci_low:Q", title="availability in nines: -log10(1 - A), 95% CI"),
            x2="nines_ci_high:Q",
            tooltip=tip,
        )
    )
    dots = alt.Chart(df).mark_point(filled=True, size=60).encode(y=y, x="nines:Q", tooltip=tip)
    return charts.framed(
        rule + dots,
        "Availability per system",
        "fraction of node-hours up; 2 nines = 99%, 3 = 99.9%",
        height=max(120, 18 * df.height),
    )


def reading(df: pl.DataFrame, fits: pl.DataFrame) -> str:
    worst, best = df.row(0, named=True), df.row(-1, named=True)
    text = (
        f"{df.height} system(s) with every repair known: availability from "
        f"{pct(worst['availability'], 3)} ({worst['label']}, MTTR {hours(worst['mttr_hours'])}) "
        f"to {pct(best['availability'], 3)} ({best['label']})."
    )
    sel = fits.filter(pl.col("selected"))
    for q, word in (("repair", "Repair times"), ("tbf", "Times between failures")):
        won = sel.filter(pl.col("quantity") == q)["model"].value_counts(sort=True)
        if won.height:
            m, n = won.row(0)
            text += f" {word}: {m} fits best (AIC) in {n} of {won['count'].sum()} system(s)."
    trend = lifetime_models.age_trend_model()
    tbf = fits.filter(
        (pl.col("quantity") == "tbf")
        & (pl.col("model") == trend.name)
        & pl.col("shape").is_not_null()
    )
    if tbf.height:
        below = int((tbf["shape_ci_high"] < 1).sum())
        text += (
            f" The {trend.name.capitalize()} {trend.age_trend_parameter} of the times between "
            f"failures is below 1 (CI entirely) in {below} of {tbf.height}: "
            "there, failures cluster in time rather than arrive at random."
        )
    still = int(df["repairs_open"].fill_null(0).sum())
    if still:
        text += (
            f" {still} repair(s) still open at the end of the window: counted down until then, "
            "and right-censored in MTTR and the repair-time fits."
        )
    return text


def causes_html(causes: pl.DataFrame) -> str:
    every = causes.filter(pl.col("system").is_null())
    if every.height == 0:
        return ""
    body = [
        [
            r["source"],
            r["cause"] or "not recorded",
            r["failures"],
            pct(r["share"]),
            num(r["downtime_hours"]),
            pct(r["downtime_share"]),
        ]
        for r in every.iter_rows(named=True)
    ]
    return html_table(
        ["source", "root cause", "failures", "share", "downtime h", "share of downtime"], body
    )


def build(ctx: ReportContext) -> Section | None:
    t = ctx.t
    if t["availability"].height == 0:
        return None
    df = systems(t["availability"])
    s = Section(KEY, TITLE, extra_html=causes_html(t["root_causes"]))
    if df.height == 0:
        s.note = (
            "no system has a repair time for every failure: "
            "availability is not estimated (never invented)"
        )
        return s
    s.chart = chart(df)
    s.reading = reading(df, t["repair_fits"])
    return s
