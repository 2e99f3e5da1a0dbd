"""The dependency model of one training step of a pipeline-parallel job, read from a per-operation
trace (the layout of ByteDance's published straggler traces: one row per recorded operation with
``dp_rank, stage, step, optype, seq_id, start_ts, duration``), and the longest-path replay of a
step over it.

Every step and every data-parallel rank run the same operations in the same dependencies, so the
model is built once, from the first step of data-parallel rank 0 (the *template*: one operation
per ``(stage, optype, seq_id)``), and a replay runs all ``steps x dp`` replicas at once as the
rows of arrays. Within a stage (a worker: one pipeline stage of one data-parallel rank):

- the forward and backward computes run one after another in their recorded order;
- each point-to-point stream (forward/backward send/recv) runs its operations in ``seq_id``
  order; a receive feeds the compute of the same microbatch and is posted after the previous
  compute of its direction (the first backward receive after the compute just before the first
  backward); a send follows the compute that produced it;
- the parameter all-gathers run before the first forward, and the data-parallel collectives
  (all-gather, reduce-scatter, separate all-reduce) run on one stream in recorded order;
- what follows the last compute (garbage collection, the layer-norm and embedding gradient
  reductions, the gradient reduce-scatter, clipping, the optimizer) runs in recorded order.

Across workers an operation that synchronises ends for all its members together, when the last
member has started, plus its own transfer time: a send and the matching receive of the next
(forward) or previous (backward) stage; the embedding-gradient all-reduce of the first and last
stage; the data-parallel collectives of one stage over all data-parallel ranks; gradient
clipping over every stage and data-parallel rank. The layer-norm gradient all-reduce runs over
the tensor-parallel group, which the traces do not record: it is a local operation here.

A replay computes each operation's start as the latest end of its dependencies (0 at the step's
start) in topological *levels*: all operations of a level, in every replica, at once (NumPy over
``replicas x operations``), so the Python loop runs over the levels of one step's critical path
(a few hundred), never over the operations of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import polars as pl

FORWARD, BACKWARD = "forward-compute", "backward-compute"
COMPUTE = (FORWARD, BACKWARD)
# point-to-point type -> (the compute it serves, the stage offset of its peer, the peer's type)
P2P = {
    "forward-recv": (FORWARD, -1, "forward-send"),
    "forward-send": (FORWARD, +1, "forward-recv"),
    "backward-recv": (BACKWARD, +1, "backward-send"),
    "backward-send": (BACKWARD, -1, "backward-recv"),
}
PARAMS_GATHER = "params-all-gather"
DP_COLLECTIVES = (PARAMS_GATHER, "grads-reduce-scatter", "separate-grads-all-reduce")
CLIP = "optimizer-clip-main-grad"  # over every stage and data-parallel rank
EMBEDDING = "embedding-grads-all-reduce"  # first and last stage of one data-parallel rank
# run after the last compute, in recorded order (with the reductions above that occur there)
POST_COMPUTE = ("gc", "layernorm-grads-all-reduce", "optimizer")
# communication: their typical duration is a median (the others': a mean)
COMMUNICATION = (*P2P, *DP_COLLECTIVES, CLIP, EMBEDDING, "layernorm-grads-all-reduce")
KNOWN = (*COMPUTE, *P2P, *DP_COLLECTIVES, CLIP, EMBEDDING, *POST_COMPUTE)
COLUMNS = ("dp_rank", "stage", "step", "optype", "seq_id", "start_ts", "duration")


class TraceError(ValueError):
    """A trace this model cannot read (a one-line reason for the user)."""


@dataclass(frozen=True)
class Level:
    """The operations of one topological level: ``local`` ops end at start + own time; ``members``
    of synchronising groups (sorted by group) end at their group's latest start + own time."""

    local: np.ndarray  # op ids
    local_deps: np.ndarray  # [len(local), maxdeg] op ids, padded with n_ops (a column of zeros)
    members: np.ndarray
    member_deps: np.ndarray
    bounds: np.ndarray  # start of each group's run in ``members`` (np.maximum.reduceat)
    member_group: np.ndarray  # for each member, its group's index among this level's groups
    dp_sync: np.ndarray  # per group of the level: its start is the latest over dp ranks


