"""Per job, from its logged step times (``training_steps``): the healthy step time, the periods it
ran slower, how much slower, the GPU-hours that cost, and the rank the log blames
(``job_step_times``, ``slow_periods``; the formulas are in docs/statistics.md).

A job's intervals (a step line with a known length: ``steps`` iterations at ``step_s`` seconds
each; a log's first line and the line after a restart have none) are read in log order, in
segments between restarts. Its noise ``sigma`` is the robust s.d. of an interval's step time
about its level: 1.4826 x the median absolute deviation of the differences between consecutive
intervals, over sqrt(2) (a level shift moves one difference, not the median). The smoothed
step time ``m`` is the centred rolling median of three intervals (a single spike, a checkpoint
or a garbage collection, moves no median of three). The baseline is the job's own healthy step
time: the median step time of the intervals whose ``m`` lies within ``HEALTHY_Z`` sigma of the
10th percentile of ``m`` (so up to 90% of a job may run slow and its baseline still be read from
the rest).

An interval is slow when ``m`` exceeds the baseline by more than ``SLOW_Z`` sigma and by more
than ``SLOW_RATIO`` of the baseline. A slow period is a run of at least ``MIN_INTERVALS`` slow
intervals lasting at least ``MIN_PERIOD_S``. Its extra time is the sum over its intervals of
(``m`` - baseline) x steps, plus, for the interval on each side that the slowdown began or
ended in, its own excess (at least 0, at most a slow interval's). Its step time is the mean of
``m`` over its steps (a save or a stall in it is not its slowness), its slowdown that over the
baseline; slow GPU-hours = extra hours x the job's GPUs (its largest attempt's in
``job_attempts``). A period still running at the job's last logged interval is ``persistent``
(the log ends slow), else ``transient``.

A period's rank: where the log has per-rank timers (``times across ranks``) in the period's
iterations, the rank whose compute timers (``*compute*``) sum highest, with its ratio to the
median rank's; else where it has straggler scores in the period (by iteration, else by time),
the rank with the lowest mean score (relative scores first), with 1 / score and its node.
"""

from __future__ import annotations

import polars as pl

from analysis.assumptions import GPUS_PER_NODE
from analysis.slowness.attribution import attributed
from analysis.slowness.attribution import reason_spacing
from analysis.slowness.attribution import telemetry_periods
from analysis.slowness.attribution import with_telemetry
from analysis.slowness.keys import JOB
from analysis.slowness.signals import gpu_spans
from analysis.telemetry.sql import sql_values
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.signals import REASON_METRICS

HEALTHY_Z = 3.0  # the healthy band above the 10th percentile of m, in sigma
SLOW_Z = 4.0  # an interval is slow above the baseline by more than this many sigma ...
SLOW_RATIO = 0.05  # ... and by more than this share of the baseline
MIN_INTERVALS = 3  # a slow period has at least this many slow intervals ...
MIN_PERIOD_S = 300.0  # ... and lasts at least this long
_MAD_SD = 1.4826  # MAD -> s.d. of a normal
_SQRT2 = 2.0**0.5


def intervals(steps: pl.DataFrame) -> pl.DataFrame:
    """The job's intervals in log order with their segment (``seg``) and position (``pos``):
    each logged step once (the same line in the logs of several ranks or files counts once),
    and only lines whose interval has a length and a step time."""
    ordered = (
        steps.unique(
            subset=[*JOB, "iteration", "time", "step_s"], keep="first", maintain_order=True
        )
        .sort([*JOB, "time", "source_file", "source_line"], nulls_last=True)
        .with_columns(
            seg=pl.col("steps").is_null().cum_sum().over(JOB),
        )
    )
    return ordered.filter(
        pl.col("steps").is_not_null() & pl.col("step_s").is_not_null() & (pl.col("step_s") > 0)
    ).with_columns(pos=pl.int_range(pl.len()).over(JOB), span_s=pl.col("step_s") * pl.col("steps"))


