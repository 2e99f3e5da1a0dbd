"""Fail-slow GPUs in a fleet replication, a mixin of ``engine.Sim``: each job's GPUs start
running slow as a Poisson process at gpus x rate (``ClassRates.fail_slow``, or the scenario's
``fail_slow`` keys), each for a time drawn from the episode law (``analysis.slowness.at_scale``).
While any of them is slow the job's clock runs ``factor`` times slower. An episode still running
``fail_slow.detect_hours`` after it started ends there: the GPU is replaced in place and the job
restarts from its last checkpoint, as after a fail-stop. The GPU-hours lost running slow go
to cause ``fail_slow``, those of the replacements (rework, restart) to ``fail_slow_replaced``.

The episodes of every job of a kind are drawn at once when the replication starts (NumPy),
each job's over the horizon from its own origin, and placed when the job is created (from
before it, so its GPUs are in the steady state: a Poisson process shifted is the same one):
their union, as disjoint blocks, gives the job's
effective clock E(t) = t - (1 - 1/factor) x (slow time before t), piecewise linear, evaluated
and inverted by binary search. A job computes E(t) - E(ready) hours of full-speed time between
``ready`` and t; the rest of that wall time is lost running slow.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from analysis.slowness.at_scale import REPLACED
from warehouse.schemas import FAIL_SLOW

# an episode never detected is followed from this quantile of its law before the job's start
_TAIL_Q = 0.9999


class SlowClock:
    """A job's effective clock (module docstring): its slow blocks, the slice [lo, hi) of its
    kind's ``Episodes``, at wall times ``shift`` + their times."""

    __slots__ = ("ep", "hi", "lo", "shift")

    def __init__(self, ep: Episodes, lo: int, hi: int, shift: float):
        self.ep, self.lo, self.hi, self.shift = ep, lo, hi, shift

    def slow_before(self, t: float) -> float:
        ep, x = self.ep, t - self.shift
        k = bisect_right(ep.bs, x, self.lo, self.hi) - 1
        if k < self.lo:
            return 0.0
        return ep.before[k] + min(x, ep.be[k]) - ep.bs[k]

    def at(self, t: float) -> float:
        return t - self.ep.c * self.slow_before(t)

    def inverse(self, y: float) -> float:
        """The wall time at which E reaches ``y``."""
        ep, x = self.ep, y - self.shift
        k = bisect_right(ep.eb, x, self.lo, self.hi) - 1
        if k < self.lo:
            return y
        if x <= ep.ee[k]:
            return self.shift + ep.bs[k] + (x - ep.eb[k]) * ep.f
        return self.shift + ep.be[k] + x - ep.ee[k]


class Episodes:
    """The episodes of ``jobs`` jobs of one kind, drawn at once, each job's over ``span`` hours
    from its own origin: the union of each job's as blocks (``bs``, ``be``, the slow time
    before each in its job, E at each block's start and end) and the replacements (``swaps``),
    sorted by job and time, with each job's slice (``blocks``, ``swap_at``: offsets)."""

    def __init__(self, jobs: int, gpus: int, span: float, fs, detect: float, rng):
        n = rng.poisson(gpus * fs.rate * span, jobs)
        job = np.repeat(np.arange(jobs), n)
        start = rng.random(job.size) * span
        dur = fs.duration.sample(job.size, rng)
        order = np.lexsort((start, job))
        job, start, dur = job[order], start[order], dur[order]
        end = start + np.minimum(dur, detect)
        cut = dur > detect
        self.swaps = (start[cut] + detect).tolist()
        self.swap_at = np.searchsorted(job[cut], np.arange(jobs + 1)).tolist()
        # each job's times moved past the one before it, so one running maximum serves them all
        gap = (float(end.max()) + 1.0 if end.size else 1.0) * job
        reach = np.maximum.accumulate(end + gap)
        first = np.ones(job.size, bool)
        first[1:] = start[1:] + gap[1:] > reach[:-1]
        at = np.flatnonzero(first)
        bs = start[first]
        be = np.maximum.reduceat(end + gap, at) - gap[first] if at.size else bs
        length = be - bs
        bjob = job[first]
        self.blocks = np.searchsorted(bjob, np.arange(jobs + 1))
        total = np.cumsum(length) - length  # slow time before each block, over all jobs
        before = (
            total - total[np.minimum(self.blocks[bjob], total.size - 1)] if total.size else total
        )
        self.c, self.f = 1.0 - 1.0 / fs.factor, fs.factor
        self.bs, self.be, self.before = bs.tolist(), be.tolist(), before.tolist()
        self.eb = (bs - self.c * before).tolist()
        self.ee = (be - self.c * (before + length)).tolist()
        self.blocks = self.blocks.tolist()
        self.used = 0


