"""Monte Carlo simulation of one training job under component failures (vectorized NumPy).

Why a simulation next to the analytic model: Weibull lifetimes (infant mortality / wear-out),
spare-pool exhaustion, restart-time spread and asynchronous checkpoint windows have no closed
form. Where the analytic assumptions hold (exponential lifetimes, fixed costs, no waiting for
spares) the simulation converges to Daly's expected wall time (tested within 1%). Simulated at
the plug-in rates (``rate_draws`` None) it answers the analytic projection's question; with
one rate draw per replica it gives the band (``analysis.scenario.evaluate`` runs both).

Failure stream, per replica and class c with n_c units (``class_rates.UNIT_COUNTS``), from the
class's lifetime law (``ClassRates.laws``: the selected fitted model, any registered one,
or the mean-1 exponential at the class's rate; a replica's rate draw speeds the law up or
slows it down):
- every unit's first failure within the horizon H is drawn exactly: the number of units that
  fail is Binomial(n_c, F0(H)) and their times come from F0 truncated to [0, H], where F0 is
  the residual-life law given the unit's age at job start (``analysis.fleet_age``):
  ``"stationary"`` (equilibrium age, F0(x) = int_0^x S / mean, the default), ``"new"`` (age 0),
  a given age in hours, or the observed ages of the class's units (age groups);
- a failed unit is replaced by a new one (age 0) at once, whose own lifetime starts there
  (renewal chains are drawn generation by generation, vectorized over all events). This is
  the renewal process whose expected count ``fleet_age.expected_failures`` gives the analytic
  projection. Only the failed unit renews; the spare node's other units are taken as
  statistically like the ones they replace.
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
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace

import numpy as np

from analysis.class_rates import ClassRates
from analysis.fleet_age import AgeGroups
from analysis.fleet_age import start_groups
from analysis.fleet_age import stationary_residual_cdf
from analysis.job import Job
from analysis.lifetime_models.exponential import Exponential
from analysis.projection import daly_interval
from analysis.projection import unit_counts
from analysis.projection import useful_fraction
from analysis.slowness.at_scale import REPLACED
from analysis.taxonomy import NON_HARDWARE
from analysis.taxonomy import WORKLOAD


@dataclass
class MCResult:
    goodput: np.ndarray  # per replica: useful work / wall time
    wall_hours: np.ndarray
    work_hours: np.ndarray
    failures: np.ndarray  # met while the job could still compute in its window
    wait_hours: np.ndarray  # wall time added by waiting for a spare node
    finished: np.ndarray  # False when a fixed-work replica hit the horizon cap
    dry_at: np.ndarray  # when the spare pool first had no node ready (NaN: it never ran out)
    notes: dict = field(default_factory=dict)
    # with a fail-slow process: each job's goodput before the time it ran slow, and the share
    # of its window lost running slow (goodput = goodput_fail_stop x (1 - slow_lost))
    goodput_fail_stop: np.ndarray | None = None
    slow_lost: np.ndarray | None = None

    def summary(self) -> dict:
        g = self.goodput
        se = float(g.std(ddof=1) / math.sqrt(g.size)) if g.size > 1 else 0.0
        lo, hi = np.percentile(g, [2.5, 97.5])
        dry = np.isfinite(self.dry_at)
        with np.errstate(divide="ignore", invalid="ignore"):
            waiting = np.where(self.wall_hours > 0, self.wait_hours / self.wall_hours, 0.0)
        return {
            "mean": float(g.mean()),
            "se": se,
            "p2_5": float(lo),
            "p97_5": float(hi),
            "mean_failures": float(self.failures.mean()),
            "mean_wait_hours": float(self.wait_hours.mean()),
            "replicas": int(g.size),
            "unfinished": int((~self.finished).sum()),
            # the spare pool: the share of jobs that found it empty, when (median over those),
            # and the share of wall time spent waiting for a repaired node
            "spares_ran_out": float(dry.mean()),
            "spares_ran_out_hours": float(np.median(self.dry_at[dry])) if dry.any() else None,
            "wait_share": float(np.mean(np.minimum(waiting, 1.0))),
            "goodput_fail_stop": None
            if self.goodput_fail_stop is None
            else float(self.goodput_fail_stop.mean()),
            "slow_lost_share": None if self.slow_lost is None else float(self.slow_lost.mean()),
        }


def _lognormal(rng, median, sigma, size):
    if sigma <= 0:
        return np.full(size, float(median))
    return median * np.exp(sigma * rng.standard_normal(size))


def _split(units: int, weights: np.ndarray) -> np.ndarray:
    """``units`` spread over groups in proportion to ``weights`` (largest remainder)."""
    raw = units * np.asarray(weights, float) / np.sum(weights)
    out = np.floor(raw).astype(np.int64)
    out[np.argsort(out - raw)[: units - int(out.sum())]] += 1
    return out


def by_owner_and_time(times: list, owners: list, classes: list):
    """Failure times, their owners (replica or node) and classes, each a list of arrays, as three
    arrays sorted by owner and then time."""
    if not times:
        return np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64)
    t, owner, cls = np.concatenate(times), np.concatenate(owners), np.concatenate(classes)
    # one stable sort on owner x span + time, the order of lexsort((t, owner)) at a third of
    # its cost (times are >= 0 and below the span; two times closer than the key's precision,
    # ~1e-9 of the span, keep the order they were drawn in)
    span = float(t.max()) + 1.0 if t.size else 1.0
    order = np.argsort(owner * span + t, kind="stable")
    return t[order], owner[order], cls[order]


def failure_events(
    speed: np.ndarray,
    laws: list,
    starts,
    units: np.ndarray,
    hardware: np.ndarray,
    horizon: np.ndarray,
    rng: np.random.Generator,
):
    """Padded (replicas, E+1) failure times (inf-padded, sorted) and hardware flags.

    Class c's lifetimes in hours are ``laws[c]`` lifetimes divided by ``speed[:, c]`` (per
    replica: its rate draw / the law's own rate), so law time = hours x speed. ``starts[c]``:
    'stationary' (residual life of an equilibrium-age unit, CDF ``fleet_age.
    stationary_residual_cdf``), 'new' or ``fleet_age.AgeGroups`` (the class's units spread
    over the ages in proportion to the weights; residual life of a unit of age a:
    H^-1(H(a) + E) - a). The number of first failures is Binomial(units, P(first < H)); the
    replacement chains sample the law from age 0.
    """
    n_rep, n_cls = speed.shape
    times, reps, clss = [], [], []
    for c in range(n_cls):
        law, f = laws[c], speed[:, c]
        hm = horizon * f  # the horizon in law time, per replica
        firsts = []  # (times in hours, replica)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if isinstance(starts[c], str) and starts[c] == "stationary":
                x, g = stationary_residual_cdf(law, float(hm.max()) if hm.size else 0.0)
                p = np.interp(hm, x, g) if hm.max() > 0 else np.zeros(n_rep)
                n = rng.binomial(int(units[c]), np.clip(p, 0.0, 1.0))
                rep = np.repeat(np.arange(n_rep), n)
                t = np.interp(rng.random(rep.size) * p[rep], g, x) / f[rep]
                firsts.append((t, rep))
            else:
                groups = start_groups(starts[c])
                for a, k in zip(groups.ages, _split(int(units[c]), groups.weights), strict=True):
                    am = a * f
                    h0 = law.cumulative_hazard(am)
                    p = np.where(f > 0, -np.expm1(h0 - law.cumulative_hazard(am + hm)), 0.0)
                    n = rng.binomial(int(k), np.clip(np.nan_to_num(p), 0.0, 1.0))
                    rep = np.repeat(np.arange(n_rep), n)
                    e = -np.log1p(-rng.random(rep.size) * p[rep])
                    life = law.inverse_cumulative_hazard(h0[rep] + e) - am[rep]
                    firsts.append((np.maximum(life, 0.0) / f[rep], rep))
            cur_t = np.concatenate([t for t, _ in firsts])
            cur_r = np.concatenate([r for _, r in firsts])
            while cur_t.size:  # renewal chains of replacement units (age 0 at the failure)
                times.append(cur_t)
                reps.append(cur_r)
                clss.append(np.full(cur_t.size, c))
                nxt = cur_t + law.sample(cur_t.size, rng) / f[cur_r]
                keep = nxt < horizon[cur_r]
                cur_t, cur_r = nxt[keep], cur_r[keep]
    t, rep, cls = by_owner_and_time(times, reps, clss)
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
    job: Job,
    replicas: int = 1000,
    seed: int = 0,
    rate_draws: np.ndarray | None = None,
) -> MCResult:
    """Simulate ``replicas`` independent runs of the job: over its ``wall_hours`` window, or
    until it has done ``work_hours`` of useful work when that is given. ``rate_draws``
    (replicas, classes) gives each replica its own rates (fit uncertainty); else every replica
    uses the point. The checkpoint interval is ``job.interval_hours``, or Daly's at the point.
    With a fail-slow process (``rates.fail_slow``) each job also meets slow GPUs: those still
    slow at ``job.slow_detect_hours`` are replaced (one more class of interruptions, Poisson at
    n_gpus x rate x S(T)), and the share of its window during which any GPU is slow
    (``at_scale.slow_fraction``) runs ``factor`` times slower; with ``rate_draws``, each
    replica's fail-slow rate is drawn from its CI as well (``FailSlow.at_rate_draws``)."""
    rng = np.random.default_rng(seed)
    fs = rates.fail_slow
    if fs is not None and rate_draws is not None:  # a rate per replica from its CI, if any
        drawn = fs.at_rate_draws(replicas, seed)
        fs = fs if drawn is None else replace(drawn, rate=drawn.rate[:, 0])
    rates, rate_draws = _with_replacements(rates, job, rate_draws, replicas, fs)
    result = _simulate(rng, rates, job, replicas, rate_draws)
    if fs is not None:
        frac = fs.slow_fraction(job.n_gpus, job.slow_detect_hours, result.wall_hours, rng)
        result.slow_lost = frac * (1.0 - 1.0 / fs.factor)
        result.goodput_fail_stop = result.goodput
        result.goodput = result.goodput * (1.0 - result.slow_lost)
    return result


