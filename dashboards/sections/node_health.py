"""Report section: lemon nodes (``node_health``): the nodes that fail most against the fleet's
rate, the test that flags them, and the projected goodput of a large job with the fleet's rate
refitted without them (``analysis.node_health.lemon_gain``), chart and reading from the same
frame."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.node_health import fleet_rates
from analysis.node_health import lemon_gain
from analysis.node_health import summary
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours
from dashboards.section import html_table
from dashboards.section import num
from dashboards.section import pct

KEY = "node_health"
TITLE = "Lemon nodes: failures per node against the fleet's rate"
TABLES = ("node_health",)
SHOWN = 15  # nodes in the chart, worst first


def worst_frame(health: pl.DataFrame, n: int = SHOWN) -> pl.DataFrame:
    """The ``n`` tested nodes with the smallest p values (lemons first), as the chart shows them."""
    return (
        health.filter(pl.col("node_hours") > 0)
        .head(n)
        .with_columns(
            status=pl.when(pl.col("lemon").fill_null(False))
            .then(pl.lit("lemon"))
            .otherwise(pl.lit("not significant"))
        )
    )


def chart(worst: pl.DataFrame) -> alt.LayerChart:
    """Observed failures per node (bars, lemons highlighted) with the count the fleet's rate
    predicts for its exposure (ticks)."""
    order = worst["host"].to_list()
    y = alt.Y("host:N", sort=order, title=None)
    tooltip = [
        alt.Tooltip("host:N"),
        alt.Tooltip("failures:Q"),
        alt.Tooltip("expected_failures:Q", format=".2f", title="expected at fleet rate"),
        alt.Tooltip("p_value:Q", format=".2g", title="p"),
        alt.Tooltip("p_adjusted:Q", format=".2g", title="adjusted p"),
        alt.Tooltip("interruptions:Q"),
        charts.gpu_hours_tip("lost_gpu_hours", "lost GPU-hours"),
        alt.Tooltip("hw_events_critical:Q", title="critical hw events"),
        alt.Tooltip("repairs:Q"),
        alt.Tooltip("node_hours:Q", format=",.0f", title="node-hours observed"),
    ]
    bars = (
        alt.Chart(worst)
        .mark_bar()
        .encode(
            x=alt.X("failures:Q", title="failures (bar) vs expected at the fleet's rate (tick)"),
            y=y,
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=["lemon", "not significant"], range=["#c0392b", "#9db4d6"]),
                title=None,
            ),
            tooltip=tooltip,
        )
    )
    ticks = (
        alt.Chart(worst)
        .mark_tick(color="#222", thickness=2)
        .encode(x="expected_failures:Q", y=y, tooltip=tooltip)
    )
    return (bars + ticks).properties(width=charts.WIDTH, height=max(120, 22 * worst.height))


def reading(health: pl.DataFrame, gain: dict | None) -> str:
    s = summary(health)
    if s["tested"] == 0:
        return "No node has observed node-hours: nothing to test."
    rate = (s["fleet_rate_per_node_hour"] or 0.0) * 1000
    text = (
        f"{s['tested']:,} nodes observed for {num(s['node_hours'])} node-hours had "
        f"{s['failures']:,} failures ({num(rate)} per 1,000 node-hours). Test: {s['test']}, "
        f"lemon when the adjusted p is below {s['alpha']:g}. "
    )
    lemons = health.filter(pl.col("lemon").fill_null(False))
    if lemons.height == 0:
        top = health.filter(pl.col("node_hours") > 0).row(0, named=True)
        text += (
            f"No node fails significantly more often than the fleet; the worst, {top['host']}, "
            f"had {top['failures']} failure(s) where {num(top['expected_failures'])} were expected "
            f"(adjusted p {top['p_adjusted']:.2g})."
        )
    else:
        text += (
            f"{lemons.height} lemon node(s) ({', '.join(lemons['host'].head(5))}"
            f"{', ...' if lemons.height > 5 else ''}) had {int(lemons['failures'].sum()):,} "
            f"failures where {num(float(lemons['expected_failures'].sum()))} were expected, "
            f"{int(lemons['interruptions'].sum()):,} interruptions and "
            f"{num(float(lemons['lost_gpu_hours'].sum()))} lost GPU-hours."
        )
        if gain is not None and gain["without_lemons"] is None:
            text += " Without them no failure is left to refit the fleet's rate from."
        elif gain is not None:
            b, w = gain["baseline"], gain["without_lemons"]
            text += (
                " With the fleet's rate refitted without them (each replaced by a typical "
                f"node), a {gain['target_gpus']:,}-GPU job's MTTI ({gain['basis']}) goes from "
                f"{hours(b['mtti_hours'])} to {hours(w['mtti_hours'])} and its projected goodput "
                f"from {pct(b['goodput'])} to {pct(w['goodput'])} "
                f"({100 * gain['goodput_gain']:+.1f} points; analytic model, Daly's interval)."
            )
    if s["untested"]:
        text += f" {s['untested']:,} node(s) not tested: no observed node-hours."
    return text


def table_html(health: pl.DataFrame) -> str:
    """The lemon nodes (or, with none, the five worst) with every number behind the flag."""
    lemons = health.filter(pl.col("lemon").fill_null(False))
    rows = lemons if lemons.height else health.filter(pl.col("node_hours") > 0).head(5)
    header = [
        "host", "cluster", "failures", "expected", "interruptions", "lost GPU-hours",
        "hw events (critical)", "repairs (failed parts)", "node-hours", "GPU-hours scheduled",
        "p", "adjusted p", "lemon",
    ]  # fmt: skip
    body = [
        [
            r["host"],
            r["cluster"] or "",
            r["failures"],
            num(r["expected_failures"]),
            r["interruptions"],
            num(r["lost_gpu_hours"]),
            f"{r['hw_events']} ({r['hw_events_critical']})",
            f"{r['repairs']} ({r['failed_parts']})",
            num(r["node_hours"]),
            num(r["gpu_hours_scheduled"]),
            f"{r['p_value']:.2g}",
            f"{r['p_adjusted']:.2g}",
            "yes" if r["lemon"] else "no",
        ]
        for r in rows.iter_rows(named=True)
    ]
    return html_table(header, body)


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    health = ctx.t["node_health"]
    if health.height == 0:
        s.note = NO_DATA
        return s
    if health.filter(pl.col("node_hours") > 0).height == 0:
        s.note = f"no node has observed node-hours: {health.height:,} node(s) not tested"
        return s
    rates = fleet_rates(ctx.wh) if ctx.wh is not None else None
    gain = lemon_gain(health, ctx.target_gpus, rates=rates)
    s.chart = chart(worst_frame(health))
    s.reading = reading(health, gain)
    s.extra_html = table_html(health)
    return s
