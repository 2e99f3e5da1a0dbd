"""Report section: interruptions, lost GPU-hours and measured goodput per cluster, partition and
account (``goodput_breakdown``, analysis/breakdown.py), so a slice that loses more than its share
stands out."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.breakdown import DIMENSIONS
from analysis.taxonomy import NONE_LABEL
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import num
from dashboards.section import pct

KEY = "breakdowns"
TITLE = "By cluster, partition and account"
TABLES = ("goodput_breakdown",)

TOP = 15  # bars per dimension in the chart (the table lists every value)


def _bars(rows: pl.DataFrame, dim: str) -> alt.Chart:
    """Lost GPU-hours per value of one dimension, coloured by measured goodput."""
    return (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            y=alt.Y(
                "value:N",
                sort=alt.EncodingSortField("lost_gpu_hours", order="descending"),
                title=dim,
            ),
            x=alt.X("lost_gpu_hours:Q", title="GPU-hours lost to unexpected interruptions"),
            color=alt.Color(
                "goodput:Q",
                scale=alt.Scale(scheme="redyellowgreen"),
                title="measured goodput",
                legend=alt.Legend(format=".0%"),
            ),  # the data's range: 85% and 97% differ
            tooltip=[
                "value",
                "jobs",
                "attempts",
                charts.gpu_hours_tip("gpu_hours"),
                "interruptions",
                "infrastructure",
                charts.gpu_hours_tip("lost_gpu_hours"),
                alt.Tooltip("goodput:Q", format=".1%"),
            ],
        )
        .properties(width=charts.WIDTH - 120, height=alt.Step(18))
    )


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    bd = ctx.t["goodput_breakdown"].with_columns(pl.col("value").fill_null(NONE_LABEL))
    if bd.height == 0:
        s.note = NO_DATA
        return s
    shown = [d for d in DIMENSIONS if bd.filter(pl.col("dimension") == d).height > 1] or ["cluster"]
    s.chart = alt.vconcat(
        *(
            _bars(
                bd.filter(pl.col("dimension") == d)
                .sort("lost_gpu_hours", descending=True)
                .head(TOP),
                d,
            )
            for d in shown
        ),
        spacing=24,
    )
    parts = []
    for dim in shown:
        rows = bd.filter(pl.col("dimension") == dim)
        total = rows["lost_gpu_hours"].sum()
        worst = rows.sort("lost_gpu_hours", descending=True).row(0, named=True)
        if total > 0:
            parts.append(
                f"{dim} {worst['value']} lost the most ({num(worst['lost_gpu_hours'])} GPU-hours, "
                f"{pct(worst['lost_gpu_hours'] / total)} of the {dim}s' loss, with "
                f"{pct(worst['gpu_hours'] / rows['gpu_hours'].sum())} of their GPU-hours; "
                f"goodput {pct(worst['goodput'])})"
            )
    s.reading = (
        ("; ".join(parts) + ".") if parts else f"No unexpected interruption in {ctx.scope}."
    ) + " A job chain counts under its last attempt's partition and account."
    s.extra_html = html_table(
        [
            "by",
            "value",
            "jobs",
            "attempts",
            "GPU-hours",
            "interruptions",
            "of them infrastructure",
            "lost GPU-hours",
            "goodput",
        ],
        [
            [
                r["dimension"],
                r["value"],
                f"{r['jobs']:,}",
                f"{r['attempts']:,}",
                num(r["gpu_hours"]),
                f"{r['interruptions']:,}",
                f"{r['infrastructure']:,}",
                num(r["lost_gpu_hours"]),
                pct(r["goodput"]),
            ]
            for r in bd.iter_rows(named=True)
        ],
    )
    return s
