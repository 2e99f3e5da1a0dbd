"""NVIDIA's XID catalogue mapped to the project's component classes and severities.

The facts (code, mnemonic, immediate and investigatory resolution) are NVIDIA's published
catalogue, shipped as ``ingest/data/nvidia_xid_catalog.csv``. What the project adds is two
tables, applied in order, so that every decision is visible in one place:

Component class (first match wins):
  1. ``CLASS_OVERRIDES``: codes whose class the catalogue's words do not give (application
     faults NVIDIA files under RESTART_APP/IGNORE, driver self-tests).
  2. ``MNEMONIC_CLASS``: a regular expression over the mnemonic (``NVLINK`` -> nvlink,
     ``ECC``/``DRAM``/``FB_`` -> gpu_memory, ``GSP_`` -> gpu ...).
  3. ``RESOLUTION_CLASS``: the resolution buckets that name the culprit (``CHECK_APP/CUDA`` ->
     software, ``INVESTIGATE_SW`` / ``UPDATE_SWFW`` / ``RESTART_VM`` / ``CHECK_UVM`` -> host_os).
  4. otherwise ``gpu``: the remaining codes are faults of a GPU engine.

Severity, from NVIDIA's immediate action (``ACTION_SEVERITY``), then ``SEVERITY_OVERRIDES``:
  fatal    the GPU or node must be reset, rebooted or repaired before it is trusted again
           (RESET_GPU, RESTART_BM, RESTART_VM, CONTACT_SUPPORT, WORKFLOW_XID_48: a DBE needs a
           reset for the row remap);
  critical the running application is lost but the hardware recovers (RESTART_APP, the NVLink
           workflows, CHECK_UVM); NVLink lines that say Fatal / Nonfatal refine this per line
           in ``ingest.formats.kernel``;
  warning  needs a look, not an immediate action (CHECK_MECHANICALS, UPDATE_SWFW, and
           WORKFLOW_XID_45: a 45 is usually the echo of another XID);
  info     IGNORE and XID_154 (a notice about another XID's recovery action).
Codes 162-172 carry no published action yet; their severity comes from the overrides.

Codes outside the catalogue keep their number with class ``unknown`` (``UNKNOWN_XID``).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

import polars as pl

from warehouse.schemas import COMPONENT_CLASSES

CATALOG_RESOURCE = "data/nvidia_xid_catalog.csv"

CLASSES = COMPONENT_CLASSES  # declared with the columns in warehouse.schemas
SEVERITIES = ("fatal", "critical", "warning", "info")

CLASS_OVERRIDES: dict[int, str] = {
    13: "software",  # GR exception: NVIDIA's WORKFLOW_XID_13 -> user application bug
    31: "software",  # MMU fault: WORKFLOW_XID_31 -> illegal address in the application
    43: "software",  # channel reset after an application fault (GPU keeps serving)
    45: "software",  # preemptive channel removal: the job was torn down (echo of another XID)
    14: "host_os",  # ROBUST_CHANNEL_FAKE_ERROR: injected by the driver for testing
    106: "host_os",  # SMBPBI test message
    107: "host_os",  # SMBPBI test message (silent)
    87: "host_os",  # driver telemetry report
}

MNEMONIC_CLASS: tuple[tuple[str, str], ...] = (
    (r"GSP_", "gpu"),  # GSP firmware RPC timeout / error (docs/design.md: GSP counts as gpu)
    (r"NVLINK|^ALI_TRAINING|^C2C_", "nvlink"),  # incl. NVLink-C2C and link training
    (r"SRAM|^LTC_", "gpu_sram"),  # on-die SRAM / L2 cache
    (r"ECC|DRAM|^FB_|SBE|RESOURCE_RETIREMENT|GPU_MEMORY|CONTAINED_ERROR", "gpu_memory"),
    (r"TEMP", "cooling"),
    (r"PWR", "psu"),
    (r"^RESERVED", "unknown"),
)

RESOLUTION_CLASS: dict[str, str] = {
    "CHECK_APP/CUDA": "software",
    "INVESTIGATE_SW": "host_os",
    "INVESTIGATE_SW_USER": "host_os",
    "UPDATE_SWFW": "host_os",
    "RESTART_VM": "host_os",
    "CHECK_UVM": "host_os",
}

ACTION_SEVERITY: dict[str, str] = {
    "RESET_GPU": "fatal",
    "RESTART_BM": "fatal",
    "RESTART_VM": "fatal",
    "CONTACT_SUPPORT": "fatal",
    "WORKFLOW_XID_48": "fatal",
    "RESTART_APP": "critical",
    "WORKFLOW_NVLINK_ERR": "critical",
    "WORKFLOW_NVLINK5_ERR": "critical",
    "CHECK_UVM": "critical",
    "WORKFLOW_XID_45": "warning",
    "CHECK_MECHANICALS": "warning",
    "UPDATE_SWFW": "warning",
    "IGNORE": "info",
    "XID_154": "info",
}

SEVERITY_OVERRIDES: dict[int, str] = {
    162: "info",  # PSHC re-engaged
    163: "warning",  # PSHC disengaged
    164: "warning",  # PSHC low lifetime
    165: "critical",  # PSHC zero lifetime
    166: "critical",  # NVLink secure crypto error
    167: "fatal",  # PCIe fatal timeout
    168: "warning",  # reduced GPU memory capacity (after retirements)
    169: "fatal",  # SEC2 halt
    170: "critical",  # NVLink secure, other
    171: "fatal",  # uncorrectable DRAM error
    172: "fatal",  # uncorrectable SRAM error
}

UNKNOWN_XID = {"component_class": "unknown", "severity": "warning", "action": None}
# NVSwitch driver errors (SXIDs) carry no catalogue of classes: every one is the switch's.
SXID_CLASS = "nvswitch"

SCHEMA = {
    "xid": pl.Int32,
    "mnemonic": pl.Utf8,
    "action": pl.Utf8,  # NVIDIA's immediate resolution bucket
    "investigatory_action": pl.Utf8,
    "component_class": pl.Utf8,
    "severity": pl.Utf8,
    "class_rule": pl.Utf8,  # which table decided the class (for review)
}


def _class_of(xid: int, mnemonic: str, immediate: str, investigatory: str) -> tuple[str, str]:
    if xid in CLASS_OVERRIDES:
        return CLASS_OVERRIDES[xid], "override"
    for pattern, cls in MNEMONIC_CLASS:
        if re.search(pattern, mnemonic):
            return cls, f"mnemonic ~ {pattern}"
    for bucket in (investigatory, immediate):
        if bucket in RESOLUTION_CLASS:
            return RESOLUTION_CLASS[bucket], f"resolution {bucket}"
    return "gpu", "default gpu engine"


def _severity_of(xid: int, immediate: str) -> str:
    if xid in SEVERITY_OVERRIDES:
        return SEVERITY_OVERRIDES[xid]
    return ACTION_SEVERITY.get(immediate, "critical")


@cache
def xid_catalog() -> pl.DataFrame:
    """One row per catalogued XID with its class, severity and NVIDIA's immediate action."""
    raw = pl.read_csv(
        resources.files("ingest").joinpath(CATALOG_RESOURCE).read_bytes(),
        schema_overrides={"xid": pl.Int32},
        infer_schema=False,
    ).with_columns(pl.col("xid").cast(pl.Int32))
    rows = []
    for r in raw.iter_rows(named=True):  # per catalogue entry (172), not per log line
        imm = (r["immediate_resolution"] or "").strip()
        inv = (r["investigatory_resolution"] or "").strip()
        cls, rule = _class_of(r["xid"], r["mnemonic"], imm, inv)
        rows.append(
            {
                "xid": r["xid"],
                "mnemonic": r["mnemonic"],
                "action": imm or None,
                "investigatory_action": inv or None,
                "component_class": cls,
                "severity": _severity_of(r["xid"], imm),
                "class_rule": rule,
            }
        )
    return pl.DataFrame(rows, schema=SCHEMA)


def lookup(xid: int) -> dict:
    """Class, severity and action of one XID; codes outside the catalogue are ``unknown``."""
    hit = xid_catalog().filter(pl.col("xid") == xid)
    if hit.height == 0:
        return {"xid": xid, "mnemonic": None, **UNKNOWN_XID}
    row = hit.row(0, named=True)
    return {k: row[k] for k in ("xid", "mnemonic", "component_class", "severity", "action")}
