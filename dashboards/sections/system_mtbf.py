"""System MTBF per quarter (95% CI) for every failure series: shown when the warehouse holds
failure records, interruptions or node failure episodes."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours

KEY = "system_mtbf"
TITLE = "System MTBF per quarter (95% CI)"
TABLES = ("system_mtbf",)


def quarters(system_mtbf: pl.DataFrame) -> pl.DataFrame:
    """Whole-system quarterly rows, one series per (source, system)."""
    return (
        system_mtbf.filter((pl.col("period") == "quarter") & (pl.col("grouping") == "all"))
        .with_columns(
            series=pl.format("{} ({})", "system", "source"),
            quarter=pl.col("period_start").dt.date(),
        )
        .sort("series", "period_start")
    )


def chart(q: pl.DataFrame) -> alt.LayerChart:
    """MTBF per quarter on a log axis with its CI; a quarter without failure shows only its CI's
    lower bound (an open triangle); a partial quarter is a hollow point."""
    sel = charts.legend_select("series")
    op = charts.highlight(sel)
    x = alt.X("quarter:T", title="quarter")
    y = alt.Scale(type="log")
    color = alt.Color("series:N", title="system (source)")
    tip = [
        "series:N",
        "label:N",
        "failures:Q",
        alt.Tooltip("exposure_hours:Q", format=",.0f", title="hours"),
        *charts.ci_tooltips("mtbf_hours", charts.HOURS, "MTBF (h)", "mtbf"),
        "partial:N",
    ]
    has = q.filter(pl.col("mtbf_hours").is_not_null())
    err = (
        alt.Chart(has)
        .mark_rule(strokeWidth=2)
        .encode(
            x=x,
            y=alt.Y("mtbf_ci_low:Q", scale=y, title="system MTBF, hours (log, 95% CI)"),
            y2="mtbf_ci_high:Q",
            color=color,
            opacity=op,
            tooltip=tip,
        )
        .add_params(sel)
    )
    line = (
        alt.Chart(has)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("mtbf_hours:Q", scale=y),
            color=color,
            opacity=op,
            tooltip=tip,
            # the colour legend already names the series: no second legend for the fill
            fill=alt.condition(
                "datum.partial", alt.value("white"), alt.Color("series:N", legend=None)
            ),
        )
    )
    none = (
        alt.Chart(q.filter(pl.col("mtbf_hours").is_null() & pl.col("mtbf_ci_low").is_not_null()))
        .mark_point(shape="triangle-up", filled=False, size=70)
        .encode(x=x, y=alt.Y("mtbf_ci_low:Q", scale=y), color=color, tooltip=tip)
    )
    return charts.framed(
        err + line + none,
        "System MTBF per quarter",
        (
            "exposure / failures (failures at the same instant once); "
            "open triangles: no failure, at the CI's "
            "lower bound; hollow points: a quarter observed in part"
        ),
    )


def reading(q: pl.DataFrame) -> str:
    """Per series its lowest and latest full quarter; a quarter observed in part is named as
    such with the days observed (its MTBF is per hour of those, comparable with a whole one)."""
    parts = []
    for (series,), g in q.partition_by("series", as_dict=True, maintain_order=True).items():
        full = g.filter(~pl.col("partial") & pl.col("mtbf_hours").is_not_null())
        if full.height:
            worst, last = full.sort("mtbf_hours").row(0, named=True), full.row(-1, named=True)
            parts.append(
                f"{series}: lowest {hours(worst['mtbf_hours'])} in {worst['label']} "
                f"({worst['failures']:,} failures, 95% CI {hours(worst['mtbf_ci_low'])} to "
                f"{hours(worst['mtbf_ci_high'])}); latest full quarter "
                f"{last['label']}: {hours(last['mtbf_hours'])}"
            )
        partial = g.filter(pl.col("partial") & pl.col("mtbf_hours").is_not_null())
        parts += [
            f"{series}: {r['label']} observed in part ({r['exposure_hours'] / 24:,.0f} days): "
            f"{hours(r['mtbf_hours'])} over those days ({r['failures']:,} failures)"
            for r in partial.iter_rows(named=True)
        ]
    if not parts:
        return "No quarter with a failure yet."
    return (
        "; ".join(parts)
        + ". A quarter observed in part is a hollow point, its MTBF per hour observed."
    )


def build(ctx: ReportContext) -> Section | None:
    q = quarters(ctx.t["system_mtbf"])
    if q.height == 0:
        return None
    return Section(KEY, TITLE, chart=chart(q), reading=reading(q))
