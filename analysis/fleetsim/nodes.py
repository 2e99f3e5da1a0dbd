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

import numpy as np

# node states; a node's home is the pool it returns to after repair (FREE, HOT or WARM)
FREE, BUSY, HOT, WARM, DOWN, RETIRED, MAINT_DOWN, STANDBY = range(8)
OUT = (DOWN, RETIRED, MAINT_DOWN)
INF = math.inf


class FreePool:
    """The free nodes, taken by the scenario's placement policy: ``first_free`` (any),
    ``fewest_failures`` (the fewest blamed failures first) or ``avoid_recent`` (the node that
    came back longest ago first, so a just-repaired node waits at the back)."""

    def __init__(self, policy: str, nfail: list[int]):
        self.policy, self.nfail, self.n = policy, nfail, 0
        self.nodes = set() if policy == "first_free" else {}
        self.buckets: dict[int, dict] = {}

    def __len__(self) -> int:
        return self.n

    def add(self, node: int) -> None:
        self.n += 1
        if self.policy == "first_free":
            self.nodes.add(node)
        elif self.policy == "avoid_recent":
            self.nodes[node] = None
        else:
            self.buckets.setdefault(self.nfail[node], {})[node] = None

    def discard(self, node: int) -> None:
        if self.policy == "first_free":
            self.nodes.discard(node)
        elif self.policy == "avoid_recent":
            del self.nodes[node]
        else:
            del self.buckets[self.nfail[node]][node]
        self.n -= 1

    def pop(self) -> int:
        self.n -= 1
        if self.policy == "first_free":
            return self.nodes.pop()
        if self.policy == "avoid_recent":
            node = next(iter(self.nodes))
            del self.nodes[node]
            return node
        k = min(k for k, b in self.buckets.items() if b)
        b = self.buckets[k]
        node = next(iter(b))
        del b[node]
        return node


class Nodes:
    """Node bookkeeping of ``engine.Sim`` (module docstring)."""

    # ------------------------------------------------------------------ exposure
    def expo_now(self, i: int, t: float) -> float:
        s = self.state[i]
        if s == BUSY:
            return self.expo[i] + self.jclock(self.node_job[i], t) - self.jjoin[i]
        if self.idle_rate > 0 and s not in OUT:
            return self.expo[i] + self.idle_rate * (t - self.anchor[i])
        return self.expo[i]

    def settle(self, i: int, t: float) -> None:
        """Bring the node's exposure up to ``t`` and anchor its clock there."""
        self.expo[i] = self.expo_now(i, t)
        self.anchor[i] = t
        if self.state[i] == BUSY:
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
        """Schedule the node's next failure from its current state (settled at ``t``)."""
        self.nver[i] += 1
        s = self.state[i]
        if s in OUT:
            return
        x = self.next_exposure(i)
        if x == INF:
            return
        if s == BUSY:
            j = self.node_job[i]
            key = self.jjoin[i] + x - self.expo[i]
            heapq.heappush(self.jheap[j], (key, i, self.nver[i]))
            if key < self.jnext[j]:
                self.jresched(j, t)
        elif self.idle_rate > 0:
            self.push(t + (x - self.expo[i]) / self.idle_rate, self.FAIL_IDLE, i, self.nver[i])

    def leave_fault(self, i: int, c: int) -> None:
        """A fault of class ``c`` stays in node ``i``: it fails again after an exponential
        exposure of mean ``refail_hours`` (none when that is infinite)."""
        if self.refail_h != INF and self.latent_x[i] == INF:
            self.latent_x[i] = self.expo[i] + self.rnd.expovariate(1.0 / self.refail_h)
            self.latent_c[i] = c

    # ------------------------------------------------------------------ bad nodes
    def make_bad(self, nodes: np.ndarray, t: float) -> None:
        """Nodes turn bad: each draws its excess stream from its exposure at ``t`` on."""
        if not len(nodes):
            return
        e = np.array([self.expo_now(i, t) for i in nodes])
        speed = np.full(len(nodes), self.bad_mult - 1.0)
        times, cls = self.streams.draw(speed, np.maximum(self.H - e, 0.0), self.nprng, e)
        for k, i in enumerate(nodes.tolist()):
            self.settle(i, t)
            self.bad[i] = True
            self.xtimes[i], self.xcls[i], self.xptr[i] = times[k], cls[k], 0
            self.arm(i, t)

    def appear(self, t: float) -> None:
        """A good node in service turns bad (``bad_nodes.appear_per_day``)."""
        for _ in range(64):  # a random node until a good one that is not retired
            i = self.rnd.randrange(self.n)
            if not self.bad[i] and self.state[i] != RETIRED:
                self.make_bad(np.array([i]), t)
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
        settled; returns its job or -1."""
        self.settle(node, t)
        self.nver[node] += 1
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

    def to_pool(self, node: int, t: float) -> None:
        """A node in service goes to its home pool, or to a job short of its standbys."""
        home = self.home[node]
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
        j = self.leave(node, t)
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
