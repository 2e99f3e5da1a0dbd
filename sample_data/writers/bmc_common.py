"""The BMC's System Event Log records of the simulated fleet, shared by the IPMI and Redfish
writers (as ``ingest/bmc_common.py`` is shared by their parsers)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

from sample_data.model import Fleet

SEL_SENSOR = {  # class -> (sensor type, base sensor number, Redfish SensorType)
    "psu": ("Power Supply", 0x51, "Power Supply / Converter"),
    "host_memory": ("Memory", 0x87, "Memory"),
    "cpu": ("Processor", 0x04, "Processor"),
    "cooling": ("Fan", 0x30, "Fan"),
    "storage": ("Drive Slot / Bay", 0xA0, "Drive Slot/Bay"),
}


def sel_rows(f: Fleet, codes: list[dict], rng: np.random.Generator) -> list[list[tuple]]:
    """Per node, its SEL records in log order: (time, order, sensor type, sensor number, event,
    direction, extra, Redfish severity, fault index or -1). The IPMI SEL and the Redfish SEL
    LogEntryCollection both list these."""
    H = f.horizon
    per_node: dict[int, list] = defaultdict(
        list
    )  # (t, order, type, num, desc, dir, extra, sev, fault)
    for i, flt in enumerate(f.faults):
        c = flt["cls"]
        if c not in SEL_SENSOR:
            continue
        st, base, _ = SEL_SENSOR[c]
        idx = f.slot_index[flt["slot"]]
        num = base + idx
        desc = codes[i]["code"]
        extra = (
            "Reading 0 < Threshold 1500 RPM"
            if c == "cooling" and flt["fatal"]
            else ("Reading 2400 < Threshold 3000 RPM" if c == "cooling" else "")
        )
        sev = "Critical" if flt["fatal"] else "Warning"
        per_node[flt["node"]].append((flt["time"], 1, st, num, desc, "Asserted", extra, sev, i))
        per_node[flt["node"]].append((flt["t_rep"], 1, st, num, desc, "Deasserted", "", "OK", -1))
    for flt in f.faults:
        if flt["fatal"] and not flt["secondary"]:
            n = flt["node"]
            per_node[n].append(
                (
                    flt["t_off"] + 30,
                    0,
                    "Power Unit",
                    0x01,
                    "Power off/down",
                    "Asserted",
                    "",
                    "OK",
                    -1,
                )
            )
            per_node[n].append(
                (
                    flt["t_rep"] - 60,
                    0,
                    "Power Unit",
                    0x01,
                    "Power off/down",
                    "Deasserted",
                    "",
                    "OK",
                    -1,
                )
            )
    for m in f.maint:
        per_node[m["node"]].append(
            (m["start"] + 60, 0, "Power Unit", 0x01, "Power off/down", "Asserted", "", "OK", -1)
        )
        per_node[m["node"]].append(
            (m["end"] - 120, 0, "Power Unit", 0x01, "Power off/down", "Deasserted", "", "OK", -1)
        )
    out = []
    for n in range(f.nodes):
        rows = [
            (
                -float(rng.uniform(1, 30)) * 86400.0,
                0,
                "Event Logging Disabled",
                0x72,
                "Log area reset/cleared",
                "Asserted",
                "",
                "OK",
                -1,
            )
        ]
        k = int(rng.poisson(H / (10 * 86400.0)))
        for t in np.sort(rng.uniform(0, H, k)):
            s = 0x30 + int(rng.integers(0, 4))
            rows.append(
                (
                    float(t),
                    2,
                    "Temperature",
                    s,
                    "Upper Non-critical going high",
                    "Asserted",
                    "Reading 86 > Threshold 85 degrees C",
                    "Warning",
                    -1,
                )
            )
            rows.append(
                (
                    float(t) + float(rng.uniform(60, 900)),
                    2,
                    "Temperature",
                    s,
                    "Upper Non-critical going high",
                    "Deasserted",
                    "Reading 84 < Threshold 85 degrees C",
                    "OK",
                    -1,
                )
            )
        rows += [r for r in per_node[n] if r[0] < H]
        rows.sort(key=lambda r: (r[0], r[1], r[2], r[3], r[5]))
        out.append(rows)
    return out


def log_entries(f: Fleet, sel_rows: list[list[tuple]]) -> Iterator[tuple[str, list[tuple]]]:
    """Per host: its name and its records as (record id from 1, UTC time struct, record)."""
    for n, rows in enumerate(sel_rows):
        entries = [
            (rid, time.gmtime(round(f.start_epoch + r[0])), r) for rid, r in enumerate(rows, 1)
        ]
        yield f.hosts[n], entries
