"""Interruption attribution: job attempts that did not end normally, with their root cause.

Every attempt whose state is not a normal one (``NORMAL_STATES``) and that has an end time is one
row of ``interruptions``. Its cause comes from the hardware and node events on the attempt's nodes
in a window around its end (default 15 minutes before to 5 minutes after; a TIMEOUT also looks
back to the attempt's start for a fatal event, since a hang begins long before the time limit;
critical and warning events that early are taken as transient: a link flap during a run that
then hit its time limit is no proof of a hang). The window join is one DuckDB join on (host,
hour bucket) plus the range test, not a Python loop.

Precedence (``analysis.hw_evidence.PRECEDENCE``, lowest rank wins; ties: the earliest event --
in a cascade the first error is the cause, the rest are its consequences -- then the class and
host, which do not depend on where the files were read from, then the event id).
An event that names an initiating event in ``caused_by`` (Xid 45 "caused by previous Xid 79")
is replaced by the root of its chain before ranking, so the initiating event's class, severity
and id are what count.

    rank  evidence                                                   confidence
    1     fatal GPU / HBM / SRAM event (XID 79, 48, 95, ...)         0.95
    2     fatal or critical NVLink / NVSwitch / IB link / NIC        0.90
    3     fatal/critical PSU, DIMM, CPU, cooling, storage, BMC;
          critical (non-fatal) GPU-family event                      0.90
    4     fatal/critical DCGM counter increment (source dcgm_counter) 0.80
    5     fatal/critical host_os or unclassified hardware event      0.70
    6     hardware warning (any hardware class)                      0.60
    7     node event: down / not_responding / not_ready / reboot /
          job_killed / job_requeue / non-planned drain; the class
          comes from the reason text when it names one (REASON_CLASS) 0.70 (0.50 if class unknown)
    8     software-class hardware event (application XIDs)           0.70 (workload)
    info-severity events and warning-level counter increments (NVLink CRC, retired pages: a
    steady background on healthy GPUs) are never evidence.

Decision, in order (``_decide``):
  1. ranks 1-5 ("hard" hardware evidence) -> failure_domain infrastructure, cause = that event.
     For attempts that carry their own explanation (a planned state, workload exit evidence, a
     maintenance drain) only evidence at or before end + ``skew_s`` counts: an error logged
     after a user cancelled the job did not cause it.
  2. planned states (CANCELLED, PREEMPTED, TIMEOUT without hang evidence, DEADLINE)
     -> planned, domain workload, class software, method state, 0.9.
  3. a planned drain on one of the nodes during the attempt (node event drain/down/reboot whose
     reason matches ``PLANNED_REASON``: maintenance, planned, upgrade, cordon, NodeNotSchedulable
     ...; or the attempt's own reason matches) -> planned, domain infrastructure, class host_os
     (docs/design.md taxonomy: host maintenance), method node_event, 0.85.
  4. workload evidence: OUT_OF_MEMORY, or FAILED with a non-zero exit code or a signal
     -> workload / software, method exit_code, 0.85. Only hard evidence overrides it.
  5. rank 6 / 7 evidence -> infrastructure with that class (node failure with no hardware
     evidence: class ``unknown``, domain infrastructure: we know the node failed, not which part).
  6. rank 8 -> workload / software.
  7. FAILED without an exit code (Kubernetes restarts) -> workload / software, method state, 0.6.
  8. NODE_FAIL / BOOT_FAIL with no evidence at all -> infrastructure / unknown, method state, 0.4.
  9. anything else (REQUEUED, UNKNOWN, ...) -> unknown / unknown, method state, 0.2.

Lost work (``lost_gpu_hours``): n_gpus x (end - max(start, last checkpoint)). The last
checkpoint is the latest given checkpoint time of the job in [start, end] when a ``checkpoints``
frame is passed, else start + floor((end - start) / interval) x interval; attempts with fewer
than ``no_ckpt_below_gpus`` GPUs are taken not to checkpoint (all work since start is lost).

Joins are on host name only (sources disagree on the cluster label; host names are assumed unique
across the clusters in one warehouse). The evidence (the window join, ``REASON_CLASS``,
``PLANNED_REASON``) is gathered in ``analysis.attribution_evidence``; this module decides.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from analysis.assumptions import ATTRIBUTION_AFTER_S
from analysis.assumptions import ATTRIBUTION_BEFORE_S
from analysis.assumptions import CKPT_INTERVAL_S
from analysis.attribution_evidence import PLANNED_REASON
from analysis.attribution_evidence import attempt_evidence
from analysis.goodput_measured import chain_gpus
from analysis.hw_evidence import HARD_RANK
from analysis.hw_evidence import PRECEDENCE
from analysis.hw_evidence import read_hw_evidence
from warehouse.schemas import TABLES
from warehouse.schemas import conform

NORMAL_STATES = ("COMPLETED", "RUNNING", "PENDING", "SUSPENDED", "RESIZING", "REQUEUE_HOLD")
PLANNED_STATES = ("CANCELLED", "PREEMPTED", "TIMEOUT", "DEADLINE", "REVOKED")
NODE_FAIL_STATES = ("NODE_FAIL", "BOOT_FAIL")
OOM_STATES = ("OUT_OF_MEMORY",)

CONFIDENCE = {r: c for r, _, c, _ in PRECEDENCE}
NODE_EVENT_UNKNOWN_CONFIDENCE = 0.5
CONF_PLANNED_STATE = 0.9
CONF_MAINTENANCE = 0.85
CONF_EXIT_CODE = 0.85
CONF_FAILED_NO_EXIT = 0.6
CONF_NODE_FAIL_STATE = 0.4
CONF_UNEXPLAINED = 0.2


def _lost_gpu_hours(
    df: pl.DataFrame,
    ckpt_interval_s: float,
    no_ckpt_below_gpus: int,
    checkpoints: pl.DataFrame | None,
) -> pl.DataFrame:
    elapsed = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
    elapsed = pl.max_horizontal(elapsed, pl.lit(0.0))
    if ckpt_interval_s and ckpt_interval_s > 0:
        since_ckpt = elapsed - (elapsed / ckpt_interval_s).floor() * ckpt_interval_s
    else:
        since_ckpt = elapsed
    checkpointing = pl.col("n_gpus").fill_null(0) >= no_ckpt_below_gpus
    lost_s = pl.when(checkpointing).then(since_ckpt).otherwise(elapsed)
    if checkpoints is not None and checkpoints.height:
        on = [c for c in ("scheduler", "job_id") if c in checkpoints.columns]
        cp = checkpoints.select(*on, ckpt=pl.col("time").cast(pl.Datetime("us")))
        joined = (
            df.select("_i", "job_id", "scheduler", "start_time", "end_time")
            .join(cp, on=on, how="inner")
            .filter(
                (pl.col("ckpt") >= pl.col("start_time")) & (pl.col("ckpt") <= pl.col("end_time"))
            )
            .group_by("_i")
            .agg(last_ckpt=pl.col("ckpt").max())
        )
        df = df.join(joined, on="_i", how="left")
        exact = (pl.col("end_time") - pl.col("last_ckpt")).dt.total_microseconds() / 1e6
        lost_s = pl.when(pl.col("last_ckpt").is_not_null()).then(exact).otherwise(lost_s)
    else:
        df = df.with_columns(last_ckpt=pl.lit(None, pl.Datetime("us")))
    lost = pl.when(pl.col("start_time").is_null()).then(0.0).otherwise(lost_s)
    return df.with_columns(lost_gpu_hours=pl.col("n_gpus").cast(pl.Float64) * lost / 3600.0).drop(
        "last_ckpt"
    )


def candidate_attempts(attempts: pl.DataFrame) -> pl.DataFrame:
    """Attempts that did not end normally and have an end time, one row per attempt key; one
    without a GPU count (a Kubernetes restart seen in events) at its chain's (``chain_gpus``)."""
    return (
        attempts.with_columns(chain_gpus())
        .filter(
            pl.col("end_time").is_not_null()
            & ~pl.col("state").fill_null("UNKNOWN").is_in(NORMAL_STATES)
        )
        .unique(["cluster", "scheduler", "job_id", "attempt"], keep="last", maintain_order=True)
        .sort(["end_time", "cluster", "scheduler", "job_id", "attempt"], nulls_last=True)
        .with_row_index("_i")
    )


