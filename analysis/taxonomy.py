"""The component taxonomy as the analyses use it: the classes, how many units of each a job
carries, which classes need no hardware swap, the interruption scopes, and the published
Llama 3 interruption table with its one folding into our classes.

The class list and the units of each class a node carries are declared with the columns
(``warehouse.schemas.COMPONENT_CLASSES``, ``UNITS``) so that ingest and the simulator can use
them too; they are re-exported here. Everything else in this module is
written once and imported by projection, the Monte Carlo, the report and the simulator.
"""

from __future__ import annotations

import polars as pl

from analysis import references
from warehouse.schemas import COMPONENT_CLASSES
from warehouse.schemas import DEFAULT_UNIT
from warehouse.schemas import UNIT_SCOPES  # noqa: F401  (re-exported)
from warehouse.schemas import UNITS

CLASSES = COMPONENT_CLASSES


# Classes whose failure needs no hardware swap (the job restarts on the same nodes).
NON_HARDWARE = frozenset({"software", "host_os", "unknown"})

# Two vocabularies, each named once and never standing in for the other:
# - the cause class (``interruptions.cause_class``): the component of the taxonomy an
#   interruption is attributed to; an application's own failure (exit code, OOM, an
#   application XID) is class ``software`` (application / NCCL), as in docs/design.md's taxonomy;
# - the failure domain (``interruptions.failure_domain``): who failed, ``infrastructure``, the
#   job itself (``WORKLOAD_DOMAIN``) or ``unknown``.
# The report, the CLI and ``goodput sql`` print both as stored: a cause is its class, the jobs'
# own failures are named by their domain.
WORKLOAD_DOMAIN = "workload"
DOMAINS = ("infrastructure", WORKLOAD_DOMAIN, "unknown")
NONE_LABEL = "(none)"  # how every reading names a missing partition, account, node or cause

# Interruption scopes of a projection (``goodput project --scope``):
#   hardware        the fitted component classes only;
#   infrastructure  + every other class measured in ``interruptions`` outside the workload
#                   domain (software/NCCL hangs, host OS, unknown): everything except the
#                   job's own failures;
#   all             + the job's own failures (the workload domain: exit codes, OOM) as one
#                   rate of their own, per job-hour, the projection's row ``WORKLOAD`` (named
#                   for the domain it counts, not a cause class).
SCOPES = ("hardware", "infrastructure", "all")
DEFAULT_SCOPE = "infrastructure"
WORKLOAD = WORKLOAD_DOMAIN


def shown_cause() -> pl.Expr:
    """``cause_class`` of an interruption as every reading shows it (report, CLI, trend, the same
    word ``goodput sql`` reads): the class as stored; a missing class is ``unknown``."""
    return pl.col("cause_class").fill_null("unknown").alias("cause_class")


# Llama 3 405B pre-training ("The Llama 3 Herd of Models", table 5): 419 unexpected
# interruptions in a 54-day run on 16,384 H100 GPUs (2,048 nodes of 8); the run and its count
# are the published figures of analysis/data/reference_fleets.toml (``analysis.references``).
# Each row is (label as published, interruptions, our class). The folding is a judgement, made
# once: GSP and silent data corruption are GPU-board faults; "network switch/cable" is the IB
# fabric; NCCL watchdog and dependency failures are software; the thermal interface is
# cooling; chassis and IO-board faults have no class of their own and count as unknown.
LLAMA3 = references.fleet("llama3")
LLAMA3_DAYS = LLAMA3.days
LLAMA3_GPUS = LLAMA3.gpus
LLAMA3_NODES = LLAMA3.nodes
LLAMA3_GPUS_PER_NODE = LLAMA3_GPUS // LLAMA3_NODES
LLAMA3_HOURS = LLAMA3_DAYS * 24.0
LLAMA3_TABLE: tuple[tuple[str, int, str], ...] = (
    ("Faulty GPU", 148, "gpu"),
    ("GPU HBM3 memory", 72, "gpu_memory"),
    ("Software bug", 54, "software"),
    ("Network switch/cable", 35, "ib_link"),
    ("Host maintenance", 32, "host_os"),
    ("GPU SRAM memory", 19, "gpu_sram"),
    ("GPU system processor (GSP)", 17, "gpu"),
    ("NIC", 7, "nic"),
    ("NCCL watchdog timeouts", 7, "software"),
    ("Silent data corruption", 6, "gpu"),
    ("GPU thermal interface + sensor", 6, "cooling"),
    ("SSD", 3, "storage"),
    ("Power supply", 3, "psu"),
    ("Server chassis", 2, "unknown"),
    ("IO expansion board", 2, "unknown"),
    ("Dependency", 2, "software"),
    ("CPU", 2, "cpu"),
    ("System memory", 2, "host_memory"),
)


def llama3_published(label: str) -> int:
    """Interruptions of one published Llama 3 category, by its published label."""
    return next(n for lab, n, _ in LLAMA3_TABLE if lab == label)


def llama3_mix() -> dict[str, int]:
    """Llama 3 interruptions per class of our taxonomy (the one folding), largest first."""
    mix: dict[str, int] = {}
    for _, n, cls in LLAMA3_TABLE:
        mix[cls] = mix.get(cls, 0) + n
    return dict(sorted(mix.items(), key=lambda kv: -kv[1]))


def llama3_rates_frame() -> pl.DataFrame:
    """The Llama 3 mix as a rates table (the ``goodput project --rates`` CSV columns):
    component_class, events, exposure_hours (unit-hours of the run), unit (gpu | node)."""
    mix = llama3_mix()
    unit = [UNITS.get(c, DEFAULT_UNIT)[0] for c in mix]
    units = {"gpu": LLAMA3_GPUS, "node": LLAMA3_NODES}
    return pl.DataFrame(
        {
            "component_class": list(mix),
            "events": list(mix.values()),
            "exposure_hours": [units[u] * LLAMA3_HOURS for u in unit],
            "unit": unit,
        }
    )
