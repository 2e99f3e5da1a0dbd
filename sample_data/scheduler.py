"""The simulated fleet's jobs on a scheduler model: gang training chains on Slurm or Kubernetes
(a job requeued from its last checkpoint until its work is done, cut short by the faults that
hit its nodes) and small Slurm jobs placed on free nodes, with their attempts and outcomes."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sample_data.model import TRAIN_USER
from sample_data.model import USERS
from sample_data.model import Attempt
from sample_data.model import Fleet


def _free_at(f: Fleet, n: int, t: float) -> float:
    """Earliest time >= t at which node n is not inside an unavailable interval."""
    moved = True
    while moved:
        moved = False
        for a, b, _, _ in f.unavailable[n]:
            if a <= t < b:
                t, moved = b, True
    return t


def _first_interrupt(f: Fleet, nodes: list[int], s: float, e: float) -> tuple:
    """First fatal fault or maintenance start on any of `nodes` in (s, e)."""
    best = (math.inf, None, None, None)
    for n in nodes:
        for a, _, kind, ref in f.unavailable[n]:
            if s < a < e and a < best[0]:
                best = (a, kind, ref, n)
    return best


def _gang_size(rng: np.random.Generator, pool_size: int) -> int:
    """Nodes of a training job: half to 85% of its pool, leaving one node spare."""
    if pool_size == 1:
        return 1
    low = math.ceil(0.5 * pool_size)
    need = int(rng.integers(low, max(low, int(0.85 * pool_size)) + 1))
    return min(need, pool_size - 1)


def _when_enough_free(
    f: Fleet, rng: np.random.Generator, pool: list[int], need: int, s: float
) -> tuple[float, list[int]]:
    """The first time from ``s`` at which ``need`` nodes of the pool are up, and the nodes up
    then; each wait ends a little after the next outage ends."""
    while True:
        avail = [n for n in pool if _free_at(f, n, s) == s]
        if len(avail) >= need:
            return s, avail
        ends = [b for n in pool for a, b, _, _ in f.unavailable[n] if a <= s < b]
        s = min(ends) + float(rng.uniform(30.0, 300.0))


def _end_gang_attempt(
    f: Fleet, rng: np.random.Generator, a: Attempt, e_done: float, t_sw: float
) -> None:
    """How a training attempt ends: killed by the first fault or requeued by the first drain
    on its nodes, else failed by the workload at ``t_sw``, else completed at ``e_done`` inside
    the window, else still running (``end`` stays None)."""
    H = f.horizon
    ti, kind, ref, _ = _first_interrupt(f, a.nodes, a.start, min(e_done, t_sw, H))
    if ti < math.inf and kind == "fault":
        a.end = ti + float(rng.uniform(2.0, 30.0))
        a.state, a.exit_code, a.cause = "NODE_FAIL", "0:0", ("fault", ref)
    elif ti < math.inf:
        a.end, a.state, a.cause = ti + float(rng.uniform(1.0, 20.0)), "REQUEUED", ("maint", ref)
        a.reason = "maintenance"
    elif t_sw < min(e_done, H):
        a.end, a.state, a.exit_code = t_sw, "FAILED", "1:0"
        a.reason = "nccl_watchdog_timeout" if rng.uniform() < 0.2 else "application_error"
        a.cause = ("workload",)
    elif e_done < H:
        a.end, a.state = e_done, "COMPLETED"


def _chain_job(
    f: Fleet,
    rng: np.random.Generator,
    pool: list[int],
    job: tuple[str, int, str, str],
    submit: float,
    busy_until: float,
    software_per_node_hour: float,
) -> tuple[list[Attempt], float]:
    """One training job (``job``: scheduler, key, name, partition) from its submission: its
    attempts, each restoring from the last checkpoint, until it completes or the window ends;
    and when it last ended (the horizon if it did not)."""
    scheduler, key, name, partition = job
    H, G = f.horizon, f.gpus_per_node
    need = _gang_size(rng, len(pool))
    work = float(rng.uniform(48.0, 240.0)) * 3600.0
    ckpt = int(rng.choice([1800, 2400, 3000, 3600]))
    out: list[Attempt] = []
    saved, attempt, t_sub = 0.0, 0, submit
    while True:
        # the pool is exclusive to one chain job at a time: wait for the previous one
        delay = float(rng.uniform(60.0, 900.0)) if attempt else float(rng.uniform(10.0, 120.0))
        s, avail = _when_enough_free(f, rng, pool, need, max(t_sub, busy_until) + delay)
        if s >= H:
            return out, H
        overhead = float(rng.uniform(300.0, 900.0)) if attempt else float(rng.uniform(120, 300))
        e_done = s + overhead + (work - saved)
        sw_rate = software_per_node_hour * f.fault_scale * need / 3600.0
        t_sw = s + float(rng.exponential(1.0 / sw_rate)) if sw_rate > 0 else math.inf
        a = Attempt(
            scheduler,
            key,
            attempt,
            name,
            TRAIN_USER,
            partition,
            t_sub,
            s,
            None,
            "RUNNING",
            "0:0",
            avail[:need],
            [list(range(G))] * need,
            14 * 24 * 60,
            ckpt_s=ckpt,
            overhead_s=overhead,
        )
        _end_gang_attempt(f, rng, a, e_done, t_sw)
        out.append(a)
        if a.end is None:
            return out, H
        if a.state == "COMPLETED":
            return out, a.end
        productive = max(0.0, a.end - s - overhead)
        saved = min(work, saved + math.floor(productive / ckpt) * ckpt)
        attempt += 1
        t_sub = a.end


def gang_chain(
    f: Fleet,
    rng: np.random.Generator,
    pool: list[int],
    scheduler: str,
    first_key: int,
    name_fmt: str,
    partition: str,
    software_per_node_hour: float,
) -> list[Attempt]:
    """Back-to-back multi-node training jobs that restart from their last checkpoint; the next
    job is submitted up to 6 h before the previous one ends."""
    H = f.horizon
    out: list[Attempt] = []
    submit = float(rng.uniform(0, 2 * 3600.0))
    busy_until = 0.0
    j = 0
    while submit < H:
        job = (scheduler, first_key + j, name_fmt.format(j + 1), partition)
        atts, last_end = _chain_job(f, rng, pool, job, submit, busy_until, software_per_node_hour)
        out += atts
        j += 1
        if last_end >= H:
            break
        busy_until = last_end
        submit = max(submit + 60.0, last_end - float(rng.uniform(0, 6 * 3600.0)))
    return out


SMALL_JOB_NAMES = (
    "train.sh",
    "eval",
    "finetune",
    "bench_nccl",
    "preprocess",
    "sweep",
    "jupyter",
    "infer",
)


@dataclass
class _SmallJobDraws:
    """Every random draw of the small jobs, made in bulk up front: per submission (time, array
    tasks, GPUs, time limit in hours, user, name) and per task (wanted run time, outcome draw,
    share of its run it gets through, start jitter per candidate node, kill delay, exit code)."""

    sub_t: np.ndarray
    n_tasks: np.ndarray
    sub_g: np.ndarray
    sub_limit: np.ndarray
    sub_user: np.ndarray
    sub_name: np.ndarray
    want: np.ndarray
    u_out: np.ndarray
    frac: np.ndarray
    jit: np.ndarray
    kill_delay: np.ndarray
    exit_fail: np.ndarray


def _draw_small_jobs(f: Fleet, rng: np.random.Generator, pool: list[int]) -> _SmallJobDraws:
    """Submissions arrive as a Poisson process that keeps the pool's GPUs about 40% busy."""
    G, H = f.gpus_per_node, f.horizon
    gp_choices = np.array([g for g in (1, 2, 4, 8) if g <= G] or [G])
    gp_p = np.array([0.4, 0.2, 0.2, 0.2][: len(gp_choices)])
    gp_p = gp_p / gp_p.sum()
    mean_g = float((gp_choices * gp_p).sum())
    mean_dur = 8.0 * 3600.0
    lam = 0.4 * len(pool) * G / (mean_g * mean_dur)
    n_sub = int(rng.poisson(lam * H * 0.8))
    sub_t = np.sort(rng.uniform(0, H, n_sub))
    n_tasks = np.where(rng.uniform(size=n_sub) < 0.12, rng.integers(3, 9, n_sub), 1)
    sub_g = rng.choice(gp_choices, size=n_sub, p=gp_p)
    sub_limit = rng.choice([2, 8, 24, 48], size=n_sub, p=[0.2, 0.3, 0.35, 0.15])
    sub_user = rng.integers(0, len(USERS), n_sub)
    sub_name = rng.integers(0, len(SMALL_JOB_NAMES), n_sub)
    T = int(n_tasks.sum())
    sub_of = np.repeat(np.arange(n_sub), n_tasks)
    want = np.clip(rng.lognormal(np.log(0.4 * sub_limit[sub_of] * 3600.0), 0.8), 120.0, 30 * 3600.0)
    return _SmallJobDraws(
        sub_t,
        n_tasks,
        sub_g,
        sub_limit,
        sub_user,
        sub_name,
        want,
        u_out=rng.uniform(size=T),
        frac=rng.uniform(0.01, 1.0, T),
        jit=rng.uniform(1.0, 30.0, (T, 4)),
        kill_delay=rng.uniform(2.0, 30.0, T),
        exit_fail=rng.choice([1, 1, 1, 2, 134], size=T),
    )


