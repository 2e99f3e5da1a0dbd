"""Slowness assets: each job's slow periods from its own step log (``analysis.slowness.steps``),
attributed to a GPU or node and a cause, and those its GPUs' telemetry alone shows
(``analysis.slowness.attribution``); read after the scheduler's jobs (each period carries the
job's GPUs and nodes) and the telemetry's daily step (its slow spans)."""

import dagster as dg
import polars as pl

from analysis.slowness import steps
from pipelines.assets.factory import md
from pipelines.assets.factory import table_asset

SLOWNESS = {
    "slow_periods": "Periods a job ran slow (its step log, or a GPU of its running slow while "
    "no log covered it): slowdown, extra hours and slow GPU-hours, the GPU or node and cause "
    "the evidence names, and its confidence.",
    "job_step_times": "Per job with a step log: its healthy step time, noise, logged hours and "
    "the hours and GPU-hours it lost running slow.",
}


def _meta(out, wh, settings) -> dict:
    periods, jobs = out
    worst = (
        periods.sort("slow_gpu_hours", descending=True, nulls_last=True)
        .head(5)
        .select("job_id", "period", "slowdown", "slow_gpu_hours", "cause", "culprit_host")
    )
    return {
        "slow_periods": {
            "dagster/row_count": periods.height,
            "slow_gpu_hours": float(periods["slow_gpu_hours"].sum() or 0.0),
            "by_cause": dg.MetadataValue.json(
                dict(periods.group_by("cause").agg(pl.col("slow_gpu_hours").sum()).rows())
            ),
            "worst": dg.MetadataValue.md(md(worst)),
        },
        "job_step_times": {
            "dagster/row_count": jobs.height,
            "jobs_with_slow_periods": int((jobs["slow_periods"] > 0).sum()) if jobs.height else 0,
            "slow_share_of_logged_hours": float(
                jobs["slow_hours"].sum() / jobs["logged_hours"].sum()
                if jobs.height and jobs["logged_hours"].sum()
                else 0.0
            ),
        },
    }


@table_asset(
    *SLOWNESS,
    name="slowness_assets",
    analysis="slow_periods",
    # the step logs' periods need no scheduler, the telemetry's need its jobs
    needs=("training_steps", "job_attempts"),
    any_of=True,
    reads=(
        "step_timers",
        "rank_scores",
        "gpu_signal_spans",
        "gpu_daily",
        "hw_events",
    ),
    descriptions=SLOWNESS,
    rows=lambda out: out[0].height,
    describe=_meta,
)
def slowness_assets(wh, settings) -> tuple[pl.DataFrame, pl.DataFrame]:
    return steps.refresh_slow_periods(wh, settings.gpus_per_node)
