"""Explore interruptions: unexpected interruptions over time, by cause class and by partition,
as one linked chart. Dragging across the timeline picks a period and clicking a class or a
partition picks it (shift-click adds more): each view shows what the others picked. The data
is one aggregate row per (day, class, partition), never one row per job."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.taxonomy import NONE_LABEL, shown_cause
from dashboards import charts
from dashboards.section import NO_DATA, ReportContext, Section, num, pct

KEY = "explore"
TITLE = "Explore interruptions: pick a period, a cause class or a partition"
ORDER = 15
TABLES = ("interruptions", "job_attempts")

BUCKET_DAYS_MAX = 400  # longer spans are drawn per week: bars stay wider than a pixel


def explore_frame(interruptions: pl.DataFrame, attempts: pl.DataFrame) -> pl.DataFrame:
    """Unexpected interruptions per (time bucket, cause class, partition): ``day`` and ``day_end``
    as UTC ISO strings (a bucket is a day, or a week over long spans: ``bucket``),
    ``interruptions``, ``lost_gpu_hours``. The partition is the attempt's in ``job_attempts``."""
    keys = ["cluster", "scheduler", "job_id", "attempt"]
    intr = interruptions.filter(
        ~pl.col("planned").fill_null(False) & pl.col("end_time").is_not_null()
    ).with_columns(shown_cause())
    part = attempts.select(*keys, "partition").unique(keys, keep="first")
    df = intr.join(part, on=keys, how="left").with_columns(
        pl.col("partition").fill_null(NONE_LABEL)
    )
    if df.height == 0:
        return pl.DataFrame(
            schema={
                "day": pl.Utf8,
                "day_end": pl.Utf8,
                "cause_class": pl.Utf8,
                "partition": pl.Utf8,
                "interruptions": pl.UInt32,
                "lost_gpu_hours": pl.Float64,
                "bucket": pl.Utf8,
            }
        )
    span = (df["end_time"].max() - df["end_time"].min()).days
    every = "1d" if span <= BUCKET_DAYS_MAX else "1w"
    iso = "%Y-%m-%dT%H:%M:%SZ"
    start = pl.col("end_time").dt.truncate(every)
    return (
        df.with_columns(start.alias("_t0"), start.dt.offset_by(every).alias("_t1"))
        .group_by("_t0", "_t1", "cause_class", "partition")
        .agg(pl.len().alias("interruptions"), pl.col("lost_gpu_hours").sum())
        .sort("_t0", "cause_class", "partition")
        .select(
            pl.col("_t0").dt.strftime(iso).alias("day"),
            pl.col("_t1").dt.strftime(iso).alias("day_end"),
            "cause_class",
            "partition",
            "interruptions",
            "lost_gpu_hours",
            pl.lit("day" if every == "1d" else "week").alias("bucket"),
        )
    )


def explore_chart(df: pl.DataFrame, bucket: str) -> alt.VConcatChart:
    """The timeline (an interval brush on x) above bars by cause class and by partition (click
    to pick); every view is filtered by the selections made in the other views."""
    brush = alt.selection_interval(name="period", encodings=["x"])
    pick_class = alt.selection_point(name="pick_class", fields=["cause_class"])
    pick_part = alt.selection_point(name="pick_partition", fields=["partition"])
    base = alt.Chart(df)
    count = alt.X("sum(interruptions):Q", title="unexpected interruptions")
    tip = [
        alt.Tooltip("sum(interruptions):Q", title="interruptions"),
        alt.Tooltip("sum(lost_gpu_hours):Q", format=",.0f", title="lost GPU-hours"),
    ]
    timeline = (
        base.mark_bar(color="#4c78a8")
        .encode(
            x=alt.X(
                "day:T",
                scale=alt.Scale(type="utc"),
                title=f"interruptions per {bucket} (UTC)",
                axis=alt.Axis(format="%b %d"),
            ),
            x2="day_end:T",
            y=alt.Y("sum(interruptions):Q", title="interruptions"),
            tooltip=[alt.Tooltip("day:T", format="%Y-%m-%d", title=f"{bucket} from"), *tip],
        )
        .add_params(brush)
        .transform_filter(pick_class)
        .transform_filter(pick_part)
        .properties(
            width=charts.WIDTH + 60,
            height=140,
            title=alt.TitleParams(
                "Over time", subtitle="drag to pick a period; double-click to clear"
            ),
        )
    )

    def bars(field: str, title: str, pick, other) -> alt.Chart:
        return (
            base.mark_bar()
            .encode(
                y=alt.Y(f"{field}:N", sort="-x", title=None),
                x=count,
                color=alt.condition(pick, alt.value("#1f3b73"), alt.value("#c7cfdd")),
                tooltip=[alt.Tooltip(f"{field}:N"), *tip],
            )
            .add_params(pick)
            .transform_filter(brush)
            .transform_filter(other)
            .properties(
                width=charts.WIDTH // 2 - 20,
                height=alt.Step(18),
                title=alt.TitleParams(title, subtitle="click to pick, shift-click for more"),
            )
        )

    return alt.vconcat(
        timeline,
        alt.hconcat(
            bars("cause_class", "By cause class", pick_class, pick_part),
            bars("partition", "By partition", pick_part, pick_class),
            spacing=40,
        ),
        spacing=24,
    )


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    df = explore_frame(ctx.t["interruptions"], ctx.t["job_attempts"])
    if df.height == 0:
        s.note = NO_DATA if ctx.t["interruptions"].height == 0 else "no unexpected interruptions"
        return s
    days = df.select(pl.col("day").n_unique()).item()
    bucket = df["bucket"][0]
    s.chart = explore_chart(df, bucket)
    total = int(df["interruptions"].sum())
    busiest = (
        df.group_by("day")
        .agg(pl.col("interruptions").sum())
        .sort(["interruptions", "day"], descending=[True, False])
        .row(0, named=True)
    )
    parts = (
        df.group_by("partition")
        .agg(pl.col("interruptions").sum(), pl.col("lost_gpu_hours").sum())
        .sort(["interruptions", "partition"], descending=[True, False])
    )
    top = parts.row(0, named=True)
    when = busiest["day"][:10] if bucket == "day" else f"from {busiest['day'][:10]}"
    s.reading = (
        f"{total:,} unexpected interruptions fell on {days:,} {bucket}(s); the busiest {bucket} "
        f"({when}) had {busiest['interruptions']:,}. Of {parts.height:,} partition(s), "
        f"{top['partition']} had the most: {top['interruptions']:,} "
        f"({pct(top['interruptions'] / total, 0)}, {num(top['lost_gpu_hours'])} lost GPU-hours)."
    )
    return s
