"""The synthetic fleet's model: what it is made of and the laws its units fail by.

Owns the fleet's constants (cluster, nodes, GPUs, users, repair times), the fault laws a
:class:`CauseMix` (a published table of interruptions by cause) turns into per-class Weibull
rates, the :class:`Fleet` and :class:`Attempt` records the simulation fills in
(``sample_data.simulation``) and the writers read (``sample_data.writers``); the ground truth
built from them is ``sample_data.truth``. Internal times are float seconds from ``Fleet.start``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field

import numpy as np

from warehouse.schemas import UNITS

CLUSTER = "simfleet"
GPU_MODEL = "NVIDIA H100 80GB HBM3"
# PCI bus numbers of the 8 GPUs and their paired ConnectX NICs on an HGX H100 board.
GPU_PCI_BUS = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
NIC_PCI_BUS = ("1a", "29", "3b", "5c", "9b", "aa", "bb", "da")
K8S_NAMESPACE = "ml-train"


@dataclass(frozen=True)
class CauseMix:
    """A reference run's unexpected interruptions by cause, and its size: the fleet's fault rates
    are these counts per unit-hour of the reference run, times ``fault_scale``.

    ``table`` rows are (published label, interruptions, component class), e.g.
    ``analysis.taxonomy.LLAMA3_TABLE``; the caller injects it (sample_data does not import
    analysis)."""

    table: Sequence[tuple[str, int, str]]
    nodes: int
    hours: float
    gpus_per_node: int  # the reference run's nodes' GPUs: its units of a per-GPU class

    def count(self, classes: tuple[str, ...]) -> int:
        """Interruptions folded into any of ``classes``, less the causes the fleet does not
        model."""
        return sum(n for label, n, c in self.table if c in classes and label not in NOT_SIMULATED)


@dataclass(frozen=True)
class UnitClass:
    """How the fleet models one hardware class."""

    shape: float  # Weibull shape of the unit's lifetime
    repair_hours: tuple[float, float]  # median and log-sd of the repair time
    position: str  # the slot's name on its node
    serial_prefix: str  # "" for the GPU board's parts: they carry the board's serial
    nonfatal: float = 0.0  # share of faults that are warnings (the unit is hot-swapped later)
    crash: bool = False  # a fatal fault hangs or crashes the host at once (no drain delay)


# The simulated hardware classes, in slot order. Their counts come from the mix's folding, with
# the simulator's own detail: the GPU board class also takes the SRAM faults (one board), and
# the fabric's interruptions (network switch/cable + NIC) are split into NVLink and NVSwitch
# (``FABRIC_SPLIT``) and the IB links. Board swaps take longer to repair than a fan.
UNIT_CLASSES = {
    "gpu": UnitClass(0.8, (10.0, 0.7), "gpu{}", "165"),
    "gpu_memory": UnitClass(1.4, (10.0, 0.7), "gpu{}-hbm", ""),
    "nvlink": UnitClass(1.0, (8.0, 0.7), "gpu{}-nvlink", ""),
    "nvswitch": UnitClass(1.0, (16.0, 0.6), "nvswitch{}", "NVS"),
    "ib_link": UnitClass(1.0, (3.0, 0.6), "ib{}", "MT2238X", nonfatal=0.4),
    "psu": UnitClass(1.6, (3.0, 0.5), "psu{}", "PSU", crash=True),
    "cooling": UnitClass(1.0, (2.0, 0.5), "fan{}", "FAN", nonfatal=0.5, crash=True),
    "cpu": UnitClass(1.0, (12.0, 0.6), "cpu{}", "CPU", crash=True),
    "host_memory": UnitClass(1.0, (4.0, 0.5), "dimm{:02d}", "80AD", crash=True),
    "storage": UnitClass(1.0, (4.0, 0.5), "nvme{}", "S6CKNX"),
}
CLASSES = tuple(UNIT_CLASSES)
FOLDED_FROM = {"gpu": ("gpu", "gpu_sram"), "ib_link": ("ib_link", "nic")}
FABRIC_SPLIT = {"nvlink": 12, "nvswitch": 5}  # of the fabric's interruptions; the rest: ib_link
WORKLOAD_CLASSES = ("software",)  # application / NCCL hangs: the workload failures of jobs
# Published causes the fleet does not model: silent data corruption leaves no log line to find,
# and dependency failures are outside the fleet.
NOT_SIMULATED = ("Silent data corruption", "Dependency")
MODULE_CLASSES = ("gpu", "gpu_memory", "nvlink")  # one physical GPU board


def class_counts(mix: CauseMix) -> dict[str, int]:
    """Interruptions per simulated class in the reference run."""
    counts = {c: mix.count(FOLDED_FROM.get(c, (c,))) for c in CLASSES}
    counts.update(FABRIC_SPLIT)
    counts["ib_link"] -= sum(FABRIC_SPLIT.values())
    empty = [c for c, n in counts.items() if n <= 0]
    if empty:
        raise ValueError(
            f"the cause mix has no interruptions for {', '.join(empty)}: every simulated class "
            "needs some"
        )
    return counts


def software_rate_per_node_hour(mix: CauseMix) -> float:
    """Workload (software + NCCL watchdog) interruptions per node-hour in the reference run."""
    return mix.count(WORKLOAD_CLASSES) / (mix.nodes * mix.hours)


USERS = (
    ("alice", 10001, "llm"),
    ("bob", 10002, "llm"),
    ("carol", 10003, "vision"),
    ("dave", 10004, "vision"),
    ("erin", 10005, "speech"),
    ("frank", 10006, "research"),
    ("grace", 10007, "research"),
    ("heidi", 10008, "infra"),
)
TRAIN_USER = ("mlops", 10100, "llm")
CPUS_PER_NODE = 112
MEM_PER_NODE_MB = 2_000_000
MAX_YEARS_INSTALLED = 3.0
TEMP_SD_C = 2.0  # sd of the per-slot GPU temperature offset
GPU_TEMP_BETA = 0.5  # log hazard ratio of gpu failures per sd of that offset


def class_law(mix: CauseMix, cls: str, fault_scale: float) -> tuple[float, float, float]:
    """(shape, scale_hours, rate_per_unit_hour) so that the Weibull mean equals 1/rate."""
    shape = UNIT_CLASSES[cls].shape
    ref_units = units_per_node(cls, mix.gpus_per_node)
    rate = class_counts(mix)[cls] / (mix.nodes * ref_units * mix.hours) * fault_scale
    scale = 1.0 / rate / math.gamma(1.0 + 1.0 / shape)
    return shape, scale, rate


def units_per_node(cls: str, gpus_per_node: int) -> int:
    """A node's count of units of a class (``warehouse.schemas.UNITS``: per-GPU classes follow
    G)."""
    scope, count = UNITS[cls]
    return count * gpus_per_node if scope == "gpu" else count


def host_name(i: int) -> str:
    return f"gpu-node-{i + 1:03d}"


def ts(f: Fleet, t: float) -> str:
    """Seconds-from-start -> `YYYY-MM-DDTHH:MM:SS` UTC (Slurm and ground-truth layout)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(round(f.start_epoch + t)))


