"""Slowness assets: each job's slow periods from its own step log (``analysis.slowness.steps``),
read after the scheduler's jobs so each period carries the job's GPUs."""

import dagster as dg
import polars as pl

from analysis.slowness import steps
from pipelines.assets.factory import md
from pipelines.assets.factory import table_asset

SLOWNESS = {
    "slow_periods": "Periods a job ran slower than its own healthy step time: slowdown, extra "
    "hours and slow GPU-hours, transient or persistent, and the rank its log blames.",
    "job_step_times": "Per job with a step log: its healthy step time, noise, logged hours and "
    "the hours and GPU-hours it lost running slow.",
}


def _meta(out, wh, goodput) -> dict:
    periods, jobs = out
    worst = (
        periods.sort("slow_gpu_hours", descending=True, nulls_last=True)
        .head(5)
        .select("job_id", "period", "slowdown", "extra_hours", "slow_gpu_hours", "kind")
    )
    return {
        "slow_periods": {
            "dagster/row_count": periods.height,
            "slow_gpu_hours": float(periods["slow_gpu_hours"].sum() or 0.0),
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
    needs=("training_steps",),
    reads=("job_attempts", "step_timers", "rank_scores"),
    descriptions=SLOWNESS,
    rows=lambda out: out[0].height,
    describe=_meta,
)
def slowness_assets(wh, goodput) -> tuple[pl.DataFrame, pl.DataFrame]:
    return steps.refresh_slow_periods(wh)
