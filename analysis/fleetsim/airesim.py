"""An AIReSim configuration (karthikp-ubc/airesim, its ``config.yaml``: minutes and failures
per minute) as a fleet scenario with the same semantics, so its published numbers can be
reproduced (tests/test_fleetsim_airesim.py, benchmarks/bench_fleetsim_airesim.py).

The mapping (docs/fleetsim.md, reproducing AIReSim):
- failures strike only while the job computes (``failure_clock: compute``); a server fails at
  ``random_failure_rate``, a bad one (``systematic_failure_fraction`` of all servers) at
  ``1 + systematic_failure_rate_multiplier`` times that (its random plus its systematic
  failures); a repair that works cures it (``cure_prob`` 1);
- one job of ``job_size`` servers with ``warm_standbys`` standbys and ``job_length`` of work;
  every step is durable (a failure loses no work) and each failure costs ``recovery_time``;
  placing it on free servers costs ``host_selection_time``;
- the working pool's other servers are free nodes, the spare pool is the fleet's warm standbys
  (activated in ``preemption_wait_time``), taken only when no free node is left;
- automatic repair (exponential, mean ``auto_repair_time``) fixes with probability
  ``1 - prob_auto_to_manual``, else manual repair (exponential, ``manual_repair_time``,
  unlimited technicians); each silently fails with ``auto_repair_fail_prob`` /
  ``manual_repair_fail_prob`` (a bad server stays bad; a good one's fault adds nothing:
  ``refail_hours`` infinite); ``diagnosis_probability`` and ``diagnosis_uncertainty`` are the
  diagnosis and false-blame probabilities;
- regeneration (every ``bad_server_regen_interval``, a tenth of ``systematic_failure_fraction``
  of the good servers turn bad) becomes a Poisson rate of the same mean.
Left out: AIReSim's non-exponential failure laws (it redraws each server's time to failure at
every restart, a different process from a renewal law); a preemption of a spare (20 min) runs
alongside the recovery here, after it in AIReSim (hours in 10,000).
"""

from __future__ import annotations

import math

import numpy as np

from analysis.class_rates import ClassRates
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import validate

SERVER = "server"  # the one failure class, counted once per node


def scenario(config: dict, horizon_factor: float = 3.0) -> tuple[dict, ClassRates]:
    """(validated scenario, rates) of an AIReSim ``config``; the horizon is ``horizon_factor``
    times the job's work (the replication ends when the job is done)."""
    c = config
    if c.get("failure_distribution", "exponential") != "exponential":
        raise ScenarioError("airesim: only its exponential failure distribution maps to a law")
    nodes = c["working_pool_size"] + c["spare_pool_size"]
    regen = 0.0
    if c.get("bad_server_regeneration"):
        good = nodes * (1 - c["systematic_failure_fraction"])
        regen = (
            good * c["systematic_failure_fraction"] * 0.1 / (c["bad_server_regen_interval"] / 1440)
        )
    work_h = c["job_length"] / 60.0
    raw = {
        "name": "airesim",
        "seed": int(c.get("seed", 0)),
        "horizon_days": work_h / 24.0 * horizon_factor,
        "failure_clock": "compute",
        "fleet": {"nodes": nodes, "gpus_per_node": 8, "hot_spares": 0,
                  "warm_standbys": c["spare_pool_size"],
                  "warm_activation_hours": c["preemption_wait_time"] / 60.0,
                  "warm_before_free": False},
        "jobs": [{"gpus": c["job_size"] * 8, "count": 1, "standbys": c["warm_standbys"],
                  "work_hours": work_h, "checkpoint_interval_hours": 0, "checkpoint_cost_s": 0,
                  "restart_s": c["recovery_time"] * 60.0}],
        "scheduler": {"host_selection_hours": c["host_selection_time"] / 60.0},
        "bad_nodes": {"share": c["systematic_failure_fraction"],
                      "multiplier": 1.0 + c["systematic_failure_rate_multiplier"],
                      "cure_prob": 1.0, "appear_per_day": regen},
        "triage": {"model": "exponential", "params": {"scale_hours": c["auto_repair_time"] / 60},
                   "detect_prob": 1.0 - c["prob_auto_to_manual"],
                   "silent_fail_prob": c["auto_repair_fail_prob"],
                   "diagnosis_prob": c.get("diagnosis_probability", 1.0),
                   "false_blame_prob": c.get("diagnosis_uncertainty", 0.0),
                   "refail_hours": math.inf},
        "repair": {"model": "exponential",
                   "params": {"scale_hours": c["manual_repair_time"] / 60},
                   "silent_fail_prob": c["manual_repair_fail_prob"]},
        "replications": {"min": max(2, int(c.get("num_replications", 30))),
                         "max": max(2, int(c.get("max_replications", 500))),
                         "rel_halfwidth": c.get("relative_accuracy", 0.05),
                         "fit_uncertainty": False},
    }  # fmt: skip
    rate = c["random_failure_rate"] * 60.0  # per server-hour
    rates = ClassRates((SERVER,), np.array([rate]), counts={SERVER: ("node", 1)})
    return validate(raw), rates


def ideal_hours(config: dict) -> float:
    """The job's wall time without a failure (its work), hours."""
    return config["job_length"] / 60.0
