"""Jobs of a fleet replication: slots that run jobs back to back, fixed-work jobs and their
submissions, the queue (first come first served, or EASY backfill), replacements of lost
nodes, job clocks, checkpoints and the work a failure loses. A mixin of ``engine.Sim``.

Work: a job computes (its clock slowed while a GPU of it is slow: ``slow``) in segments of
``checkpoint_interval_hours`` each followed by a checkpoint of ``checkpoint_cost_s``; a
failure loses the work since the last checkpoint (interval 0: every step is durable and
nothing is lost, AIReSim's model) and the job restarts
after ``restart_s`` (plus ``scheduler.host_selection_hours`` when it took free nodes).
Under the wall clock a failure during the restart starts it again (Daly's model); under the
compute clock nothing fails while the job does not compute.

Backfill (EASY): when the queue's head does not fit, it gets a reservation at the earliest
time enough nodes free up if every running fixed-work job ran to its end without a failure
(its remaining work); a job behind it starts now if it fits the free nodes and, by the same
estimate (its work), ends before that time or uses only nodes the head will not need. A slot
(no work_hours) never ends by that estimate.
"""

from __future__ import annotations

import heapq
import math

from analysis.fleetsim.nodes import BUSY
from analysis.fleetsim.nodes import DOWN
from analysis.fleetsim.nodes import FREE
from analysis.fleetsim.nodes import HOT
from analysis.fleetsim.nodes import INF
from analysis.fleetsim.nodes import MAINT_DOWN
from analysis.fleetsim.nodes import STANDBY
from analysis.fleetsim.nodes import WARM

QUEUED, RUN, WAIT, DONE = range(4)


