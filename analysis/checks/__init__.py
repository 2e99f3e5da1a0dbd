"""The analyses' invariants as plain checks: the limits physics and bookkeeping put on the
numbers (no job holds more GPUs than its nodes carry, no node more GPUs than it has, jobs use at
most the installed GPU-hours, lost work at most the work done, fractions in [0, 1], every
slicing of the fleet adds up to the fleet, one cause vocabulary), and every failing class has a
converged selected fit, the sources' time spans agree.

Each takes a :class:`~warehouse.store.Warehouse` (and the settings it names) and returns a
:class:`~warehouse.checks.CheckResult` whose metadata holds ``violations`` (how many rows break
it) and ``examples`` (a few of them, in words). ``BUILD_CHECKS`` lists every check a build runs
and the asset each sits beside: ``pipelines/`` wraps them as Dagster asset checks, the report
evaluates them for its first screen (``evaluate``). The checks live by what they guard:
``accounting`` (GPUs and GPU-hours), ``sums`` (slicings that add up), ``bounds`` (fits, fractions
and spans); ``_utils`` holds what they share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from analysis.checks.accounting import attempt_gpus
from analysis.checks.accounting import capacity
from analysis.checks.accounting import lost_within_used
from analysis.checks.accounting import node_gpus
from analysis.checks.bounds import availability_bounds
from analysis.checks.bounds import fits_converged
from analysis.checks.bounds import goodput_bounds
from analysis.checks.bounds import spans_agree
from analysis.checks.sums import breakdown_sums
from analysis.checks.sums import cause_taxonomy
from analysis.checks.sums import trend_sums
from warehouse import checks as warehouse_checks
from warehouse.checks import CheckResult
from warehouse.store import Warehouse

ERROR, WARN = "error", "warn"


@dataclass(frozen=True)
class Invariant:
    """A check a build runs: its name (the Dagster check's), the asset it sits beside, the plain
    function, the tables it reads (it runs after their writers), the settings it takes (names
    of the build's configuration, passed as keywords), whether it blocks the assets after its
    asset, and its severity (a failed ``error`` check fails ``goodput build``)."""

    name: str
    asset: str
    check: Callable[..., CheckResult]
    reads: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    blocking: bool = False
    severity: str = ERROR

    @property
    def description(self) -> str:
        return self.check.description

    def run(self, wh: Warehouse, **settings) -> CheckResult:
        return self.check(wh, **{k: settings[k] for k in self.settings if k in settings})


_JOBS = ("job_attempts", "gpu_hourly", "component_history")  # gpu_hourly's asset writes gpu_daily
_OUTCOMES = ("job_attempts", "interruptions", "goodput_jobs")
BUILD_CHECKS: tuple[Invariant, ...] = (
    Invariant(
        "hourly_samples_check", "gpu_hourly", warehouse_checks.hourly_samples, ("gpu_samples",)
    ),
    Invariant("attempt_gpus_check", "goodput_jobs", attempt_gpus, _JOBS, ("gpus_per_node",)),
    Invariant("node_gpus_check", "goodput_jobs", node_gpus, _JOBS, ("gpus_per_node",)),
    Invariant(
        "capacity_check",
        "goodput_breakdown",
        capacity,
        (*_JOBS, "node_events", "hw_events"),
        ("gpus_per_node",),
    ),
    Invariant("lost_within_used_check", "interruptions", lost_within_used),
    Invariant("cause_taxonomy_check", "interruptions", cause_taxonomy),
    Invariant("breakdown_sums_check", "goodput_breakdown", breakdown_sums, _OUTCOMES),
    Invariant("trend_sums_check", "goodput_trend", trend_sums, _OUTCOMES),
    Invariant("fits_converged_check", "failure_rates", fits_converged, blocking=True),
    Invariant(
        "goodput_bounds_check",
        "goodput_projections",
        goodput_bounds,
        ("goodput_jobs", "goodput_breakdown", "goodput_trend"),
    ),
    Invariant("availability_bounds_check", "availability", availability_bounds),
    Invariant("source_spans_check", "component_lifetimes", spans_agree, severity=WARN),
    Invariant("duplicate_keys_check", "warehouse_catalog", warehouse_checks.duplicate_keys),
)


@dataclass(frozen=True)
class Evaluated:
    """One invariant evaluated: its result, or the error that kept it from running."""

    invariant: Invariant
    result: CheckResult | None
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.result is None or not self.result.passed


def evaluate(wh: Warehouse, **settings) -> list[Evaluated]:
    """Every ``BUILD_CHECKS`` invariant on ``wh`` with ``settings`` (e.g. gpus_per_node); a
    check that cannot run (a table it reads is unreadable) is reported as such, never as
    passed."""
    out = []
    for inv in BUILD_CHECKS:
        try:
            out.append(Evaluated(inv, inv.run(wh, **settings)))
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is shown, not passed
            out.append(Evaluated(inv, None, f"{type(exc).__name__}: {exc}".splitlines()[0]))
    return out
