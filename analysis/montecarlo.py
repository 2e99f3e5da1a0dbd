"""Monte Carlo simulation of one training job under component failures (vectorized NumPy).

Why a simulation next to the analytic model: Weibull lifetimes (infant mortality / wear-out),
spare-pool exhaustion, restart-time spread and asynchronous checkpoint windows have no closed
form. Where the analytic assumptions hold (exponential lifetimes, fixed costs, no waiting for
spares) the simulation converges to Daly's expected wall time (tested within 1%).

Failure stream, per replica and class c with n_c units (``projection.UNIT_COUNTS``):
- every unit's first failure within the horizon H is drawn exactly: the number of units that
  fail is Binomial(n_c, F0(H)) and their times come from F0 truncated to [0, H], where F0 is
  the residual-life law given the unit's age at job start: ``"stationary"`` (equilibrium
  renewal: F0(x) = P(1/k, (x/λ)^k), the default), ``"new"`` (age 0) or a given age in hours;
- a failed unit is replaced by a new one (age 0) at once, whose own Weibull lifetime starts
  there (renewal chains are drawn generation by generation, vectorized over all events).
  Only the failed unit renews; the spare node's other units are taken as statistically like
  the ones they replace.
Job dynamics: compute in segments of τ hours, each followed by a checkpoint whose blocking
part δ_b stalls training; the checkpoint is durable δ − δ_b after the stall ends (async
write). A failure loses everything since the last durable checkpoint, then the job waits for
a spare node (hardware classes only; K hot spares, each failed node returns to the pool
after its repair time, or the job waits for the earliest return) and restarts (fixed or
lognormal time; with probability ``requeue_prob`` a full requeue adds a queue wait). A failure
during a restart or a wait starts the restart again. The loop runs over "next failure"
steps, each vectorized across replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.special import gamma as gamma_fn
from scipy.special import gammainc, gammaincinv

from analysis.assumptions import CKPT_COST_S, GPUS_PER_NODE, RESTART_S
from analysis.projection import ClassRates, unit_counts, useful_fraction
from analysis.taxonomy import NON_HARDWARE, WORKLOAD


@dataclass
class JobConfig:
    """One job and its fault-tolerance knobs. Durations in hours unless suffixed ``_s``."""

    n_gpus: int
    gpus_per_node: int = GPUS_PER_NODE
    work_hours: float | None = None  # fixed useful work to finish ...
    wall_hours: float | None = None  # ... or a fixed wall-clock window
    interval_hours: float = 1.0
    ckpt_cost_s: float = CKPT_COST_S
    ckpt_blocking_s: float | None = None  # None = synchronous (the whole cost blocks)
    restart_s: float = RESTART_S  # median in-job restart time
    restart_sigma: float = 0.0  # lognormal log-sd of the restart time (0 = fixed)
    requeue_prob: float = 0.0  # share of failures that need a full requeue
    queue_wait_s: float = 0.0  # median queue wait of a requeue
    queue_sigma: float = 0.0
    spares: int | None = None  # hot spare nodes; None = unlimited (never wait)
    repair_hours: float = 24.0  # median time until a failed node is back in the pool
    repair_sigma: float = 0.0
    initial_age: str | float = "stationary"
    counts: dict[str, tuple[str, int]] | None = None  # unit-count overrides


@dataclass
class MCResult:
    goodput: np.ndarray  # per replica: useful work / wall time
    wall_hours: np.ndarray
    work_hours: np.ndarray
    failures: np.ndarray
    wait_hours: np.ndarray  # wall time added by waiting for a spare node
    finished: np.ndarray  # False when a fixed-work replica hit the horizon cap
    notes: dict = field(default_factory=dict)

    def summary(self) -> dict:
        g = self.goodput
        se = float(g.std(ddof=1) / math.sqrt(g.size)) if g.size > 1 else 0.0
        lo, hi = np.percentile(g, [2.5, 97.5])
        return {
            "mean": float(g.mean()),
            "se": se,
            "p2_5": float(lo),
            "p97_5": float(hi),
            "mean_failures": float(self.failures.mean()),
            "mean_wait_hours": float(self.wait_hours.mean()),
            "replicas": int(g.size),
            "unfinished": int((~self.finished).sum()),
        }


def _lognormal(rng, median, sigma, size):
    if sigma <= 0:
        return np.full(size, float(median))
    return median * np.exp(sigma * rng.standard_normal(size))


def failure_events(
    rates: np.ndarray,
    shapes: np.ndarray,
    units: np.ndarray,
    hardware: np.ndarray,
    horizon: np.ndarray,
    rng: np.random.Generator,
    initial_age="stationary",
):
    """Padded (replicas, E+1) failure times (inf-padded, sorted) and hardware flags.

    ``rates`` (R, C) per unit-hour long-run rates; Weibull scale λ = 1/(rate·Γ(1+1/k)).
    """
    n_rep, n_cls = rates.shape
    k = np.broadcast_to(shapes, (n_rep, n_cls))
    with np.errstate(divide="ignore"):
        lam = np.where(
            rates > 0, 1.0 / (np.maximum(rates, 1e-300) * gamma_fn(1.0 + 1.0 / k)), np.inf
        )
    h = np.broadcast_to(horizon[:, None], (n_rep, n_cls))
    z = (h / lam) ** k
    if initial_age == "stationary":
        p = gammainc(1.0 / k, z)
    elif initial_age == "new":
        p = -np.expm1(-z)
    else:
        a = float(initial_age)
        za = (a / lam) ** k
        p = -np.expm1(za - ((a + h) / lam) ** k)
    p = np.where(np.isfinite(lam), p, 0.0)
    n_first = rng.binomial(
        np.broadcast_to(units.astype(np.int64), (n_rep, n_cls)), np.clip(p, 0, 1)
    )
    flat = n_first.ravel()
    rep = np.repeat(np.repeat(np.arange(n_rep), n_cls), flat)
    cls = np.repeat(np.tile(np.arange(n_cls), n_rep), flat)
    kk, ll = k[rep, cls], lam[rep, cls]
    u = rng.random(rep.size) * p[rep, cls]
    if initial_age == "stationary":
        t = ll * gammaincinv(1.0 / kk, u) ** (1.0 / kk)
    elif initial_age == "new":
        t = ll * (-np.log1p(-u)) ** (1.0 / kk)
    else:
        t = ll * ((a / ll) ** kk - np.log1p(-u)) ** (1.0 / kk) - a
    times, reps, clss = [t], [rep], [cls]
    cur_t, cur_r, cur_c = t, rep, cls
    while cur_t.size:  # renewal chains of replacement units (age 0 at the failure)
        nxt = cur_t + lam[cur_r, cur_c] * (-np.log(rng.random(cur_t.size))) ** (
            1.0 / k[cur_r, cur_c]
        )
        keep = nxt < horizon[cur_r]
        cur_t, cur_r, cur_c = nxt[keep], cur_r[keep], cur_c[keep]
        times.append(cur_t)
        reps.append(cur_r)
        clss.append(cur_c)
    t, rep, cls = np.concatenate(times), np.concatenate(reps), np.concatenate(clss)
    order = np.lexsort((t, rep))
    t, rep, cls = t[order], rep[order], cls[order]
    per = np.bincount(rep, minlength=n_rep)
    width = int(per.max()) + 1 if per.size else 1
    start = np.concatenate([[0], np.cumsum(per)[:-1]])
    pos = np.arange(t.size) - start[rep]
    fail = np.full((n_rep, width), np.inf)
    hw = np.zeros((n_rep, width), dtype=bool)
    fail[rep, pos] = t
    hw[rep, pos] = hardware[cls]
    return fail, hw


def simulate(
    rates: ClassRates,
    cfg: JobConfig,
    replicas: int = 1000,
    seed: int = 0,
    rate_draws: np.ndarray | None = None,
) -> MCResult:
    """Simulate ``replicas`` independent runs of the job. ``rate_draws`` (replicas, classes)
    gives each replica its own rates (fit uncertainty); else every replica uses the point."""
    if (cfg.work_hours is None) == (cfg.wall_hours is None):
        raise ValueError("give exactly one of work_hours or wall_hours")
    rng = np.random.default_rng(seed)
    r_mat = np.broadcast_to(
        rates.rate if rate_draws is None else rate_draws, (replicas, len(rates.classes))
    )
    counts = {**(rates.counts or {}), **(cfg.counts or {})}
    units = unit_counts(rates.classes, cfg.n_gpus, cfg.gpus_per_node, counts)[:, 0]
    hardware = np.array([c not in NON_HARDWARE | {WORKLOAD} for c in rates.classes])
    tau = float(cfg.interval_hours)
    d_full = cfg.ckpt_cost_s / 3600.0
    d_blk = (
        d_full
        if cfg.ckpt_blocking_s is None
        else min(cfg.ckpt_blocking_s, cfg.ckpt_cost_s) / 3600.0
    )
    d_async = d_full - d_blk  # durable this long after the stall ends

    if cfg.wall_hours is not None:
        horizon = np.full(replicas, float(cfg.wall_hours))
        return _run(
            rng,
            r_mat,
            rates,
            units,
            hardware,
            horizon,
            cfg,
            tau,
            d_blk,
            d_async,
            None,
            cfg.wall_hours,
        )
    lam_job = r_mat @ units
    g0 = useful_fraction(tau, d_blk, cfg.restart_s / 3600.0, 1.0 / np.maximum(lam_job, 1e-300))
    horizon = (
        cfg.work_hours / np.clip(g0, 0.02, 1.0) * 1.5
        + 10 * (cfg.restart_s + cfg.queue_wait_s) / 3600.0
    )
    if cfg.spares is not None:
        horizon = horizon + 10 * cfg.repair_hours
    result = _run(
        rng, r_mat, rates, units, hardware, horizon, cfg, tau, d_blk, d_async, cfg.work_hours, None
    )
    for _ in range(6):  # replicas that outran the horizon are redrawn with a longer one
        late = ~result.finished
        if not late.any():
            break
        horizon = horizon.copy()
        horizon[late] *= 2.0
        redo = _run(
            rng,
            r_mat[late],
            rates,
            units,
            hardware,
            horizon[late],
            cfg,
            tau,
            d_blk,
            d_async,
            cfg.work_hours,
            None,
        )
        for name in ("goodput", "wall_hours", "work_hours", "failures", "wait_hours", "finished"):
            getattr(result, name)[late] = getattr(redo, name)
    return result


def _run(
    rng, r_mat, rates, units, hardware, horizon, cfg, tau, d_blk, d_async, work, deadline
) -> MCResult:
    n = r_mat.shape[0]
    fail, hw = failure_events(
        np.ascontiguousarray(r_mat), rates.shapes(), units, hardware, horizon, rng, cfg.initial_age
    )
    ready = np.zeros(n)  # when computing (re)starts
    rem = np.full(n, np.inf if work is None else float(work))  # work still to do
    done_work = np.zeros(n)
    idx = np.zeros(n, dtype=np.int64)
    end = np.full(n, np.nan)
    active = np.ones(n, dtype=bool)
    finished = np.ones(n, dtype=bool)
    nfail = np.zeros(n, dtype=np.int64)
    waited = np.zeros(n)
    k_sp = cfg.spares
    slots = np.zeros((n, k_sp)) if k_sp else None  # time each spare slot is (again) available
    seg = tau + d_blk
    rows = np.arange(n)
    while active.any():
        a = rows[active]
        f = fail[a, idx[a]]
        rd = ready[a]
        # finish time if no further failure
        if work is not None:
            need = rem[a]
            t_fin = rd + need + np.ceil(need / tau - 1e-12) * d_blk
        else:
            t_fin = np.full(a.size, np.inf)
        stop = np.minimum(horizon[a], np.inf if deadline is None else deadline)
        ev = np.minimum(f, stop)
        # 1) job completes before the next failure / the horizon
        fin = (t_fin <= ev) & (rd <= ev)
        # 2) window ends (fixed wall) or horizon cap before failure and completion
        cut = ~fin & (stop <= f) & (stop < t_fin)
        if fin.any():
            i = a[fin]
            done_work[i] += rem[i]
            rem[i] = 0.0
            end[i] = t_fin[fin]
            active[i] = False
        if cut.any():
            i = a[cut]
            el = np.maximum(stop[cut] - ready[i], 0.0)
            full = np.floor(el / seg)
            part = np.minimum(el - full * seg, tau)
            done_work[i] += np.minimum(full * tau + part, rem[i])
            end[i] = stop[cut]
            active[i] = False
            if deadline is None:
                finished[i] = False
        # 3) a failure
        fl = ~fin & ~cut
        if not fl.any():
            continue
        i, ff = a[fl], f[fl]
        computing = ff >= ready[i]
        el = np.maximum(ff - ready[i] - d_async, 0.0)
        durable = np.where(computing, np.floor(el / seg), 0.0)
        if work is not None:
            durable = np.minimum(durable, np.maximum(np.ceil(rem[i] / tau - 1e-12) - 1, 0))
        gained = np.minimum(durable * tau, rem[i])
        done_work[i] += gained
        rem[i] -= gained
        wait = np.zeros(i.size)
        is_hw = hw[i, idx[i]]
        if k_sp is None:
            pass
        elif k_sp == 0:
            wait[is_hw] = _lognormal(rng, cfg.repair_hours, cfg.repair_sigma, int(is_hw.sum()))
        elif is_hw.any():
            h = i[is_hw]
            j = np.argmin(slots[h], axis=1)
            avail = slots[h, j]
            wait[is_hw] = np.maximum(avail - ff[is_hw], 0.0)
            slots[h, j] = ff[is_hw] + _lognormal(rng, cfg.repair_hours, cfg.repair_sigma, h.size)
        restart = _lognormal(rng, cfg.restart_s / 3600.0, cfg.restart_sigma, i.size)
        if cfg.requeue_prob > 0:
            rq = rng.random(i.size) < cfg.requeue_prob
            restart[rq] += _lognormal(
                rng, cfg.queue_wait_s / 3600.0, cfg.queue_sigma, int(rq.sum())
            )
        before = np.maximum(ready[i], ff + restart)
        ready[i] = np.maximum(ready[i], ff + wait + restart)
        waited[i] += ready[i] - before  # wall time added by waiting (overlaps counted once)
        nfail[i] += 1
        idx[i] += 1
    wall = end
    good = np.where(wall > 0, done_work / np.where(wall > 0, wall, 1.0), 0.0)
    return MCResult(good, wall, done_work, nfail, waited, finished)
