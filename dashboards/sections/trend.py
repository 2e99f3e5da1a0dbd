"""Goodput over time: measured goodput and the fleet-wide MTBF per week, above the GPU-hours lost
each week by cause (``analysis.trend``), and the latest week against the one before, each
change tested (``analysis.changes``); a week the data covers in part is labelled so."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.trend import TREND_HEADER
from analysis.trend import losses_frame
from analysis.trend import period_hours
from analysis.trend import tested
from analysis.trend import trend_cells
from analysis.trend import trend_frame
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import mean_time
from dashboards.section import num
from dashboards.section import pct

KEY = "trend"
TITLE = "Goodput, lost GPU-hours and MTBF week by week"
TABLES = ("job_attempts", "interruptions", "goodput_jobs")
PERIOD = "week"


def trend_chart(weeks: pl.DataFrame, losses: pl.DataFrame) -> alt.VConcatChart:
    """Goodput (line, left axis) and MTBF (dashed line, right axis) per week above the lost
    GPU-hours per week stacked by cause (the class palette)."""
    df = weeks.with_columns(pl.col("period_start").dt.strftime("%Y-%m-%d").alias("week"))
    x = alt.X("week:O", title="week starting", axis=alt.Axis(labelAngle=-40))
    tip = [
        "week:O",
        alt.Tooltip("goodput:Q", format=".1%", title="measured goodput"),
        charts.gpu_hours_tip("lost_gpu_hours", "lost GPU-hours"),
        alt.Tooltip("interruptions:Q", title="unexpected interruptions"),
        charts.hours_tip("mtbf_hours", "MTBF"),
    ]
    good = alt.Chart(df).mark_line(point=True, color="#1f3b73").encode(
        x=x, y=alt.Y("goodput:Q", title="measured goodput", axis=alt.Axis(format="%"),
                     scale=alt.Scale(zero=False)), tooltip=tip)  # fmt: skip
    mtbf = alt.Chart(df).mark_line(point=True, strokeDash=[5, 3], color="#888").encode(
        x=x, y=alt.Y("mtbf_hours:Q", title="MTBF, hours (dashed)"), tooltip=tip)  # fmt: skip
    top = (
        alt.layer(good, mtbf)
        .resolve_scale(y="independent")
        .properties(
            width=charts.WIDTH, height=170, title="Measured goodput and fleet-wide MTBF per week"
        )
    )
    lost = losses.with_columns(pl.col("period_start").dt.strftime("%Y-%m-%d").alias("week")).rename(
        {"cause": "cause_class"})  # fmt: skip
    order = losses_frame_order(lost)
    bars = (
        alt.Chart(lost)
        .mark_bar()
        .encode(
            x=alt.X("week:O", title="week starting", axis=alt.Axis(labelAngle=-40)),
            y=alt.Y("lost_gpu_hours:Q", title="lost GPU-hours"),
            color=alt.Color(
                "cause_class:N",
                title="cause",
                sort=order,  # the class palette
                legend=alt.Legend(orient="bottom", columns=6),
            ),  # under the bars it belongs to
            order=alt.Order("lost_gpu_hours:Q", sort="descending"),
            tooltip=[
                "week:O",
                "cause_class:N",
                charts.gpu_hours_tip("lost_gpu_hours"),
                alt.Tooltip("interruptions:Q"),
                charts.hours_tip("mtbf_hours", "MTBF"),
            ],
        )
        .properties(
            width=charts.WIDTH,
            height=200,
            title="GPU-hours lost to unexpected interruptions, by cause",
        )
    )
    return alt.vconcat(top, bars, spacing=16)


def losses_frame_order(lost: pl.DataFrame) -> list[str]:
    """Causes by total lost GPU-hours, largest first (the legend's order)."""
    tot = lost.group_by("cause_class").agg(pl.col("lost_gpu_hours").sum()).sort(
        ["lost_gpu_hours", "cause_class"], descending=[True, False])  # fmt: skip
    return tot["cause_class"].to_list()


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    att, intr, jobs = t["job_attempts"], t["interruptions"], t["goodput_jobs"]
    weeks = trend_frame(att, intr, jobs, PERIOD)
    if weeks.height == 0 or (intr.height == 0 and jobs.height == 0):  # nothing measured per week
        s.note = NO_DATA
        return s
    losses = losses_frame(att, intr, "cause", PERIOD)
    s.chart = trend_chart(weeks, losses)
    last = weeks.row(-1, named=True)
    text = (
        f"{weeks.height} week(s); the latest (from {last['period_start']:%Y-%m-%d}, "
        f"{period_hours(last)}) had measured goodput {pct(last['goodput'])}, "
        f"{num(last['lost_gpu_hours'])} lost GPU-hours and {last['interruptions']:,} unexpected "
        f"interruptions (MTBF {mean_time(last['mtbf_hours'])})"
    )
    if weeks.height > 1:
        text += (
            f"; against the week before, per hour: goodput {tested(last, 'goodput')}, lost "
            f"share {tested(last, 'lost_share')}, interruptions {tested(last, 'interruptions')}"
        )
    best, worst = (
        weeks.sort("goodput").row(-1, named=True),
        weeks.sort("goodput").row(0, named=True),
    )
    s.reading = text + (
        f". Best week {best['period_start']:%Y-%m-%d} ({pct(best['goodput'])}), "
        f"worst {worst['period_start']:%Y-%m-%d} ({pct(worst['goodput'])})."
    )
    rows = [[f"{r['period_start']:%Y-%m-%d}", *trend_cells(r)] for r in weeks.iter_rows(named=True)]
    s.extra_html = (
        "<details><summary>The weeks as a table (also: goodput trend, goodput losses --period "
        "week); each change against the week before, per hour, with its 95% CI, worded as one "
        "only where its test tells it from noise</summary>"
        + html_table(["week", *TREND_HEADER], rows)
        + "</details>"
    )
    return s