def _place_task(
    f: Fleet, pool: list[int], kth: np.ndarray, t_sub: float, g: int, limit_s: float, jit
) -> tuple[float, int]:
    """(start, pool index) of a task needing ``g`` GPUs: of the (up to) four nodes whose g-th
    GPU frees first, the one it can start on first, never into an outage or a maintenance
    window its time limit would reach (reservation semantics)."""
    cand = np.maximum(kth[:, g - 1], t_sub)
    k = min(4, len(pool))
    near = np.argpartition(cand, k - 1)[:k] if k < len(pool) else np.arange(len(pool))
    near = sorted(near.tolist(), key=lambda c: (cand[c], c))
    best = None
    for r, c in enumerate(near):
        st = float(cand[c]) + float(jit[r])
        moved = True
        while moved:
            moved = False
            for a, b, kind, _ in f.unavailable[pool[c]]:
                if (a <= st < b) or (kind == "maint" and st < a < st + limit_s):
                    st, moved = b + 60.0, True
        if best is None or st < best[0]:
            best = (st, c)
    return best


def _task_outcome(
    u: float, want: float, limit_s: float, frac: float, exit_fail: int, user: tuple
) -> tuple[str, str, float, str]:
    """(state, exit code, run time, reason) of a task by its outcome draw ``u``: 74% complete
    (or time out), then failures, OOM kills, user cancels and preemptions."""
    cap = min(want, limit_s)
    if u < 0.74:
        if want > limit_s:
            return "TIMEOUT", "0:0", limit_s, "timeout"
        return "COMPLETED", "0:0", want, ""
    if u < 0.84:
        return "FAILED", f"{exit_fail}:0", cap * frac, "application_error"
    if u < 0.88:
        return "OUT_OF_MEMORY", "0:125", cap * frac * 0.5, "out_of_memory"
    if u < 0.95:
        return f"CANCELLED by {user[1]}", "0:15", cap * frac, "user_cancel"
    return "PREEMPTED", "0:0", cap * frac, "preempted"