@dataclass
class Attempt:
    """One run of a job (a requeue/restart is a new attempt under the same job)."""

    scheduler: str
    key: int  # submission index before ids are assigned
    attempt: int
    name: str
    user: tuple
    partition: str
    submit: float
    start: float
    end: float | None  # None: still running at the end of the window
    state: str
    exit_code: str
    nodes: list[int]
    gpus: list[list[int]]  # GPU indices used on each node
    time_limit_min: int
    reason: str = ""
    cause: tuple = ()  # ("fault", idx) | ("maint", idx) | ("workload",)
    ckpt_s: int = 0
    overhead_s: float = 0.0  # start-up / restore time before the attempt computes (chains)
    array_task: int = -1
    job_id: str = ""
    job_raw: int = 0
    array_job_id: int = 0


@dataclass
class Fleet:
    """Everything the writers need, in plain Python/NumPy form."""

    start: str
    start_epoch: float
    horizon: float
    nodes: int
    gpus_per_node: int
    k8s_nodes: int
    seed: int
    fault_scale: float
    scrape_interval_s: int
    hosts: list[str]
    racks: list[str]
    slot_class: list[str] = field(default_factory=list)
    slot_node: list[int] = field(default_factory=list)
    slot_pos: list[str] = field(default_factory=list)
    slot_index: list[int] = field(default_factory=list)  # index within class on its node
    inst: list[dict] = field(default_factory=list)  # installations
    faults: list[dict] = field(default_factory=list)
    replacements: list[dict] = field(default_factory=list)
    maint: list[dict] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    laws: dict = field(default_factory=dict)
    unavailable: list[list[tuple]] = field(default_factory=list)  # per node (t0, t1, kind, ref)
    gpu_uuid_at: dict = field(default_factory=dict)  # (node, gpu) -> [(t_install, uuid, serial)]
    gpu_temp_offset: np.ndarray | None = None  # (node, gpu) airflow offset, C
    slot_scale_s: np.ndarray | None = None  # per-slot Weibull scale (s), covariate applied
    gpu_temp_beta: float = GPU_TEMP_BETA  # log hazard ratio per sd of the offset (0: no effect)
    fail_slow_rate: float = 0.0  # fail-slow episodes per 1,000 GPU-days (sample_data.fail_slow)
    slow_episodes: list = field(default_factory=list)  # its ``fail_slow.Episode``s
    step_log_s: float = 120.0  # about how long a line of a training job's log covers