@dataclass(frozen=True)
class Model:
    """One step's dependency model and the layout of the replica arrays (``steps x dp`` rows,
    ``r = step_index * dp + dp_rank``; one column per template operation)."""

    template: pl.DataFrame  # op, stage, optype, seq_id (the op ids' meaning)
    steps: np.ndarray  # the trace's step numbers, in order
    dp: int
    pp: int
    deps: np.ndarray  # [n_ops, maxdeg] every dependency, padded with n_ops
    group: np.ndarray  # op -> its synchronising group, -1 for a local op
    group_dp_sync: np.ndarray  # group -> synchronised over the data-parallel ranks
    levels: tuple[Level, ...]

    @property
    def n_ops(self) -> int:
        return self.template.height

    @property
    def replicas(self) -> int:
        return len(self.steps) * self.dp

    def replay(self, own: np.ndarray) -> np.ndarray:
        """Each step's time (its replicas' latest end) when every operation takes ``own``
        ([replicas, n_ops]: a local op's duration, a synchronising op's transfer time) and
        starts as soon as its dependencies have ended."""
        end = np.zeros((own.shape[0], self.n_ops + 1))
        for lv in self.levels:
            if len(lv.local):
                start = end[:, lv.local_deps].max(axis=2)
                end[:, lv.local] = start + own[:, lv.local]
            if len(lv.members):
                start = end[:, lv.member_deps].max(axis=2)
                group_start = np.maximum.reduceat(start, lv.bounds, axis=1)
                if lv.dp_sync.any():
                    over_dp = group_start.reshape(-1, self.dp, len(lv.bounds)).max(axis=1)
                    synced = np.repeat(over_dp, self.dp, axis=0)
                    group_start = np.where(lv.dp_sync, synced, group_start)
                end[:, lv.members] = group_start[:, lv.member_group] + own[:, lv.members]
        return end[:, : self.n_ops].max(axis=1).reshape(-1, self.dp).max(axis=1)

    def group_latest_start(self, start: np.ndarray) -> np.ndarray:
        """[replicas, n_ops]: for a synchronising op, the latest recorded start of its group (over
        the data-parallel ranks where it synchronises there); NaN for a local op."""
        out = np.full(start.shape, np.nan)
        members = np.flatnonzero(self.group >= 0)
        if not len(members):
            return out
        members = members[np.argsort(self.group[members], kind="stable")]
        bounds = np.flatnonzero(np.diff(self.group[members], prepend=-1))
        latest = np.maximum.reduceat(start[:, members], bounds, axis=1)  # [replicas, groups]
        n_groups = latest.shape[1]
        over_dp = np.repeat(latest.reshape(-1, self.dp, n_groups).max(axis=1), self.dp, axis=0)
        latest = np.where(self.group_dp_sync, over_dp, latest)
        out[:, members] = latest[:, self.group[members]]
        return out


def template_of(trace: pl.DataFrame) -> pl.DataFrame:
    """The operations of one step of one data-parallel rank, in recorded order per stage, with
    their op id: (op, stage, optype, seq_id, start_ts)."""
    first = trace.filter(
        (pl.col("step") == pl.col("step").min()) & (pl.col("dp_rank") == pl.col("dp_rank").min())
    )
    return (
        first.select("stage", "optype", "seq_id", "start_ts")
        .sort("stage", "start_ts", "seq_id", "optype")
        .with_row_index("op")
        .with_columns(pl.col("op").cast(pl.Int64))
    )