class Jobs:
    """Job bookkeeping of ``engine.Sim`` (module docstring)."""

    DONE_STATE, RUN_STATE = DONE, RUN

    def need(self, j: int) -> int:
        return math.ceil(self.kinds[self.j_kind[j]]["gpus"] / self.gpn)

    def sb_target(self, j: int) -> int:
        return self.kinds[self.j_kind[j]]["standbys"]

    # ------------------------------------------------------------------ job clocks
    def jclock(self, j: int, t: float) -> float:
        if self.jc_on[j] and t > self.jc_t[j]:
            return self.jc_base[j] + t - self.jc_t[j]
        return self.jc_base[j]

    def clock_start(self, j: int, t: float, at: float) -> None:
        """The job's clock (stopped) runs from ``at`` >= ``t`` on: its value is continuous, so
        its nodes' exposures need no update."""
        self.jc_base[j] = self.jclock(j, t)
        self.jc_t[j], self.jc_on[j] = at, True
        self.jresched(j, t)

    def clock_stop(self, j: int, t: float) -> None:
        self.jc_base[j] = self.jclock(j, t)
        self.jc_on[j] = False
        self.jresched(j, t)

    def jresched(self, j: int, t: float) -> None:
        """Schedule the job's next node failure from the top of its heap."""
        h, nver, job = self.jheap[j], self.nver, self.node_job
        while h and (h[0][2] != nver[h[0][1]] or job[h[0][1]] != j):
            heapq.heappop(h)
        self.jstamp[j] += 1
        if not h or not self.jc_on[j]:
            self.jnext[j] = INF
            return
        key = h[0][0]
        self.jnext[j] = key
        when = max(self.jc_t[j], t) + key - self.jclock(j, max(self.jc_t[j], t))
        self.push(max(when, t), self.FAIL_JOB, j, self.jstamp[j])

    # ------------------------------------------------------------------ job life
    def new_job(self, kind: int, t: float) -> int:
        j = len(self.j_kind)
        self.j_kind.append(kind)
        for lst in (self.j_nodes, self.j_owed, self.j_sb):
            lst.append([])
        for lst, v in ((self.j_state, QUEUED), (self.j_ver, 0), (self.j_ready, INF),
                       (self.j_start, None), (self.j_end, None), (self.j_done, 0.0),
                       (self.j_cause, None), (self.j_tint, 0.0), (self.j_warm_ready, 0.0),
                       (self.j_submit, t), (self.j_hostsel, False), (self.jc_base, 0.0),
                       (self.jc_t, 0.0), (self.jc_on, False), (self.jstamp, 0),
                       (self.jnext, INF)):  # fmt: skip
            lst.append(v)
        self.jheap.append([])
        self.slow_draw(j, t)
        self.queue.append(j)
        self.q_dirty = True
        return j

    def submit(self, kind: int, t: float) -> None:
        """The next submission of a fixed-work kind (Poisson arrivals)."""
        spec = self.kinds[kind]
        self.new_job(kind, t)
        self.to_submit[kind] -= 1
        if self.to_submit[kind] > 0:
            gap = spec["interarrival_hours"]
            self.push(t + (self.rnd.expovariate(1.0 / gap) if gap > 0 else 0.0), self.SUBMIT, kind)

    def start(self, j: int, t: float) -> None:
        for _ in range(self.need(j)):
            self.give(j, self.free.pop(), t)
        self.fill_standbys(j, t)
        self.j_start[j] = t
        if self.kinds[self.j_kind[j]]["work_hours"] is not None:
            self.running_fixed.add(j)
        self.j_hostsel[j] = True
        self.go_compute(j, t, restart=False)

    def fill_standbys(self, j: int, t: float) -> None:
        sb = self.j_sb[j]
        while len(sb) < self.sb_target(j) and self.free:
            node = self.free.pop()  # idle to idle: its exposure and failure stand
            self.state[node] = STANDBY
            self.node_job[node] = j
            sb.append(node)
        if len(sb) < self.sb_target(j):
            self.sb_short.add(j)

    def give(self, j, node, t):
        if not self.same_rate:
            self.settle(node, t)
        lst = self.j_nodes[j]
        self.pos[node] = len(lst)
        lst.append(node)
        self.state[node] = BUSY
        self.node_job[node] = j
        if not self.same_rate:
            self.jjoin[node] = self.jclock(j, t)
            self.arm(node, t)

    def go_compute(self, j, t, restart: bool):
        spec = self.kinds[self.j_kind[j]]
        delay = spec["restart_s"] / 3600.0 if restart else 0.0
        if self.j_hostsel[j]:
            delay += self.host_sel_h
            self.j_hostsel[j] = False
        ready = max(t + delay, self.j_warm_ready[j])
        self.j_state[j] = RUN
        self.j_ready[j] = ready
        self.j_ver[j] += 1
        if self.compute_clock:
            self.clock_start(j, t, ready)
        if self.lam_job > 0:
            at = ready if self.compute_clock else t
            self.push(at + self.rnd.expovariate(self.lam_job), self.JOBFAIL, j, self.j_ver[j])
        work = spec["work_hours"]
        if work is not None:
            rem, tau = work - self.j_done[j], spec["checkpoint_interval_hours"]
            ckpts = math.ceil(rem / tau - 1e-12) - 1 if tau > 0 else 0
            finish = self.after(j, ready, rem + max(ckpts, 0) * spec["checkpoint_cost_s"] / 3600.0)
            self.push(finish, self.DONE, j, self.j_ver[j])

    def finish(self, j: int, t: float) -> None:
        """A fixed-work job has done its work: its nodes and standbys go back."""
        spec = self.kinds[self.j_kind[j]]
        full, _, _ = self.computed(j, t)
        self.ckpt_gpu_h += full * spec["checkpoint_cost_s"] / 3600.0 * spec["gpus"]
        self.slow_lost(j, self.j_ready[j], t)
        self.close_episode(j, t)
        self.j_done[j] = spec["work_hours"]
        self.j_state[j], self.j_end[j] = DONE, t
        self.open_jobs -= 1
        self.running_fixed.discard(j)
        self.jc_on[j] = False
        for node in list(self.j_nodes[j]) + list(self.j_sb[j]):
            self.leave(node, t)
            self.to_pool(node, t)
        self.sb_short.discard(j)
        self.dispatch(t)

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
        el = self.elapsed(j, self.j_ready[j], t)  # at full speed (``slow``)
        if el <= 0:
            return 0, 0.0, el
        if tau == 0:
            return 0, el, el
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
            gained = comp if planned or tau == 0 else full * tau
            self.j_done[j] += gained
            self.ckpt_gpu_h += full * d * gpus
            rework = el - gained - full * d
            self.lost[cause] = self.lost.get(cause, 0.0) + max(rework, 0.0) * gpus
            self.slow_lost(j, self.j_ready[j], t)
        self.j_ver[j] += 1
        self.j_ready[j] = INF
        self.j_cause[j], self.j_tint[j] = cause, t
        if self.compute_clock and self.jc_on[j]:
            self.clock_stop(j, t)

    def lose_node(self, j, node, t):
        """Job ``j`` lost ``node``: one of its standbys steps in at once, else it waits for
        a replacement."""
        if self.j_sb[j]:
            sb = self.j_sb[j].pop()
            self.sb_short.add(j)
            self.leave_standby(sb)
            self.give(j, sb, t)
            return
        self.j_owed[j].append(node)
        if self.j_state[j] != WAIT:
            self.j_state[j] = WAIT
            self.waiters.append(j)
        self.sp_req += 1
        self.sp_miss += not self.hot

    def leave_standby(self, node: int) -> None:
        self.node_job[node] = -1

    def dispatch(self, t):
        """Replacements first (hot spare, then warm standby and free node in the scenario's
        order), then queued jobs."""
        while self.waiters and (self.hot or self.warm or self.free):
            j = self.waiters[0]
            owed = self.j_owed[j].pop()
            if self.hot:
                self.spares_changed(t)
                node, pool = self.hot.pop(), HOT
            elif self.warm and (self.warm_first or not self.free):
                node, pool = self.warm.pop(), WARM
                self.j_warm_ready[j] = max(self.j_warm_ready[j], t + self.warm_h)
            else:
                node, pool = self.free.pop(), FREE
                self.j_hostsel[j] = True
            if pool != FREE:  # the spare joins the job; the node it replaces refills its pool
                self.home[node] = FREE
                if self.state[owed] == DOWN or self.state[owed] == MAINT_DOWN:
                    self.home[owed] = pool
            self.give(j, node, t)
            if not self.j_owed[j]:
                self.waiters.popleft()
                if pool == FREE:
                    self.fill_standbys(j, t)
                self.go_compute(j, t, restart=True)
        if self.q_dirty and self.queue:
            self.q_dirty = False
            self.start_queued(t)

    def fits(self, j: int) -> bool:
        return self.need(j) + self.sb_target(j) <= len(self.free)

    def start_queued(self, t: float) -> None:
        q = self.queue
        while q and self.fits(q[0]):
            self.start(q.popleft(), t)
        if not q or not self.backfill:
            return
        shadow, extra = self.reservation(q[0], t)
        started = []
        for k, j in enumerate(q):
            if k == 0:
                continue
            if k > self.bf_depth or not self.free:
                break
            n = self.need(j) + self.sb_target(j)
            if n > len(self.free):
                continue
            work = self.kinds[self.j_kind[j]]["work_hours"]
            if work is not None and t + work <= shadow:
                started.append(j)
            elif n <= extra:
                extra -= n
                started.append(j)
            else:
                continue
            self.start(j, t)
        for j in started:
            q.remove(j)

    def reservation(self, head: int, t: float) -> tuple[float, int]:
        """(shadow time, nodes spare at it) of the queue's head (module docstring)."""
        need, have = self.need(head) + self.sb_target(head), len(self.free)
        ends = []
        for j in self.running_fixed:
            if self.j_state[j] in (RUN, WAIT):
                left = self.kinds[self.j_kind[j]]["work_hours"] - self.j_done[j]
                ends.append((t + left, len(self.j_nodes[j]) + len(self.j_sb[j])))
        ends.sort()
        for end, nodes in ends:
            have += nodes
            if have >= need:
                return end, have - need
        return INF, 0
