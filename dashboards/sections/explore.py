"""Drill down without a server: cluster, partition and account selectors (Vega-Lite parameters
bound to drop-downs, like Grafana variables), a time-range brush on the timeline and a click on a
cause class filter every chart of the section together: the figures of the selection (unexpected
interruptions, lost GPU-hours, measured goodput), interruptions over time, measured goodput over
time, and the bars by cause class and by partition.

The page carries two aggregates, each embedded once (Vega-Lite ``datasets``), never one row per
job: unexpected interruptions per (time bucket, cluster, partition, account, cause class), and
job chains' GPU-hours and productive GPU-hours per (time bucket, cluster, partition, account),
so goodput is recomputed for any selection as Σ productive / Σ GPU-hours. Fits and projections
cannot be re-fitted in the browser: the section says so and names the scoped rebuild."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import polars as pl

from analysis.taxonomy import NONE_LABEL
from analysis.taxonomy import shown_cause
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import num
from dashboards.section import pct

KEY = "explore"
TITLE = "Drill down: pick a cluster, partition, account, period or cause class"
TABLES = ("interruptions", "job_attempts", "goodput_jobs")

BUCKET_DAYS_MAX = 400  # longer spans are drawn per week: bars stay wider than a pixel
SELECTORS = ("cluster", "partition", "account")
ALL = "(all)"  # a selector's value that keeps every row
ISO = "%Y-%m-%dT%H:%M:%SZ"
_KEYS = ["cluster", "scheduler", "job_id", "attempt"]


def bucket_every(*times: pl.Series) -> str:
    """'1d', or '1w' when the times span more than ``BUCKET_DAYS_MAX`` days."""
    ts = pl.concat([t.cast(pl.Datetime("us")) for t in times]).drop_nulls()
    if ts.len() == 0:
        return "1d"
    return "1d" if (ts.max() - ts.min()).days <= BUCKET_DAYS_MAX else "1w"


def _labels() -> list[pl.Expr]:
    return [pl.col(c).cast(pl.Utf8).fill_null(NONE_LABEL) for c in SELECTORS]


def _bucketed(
    df: pl.DataFrame, time: str, every: str, group: list[str], aggs: list[pl.Expr]
) -> pl.DataFrame:
    start = pl.col(time).cast(pl.Datetime("us")).dt.truncate(every)
    return (
        df.with_columns(start.alias("_t0"), start.dt.offset_by(every).alias("_t1"))
        .group_by("_t0", "_t1", *group)
        .agg(aggs)
        .sort("_t0", *group)
        .select(
            pl.col("_t0").dt.strftime(ISO).alias("day"),
            pl.col("_t1").dt.strftime(ISO).alias("day_end"),
            *group,
            pl.exclude("_t0", "_t1", *group),
        )
    )


def explore_frame(
    interruptions: pl.DataFrame, attempts: pl.DataFrame, every: str | None = None
) -> pl.DataFrame:
    """Unexpected interruptions per (time bucket, cluster, partition, account, cause class):
    ``day`` and ``day_end`` as UTC ISO strings (a bucket is a day, or a week over long spans:
    ``bucket``), ``interruptions``, ``lost_gpu_hours``. Partition and account are the
    attempt's in ``job_attempts``; a missing one is ``NONE_LABEL``."""
    intr = interruptions.filter(
        ~pl.col("planned").fill_null(False) & pl.col("end_time").is_not_null()
    ).with_columns(shown_cause())
    jobs = attempts.select(*_KEYS, "partition", "account").unique(_KEYS, keep="first")
    df = (
        intr.drop("partition", "account", strict=False)
        .join(jobs, on=_KEYS, how="left")
        .with_columns(_labels())
    )
    every = every or bucket_every(df["end_time"])
    group = [*SELECTORS, "cause_class"]
    aggs = [pl.len().alias("interruptions"), pl.col("lost_gpu_hours").fill_null(0).sum()]
    if df.height == 0:
        schema = {
            "day": pl.Utf8,
            "day_end": pl.Utf8,
            **dict.fromkeys(group, pl.Utf8),
            "interruptions": pl.UInt32,
            "lost_gpu_hours": pl.Float64,
            "bucket": pl.Utf8,
        }
        return pl.DataFrame(schema=schema)
    out = _bucketed(df, "end_time", every, group, aggs)
    return out.with_columns(pl.lit("day" if every == "1d" else "week").alias("bucket"))


