"""One job and its fault-tolerance assumptions (``Job``): the value the analytic projection, the
Monte Carlo, the what-if sweeps and ``goodput project`` all take, so each assumption and its
default is written once. Durations are in hours unless suffixed ``_s``."""

from __future__ import annotations

from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import RESTART_S
from analysis.assumptions import SLOW_DETECT_HOURS
from analysis.assumptions import TARGET_GPUS
from analysis.references import fleet

# Llama 3's run length (analysis/data/reference_fleets.toml): the default job horizon
LLAMA3_RUN_HOURS = fleet("llama3").days * 24.0
INT_KNOBS = ("n_gpus", "gpus_per_node", "spares")


@dataclass(frozen=True)
class Job:
    """A job on ``n_gpus`` GPUs and what it assumes about checkpoints, restarts and spares.

    ``wall_hours`` is the job's horizon: the window the Monte Carlo simulates and over which a
    fleet age other than stationary counts failures; ``work_hours``, when given, makes the Monte
    Carlo finish that much useful work instead. ``rate_multipliers`` scale class rates
    (``rate:<class>`` knobs; ``all`` scales every class)."""

    n_gpus: int = TARGET_GPUS
    gpus_per_node: int = GPUS_PER_NODE
    ckpt_cost_s: float = CKPT_COST_S
    ckpt_blocking_s: float | None = None  # async checkpoint: the part that stalls training
    restart_s: float = RESTART_S  # median in-job restart time
    interval_hours: float | None = None  # None = Daly's optimum at the point rates
    spares: int | None = None  # hot spare nodes; None = unlimited (never wait for a node)
    repair_hours: float = 24.0  # median time until a failed node is back in the pool
    rate_multipliers: dict = field(default_factory=dict)
    wall_hours: float = LLAMA3_RUN_HOURS
    work_hours: float | None = None
    restart_sigma: float = 0.0  # lognormal log-sd of the restart time (0 = fixed)
    requeue_prob: float = 0.0  # share of failures that need a full requeue
    queue_wait_s: float = 0.0  # median queue wait of a requeue
    queue_sigma: float = 0.0
    repair_sigma: float = 0.0
    # unit ages at job start: None = the rates' own fleet age (``ClassRates.starts``,
    # stationary unless set by ``fleet_age_rates.with_fleet_age``), or 'stationary' | 'new' |
    # hours
    initial_age: str | float | None = None
    counts: dict[str, tuple[str, int]] | None = None  # unit-count overrides
    # hours from a GPU running slow to its replacement, where the rates carry a fail-slow
    # process (``ClassRates.fail_slow``); math.inf: never detected
    slow_detect_hours: float = SLOW_DETECT_HOURS

    @property
    def blocking_s(self) -> float:
        """Seconds a checkpoint stalls training (the whole cost unless it is asynchronous)."""
        return self.ckpt_cost_s if self.ckpt_blocking_s is None else self.ckpt_blocking_s

    def with_knob(self, knob: str, value) -> Job:
        """The job with one knob set: a field, or ``rate:<class>`` (a rate multiplier)."""
        if knob.startswith("rate:"):
            cls = knob.split(":", 1)[1]
            return replace(self, rate_multipliers={**self.rate_multipliers, cls: float(value)})
        if knob not in asdict(self):
            raise ValueError(f"unknown knob {knob!r}")
        if knob in INT_KNOBS:
            value = int(value)
        return replace(self, **{knob: value})
