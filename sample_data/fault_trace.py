"""A fault trace with known truth, as operators publish theirs: per server, faults with a
hierarchical cause (level, class, description), each a ``fault_start`` and a ``fault_end`` record
(JSON lines, nested ``fault_type``), times in days after the trace's start. For the health-event
tests and benchmark (``tests/test_health_events*.py``, ``benchmarks/bench_health_events.py``).

Each server's faults follow one another (a fault starts after the previous one ended), with
exponential gaps and lognormal repair times; a fault whose end would fall after the trace's end
has no ``fault_end`` record (still open when the trace was cut). Records are written in time
order across servers, as an operator's log is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
import orjson
import polars as pl

# (level, class, description) of the faults, with their weights
CAUSES = (
    (("Hardware", "GPU", "XID 79 GPU has fallen off the bus"), 0.22),
    (("Hardware", "GPU", "XID 48 double-bit ECC error"), 0.14),
    (("Hardware", "HBM", "row remap failure"), 0.10),
    (("Hardware", "DIMM", "uncorrectable memory error"), 0.08),
    (("Hardware", "PSU", "power supply failure"), 0.06),
    (("Network", "NIC", "InfiniBand link down"), 0.12),
    (("Software", "Driver", "driver hang"), 0.18),
    (("Facilities", "Cooling", "inlet over temperature"), 0.10),
)
ORIGIN = datetime(2025, 1, 1)
DAY_DECIMALS = 6  # a time is written as days with this many decimals (0.0864 s)


@dataclass(frozen=True)
class Trace:
    """The trace's records (``node_id``, ``event_time`` in days, ``event_type``, ``fault_type``)
    in file order, and the faults they were made from (host, level, class, desc, start_day,
    end_day: null when the trace ends first)."""

    records: pl.DataFrame
    faults: pl.DataFrame
    servers: int
    days: float

    def ndjson(self) -> bytes:
        rows = self.records.to_dicts()
        return b"".join(orjson.dumps(r) + b"\n" for r in rows)


def fault_trace(
    servers: int = 300,
    days: float = 365.0,
    faults_per_server_year: float = 6.0,
    median_repair_hours: float = 6.0,
    repair_sigma: float = 1.0,
    seed: int = 44,
) -> Trace:
    rng = np.random.default_rng(seed)
    mean_gap = 365.0 / faults_per_server_year
    names = [c for c, _ in CAUSES]
    weights = np.array([w for _, w in CAUSES])
    rows = []
    for s in range(servers):
        t = rng.exponential(mean_gap)
        while t < days:
            level, cls, desc = names[rng.choice(len(names), p=weights / weights.sum())]
            repair = rng.lognormal(np.log(median_repair_hours / 24.0), repair_sigma)
            start = round(t, DAY_DECIMALS)
            end = round(t + repair, DAY_DECIMALS)
            rows.append((f"srv-{s + 1:04d}", level, cls, desc, start, end if end < days else None))
            t = t + repair + rng.exponential(mean_gap)
    faults = pl.DataFrame(
        rows,
        schema={
            "host": pl.Utf8,
            "level": pl.Utf8,
            "class": pl.Utf8,
            "desc": pl.Utf8,
            "start_day": pl.Float64,
            "end_day": pl.Float64,
        },
        orient="row",
    )
    kind = {"start_day": "fault_start", "end_day": "fault_end"}
    records = (
        pl.concat(
            [
                faults.select(
                    node_id="host",
                    event_time=c,
                    event_type=pl.lit(kind[c]),
                    fault_type=pl.struct(Level="level", Class="class", Desc="desc"),
                )
                for c in kind
            ]
        )
        .drop_nulls("event_time")
        .sort("event_time", "node_id", maintain_order=True)
    )
    return Trace(records, faults, servers, days)
