"""What-if analysis of a per-operation training trace: how much faster the job would have run
without stragglers, and whether individual workers or the pipeline's stage partitioning made it
slow (J. Lin et al., "Understanding Stragglers in Large Model Training Using What-if Analysis",
OSDI '25, arXiv 2505.05713; the formulas are in docs/statistics.md).

- ``T_actual``: the mean step time when the trace is replayed over its dependency model
  (``analysis.slowness.pipeline_model``) with every operation taking its recorded time (a local
  operation its duration, a synchronising one its transfer time: its end less its group's latest
  start). The replay leaves out the CPU launch gaps the trace shows between operations, so that
  the only thing the what-ifs below change is operation times.
- ``T_ideal``: the same replay with every operation taking its type's typical time over the whole
  trace: the mean for computation, the median for communication (a transfer's tail is waiting
  that leaked into the measurement, not work).
- Slowdown ``S = T_actual / T_ideal``.
- Attribution: ``S_d`` (``S_p``): the ideal replay with the operations of data-parallel rank
  ``d`` (pipeline stage ``p``) at their recorded times, over ``T_ideal``; a worker ``(d, p)``
  scores ``min(S_d, S_p)``.
- ``M_W``: the share of the slowdown removed when the top 3% of workers by score (at least one)
  run at typical times: ``(T_actual - T_rem) / (T_actual - T_ideal)``. ``M_S``: the same for the
  last pipeline stage (where the loss layer makes stage partitioning uneven).

The verdict: ``none`` when ``S < STRAGGLING`` (1.1); else ``worker`` or ``stage`` by the larger of
``M_W`` and ``M_S`` when it explains at least ``EXPLAINS`` (half) of the slowdown; else ``mixed``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import numpy as np
import polars as pl

from analysis.slowness.pipeline_model import COLUMNS
from analysis.slowness.pipeline_model import COMMUNICATION
from analysis.slowness.pipeline_model import Model
from analysis.slowness.pipeline_model import TraceError
from analysis.slowness.pipeline_model import build

STRAGGLING = 1.1  # S at or above: the job straggles
EXPLAINS = 0.5  # M_W or M_S at or above: that cause explains the slowdown
TOP_WORKERS = 0.03  # the share of workers M_W restores
# a recorded start earlier than a dependency's recorded end by more than this breaks the model
DEPENDENCY_TOLERANCE_S = 0.01


@dataclass(frozen=True)
class WhatIf:
    """The what-if result of one trace (times in seconds, per step, means over its steps)."""

    steps: int
    dp: int
    pp: int
    workers: int
    measured_step_s: float  # the trace's own step time (first start to last end)
    actual_step_s: float  # T_actual
    ideal_step_s: float  # T_ideal
    slowdown: float  # S
    worker_share: float  # M_W
    stage_share: float  # M_S
    verdict: str  # none | worker | stage | mixed
    top_workers: tuple[tuple[int, int, float], ...]  # (dp_rank, stage, score), worst first
    by_dp_rank: dict[int, float] = field(default_factory=dict)  # S_d
    by_stage: dict[int, float] = field(default_factory=dict)  # S_p
    # share of operations that start before a dependency has ended (by more than the tolerance):
    # how far the recorded order departs from the model
    dependency_violations: float = 0.0

    def as_dict(self) -> dict:
        return {
            "steps": self.steps,
            "dp": self.dp,
            "pp": self.pp,
            "workers": self.workers,
            "measured_step_s": self.measured_step_s,
            "actual_step_s": self.actual_step_s,
            "ideal_step_s": self.ideal_step_s,
            "S": self.slowdown,
            "M_W": self.worker_share,
            "M_S": self.stage_share,
            "verdict": self.verdict,
            "top_workers": [{"dp_rank": d, "stage": p, "score": s} for d, p, s in self.top_workers],
            "by_dp_rank": {str(k): v for k, v in self.by_dp_rank.items()},
            "by_stage": {str(k): v for k, v in self.by_stage.items()},
            "dependency_violations": self.dependency_violations,
        }


def read_trace(path: str | Path) -> pl.DataFrame:
    """A trace file (Parquet, or CSV with a header) as a frame with the columns the model reads;
    a ``TraceError`` naming what is wrong otherwise."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"{path}: no such file")
    try:
        if path.suffix.lower() == ".csv":
            df = pl.read_csv(path)
        else:
            df = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TraceError(f"{path}: not a readable Parquet or CSV trace ({exc})") from None
    return df