def uuid_at(f: Fleet, node: int, gpu: int, t: float) -> tuple[str, str]:
    """UUID and board serial of the GPU in (node, gpu) at time t."""
    hist = f.gpu_uuid_at[(node, gpu)]
    cur = hist[0]
    for h in hist:
        if h[0] <= t:
            cur = h
    return cur[1], cur[2]


def true_laws(f: Fleet, laws: dict[str, tuple[float, float, float]]) -> None:
    """Fill ``f.laws``: per class the law, and the exposure and expected failures over each
    unit's observed at-risk span (the truth a survival fit should recover)."""
    G, H = f.gpus_per_node, f.horizon
    f.laws = {}
    for cls in CLASSES:
        k, eta_h, _ = laws[cls]
        f.laws[cls] = {
            "shape": k,
            "scale_hours": eta_h,
            "units_per_node": units_per_node(cls, G),
            "n_units_observed": 0,
            "exposure_unit_days": 0.0,
            "n_failures": 0,
            "_cumhaz": 0.0,
        }
    for inst in f.inst:
        cls = f.slot_class[inst["slot"]]
        law = f.laws[cls]
        t0 = max(inst["install"], 0.0)
        t1 = min(inst["fail"] if inst.get("failed") else inst.get("removed", H), H)
        if t1 <= t0:
            continue
        eta = float(f.slot_scale_s[inst["slot"]])
        a0, a1 = t0 - inst["install"], t1 - inst["install"]
        law["n_units_observed"] += 1
        law["exposure_unit_days"] += (t1 - t0) / 86400.0
        law["_cumhaz"] += (a1 / eta) ** law["shape"] - (a0 / eta) ** law["shape"]
        law["n_failures"] += int(bool(inst.get("failed")) and inst["fail"] < H)
    for law in f.laws.values():
        ch = law.pop("_cumhaz")
        exp_d = law["exposure_unit_days"]
        law["expected_failures"] = round(float(ch), 4)
        law["true_rate_per_1k_unit_days"] = round(1000.0 * float(ch) / exp_d, 6) if exp_d else 0.0
        law["exposure_unit_days"] = round(float(exp_d), 4)
        law["scale_hours"] = round(law["scale_hours"], 3)
