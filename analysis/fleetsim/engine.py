"""One replication of the fleet: a heap-of-events loop over nodes, gang jobs, spare pools, a
triage-then-repair line, retirement and maintenance windows (docs/fleetsim.md, the model).

Takes a validated scenario with its estimated keys filled (``scenario.validate``,
``run.Inputs.apply``), the failure laws (``projection.ClassRates``: the point rates or one draw
of them), the manual repair-time law and the triage-time law (``lifetime_models``
distributions, the triage law None for a fixed time) and the job mix (list of job dicts);
returns one dict of scalar metrics (``metrics.metrics``). Why not SimPy: a probe of the same
M/M/c repair line (200k failures) took 9.1 s in SimPy 4.1 and 2.6 s as a heapq loop on the
project machine; the fleet bar (100k GPUs, a year, 30 replications in 60 s) needs the plain
loop.

The state is split by concern into mixins: ``nodes`` (pools, placement, exposure clocks, bad
nodes, retirement), ``jobs`` (slots, fixed work, queue and backfill, replacements,
checkpoints), ``repair`` (diagnosis, blame, triage, repair line, silent failures,
maintenance), ``slow`` (fail-slow GPUs: slowed job clocks, replacements at detection); failure
streams are drawn in bulk before the loop (``streams``). Scalar draws
inside the loop come from ``random.Random`` and from NumPy buffers (repair and triage times),
both seeded from the replication's seed: a replication is reproducible.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

import numpy as np

from analysis.fleetsim.jobs import Jobs
from analysis.fleetsim.metrics import metrics
from analysis.fleetsim.nodes import FREE
from analysis.fleetsim.nodes import HOT
from analysis.fleetsim.nodes import INF
from analysis.fleetsim.nodes import WARM
from analysis.fleetsim.nodes import FreePool
from analysis.fleetsim.nodes import Nodes
from analysis.fleetsim.repair import Repairs
from analysis.fleetsim.slow import Slow
from analysis.fleetsim.streams import Streams
from analysis.taxonomy import NON_HARDWARE
from analysis.taxonomy import WORKLOAD


class _Buffer:
    """Draws of one law taken one at a time from NumPy blocks (a Python call per draw is
    costly; a block of 4096 is one vectorized call)."""

    def __init__(self, draw, rng: np.random.Generator, block: int = 4096):
        self.draw, self.rng, self.block, self.buf = draw, rng, block, []

    def __call__(self) -> float:
        if not self.buf:
            self.buf = self.draw(self.block, self.rng).tolist()
            self.buf.reverse()
        return self.buf.pop()


def run(spec: dict, rates, repair_law, jobs: list[dict], seed: int, triage_law=None) -> dict:
    """One replication (module docstring): the metrics dict."""
    return Sim(spec, rates, repair_law, jobs, seed, triage_law).go()


class Sim(Nodes, Jobs, Repairs, Slow):
    # event kinds (heap entries: time, sequence, kind, a, b)
    (FAIL_NODE, FAIL_JOB, JOBFAIL, TRIAGE, REPAIRED, MAINT, MAINT_END, DONE, SUBMIT, APPEAR,
     SLOW_SWAP) = range(11)  # fmt: skip

    def __init__(self, spec, rates, repair_law, jobs, seed, triage_law=None):
        f, tr, rp, bad = spec["fleet"], spec["triage"], spec["repair"], spec["bad_nodes"]
        self.H = spec["horizon_days"] * 24.0
        self.gpn = f["gpus_per_node"]
        n = self.n = f["nodes"]
        self.rnd = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.compute_clock = spec["failure_clock"] == "compute"
        self.idle_rate = 0.0 if self.compute_clock else spec["idle_failure_factor"]
        # every node in service ages at one rate: moving between jobs and pools changes nothing
        self.same_rate = not self.compute_clock and self.idle_rate == 1.0
        # failure streams (exposure time) and bad nodes
        self.streams = Streams(rates, self.gpn)
        self.job_cls, self.job_rates = self.streams.job_cls, self.streams.job_rates
        self.times, self.ncls = self.streams.draw(np.ones(n), np.full(n, self.H), self.nprng)
        self.classes = rates.classes
        self.hw = [c not in NON_HARDWARE | {WORKLOAD} for c in rates.classes]
        self.lam_job = sum(self.job_rates)
        self.bad_mult, self.cure = bad["multiplier"], bad["cure_prob"]
        self.spec_bad_share = bad["share"]
        self.appear_rate = bad["appear_per_day"] / 24.0
        self.bad = [False] * n
        self.xtimes, self.xcls, self.xptr = [[]] * n, [[]] * n, [0] * n
        # repair and triage
        self.repair = _Buffer(repair_law.sample, self.nprng)
        fixed = tr["hours"]
        self.triage = (
            (lambda: fixed) if triage_law is None else _Buffer(triage_law.sample, self.nprng)
        )
        self.detect, self.diagnose = tr["detect_prob"], tr["diagnosis_prob"]
        self.blame_p, self.refail_h = tr["false_blame_prob"], tr["refail_hours"]
        self.silent_manual = rp["silent_fail_prob"]
        self.silent_auto = (
            tr["silent_fail_prob"] if tr["silent_fail_prob"] is not None else self.silent_manual
        )
        self.techs = rp["technicians"] if rp["technicians"] is not None else math.inf
        ret = self.ret = spec["retirement"]
        score = ret["policy"] == "score"
        self.retire_k = None if score else ret["failures"]
        self.retire_w = ret["window_days"] * 24.0
        self.score = [ret["score_initial"]] * n if score else None
        self.warm_h, self.warm_first = f["warm_activation_hours"], f["warm_before_free"]
        self.maint = spec["maintenance"]
        sch = spec["scheduler"]
        self.backfill, self.bf_depth = sch["policy"] == "backfill", sch["backfill_depth"]
        self.host_sel_h = sch["host_selection_hours"]
        # nodes
        k, w = f["hot_spares"], f["warm_standbys"]
        self.state = [HOT] * k + [WARM] * w + [FREE] * (n - k - w)
        self.home = list(self.state)
        self.hot, self.warm = set(range(k)), set(range(k, k + w))
        self.nfail = [0] * n
        self.free = FreePool(sch["placement"], self.nfail)
        for i in range(k + w, n):
            self.free.add(i)
        self.nver, self.ptr, self.node_job, self.pos = [0] * n, [0] * n, [-1] * n, [0] * n
        self.expo, self.anchor, self.jjoin = [0.0] * n, [0.0] * n, [0.0] * n
        self.pend = [INF] * n  # wall clock: the time of each node's scheduled failure
        self.latent_x, self.latent_c, self.pull_c = [INF] * n, [0] * n, [0] * n
        self.fail_hist = [[] for _ in range(n)] if self.retire_k else None
        self.up_since = [0.0] * n
        self.down_since = [0.0] * n
        self.down_hours = self.maint_hours = 0.0
        self.retired_at: list[float] = []
        self.spare_target = k
        # repair line
        self.busy_techs = 0
        self.line = deque()  # (node, time it joined)
        self.q_area, self.q_last = 0.0, 0.0
        self.waits, self.n_waits = 0.0, 0
        self.sp_area, self.sp_last = 0.0, 0.0
        self.sp_req, self.sp_miss = 0, 0
        # jobs
        self.kinds = jobs
        self.j_kind, self.j_nodes, self.j_state, self.j_ver = [], [], [], []
        self.j_ready, self.j_start, self.j_end, self.j_done, self.j_submit = [], [], [], [], []
        self.j_cause, self.j_tint, self.j_owed, self.j_warm_ready = [], [], [], []
        self.j_sb, self.j_hostsel = [], []
        self.jc_base, self.jc_t, self.jc_on, self.jstamp, self.jnext, self.jheap = (
            [],
            [],
            [],
            [],
            [],
            [],
        )
        self.queue, self.waiters = deque(), deque()
        self.q_dirty = False
        self.sb_short: set[int] = set()
        self.running_fixed: set[int] = set()
        self.to_submit = [kd["count"] for kd in jobs]
        self.open_jobs = sum(kd["count"] for kd in jobs if kd["work_hours"] is not None)
        self.slots = any(kd["work_hours"] is None for kd in jobs)
        self.lost = {}
        self.ckpt_gpu_h = 0.0
        self.failures = self.interruptions = self.retired = 0
        self.systematic = self.cures = self.silent = 0
        self.heap, self.seq = [], 0
        self.end = self.H
        self.slow_setup(spec, rates)

    def push(self, t, kind, a, b=0):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def retire(self, node, t):
        self.retired_at.append(t)
        super().retire(node, t)

    def setup(self) -> None:
        """Bad nodes and their excess streams (every node's when good ones may turn bad),
        the jobs submitted at 0 and the first events."""
        if self.bad_mult > 1 and (self.spec_bad_share > 0 or self.appear_rate > 0):
            bad = self.nprng.choice(self.n, round(self.spec_bad_share * self.n), replace=False)
            drawn = np.arange(self.n) if self.appear_rate > 0 else np.sort(bad)
            speed = np.full(drawn.size, self.bad_mult - 1.0)
            times, cls = self.streams.draw(speed, np.full(drawn.size, self.H), self.nprng)
            for k, i in enumerate(drawn.tolist()):
                self.xtimes[i], self.xcls[i] = times[k], cls[k]
            for i in bad.tolist():
                self.bad[i] = True
            if self.appear_rate > 0:
                self.push(self.rnd.expovariate(self.appear_rate), self.APPEAR, 0)
        for kind, spec in enumerate(self.kinds):
            if spec["work_hours"] is None or spec["submit_hours"] == 0:
                first = 1 if spec["interarrival_hours"] > 0 else spec["count"]
                for _ in range(first):
                    self.new_job(kind, 0.0)
                self.to_submit[kind] -= first
                if self.to_submit[kind] > 0:
                    gap = self.rnd.expovariate(1.0 / spec["interarrival_hours"])
                    self.push(gap, self.SUBMIT, kind)
            else:
                self.push(spec["submit_hours"], self.SUBMIT, kind)
        for node in range(self.n):
            self.arm(node, 0.0)
        if self.maint["every_days"] is not None:
            groups = math.ceil(self.n / self.maint["group_nodes"])
            every = self.maint["every_days"] * 24.0
            for g in range(groups):
                self.push((g + 0.5) * every / groups, self.MAINT, g)

    def go(self) -> dict:
        self.setup()
        self.dispatch(0.0)
        H, heap, pop = self.H, self.heap, heapq.heappop
        stamps, acts = self.events()
        while heap and heap[0][0] <= H:
            t, _, kind, a, b = pop(heap)
            stamp = stamps[kind]
            if stamp is not None and b != stamp[a]:
                continue  # stale: its job restarted or its node changed since it was drawn
            if acts[kind](a, t, b):
                self.end = t  # every job is done
                break
        return metrics(self)

    def events(self) -> tuple[tuple, tuple]:
        """Per event kind (the index): the version list an event's ``b`` must match to be
        current (None: ``b`` is an argument), and what runs it, ``act(a, t, b)``, true when the
        simulation is over."""
        kinds = {
            self.FAIL_NODE: (self.nver, lambda a, t, b: self.fire(a, t)),
            self.FAIL_JOB: (self.jstamp, lambda a, t, b: self.job_node_failure(a, t)),
            self.JOBFAIL: (self.j_ver, lambda a, t, b: self.job_failure(a, t)),
            self.TRIAGE: (None, lambda a, t, b: self.triaged(a, t)),
            self.REPAIRED: (None, self.repaired),
            self.MAINT: (None, lambda a, t, b: self.maintenance(a, t)),
            self.MAINT_END: (None, lambda a, t, b: self.maintenance_end(a, t)),
            self.DONE: (self.j_ver, lambda a, t, b: self.finish(a, t) or self.all_done()),
            self.SUBMIT: (None, lambda a, t, b: self.submit(a, t) or self.dispatch(t)),
            self.APPEAR: (None, lambda a, t, b: self.appear(t)),
            self.SLOW_SWAP: (None, self.slow_swap),
        }
        assert sorted(kinds) == list(range(len(kinds)))
        return tuple(kinds[k][0] for k in sorted(kinds)), tuple(kinds[k][1] for k in sorted(kinds))

    def all_done(self) -> bool:
        return not self.open_jobs and not self.slots

    def job_node_failure(self, j: int, t: float) -> None:
        """The top of job ``j``'s heap is due: that node fails (a stale top reschedules)."""
        _, i, v = heapq.heappop(self.jheap[j])
        self.jnext[j] = INF
        if v == self.nver[i] and self.node_job[i] == j:
            self.fire(i, t)
        self.jresched(j, t)