def small_jobs(
    f: Fleet, rng: np.random.Generator, pool: list[int], first_key: int
) -> list[Attempt]:
    """Single-node jobs on the batch/debug nodes: a GPU-lane allocator, workload outcomes.

    Random draws are made in bulk up front; the loop only runs the allocator, which keeps
    each node's GPU lanes (time each GPU becomes free) so no node is ever over-committed.
    """
    H, G = f.horizon, f.gpus_per_node
    if not pool:
        return []
    d = _draw_small_jobs(f, rng, pool)
    lanes = np.zeros((len(pool), G))
    kth = np.zeros((len(pool), G))  # each row of lanes, sorted
    out: list[Attempt] = []
    ti_ = -1
    for j in range(d.sub_t.size):
        t_sub, g, limit_h = float(d.sub_t[j]), int(d.sub_g[j]), int(d.sub_limit[j])
        limit_s = limit_h * 3600.0
        partition = "debug" if limit_h == 2 and g <= 2 else "batch"
        user, jname = USERS[int(d.sub_user[j])], SMALL_JOB_NAMES[int(d.sub_name[j])]
        nt = int(d.n_tasks[j])
        for task in range(nt):
            ti_ += 1
            st, c = _place_task(f, pool, kth, t_sub, g, limit_s, d.jit[ti_])
            if st >= H:
                continue
            n = pool[c]
            state, ec, dur, reason = _task_outcome(
                float(d.u_out[ti_]),
                float(d.want[ti_]),
                limit_s,
                float(d.frac[ti_]),
                int(d.exit_fail[ti_]),
                user,
            )
            e = st + max(dur, 30.0)
            t_int, kind, ref, _ = _first_interrupt(f, [n], st, e)
            cause: tuple = ("workload",) if state != "COMPLETED" else ()
            if t_int < math.inf and kind == "fault":
                e = t_int + float(d.kill_delay[ti_])
                state, ec, reason, cause = "NODE_FAIL", "0:0", "", ("fault", ref)
            end: float | None = e
            if e >= H:
                end, state, ec, reason, cause = None, "RUNNING", "0:0", "", ()
            chosen = sorted(np.argsort(lanes[c], kind="stable")[:g].tolist())
            lanes[c, chosen] = e
            kth[c] = np.sort(lanes[c])
            out.append(
                Attempt(
                    "slurm",
                    first_key + j,
                    0,
                    jname,
                    user,
                    partition,
                    t_sub,
                    st,
                    end,
                    state,
                    ec,
                    [n],
                    [chosen],
                    limit_h * 60,
                    reason=reason,
                    cause=cause,
                    array_task=task if nt > 1 else -1,
                )
            )
    return out
