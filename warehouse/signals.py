"""What the GPU telemetry says about a GPU running slow, declared once: NVML's clock-event
reason bits (the bitmask DCGM exports as ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``, formerly
``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``, and nvidia-smi as ``clocks_event_reasons.active``,
formerly ``clocks_throttle_reasons.*``), the cause each bit stands for, and the metric names
that carry a GPU's SM clock and its maximum, and its PCIe link against the link's maximum.
Ingest stores these metrics as it reads them; the analysis decodes them here
(``reason_names``, ``CAUSE_OF``) and the simulator encodes its episodes with the same bits.

Bits: NVML ``nvml.h``, group ``nvmlClocksEventReasons`` (NVIDIA/go-nvml ``gen/nvml/nvml.h`` @
2f9e261, NVML 13.3.29, lines 3322-3404; the NVML API reference
docs.nvidia.com/deploy/nvml-api/group__nvmlClocksThrottleReasons.html lists the same values, and
DCGM's ``DCGM_CLOCKS_EVENT_REASON_*`` in ``dcgm_fields.h`` repeats them).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl


@dataclass(frozen=True)
class Reason:
    name: str  # NVML's, snake case; nvidia-smi's field is clocks_event_reasons.<name>
    bit: int
    exporter: str  # dcgm-exporter's ``clock_event`` label of DCGM_EXP_CLOCK_EVENTS_COUNT
    cause: str | None  # the slow-period cause it stands for; None: not a slowdown
    meaning: str


# HW slowdown without its thermal or power-brake sub-bit is the third trigger NVML names for it:
# power draw too high, the fast-trigger protection; SW power cap is the usual state of a
# power-limited GPU under load and counts only where it holds the clock down (POWER_CAP_RATIO).
REASONS = (
    Reason("gpu_idle", 0x1, "gpu_idle", None, "nothing runs; clocks drop to idle"),
    Reason("applications_clocks_setting", 0x2, "clocks_setting", None, "clocks set by the user"),
    Reason("sw_power_cap", 0x4, "power_cap", "power", "software power cap"),
    Reason("hw_slowdown", 0x8, "hw_slowdown", "power", "hardware slowdown (clocks / 2 or more)"),
    Reason("sync_boost", 0x10, "sync_boost", None, "held to its sync-boost group's clock"),
    Reason("sw_thermal_slowdown", 0x20, "sw_thermal", "thermal", "software thermal slowdown"),
    Reason("hw_thermal_slowdown", 0x40, "hw_thermal", "thermal", "hardware thermal slowdown"),
    Reason(
        "hw_power_brake_slowdown", 0x80, "hw_power_brake", "power", "external power brake asserted"
    ),
    Reason("display_clock_setting", 0x100, "display_clocks", None, "display clock setting"),
)
BIT = {r.name: r.bit for r in REASONS}
# a GPU runs slow while any of these is set (SW power cap: only below POWER_CAP_RATIO)
SLOW_MASK = sum(r.bit for r in REASONS if r.cause and r.name != "sw_power_cap")
POWER_CAP = BIT["sw_power_cap"]
POWER_CAP_RATIO = 0.85  # SW power cap is a slowdown when the SM clock is below this share of max
# the cause of a mask: the first of these bits set decides (the specific sub-reasons before
# HW slowdown, which NVML sets with each of them)
CAUSE_ORDER = (
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
    "hw_slowdown",
    "sw_power_cap",
)
CAUSE_OF = {r.name: r.cause for r in REASONS if r.cause}

# the bitmask, as a whole (DCGM's field under either name, nvidia-smi's ``.active``)
MASK_METRICS = (
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
    "clocks_event_reasons.active",
    "clocks_throttle_reasons.active",
)
# one bit each (nvidia-smi's Active / Not Active fields, read as 1 / 0)
BIT_METRICS = {
    f"{prefix}.{r.name}": r.bit
    for prefix in ("clocks_event_reasons", "clocks_throttle_reasons")
    for r in REASONS
}
REASON_METRICS = (*MASK_METRICS, *BIT_METRICS)
# dcgm-exporter's count of clock events in its window has one series per reason; gpu_samples has
# no column for it, so the metric name carries it (as the XID count's code):
# ``DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="hw_thermal"}``
CLOCK_EVENTS_COUNT_METRIC = "DCGM_EXP_CLOCK_EVENTS_COUNT"

SM_CLOCK_METRICS = ("DCGM_FI_DEV_SM_CLOCK", "clocks.current.sm", "clocks.sm")
MAX_SM_CLOCK_METRICS = ("DCGM_FI_DEV_MAX_SM_CLOCK", "clocks.max.sm", "clocks.max_sm")
PCIE_WIDTH_METRICS = ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "pcie.link.width.current")
PCIE_MAX_WIDTH_METRICS = ("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "pcie.link.width.max")
PCIE_GEN_METRICS = (
    "DCGM_FI_DEV_PCIE_LINK_GEN",
    "pcie.link.gen.current",
    "pcie.link.gen.gpucurrent",
)
PCIE_MAX_GEN_METRICS = (
    "DCGM_FI_DEV_PCIE_MAX_LINK_GEN",
    "pcie.link.gen.max",
    "pcie.link.gen.gpumax",
)
# what a pull fetches at scrape resolution wherever it changes (a state, not a level: an hour's
# rollup cannot say when it changed)
STATE_METRICS = (*MASK_METRICS, *PCIE_WIDTH_METRICS, *PCIE_GEN_METRICS)

# the causes a slow period is attributed to (analysis/slowness/attribution.py)
CAUSES = ("thermal", "power", "pcie", "nvlink", "host", "workload", "unknown")


def reason_names(mask: int) -> tuple[str, ...]:
    """The reasons a bitmask holds, in bit order."""
    return tuple(r.name for r in REASONS if mask & r.bit)


def cause(mask: int) -> str | None:
    """The cause a bitmask of a slow span stands for (``CAUSE_ORDER``), None when no slowdown
    bit is set."""
    for name in CAUSE_ORDER:
        if mask & BIT[name]:
            return CAUSE_OF[name]
    return None


def names_expr(mask: pl.Expr) -> pl.Expr:
    """``reason_names`` of an integer column, comma-joined ('' for 0)."""
    parts = [pl.when((mask & r.bit) != 0).then(pl.lit(r.name)) for r in REASONS]
    return pl.concat_str(parts, separator=",", ignore_nulls=True)


def cause_expr(mask: pl.Expr) -> pl.Expr:
    """``cause`` of an integer column (null: no slowdown bit)."""
    out = pl.lit(None, pl.Utf8)
    for name in reversed(CAUSE_ORDER):
        out = pl.when((mask & BIT[name]) != 0).then(pl.lit(CAUSE_OF[name])).otherwise(out)
    return out