# the attempt's one node, where it ran on one (an outcome with no evidence event names it)
_SINGLE_NODE = pl.when(pl.col("nodes").list.len() == 1).then(pl.col("nodes").list.first())


class _Outcome(NamedTuple):
    """One row of the decision table: when it applies and what the interruption is then."""

    when: pl.Expr
    domain: str
    cls: pl.Expr
    method: str | pl.Expr
    confidence: pl.Expr
    event: pl.Expr | None = None
    host: pl.Expr = _SINGLE_NODE
    planned: bool = False


def _chosen_evidence(use_pre: pl.Expr) -> dict[str, pl.Expr]:
    """``_rank``/``_cls``/``_ref``/``_host``: the evidence before end + skew where the attempt
    carries its own explanation (``use_pre``), else the best over the whole window."""
    return {
        f"_{k}": pl.when(use_pre).then(pl.col(f"pre_{k}")).otherwise(pl.col(f"all_{k}"))
        for k in ("rank", "cls", "ref", "host")
    }


def _decisions(
    state: pl.Expr, planned_state: pl.Expr, maint: pl.Expr, workload_strong: pl.Expr
) -> list[_Outcome]:
    """The decision rules of the module docstring, in order (first match wins), over frames
    carrying ``_chosen_evidence``; the last row is the fallback (its ``when`` is never read)."""
    r = pl.col("_rank")
    conf_rank = r.replace_strict(CONFIDENCE, default=None, return_dtype=pl.Float64)
    conf_rank = (
        pl.when((r == 7) & (pl.col("_cls") == "unknown"))
        .then(NODE_EVENT_UNKNOWN_CONFIDENCE)
        .otherwise(conf_rank)
    )
    evidence = (conf_rank, pl.col("_ref"), pl.col("_host"))
    sw, infra, cls = pl.lit("software"), "infrastructure", pl.col("_cls")
    hard = r.is_not_null() & (r <= HARD_RANK)
    node_or_hw = pl.when(r == 7).then(pl.lit("node_event")).otherwise(pl.lit("hw_event_window"))
    maint_evidence = (pl.col("maint_ref"), pl.coalesce(pl.col("maint_host"), _SINGLE_NODE))
    unknown, host_os = pl.lit("unknown"), pl.lit("host_os")
    return [
        _Outcome(hard, infra, cls, "hw_event_window", *evidence),
        _Outcome(planned_state, "workload", sw, "state", pl.lit(CONF_PLANNED_STATE), planned=True),
        _Outcome(
            maint, infra, host_os, "node_event", pl.lit(CONF_MAINTENANCE), *maint_evidence, True
        ),
        _Outcome(workload_strong, "workload", sw, "exit_code", pl.lit(CONF_EXIT_CODE)),
        _Outcome(r.is_in([6, 7]), infra, cls, node_or_hw, *evidence),
        _Outcome(r == 8, "workload", sw, "hw_event_window", *evidence),
        _Outcome(state == "FAILED", "workload", sw, "state", pl.lit(CONF_FAILED_NO_EXIT)),
        _Outcome(
            state.is_in(NODE_FAIL_STATES), infra, unknown, "state", pl.lit(CONF_NODE_FAIL_STATE)
        ),
        _Outcome(
            pl.lit(True),
            "unknown",
            unknown,
            "state",
            pl.lit(CONF_UNEXPLAINED),
            pl.lit(None, pl.Utf8),
        ),
    ]