def goodput_frame(
    goodput_jobs: pl.DataFrame, attempts: pl.DataFrame, every: str = "1d"
) -> pl.DataFrame:
    """Job chains per (time bucket of their final end, cluster, partition, account): GPU-hours
    (n_gpus × wall) and productive GPU-hours, whose ratio over any selection is the measured
    goodput weighted by GPU-hours (``analysis.headline.weighted_goodput``). A chain counts under
    its last attempt's partition and account (as ``goodput_breakdown``)."""
    last = (
        attempts.sort("attempt")
        .group_by("cluster", "scheduler", "job_id")
        .agg(pl.col("partition", "account").last())
    )
    ran = goodput_jobs.filter((pl.col("wall_hours") > 0) & pl.col("final_end").is_not_null())
    df = ran.join(last, on=["cluster", "scheduler", "job_id"], how="left").with_columns(_labels())
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    aggs = [(w * pl.col("wall_hours")).sum().alias("gpu_hours"),
            (w * pl.col("productive_hours")).sum().alias("productive_gpu_hours")]  # fmt: skip
    if df.height == 0:
        schema = {"day": pl.Utf8, "day_end": pl.Utf8, **dict.fromkeys(SELECTORS, pl.Utf8),
                  "gpu_hours": pl.Float64, "productive_gpu_hours": pl.Float64}  # fmt: skip
        return pl.DataFrame(schema=schema)
    return _bucketed(df, "final_end", every, list(SELECTORS), aggs)


def _selector(field: str, values: list[str]) -> alt.Parameter:
    options = [ALL, *sorted(set(values))]
    return alt.param(name=f"sel_{field}", value=ALL,
                     bind=alt.binding_select(options=options, name=f"{field} "))  # fmt: skip


def _chosen(params: dict[str, alt.Parameter]) -> str:
    """A Vega expression: the row is in every selector's choice."""
    return " && ".join(f"(sel_{f} == '{ALL}' || datum.{f} == sel_{f})" for f in params)


def picked(selection: str) -> str:
    """A Vega expression: the row is in ``selection`` (every row while it is empty), as
    Vega-Lite tests a selection parameter (its ``<name>_store`` data set)."""
    return f"(!length(data('{selection}_store')) || vlSelectionTest('{selection}_store', datum))"


@dataclass(frozen=True)
class _Filters:
    """What filters the explorer's views: the selectors' Vega test (``_chosen``), the period
    brush on the timeline and the cause classes picked on their bars."""

    chosen: str
    brush: alt.Parameter
    pick_class: alt.Parameter


def _lost_tips() -> list[alt.Tooltip]:
    return [
        alt.Tooltip("sum(interruptions):Q", title="interruptions"),
        charts.gpu_hours_tip("sum(lost_gpu_hours)", "lost GPU-hours"),
    ]


def _x_time(axis: alt.Axis, title: str) -> alt.X:
    return alt.X("day:T", scale=alt.Scale(type="utc"), title=title, axis=axis)


def _bucket_tip(bucket: str) -> alt.Tooltip:
    return alt.Tooltip("day:T", format="%Y-%m-%d", title=f"{bucket} from")


def _figure(chart: alt.Chart, f: _Filters, text: str, **totals: str) -> alt.Chart:
    """One line of text: the sums ``totals`` (field -> column) over the rows in the selection.
    Rows outside it count 0 rather than being filtered out, so an empty selection still
    prints its zeros (Vega aggregates nothing into no row)."""
    kept = f"({f.chosen}) && {picked('period')}" + (
        f" && {picked('pick_class')}" if "n" in totals else ""
    )
    zeroed = {f"_{k}": f"datum._in ? datum.{c} : 0" for k, c in totals.items()}
    return (
        chart.transform_calculate(day="toDate(datum.day)")
        .transform_calculate(_in=kept).transform_calculate(**zeroed)
        .transform_aggregate(**{k: f"sum(_{k})" for k in totals})
        .transform_calculate(text=text)
        .mark_text(align="left", baseline="middle", fontSize=15, color="#1f3b73", x=0)
        .encode(text=alt.Text("text:N"))
        .properties(width=charts.WIDTH + 60, height=22)
    )  # fmt: skip


