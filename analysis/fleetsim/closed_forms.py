"""Closed forms the fleet simulator is validated against (tests/test_fleetsim.py), each
written once.

- Erlang B (the loss formula): K servers, offered load a = arrival rate x mean holding time;
  the share of arrivals that find every server busy. It is the Poisson(a) distribution
  truncated at K, evaluated at K (scipy.stats.poisson), and insensitive to the holding-time
  law. In the fleet: K hot spares, each failure of a node in a job borrows one until the
  failed node is repaired (``engine``: a repaired node returns to the pool its replacement
  came from).
- Erlang C and the M/M/c queue: c technicians, Poisson arrivals at rate lam, exponential
  repairs at rate mu: the probability of waiting C = c B / (c - a (1 - B)) with B = Erlang B
  (c, a), mean wait Wq = C / (c mu - lam) and mean queue length Lq = lam Wq (Little).
- Meta's expected ETTR (Kokolis et al., "Revisiting Reliability in Large-Scale Machine
  Learning Research Clusters", HPCA 2025, arXiv 2410.21680: its analytical estimate of ETTR as
  a function of job parameters): a job of N nodes, each failing at rate r (Poisson), that
  checkpoints every dt at no cost and pays a restart overhead u0 per failure has
  ETTR ~ 1 - N r (u0 + dt / 2): each failure costs the restart and on average half a
  checkpoint interval of lost work. First order: it drops the (N r (u0 + dt/2))^2 terms that
  Daly's exact wall time keeps. (Written from the model's statement of these assumptions; the
  paper's own text was not at hand to quote its section and equation number.)
"""

from __future__ import annotations

import numpy as np


def erlang_b(servers, load):
    """Blocking probability of an M/G/K/K loss system with offered load ``load``."""
    from scipy import stats

    return stats.poisson.pmf(servers, load) / stats.poisson.cdf(servers, load)


def erlang_c(servers, load):
    """Probability that an arrival waits in an M/M/c queue (load < servers)."""
    b = erlang_b(servers, load)
    return servers * b / (servers - load * (1.0 - b))


def mmc_wait(lam, mu, servers) -> tuple[float, float]:
    """(mean wait in queue Wq, mean queue length Lq) of the M/M/c queue."""
    c = erlang_c(servers, lam / mu)
    wq = c / (servers * mu - lam)
    return float(wq), float(lam * wq)


def meta_ettr(n_nodes, rate_per_node_hour, interval_hours, restart_hours):
    """Meta's first-order expected ETTR (module docstring)."""
    lam = np.asarray(n_nodes, float) * np.asarray(rate_per_node_hour, float)
    return 1.0 - lam * (np.asarray(restart_hours, float) + np.asarray(interval_hours, float) / 2)
