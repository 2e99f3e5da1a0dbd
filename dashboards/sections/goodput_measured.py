"""Measured goodput per job chain (weighted by GPU-hours), where the badput went, and the job
chains that lost most."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours
from dashboards.section import html_table
from dashboards.section import num
from dashboards.section import pct

KEY = "goodput_measured"
TITLE = "Measured goodput per job chain, and where the badput went"
TABLES = ("goodput_jobs",)


BADPUT_PARTS = (
    ("productive_hours", "productive (at full speed)"),
    ("slow_hours", "running slow"),
    ("lost_work_hours", "lost work since last checkpoint"),
    ("restart_hours", "restart / recovery"),
    ("checkpoint_hours", "checkpoint overhead"),
    ("queue_after_failure_hours", "queue wait after failure"),
    ("other_hours", "other (unfinished, idle gaps)"),
)


# one color per part of ``BADPUT_PARTS``, in its order
PART_COLORS = ["#54a24b", "#4c78a8", "#e45756", "#f58518", "#eeca3b", "#b279a2", "#bab0ac"]


def goodput_hist_frame(goodput_jobs: pl.DataFrame, bins: int = 20) -> pl.DataFrame:
    """GPU-hours and job counts per goodput bin (0..1)."""
    j = goodput_jobs.filter(pl.col("goodput").is_not_null())
    return (
        j.with_columns((pl.col("goodput").clip(0, 1) * bins).floor().clip(0, bins - 1).alias("b"))
        .group_by("b")
        .agg(pl.col("gpu_hours").sum(), pl.len().alias("jobs"))
        .with_columns((pl.col("b") / bins).alias("lo"), ((pl.col("b") + 1) / bins).alias("hi"))
        .sort("b")
    )


def badput_frame(goodput_jobs: pl.DataFrame) -> pl.DataFrame:
    """Share of GPU-hours per part (productive and each badput kind), n_gpus × hours weighted,
    and its basis: ``assumed`` when any chain's ``assumed_parts`` names the part (its size
    rests on the stated assumptions, not on the records), else ``measured``."""
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    j = goodput_jobs.filter(pl.col("wall_hours") > 0)
    total = j.select((w * pl.col("wall_hours")).sum()).item() or 0.0
    assumed = set(j["assumed_parts"].drop_nulls().str.split(",").explode().to_list())
    rows = []
    for col, label in BADPUT_PARTS:
        gh = j.select((w * pl.col(col).fill_null(0)).sum()).item() or 0.0
        rows.append({"part": label, "gpu_hours": gh, "share": gh / total if total else 0.0,
                     "basis": "assumed" if col in assumed else "measured"})  # fmt: skip
    return pl.DataFrame(rows)


def goodput_chart(hist: pl.DataFrame, badput: pl.DataFrame) -> alt.HConcatChart:
    """Measured goodput per job chain (``goodput_hist_frame``, weighted by GPU-hours) and the
    badput split (``badput_frame``)."""
    h = (
        alt.Chart(hist)
        .mark_bar(color="#4c78a8")
        .encode(
            x=alt.X(
                "lo:Q",
                bin="binned",
                title="measured goodput of the job chain",
                axis=alt.Axis(format="%"),
            ),
            x2="hi:Q",
            y=alt.Y("gpu_hours:Q", title="GPU-hours"),
            tooltip=[
                alt.Tooltip("lo:Q", format=".0%", title="from"),
                alt.Tooltip("hi:Q", format=".0%", title="to"),
                charts.gpu_hours_tip("gpu_hours", "GPU-hours"),
                "jobs:Q",
            ],
        )
        .properties(
            width=charts.WIDTH // 2,
            height=charts.HEIGHT,
            title="Distribution (weighted by GPU-hours)",
        )
    )
    # a part sized by the assumptions says so on its bar's label
    parts = badput.with_columns(
        pl.when(pl.col("basis") == "assumed")
        .then(pl.col("part") + " (assumed)")
        .otherwise(pl.col("part"))
        .alias("shown")
    )
    order = [p[1] for p in BADPUT_PARTS]
    shown = parts["shown"].to_list()
    b = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            y=alt.Y("shown:N", sort=shown, title=None),
            x=alt.X("share:Q", title="share of job GPU-hours", axis=alt.Axis(format="%")),
            color=alt.Color(
                "part:N",
                sort=order,
                legend=None,
                scale=alt.Scale(
                    domain=order,
                    range=PART_COLORS,
                ),
            ),
            tooltip=["part:N", "basis:N", *charts.share_tips("share", "gpu_hours", "GPU-hours")],
        )
    )
    t = (
        alt.Chart(parts)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=alt.Y("shown:N", sort=shown), x="share:Q", text=alt.Text("share:Q", format=".1%"))
    )
    return alt.hconcat(
        h,
        (b + t).properties(
            width=charts.WIDTH // 2 - 60, height=charts.HEIGHT, title="Where the GPU-hours went"
        ),
        spacing=30,
    )


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    jobs = t["goodput_jobs"].filter(pl.col("wall_hours") > 0)
    if jobs.height == 0:
        s.note = NO_DATA
        return s
    parts = badput_frame(jobs)
    s.chart = goodput_chart(goodput_hist_frame(jobs), parts)
    good = parts.row(0, named=True)
    s.reading = (
        f"Weighted by GPU-hours, measured goodput is {pct(good['share'])} over {jobs.height:,} "
        f"job chains (job-weighted mean {pct(jobs['goodput'].mean())}); "
        + _losses_text(parts.slice(1))
    )
    s.reading += " " + _assumptions_text(jobs)
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    top = (
        jobs.with_columns(
            ((pl.col("wall_hours") - pl.col("productive_hours")) * w).alias("badput_gpu_hours")
        )
        .sort("badput_gpu_hours", descending=True)
        .head(5)
    )
    s.extra_html = '<p class="sub">Job chains that lost the most GPU-hours</p>' + html_table(
        ["job", "name", "user", "GPUs", "attempts", "goodput", "badput GPU-hours"],
        [
            [
                r["job_id"],
                r["name"],
                r["user"],
                r["n_gpus"],
                r["attempts"],
                pct(r["goodput"]),
                num(r["badput_gpu_hours"]),
            ]
            for r in top.iter_rows(named=True)
        ],
    )
    return s


def _losses_text(badput: pl.DataFrame) -> str:
    """The largest loss the records measure, and the parts that rest on assumptions (a part
    sized by an assumption is never named the largest loss: its size is the assumption's)."""
    ranked = badput.filter(pl.col("share") > 0).sort("share", descending=True, maintain_order=True)
    measured = ranked.filter(pl.col("basis") == "measured")
    text = (
        f"the largest measured loss is {measured['part'][0]} at {pct(measured['share'][0])} of "
        "GPU-hours."
        if measured.height
        else "no measured loss: the queue and gap parts hold no GPU-hours."
    )
    assumed = ranked.filter(pl.col("basis") == "assumed")
    if assumed.height:
        listed = ", ".join(f"{r['part']} {pct(r['share'])}" for r in assumed.iter_rows(named=True))
        text += f" Sized by assumptions, not records: {listed}."
    return text


def _assumptions_text(jobs: pl.DataFrame) -> str:
    """What the badput split rests on: jobs measured from their own checkpoint logs, and the
    stated interval, cost and restart for the others (columns of ``goodput_jobs``)."""
    measured = jobs.filter(pl.col("method") == "measured").height
    assumed = jobs.height - measured
    sets = jobs.select("ckpt_interval_s", "ckpt_cost_s", "restart_s").unique().drop_nulls()
    text = f"Badput split: {measured:,} job chains from their own checkpoint times"
    if sets.height:
        a = sets.row(0, named=True)
        text += (
            f", {assumed:,} assuming a checkpoint every {hours(a['ckpt_interval_s'] / 3600)} "
            f"costing {a['ckpt_cost_s']:g} s and a restart of {hours(a['restart_s'] / 3600)} "
            "after each failure"
        )
    return text + " (goodput build --ckpt-interval / --ckpt-cost / --restart)."