def build(trace: pl.DataFrame) -> Model:
    """The dependency model of ``trace`` (checked: every optype known, sends matched with
    receives, no cycle)."""
    unknown = sorted(set(trace["optype"].unique().to_list()) - set(KNOWN))
    if unknown:
        raise TraceError(f"operation types not modelled: {', '.join(unknown)}")
    if "mc" in trace.columns and trace["mc"].max() > 0:
        raise TraceError("interleaved (virtual) pipeline stages (mc > 0) are not modelled")
    template = template_of(trace)
    dp = int(trace["dp_rank"].max()) + 1
    pp = int(template["stage"].max()) + 1
    ops = _ops_by_stage(template)
    deps: list[list[int]] = [[] for _ in range(template.height)]
    groups: list[tuple[list[int], bool]] = []
    for stage in range(pp):
        _stage_deps(ops.get(stage, {}), deps, stage)
    groups += _p2p_groups(ops, pp)
    for name in DP_COLLECTIVES:
        groups += [([op], dp > 1) for stage in range(pp) for op in ops.get(stage, {}).get(name, [])]
    groups += _across_stages(ops, [0, pp - 1] if pp > 1 else [0], EMBEDDING, dp_sync=False)
    groups += _across_stages(ops, list(range(pp)), CLIP, dp_sync=dp > 1)
    group = np.full(template.height, -1, dtype=np.int64)
    for g, (members, _) in enumerate(groups):
        group[members] = g
    dp_sync = np.array([sync for _, sync in groups], dtype=bool)
    return Model(
        template=template.drop("start_ts"),
        steps=np.sort(trace["step"].unique().to_numpy()),
        dp=dp,
        pp=pp,
        deps=_padded(deps, list(range(template.height)), template.height),
        group=group,
        group_dp_sync=dp_sync,
        levels=_levels(deps, group, dp_sync, template.height),
    )


def _ops_by_stage(template: pl.DataFrame) -> dict[int, dict[str, list[int]]]:
    """stage -> optype -> op ids in seq_id order; '_order': every op of the stage in recorded
    order."""
    out: dict[int, dict[str, list[int]]] = {}
    for stage, optype, seq, op in (
        template.sort("stage", "optype", "seq_id")
        .select("stage", "optype", "seq_id", "op")
        .iter_rows()
    ):
        out.setdefault(stage, {}).setdefault(optype, []).append(op)
    for stage, ordered in template.group_by("stage", maintain_order=True).agg("op").iter_rows():
        out.setdefault(stage, {})["_order"] = ordered
    return out


def _chain(deps: list[list[int]], ops: list[int]) -> None:
    for before, after in pairwise(ops):
        deps[after].append(before)


def _of(ops: dict[str, list[int]], names) -> set[int]:
    """The op ids of the types ``names``."""
    return {op for n in names for op in ops.get(n, [])}


def _stage_deps(ops: dict[str, list[int]], deps: list[list[int]], stage: int) -> None:
    """The dependencies among one stage's operations (the module docstring's list)."""
    order = ops.get("_order", [])
    computes = [op for op in order if op in _of(ops, COMPUTE)]
    _chain(deps, computes)
    by_compute = {FORWARD: ops.get(FORWARD, []), BACKWARD: ops.get(BACKWARD, [])}
    for name, (compute, _, _) in P2P.items():
        stream = ops.get(name, [])
        if not stream:
            continue
        _chain(deps, stream)
        served = by_compute[compute]
        if len(stream) != len(served):
            raise TraceError(
                f"stage {stage}: {len(stream)} {name} for {len(served)} {compute} "
                "(unmatched point-to-point operations)"
            )
        for k, (comm, comp) in enumerate(zip(stream, served, strict=True)):
            if name.endswith("send"):
                deps[comm].append(comp)
                continue
            deps[comp].append(comm)
            if k > 0:
                deps[comm].append(served[k - 1])
            elif compute == BACKWARD and computes.index(comp) > 0:
                deps[comm].append(computes[computes.index(comp) - 1])
    dp_stream = [op for op in order if op in _of(ops, DP_COLLECTIVES)]
    _chain(deps, dp_stream)
    if by_compute[FORWARD]:
        deps[by_compute[FORWARD][0]].extend(ops.get(PARAMS_GATHER, []))
    if computes:
        tail = order[order.index(computes[-1]) + 1 :]
        p2p = _of(ops, P2P)
        post = [op for op in tail if op not in p2p and op not in ops.get(PARAMS_GATHER, [])]
        _chain(deps, [computes[-1], *post])


