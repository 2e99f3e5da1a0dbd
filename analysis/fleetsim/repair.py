"""Failures and repairs of a fleet replication: diagnosis and blame, automatic triage, the
manual repair line, repairs that silently fail, bad nodes cured, retirement after repair, and
maintenance windows. A mixin of ``engine.Sim``.

A hardware failure is pinned on a node with ``triage.diagnosis_prob``; undiagnosed, no node
is pulled, the job restarts on its nodes and the fault stays. Diagnosed, triage blames a
healthy node of the job instead with ``false_blame_prob`` (the faulty one stays in service);
the blamed node is pulled. After automatic triage it is fixed with ``detect_prob``, else it
joins the manual line. A repair silently fails with ``triage.silent_fail_prob`` (automatic;
absent: ``repair.silent_fail_prob``) or ``repair.silent_fail_prob`` (manual): the node
returns with its fault. A fault left in a node makes it fail again after an exponential
exposure of mean ``triage.refail_hours`` (infinite: it adds nothing to the node's own rate,
AIReSim's model) and a bad node that was not fixed stays bad; a repair that works clears the
fault and cures a bad node with ``bad_nodes.cure_prob``.
"""

from __future__ import annotations

from analysis.fleetsim.jobs import RUN
from analysis.fleetsim.jobs import WAIT
from analysis.fleetsim.nodes import BUSY
from analysis.fleetsim.nodes import DOWN
from analysis.fleetsim.nodes import INF
from analysis.fleetsim.nodes import MAINT_DOWN
from analysis.fleetsim.nodes import OUT

MAINTENANCE = "maintenance"  # the cause of planned downtime


class Repairs:
    """Failure and repair handling of ``engine.Sim`` (module docstring)."""

    def fire(self, i: int, t: float) -> None:
        """Node ``i`` reached its next failure."""
        self.settle(i, t)
        c, excess = self.take_failure(i)
        self.systematic += excess
        s = self.state[i]
        j = self.node_job[i] if s == BUSY else -1
        if self.hw[c]:
            self.node_failure(i, t, c, j)
        elif j >= 0:
            self.interrupt(j, t, self.classes[c])
            if self.j_state[j] == RUN:
                self.go_compute(j, t, restart=True)
        if self.state[i] not in OUT:
            self.arm(i, t)

    def node_failure(self, node, t, c, busy_job):
        """A hardware failure of ``node`` (class index ``c``): diagnosis, blame, the blamed
        node pulled and its job given a replacement (module docstring)."""
        self.failures += 1
        cause = self.classes[c]
        if self.diagnose < 1.0 and self.rnd.random() >= self.diagnose:
            self.leave_fault(node, c)  # nobody pulled: the job restarts on its nodes
            if busy_job >= 0:
                self.interrupt(busy_job, t, cause)
                if self.j_state[busy_job] == RUN:
                    self.go_compute(busy_job, t, restart=True)
            return
        blamed = node
        if busy_job >= 0 and self.blame_p > 0 and self.rnd.random() < self.blame_p:
            others = self.j_nodes[busy_job]
            if len(others) > 1:
                while blamed == node:
                    blamed = others[self.rnd.randrange(len(others))]
                self.leave_fault(node, c)
        self.blame(blamed, t)
        if busy_job >= 0:
            self.interrupt(busy_job, t, cause)
        self.pull_c[blamed] = c
        j = self.take_down(blamed, t, DOWN)
        self.push(t + self.triage(), self.TRIAGE, blamed)
        if j >= 0:
            self.lose_node(j, blamed, t)
            if self.j_state[j] == RUN:
                self.go_compute(j, t, restart=True)
        self.dispatch(t)

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

    # ------------------------------------------------------------------ repair
    def triaged(self, node, t):
        if self.rnd.random() < self.detect:
            self.repaired(node, t, False)
        else:
            self.to_line(node, t)

    def to_line(self, node, t):
        if self.busy_techs < self.techs:
            self.busy_techs += 1
            self.push(t + self.repair(), self.REPAIRED, node, 1)
        else:
            self.queue_changed(t)
            self.line.append((node, t))

    def queue_changed(self, t):
        self.q_area += len(self.line) * (t - self.q_last)
        self.q_last = t

    def repaired(self, node, t, manual):
        if manual:
            if self.line:
                self.queue_changed(t)
                nxt, since = self.line.popleft()
                self.waits += t - since
                self.n_waits += 1
                self.push(t + self.repair(), self.REPAIRED, nxt, 1)
            else:
                self.busy_techs -= 1
        self.down_hours += t - self.down_since[node]
        p = self.silent_manual if manual else self.silent_auto
        if p > 0 and self.rnd.random() < p:
            self.silent += 1  # the node returns with its fault (and stays bad)
            self.leave_fault(node, self.pull_c[node])
        else:
            self.latent_x[node] = INF
            if self.bad[node] and (self.cure >= 1.0 or self.rnd.random() < self.cure):
                self.bad[node] = False
                self.cures += 1
        if self.should_retire(node, t):
            self.retire(node, t)
            self.dispatch(t)
            return
        self.up_since[node] = t
        self.to_pool(node, t, back=True)
        self.dispatch(t)

    # ------------------------------------------------------------------ maintenance
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
                if self.j_state[j] == RUN:
                    self.go_compute(j, t, restart=True)
        self.push(t + m["hours"], self.MAINT_END, g)
        self.push(t + m["every_days"] * 24.0, self.MAINT, g)
        self.dispatch(t)

    def maintenance_end(self, g, t):
        m = self.maint
        lo = g * m["group_nodes"]
        for node in range(lo, min(lo + m["group_nodes"], self.n)):
            if self.state[node] == MAINT_DOWN:
                self.maint_hours += t - self.down_since[node]
                self.to_pool(node, t, back=True)
        self.dispatch(t)
