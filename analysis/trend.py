"""Goodput, lost GPU-hours, interruptions and MTBF over time: one period's figures, a table of
every week or month with the change against the period before, and lost GPU-hours by cause,
cluster, partition, account or node.

Takes the warehouse tables ``job_attempts``, ``interruptions`` and ``goodput_jobs``; returns
Polars frames. A period's figures are ``analysis.headline.fleet_headline`` of the rows in it
(attempts clipped to the period, interruptions by their end, job chains by their final end), so
the whole observation window as one period gives the headline's numbers exactly.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import polars as pl

from analysis.headline import fleet_headline
from analysis.taxonomy import NONE_LABEL
from analysis.taxonomy import shown_cause
from warehouse.schemas import conform

PERIODS = {"week": "1w", "month": "1mo"}  # calendar weeks start on Monday (ISO), months on the 1st
LOSS_KEYS = ("cause", "domain", "cluster", "partition", "account", "user", "node")


def window_figures(
    attempts: pl.DataFrame,
    interruptions: pl.DataFrame,
    goodput_jobs: pl.DataFrame,
    start: datetime,
    end: datetime,
    observed: tuple[datetime, datetime] | None = None,
) -> dict:
    """``fleet_headline`` of [start, end): attempts overlapping it, clipped to it (GPU-hours are
    the period's own), unexpected interruptions ending in it, job chains ending in it. Adds
    start, end, hours (the period's own, clipped to ``observed``: the data's window, default
    ``data_window(attempts)``) and the fleet-wide MTBF over those hours: mtbf_hours (all causes)
    and mtbf_infrastructure_hours (outside the jobs' own failures)."""
    lo, hi = pl.lit(start).cast(pl.Datetime("us")), pl.lit(end).cast(pl.Datetime("us"))
    att = clip_attempts(attempts, start, end)
    in_period = (pl.col("end_time").cast(pl.Datetime("us")) >= lo) & (
        pl.col("end_time").cast(pl.Datetime("us")) < hi
    )
    intr = interruptions.filter(in_period)
    jobs = goodput_jobs.filter(
        (pl.col("final_end").cast(pl.Datetime("us")) >= lo)
        & (pl.col("final_end").cast(pl.Datetime("us")) < hi)
    )
    head = fleet_headline(att, intr, jobs)
    observed = data_window(attempts) if observed is None else observed
    hours = (
        max((min(end, observed[1]) - max(start, observed[0])).total_seconds(), 0.0) / 3600
        if observed
        else 0.0
    )
    return {
        "start": start,
        "end": end,
        "hours": hours,
        **head,
        "mtbf_hours": hours / head["unexpected"] if head["unexpected"] else None,
        "mtbf_infrastructure_hours": hours / head["infrastructure"]
        if head["infrastructure"]
        else None,
    }


def clip_attempts(attempts: pl.DataFrame, start: datetime, end: datetime) -> pl.DataFrame:
    """The attempts with both times that overlap [start, end), clipped to it: their GPU-hours
    and spans are the window's own."""
    lo, hi = pl.lit(start).cast(pl.Datetime("us")), pl.lit(end).cast(pl.Datetime("us"))
    return attempts.filter(
        pl.col("start_time").is_not_null()
        & pl.col("end_time").is_not_null()
        & (pl.col("end_time").cast(pl.Datetime("us")) > lo)
        & (pl.col("start_time").cast(pl.Datetime("us")) < hi)
    ).with_columns(
        pl.max_horizontal(pl.col("start_time").cast(pl.Datetime("us")), lo).alias("start_time"),
        pl.min_horizontal(pl.col("end_time").cast(pl.Datetime("us")), hi).alias("end_time"),
    )


def data_window(attempts: pl.DataFrame) -> tuple[datetime, datetime] | None:
    """[first start, last end) of the job attempts with both times; None without any."""
    ran = attempts.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    if ran.height == 0:
        return None
    return span_window(ran["start_time"].min(), ran["end_time"].max())


def span_window(first: datetime, last: datetime) -> tuple[datetime, datetime]:
    """[first start, last end) of job attempts as a half-open window: the last end is in it."""
    return _naive(first), _naive(last) + timedelta(microseconds=1)


def _naive(t: datetime) -> datetime:
    return t.replace(tzinfo=None) if t.tzinfo else t


def period_starts(first: datetime, last: datetime, period: str) -> list[datetime]:
    """Calendar period starts from the one holding ``first`` to the one holding ``last``."""
    every = PERIODS[period]
    lo = pl.Series([first]).dt.truncate(every)[0]
    hi = pl.Series([last]).dt.truncate(every)[0]
    return pl.datetime_range(lo, hi, every, eager=True).to_list()


def _next(t: datetime, period: str) -> datetime:
    return pl.Series([t]).dt.offset_by(PERIODS[period])[0]


TREND_COLUMNS = (
    "period_start", "period_end", "hours", "gpu_hours", "goodput", "lost_gpu_hours",
    "interruptions", "infrastructure", "workload", "mtbf_hours", "mtbf_infrastructure_hours",
)  # fmt: skip


def trend_frame(
    attempts: pl.DataFrame,
    interruptions: pl.DataFrame,
    goodput_jobs: pl.DataFrame,
    period: str,
    window: tuple[datetime, datetime] | None = None,
) -> pl.DataFrame:
    """One row per calendar ``period`` ('week' or 'month') of ``window`` (default: the span of
    the job attempts, ``data_window``): hours of the period the window covers, GPU-hours,
    measured goodput (GPU-hour weighted, chains ending in it), lost GPU-hours and unexpected
    interruptions (infrastructure / the jobs' own), the fleet-wide MTBF over those hours (all
    causes and infrastructure), and each figure's change against the previous period
    (``*_change``: goodput in points, the others in their unit)."""
    if period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    span = data_window(attempts) if window is None else window
    rows = []
    if span is not None:
        # the periods holding an instant of [start, end)
        for s in period_starts(span[0], span[1] - timedelta(microseconds=1), period):
            e = _next(s, period)
            f = window_figures(
                attempts, interruptions, goodput_jobs, max(s, span[0]), min(e, span[1]), span
            )
            rows.append(
                {
                    "period_start": s,
                    "period_end": e,
                    "hours": f["hours"],
                    "gpu_hours": f["gpu_hours"],
                    "goodput": f["goodput_gpu_hours"],
                    "lost_gpu_hours": f["lost_gpu_hours"],
                    "interruptions": f["unexpected"],
                    "infrastructure": f["infrastructure"],
                    "workload": f["workload"],
                    "mtbf_hours": f["mtbf_hours"],
                    "mtbf_infrastructure_hours": f["mtbf_infrastructure_hours"],
                }
            )
    schema = {
        "period_start": pl.Datetime("us"), "period_end": pl.Datetime("us"), "hours": pl.Float64,
        "gpu_hours": pl.Float64, "goodput": pl.Float64, "lost_gpu_hours": pl.Float64,
        "interruptions": pl.Int64, "infrastructure": pl.Int64, "workload": pl.Int64,
        "mtbf_hours": pl.Float64, "mtbf_infrastructure_hours": pl.Float64,
    }  # fmt: skip
    df = pl.DataFrame(rows, schema=schema)
    changed = ("goodput", "lost_gpu_hours", "interruptions", "mtbf_hours")
    return df.with_columns((pl.col(c) - pl.col(c).shift(1)).alias(f"{c}_change") for c in changed)


def losses_frame(
    attempts: pl.DataFrame,
    interruptions: pl.DataFrame,
    by: str = "cause",
    period: str | None = None,
    window: tuple[datetime, datetime] | None = None,
) -> pl.DataFrame:
    """Unexpected interruptions and their lost GPU-hours by ``by`` (cause, failure domain,
    cluster, partition, account, user or node: the host the cause was found on), per calendar
    ``period`` when given, largest loss first; each row with its share of the lost GPU-hours and
    MTBF: the hours of ``window`` (default: the span of the job attempts, ``data_window``), or
    the period's part of it, per interruption of that group."""
    if by not in LOSS_KEYS:
        raise ValueError(f"--by must be one of {', '.join(LOSS_KEYS)}, got {by!r}")
    if period is not None and period not in PERIODS:
        raise ValueError(f"period must be one of {', '.join(PERIODS)}, got {period!r}")
    intr = interruptions.filter(~pl.col("planned").fill_null(False)).with_columns(shown_cause())
    if by in ("partition", "account", "user"):
        keys = ["cluster", "scheduler", "job_id", "attempt"]
        jobs = attempts.select(*keys, by).unique(keys, keep="first")
        intr = intr.join(jobs, on=keys, how="left")
    column = {"cause": "cause_class", "domain": "failure_domain", "node": "cause_host"}.get(by, by)
    intr = intr.with_columns(pl.col(column).cast(pl.Utf8).fill_null(NONE_LABEL).alias(by))
    group = [by]
    span = data_window(attempts) if window is None else window
    if period is not None:
        intr = intr.with_columns(
            pl.col("end_time")
            .cast(pl.Datetime("us"))
            .dt.truncate(PERIODS[period])
            .alias("period_start")
        )
        group = ["period_start", by]
    out = intr.group_by(group).agg(
        pl.len().cast(pl.Int64).alias("interruptions"),
        pl.col("lost_gpu_hours").fill_null(0).sum().alias("lost_gpu_hours"),
    )
    total = (
        pl.col("lost_gpu_hours").sum().over(group[:-1])
        if period
        else pl.col("lost_gpu_hours").sum()
    )
    out = out.with_columns((pl.col("lost_gpu_hours") / total).fill_nan(None).alias("share"))
    if span is None:
        out = out.with_columns(pl.lit(None, pl.Float64).alias("mtbf_hours"))
    elif period is None:
        hours = (span[1] - span[0]).total_seconds() / 3600
        out = out.with_columns((hours / pl.col("interruptions")).alias("mtbf_hours"))
    else:
        lo, hi = pl.lit(span[0]).cast(pl.Datetime("us")), pl.lit(span[1]).cast(pl.Datetime("us"))
        end = pl.col("period_start").dt.offset_by(PERIODS[period])
        covered = pl.min_horizontal(end, hi) - pl.max_horizontal(pl.col("period_start"), lo)
        out = out.with_columns(
            (covered.dt.total_seconds() / 3600 / pl.col("interruptions")).alias("mtbf_hours")
        )
    order = [*group[:-1], "lost_gpu_hours", by]
    return out.sort(order, descending=[False] * (len(group) - 1) + [True, False])


def trend_table(
    attempts: pl.DataFrame, interruptions: pl.DataFrame, goodput_jobs: pl.DataFrame
) -> pl.DataFrame:
    """The ``goodput_trend`` table: ``trend_frame`` of every period kind, ``period`` naming it."""
    parts = [
        trend_frame(attempts, interruptions, goodput_jobs, period).with_columns(
            pl.lit(period).alias("period")
        )
        for period in PERIODS
    ]
    return conform("goodput_trend", pl.concat(parts, how="vertical_relaxed"))


def refresh_trend(wh) -> pl.DataFrame:
    """Read the three inputs, write ``goodput_trend``; returns it."""
    df = trend_table(wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"))
    wh.replace_table("goodput_trend", df)
    return df