def _with_replacements(rates: ClassRates, job: Job, rate_draws, replicas: int, fs):
    """``rates`` (and ``rate_draws``) with the slow GPUs replaced at detection as one more
    per-GPU class (``at_scale.REPLACED``, memoryless: a thinned Poisson process), when the
    rates carry a fail-slow process that detection cuts short. ``fs``: that process, its rate
    the point or one draw per replica."""
    per_replica = 0.0 if fs is None else fs.replacements_per_hour(1, job.slow_detect_hours)
    rep = (
        0.0
        if rates.fail_slow is None
        else float(rates.fail_slow.replacements_per_hour(1, job.slow_detect_hours))
    )
    if rep <= 0:
        return rates, rate_draws
    out = ClassRates(
        (*rates.classes, REPLACED), np.append(rates.rate, rep), source=rates.source,
        counts={**(rates.counts or {}), REPLACED: ("gpu", 1)},
        laws=(*rates.laws, Exponential.unit()), law_rate=np.append(rates.law_rate, 1.0),
        starts=(*rates.starts, "stationary"), horizon_hours=rates.horizon_hours,
        fail_slow=rates.fail_slow,
    )  # fmt: skip
    if rate_draws is not None:
        draws = np.broadcast_to(rate_draws, (replicas, len(rates.classes)))
        rate_draws = np.column_stack([draws, np.broadcast_to(per_replica, (replicas,))])
    return out, rate_draws