class Slow:
    """Fail-slow bookkeeping of ``engine.Sim`` (module docstring)."""

    def slow_setup(self, spec: dict, rates) -> None:
        self.fs = rates.fail_slow
        self.slow_t = spec["fail_slow"]["detect_hours"]
        self.j_clock, self.j_swaps = [], []
        if self.fs is None:
            return
        if math.isinf(self.slow_t):
            q = self.fs.duration.inverse_cumulative_hazard(np.array([-math.log1p(-_TAIL_Q)]))
            self.slow_lead = float(q[0])
        else:
            self.slow_lead = self.slow_t
        self.slow_pool = [self._episodes(k, max(kd["count"], 1)) for k, kd in enumerate(self.kinds)]

    def _episodes(self, kind: int, jobs: int) -> Episodes:
        gpus = self.kinds[kind]["gpus"]
        return Episodes(jobs, gpus, self.H + self.slow_lead, self.fs, self.slow_t, self.nprng)

    def slow_draw(self, j: int, t: float) -> None:
        """Job ``j``'s episodes, from before its creation at ``t`` (its kind's next drawn job)."""
        if self.fs is None:
            return
        kind = self.j_kind[j]
        ep = self.slow_pool[kind]
        if ep.used == len(ep.blocks) - 1:  # more jobs of the kind than it counts: draw again
            ep = self.slow_pool[kind] = self._episodes(kind, len(ep.blocks) - 1)
        i, shift = ep.used, t - self.slow_lead
        ep.used += 1
        self.j_clock.append(SlowClock(ep, ep.blocks[i], ep.blocks[i + 1], shift))
        lo, hi = ep.swap_at[i], ep.swap_at[i + 1]
        k = bisect_right(ep.swaps, t - shift, lo, hi)
        self.j_swaps.append((ep, hi, shift))
        if k < hi:
            self.push(shift + ep.swaps[k], self.SLOW_SWAP, j, k)

    def elapsed(self, j: int, ready: float, t: float) -> float:
        """Full-speed hours job ``j`` computes from ``ready`` to ``t``."""
        if self.fs is None:
            return t - ready
        clock = self.j_clock[j]
        return clock.at(t) - clock.at(ready)

    def after(self, j: int, ready: float, hours: float) -> float:
        """When job ``j``, computing from ``ready``, has done ``hours`` at full speed."""
        if self.fs is None:
            return ready + hours
        clock = self.j_clock[j]
        return clock.inverse(clock.at(ready) + hours)

    def slow_lost(self, j: int, ready: float, t: float) -> None:
        """GPU-hours job ``j`` lost running slow while it computed from ``ready`` to ``t``."""
        if self.fs is None or t <= ready:
            return
        wall = t - ready - self.elapsed(j, ready, t)
        gpus = self.kinds[self.j_kind[j]]["gpus"]
        self.lost[FAIL_SLOW] = self.lost.get(FAIL_SLOW, 0.0) + wall * gpus

    def slow_swap(self, j: int, t: float, k: int) -> None:
        """A slow GPU of job ``j`` found ``detect_hours`` after it slowed: replaced in place,
        the job restarts from its last checkpoint (if it is computing or restarting)."""
        if self.j_state[j] == self.DONE_STATE:
            return
        if self.j_state[j] == self.RUN_STATE:
            self.interrupt(j, t, REPLACED)
            self.go_compute(j, t, restart=True)
        ep, hi, shift = self.j_swaps[j]
        if k + 1 < hi:
            self.push(shift + ep.swaps[k + 1], self.SLOW_SWAP, j, k + 1)
