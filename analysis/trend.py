"""Goodput, lost GPU-hours, interruptions and MTBF over time: one period's figures, a table of
every week or month with the change against the period before, and lost GPU-hours by cause,
cluster, partition, account or node.

Takes the warehouse tables ``job_attempts``, ``interruptions`` and ``goodput_jobs``; returns
Polars frames. A period's figures are ``analysis.headline.fleet_headline`` of the rows in it
(attempts clipped to the period, interruptions by their end, job chains by their final end), so
the whole observation window as one period gives the headline's numbers exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from datetime import timedelta
from itertools import pairwise

import numpy as np
import polars as pl

from analysis.changes import DIFFERENCE
from analysis.changes import RATIO
from analysis.changes import Change
from analysis.changes import Changes
from analysis.changes import dispersion
from analysis.changes import rate_ratio
from analysis.changes import ratio_difference
from analysis.changes import share_difference
from analysis.goodput_measured import chain_gpus
from analysis.headline import fleet_headline
from analysis.numbers import mean_time
from analysis.numbers import num
from analysis.numbers import pct
from analysis.scope import LOSS_KEYS
from analysis.scope import PERIODS
from analysis.taxonomy import NONE_LABEL
from analysis.taxonomy import shown_cause
from warehouse.schemas import conform


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
    and mtbf_infrastructure_hours (outside the jobs' own failures). An attempt without a GPU
    count takes its chain's before the clipping (``chain_gpus``), whose other attempts may lie
    outside the window."""
    att = clip_attempts(attempts.with_columns(chain_gpus()), start, end)
    intr = in_window(interruptions, "end_time", start, end)
    jobs = in_window(goodput_jobs, "final_end", start, end)
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


def in_window(frame: pl.DataFrame, column: str, start: datetime, end: datetime) -> pl.DataFrame:
    """The rows of ``frame`` whose ``column`` (a time: an interruption's end, a job chain's
    final end) lies in [start, end): what a period counts."""
    t = pl.col(column).cast(pl.Datetime("us"))
    return frame.filter(
        (t >= pl.lit(start).cast(pl.Datetime("us"))) & (t < pl.lit(end).cast(pl.Datetime("us")))
    )


@dataclass(frozen=True)
class WindowSample:
    """What the change tests need of a window: its hours, unexpected interruptions, GPU-hours
    used, and per interruption its lost GPU-hours, per job chain n_gpus x productive and wall
    hours."""

    hours: float
    unexpected: int
    used: float
    lost: np.ndarray
    productive: np.ndarray
    wall: np.ndarray


def window_sample(
    att,
    intr,
    jobs,
    start: datetime,
    end: datetime,
    observed: tuple[datetime, datetime] | None = None,
) -> WindowSample:
    """[start, end) as ``window_figures`` counts it (its hours clipped to ``observed``), with the
    values behind its figures."""
    f = window_figures(att, intr, jobs, start, end, observed)
    unplanned = in_window(intr, "end_time", start, end).filter(~pl.col("planned").fill_null(False))
    chains = in_window(jobs, "final_end", start, end).filter(pl.col("wall_hours") > 0)
    n = chains["n_gpus"].fill_null(0).cast(pl.Float64)
    return WindowSample(
        hours=f["hours"],
        unexpected=f["unexpected"],
        used=f["gpu_hours"],
        lost=unplanned["lost_gpu_hours"].fill_null(0).to_numpy(),
        productive=(n * chains["productive_hours"].fill_null(0)).to_numpy(),
        wall=(n * chains["wall_hours"]).to_numpy(),
    )


def window_changes(
    attempts: pl.DataFrame,
    interruptions: pl.DataFrame,
    goodput_jobs: pl.DataFrame,
    now: tuple[datetime, datetime],
    before: tuple[datetime, datetime],
    scale: float = 1.0,
    observed: tuple[datetime, datetime] | None = None,
) -> Changes:
    """The window ``now`` against ``before``, each [start, end) as the data covers it (a partial
    period's own hours, clipped to ``observed`` as in ``window_figures``): measured goodput, the
    lost share and the unexpected interruptions per hour, each with its test
    (``analysis.changes``); ``scale``: the interruptions' dispersion
    (``interruption_dispersion``)."""
    return compare_samples(
        window_sample(attempts, interruptions, goodput_jobs, *now, observed),
        window_sample(attempts, interruptions, goodput_jobs, *before, observed),
        scale,
    )


def compare_samples(a: WindowSample, b: WindowSample, scale: float = 1.0) -> Changes:
    """Window ``a`` against window ``b`` (``window_changes``)."""
    return Changes(
        goodput=ratio_difference(a.productive, a.wall, b.productive, b.wall),
        lost_share=share_difference(a.lost, a.used, b.lost, b.used, scale),
        interruptions=rate_ratio(a.unexpected, a.hours, b.unexpected, b.hours, scale),
    )


