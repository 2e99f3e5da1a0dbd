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
- Compute-clock useful fraction: failures (rate 1/M) strike only while the job computes, a
  restart R cannot fail. A segment of tau work and delta checkpoint is attempted until it
  runs failure-free: e^{(tau+delta)/M} - 1 failures on average, each costing the computing it
  lost (M (e^{(tau+delta)/M} - 1) in all) and R, so the wall time per segment is
  (M + R)(e^{(tau+delta)/M} - 1) and the useful fraction tau over that; with every step
  durable (tau -> 0, delta = 0) it is M / (M + R). Daly's wall-clock model
  (``projection.useful_fraction``) has M e^{R/M} in place of M + R: a restart can fail.
- Alternating renewal: a unit whose lifetimes X (any law) alternate with downtimes D, its age
  stopped while down, fails at the long-run rate 1 / (E X + E D) and is up a share
  E X / (E X + E D) of the time (the renewal-reward theorem).
- Bad nodes cured by their first repair (cure probability 1, instant repair): a node failing at
  m r until its first failure and at r after it has E N(T) = (1 - e^{-m r T}) (1 - 1/m) + r T
  failures over an exposure T (the first failure, plus r times the exposure after it).
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


def compute_clock_fraction(interval_hours, ckpt_hours, restart_hours, mtti_hours):
    """Useful fraction of a job whose failures strike only while it computes (docstring);
    interval 0 (every step durable, no checkpoint cost) gives M / (M + R)."""
    tau, d, r, m = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (interval_hours, ckpt_hours, restart_hours, mtti_hours))
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        segment = np.where(
            tau > 0, (m + r) * np.expm1((tau + d) / m) / np.where(tau > 0, tau, 1), 0
        )
    return np.where(tau > 0, 1.0 / segment, m / (m + r))


def alternating_renewal(mean_up_hours, mean_down_hours) -> tuple[float, float]:
    """(long-run failures per hour, availability) of an up/down alternating renewal process."""
    cycle = float(mean_up_hours) + float(mean_down_hours)
    return 1.0 / cycle, float(mean_up_hours) / cycle


def cured_bad_node_failures(rate, multiplier, exposure_hours):
    """Expected failures of a bad node cured by its first repair (module docstring)."""
    r, m, t = float(rate), float(multiplier), float(exposure_hours)
    return -np.expm1(-m * r * t) * (1 - 1 / m) + r * t