def _first_match(outcomes: list[_Outcome], field: str) -> pl.Expr:
    """One output column: ``field`` of the first outcome whose ``when`` holds, else of the
    fallback (the last outcome)."""

    def lit(v):
        return v if isinstance(v, pl.Expr) else pl.lit(v)

    *cases, fallback = outcomes
    default = lit(getattr(fallback, field))
    expr = pl.when(pl.lit(False)).then(default)
    for case in cases:
        expr = expr.when(case.when).then(lit(getattr(case, field)))
    return expr.otherwise(default)


def _decide(df: pl.DataFrame) -> pl.DataFrame:
    """The cause columns of each candidate attempt joined with its ``attempt_evidence``."""
    state = pl.col("state").fill_null("UNKNOWN")
    exit_bad = (pl.col("exit_code").fill_null(0) != 0) | (pl.col("signal").fill_null(0) != 0)
    workload_strong = state.is_in(OOM_STATES) | ((state == "FAILED") & exit_bad)
    planned_state = state.is_in(PLANNED_STATES)
    maint = pl.col("maint_ref").is_not_null() | pl.col("reason").fill_null("").str.contains(
        PLANNED_REASON
    )
    df = df.with_columns(**_chosen_evidence(planned_state | workload_strong | maint))
    outcomes = _decisions(state, planned_state, maint, workload_strong)
    return df.with_columns(
        failure_domain=_first_match(outcomes, "domain"),
        cause_class=_first_match(outcomes, "cls"),
        planned=_first_match(outcomes, "planned"),
        method=_first_match(outcomes, "method"),
        confidence=_first_match(outcomes, "confidence"),
        cause_event=_first_match(outcomes, "event"),
        cause_host=_first_match(outcomes, "host"),
    )


