"""Data quality: time covered per source table and host (aggregates from the warehouse, not raw
samples)."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.numbers import MINUTE
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table

KEY = "coverage"
TITLE = "Data quality: time covered per source and host"
TABLES = ()
# hosts charted one bar per source each; a bigger fleet charts only its least-covered hosts (a
# bar per host of 2,000 is 30,000 pixels tall, and Altair refuses more than 5,000 rows)
MAX_HOSTS = 50


def least_covered(coverage: pl.DataFrame, n: int = MAX_HOSTS) -> pl.DataFrame:
    """The rows of the ``n`` hosts with the least coverage: fewest source tables, then the
    least time covered over them (ties by name)."""
    rank = (
        coverage.group_by("host")
        .agg(sources=pl.col("source").n_unique(), covered=(pl.col("last") - pl.col("first")).sum())
        .sort("sources", "covered", "host")
    )
    return coverage.filter(pl.col("host").is_in(rank["host"].head(n).implode()))


def coverage_chart(coverage: pl.DataFrame) -> alt.Chart:
    """Time covered per host and source table: columns source, host, first, last, rows."""
    hosts = sorted(coverage["host"].unique().to_list())
    sel = charts.legend_select("source")
    return (
        alt.Chart(coverage)
        .mark_bar(height=5)
        .encode(
            y=alt.Y("host:N", sort=hosts, title=None, axis=alt.Axis(labelFontSize=9)),
            x=alt.X("first:T", title="time covered (UTC)"),
            x2="last:T",
            yOffset="source:N",
            color=alt.Color("source:N", title="source table"),
            opacity=charts.highlight(sel),
            tooltip=[
                "source:N",
                "host:N",
                *charts.time_tips("first", "last"),
                alt.Tooltip("rows:Q", format=","),
            ],
        )
        .add_params(sel)
        .properties(width=charts.WIDTH, height=max(120, 16 * len(hosts)))
    )


def build(ctx: ReportContext) -> Section:
    coverage = ctx.coverage
    s = Section(KEY, TITLE)
    if coverage.height == 0:
        s.note = NO_DATA
        return s
    n_charted = coverage["host"].n_unique()
    s.chart = coverage_chart(coverage if n_charted <= MAX_HOSTS else least_covered(coverage))
    per = (
        coverage.group_by("source")
        .agg(
            pl.col("first").min(),
            pl.col("last").max(),
            pl.col("rows").sum(),
            pl.col("host").n_unique().alias("hosts"),
        )
        .sort("source")
    )
    if (
        "job_attempts" in per["source"]
    ):  # an attempt spans hosts: count attempts, not attempt-host pairs
        attempts = ctx.wh.query(f"SELECT count(*) AS n FROM ({ctx.wh.view_sql('job_attempts')})")[
            "n"
        ][0]
        per = per.with_columns(
            rows=pl.when(pl.col("source") == "job_attempts")
            .then(pl.lit(attempts, pl.Int64))
            .otherwise("rows")
        )
    hosts = coverage.filter(pl.col("host") != "(no host)")
    n_hosts = hosts["host"].n_unique()
    n_src = hosts["source"].n_unique()
    full = (
        hosts.group_by("host")
        .agg(pl.col("source").n_unique())
        .filter(pl.col("source") == n_src)
        .height
    )
    text = (
        f"Data spans {per['first'].min():%Y-%m-%d} to {per['last'].max():%Y-%m-%d}; {full:,} of "
        f"{n_hosts:,} hosts appear in all {n_src} source tables"
    )
    missing = sorted(set(per["source"].to_list()) ^ set(hosts["source"].to_list()))
    s.reading = text + (f" (no per-host data in {', '.join(missing)})" if missing else "") + "."
    if n_charted > MAX_HOSTS:
        s.reading += (
            f" The chart shows the {MAX_HOSTS} of {n_charted:,} hosts with the least coverage "
            "(fewest source tables, then least time covered)."
        )
    s.extra_html = html_table(
        ["source table", "first (UTC)", "last (UTC)", "rows", "hosts"],
        [
            [
                r["source"],
                f"{r['first']:{MINUTE}}",
                f"{r['last']:{MINUTE}}",
                f"{r['rows']:,}",
                r["hosts"],
            ]
            for r in per.iter_rows(named=True)
        ],
    )
    return s
