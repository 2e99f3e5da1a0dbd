"""Kaplan-Meier survival per component class with 95% CI bands."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.survival import MIN_AT_RISK
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import pct

KEY = "survival"
TITLE = "Kaplan-Meier survival per component class (95% CI bands)"
TABLES = ("survival_curves",)


def survival_frame(survival_curves: pl.DataFrame, max_points: int = 120) -> pl.DataFrame:
    """Kaplan-Meier points per class where enough units are at risk (``small_risk_set``
    points, under ``analysis.survival.MIN_AT_RISK``, are left out: the curve stops there),
    thinned to at most ``max_points`` per class by keeping the last estimate in each of
    ``max_points`` equal age bins (a step curve keeps its shape)."""
    flagged = (
        pl.col("small_risk_set").fill_null(False)
        if "small_risk_set" in survival_curves.columns
        else pl.lit(False)
    )
    km = (
        survival_curves.filter((pl.col("estimator") == "kaplan_meier") & ~flagged)
        .select("component_class", "t", "survival", "ci_low", "ci_high", "at_risk")
        .drop_nulls(["t", "survival"])
        .sort("component_class", "t")
    )
    if km.height == 0:
        return km.with_columns(pl.lit(0.0).alias("days"))
    span = pl.col("t").max().over("component_class")
    km = km.with_columns(
        pl.when(span > 0).then((pl.col("t") / span * max_points).floor()).otherwise(0).alias("_bin")
    )
    first = km.group_by("component_class").agg(pl.all().first())
    thinned = km.group_by("component_class", "_bin").agg(pl.all().last())
    out = pl.concat([first.select(km.columns), thinned.select(km.columns)]).unique(
        ["component_class", "t"]
    )
    return (
        out.sort("component_class", "t").drop("_bin").with_columns((pl.col("t") / 24).alias("days"))
    )


def survival_chart(km: pl.DataFrame) -> alt.LayerChart:
    """Kaplan-Meier survival per class (``survival_frame``) with 95% CI bands; click the legend
    to isolate a class."""
    df = km.with_columns(
        pl.col("ci_low").fill_null(pl.col("survival")),
        pl.col("ci_high").fill_null(pl.col("survival")),
    )
    sel = charts.legend_select("component_class")
    color = alt.Color(
        "component_class:N",
        title="class",
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1),
    )
    x = alt.X("days:Q", title="unit age (days)")
    band = (
        alt.Chart(df)
        .mark_area(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("ci_low:Q"),
            y2="ci_high:Q",
            color=color,
            opacity=alt.condition(sel, alt.value(0.1), alt.value(0.02)),
        )
    )
    tip = [
        "component_class:N",
        alt.Tooltip("days:Q", format=".1f"),
        *charts.ci_tooltips("survival", ".3f", stem=""),
        "at_risk:Q",
    ]
    line = (
        alt.Chart(df)
        .mark_line(interpolate="step-after", strokeWidth=2)
        .encode(
            x=x,
            y=alt.Y(
                "survival:Q",
                title="fraction still in service (Kaplan-Meier)",
                scale=alt.Scale(zero=False),
            ),
            color=color,
            opacity=charts.highlight(sel, 0.12),
            tooltip=tip,
        )
        .add_params(sel)
    )
    return charts.framed(
        band + line,
        "Kaplan-Meier survival",
        "click the legend to isolate a class",
    )


def _step_at(curve: pl.DataFrame, t: float) -> dict | None:
    before = curve.filter(pl.col("t") <= t)
    return before.row(-1, named=True) if before.height else None


def build(ctx: ReportContext) -> Section:
    km = survival_frame(ctx.t["survival_curves"])
    if km.height == 0:
        return Section(KEY, TITLE, note=NO_DATA)
    s = Section(KEY, TITLE, chart=survival_chart(km))
    stopped = f"curves stop where fewer than {MIN_AT_RISK} units remain at risk"
    horizon = km.group_by("component_class").agg(pl.col("t").max())["t"].min()
    at = []
    for (cls,), curve in km.partition_by("component_class", as_dict=True).items():
        row = _step_at(curve, horizon)
        if row is not None:
            at.append((row["survival"], cls, row))
    at.sort(key=lambda x: (x[0], x[1]))
    lo, hi = at[0], at[-1]
    text = (
        f"At {horizon / 24:.0f} days of age (the longest age every class reaches; {stopped}), "
        f"{lo[1]} has the lowest survival: {pct(lo[0])} still in service"
    )
    if lo[2]["ci_low"] is not None and lo[2]["ci_high"] is not None:
        text += f" (95% CI {pct(lo[2]['ci_low'])}–{pct(lo[2]['ci_high'])})"
    if len(at) > 1:
        text += f"; {hi[1]} the highest at {pct(hi[0])}"
    gone = sorted(set(ctx.t["survival_curves"].filter(pl.col("estimator") == "kaplan_meier")[
        "component_class"]) - set(km["component_class"]))  # fmt: skip
    if gone:
        text += f". Too few units at risk for a curve: {', '.join(gone)}"
    s.reading = text + "."
    return s