def _p2p_groups(ops: dict[int, dict[str, list[int]]], pp: int) -> list[tuple[list[int], bool]]:
    """Each send with the receive of its peer stage, k-th with k-th."""
    groups = []
    for stage in range(pp):
        for name in ("forward-send", "backward-send"):
            sends = ops.get(stage, {}).get(name, [])
            if not sends:
                continue
            _, offset, peer_name = P2P[name]
            peer = ops.get(stage + offset, {}).get(peer_name, [])
            if len(peer) != len(sends):
                raise TraceError(
                    f"stage {stage}: {len(sends)} {name} but stage {stage + offset} has "
                    f"{len(peer)} {peer_name}"
                )
            groups += [([s, r], False) for s, r in zip(sends, peer, strict=True)]
    return groups


def _across_stages(
    ops: dict[int, dict[str, list[int]]], stages: list[int], name: str, dp_sync: bool
) -> list[tuple[list[int], bool]]:
    """One group per ``seq_id`` of ``name`` over ``stages``."""
    per_stage = [ops.get(s, {}).get(name, []) for s in stages]
    n = max((len(p) for p in per_stage), default=0)
    return [([p[k] for p in per_stage if k < len(p)], dp_sync) for k in range(n)]


def _padded(deps: list[list[int]], ops: list[int], n_ops: int) -> np.ndarray:
    width = max([len(deps[op]) for op in ops] + [1])
    out = np.full((len(ops), width), n_ops, dtype=np.int64)
    for i, op in enumerate(ops):
        out[i, : len(deps[op])] = deps[op]
    return out


def _levels(
    deps: list[list[int]], group: np.ndarray, dp_sync: np.ndarray, n_ops: int
) -> tuple[Level, ...]:
    """Topological levels of the template (Kahn's algorithm over its operations, a synchronising
    group as one node: its members start before any of them ends)."""
    node = np.where(group >= 0, n_ops + group, np.arange(n_ops))  # op -> its node
    node_ops: dict[int, list[int]] = {}
    for op in range(n_ops):
        node_ops.setdefault(int(node[op]), []).append(op)
    preds = {
        n: {int(node[d]) for op in members for d in deps[op]} - {n}
        for n, members in node_ops.items()
    }
    level_of: dict[int, int] = {}
    pending = dict(preds)
    level = 0
    while pending:
        ready = [n for n, p in pending.items() if all(q in level_of for q in p)]
        if not ready:
            raise TraceError("the operations' recorded order has a dependency cycle")
        for n in ready:
            level_of[n] = level
            del pending[n]
        level += 1
    levels = []
    for lv in range(level):
        nodes = sorted(n for n, v in level_of.items() if v == lv)
        local = [node_ops[n][0] for n in nodes if n < n_ops]
        grouped = [n for n in nodes if n >= n_ops]
        members = [op for n in grouped for op in node_ops[n]]
        sizes = [len(node_ops[n]) for n in grouped]
        levels.append(
            Level(
                local=np.array(local, dtype=np.int64),
                local_deps=_padded(deps, local, n_ops),
                members=np.array(members, dtype=np.int64),
                member_deps=_padded(deps, members, n_ops),
                bounds=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
                if sizes
                else np.array([], dtype=np.int64),
                member_group=np.repeat(np.arange(len(grouped)), sizes).astype(np.int64),
                dp_sync=np.array([dp_sync[n - n_ops] for n in grouped], dtype=bool),
            )
        )
    return tuple(levels)