def build_interruptions(
    attempts: pl.DataFrame,
    node_events: pl.DataFrame,
    hw_events: pl.DataFrame,
    window_before_s: float = ATTRIBUTION_BEFORE_S,
    window_after_s: float = ATTRIBUTION_AFTER_S,
    ckpt_interval_s: float = CKPT_INTERVAL_S,
    no_ckpt_below_gpus: int = 16,
    checkpoints: pl.DataFrame | None = None,
    maint_lookback_s: float = 24 * 3600,
    skew_s: float = 30,
) -> pl.DataFrame:
    """The ``interruptions`` table from ``job_attempts``, ``node_events`` and ``hw_events``
    frames (pure). ``checkpoints``: optional (job_id[, scheduler], time) of known checkpoints."""
    att = candidate_attempts(attempts)
    if att.height == 0:
        return TABLES["interruptions"].empty()
    ev = attempt_evidence(
        att, node_events, hw_events, window_before_s, window_after_s, maint_lookback_s, skew_s
    )
    df = _decide(att.join(ev, on="_i", how="left"))
    df = _lost_gpu_hours(df, ckpt_interval_s, no_ckpt_below_gpus, checkpoints)
    return conform(
        "interruptions",
        df.sort("_i").drop([c for c in df.columns if c not in TABLES["interruptions"].columns]),
    )


def refresh_interruptions(wh, **params) -> pl.DataFrame:
    """Rebuild ``interruptions`` from the warehouse and replace the table."""
    df = build_interruptions(
        wh.read("job_attempts"), wh.read("node_events"), read_hw_evidence(wh), **params
    )
    wh.replace_table("interruptions", df)
    return df


def interruption_mix(interruptions: pl.DataFrame, include_planned: bool = False) -> pl.DataFrame:
    """Unexpected interruptions by cause class: (cause_class, count, share), largest first."""
    df = (
        interruptions
        if include_planned
        else interruptions.filter(~pl.col("planned").fill_null(False))
    )
    out = df.group_by("cause_class").agg(count=pl.len())
    total = out["count"].sum()
    return out.with_columns(share=pl.col("count") / total if total else pl.lit(0.0)).sort(
        ["count", "cause_class"], descending=[True, False]
    )
