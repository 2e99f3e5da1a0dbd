"""What a simulated fault reports: its code (an XID, an SXID, an mlx5 event or a BMC SEL event),
how often each code of a class is drawn, and the text the hardware writes with it.

Which class a code belongs to is the product's fact, not the simulator's: XIDs are filed by
``ingest.xid_catalog``, mlx5 events by ``ingest.kernel_host_faults`` and SEL sensor types by
``ingest.sel_sensor_classes``, and the tables below are grouped by class through those
catalogs; every SXID is ``ingest.xid_catalog.SXID_CLASS``'s, as the kernel parser files it.
Reclassifying a code or a sensor type there moves it here too, so the ground truth and the
warehouse keep agreeing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import numpy as np

from ingest.kernel_host_faults import HOST_FAULTS
from ingest.sel_sensor_classes import SENSOR_TYPE_CLASS
from ingest.xid_catalog import SXID_CLASS
from ingest.xid_catalog import lookup
from sample_data.model import CLASSES
from sample_data.model import Fleet


class Xid(NamedTuple):
    """An XID a simulated GPU board reports."""

    code: str
    share: float  # of the faults of the XID's class (shares are normalised within a class)
    text: str  # the driver's message after the code; "GPU0" becomes the failing GPU
    echoed: bool  # the driver then tears down other GPUs' channels (XID 45 follow-ups)
    remaps_rows: bool = False  # a memory error whose row remap fails (DCGM's remap flag)


XIDS = (
    Xid("79", 0.7, "GPU has fallen off the bus.", True),
    Xid(
        "119",
        0.3,
        "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
        "(GSP_RM_CONTROL) (0x20801348 0x98).",
        False,
    ),
    Xid(
        "48",
        0.5,
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
        "at partition 6, subpartition 0.",
        True,
        remaps_rows=True,
    ),
    Xid("95", 0.3, "Uncontained: FBHUB. RST: Yes, D-RST: No", False, remaps_rows=True),
    Xid("94", 0.2, "Contained ECC error", False),
    Xid(
        "74",
        1.0,
        "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        True,
    ),
)
XID_BY_CODE = {x.code: x for x in XIDS}

SXID_TEXT = {  # drawn with equal shares
    "24007": "Fatal, Link 42 sourcetrack TCEN0 crumbstore ECC DBE Error",
    "12028": "Fatal, Link 17 egress non-posted PRIV error",
    "20034": "Fatal, Link 30 LTSSM Fault Up",
}
MLX5_SHARES = (("mlx5_link_down", 0.6), ("mlx5_port_module_error", 0.4))

# The kernel's own code of a host fault the BMC reports (the machine check of a CPU fault, ...):
# the fatal code the kernel parser files under the fault's class.
KERNEL_HOST_CODE = {cls: code for code, (_, cls, sev) in HOST_FAULTS.items() if sev == "fatal"}


@dataclass(frozen=True)
class SelSensor:
    """The BMC sensor a class's faults assert, in its IPMI and Redfish spellings."""

    ipmi_type: str  # ipmitool's sensor type; its class is ``SENSOR_TYPE_CLASS``'s
    number: int  # sensor number of the class's first unit (unit i reads number + i)
    redfish_type: str  # the same type as Redfish ``LogEntry.SensorType`` spells it
    event: str  # what a fatal fault asserts
    warning_event: str = ""  # what a non-fatal fault asserts ("": the same as ``event``)
    reading: str = ""  # the reading a fatal fault shows
    warning_reading: str = ""  # the reading a non-fatal fault shows

    def event_for(self, fatal: bool) -> str:
        return self.event if fatal or not self.warning_event else self.warning_event

    def reading_for(self, fatal: bool) -> str:
        return self.reading if fatal else self.warning_reading