def _simulate(rng, rates: ClassRates, job: Job, replicas: int, rate_draws) -> MCResult:
    r_mat = np.broadcast_to(
        rates.rate if rate_draws is None else rate_draws, (replicas, len(rates.classes))
    )
    counts = {**(rates.counts or {}), **(job.counts or {})}
    units = unit_counts(rates.classes, job.n_gpus, job.gpus_per_node, counts)[:, 0]
    hardware = np.array([c not in NON_HARDWARE | {WORKLOAD} for c in rates.classes])
    d_full = job.ckpt_cost_s / 3600.0
    d_blk = min(job.blocking_s, job.ckpt_cost_s) / 3600.0
    tau = job.interval_hours
    if tau is None:
        tau = daly_interval(d_blk, 1.0 / float(rates.rate @ units))
    run = _Run(rates, units, hardware, job, float(tau), d_blk, d_full - d_blk)
    if job.work_hours is None:
        return run(rng, r_mat, np.full(replicas, float(job.wall_hours)), None, job.wall_hours)
    lam_job = r_mat @ units
    g0 = useful_fraction(run.tau, d_blk, job.restart_s / 3600.0, 1.0 / np.maximum(lam_job, 1e-300))
    horizon = (
        job.work_hours / np.clip(g0, 0.02, 1.0) * 1.5
        + 10 * (job.restart_s + job.queue_wait_s) / 3600.0
    )
    if job.spares is not None:
        horizon = horizon + 10 * job.repair_hours
    result = run(rng, r_mat, horizon, job.work_hours, None)
    for _ in range(6):  # replicas that outran the horizon are redrawn with a longer one
        late = ~result.finished
        if not late.any():
            break
        horizon = horizon.copy()
        horizon[late] *= 2.0
        redo = run(rng, r_mat[late], horizon[late], job.work_hours, None)
        for name in ("goodput", "wall_hours", "work_hours", "failures", "wait_hours", "finished",
                     "dry_at"):  # fmt: skip
            getattr(result, name)[late] = getattr(redo, name)
    return result


