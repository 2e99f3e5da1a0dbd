"""Nodes of a fleet replication: their pools and placement policies, their exposure clocks and
the scheduling of their next failure, bad nodes (curing, turning bad) and retirement
policies. A mixin of ``engine.Sim``; the state it uses is set up there.

Exposure (``streams``): a node in a job ages on its job's clock (``Jobs.jclock``: wall time
while the job holds its nodes under the wall clock, computing time under the compute clock),
an idle one (free, spare, a job's standby) at ``idle_failure_factor`` of wall time under the
wall clock and not at all under the compute clock, a node out of service not at all. The next
failure of a node in a job sits in its job's heap keyed on the job clock, so a job that stops
or starts computing reschedules one event, not one per node.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections import deque

# node states; a node's home is the pool it returns to after repair (FREE, HOT or WARM)
FREE, BUSY, HOT, WARM, DOWN, RETIRED, MAINT_DOWN, STANDBY = range(8)
OUT = (DOWN, RETIRED, MAINT_DOWN)
INF = math.inf


class FreePool:
    """The free nodes, taken by the scenario's placement policy: ``first_free`` (any),
    ``fewest_failures`` (the fewest blamed failures first) or ``avoid_recent`` (the node that
    came back longest ago first, so a just-repaired node waits at the back). Queues with lazy
    deletion: a node's entry counts while its stamp is current."""

    def __init__(self, policy: str, nfail: list[int]):
        self.policy, self.nfail = policy, nfail
        self.set: set[int] = set()
        self.stamp: dict[int, int] = {}  # node -> its current entry (ordered policies)
        self.queues: dict[int, deque] = {}  # failures when added -> (node, stamp) queue
        self.seq = 0

    def __len__(self) -> int:
        return len(self.set) if self.policy == "first_free" else len(self.stamp)

    def add(self, node: int) -> None:
        if self.policy == "first_free":
            self.set.add(node)
            return
        self.seq += 1
        self.stamp[node] = self.seq
        k = self.nfail[node] if self.policy == "fewest_failures" else 0
        q = self.queues.get(k)
        if q is None:
            q = self.queues[k] = deque()
        q.append((node, self.seq))

    def discard(self, node: int) -> None:
        if self.policy == "first_free":
            self.set.discard(node)
        else:
            del self.stamp[node]

    def pop(self) -> int:
        if self.policy == "first_free":
            return self.set.pop()
        stamp = self.stamp
        while True:
            k = min(k for k, q in self.queues.items() if q)
            q = self.queues[k]
            while q:
                node, st = q.popleft()
                if stamp.get(node) == st:
                    del stamp[node]
                    return node