def analyse(trace: pl.DataFrame) -> WhatIf:
    """The what-if slowdown of ``trace`` and its split between workers and stages."""
    trace = _checked(trace)
    model = build(trace)
    start, duration = _observed(trace, model)
    end = start + duration
    group_start = model.group_latest_start(start)
    synced = model.group >= 0
    own = np.where(synced, np.maximum(end - group_start, 0.0), duration)
    ideal = np.broadcast_to(_typical(own, model), own.shape)
    t_actual = model.replay(own).mean()
    t_ideal = model.replay(ideal).mean()
    slowdown = t_actual / t_ideal

    dp_rows = np.arange(model.replicas) % model.dp
    stage_cols = model.template["stage"].to_numpy()
    by_dp = {d: _mixed(model, ideal, own, dp_rows == d, None) / t_ideal for d in range(model.dp)}
    by_stage = {
        p: _mixed(model, ideal, own, None, stage_cols == p) / t_ideal for p in range(model.pp)
    }
    workers = _workers(trace)
    scores = sorted(
        ((min(by_dp[d], by_stage[p]), d, p) for d, p in workers), key=lambda x: (-x[0], x[1], x[2])
    )
    top = scores[: max(1, math.ceil(len(workers) * TOP_WORKERS))]
    removed = own.copy()
    for _, d, p in top:
        removed[np.ix_(dp_rows == d, stage_cols == p)] = ideal[0, stage_cols == p]
    gap = t_actual - t_ideal
    worker_share = (t_actual - model.replay(removed).mean()) / gap if gap > 0 else 0.0
    last = _mixed(model, own, ideal, None, stage_cols == model.pp - 1)
    stage_share = (t_actual - last) / gap if gap > 0 else 0.0
    return WhatIf(
        steps=len(model.steps),
        dp=model.dp,
        pp=model.pp,
        workers=len(workers),
        measured_step_s=_measured(trace),
        actual_step_s=float(t_actual),
        ideal_step_s=float(t_ideal),
        slowdown=float(slowdown),
        worker_share=float(worker_share),
        stage_share=float(stage_share),
        verdict=verdict(slowdown, worker_share, stage_share),
        top_workers=tuple((d, p, float(s)) for s, d, p in top),
        by_dp_rank={d: float(v) for d, v in by_dp.items()},
        by_stage={p: float(v) for p, v in by_stage.items()},
        dependency_violations=_violations(model, start, end),
    )


def verdict(slowdown: float, worker_share: float, stage_share: float) -> str:
    """none | worker | stage | mixed (the module docstring's rule)."""
    if slowdown < STRAGGLING:
        return "none"
    best, name = max((worker_share, "worker"), (stage_share, "stage"))
    return name if best >= EXPLAINS else "mixed"


def _checked(trace: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in COLUMNS if c not in trace.columns]
    if missing:
        raise TraceError(f"trace lacks columns: {', '.join(missing)} (want {', '.join(COLUMNS)})")
    if trace.height == 0:
        raise TraceError("trace has no operations")
    out = trace.select(
        pl.col("dp_rank", "stage", "step", "seq_id").cast(pl.Int64),
        pl.col("optype").cast(pl.Utf8),
        pl.col("start_ts", "duration").cast(pl.Float64),
        *([pl.col("mc").cast(pl.Int64)] if "mc" in trace.columns else []),
    )
    bad = out.filter(
        pl.any_horizontal(pl.all().is_null())
        | (pl.col("duration") < 0)
        | (pl.col("dp_rank") < 0)
        | (pl.col("stage") < 0)
    )
    if bad.height:
        raise TraceError(
            f"{bad.height} operations have a null field or a negative duration, rank or stage "
            f"(first: {bad.row(0, named=True)})"
        )
    return out