def _timeline(inter: alt.Chart, f: _Filters, params, axis: alt.Axis, bucket: str) -> alt.Chart:
    """Interruptions per bucket: the brush is drawn here, the selectors are bound here."""
    chart = (
        inter.transform_calculate(day_end=f"utcOffset('{bucket}', toDate(datum.day), 1)")
        .mark_bar(color="#4c78a8")
        .encode(
            x=_x_time(axis, f"per {bucket} (UTC)"),
            x2="day_end:T",
            y=alt.Y("sum(interruptions):Q", title="interruptions"),
            tooltip=[_bucket_tip(bucket), *_lost_tips()],
        )
        .add_params(f.brush, *params)
        .transform_filter(f.chosen)
        .transform_filter(f.pick_class)
    )
    return charts.framed(
        chart,
        "Unexpected interruptions over time",
        "drag to pick a period; double-click to clear",
        height=130,
        width=charts.WIDTH + 60,
    )


def _goodput_line(goods: alt.Chart, f: _Filters, axis: alt.Axis, bucket: str) -> alt.Chart:
    """Measured goodput per bucket of the job chains in the selection and the brushed period."""
    chart = (
        goods.transform_filter(f.chosen)
        .transform_filter(f.brush)
        .transform_aggregate(g="sum(gpu_hours)", p="sum(productive_gpu_hours)", groupby=["day"])
        .transform_calculate(goodput="datum.g > 0 ? datum.p / datum.g : null")
        .mark_line(point=alt.OverlayMarkDef(color="#2ca02c"), color="#2ca02c")
        .encode(
            x=_x_time(axis, f"job chains ending per {bucket} (UTC)"),
            y=alt.Y("goodput:Q", title="measured goodput", axis=alt.Axis(format="%")),
            tooltip=[
                _bucket_tip(bucket),
                alt.Tooltip("goodput:Q", format=".1%"),
                charts.gpu_hours_tip("g", "GPU-hours"),
            ],
        )
    )
    return charts.framed(
        chart,
        "Measured goodput over time",
        "GPU-hour weighted, of the job chains in the selection",
        height=110,
        width=charts.WIDTH + 60,
    )