SEL_SENSORS = (
    SelSensor("Power Supply", 0x51, "Power Supply / Converter", "Failure detected"),
    SelSensor("Memory", 0x87, "Memory", "Uncorrectable ECC"),
    SelSensor("Processor", 0x04, "Processor", "IERR"),
    SelSensor(
        "Fan",
        0x30,
        "Fan",
        "Lower Critical going low",
        "Lower Non-critical going low",
        "Reading 0 < Threshold 1500 RPM",
        "Reading 2400 < Threshold 3000 RPM",
    ),
    SelSensor("Drive Slot / Bay", 0xA0, "Drive Slot/Bay", "Drive Fault"),
)
REDFISH_SENSOR_TYPE = {s.ipmi_type: s.redfish_type for s in SEL_SENSORS}


@cache
def sel_sensor_by_class() -> dict[str, SelSensor]:
    """The SEL sensor of each class the BMC reports, by the product's sensor-type classes."""
    out: dict[str, SelSensor] = {}
    for s in SEL_SENSORS:
        cls = SENSOR_TYPE_CLASS[s.ipmi_type]
        if cls in out:
            raise ValueError(f"two SEL sensors report class {cls}: the simulator writes one")
        out[cls] = s
    return out


def _by_class(
    shares: tuple[tuple[str, float], ...], class_of
) -> dict[str, tuple[tuple[str, float], ...]]:
    """Codes grouped by the class ``class_of`` gives each, their shares normalised per class."""
    grouped: dict[str, list[tuple[str, float]]] = {}
    for code, share in shares:
        grouped.setdefault(class_of(code), []).append((code, share))
    return {
        cls: tuple((code, share / sum(s for _, s in group)) for code, share in group)
        for cls, group in grouped.items()
    }


@cache
def xid_shares_by_class() -> dict[str, tuple[tuple[str, float], ...]]:
    """The XIDs of each class, by the product's XID catalogue."""
    shares = tuple((x.code, x.share) for x in XIDS)
    return _by_class(shares, lambda code: lookup(int(code))["component_class"])


MLX5_BY_CLASS = _by_class(MLX5_SHARES, lambda code: HOST_FAULTS[code][1])


def _weighted(shares: tuple[tuple[str, float], ...], u: float) -> str:
    """The code a uniform draw ``u`` falls on, the shares laid end to end in order."""
    acc = 0.0
    for code, share in shares:
        acc += share
        if u < acc:
            return code
    return shares[-1][0]


def fault_code(cls: str, fatal: bool, u: float) -> str:
    """The code a fault of ``cls`` reports, from a uniform draw ``u``."""
    sensor = sel_sensor_by_class().get(cls)
    if sensor is not None:
        return sensor.event_for(fatal)
    if cls == SXID_CLASS:
        return tuple(SXID_TEXT)[int(u * len(SXID_TEXT))]
    if cls in MLX5_BY_CLASS:
        return _weighted(MLX5_BY_CLASS[cls], u)
    xids = xid_shares_by_class().get(cls)
    if xids is None:
        raise ValueError(
            f"no code reports class {cls}: the product's catalogs file none of the simulator's "
            "XIDs, mlx5 events or SEL sensors under it"
        )
    return _weighted(xids, u)


def check_every_class_reports() -> None:
    """Fail early, with the class named, when a catalog change leaves a simulated class silent."""
    for cls in CLASSES:
        fault_code(cls, True, 0.0)


def choose_codes(f: Fleet, rng: np.random.Generator) -> list[dict]:
    """Per fault: the code it reports and how its kernel lines look (multi-line context, XID 45
    follow-ups, the pid of the process that saw it)."""
    out = []
    for flt in f.faults:
        u = rng.uniform()
        out.append(
            {
                "code": fault_code(flt["cls"], flt["fatal"], u),
                "multiline": bool(rng.uniform() < 0.4),
                "followups": int(rng.integers(1, 4)) if rng.uniform() < 0.35 else 0,
                "pid": int(rng.integers(100000, 4000000)),
            }
        )
    return out