def levels(iv: pl.DataFrame) -> pl.DataFrame:
    """``intervals`` with ``m`` (centred rolling median of three within a segment), the job's
    ``sigma``, ``baseline`` and whether each interval is ``slow``."""
    seg = [*JOB, "seg"]
    x = pl.col("step_s")
    iv = iv.with_columns(
        m=x.rolling_median(3, center=True, min_samples=1).over(seg),
        _d=(x - x.shift(1)).over(seg),
    )
    d = pl.col("_d")
    iv = iv.with_columns(
        sigma=(_MAD_SD * (d - d.median()).abs().median() / _SQRT2).over(JOB).fill_null(0.0),
        _floor=pl.col("m").quantile(0.1).over(JOB),
    )
    healthy = pl.col("m") <= pl.col("_floor") + HEALTHY_Z * pl.col("sigma")
    iv = iv.with_columns(baseline=x.filter(healthy).median().over(JOB))
    b = pl.col("baseline")
    slow = (pl.col("m") > b + SLOW_Z * pl.col("sigma")) & (pl.col("m") > b * (1 + SLOW_RATIO))
    return iv.with_columns(slow=slow).drop("_d", "_floor")


def periods(iv: pl.DataFrame) -> pl.DataFrame:
    """The slow periods of ``levels`` output: one row per run of slow intervals long enough,
    with its extra seconds (``extra_s``) and what the table needs but the GPUs and the rank."""
    seg = [*JOB, "seg"]
    run = (pl.col("slow") != pl.col("slow").shift(1)).fill_null(True).cum_sum().over(seg)
    iv = iv.with_columns(_run=run, _last=pl.col("pos") == pl.col("pos").max().over(JOB))
    # the interval before and after a run: the one the slowdown began / ended in
    iv = iv.with_columns(
        _prev_x=pl.col("step_s").shift(1).over(seg),
        _prev_n=pl.col("steps").shift(1).over(seg),
        _next_x=pl.col("step_s").shift(-1).over(seg),
        _next_n=pl.col("steps").shift(-1).over(seg),
    )
    core = iv.filter("slow")
    b = pl.col("baseline")
    agg = core.group_by([*seg, "_run"], maintain_order=True).agg(
        pl.col("baseline").first(),
        pl.col("time").first().alias("_first_time"),
        pl.col("step_s").first().alias("_first_x"),
        pl.col("steps").first().alias("_first_n"),
        pl.col("time").last().alias("end_time"),
        (pl.col("iteration").first() - pl.col("steps").first() + 1).alias("first_iteration"),
        pl.col("iteration").last().alias("last_iteration"),
        pl.col("steps").sum().alias("steps"),
        pl.len().alias("_n"),
        pl.col("span_s").sum().alias("_span"),
        (pl.col("m") * pl.col("steps")).sum().alias("_level"),
        ((pl.col("m") - b) * pl.col("steps")).sum().alias("_core_extra"),
        (pl.col("m").first() - b.first()).alias("_head_excess"),
        (pl.col("m").last() - b.first()).alias("_tail_excess"),
        pl.col("_prev_x").first(),
        pl.col("_prev_n").first(),
        pl.col("_next_x").last(),
        pl.col("_next_n").last(),
        pl.col("_last").last().alias("_to_end"),
    )
    edge_before = (
        ((pl.col("_prev_x") - b).clip(0.0, None)).clip(None, pl.col("_head_excess"))
        * pl.col("_prev_n")
    ).fill_null(0.0)
    edge_after = (
        ((pl.col("_next_x") - b).clip(0.0, None)).clip(None, pl.col("_tail_excess"))
        * pl.col("_next_n")
    ).fill_null(0.0)
    started = pl.col("_first_time") - pl.duration(
        microseconds=(pl.col("_first_x") * pl.col("_first_n") * 1e6).round().cast(pl.Int64)
    )
    out = agg.filter((pl.col("_n") >= MIN_INTERVALS) & (pl.col("_span") >= MIN_PERIOD_S))
    return out.with_columns(
        start_time=started,
        step_s=pl.col("_level") / pl.col("steps"),
        duration_s=pl.col("_span"),
        extra_s=pl.col("_core_extra") + edge_before + edge_after,
        kind=pl.when("_to_end").then(pl.lit("persistent")).otherwise(pl.lit("transient")),
    ).with_columns(
        slowdown=pl.col("step_s") / b,
        period=pl.int_range(1, pl.len() + 1).over(JOB).cast(pl.Int32),
    )