def _bars(inter: alt.Chart, f: _Filters, field: str, title: str, subtitle: str, pick=None):
    """Lost GPU-hours by ``field``; with ``pick``, a click on a bar picks it."""
    color = (
        alt.condition(pick, alt.value("#1f3b73"), alt.value("#c7cfdd"))
        if pick
        else alt.value("#1f3b73")
    )
    chart = (
        inter.mark_bar()
        .encode(y=alt.Y(f"{field}:N", sort="-x", title=None),
                x=alt.X("sum(lost_gpu_hours):Q", title="lost GPU-hours",
                        axis=alt.Axis(tickCount=5, labelOverlap=True)),
                color=color, tooltip=[alt.Tooltip(f"{field}:N"), *_lost_tips()])
        .transform_filter(f.chosen)
        .transform_filter(f.brush)
    )  # fmt: skip
    chart = charts.framed(chart, title, subtitle, height=alt.Step(18), width=charts.WIDTH // 2 - 40)
    return chart.add_params(pick) if pick else chart.transform_filter(f.pick_class)


def explore_chart(intr: pl.DataFrame, good: pl.DataFrame, bucket: str) -> alt.VConcatChart:
    """The figures of the selection, the interruption timeline (an interval brush on x), the
    goodput line, and bars by cause class (click to pick) and by partition; the selectors, the
    brush and the picked class filter every view but the one they are made on."""
    params = {f: _selector(f, [*intr[f].to_list(), *good[f].to_list()]) for f in SELECTORS}
    # the page carries each row once: no bucket end (Vega adds it) and sums to 0.01 GPU-hour
    intr = intr.drop("day_end", "bucket").with_columns(pl.col("lost_gpu_hours").round(2))
    good = good.drop("day_end").with_columns(pl.col("gpu_hours", "productive_gpu_hours").round(2))
    f = _Filters(
        chosen=_chosen(params),
        brush=alt.selection_interval(name="period", encodings=["x"]),
        pick_class=alt.selection_point(name="pick_class", fields=["cause_class"]),
    )
    inter, goods = alt.Chart(intr), alt.Chart(good)
    # about ten ticks, never finer than a day (finer ticks would repeat the same date label)
    ticks = min(10, intr["day"].n_unique() + 1)
    axis = alt.Axis(format="%b %d", tickCount=ticks, labelOverlap="greedy")
    counts = _figure(
        inter,
        f,
        "'Selection: ' + format(datum.n, ',') + ' unexpected interruptions, ' + "
        "format(datum.lost, ',.0f') + ' GPU-hours lost'",
        n="interruptions",
        lost="lost_gpu_hours",
    )
    goodput_text = _figure(
        goods,
        f,
        "'measured goodput ' + (datum.g > 0 ? format(datum.p / datum.g, '.1%') : 'n/a') + "
        "' of ' + format(datum.g, ',.0f') + ' job-chain GPU-hours'",
        g="gpu_hours",
        p="productive_gpu_hours",
    )
    return alt.vconcat(
        counts,
        goodput_text,
        _timeline(inter, f, params.values(), axis, bucket),
        _goodput_line(goods, f, axis, bucket),
        alt.hconcat(
            _bars(
                inter,
                f,
                "cause_class",
                "By cause class",
                "click to pick, shift-click for more",
                f.pick_class,
            ),
            _bars(inter, f, "partition", "By partition", "of the picked classes"),
            spacing=60,
        ),
        spacing=20,
    )


REFIT_NOTE = (
    "The selectors and the brush filter these counts, lost GPU-hours and measured goodput in "
    "the page; failure rates, fits and projections are not re-fitted by them. For one "
    "cluster's, partition's or account's fits run a scoped rebuild: goodput report --cluster "
    "NAME (or --partition, --account, --from, --to). Job-chain GPU-hours run from each chain's "
    "first start to its final end, the waits between a failure and the requeued attempt "
    "included: more than the GPU-hours the attempts held (the headline's GPU-hours used by "
    "jobs)."
)


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    att, intr_t = ctx.t["job_attempts"], ctx.t["interruptions"]
    every = bucket_every(intr_t["end_time"], ctx.t["goodput_jobs"]["final_end"])
    df = explore_frame(intr_t, att, every)
    if df.height == 0:
        s.note = NO_DATA if intr_t.height == 0 else "no unexpected interruptions"
        return s
    good = goodput_frame(ctx.t["goodput_jobs"], att, every)
    days = df.select(pl.col("day").n_unique()).item()
    bucket = df["bucket"][0]
    s.chart = explore_chart(df, good, bucket)
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
        .sort(["lost_gpu_hours", "partition"], descending=[True, False])
    )
    top = parts.row(0, named=True)  # the first bar of the partition chart (by lost GPU-hours)
    lost = parts["lost_gpu_hours"].sum()
    when = busiest["day"][:10] if bucket == "day" else f"from {busiest['day'][:10]}"
    s.reading = (
        f"Without a selection: {total:,} unexpected interruptions fell on {days:,} {bucket}(s); "
        f"the busiest {bucket} "
        f"({when}) had {busiest['interruptions']:,}. Of {parts.height:,} partition(s), "
        f"{top['partition']} lost the most GPU-hours: {num(top['lost_gpu_hours'])} "
        f"({pct(top['lost_gpu_hours'] / lost, 0) if lost else 'n/a'}), in "
        f"{top['interruptions']:,} interruptions."
    )
    s.extra_html = f'<p class="sub" id="explore-refit">{REFIT_NOTE}</p>'
    return s
