"""Measured goodput per job chain (all attempts of one job) from ``job_attempts``.

Schedulers record when attempts ran, not when the job checkpointed, so the split of badput
rests on stated assumptions (parameters; defaults in ``analysis.assumptions``, and the values
used are columns of every row): training checkpoints every ``ckpt_interval_s`` of compute, each
costing ``ckpt_cost_s``, and every attempt after the first spends ``restart_s`` (capped at its
length) restoring state. Where the job's own log gave its checkpoint times (table
``checkpoints``), those times replace the interval and the row's ``method`` is ``measured``
instead of ``assumed``.

Which parts rest on those assumptions is a column of every row (``assumed_parts``): restart and
checkpoint always (no record says how long a restore or a save took), lost work unless the
checkpoint times were measured; the queue, other gaps and slowness are measured. An attempt
that ran but shows no end ended when the chain's next attempt started; a chain's GPUs are its
largest attempt's (an attempt seen only from events, or from part of its pods, carries fewer).

Per attempt, after overlaps between attempts are trimmed (so the books close exactly):
- restart     = min(restart_s, attempt length) for attempts 2..n;
- compute     = length − restart, cut into segments of interval + cost; each whole segment is
  one checkpoint (cost → ``checkpoint``, interval → retained work);
- the tail after the last checkpoint is productive if the attempt completed, ``lost_work`` if
  a later attempt had to redo it (also one still running: such chains end at their last
  ended attempt, with final_state RUNNING), and ``other`` if the chain ended there without
  completing;
- ``slow``: of the work kept (the compute up to the last checkpoint; all of it in an attempt
  that completed), the time lost running slow (``slow_periods``: each period's extra time
  times the share of the period inside that window), at most the work kept; a period without
  times is spread over the chain's kept work. What the job redid is lost work already, not
  slowness too. Productive time is the rest: time at full speed;
- the gap before an attempt is ``queue_after_failure`` when the previous attempt did not
  complete, else ``other``.
wall = productive + slow + lost_work + restart + checkpoint + queue_after_failure + other
exactly (integer microseconds before conversion to hours); goodput = productive / wall.
"""

from __future__ import annotations

import polars as pl

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import CKPT_INTERVAL_S
from analysis.assumptions import RESTART_S
from analysis.taxonomy import WORKLOAD_DOMAIN
from warehouse.schemas import conform

KEYS = ["cluster", "scheduler", "job_id"]
BADPUT = (
    "slow_hours",
    "lost_work_hours",
    "restart_hours",
    "checkpoint_hours",
    "queue_after_failure_hours",
    "other_hours",
)
# Which badput parts rest on a stated assumption, not on the records (``assumed_parts``): the
# cost of a save and the time a restart takes are never in scheduler records, and lost work is
# assumed unless the job's own checkpoint times were ingested; the queue and other gaps are the
# attempts' measured times.
ALWAYS_ASSUMED = ("restart_hours", "checkpoint_hours")
US = 1_000_000
HOUR_US = 3600 * US


def chain_gpus() -> pl.Expr:
    """An attempt's GPUs, else its chain's largest attempt's (``n_gpus``; over a frame holding
    the chain's attempts): an attempt known only from events (a Kubernetes restart) carries no
    GPU count where its gang's other attempts do."""
    return pl.col("n_gpus").fill_null(pl.col("n_gpus").max().over(KEYS)).alias("n_gpus")