def _observed(trace: pl.DataFrame, model: Model) -> tuple[np.ndarray, np.ndarray]:
    """[replicas, n_ops] recorded start (from its step's first start) and duration; a
    ``TraceError`` when a replica misses or repeats an operation of the template."""
    step_index = {int(s): i for i, s in enumerate(model.steps)}
    rows = trace.join(
        model.template.select("op", "stage", "optype", "seq_id"),
        on=["stage", "optype", "seq_id"],
        how="left",
    ).with_columns(
        pl.col("step").replace_strict(step_index).alias("_si"),
        (pl.col("start_ts") - pl.col("start_ts").min().over("step")).alias("_t"),
    )
    if rows["op"].null_count():
        extra = rows.filter(pl.col("op").is_null()).row(0, named=True)
        raise TraceError(
            f"step {extra['step']} dp_rank {extra['dp_rank']} has an operation the first step "
            f"lacks: {extra['optype']} #{extra['seq_id']} on stage {extra['stage']}"
        )
    cell = (pl.col("_si") * model.dp + pl.col("dp_rank")) * model.n_ops + pl.col("op")
    cells = rows.select(cell.alias("cell"), "_t", "duration")
    n = model.replicas * model.n_ops
    if cells.height != n or cells["cell"].n_unique() != n:
        raise TraceError(
            f"{cells.height} operations for {len(model.steps)} steps x {model.dp} dp ranks x "
            f"{model.n_ops} operations of the first step: every step and rank must record the "
            "same operations once"
        )
    start = np.empty(n)
    duration = np.empty(n)
    idx = cells["cell"].to_numpy()
    start[idx] = cells["_t"].to_numpy()
    duration[idx] = cells["duration"].to_numpy()
    return start.reshape(model.replicas, -1), duration.reshape(model.replicas, -1)


def _typical(own: np.ndarray, model: Model) -> np.ndarray:
    """[n_ops]: each op's type's typical own time over the trace (mean for computation, median
    for communication)."""
    types = model.template["optype"].to_numpy()
    frame = pl.DataFrame({"optype": np.tile(types, own.shape[0]), "t": own.ravel()})
    typical = frame.group_by("optype").agg(
        pl.when(pl.col("optype").first().is_in(list(COMMUNICATION)))
        .then(pl.col("t").median())
        .otherwise(pl.col("t").mean())
        .alias("t")
    )
    lookup = dict(typical.iter_rows())
    return np.array([lookup[t] for t in types])


def _mixed(
    model: Model,
    base: np.ndarray,
    other: np.ndarray,
    rows: np.ndarray | None,
    cols: np.ndarray | None,
) -> float:
    """Mean step time of ``base`` with the cells of ``rows`` x ``cols`` (None: all) from
    ``other``."""
    own = np.array(base, copy=True)
    r = slice(None) if rows is None else rows
    c = slice(None) if cols is None else cols
    if rows is not None and cols is not None:
        own[np.ix_(rows, cols)] = other[np.ix_(rows, cols)]
    else:
        own[r, c] = other[r, c]
    return float(model.replay(own).mean())


def _workers(trace: pl.DataFrame) -> list[tuple[int, int]]:
    return sorted(trace.select("dp_rank", "stage").unique().iter_rows())


def _measured(trace: pl.DataFrame) -> float:
    per_step = trace.group_by("step").agg(
        ((pl.col("start_ts") + pl.col("duration")).max() - pl.col("start_ts").min()).alias("t")
    )
    return float(per_step["t"].mean())


def _violations(model: Model, start: np.ndarray, end: np.ndarray) -> float:
    """Share of recorded operations that start before one of their dependencies ended."""
    padded = np.concatenate([end, np.full((end.shape[0], 1), -np.inf)], axis=1)
    ready = padded[:, model.deps].max(axis=2)
    return float(np.mean(start < ready - DEPENDENCY_TOLERANCE_S))