class Nodes:
    """Node bookkeeping of ``engine.Sim`` (module docstring)."""

    # ------------------------------------------------------------------ exposure
    def expo_now(self, i: int, t: float) -> float:
        s = self.state[i]
        if s in OUT:
            return self.expo[i]
        if self.compute_clock:
            if s == BUSY:
                return self.expo[i] + self.jclock(self.node_job[i], t) - self.jjoin[i]
            return self.expo[i]
        return self.expo[i] + (1.0 if s == BUSY else self.idle_rate) * (t - self.anchor[i])

    def settle(self, i: int, t: float) -> None:
        """Bring the node's exposure up to ``t`` and anchor its clock there."""
        self.expo[i] = self.expo_now(i, t)
        self.anchor[i] = t
        if self.compute_clock and self.state[i] == BUSY:
            self.jjoin[i] = self.jclock(self.node_job[i], t)

    def next_exposure(self, i: int) -> float:
        """Exposure of the node's next failure: its base stream, its excess stream when bad,
        a fault left in place."""
        x = self.latent_x[i]
        p, ts = self.ptr[i], self.times[i]
        if p < len(ts) and ts[p] < x:
            x = ts[p]
        if self.bad[i]:
            p, ts = self.xptr[i], self.xtimes[i]
            if p < len(ts) and ts[p] < x:
                x = ts[p]
        return x

    def take_failure(self, i: int) -> tuple[int, bool]:
        """Consume the node's next failure: (class index, whether from its excess stream)."""
        x = self.next_exposure(i)
        if self.latent_x[i] == x:
            self.latent_x[i] = INF
            return self.latent_c[i], False
        p, ts = self.ptr[i], self.times[i]
        if p < len(ts) and ts[p] == x:
            self.ptr[i] = p + 1
            return self.ncls[i][p], False
        p = self.xptr[i]
        self.xptr[i] = p + 1
        return self.xcls[i][p], True

    def arm(self, i: int, t: float) -> None:
        """Schedule the node's next failure from its current state (settled at ``t``). Under
        the wall clock one event per node, kept when its time has not changed (a node moving
        between a job and a pool at the same rate); under the compute clock a node in a job
        sits in its job's heap."""
        s = self.state[i]
        if s in OUT:
            return
        x = self.next_exposure(i)
        if self.compute_clock:
            self.nver[i] += 1
            if s == BUSY and x < INF:
                j = self.node_job[i]
                key = self.jjoin[i] + x - self.expo[i]
                heapq.heappush(self.jheap[j], (key, i, self.nver[i]))
                if key < self.jnext[j]:
                    self.jresched(j, t)
            return
        rate = 1.0 if s == BUSY else self.idle_rate
        when = t + (x - self.expo[i]) / rate if rate > 0 and x < INF else INF
        if abs(when - self.pend[i]) <= 1e-9 * (1.0 + abs(when)):
            return
        self.nver[i] += 1
        self.pend[i] = when
        if when <= self.H:
            self.push(when, self.FAIL_NODE, i, self.nver[i])

    def unarm(self, i: int) -> None:
        """Cancel the node's scheduled failure (it leaves service)."""
        self.nver[i] += 1
        self.pend[i] = INF

    def leave_fault(self, i: int, c: int) -> None:
        """A fault of class ``c`` stays in node ``i``: it fails again after an exponential
        exposure of mean ``refail_hours`` (none when that is infinite)."""
        if self.refail_h != INF and self.latent_x[i] == INF:
            self.latent_x[i] = self.expo[i] + self.rnd.expovariate(1.0 / self.refail_h)
            self.latent_c[i] = c

    # ------------------------------------------------------------------ bad nodes
    def make_bad(self, i: int, t: float) -> None:
        """Node ``i`` turns bad: its excess stream runs from its exposure at ``t`` on (the
        excess streams are drawn at the start, stationary, for every node that may turn bad)."""
        self.settle(i, t)
        self.bad[i] = True
        self.xptr[i] = bisect_left(self.xtimes[i], self.expo[i])
        self.arm(i, t)

    def appear(self, t: float) -> None:
        """A good node in service turns bad (``bad_nodes.appear_per_day``)."""
        for _ in range(64):  # a random node until a good one that is not retired
            i = self.rnd.randrange(self.n)
            if not self.bad[i] and self.state[i] != RETIRED:
                self.make_bad(i, t)
                break
        self.push(t + self.rnd.expovariate(self.appear_rate), self.APPEAR, 0)

    # ------------------------------------------------------------------ retirement
    def blame(self, node: int, t: float) -> None:
        """Record a failure blamed on ``node`` for placement and retirement."""
        self.nfail[node] += 1
        if self.fail_hist is not None:
            self.fail_hist[node].append(t)
        if self.score is not None:
            r = self.ret
            period = r["score_period_days"] * 24.0
            credit = math.floor((t - self.up_since[node]) / period) * r["score_credit"]
            self.score[node] += credit - r["score_penalty"]

    def should_retire(self, node: int, t: float) -> bool:
        if self.score is not None:
            return self.score[node] <= self.ret["score_threshold"]
        if self.retire_k:
            hist = [x for x in self.fail_hist[node] if x >= t - self.retire_w]
            self.fail_hist[node] = hist
            return len(hist) >= self.retire_k
        return False

    # ------------------------------------------------------------------ pools
    def spares_changed(self, t):
        self.sp_area += (self.spare_target - len(self.hot)) * (t - self.sp_last)
        self.sp_last = t

    def leave(self, node: int, t: float) -> int:
        """Take a node out of whatever holds it (pool, job or a job's standbys), its exposure
        settled (needless when every in-service state ages at one rate); returns its job or
        -1."""
        if not self.same_rate:
            self.settle(node, t)
        if self.compute_clock:
            self.nver[node] += 1  # its entry in its job's heap
        s = self.state[node]
        if s == FREE:
            self.free.discard(node)
        elif s == HOT:
            self.spares_changed(t)
            self.hot.discard(node)
        elif s == WARM:
            self.warm.discard(node)
        elif s == STANDBY:
            j = self.node_job[node]
            self.j_sb[j].remove(node)
            self.node_job[node] = -1
            self.sb_short.add(j)
        elif s == BUSY:
            j = self.node_job[node]
            lst = self.j_nodes[j]
            i, last = self.pos[node], lst[-1]
            lst[i], self.pos[last] = last, i
            lst.pop()
            self.node_job[node] = -1
            return j
        return -1

    def to_pool(self, node: int, t: float, back: bool = False) -> None:
        """A node goes to its home pool, or to a job short of its standbys: ``back`` into
        service (from repair or maintenance), else from a job (``leave`` settled it)."""
        home = self.home[node]
        if back:
            self.anchor[node] = t
        if home == HOT:
            self.spares_changed(t)
            self.state[node] = HOT
            self.hot.add(node)
        elif home == WARM:
            self.state[node] = WARM
            self.warm.add(node)
        elif not self.to_standby(node):
            self.state[node] = FREE
            self.free.add(node)
            self.q_dirty = True
        if back or not self.same_rate:
            self.arm(node, t)

    def to_standby(self, node: int) -> bool:
        """Give a free node to a running job short of standbys (AIReSim: a repaired server
        rejoins the job's standbys)."""
        while self.sb_short:
            j = next(iter(self.sb_short))
            if self.j_state[j] >= self.DONE_STATE or len(self.j_sb[j]) >= self.sb_target(j):
                self.sb_short.discard(j)
                continue
            self.state[node] = STANDBY
            self.node_job[node] = j
            self.j_sb[j].append(node)
            return True
        return False

    def take_down(self, node, t, state):
        self.settle(node, t)  # its exposure stops here
        j = self.leave(node, t)
        self.unarm(node)
        self.state[node] = state
        self.down_since[node] = t
        return j

    def retire(self, node, t):
        self.state[node] = RETIRED
        self.retired += 1
        home = self.home[node]
        if home == HOT and self.free:  # the spare pool keeps its size from the free nodes
            self.spares_changed(t)
            m = self.free.pop()
            self.settle(m, t)
            self.state[m] = self.home[m] = HOT
            self.hot.add(m)
            self.arm(m, t)
        elif home == WARM and self.free:
            m = self.free.pop()
            self.settle(m, t)
            self.state[m] = self.home[m] = WARM
            self.warm.add(m)
            self.arm(m, t)
