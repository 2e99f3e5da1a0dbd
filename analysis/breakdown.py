"""Per cluster, partition and account: interruptions, lost GPU-hours and measured goodput
(``goodput_breakdown``), from ``job_attempts``, ``interruptions`` and ``goodput_jobs``.

A job chain belongs to the partition and account of its last attempt; an interruption to those
of the attempt it ended. Goodput is weighted by GPU-hours (``analysis.headline``), so each row
is the fleet headline's number restricted to that slice.
"""

from __future__ import annotations

import polars as pl

from analysis.goodput_measured import chain_gpus
from analysis.headline import weighted_goodput
from analysis.taxonomy import WORKLOAD_DOMAIN
from warehouse.schemas import TABLES, conform

DIMENSIONS = ("cluster", "partition", "account")
_JOB = ("cluster", "scheduler", "job_id")


def breakdown(attempts: pl.DataFrame, interruptions: pl.DataFrame, goodput_jobs: pl.DataFrame) -> pl.DataFrame:
    """The ``goodput_breakdown`` table (pure)."""
    if attempts.height == 0:
        return TABLES["goodput_breakdown"].empty()
    att = attempts.with_columns(chain_gpus()).with_columns(
        _gpu_h=pl.col("n_gpus").fill_null(0)
        * (pl.col("end_time") - pl.col("start_time")).dt.total_seconds().fill_null(0) / 3600
    )
    last = att.sort("attempt").group_by(_JOB).agg(pl.col("partition", "account").last())
    chains = goodput_jobs.join(last, on=_JOB, how="left")
    keys = att.select(*_JOB, "attempt", "partition", "account")
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False)).join(
        keys, on=[*_JOB, "attempt"], how="left"
    )
    parts = []
    for dim in DIMENSIONS:
        a = att.group_by(dim).agg(attempts=pl.len(), gpu_hours=pl.col("_gpu_h").sum(), jobs=pl.struct(_JOB).n_unique())
        i = unplanned.group_by(dim).agg(
            interruptions=pl.len(),
            infrastructure=(pl.col("failure_domain") != WORKLOAD_DOMAIN).fill_null(True).sum(),
            lost_gpu_hours=pl.col("lost_gpu_hours").fill_null(0).sum(),
        )
        g = chains.group_by(dim).agg(goodput=weighted_goodput())
        parts.append(
            a.join(i, on=dim, how="left", nulls_equal=True)
            .join(g, on=dim, how="left", nulls_equal=True)
            .with_columns(pl.col("interruptions", "infrastructure").fill_null(0), pl.col("lost_gpu_hours").fill_null(0.0))
            .select(dimension=pl.lit(dim), value=pl.col(dim), jobs="jobs", attempts="attempts", gpu_hours="gpu_hours",
                    interruptions="interruptions", infrastructure="infrastructure",
                    lost_gpu_hours="lost_gpu_hours", goodput="goodput")
            .sort("gpu_hours", descending=True)
        )
    return conform("goodput_breakdown", pl.concat([conform("goodput_breakdown", p) for p in parts]))


def refresh_breakdown(wh) -> pl.DataFrame:
    """Read the three inputs, write ``goodput_breakdown``; returns it."""
    df = breakdown(wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"))
    wh.replace_table("goodput_breakdown", df)
    return df
