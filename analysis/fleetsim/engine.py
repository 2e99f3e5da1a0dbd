"""One replication of the fleet: a heap-of-events loop over nodes, gang jobs, spare pools, a
triage-then-repair line, retirement and maintenance windows (docs/fleetsim.md, the model).

Takes a validated scenario (``scenario.validate``), the failure laws (``projection.
ClassRates``), the manual repair-time law (a ``lifetime_models`` distribution) and the job mix
(list of job dicts); returns one dict of scalar metrics (``METRICS`` plus per-size and
per-cause keys). Why not SimPy: a probe of the same M/M/c repair line (200k failures) took
9.1 s in SimPy 4.1 and 2.6 s as a heapq loop on the project machine; the fleet bar (100k GPUs,
a year, 30 replications in 60 s) needs the plain loop.

Failure streams are drawn in bulk before the loop: per node and class, the calendar-time
failures of the class's units over the horizon (``montecarlo.failure_events``, one "replica"
per node: stationary fleet age, failed units renewed). A failure that arrives while its node is
out of service (in repair, maintenance, retired) is dropped, exact for exponential laws (the
stream after a return is again Poisson) and an approximation for aged laws. Idle nodes (free or
spare) see a share ``idle_failure_factor`` of their failures (thinning). Job-scope classes
(rates per job-hour) strike each running job as a Poisson stream.

Scalar draws inside the loop come from ``random.Random`` and from NumPy buffers (repair
times), both seeded from the replication's seed: a replication is reproducible.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

import numpy as np

from analysis.class_rates import UNIT_COUNTS
from analysis.montecarlo import by_owner_and_time
from analysis.montecarlo import failure_events
from analysis.projection import unit_counts
from analysis.taxonomy import DEFAULT_UNIT
from analysis.taxonomy import NON_HARDWARE
from analysis.taxonomy import WORKLOAD

# event kinds (heap entries: time, sequence, kind, a, b)
FAIL, REFAIL, JOBFAIL, TRIAGE, REPAIRED, MAINT, MAINT_END = range(7)
# node states; a node's home is the pool it returns to after repair (FREE, HOT or WARM)
FREE, BUSY, HOT, WARM, DOWN, RETIRED, MAINT_DOWN = range(7)
OUT = (DOWN, RETIRED, MAINT_DOWN)
QUEUED, RUN, WAIT = range(3)
MAINTENANCE = "maintenance"  # the cause of planned downtime
METRICS = (
    "fleet_goodput",
    "node_availability",
    "repair_queue_mean",
    "repair_wait_hours",
    "spare_utilisation",
    "spare_blocking",
    "failures",
    "interruptions",
    "retired_nodes",
)


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


def node_streams(rates, nodes: int, gpus_per_node: int, horizon: float, rng):
    """Per node, its failures over the horizon: (times list, class-index list) per node, and
    the job-scope classes as (indices, rates per job-hour)."""
    table = {**UNIT_COUNTS, **(rates.counts or {})}
    scopes = [table.get(c, DEFAULT_UNIT)[0] for c in rates.classes]
    per_node = unit_counts(rates.classes, gpus_per_node, gpus_per_node, rates.counts)[:, 0]
    starts = rates.starts
    t_all, n_all, c_all = [], [], []
    for c, (law, ref) in enumerate(zip(rates.laws, rates.law_rate, strict=True)):
        if scopes[c] == "job" or rates.rate[c] <= 0 or ref <= 0:
            continue
        speed = np.full((nodes, 1), rates.rate[c] / ref)
        fail, _ = failure_events(
            speed, [law], [starts[c]], np.array([per_node[c]]), np.array([True]),
            np.full(nodes, float(horizon)), rng,
        )  # fmt: skip
        node, k = np.nonzero(np.isfinite(fail))
        t_all.append(fail[node, k])
        n_all.append(node)
        c_all.append(np.full(node.size, c))
    t, n, c = by_owner_and_time(t_all, n_all, c_all)
    cuts = np.searchsorted(n, np.arange(nodes + 1))
    tl, cl = t.tolist(), c.tolist()
    times = [tl[cuts[i] : cuts[i + 1]] for i in range(nodes)]
    classes = [cl[cuts[i] : cuts[i + 1]] for i in range(nodes)]
    job_cls = [i for i, s in enumerate(scopes) if s == "job" and rates.rate[i] > 0]
    return times, classes, job_cls, [float(rates.rate[i]) for i in job_cls]


def run(spec: dict, rates, repair_law, jobs: list[dict], seed: int) -> dict:
    """One replication (module docstring): the metrics dict."""
    return _Sim(spec, rates, repair_law, jobs, seed).go()


class _Sim:
    def __init__(self, spec, rates, repair_law, jobs, seed):
        f, tr, rp = spec["fleet"], spec["triage"], spec["repair"]
        self.H = spec["horizon_days"] * 24.0
        self.gpn = f["gpus_per_node"]
        n = self.n = f["nodes"]
        self.rnd = random.Random(seed)
        nprng = np.random.default_rng(seed)
        self.times, self.ncls, self.job_cls, self.job_rates = node_streams(
            rates, n, self.gpn, self.H, nprng
        )
        self.classes = rates.classes
        self.hw = [c not in NON_HARDWARE | {WORKLOAD} for c in rates.classes]
        self.lam_job = sum(self.job_rates)
        self.repair = _Buffer(repair_law.sample, nprng)
        self.idle = spec["idle_failure_factor"]
        self.triage_h, self.detect = tr["hours"], tr["detect_prob"]
        self.blame, self.refail_h = tr["false_blame_prob"], tr["refail_hours"]
        self.techs = rp["technicians"] if rp["technicians"] is not None else math.inf
        ret = spec["retirement"]
        self.retire_k = ret["failures"]
        self.retire_w = ret["window_days"] * 24.0
        self.warm_h = f["warm_activation_hours"]
        self.maint = spec["maintenance"]
        # nodes
        k, w = f["hot_spares"], f["warm_standbys"]
        self.state = [HOT] * k + [WARM] * w + [FREE] * (n - k - w)
        self.home = list(self.state)
        self.hot, self.warm = set(range(k)), set(range(k, k + w))
        self.free = set(range(k + w, n))
        self.ver = [0] * n
        self.ptr = [0] * n
        self.node_job = [-1] * n
        self.pos = [0] * n  # index in its job's node list
        self.fail_hist = [[] for _ in range(n)] if self.retire_k else None
        self.down_since = [0.0] * n
        self.down_hours = 0.0
        self.maint_hours = 0.0
        self.retired_hours = 0.0
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
        self.j_ready, self.j_start, self.j_done = [], [], []
        self.j_cause, self.j_tint = [], []
        self.j_owed, self.j_warm_ready = [], []
        self.queue = deque()
        self.waiters = deque()
        self.lost = {}
        self.ckpt_gpu_h = 0.0
        self.failures = self.interruptions = self.retired = 0
        self.heap, self.seq = [], 0

    # ------------------------------------------------------------------ helpers
    def push(self, t, kind, a, b=0):
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, a, b))

    def next_stream(self, node, t):
        """Schedule the node's first stream failure at or after ``t``."""
        times, p = self.times[node], self.ptr[node]
        while p < len(times) and times[p] < t:
            p += 1
        self.ptr[node] = p
        if p < len(times):
            self.push(times[p], FAIL, node, self.ver[node])

    def queue_changed(self, t):
        self.q_area += len(self.line) * (t - self.q_last)
        self.q_last = t

    def spares_changed(self, t):
        self.sp_area += (self.spare_target - len(self.hot)) * (t - self.sp_last)
        self.sp_last = t

    def leave(self, node, t):
        """Take a node out of whatever holds it (pool or job); returns its job or -1."""
        s = self.state[node]
        if s == FREE:
            self.free.discard(node)
        elif s == HOT:
            self.spares_changed(t)
            self.hot.discard(node)
        elif s == WARM:
            self.warm.discard(node)
        elif s == BUSY:
            j = self.node_job[node]
            lst = self.j_nodes[j]
            i, last = self.pos[node], lst[-1]
            lst[i], self.pos[last] = last, i
            lst.pop()
            self.node_job[node] = -1
            return j
        return -1

    # ------------------------------------------------------------------ jobs
    def slot(self, kind):
        j = len(self.j_kind)
        self.j_kind.append(kind)
        self.j_nodes.append([])
        self.j_state.append(QUEUED)
        self.j_ver.append(0)
        self.j_ready.append(math.inf)
        self.j_start.append(None)
        self.j_done.append(0.0)
        self.j_cause.append(None)
        self.j_tint.append(0.0)
        self.j_owed.append([])
        self.j_warm_ready.append(0.0)
        self.queue.append(j)

    def go_compute(self, j, t, restart: bool):
        spec = self.kinds[self.j_kind[j]]
        ready = t + (spec["restart_s"] / 3600.0 if restart else 0.0)
        ready = max(ready, self.j_warm_ready[j])
        self.j_state[j] = RUN
        self.j_ready[j] = ready
        self.j_ver[j] += 1
        if self.lam_job > 0:
            self.push(t + self.rnd.expovariate(self.lam_job), JOBFAIL, j, self.j_ver[j])

    def close_episode(self, j, t):
        cause = self.j_cause[j]
        if cause is not None:
            end = min(t, self.j_ready[j])
            gpus = self.kinds[self.j_kind[j]]["gpus"]
            self.lost[cause] = self.lost.get(cause, 0.0) + max(end - self.j_tint[j], 0.0) * gpus
            self.j_cause[j] = None

    def computed(self, j, t):
        """(checkpoints written, work computed, time elapsed) since the job's ``ready``."""
        spec = self.kinds[self.j_kind[j]]
        tau, d = spec["checkpoint_interval_hours"], spec["checkpoint_cost_s"] / 3600.0
        el = t - self.j_ready[j]
        if el <= 0:
            return 0, 0.0, el
        full = math.floor(el / (tau + d))
        return full, full * tau + min(el - full * (tau + d), tau), el

    def interrupt(self, j, t, cause, planned=False):
        """A job stops at ``t``: work since its last checkpoint is lost (kept when
        ``planned``: it checkpoints first), its computing stops until restarted."""
        self.close_episode(j, t)
        self.interruptions += not planned
        spec = self.kinds[self.j_kind[j]]
        gpus = spec["gpus"]
        if self.j_state[j] == RUN and t > self.j_ready[j]:
            full, comp, el = self.computed(j, t)
            tau, d = spec["checkpoint_interval_hours"], spec["checkpoint_cost_s"] / 3600.0
            gained = comp if planned else full * tau
            self.j_done[j] += gained
            self.ckpt_gpu_h += full * d * gpus
            rework = el - gained - full * d
            self.lost[cause] = self.lost.get(cause, 0.0) + max(rework, 0.0) * gpus
        self.j_ver[j] += 1
        self.j_ready[j] = math.inf
        self.j_cause[j], self.j_tint[j] = cause, t

    def lose_node(self, j, node, t):
        """Job ``j`` lost ``node``: it waits for a replacement."""
        self.j_owed[j].append(node)
        if self.j_state[j] != WAIT:
            self.j_state[j] = WAIT
            self.waiters.append(j)
        self.sp_req += 1
        self.sp_miss += not self.hot

    def give(self, j, node):
        lst = self.j_nodes[j]
        self.pos[node] = len(lst)
        lst.append(node)
        self.state[node] = BUSY
        self.node_job[node] = j

    def dispatch(self, t):
        """Replacements first (hot spare, warm standby, free node), then queued jobs in
        arrival order (first come first served, no backfill)."""
        while self.waiters and (self.hot or self.warm or self.free):
            j = self.waiters[0]
            owed = self.j_owed[j].pop()
            if self.hot:
                self.spares_changed(t)
                node, pool = self.hot.pop(), HOT
            elif self.warm:
                node, pool = self.warm.pop(), WARM
                self.j_warm_ready[j] = max(self.j_warm_ready[j], t + self.warm_h)
            else:
                node, pool = self.free.pop(), FREE
            if pool != FREE:  # the spare joins the job; the node it replaces refills its pool
                self.home[node] = FREE
                if self.state[owed] == DOWN or self.state[owed] == MAINT_DOWN:
                    self.home[owed] = pool
            self.give(j, node)
            if not self.j_owed[j]:
                self.waiters.popleft()
                self.go_compute(j, t, restart=True)
        while self.queue:
            j = self.queue[0]
            need = math.ceil(self.kinds[self.j_kind[j]]["gpus"] / self.gpn)
            if len(self.free) < need:
                break
            self.queue.popleft()
            for _ in range(need):
                self.give(j, self.free.pop())
            self.j_start[j] = t
            self.go_compute(j, t, restart=False)

    # ------------------------------------------------------------------ nodes
    def take_down(self, node, t, state):
        j = self.leave(node, t)
        self.state[node] = state
        self.ver[node] += 1
        self.down_since[node] = t
        return j

    def node_failure(self, node, t, c, busy_job):
        """A hardware failure of ``node`` (class index ``c``): triage may blame another node
        of the job; the blamed node is pulled, its job waits for a replacement."""
        blamed = node
        if busy_job >= 0 and self.blame > 0 and self.rnd.random() < self.blame:
            others = self.j_nodes[busy_job]
            if len(others) > 1:
                while blamed == node:
                    blamed = others[self.rnd.randrange(len(others))]
                self.push(t + self.rnd.expovariate(1.0 / self.refail_h), REFAIL, node,
                          self.ver[node] * len(self.classes) + c)  # fmt: skip
        self.failures += 1
        if self.fail_hist is not None:
            self.fail_hist[blamed].append(t)
        cause = self.classes[c]
        if busy_job >= 0:
            self.interrupt(busy_job, t, cause)
        j = self.take_down(blamed, t, DOWN)
        self.push(t + self.triage_h, TRIAGE, blamed)
        if j >= 0:
            self.lose_node(j, blamed, t)
        self.dispatch(t)

    def on_fail(self, node, t, ver):
        """The node's next stream failure (stale after the node went out of service)."""
        if ver != self.ver[node] or self.state[node] in OUT:
            return
        c = self.ncls[node][self.ptr[node]]
        self.ptr[node] += 1
        s = self.state[node]
        j = self.node_job[node] if s == BUSY else -1
        hw = self.hw[c]
        if j < 0 and self.idle < 1.0 and self.rnd.random() >= self.idle:
            hw = None  # thinned: an idle node does not fail this time
        if hw is None or (not hw and j < 0):
            pass
        elif not hw:
            self.interrupt(j, t, self.classes[c])
            if self.j_state[j] == RUN:
                self.go_compute(j, t, restart=True)
        else:
            self.node_failure(node, t, c, j)
        if self.state[node] not in OUT:
            self.next_stream(node, t)

    def to_line(self, node, t):
        if self.busy_techs < self.techs:
            self.busy_techs += 1
            self.push(t + self.repair(), REPAIRED, node, 1)
        else:
            self.queue_changed(t)
            self.line.append((node, t))

    def repaired(self, node, t, manual):
        if manual:
            if self.line:
                self.queue_changed(t)
                nxt, since = self.line.popleft()
                self.waits += t - since
                self.n_waits += 1
                self.push(t + self.repair(), REPAIRED, nxt, 1)
            else:
                self.busy_techs -= 1
        self.down_hours += t - self.down_since[node]
        if self.retire_k:
            hist = [x for x in self.fail_hist[node] if x >= t - self.retire_w]
            self.fail_hist[node] = hist
            if len(hist) >= self.retire_k:
                self.retire(node, t)
                self.dispatch(t)
                return
        self.back(node, t)

    def retire(self, node, t):
        self.state[node] = RETIRED
        self.retired += 1
        self.retired_hours += self.H - t
        home = self.home[node]
        if home == HOT and self.free:  # the spare pool keeps its size from the free nodes
            self.spares_changed(t)
            m = self.free.pop()
            self.state[m] = self.home[m] = HOT
            self.hot.add(m)
        elif home == WARM and self.free:
            m = self.free.pop()
            self.state[m] = self.home[m] = WARM
            self.warm.add(m)

    def back(self, node, t):
        home = self.home[node]
        self.state[node] = home
        if home == HOT:
            self.spares_changed(t)
            self.hot.add(node)
        elif home == WARM:
            self.warm.add(node)
        else:
            self.free.add(node)
        self.next_stream(node, t)
        self.dispatch(t)

    def maintenance(self, g, t):
        m = self.maint
        lo = g * m["group_nodes"]
        for node in range(lo, min(lo + m["group_nodes"], self.n)):
            if self.state[node] in OUT:
                continue
            busy = self.node_job[node] if self.state[node] == BUSY else -1
            if busy >= 0 and self.j_state[busy] != WAIT:
                self.interrupt(busy, t, MAINTENANCE, planned=True)
            j = self.take_down(node, t, MAINT_DOWN)
            if j >= 0:
                self.lose_node(j, node, t)
        self.push(t + m["hours"], MAINT_END, g)
        self.push(t + m["every_days"] * 24.0, MAINT, g)
        self.dispatch(t)

    def maintenance_end(self, g, t):
        m = self.maint
        lo = g * m["group_nodes"]
        for node in range(lo, min(lo + m["group_nodes"], self.n)):
            if self.state[node] == MAINT_DOWN:
                self.maint_hours += t - self.down_since[node]
                self.back(node, t)

    # ------------------------------------------------------------------ loop
    def go(self) -> dict:
        for kind, spec in enumerate(self.kinds):
            for _ in range(spec["count"]):
                self.slot(kind)
        for node in range(self.n):
            self.next_stream(node, 0.0)
        if self.maint["every_days"] is not None:
            groups = math.ceil(self.n / self.maint["group_nodes"])
            every = self.maint["every_days"] * 24.0
            for g in range(groups):
                self.push((g + 0.5) * every / groups, MAINT, g)
        self.dispatch(0.0)
        H, heap, pop = self.H, self.heap, heapq.heappop
        n_cls = len(self.classes)
        while heap and heap[0][0] <= H:
            t, _, kind, a, b = pop(heap)
            if kind == FAIL:
                self.on_fail(a, t, b)
            elif kind == TRIAGE:
                if self.rnd.random() < self.detect:
                    self.repaired(a, t, False)
                else:
                    self.to_line(a, t)
            elif kind == REPAIRED:
                self.repaired(a, t, b)
            elif kind == JOBFAIL:
                if b == self.j_ver[a]:
                    self.job_failure(a, t)
            elif kind == REFAIL:
                ver, c = divmod(b, n_cls)
                if ver == self.ver[a] and self.state[a] not in OUT:
                    s = self.state[a]
                    self.node_failure(a, t, c, self.node_job[a] if s == BUSY else -1)
            elif kind == MAINT:
                self.maintenance(a, t)
            else:
                self.maintenance_end(a, t)
        return self.metrics()

    def job_failure(self, j, t):
        """A job-scope class strikes: pick the class by rate; hardware pulls a random node."""
        u, acc = self.rnd.random() * self.lam_job, 0.0
        c = self.job_cls[-1]
        for ci, r in zip(self.job_cls, self.job_rates, strict=True):
            acc += r
            if u < acc:
                c = ci
                break
        if self.hw[c] and self.j_nodes[j]:
            node = self.j_nodes[j][self.rnd.randrange(len(self.j_nodes[j]))]
            self.node_failure(node, t, c, j)
        else:
            self.interrupt(j, t, self.classes[c])
            self.go_compute(j, t, restart=True)

    def metrics(self) -> dict:
        H = self.H
        self.queue_changed(H)
        self.spares_changed(H)
        prod = {}  # gpus -> [productive job-hours, job-hours since submission, since start]
        total_gpu_h = 0.0
        for j in range(len(self.j_kind)):
            gpus = self.kinds[self.j_kind[j]]["gpus"]
            done = self.j_done[j]
            if self.j_state[j] == RUN and H > self.j_ready[j]:
                full, comp, _ = self.computed(j, H)
                done += comp  # in flight at the horizon: not lost
                spec = self.kinds[self.j_kind[j]]
                self.ckpt_gpu_h += full * spec["checkpoint_cost_s"] / 3600.0 * gpus
            self.close_episode(j, H)
            acc = prod.setdefault(gpus, [0.0, 0.0, 0.0])
            acc[0] += done
            acc[1] += H
            acc[2] += 0.0 if self.j_start[j] is None else H - self.j_start[j]
            total_gpu_h += done * gpus
        for node in range(self.n):
            s = self.state[node]
            if s == DOWN:
                self.down_hours += H - self.down_since[node]
            elif s == MAINT_DOWN:
                self.maint_hours += H - self.down_since[node]
        node_h = self.n * H
        out = {
            "fleet_goodput": total_gpu_h / (node_h * self.gpn),
            "node_availability": 1.0
            - (self.down_hours + self.maint_hours + self.retired_hours) / node_h,
            "repair_queue_mean": self.q_area / H,
            "repair_wait_hours": self.waits / self.n_waits if self.n_waits else 0.0,
            "spare_utilisation": self.sp_area / (self.spare_target * H)
            if self.spare_target
            else 0.0,
            "spare_blocking": self.sp_miss / self.sp_req if self.sp_req else 0.0,
            "failures": float(self.failures),
            "interruptions": float(self.interruptions),
            "retired_nodes": float(self.retired),
            "lost_gpu_hours:checkpoint": self.ckpt_gpu_h,
        }
        for gpus, (p, since_submit, since_start) in sorted(prod.items()):
            out[f"ettr:{gpus}"] = p / since_submit if since_submit > 0 else 0.0
            out[f"goodput:{gpus}"] = p / since_start if since_start > 0 else 0.0
        for cause, v in sorted(self.lost.items()):
            out[f"lost_gpu_hours:{cause}"] = v
        return out