def interruption_dispersion(
    interruptions: pl.DataFrame, span: tuple[datetime, datetime] | None
) -> float:
    """``analysis.changes.dispersion`` of the unexpected interruptions per whole calendar week
    of ``span`` (the scale the changes compare at), per whole day where it holds fewer than
    three weeks; 1 without three of either."""
    if span is None:
        return 1.0
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False))
    for every, length in (("1w", timedelta(weeks=1)), ("1d", timedelta(days=1))):
        starts = pl.datetime_range(
            pl.Series([span[0]]).dt.truncate(every)[0], span[1], every, eager=True
        ).to_list()
        whole = [s for s in starts if s >= span[0] and s + length <= span[1]]
        if len(whole) >= 3:
            counts = [in_window(unplanned, "end_time", s, s + length).height for s in whole]
            return dispersion(counts, [length.total_seconds() / 3600] * len(counts))
    return 1.0


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
    "slow_gpu_hours", "interruptions", "infrastructure", "workload", "mtbf_hours",
    "mtbf_infrastructure_hours",
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
    measured goodput (GPU-hour weighted, chains ending in it), the GPU-hours those chains lost
    running slow, lost GPU-hours and unexpected interruptions (infrastructure / the jobs' own),
    the fleet-wide MTBF over those hours (all causes and infrastructure), and each figure's
    change against the previous period (``*_change``: goodput in points, the others in their
    unit)."""
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
                    "slow_gpu_hours": f["slow_gpu_hours"],
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
        "slow_gpu_hours": pl.Float64, "interruptions": pl.Int64, "infrastructure": pl.Int64,
        "workload": pl.Int64,
        "mtbf_hours": pl.Float64, "mtbf_infrastructure_hours": pl.Float64,
    }  # fmt: skip
    df = pl.DataFrame(rows, schema=schema)
    return _with_changes(df, attempts, interruptions, goodput_jobs, span)


CHANGES = {  # goodput_trend's change columns: estimate, CI and p of each test
    "goodput": ("goodput_change", "goodput_change_ci_low", "goodput_change_ci_high",
                "goodput_change_p"),
    "lost_share": ("lost_share_change", "lost_share_change_ci_low", "lost_share_change_ci_high",
                   "lost_share_change_p"),
    "interruptions": ("interruption_rate_ratio", "interruption_rate_ratio_ci_low",
                      "interruption_rate_ratio_ci_high", "interruption_rate_p"),
}  # fmt: skip


def tested(row: dict, figure: str, unit: str = "points") -> str:
    """A ``goodput_trend`` row's change of ``figure`` (a key of ``CHANGES``) in words
    (``analysis.changes.Change.words``); empty for the first period."""
    estimate, low, high, p = (row[c] for c in CHANGES[figure])
    if p is None and estimate is None:
        return ""
    kind = RATIO if figure == "interruptions" else DIFFERENCE
    return Change(kind, estimate, low, high, p).words(unit)


TREND_HEADER = ("hours", "GPU-hours", "goodput", "change", "lost GPU-hours", "lost share",
                "change", "interruptions", "MTBF", "change (rate)")  # fmt: skip


def trend_cells(row: dict) -> list[str]:
    """A ``goodput_trend`` row as the report's and ``goodput trend``'s tables print it, after
    its period (``TREND_HEADER``): a partial period's hours with one decimal and labelled, each
    change with its test (``tested``)."""
    hours = f"{row['hours']:,.1f} (partial)" if row["partial"] else f"{row['hours']:,.0f}"
    return [hours, num(row["gpu_hours"]), pct(row["goodput"]), tested(row, "goodput"),
            num(row["lost_gpu_hours"]), pct(row["lost_share"]), tested(row, "lost_share"),
            f"{row['interruptions']:,}", mean_time(row["mtbf_hours"]),
            tested(row, "interruptions")]  # fmt: skip


def period_hours(row: dict) -> str:
    """A period's hours of data, and "partial" where the data covers part of it only."""
    return f"{row['hours']:,.0f} h of data" + (", partial" if row["partial"] else "")


def _with_changes(df, attempts, interruptions, goodput_jobs, span) -> pl.DataFrame:
    """The periods ``df`` with ``partial`` (the data covers less than the calendar period), the
    lost share, and each figure's change against the period before with its test
    (``window_changes``, over the hours each period's data covers, at the interruptions'
    dispersion over the whole span), and the MTBF's change in hours."""
    windows = [
        (max(s, span[0]), min(e, span[1]))
        for s, e in zip(df["period_start"], df["period_end"], strict=True)
    ]
    scale = interruption_dispersion(interruptions, span)
    found = [None] * min(1, len(windows)) + [
        window_changes(attempts, interruptions, goodput_jobs, now, before, scale, span)
        for before, now in pairwise(windows)
    ]
    cols = {c: [] for names in CHANGES.values() for c in names}
    for ch in found:
        for figure, names in CHANGES.items():
            c = getattr(ch, figure) if ch is not None else None
            values = (c.estimate, c.ci_low, c.ci_high, c.p) if c is not None else (None,) * 4
            for name, v in zip(names, values, strict=True):
                cols[name].append(None if v is None or not np.isfinite(v) else float(v))
    full = (pl.col("period_end") - pl.col("period_start")).dt.total_seconds() / 3600
    return df.with_columns(
        partial=pl.col("hours") < full,
        lost_share=pl.when(pl.col("gpu_hours") > 0).then(
            pl.col("lost_gpu_hours") / pl.col("gpu_hours")
        ),
        mtbf_hours_change=pl.col("mtbf_hours") - pl.col("mtbf_hours").shift(1),
        **{name: pl.Series(name, v, pl.Float64) for name, v in cols.items()},
    )


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
