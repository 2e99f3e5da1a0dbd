"""Default assumptions of measured and projected goodput, written once.

Measured goodput (``analysis.goodput_measured``) and the projections use these when the user
states nothing else (``goodput build`` / ``goodput project`` flags, the Dagster resource). The
restart default is the same 600 s for both.
"""

from __future__ import annotations

CKPT_INTERVAL_S = 1800.0  # training checkpoints every 30 minutes of compute
CKPT_COST_S = 60.0  # each checkpoint stalls training for 60 s
RESTART_S = 600.0  # restoring state after a failure: 10 minutes
TARGET_GPUS = 16_384  # job size projections and the report focus on (Llama 3's run)
GPUS_PER_NODE = 8
# a fail-slow GPU is found and replaced this long after it starts running slow (projections;
# `goodput project --slow-detect`): NVIDIA's resiliency extension scores stragglers every few
# minutes, a person reading a dashboard takes about an hour
SLOW_DETECT_HOURS = 1.0
GPU_HOUR_COST = 0.0  # $ per GPU-hour the report prices lost GPU-hours at; 0: no cost shown
# attribution: node and hardware events from 15 min before an attempt's end to 5 min after it
# are evidence of what ended it
ATTRIBUTION_BEFORE_S = 900.0
ATTRIBUTION_AFTER_S = 300.0
LEMON_ALPHA = 0.05  # node_health: a node is a lemon when its multiple-testing adjusted p < this
# a projected job's units: at the stationary age mix of a fleet long in service (default), all
# new, or as old as the inventory says (analysis/fleet_age.py)
FLEET_AGES = ("stationary", "new", "observed")
DEFAULT_FLEET_AGE = "stationary"
