"""Failure streams of the fleet's nodes, drawn in bulk before a replication runs.

A node's failures are a renewal process per unit (``montecarlo.failure_events``: stationary
fleet age, a failed unit renewed) in the node's own **exposure time**: the hours its units
were exposed, which advance only while the node is in service (``engine``: at rate 1 in a
job, ``idle_failure_factor`` idle, 0 while out of service or, under the compute clock, while
its job is not computing). A failure therefore never falls in a node's downtime: a unit's age
stops while its node is out, and the renewed unit's life starts when the node returns, which
is exact for every law (docs/fleetsim.md, aged laws). The horizon in exposure time is the
replication's wall-clock horizon, which no node's exposure can pass.

A bad node (``bad_nodes``) fails ``multiplier`` times as often: on top of its base stream it
has an excess stream of the same laws at ``multiplier - 1`` times their speed (AIReSim's
random plus systematic failures); curing it drops the excess stream, a node turning bad takes
its (stationary) excess stream up from its current exposure.
"""

from __future__ import annotations

import numpy as np

from analysis.class_rates import UNIT_COUNTS
from analysis.montecarlo import by_owner_and_time
from analysis.montecarlo import failure_events
from analysis.projection import unit_counts
from analysis.taxonomy import DEFAULT_UNIT


class Streams:
    """The node-scope classes of ``rates`` and the per-node units of each, drawn on demand."""

    def __init__(self, rates, gpus_per_node: int):
        table = {**UNIT_COUNTS, **(rates.counts or {})}
        scopes = [table.get(c, DEFAULT_UNIT)[0] for c in rates.classes]
        units = unit_counts(rates.classes, gpus_per_node, gpus_per_node, rates.counts)[:, 0]
        self.rates = rates
        self.node_cls = [
            c
            for c, (s, r, ref) in enumerate(zip(scopes, rates.rate, rates.law_rate, strict=True))
            if s != "job" and r > 0 and ref > 0
        ]
        self.units = units
        self.job_cls = [i for i, s in enumerate(scopes) if s == "job" and rates.rate[i] > 0]
        self.job_rates = [float(rates.rate[i]) for i in self.job_cls]

    def draw(self, speed: np.ndarray, horizon: np.ndarray, rng, offset=None):
        """Per node (rows of ``speed``, law-speed factors), its failures over ``horizon``
        exposure hours: (times lists, class-index lists), shifted by ``offset`` per node."""
        r = self.rates
        nodes = speed.size
        t_all, n_all, c_all = [], [], []
        for c in self.node_cls:
            f = (speed * (r.rate[c] / r.law_rate[c]))[:, None]
            fail, _ = failure_events(
                f, [r.laws[c]], [r.starts[c]], np.array([self.units[c]]), np.array([True]),
                horizon, rng,
            )  # fmt: skip
            node, k = np.nonzero(np.isfinite(fail))
            t_all.append(fail[node, k])
            n_all.append(node)
            c_all.append(np.full(node.size, c))
        t, n, c = by_owner_and_time(t_all, n_all, c_all)
        if offset is not None:
            t = t + offset[n]
        cuts = np.searchsorted(n, np.arange(nodes + 1))
        tl, cl = t.tolist(), c.tolist()
        times = [tl[cuts[i] : cuts[i + 1]] for i in range(nodes)]
        classes = [cl[cuts[i] : cuts[i + 1]] for i in range(nodes)]
        return times, classes
