"""Data quality: rows kept and records quarantined per source format, and the most frequent
reasons."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import pct

KEY = "data_quality"
TITLE = "Data quality: rows kept and records quarantined per source format"
TABLES = ("ingest_manifest", "quarantine")


def ingest_frame(manifest: pl.DataFrame) -> pl.DataFrame:
    """Files, rows kept and records quarantined per source format."""
    return (
        manifest.group_by(pl.col("format").fill_null("unknown"))
        .agg(
            pl.len().alias("files"),
            pl.col("rows_ok").sum(),
            pl.col("rows_quarantined").sum(),
            pl.col("bytes").sum(),
        )
        .with_columns(
            (pl.col("rows_quarantined") / (pl.col("rows_ok") + pl.col("rows_quarantined")))
            .fill_nan(0.0)
            .alias("quarantined_share")
        )
        .sort(["rows_ok", "format"], descending=[True, False])
    )


def data_quality_chart(df: pl.DataFrame) -> alt.HConcatChart:
    """Rows kept and records quarantined per source format (``ingest_frame``; symlog x: volumes
    differ by 10^5 and a log scale has no zero for bars to start from)."""
    long = (
        df.unpivot(
            index=["format", "files", "quarantined_share"],
            on=["rows_ok", "rows_quarantined"],
            variable_name="kind",
            value_name="records",
        )
        .with_columns(
            pl.col("kind").replace({"rows_ok": "rows kept", "rows_quarantined": "quarantined"})
        )
        .filter(pl.col("records") > 0)
    )
    order = df["format"].to_list()
    top = max(1, int(long["records"].max() or 1))
    ticks = [0] + [10**k for k in range(len(str(top)) + 1)]
    return alt.hconcat(
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("format:N", sort=order, title="source format"),
            x=alt.X(
                "records:Q",
                scale=alt.Scale(type="symlog"),
                title="records (symmetric log scale)",
                axis=alt.Axis(values=ticks, format=",d"),
            ),
            yOffset="kind:N",
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["rows kept", "quarantined"], range=["#4c78a8", "#e45756"]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=[
                "format:N",
                "kind:N",
                alt.Tooltip("records:Q", format=","),
                "files:Q",
                alt.Tooltip("quarantined_share:Q", format=".2%", title="quarantined share"),
            ],
        )
        .properties(width=charts.WIDTH - 80, height=max(120, 34 * len(order)))
    )


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    man = t["ingest_manifest"]
    if man.height == 0:
        s.note = NO_DATA
        return s
    df = ingest_frame(man)
    s.chart = data_quality_chart(df)
    kept, bad = int(df["rows_ok"].sum()), int(df["rows_quarantined"].sum())
    text = (
        f"{man.height:,} files gave {kept:,} rows; {bad:,} records were quarantined "
        f"({pct(bad / (kept + bad) if kept + bad else 0, 2)})"
    )
    if bad:
        w = df.sort("rows_quarantined", descending=True).row(0, named=True)
        text += f", most from {w['format']} ({w['rows_quarantined']:,})"
    s.reading = text + "."
    q = t["quarantine"]
    if q.height:
        errs = (
            q.group_by(pl.col("format"), pl.col("error").str.slice(0, 120))
            .agg(pl.len().alias("n"))
            .sort(["n", "format", "error"], descending=[True, False, False])
            .head(8)
        )
        s.extra_html = '<p class="sub">Most frequent quarantine reasons</p>' + html_table(
            ["format", "reason", "records"], [list(r) for r in errs.iter_rows()]
        )
    return s