def job_gpus(attempts: pl.DataFrame) -> pl.DataFrame:
    """(cluster, job_id, n_gpus): each job's largest attempt's GPUs."""
    if attempts.height == 0:
        return pl.DataFrame(schema={"cluster": pl.Utf8, "job_id": pl.Utf8, "n_gpus": pl.Int32})
    return attempts.group_by(JOB).agg(pl.col("n_gpus").max().cast(pl.Int32))


def slow_periods(
    steps: pl.DataFrame,
    gpus: pl.DataFrame,
    timers: pl.DataFrame | None = None,
    scores: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``slow_periods``, ``job_step_times``) from ``training_steps`` rows, each job's GPUs
    (``job_gpus``) and, where given, ``step_timers`` and ``rank_scores`` rows."""
    iv = levels(intervals(steps))
    found = periods(iv).join(gpus, on=JOB, how="left")
    found = found.with_columns(
        duration_hours=pl.col("duration_s") / 3600,
        extra_hours=pl.col("extra_s") / 3600,
        baseline_step_s=pl.col("baseline"),
    ).with_columns(slow_gpu_hours=pl.col("extra_hours") * pl.col("n_gpus"))
    found = _blamed(found, timers, scores)
    periods_out = conform("slow_periods", found.select(_columns("slow_periods", found)))
    per_job = iv.group_by(JOB, maintain_order=True).agg(
        pl.col("time").min().alias("first_time"),
        pl.col("time").max().alias("last_time"),
        pl.len().alias("intervals"),
        pl.col("steps").sum(),
        pl.col("baseline").first().alias("baseline_step_s"),
        pl.col("sigma").first().alias("noise_s"),
        (pl.col("span_s").sum() / 3600).alias("logged_hours"),
    )
    lost = periods_out.group_by(JOB).agg(
        pl.len().alias("slow_periods"), pl.col("extra_hours").sum().alias("slow_hours")
    )
    jobs = (
        per_job.join(lost, on=JOB, how="left")
        .join(gpus, on=JOB, how="left")
        .with_columns(
            pl.col("slow_periods").fill_null(0),
            pl.col("slow_hours").fill_null(0.0),
        )
        .with_columns(
            slow_gpu_hours=pl.col("slow_hours") * pl.col("n_gpus"),
            slow_share=pl.col("slow_hours") / pl.col("logged_hours"),
        )
    )
    return periods_out, conform("job_step_times", jobs.select(_columns("job_step_times", jobs)))


def _columns(table: str, df: pl.DataFrame) -> list[str]:
    return [c for c in TABLES[table].columns if c in df.columns]


def _blamed(
    found: pl.DataFrame, timers: pl.DataFrame | None, scores: pl.DataFrame | None
) -> pl.DataFrame:
    """``found`` with ``slow_rank``, ``slow_node``, ``rank_ratio``, ``rank_evidence``."""
    keys = [*JOB, "period"]
    span = found.select(*keys, "first_iteration", "last_iteration", "start_time", "end_time")
    by_timers = _timer_blame(span, timers)
    by_scores = _score_blame(span, scores)
    out = found.join(by_timers, on=keys, how="left").join(by_scores, on=keys, how="left")
    use_timers = pl.col("_t_rank").is_not_null()
    return out.with_columns(
        slow_rank=pl.when(use_timers).then("_t_rank").otherwise("_s_rank").cast(pl.Int32),
        slow_node=pl.when(use_timers).then(pl.lit(None, pl.Utf8)).otherwise("_s_node"),
        rank_ratio=pl.when(use_timers).then("_t_ratio").otherwise("_s_ratio"),
        rank_evidence=pl.when(use_timers)
        .then(pl.lit("timers"))
        .when(pl.col("_s_rank").is_not_null())
        .then(pl.lit("scores")),
    )


def _timer_blame(span: pl.DataFrame, timers: pl.DataFrame | None) -> pl.DataFrame:
    keys = [*JOB, "period"]
    empty = pl.DataFrame(
        schema={**span.select(keys).schema, "_t_rank": pl.Int32, "_t_ratio": pl.Float64}
    )
    if timers is None or timers.height == 0:
        return empty
    per_rank = timers.filter(
        pl.col("rank").is_not_null()
        & pl.col("iteration").is_not_null()
        & pl.col("timer").str.contains("compute")
    )
    if per_rank.height == 0:
        return empty
    inside = _within(span, per_rank, "iteration", "first_iteration", "last_iteration")
    ranks = inside.group_by([*keys, "rank"]).agg(pl.col("value_ms").sum().alias("_ms"))
    ranked = ranks.with_columns(
        _median=pl.col("_ms").median().over(keys), _n=pl.len().over(keys)
    ).filter(pl.col("_n") >= 2)
    top = ranked.sort("_ms", descending=True).group_by(keys, maintain_order=True).first()
    return top.select(
        *keys, _t_rank=pl.col("rank").cast(pl.Int32), _t_ratio=pl.col("_ms") / pl.col("_median")
    )


def _score_blame(span: pl.DataFrame, scores: pl.DataFrame | None) -> pl.DataFrame:
    keys = [*JOB, "period"]
    empty = pl.DataFrame(
        schema={
            **span.select(keys).schema,
            "_s_rank": pl.Int32,
            "_s_node": pl.Utf8,
            "_s_ratio": pl.Float64,
        }
    )
    if scores is None or scores.height == 0:
        return empty
    by_it = _within(
        span,
        scores.filter(pl.col("iteration").is_not_null()),
        "iteration",
        "first_iteration",
        "last_iteration",
    )
    by_time = _within(
        span,
        scores.filter(pl.col("iteration").is_null() & pl.col("time").is_not_null()),
        "time",
        "start_time",
        "end_time",
    )
    inside = pl.concat([by_it, by_time], how="diagonal_relaxed")
    if inside.height == 0:
        return empty
    ranks = inside.group_by([*keys, "kind", "rank"]).agg(
        pl.col("score").mean(), pl.col("node").first()
    )
    worst = (
        ranks.sort([pl.col("kind") != "relative", "score"], descending=[False, False])
        .group_by(keys, maintain_order=True)
        .first()
    )
    return worst.select(
        *keys,
        _s_rank=pl.col("rank").cast(pl.Int32),
        _s_node="node",
        _s_ratio=1.0 / pl.col("score"),
    )


def _within(span: pl.DataFrame, rows: pl.DataFrame, col: str, lo: str, hi: str) -> pl.DataFrame:
    """``rows`` (with their job) joined to the period of their job whose [lo, hi] holds
    ``col``."""
    if rows.height == 0:
        return rows.join(span.select([*JOB, "period"]), on=JOB, how="inner")
    return rows.join(span, on=JOB, how="inner").filter(
        (pl.col(col) >= pl.col(lo)) & (pl.col(col) <= pl.col(hi))
    )


def refresh_slow_periods(
    wh, gpus_per_node: int = GPUS_PER_NODE
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Read ``training_steps`` (with ``job_attempts``, ``step_timers``, ``rank_scores``) and the
    GPU telemetry's slow spans, NVLink errors and reason sampling (``attribution``), write
    ``slow_periods`` (the step logs' periods attributed, then the telemetry's) and
    ``job_step_times``; returns both."""
    attempts = wh.read("job_attempts")
    steps = wh.read("training_steps")
    found, jobs = slow_periods(
        steps, job_gpus(attempts), wh.read("step_timers"), wh.read("rank_scores")
    )
    spans = gpu_spans(wh)
    spacing = reason_spacing(wh.read("gpu_daily", f"metric IN ({sql_values(REASON_METRICS)})"))
    events = wh.read("hw_events", "component_class = 'nvlink'")
    found = with_telemetry(
        attributed(found, attempts, spans, events, spacing),
        telemetry_periods(spans, attempts, jobs, gpus_per_node),
    )
    wh.replace_table("slow_periods", found)
    wh.replace_table("job_step_times", jobs)
    return found, jobs