@dataclass
class _Run:
    """One pass of the job dynamics over drawn failures (the module doc's job dynamics):
    checkpoint interval ``tau``, blocking checkpoint part ``d_blk`` and the asynchronous rest
    ``d_async`` in hours."""

    rates: ClassRates
    units: np.ndarray
    hardware: np.ndarray
    job: Job
    tau: float
    d_blk: float
    d_async: float

    def starts(self) -> tuple:
        """Per class, the unit ages at job start (``Job.initial_age`` over the rates' own)."""
        age, n = self.job.initial_age, len(self.rates.laws)
        if age is None:
            return self.rates.starts
        if isinstance(age, str):
            return (age,) * n
        return (AgeGroups.at(float(age)),) * n

    def __call__(self, rng, r_mat, horizon, work, deadline) -> MCResult:
        ref = self.rates.law_rate
        with np.errstate(divide="ignore", invalid="ignore"):
            speed = np.where(ref > 0, r_mat / np.where(ref > 0, ref, 1.0), 0.0)
        fail, hw = failure_events(
            speed, self.rates.laws, self.starts(), self.units, self.hardware, horizon, rng
        )
        if self.whole_timeline(work):
            return self._timeline(rng, fail, hw, np.minimum(horizon, deadline))
        st = _State(r_mat.shape[0], work, self.job.spares)
        while st.active.any():
            a = st.rows[st.active]
            f = fail[a, st.idx[a]]
            stop = np.minimum(horizon[a], np.inf if deadline is None else deadline)
            fl = self._finish_or_stop(st, a, f, stop, work, deadline)
            if fl.any():
                self._fail(rng, st, a[fl], f[fl], hw, work)
        wall = st.end
        good = np.where(wall > 0, st.done_work / np.where(wall > 0, wall, 1.0), 0.0)
        return MCResult(good, wall, st.done_work, st.nfail, st.waited, st.finished, st.dry_at)

    def whole_timeline(self, work) -> bool:
        """Whether a run can be computed over whole failure sequences at once (``_timeline``):
        a window of fixed wall time, and spare returns in the order the nodes failed (no
        spares kept, none, or one fixed repair time)."""
        job = self.job
        return work is None and (job.spares in (None, 0) or job.repair_sigma <= 0)

    def _timeline(self, rng, fail, hw, stop) -> MCResult:
        """The job dynamics of ``__call__`` over each replica's whole failure sequence at once
        (arrays over replicas x failures), for a window of fixed wall time ``stop``: the same
        steps as the loop, in closed form. With K spares and one repair time R the spares
        return in the order their nodes failed, so the j-th hardware failure finds a spare
        when the (j-K)-th failed node is back (R after it failed); the job is ready again after
        failure i at the running maximum of f + wait + restart over the failures so far; it
        computes between a failure and the next one when it is ready before it. A failure
        after the window, or one the job meets when it cannot compute again within it, changes
        nothing (not counted)."""
        job, tau, seg = self.job, self.tau, self.tau + self.d_blk
        n, width = fail.shape
        end = stop[:, None]
        restart = _lognormal(rng, job.restart_s / 3600.0, job.restart_sigma, n * width)
        restart = restart.reshape(n, width)
        if job.requeue_prob > 0:
            rq = rng.random((n, width)) < job.requeue_prob
            restart[rq] += _lognormal(
                rng, job.queue_wait_s / 3600.0, job.queue_sigma, int(rq.sum())
            )
        wait = np.zeros((n, width))
        with np.errstate(invalid="ignore"):
            if job.spares == 0:
                wait[hw] = _lognormal(rng, job.repair_hours, job.repair_sigma, int(hw.sum()))
            elif job.spares is not None:
                # hardware failure times of each replica in order, and each one's rank among them
                hw_times = np.sort(np.where(hw, fail, np.inf), axis=1)
                rank = np.cumsum(hw, axis=1) - 1
                back = rank - job.spares  # the hardware failure whose node frees the spare
                freed = np.take_along_axis(hw_times, np.maximum(back, 0), axis=1)
                freed = freed + job.repair_hours
                wait = np.where(hw & (back >= 0), np.maximum(freed - fail, 0.0), 0.0)
            ready = np.maximum.accumulate(np.nan_to_num(fail + wait + restart, nan=np.inf), axis=1)
            before = np.concatenate([np.zeros((n, 1)), ready[:, :-1]], axis=1)
            met = (fail < end) & (before < end)  # a prefix of each row
            computing = met & (fail >= before)
            span = np.where(computing, np.maximum(fail - before - self.d_async, 0.0), 0.0)
            work = (np.floor(span / seg) * tau).sum(axis=1)
            waited = np.where(met, ready - np.maximum(before, fail + restart), 0.0).sum(axis=1)
        nfail = met.sum(axis=1)
        last = np.where(nfail > 0, ready[np.arange(n), np.maximum(nfail - 1, 0)], 0.0)
        left = np.maximum(stop - last, 0.0)  # computing from the last restart to the window end
        full = np.floor(left / seg)
        work = work + full * tau + np.minimum(left - full * seg, tau)
        dry = met & (wait > 0)
        first = np.argmax(dry, axis=1)
        dry_at = np.where(dry.any(axis=1), fail[np.arange(n), first], np.nan)
        good = np.where(stop > 0, work / np.where(stop > 0, stop, 1.0), 0.0)
        return MCResult(good, stop.astype(float), work, nfail, waited, np.ones(n, bool), dry_at)

    def _finish_or_stop(self, st, a, f, stop, work, deadline) -> np.ndarray:
        """Replicas ``a`` that finish their work, or reach the window end / horizon cap, before
        their next failure ``f`` end there; returns the mask of those that fail instead."""
        tau, d_blk = self.tau, self.d_blk
        rd = st.ready[a]
        # finish time if no further failure
        if work is not None:
            need = st.rem[a]
            t_fin = rd + need + np.ceil(need / tau - 1e-12) * d_blk
        else:
            t_fin = np.full(a.size, np.inf)
        ev = np.minimum(f, stop)
        # 1) job completes before the next failure / the horizon
        fin = (t_fin <= ev) & (rd <= ev)
        # 2) window ends (fixed wall) or horizon cap before failure and completion; or the job
        # cannot compute again before it (still restarting or waiting for a node there): later
        # failures change nothing it did, so they are not stepped through
        cut = ~fin & ((stop <= f) | (rd >= stop)) & (stop < t_fin)
        if fin.any():
            i = a[fin]
            st.done_work[i] += st.rem[i]
            st.rem[i] = 0.0
            st.end[i] = t_fin[fin]
            st.active[i] = False
        if cut.any():
            i = a[cut]
            seg = tau + d_blk
            el = np.maximum(stop[cut] - st.ready[i], 0.0)
            full = np.floor(el / seg)
            part = np.minimum(el - full * seg, tau)
            st.done_work[i] += np.minimum(full * tau + part, st.rem[i])
            st.end[i] = stop[cut]
            st.active[i] = False
            if deadline is None:
                st.finished[i] = False
        return ~fin & ~cut

    def _fail(self, rng, st, i, ff, hw, work) -> None:
        """Replicas ``i`` fail at ``ff``: keep the work up to the last durable checkpoint, wait
        for a spare node (hardware failures) and restart."""
        tau, seg, job = self.tau, self.tau + self.d_blk, self.job
        computing = ff >= st.ready[i]
        el = np.maximum(ff - st.ready[i] - self.d_async, 0.0)
        durable = np.where(computing, np.floor(el / seg), 0.0)
        if work is not None:
            durable = np.minimum(durable, np.maximum(np.ceil(st.rem[i] / tau - 1e-12) - 1, 0))
        gained = np.minimum(durable * tau, st.rem[i])
        st.done_work[i] += gained
        st.rem[i] -= gained
        wait = self._spare_wait(rng, st, i, ff, hw[i, st.idx[i]])
        restart = _lognormal(rng, job.restart_s / 3600.0, job.restart_sigma, i.size)
        if job.requeue_prob > 0:
            rq = rng.random(i.size) < job.requeue_prob
            restart[rq] += _lognormal(
                rng, job.queue_wait_s / 3600.0, job.queue_sigma, int(rq.sum())
            )
        before = np.maximum(st.ready[i], ff + restart)
        st.ready[i] = np.maximum(st.ready[i], ff + wait + restart)
        st.waited[i] += st.ready[i] - before  # wall time added by waiting (overlaps counted once)
        st.nfail[i] += 1
        st.idx[i] += 1

    def _spare_wait(self, rng, st, i, ff, is_hw) -> np.ndarray:
        """Hours replicas ``i`` wait for a spare node after failures at ``ff``: none with
        unlimited spares; a repair with none; else until the earliest spare slot is back."""
        job, k_sp = self.job, self.job.spares
        wait = np.zeros(i.size)
        if k_sp is None:
            pass
        elif k_sp == 0:
            wait[is_hw] = _lognormal(rng, job.repair_hours, job.repair_sigma, int(is_hw.sum()))
        elif is_hw.any():
            h = i[is_hw]
            j = np.argmin(st.slots[h], axis=1)
            avail = st.slots[h, j]
            wait[is_hw] = np.maximum(avail - ff[is_hw], 0.0)
            st.slots[h, j] = ff[is_hw] + _lognormal(rng, job.repair_hours, job.repair_sigma, h.size)
        dry = (wait > 0) & np.isnan(st.dry_at[i])  # the first time no spare node was ready
        st.dry_at[i[dry]] = ff[dry]
        return wait


class _State:
    """Per-replica state of a run (arrays over replicas)."""

    def __init__(self, n: int, work, spares: int | None):
        self.rows = np.arange(n)
        self.ready = np.zeros(n)  # when computing (re)starts
        self.rem = np.full(n, np.inf if work is None else float(work))  # work still to do
        self.done_work = np.zeros(n)
        self.idx = np.zeros(n, dtype=np.int64)
        self.end = np.full(n, np.nan)
        self.active = np.ones(n, dtype=bool)
        self.finished = np.ones(n, dtype=bool)
        self.nfail = np.zeros(n, dtype=np.int64)
        self.waited = np.zeros(n)
        self.dry_at = np.full(n, np.nan)  # when a failure first found no spare node ready
        # time each spare slot is (again) available
        self.slots = np.zeros((n, spares)) if spares else None