def measure(
    attempts: pl.DataFrame,
    ckpt_interval_s: float = CKPT_INTERVAL_S,
    ckpt_cost_s: float = CKPT_COST_S,
    restart_s: float = RESTART_S,
    checkpoints: pl.DataFrame | None = None,
    slow_periods: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """``goodput_jobs`` rows from job attempts.

    ``checkpoints`` (optional): the ``checkpoints`` table (or any frame with cluster, job_id,
    time and optionally scheduler and event): the completion time of each checkpoint (see
    ``durable_times``); those times replace the fixed interval for the jobs they name, whose
    ``method`` is then ``measured``; jobs without rows in it fall back to the interval
    (``assumed``). ``slow_periods`` (optional): the time jobs lost running slow, taken out of
    their kept work (``slow``). The assumptions used are columns of every row.
    """
    if checkpoints is not None:
        checkpoints = durable_times(checkpoints, ckpt_cost_s)
    tau = round(ckpt_interval_s * US)
    dlt = round(ckpt_cost_s * US)
    a = _trimmed_attempts(attempts, round(restart_s * US))
    a = _interval_checkpoints(a, tau, dlt)
    if checkpoints is not None and checkpoints.height:
        a = _exact_checkpoints(a, checkpoints, dlt)
    a = _split_time(a)
    a = _slow_time(a, slow_periods)
    jobs = _chains(a)
    return conform("goodput_jobs", _in_hours(jobs, ckpt_interval_s, ckpt_cost_s, restart_s))


def _ended_attempts(attempts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(attempts that started, with an end wherever one can be inferred; the chains with an
    attempt still running, flagged ``_running``). An attempt that ran but shows no end ended
    when the chain's next attempt started; one with no later start is still running, so its
    chain's last ended attempt is not the chain's end."""
    started = attempts.filter(pl.col("start_time").is_not_null()).sort([*KEYS, "start_time"])
    next_start = pl.col("start_time").shift(-1).over(KEYS)
    later = pl.when(next_start > pl.col("start_time")).then(next_start)  # not its own repeat
    started = started.with_columns(pl.coalesce("end_time", later).alias("end_time"))
    running = (
        started.filter(pl.col("end_time").is_null())
        .select(KEYS)
        .unique()
        .with_columns(pl.lit(True).alias("_running"))
    )
    return started, running


def _trimmed_attempts(attempts: pl.DataFrame, rst: int) -> pl.DataFrame:
    """One row per ended attempt in integer microseconds, sorted by chain: ``_s``/``_e`` trimmed
    so no attempt overlaps an earlier one of its chain, ``_d`` its length, ``_gap`` the idle
    time before it, ``_restart`` its restore time (``rst``, capped; none for a chain's first),
    ``_c`` its compute, and the flags ``_first``, ``_last``, ``_after_fail``."""
    dup_cols = [*KEYS, "start_time", "end_time"]
    attempts = attempts.select(*KEYS, "name", "user", "state", "n_gpus", "start_time", "end_time")
    # a gang's size is its largest attempt's: an attempt seen from part of its pods, or from
    # events that carry no GPU count, does not shrink the chain
    sizes = attempts.group_by(KEYS).agg(pl.col("n_gpus").max().alias("_chain_gpus"))
    started, running = _ended_attempts(attempts)
    return (
        started.filter(pl.col("end_time").is_not_null())
        .sort(dup_cols, maintain_order=True)
        # the same attempt reported twice (two sources, re-ingest of a renamed dump): keep one
        .filter(pl.any_horizontal([pl.col(c).ne_missing(pl.col(c).shift(1)) for c in dup_cols]))
        .with_columns(
            pl.col("start_time").dt.epoch("us").alias("_s"),
            pl.col("end_time").dt.epoch("us").alias("_e"),
            pl.col("state").fill_null("UNKNOWN").str.to_uppercase().alias("_state"),
        )
        # rows are sorted by chain: a chain starts where any key differs from the row above
        .with_columns(
            pl.any_horizontal([pl.col(k).ne_missing(pl.col(k).shift(1)) for k in KEYS]).alias(
                "_first"
            )
        )
        .join(running, on=KEYS, how="left", maintain_order="left")
        .join(sizes, on=KEYS, how="left", maintain_order="left")
        .with_columns(
            pl.col("_first").cum_sum().alias("_g"),
            (pl.col("_first").shift(-1, fill_value=True) & pl.col("_running").is_null()).alias(
                "_last"
            ),
        )
        .with_columns(
            pl.when(~pl.col("_first"))
            .then(pl.col("_e").cum_max().over("_g").shift(1))
            .alias("_prev_end"),
            (~pl.col("_first") & (pl.col("_state").shift(1) != "COMPLETED")).alias("_after_fail"),
        )
        .with_columns(pl.max_horizontal("_s", "_prev_end").alias("_s"))
        .with_columns(pl.max_horizontal("_e", "_s").alias("_e"))
        .with_columns(
            (pl.col("_e") - pl.col("_s")).alias("_d"),
            (pl.col("_s") - pl.col("_prev_end")).fill_null(0).clip(lower_bound=0).alias("_gap"),
        )
        .with_columns(
            pl.when(pl.col("_first"))
            .then(0)
            .otherwise(pl.min_horizontal(pl.col("_d"), pl.lit(rst)))
            .alias("_restart")
        )
        .with_columns((pl.col("_d") - pl.col("_restart")).alias("_c"))
        .with_row_index("_row")
    )


def _interval_checkpoints(a: pl.DataFrame, tau: int, dlt: int) -> pl.DataFrame:
    """Checkpoints per attempt from the fixed interval: ``_nck`` whole segments of interval
    ``tau`` plus cost ``dlt``, costing ``_ckpt`` and retaining ``_kept``; ``_exact`` False."""
    n_ck = pl.col("_c") // (tau + dlt) if tau + dlt > 0 else pl.lit(0)
    return (
        a.with_columns(n_ck.cast(pl.Int64).alias("_nck"))
        .with_columns(
            (pl.col("_nck") * dlt).alias("_ckpt"),
            (pl.col("_nck") * tau).alias("_kept"),
            # where the work kept ends: its last whole segment's
            (pl.col("_s") + pl.col("_restart") + pl.col("_nck") * (tau + dlt)).alias("_kept_end"),
        )
        .with_columns(pl.lit(False).alias("_exact"))
    )


def _exact_checkpoints(a: pl.DataFrame, checkpoints: pl.DataFrame, dlt: int) -> pl.DataFrame:
    """``_interval_checkpoints`` rows with the jobs that ``checkpoints`` names counted from their
    exact checkpoint times instead (``_exact`` True): the saves inside each attempt after its
    restore, each costing ``dlt`` (at most the span up to the last one)."""
    ck_keys = [k for k in KEYS if k in checkpoints.columns]
    ck = checkpoints.select(*ck_keys, pl.col("time").dt.epoch("us").alias("_t"))
    hits = (
        a.select("_row", *KEYS, "_s", "_e", "_restart")
        .join(ck, on=ck_keys, how="inner")
        .filter((pl.col("_t") > pl.col("_s") + pl.col("_restart")) & (pl.col("_t") <= pl.col("_e")))
        .group_by("_row")
        .agg(
            pl.len().cast(pl.Int64).alias("_n_exact"),
            pl.col("_t").max().alias("_last_ck"),
            pl.col("_s").first(),
            pl.col("_restart").first(),
        )
        .with_columns((pl.col("_last_ck") - pl.col("_s") - pl.col("_restart")).alias("_span"))
        .with_columns(
            (pl.col("_n_exact") * dlt).clip(upper_bound=pl.col("_span")).alias("_ckpt_exact")
        )
        .with_columns((pl.col("_span") - pl.col("_ckpt_exact")).alias("_kept_exact"))
        .select("_row", "_ckpt_exact", "_kept_exact", "_n_exact", "_last_ck")
    )
    named = ck.select(ck_keys).unique().with_columns(pl.lit(True).alias("_named"))
    exact = pl.col("_exact")
    return (
        a.join(hits, on="_row", how="left")
        .join(named, on=ck_keys, how="left")
        .with_columns(pl.col("_named").fill_null(False).alias("_exact"))
        .with_columns(
            pl.when(exact)
            .then(pl.col("_ckpt_exact").fill_null(0))
            .otherwise("_ckpt")
            .alias("_ckpt"),
            pl.when(exact)
            .then(pl.col("_kept_exact").fill_null(0))
            .otherwise("_kept")
            .alias("_kept"),
            pl.when(exact).then(pl.col("_n_exact").fill_null(0)).otherwise("_nck").alias("_nck"),
            pl.when(exact)
            .then(pl.col("_last_ck").fill_null(pl.col("_s") + pl.col("_restart")))
            .otherwise("_kept_end")
            .alias("_kept_end"),
        )
    )


def _split_time(a: pl.DataFrame) -> pl.DataFrame:
    """Each attempt's time split into the parts of the module docstring (``_prod``, ``_lost``,
    ``_other``, ``_queue``; restart and checkpoint are already columns)."""
    ok = pl.col("_state") == "COMPLETED"
    tail = pl.col("_c") - pl.col("_ckpt") - pl.col("_kept")
    return a.with_columns(
        pl.when(ok).then(pl.col("_c") - pl.col("_ckpt")).otherwise("_kept").alias("_prod"),
        pl.when(~ok & ~pl.col("_last")).then(tail).otherwise(0).alias("_lost"),
        (
            pl.when(~ok & pl.col("_last")).then(tail).otherwise(0)
            + pl.when(pl.col("_after_fail")).then(0).otherwise("_gap")
        ).alias("_other"),
        pl.when(pl.col("_after_fail")).then("_gap").otherwise(0).alias("_queue"),
    )


def _slow_time(a: pl.DataFrame, periods: pl.DataFrame | None) -> pl.DataFrame:
    """``_split_time`` rows with ``_slow``: the work each attempt kept but lost running slow
    (module docstring), taken out of ``_prod``."""
    if periods is None or periods.height == 0:
        return a.with_columns(pl.lit(0, pl.Int64).alias("_slow"))
    keys = [k for k in ("cluster", "job_id") if k in periods.columns]
    p = periods.filter(pl.col("extra_hours").fill_null(0) > 0).select(
        *keys,
        _ps=pl.col("start_time").dt.epoch("us"),
        _pe=pl.col("end_time").dt.epoch("us"),
        _px=(pl.col("extra_hours") * HOUR_US).round().cast(pl.Int64),
    )
    ok = pl.col("_state") == "COMPLETED"
    win = a.select(
        "_row",
        *keys,
        _w0=pl.col("_s") + pl.col("_restart"),
        _w1=pl.when(ok).then(pl.col("_e")).otherwise("_kept_end"),
    )
    timed = win.join(p.filter(pl.col("_ps").is_not_null() & pl.col("_pe").is_not_null()), on=keys)
    lap = (pl.min_horizontal("_w1", "_pe") - pl.max_horizontal("_w0", "_ps")).clip(lower_bound=0)
    span = (pl.col("_pe") - pl.col("_ps")).clip(lower_bound=1)
    # in floating point: extra x overlap in microseconds squared outgrows 64-bit integers
    placed = timed.group_by("_row").agg(
        _in=(pl.col("_px").cast(pl.Float64) * lap.cast(pl.Float64) / span).sum(),
    )
    # periods without times: over the chain's kept work, in proportion
    untimed = (
        p.filter(pl.col("_ps").is_null() | pl.col("_pe").is_null())
        .group_by(keys)
        .agg(_ux=pl.col("_px").sum())
    )
    out = a.join(placed, on="_row", how="left").join(untimed, on=keys, how="left")
    chain_prod = pl.col("_prod").sum().over(KEYS)
    spread = pl.when(chain_prod > 0).then(pl.col("_ux").fill_null(0) * pl.col("_prod") / chain_prod)
    slow = (pl.col("_in").fill_null(0) + spread.fill_null(0)).round().cast(pl.Int64)
    return (
        out.with_columns(_slow=pl.min_horizontal(slow, pl.col("_prod")).clip(lower_bound=0))
        .with_columns(_prod=pl.col("_prod") - pl.col("_slow"))
        .drop("_in", "_ux")
    )


_PARTS_US = ("_prod", "_slow", "_lost", "_restart", "_ckpt", "_queue", "_other")


def _chains(a: pl.DataFrame) -> pl.DataFrame:
    """One row per job chain: its identity, span and state, and each part summed over its
    attempts (still integer microseconds, so the books close exactly)."""
    return a.group_by(KEYS, maintain_order=True).agg(
        pl.col("name").last(),
        pl.col("user").last(),
        pl.len().cast(pl.Int32).alias("attempts"),
        pl.col("_chain_gpus").first().alias("n_gpus"),
        pl.col("start_time").min().alias("first_start"),
        pl.col("end_time").max().alias("final_end"),
        pl.when(pl.col("_running").any())
        .then(pl.lit("RUNNING"))
        .otherwise(pl.col("_state").last())
        .alias("final_state"),
        (pl.col("_e").max() - pl.col("_s").min()).alias("_wall"),
        pl.when(pl.col("_exact").any())
        .then(pl.lit("measured"))
        .otherwise(pl.lit("assumed"))
        .alias("method"),
        pl.col("_nck").sum().cast(pl.Int64).alias("n_checkpoints"),
        *(pl.col(c).sum().alias(c) for c in _PARTS_US),
    )


def _in_hours(
    jobs: pl.DataFrame, ckpt_interval_s: float, ckpt_cost_s: float, restart_s: float
) -> pl.DataFrame:
    """``_chains`` rows as ``goodput_jobs`` columns: the parts in hours, GPU-hours, goodput,
    which parts were assumed, and the assumptions used."""
    h = 1.0 / HOUR_US
    return jobs.with_columns(
        (pl.col("_wall") * h).alias("wall_hours"),
        (pl.col("_prod") * h).alias("productive_hours"),
        (pl.col("_slow") * h).alias("slow_hours"),
        (pl.col("_lost") * h).alias("lost_work_hours"),
        (pl.col("_restart") * h).alias("restart_hours"),
        (pl.col("_ckpt") * h).alias("checkpoint_hours"),
        (pl.col("_queue") * h).alias("queue_after_failure_hours"),
        (pl.col("_other") * h).alias("other_hours"),
        (pl.col("n_gpus").fill_null(0) * pl.col("_wall") * h).alias("gpu_hours"),
        pl.when(pl.col("_wall") > 0).then(pl.col("_prod") / pl.col("_wall")).alias("goodput"),
        pl.when(pl.col("method") == "measured")
        .then(pl.lit(",".join(ALWAYS_ASSUMED)))
        .otherwise(pl.lit(",".join(("lost_work_hours", *ALWAYS_ASSUMED))))
        .alias("assumed_parts"),
        pl.lit(float(ckpt_interval_s)).alias("ckpt_interval_s"),
        pl.lit(float(ckpt_cost_s)).alias("ckpt_cost_s"),
        pl.lit(float(restart_s)).alias("restart_s"),
    ).drop("_wall", *_PARTS_US)


def durable_times(checkpoints: pl.DataFrame, ckpt_cost_s: float = CKPT_COST_S) -> pl.DataFrame:
    """When each checkpoint became durable, from ``checkpoints`` rows: a ``save_end`` at its
    time; for a job whose log shows only ``save_start`` lines (Lightning logs the save before
    writing it), start + ``duration_s`` when given, else start + ``ckpt_cost_s``. A frame
    without an ``event`` column is taken as completion times already."""
    if "event" not in checkpoints.columns:
        return checkpoints
    keys = [k for k in KEYS if k in checkpoints.columns]
    ends = checkpoints.filter(pl.col("event") == "save_end")
    has_end = ends.select(keys).unique().with_columns(pl.lit(True).alias("_has_end"))
    took_us = pl.col("duration_s").cast(pl.Float64).fill_null(float(ckpt_cost_s)) * US
    starts = (
        checkpoints.filter(pl.col("event") == "save_start")
        .join(has_end, on=keys, how="left")
        .filter(pl.col("_has_end").is_null())
        .with_columns(pl.col("time") + pl.duration(microseconds=took_us.round().cast(pl.Int64)))
        .drop("_has_end")
    )
    return pl.concat([ends, starts], how="diagonal_relaxed")


def summarize(jobs: pl.DataFrame) -> pl.DataFrame:
    """Goodput and badput shares, weighted by job count and by GPU-hours (n_gpus × wall).

    Job-weighted: the mean over jobs of each job's share; GPU-hour-weighted: Σ n_gpus·x over
    Σ n_gpus·wall, i.e. the share of the fleet's GPU-hours held by these jobs."""
    j = jobs.filter(pl.col("wall_hours") > 0)
    cols = ("productive_hours", *BADPUT)
    by_jobs = j.select(
        pl.lit("jobs").alias("weighting"),
        pl.len().alias("jobs"),
        pl.col("gpu_hours").sum().alias("gpu_hours"),
        *((pl.col(c) / pl.col("wall_hours")).mean().alias(c.replace("_hours", "")) for c in cols),
    )
    w = pl.col("n_gpus").fill_null(0)
    by_gpu = j.select(
        pl.lit("gpu_hours").alias("weighting"),
        pl.len().alias("jobs"),
        pl.col("gpu_hours").sum().alias("gpu_hours"),
        *(
            ((w * pl.col(c)).sum() / (w * pl.col("wall_hours")).sum()).alias(
                c.replace("_hours", "")
            )
            for c in cols
        ),
    )
    return pl.concat([by_jobs, by_gpu]).rename({"productive": "goodput"})


def fleet_mtti(attempts: pl.DataFrame, interruptions: pl.DataFrame) -> dict:
    """Fleet-wide mean time between unexpected interruptions, the one definition the report
    and the CLI summary print: the span the job attempts cover divided by the unplanned
    interruptions, for the infrastructure scope (everything but the job's own failures) and for
    all causes. Keys: span_hours, unexpected, workload, infrastructure (count outside the
    workload domain), mtti_infrastructure_hours, mtti_all_hours (None without events)."""
    ran = attempts.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    span = (
        (ran["end_time"].max() - ran["start_time"].min()).total_seconds() / 3600
        if ran.height
        else None
    )
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False))
    workload = unplanned.filter(pl.col("failure_domain") == WORKLOAD_DOMAIN).height
    infra = unplanned.height - workload
    return {
        "span_hours": span,
        "unexpected": unplanned.height,
        "workload": workload,
        "infrastructure": infra,
        "mtti_infrastructure_hours": span / infra if span and infra else None,
        "mtti_all_hours": span / unplanned.height if span and unplanned.height else None,
    }


def refresh_goodput_jobs(
    wh,
    ckpt_interval_s: float = CKPT_INTERVAL_S,
    ckpt_cost_s: float = CKPT_COST_S,
    restart_s: float = RESTART_S,
    checkpoints: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Read ``job_attempts``, ``slow_periods`` (and ``checkpoints`` unless given), write
    ``goodput_jobs``; returns the written rows."""
    if checkpoints is None:
        checkpoints = wh.read("checkpoints")
    jobs = measure(
        wh.read("job_attempts"),
        ckpt_interval_s,
        ckpt_cost_s,
        restart_s,
        checkpoints,
        wh.read("slow_periods"),
    )
    wh.replace_table("goodput_jobs", jobs)
    return jobs
