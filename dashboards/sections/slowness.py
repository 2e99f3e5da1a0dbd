"""Report section: time lost running slow (``slow_periods``): the GPU-hours jobs lost running
slower than their healthy speed, by cause and by the node the evidence names, the worst jobs,
and for the worst job a rank (or GPU) x step map of who ran slow when."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.headline import slow_gpu_hours
from analysis.slowness.keys import JOB
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import num
from dashboards.section import pct
from warehouse.signals import CAUSES

KEY = "slowness"
TITLE = "Time lost running slow"
TABLES = ("slow_periods", "goodput_jobs", "step_timers", "gpu_signal_spans", "job_attempts")
NODES = 10  # nodes in the chart, worst first
JOBS = 8  # jobs in the table
CELLS = 60  # steps (columns) of the map
ROWS = 32  # ranks or GPUs (rows) of the map: the slowest, so the page does not grow with the job


def by_cause(periods: pl.DataFrame) -> pl.DataFrame:
    """Slow GPU-hours and periods per cause, in ``CAUSES`` order, with the confidence mix."""
    return (
        periods.group_by(pl.col("cause").fill_null("unknown"))
        .agg(
            pl.col("slow_gpu_hours").fill_null(0).sum(),
            periods=pl.len(),
            high=(pl.col("confidence") == "high").sum(),
        )
        .with_columns(_o=pl.col("cause").replace_strict(CAUSES, range(len(CAUSES)), default=99))
        .sort("_o")
        .drop("_o")
    )


def by_node(periods: pl.DataFrame, n: int = NODES) -> pl.DataFrame:
    """The ``n`` nodes whose GPUs or ranks cost jobs the most slow GPU-hours."""
    return (
        periods.filter(pl.col("culprit_host").is_not_null())
        .group_by(host="culprit_host")
        .agg(
            pl.col("slow_gpu_hours").fill_null(0).sum(),
            periods=pl.len(),
            cause=pl.col("cause").mode().first(),
        )
        .sort("slow_gpu_hours", "host", descending=[True, False])
        .head(n)
    )


def worst_jobs(periods: pl.DataFrame, n: int = JOBS) -> pl.DataFrame:
    """The ``n`` jobs that lost most slow GPU-hours, with their worst slowdown, causes, nodes."""
    return (
        periods.group_by(JOB)
        .agg(
            pl.col("n_gpus").max(),
            pl.col("slow_gpu_hours").fill_null(0).sum(),
            periods=pl.len(),
            worst=pl.col("slowdown").max(),
            causes=pl.col("cause").unique().sort().str.join(", "),
            nodes=pl.col("culprit_host").drop_nulls().unique().sort().str.join(", "),
            sources=pl.col("source").unique().sort().str.join(", "),
        )
        .sort("slow_gpu_hours", descending=True)
        .head(n)
    )


def rank_map(ctx: ReportContext, job: dict) -> tuple[pl.DataFrame, str]:
    """(row, step, value) cells of one job and what rows and values are: its per-rank compute
    timers (each rank's time over the median rank's of the step) where its log has them, else
    its GPUs' slow spans (the SM clock's or link's shortfall: 1 / ratio, 1 where none) over the
    job's run, in ``CELLS`` steps."""
    timers = ctx.t["step_timers"].filter(
        (pl.col("job_id") == job["job_id"])
        & pl.col("rank").is_not_null()
        & pl.col("timer").str.contains("compute")
    )
    if timers.height:
        per = timers.group_by("iteration", "rank").agg(pl.col("value_ms").sum())
        per = per.with_columns(
            value=pl.col("value_ms") / pl.col("value_ms").median().over("iteration")
        )
        steps = per["iteration"].unique().sort()
        keep = steps.gather_every(max(1, steps.len() // CELLS))
        cells = per.filter(pl.col("iteration").is_in(keep.implode())).select(
            row=pl.format("rank {}", pl.col("rank")), step=pl.col("iteration"), value="value"
        )
        return _slowest(cells, "rank x logged iteration: compute time over the median rank's")
    att = ctx.t["job_attempts"].filter(
        (pl.col("job_id") == job["job_id"]) & pl.col("start_time").is_not_null()
    )
    if att.height == 0:
        return pl.DataFrame(), ""
    t0, t1 = att["start_time"].min(), att["end_time"].max()
    if t1 is None or t1 <= t0:
        return pl.DataFrame(), ""
    hosts = att["nodes"].explode().drop_nulls().unique().sort()
    spans = ctx.t["gpu_signal_spans"].filter(
        pl.col("host").is_in(hosts.implode())
        & (pl.col("end_time") > t0)
        & (pl.col("start_time") < t1)
    )
    if spans.height == 0:
        return pl.DataFrame(), ""
    step = (t1 - t0) / CELLS
    edges = pl.datetime_range(t0, t1, step, eager=True).head(CELLS)
    grid = pl.DataFrame({"step": edges}).join(spans.select("host", "gpu").unique(), how="cross")
    hit = grid.join(
        spans.select("host", "gpu", "start_time", "end_time", "ratio"), on=["host", "gpu"]
    )
    hit = (
        hit.filter(
            (pl.col("start_time") < pl.col("step") + step) & (pl.col("end_time") > pl.col("step"))
        )
        .group_by("host", "gpu", "step")
        .agg(value=(1 / pl.col("ratio").clip(lower_bound=0.05)).max())
    )
    cells = grid.join(hit, on=["host", "gpu", "step"], how="left").select(
        row=pl.format("{} GPU {}", "host", "gpu"),
        step="step",
        step_end=pl.col("step") + step,
        value=pl.col("value").fill_null(1.0),
    )
    return _slowest(cells, "GPU x time over its run: how far below its max the GPU ran (1 / ratio)")


def _slowest(cells: pl.DataFrame, what: str) -> tuple[pl.DataFrame, str]:
    """The map's cells of its ``ROWS`` rows that peak highest (all where there are no more),
    and ``what`` saying so."""
    peaks = (
        cells.group_by("row")
        .agg(pl.col("value").max())
        .sort("value", "row", descending=[True, False])
    )
    if peaks.height <= ROWS:
        return cells, what
    keep = peaks.head(ROWS)["row"]
    return (
        cells.filter(pl.col("row").is_in(keep.implode())),
        f"{what}; the {ROWS} slowest of {peaks.height:,} rows",
    )


def _bars(frame: pl.DataFrame, by: str, color: str, title: str, tips: list):
    """Slow GPU-hours per ``by`` value, largest first (the frame's order), half the width."""
    return (
        alt.Chart(frame)
        .mark_bar(color=color)
        .encode(
            y=alt.Y(f"{by}:N", sort=frame[by].to_list(), title=None),
            x=alt.X("slow_gpu_hours:Q", title="slow GPU-hours"),
            tooltip=[f"{by}:N", *tips],
        )
        .properties(width=charts.WIDTH // 2 - 60, height=22 * max(3, frame.height), title=title)
    )


def chart(cause: pl.DataFrame, nodes: pl.DataFrame, cells: pl.DataFrame, what: str):
    """Slow GPU-hours by cause and by node, and the worst job's map below them."""
    tips = [alt.Tooltip("periods:Q"), charts.gpu_hours_tip("slow_gpu_hours", "slow GPU-hours")]
    left = _bars(cause, "cause", "#4c78a8", "By cause",
                 [*tips, alt.Tooltip("high:Q", title="high confidence")])  # fmt: skip
    right = _bars(nodes, "host", "#e45756", "By node named", ["cause:N", *tips])
    top = alt.hconcat(left, right) if nodes.height else left
    if cells.height == 0:
        return top
    rows = cells["row"].unique().sort().to_list()
    # a time step spans to its end; logged iterations are columns of their own
    x = (
        {"x": alt.X("step:T", title=None), "x2": "step_end:T"}
        if "step_end" in cells.columns
        else {"x": alt.X("step:O", title=None, axis=alt.Axis(labelOverlap=True))}
    )
    heat = (
        alt.Chart(cells)
        .mark_rect()
        .encode(
            **x,
            y=alt.Y("row:N", sort=rows, title=None),
            color=alt.Color(
                "value:Q", scale=alt.Scale(scheme="orangered", domainMin=1), title="x slower"
            ),
            tooltip=["row:N", "step", alt.Tooltip("value:Q", format=".2f", title="x slower")],
        )
        .properties(width=charts.WIDTH, height=min(400, 12 * len(rows)), title=what)
    )
    return alt.vconcat(top, heat)


def reading(periods: pl.DataFrame, jobs: pl.DataFrame, cause: pl.DataFrame) -> str:
    lost = float(periods["slow_gpu_hours"].fill_null(0).sum())
    ran = jobs.filter(pl.col("wall_hours") > 0)
    total = float(
        ran.select((pl.col("n_gpus").fill_null(0) * pl.col("wall_hours")).sum()).item() or 0
    )
    counted = float(ran.select(slow_gpu_hours()).item() or 0) if ran.height else 0.0
    logs = periods.filter(pl.col("source") == "step_log")
    text = (
        f"Jobs lost {num(lost)} GPU-hours running slower than their healthy speed"
        + (f" ({pct(lost / total)} of their GPU-hours)" if total else "")
        + f", in {periods.height:,} slow period(s): {logs.height:,} from the jobs' own step logs, "
        f"{periods.height - logs.height:,} from the GPU telemetry alone (low confidence: no log "
        "says how much slower the job ran, the SM clock's shortfall stands for it). "
    )
    if cause.height:
        parts = [
            f"{r['cause']} {num(r['slow_gpu_hours'])}"
            for r in cause.sort("slow_gpu_hours", descending=True).iter_rows(named=True)
        ]
        text += f"By cause (GPU-hours): {', '.join(parts)}. "
    high = logs.filter(pl.col("confidence") == "high").height
    if logs.height:
        text += (
            f"{high:,} of the logged periods are put on one GPU by its own signal over most of "
            "the period (high confidence). "
        )
    text += (
        f"Measured goodput counts {num(counted)} of these GPU-hours as running slow, not "
        "productive: the rest lay in work a later restart redid, already lost work."
    )
    return text


def table_html(worst: pl.DataFrame) -> str:
    header = ["job", "GPUs", "slow GPU-hours", "periods", "worst slowdown", "causes", "nodes",
              "evidence"]  # fmt: skip
    rows = [
        [
            r["job_id"],
            r["n_gpus"],
            num(r["slow_gpu_hours"]),
            r["periods"],
            f"x{r['worst']:.2f}" if r["worst"] is not None else "",
            r["causes"],
            r["nodes"],
            r["sources"].replace("step_log", "step log"),
        ]
        for r in worst.iter_rows(named=True)
    ]
    return html_table(header, rows)


def build(ctx: ReportContext) -> Section:
    s = Section(KEY, TITLE)
    periods = ctx.t["slow_periods"]
    if periods.height == 0:
        s.note = (
            NO_DATA
            if ctx.t["goodput_jobs"].height == 0
            else "no job ran slow: no step log shows a slow period and no GPU of a running job "
            "ran throttled for 10 minutes or more"
        )
        return s
    cause = by_cause(periods)
    worst = worst_jobs(periods)
    cells, what = rank_map(ctx, worst.row(0, named=True))
    s.chart = chart(cause, by_node(periods), cells, what)
    s.reading = reading(periods, ctx.t["goodput_jobs"], cause)
    s.extra_html = table_html(worst)
    return s
