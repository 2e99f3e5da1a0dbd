"""Per cluster, partition and account: interruptions, lost GPU-hours and measured goodput
(``goodput_breakdown``), from ``job_attempts``, ``interruptions`` and ``goodput_jobs``.

A job chain belongs to the partition and account of its last attempt; an interruption to those
of the attempt it ended. Goodput is weighted by GPU-hours (``analysis.headline``), so each row
is the fleet headline's number restricted to that slice. ``compare_frame`` sets the slices of one
dimension side by side with their interruption rates and MTBF, each with an exact 95% CI.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analysis.goodput_measured import chain_gpus
from analysis.headline import slow_gpu_hours
from analysis.headline import weighted_goodput
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.scope import COMPARE_BY
from analysis.scope import DIMENSIONS as SCOPE_DIMENSIONS
from analysis.taxonomy import NONE_LABEL
from analysis.taxonomy import WORKLOAD_DOMAIN
from analysis.trend import clip_attempts
from warehouse.schemas import TABLES
from warehouse.schemas import conform

DIMENSIONS = ("cluster", "partition", "account")  # the stored goodput_breakdown's
# what ``compare`` sets side by side: a job-keyed dimension (those of a scope, analysis.scope),
# or two of them crossed, written "a,b"
_JOB = ("cluster", "scheduler", "job_id")
_OF_ATTEMPT = tuple(d for d in SCOPE_DIMENSIONS if d not in _JOB)  # a chain takes its last's


def _joined(attempts: pl.DataFrame, interruptions: pl.DataFrame, goodput_jobs: pl.DataFrame):
    """(attempts with their GPU-hours, job chains with the dimensions of their last attempt,
    unplanned interruptions with those of the attempt they ended)."""
    att = attempts.with_columns(chain_gpus()).with_columns(
        _gpu_h=pl.col("n_gpus").fill_null(0)
        * (pl.col("end_time") - pl.col("start_time")).dt.total_seconds().fill_null(0)
        / 3600
    )
    last = att.sort("attempt").group_by(_JOB).agg(pl.col(*_OF_ATTEMPT).last())
    chains = goodput_jobs.join(last, on=_JOB, how="left")
    keys = att.select(*_JOB, "attempt", *_OF_ATTEMPT)
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False)).join(
        keys, on=[*_JOB, "attempt"], how="left"
    )
    return att, chains, unplanned


def _slices(att, chains, unplanned, keys: list[str]) -> pl.DataFrame:
    """One row per value of ``keys``: jobs, attempts, GPU-hours, unexpected and infrastructure
    interruptions, lost GPU-hours, measured goodput and the GPU-hours jobs ran slow, largest
    GPU-hours first."""
    a = att.group_by(keys).agg(
        attempts=pl.len(), gpu_hours=pl.col("_gpu_h").sum(), jobs=pl.struct(_JOB).n_unique()
    )
    i = unplanned.group_by(keys).agg(
        interruptions=pl.len(),
        infrastructure=(pl.col("failure_domain") != WORKLOAD_DOMAIN).fill_null(True).sum(),
        lost_gpu_hours=pl.col("lost_gpu_hours").fill_null(0).sum(),
    )
    g = chains.group_by(keys).agg(goodput=weighted_goodput(), slow_gpu_hours=slow_gpu_hours())
    return (
        a.join(i, on=keys, how="left", nulls_equal=True)
        .join(g, on=keys, how="left", nulls_equal=True)
        .with_columns(
            pl.col("interruptions", "infrastructure").fill_null(0),
            pl.col("lost_gpu_hours", "slow_gpu_hours").fill_null(0.0),
        )
        .sort("gpu_hours", descending=True)
    )


def breakdown(
    attempts: pl.DataFrame, interruptions: pl.DataFrame, goodput_jobs: pl.DataFrame
) -> pl.DataFrame:
    """The ``goodput_breakdown`` table (pure)."""
    if attempts.height == 0:
        return TABLES["goodput_breakdown"].empty()
    joined = _joined(attempts, interruptions, goodput_jobs)
    parts = [
        _slices(*joined, [dim]).rename({dim: "value"}).with_columns(dimension=pl.lit(dim))
        for dim in DIMENSIONS
    ]
    return conform("goodput_breakdown", pl.concat([conform("goodput_breakdown", p) for p in parts]))


def refresh_breakdown(wh) -> pl.DataFrame:
    """Read the three inputs, write ``goodput_breakdown``; returns it."""
    df = breakdown(wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"))
    wh.replace_table("goodput_breakdown", df)
    return df


GPU_DAYS = 1000 * 24  # rates per 1,000 GPU-days of job time, in GPU-hours


def compare_frame(
    attempts: pl.DataFrame,
    interruptions: pl.DataFrame,
    goodput_jobs: pl.DataFrame,
    by: str = "cluster",
    window: tuple[datetime, datetime] | None = None,
) -> pl.DataFrame:
    """The slices of one dimension of ``COMPARE_BY`` (cluster, partition, account, user, or
    cluster x partition: ``by`` "cluster,partition"), largest GPU-hours first (the rows of
    ``breakdown`` for its dimensions), each with its infrastructure interruptions (unexpected,
    not the jobs' own failures) per 1,000 GPU-days of job time and its MTBF: the hours its job
    attempts span divided by those interruptions (``analysis.goodput_measured.fleet_mtti`` of
    the slice); both with exact (Garwood) 95% CIs. A slice without any has no MTBF and a rate CI
    from 0. ``window``: a period the attempts are clipped to (``analysis.trend.clip_attempts``:
    GPU-hours and spans are the period's own)."""
    if by not in COMPARE_BY:
        raise ValueError(f"--by must be one of {', '.join(COMPARE_BY)}, got {by!r}")
    keys = by.split(",")
    if window is not None:
        attempts = clip_attempts(attempts, *window)
    rows = _slices(*_joined(attempts, interruptions, goodput_jobs), keys)
    ran = attempts.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    span = ran.group_by(keys).agg(
        span_hours=(pl.col("end_time").max() - pl.col("start_time").min()).dt.total_seconds() / 3600
    )
    df = rows.join(span, on=keys, how="left", nulls_equal=True)
    events = df["infrastructure"].to_numpy()
    rate, lo, hi = poisson_rate_ci(events, df["gpu_hours"].fill_null(0).to_numpy() / GPU_DAYS)
    per_h, per_lo, per_hi = poisson_rate_ci(events, df["span_hours"].fill_null(0).to_numpy())
    with np.errstate(divide="ignore"):
        mtbf, mtbf_lo, mtbf_hi = 1 / per_h, 1 / per_hi, 1 / per_lo

    def finite(a):
        return pl.Series(np.where(np.isfinite(a), a, np.nan)).fill_nan(None)

    return df.select(
        *(pl.col(k).fill_null(NONE_LABEL) for k in keys),
        "jobs",
        "gpu_hours",
        "goodput",
        "interruptions",
        "infrastructure",
        "lost_gpu_hours",
        "span_hours",
    ).with_columns(
        rate_per_1k_gpu_days=finite(rate),
        rate_ci_low=finite(lo),
        rate_ci_high=finite(hi),
        mtbf_hours=finite(mtbf),
        mtbf_ci_low=finite(mtbf_lo),
        mtbf_ci_high=finite(mtbf_hi),
    )
