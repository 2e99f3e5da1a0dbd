"""Failure rate per component class (forest plot, 95% CI) and the Weibull shape."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.headline import selected_rates
from analysis.survival import age_reading
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import num

KEY = "failure_rates"
TITLE = "Failure rate per component class (95% CI) and Weibull shape"
TABLES = ("failure_rates",)


def rates_frame(failure_rates: pl.DataFrame, window: str = "all") -> pl.DataFrame:
    """Selected model per class (stratum 'all') for one window, with ``shape_reading`` the
    class's Weibull age reading (``analysis.survival.age_reading``) whatever model it has."""
    sel = selected_rates(failure_rates, window)
    if sel.height:
        sel = sel.with_columns(
            shape_reading=pl.Series(
                [age_reading(r) for r in sel.iter_rows(named=True)], dtype=pl.Utf8
            )
        )
    return sel.sort("rate_per_1k_unit_days", descending=True, nulls_last=True)


def failure_rate_chart(rates: pl.DataFrame) -> alt.HConcatChart:
    """Forest plot of rate per 1,000 unit-days (log x, 95% CI) and the Weibull shape per class,
    from ``rates_frame``."""
    df = rates.filter(pl.col("rate_per_1k_unit_days") > 0).with_columns(
        pl.when(pl.col("rate_ci_low") > 0)
        .then(pl.col("rate_ci_low"))
        .otherwise(pl.col("rate_per_1k_unit_days"))
        .alias("lo"),
        pl.col("rate_ci_high").fill_null(pl.col("rate_per_1k_unit_days")).alias("hi"),
    )
    order = df["component_class"].to_list()
    y = alt.Y("component_class:N", sort=order, scale=alt.Scale(domain=order), title=None)
    tip = [
        "component_class:N",
        "model:N",
        "n_units:Q",
        "n_events:Q",
        *charts.ci_tooltips("rate_per_1k_unit_days", ".3g", "rate / 1k unit-days", "rate"),
        charts.hours_tip("mtbf_hours", "MTBF"),
        "shape_reading:N",
    ]
    rates = charts.forest(
        df, y, "rate_per_1k_unit_days", "lo", "hi",
        "failures per 1,000 unit-days (log, 95% CI)", tip, ("#4c78a8", "#1f3b73"),
    )  # fmt: skip
    forest = rates.properties(
        width=charts.WIDTH // 2 + 40,
        height=max(120, 28 * len(order)),
        title="Failure rate per class",
    )
    sh = df.filter(pl.col("shape").is_not_null())
    if sh.height == 0:
        return alt.hconcat(forest)
    sh = sh.with_columns(
        pl.col("shape_ci_low").fill_null(pl.col("shape")).alias("slo"),
        pl.col("shape_ci_high").fill_null(pl.col("shape")).alias("shi"),
    )
    stip = [
        "component_class:N",
        *charts.ci_tooltips("shape", ".2f"),
        "shape_reading:N",
    ]
    ys = alt.Y(
        "component_class:N",
        sort=order,
        scale=alt.Scale(domain=order),
        title=None,
        axis=alt.Axis(labels=False, ticks=False),
    )
    shapes = charts.forest(
        sh, ys, "shape", "slo", "shi", "Weibull shape k (1 = constant hazard)", stip,
        ("#72b7b2", "#2a7f7a"),
    )  # fmt: skip
    shape = (charts.unit_line("#888") + shapes).properties(
        width=charts.WIDTH // 2 - 80,
        height=max(120, 28 * len(order)),
        title="Weibull shape (>1 wear-out, <1 infant mortality)",
    )
    return alt.hconcat(forest, shape, spacing=20)


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    df = rates_frame(t["failure_rates"])
    pos = df.filter(pl.col("rate_per_1k_unit_days") > 0)
    if pos.height == 0:
        s.note = NO_DATA if df.height == 0 else "no failures observed in any class yet"
        return s
    s.chart = failure_rate_chart(df)
    r = pos.row(0, named=True)
    text = (
        f"{r['component_class']} fails most often: {num(r['rate_per_1k_unit_days'])} failures "
        f"per 1,000 unit-days (95% CI {num(r['rate_ci_low'])}–{num(r['rate_ci_high'])}, "
        f"{r['n_events'] or 0:,} failures)"
    )
    if r["shape"] is not None:
        text += f"; Weibull shape {r['shape']:.2f}"
        if r["shape_ci_low"] is not None and r["shape_ci_high"] is not None:
            text += f" (CI {r['shape_ci_low']:.2f}–{r['shape_ci_high']:.2f})"
        if r["shape_reading"]:
            text += f": {r['shape_reading']}"
    zero = df.filter(~(pl.col("rate_per_1k_unit_days") > 0))["component_class"].to_list()
    if zero:
        text += f". No failures observed (not plotted): {', '.join(zero)}"
    s.reading = text + "."
    return s
