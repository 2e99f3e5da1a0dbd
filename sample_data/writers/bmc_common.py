"""The BMC's System Event Log records of the simulated fleet, shared by the IPMI and Redfish
writers (as ``ingest/bmc_common.py`` is shared by their parsers)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

from sample_data.fault_codes import sel_sensor_by_class
from sample_data.model import Fleet

# A SEL record: (time, order, sensor type, sensor number, event, direction, extra, Redfish
# severity, fault index or -1). ``order`` puts host power records before a fault's records and
# those before housekeeping ones at the same second.
SelRecord = tuple[float, int, str, int, str, str, str, str, int]


def _power_cycle(t_off: float, t_on: float) -> list[SelRecord]:
    """The host's power going off and coming back (a repair or a maintenance window)."""
    return [
        (t_off, 0, "Power Unit", 0x01, "Power off/down", "Asserted", "", "OK", -1),
        (t_on, 0, "Power Unit", 0x01, "Power off/down", "Deasserted", "", "OK", -1),
    ]


def _event_records(f: Fleet, codes: list[dict]) -> dict[int, list[SelRecord]]:
    """Per node: each fault's sensor asserting and deasserting at its repair, then the power
    cycles of repairs and of maintenance windows."""
    sensors = sel_sensor_by_class()
    per_node: dict[int, list[SelRecord]] = defaultdict(list)
    for i, flt in enumerate(f.faults):
        sensor = sensors.get(flt["cls"])
        if sensor is None:
            continue
        st, num = sensor.ipmi_type, sensor.number + f.slot_index[flt["slot"]]
        desc = codes[i]["code"]
        extra = sensor.reading_for(flt["fatal"])
        sev = "Critical" if flt["fatal"] else "Warning"
        per_node[flt["node"]].append((flt["time"], 1, st, num, desc, "Asserted", extra, sev, i))
        per_node[flt["node"]].append((flt["t_rep"], 1, st, num, desc, "Deasserted", "", "OK", -1))
    for flt in f.faults:
        if flt["fatal"] and not flt["secondary"]:
            per_node[flt["node"]] += _power_cycle(flt["t_off"] + 30, flt["t_rep"] - 60)
    for m in f.maint:
        per_node[m["node"]] += _power_cycle(m["start"] + 60, m["end"] - 120)
    return per_node


def _housekeeping_records(horizon: float, rng: np.random.Generator) -> list[SelRecord]:
    """One node's records no fault caused: the log's last reset before the window, and
    inlet-temperature warnings that clear by themselves (about one every ten days)."""
    rows: list[SelRecord] = [
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
    k = int(rng.poisson(horizon / (10 * 86400.0)))
    for t in np.sort(rng.uniform(0, horizon, k)):
        s = 0x30 + int(rng.integers(0, 4))
        high = "Upper Non-critical going high"
        rows.append(
            (
                float(t),
                2,
                "Temperature",
                s,
                high,
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
                high,
                "Deasserted",
                "Reading 84 < Threshold 85 degrees C",
                "OK",
                -1,
            )
        )
    return rows


def sel_rows(f: Fleet, codes: list[dict], rng: np.random.Generator) -> list[list[SelRecord]]:
    """Per node, its SEL records (``SelRecord``) in log order. The IPMI SEL and the Redfish SEL
    LogEntryCollection both list these."""
    H = f.horizon
    per_node = _event_records(f, codes)
    out = []
    for n in range(f.nodes):
        rows = _housekeeping_records(H, rng) + [r for r in per_node[n] if r[0] < H]
        rows.sort(key=lambda r: (r[0], r[1], r[2], r[3], r[5]))
        out.append(rows)
    return out


def log_entries(f: Fleet, sel_rows: list[list[SelRecord]]) -> Iterator[tuple[str, list[tuple]]]:
    """Per host: its name and its records as (record id from 1, UTC time struct, record)."""
    for n, rows in enumerate(sel_rows):
        entries = [
            (rid, time.gmtime(round(f.start_epoch + r[0])), r) for rid, r in enumerate(rows, 1)
        ]
        yield f.hosts[n], entries
