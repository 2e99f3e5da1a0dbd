"""Failure rate per class per month (95% CI) and the trend test of every class (Holm-adjusted)."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.headline import MONTHLY
from analysis.headline import selected_rates
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import num

KEY = "rate_trend"
TITLE = "Failure rate per month (95% CI)"
TABLES = ("failure_rates",)


def trend_frame(failure_rates: pl.DataFrame) -> pl.DataFrame:
    """Selected monthly-window rates per class (window 'YYYY-MM'); ``label`` is the axis label
    ('2026-03 (partial)' for a month observed only in part)."""
    return (
        selected_rates(failure_rates, MONTHLY)
        .with_columns(
            (pl.col("window") + "-01").str.to_date().alias("month"),
            pl.when(pl.col("partial").fill_null(False))
            .then(pl.col("window") + " (partial)")
            .otherwise(pl.col("window"))
            .alias("label"),
            pl.col("low_exposure").fill_null(False),
        )
        .sort("component_class", "month")
    )


def rate_trend_chart(trend: pl.DataFrame) -> alt.LayerChart:
    """Monthly failure rate per class (``trend_frame``) with its 95% CI whisker, classes side
    by side within a month (an ordinal month axis: ``xOffset`` works on bands, not on a time
    axis). A month with no failure is an open triangle on a floor value (a log axis has no zero)
    with its CI's upper bound; a partial month says so in its label; a low-exposure month is
    a dashed whisker."""
    df = trend.filter(pl.col("rate_per_1k_unit_days").is_not_null())
    pos = df.filter(pl.col("rate_per_1k_unit_days") > 0)["rate_per_1k_unit_days"]
    floor = float(pos.min()) / 4 if pos.len() else 1e-3
    df = df.with_columns(
        pl.max_horizontal(pl.col("rate_per_1k_unit_days"), pl.lit(floor)).alias("rate"),
        pl.max_horizontal(pl.col("rate_ci_low").fill_null(floor), pl.lit(floor)).alias("lo"),
        pl.max_horizontal(pl.col("rate_ci_high").fill_null(floor), pl.lit(floor)).alias("hi"),
        pl.when(pl.col("low_exposure"))
        .then(pl.lit("low exposure"))
        .otherwise(pl.lit("enough exposure"))
        .alias("exposure"),
    )
    sel = charts.legend_select("component_class")
    order = df.sort("month")["label"].unique(maintain_order=True).to_list()
    x = alt.X("label:O", sort=order, title="month", axis=alt.Axis(labelAngle=0))
    ys = alt.Scale(type="log")
    color = alt.Color("component_class:N", title="class")
    op = charts.highlight(sel)
    dash = alt.condition("datum.low_exposure", alt.value([3, 3]), alt.value([1, 0]))
    off = alt.XOffset("component_class:N")
    tip = [
        "component_class:N",
        "window:N",
        "n_events:Q",
        alt.Tooltip("exposure_hours:Q", format=",.0f", title="unit-hours"),
        *charts.ci_tooltips("rate_per_1k_unit_days", ".3g", "rate / 1k unit-days", "rate"),
        alt.Tooltip("partial:N", title="partial month"),
        alt.Tooltip("exposure:N", title="exposure"),
    ]
    title = "failures per 1,000 unit-days (log, 95% CI)"
    err = (
        alt.Chart(df)
        .mark_rule(strokeWidth=2)
        .encode(
            x=x,
            xOffset=off,
            y=alt.Y("lo:Q", scale=ys, title=title),
            y2="hi:Q",
            color=color,
            opacity=op,
            strokeDash=dash,
            tooltip=tip,
        )
        .add_params(sel)
    )
    dots = (
        alt.Chart(df.filter(pl.col("rate_per_1k_unit_days") > 0))
        .mark_point(filled=True, size=60)
        .encode(x=x, xOffset=off, y=alt.Y("rate:Q", scale=ys), color=color, opacity=op, tooltip=tip)
    )
    zero = (
        alt.Chart(df.filter(pl.col("rate_per_1k_unit_days") <= 0))
        .mark_point(shape="triangle-down", filled=False, size=70, strokeWidth=2)
        .encode(x=x, xOffset=off, y=alt.Y("rate:Q", scale=ys), color=color, opacity=op, tooltip=tip)
    )
    return charts.framed(
        err + dots + zero,
        "Monthly failure rate per class (95% CI)",
        (
            "open triangles on the floor: months with no failure (whisker: CI upper bound); "
            "dashed: under a quarter of a median month's exposure; click the legend to "
            "isolate a class"
        ),
    )


def build(ctx: ReportContext) -> Section:
    df = trend_frame(ctx.t["failure_rates"])
    if df.height == 0:
        return Section(KEY, TITLE, note=NO_DATA)
    s = Section(KEY, TITLE, chart=rate_trend_chart(df))
    months = sorted(df["window"].unique().to_list())
    from analysis.survival import TREND_ALPHA  # the test and its rule, one place
    from analysis.survival import rate_trends  # the test and its rule, one place

    tests = rate_trends(ctx.t["failure_rates"])
    span = f"Across {len(months)} months ({months[0]} to {months[-1]})"
    if tests.height == 0:
        s.reading = f"{span}: no class has two months with a failure to compare yet."
        return s
    how = (
        f"one trend test per class (Poisson regression of monthly failures on time, exposure "
        f"as offset), Holm-adjusted across {tests.height} classes at {TREND_ALPHA:.0%}"
    )
    clear = tests.filter(pl.col("trend").is_not_null()).sort("p_adjusted")
    if clear.height == 0:
        s.reading = f"{span}, no class shows a clear trend ({how})."
        return s
    said = "; ".join(
        f"{r['component_class']} {r['trend']} (rate x{num(r['ratio_per_30d'])} per 30 days, "
        f"{r['events']} failures, adjusted p = {r['p_adjusted']:.2g})"
        for r in clear.iter_rows(named=True)
    )
    s.reading = f"{span}, a clear trend: {said} ({how}); no other class shows one."
    return s
