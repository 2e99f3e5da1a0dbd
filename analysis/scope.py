"""Scope: the slice of a fleet an analysis runs over (time range, cluster, partition, account).

``Scope`` is the value (``describe()`` a human line, ``slug`` a stable directory name);
``open_scope(wh, scope)`` checks it against the data and returns a ``ScopedWarehouse`` under
``<home>/scopes/<slug>/`` whose input tables are the parent's, filtered, so the unchanged
analysis code (attribution, lifetimes, fits, goodput, breakdowns, the report) runs over the
slice and writes its results apart from the whole fleet's.

What a scope keeps (the one statement of it; README "Scope" repeats it):

- Jobs (``job_attempts``) by their own cluster, partition and account, and by time: every
  attempt that overlaps [from, to), kept whole (not clipped at the bounds), so a job's lost
  GPU-hours and goodput are its own.
- Hosts: with a cluster, the hosts seen in that cluster (its jobs, node events, hardware events,
  telemetry); with a partition or account, the hosts that ran the scope's jobs in the window
  (both given: hosts meeting both). Hardware events, node events, telemetry, BMC readings and
  the inventory are restricted to those hosts; with only a time range, to no host list.
- Time: hardware and node events, telemetry and BMC readings dated in [from, to); the
  observation window (exposure of every fit) is [from, to) where given, else inferred from the
  scope's own records as for the whole fleet. Inventory rows are not cut by time: units
  installed before ``from`` enter left-truncated, as with ``--observed-from``.
- Ingest bookkeeping (manifest, quarantine, metric metadata) and checkpoint logs are not
  filtered (checkpoints join to the scope's jobs by job id).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import polars as pl

from warehouse.schemas import TABLES
from warehouse.scoped import ScopedWarehouse
from warehouse.store import literal_path

# Derived tables the warehouse steps (rollups, counter events) write: inputs of an analysis,
# read from the parent like the ingest tables; every other derived table is the scope's own.
ROLLUPS = ("gpu_hourly", "gpu_counter_changes", "gpu_sightings", "gpu_daily", "gpu_sample_times")
# table -> its time column, for the tables cut to [from, to)
TIMED = {
    "node_events": "time",
    "hw_events": "time",
    "gpu_samples": "time",
    "bmc_sensors": "time",
    "gpu_hourly": "hour",
    "gpu_counter_changes": "time",
    "gpu_sample_times": "hour",
}
HOST_TABLES = (
    "node_events",
    "hw_events",
    "gpu_samples",
    "bmc_sensors",
    "gpu_hourly",
    "gpu_counter_changes",
    "gpu_sightings",
    "gpu_daily",
    "component_history",
)
UNFILTERED = ("ingest_manifest", "quarantine", "metric_metadata", "checkpoints")
HOSTS_FILE = "hosts.parquet"
STATE_FILE = "scope.json"


class ScopeError(ValueError):
    """A scope the data cannot answer (unknown cluster, empty slice, from >= to): one line."""


@dataclass(frozen=True)
class Scope:
    start: datetime | None = None  # --from, inclusive (naive UTC)
    end: datetime | None = None  # --to, exclusive
    cluster: str | None = None
    partition: str | None = None
    account: str | None = None

    def __post_init__(self):
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ScopeError(
                f"--to ({self.end:%Y-%m-%d %H:%M}) must be after --from "
                f"({self.start:%Y-%m-%d %H:%M})"
            )

    @property
    def whole(self) -> bool:
        return all(v is None for v in asdict(self).values())

    def describe(self) -> str:
        """One human line: 'cluster c1, partition gpu, 2026-01-01 to 2026-02-01'."""
        parts = [
            f"{k} {v}"
            for k in ("cluster", "partition", "account")
            if (v := getattr(self, k)) is not None
        ]
        if self.start or self.end:
            parts.append(
                f"{_day(self.start) if self.start else 'start'} to "
                f"{_day(self.end) if self.end else 'end'}"
            )
        return ", ".join(parts) or "whole fleet"

    def header(self) -> str:
        """``describe()`` with what the slice keeps, for a report's header."""
        if self.whole:
            return self.describe()
        rules = []
        if self.start or self.end:
            rules.append(
                "job attempts overlapping the period, kept whole; events and exposure cut to it"
            )
        if self.cluster is not None:
            rules.append("hardware of the cluster's hosts")
        if self.partition is not None or self.account is not None:
            rules.append("hardware of the hosts that ran these jobs")
        return f"{self.describe()} ({'; '.join(rules)})"

    @property
    def slug(self) -> str:
        """A stable directory name: readable, plus a short hash of the exact values."""
        canon = json.dumps(
            {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in asdict(self).items()},
            sort_keys=True,
        )
        readable = re.sub(
            r"[^A-Za-z0-9._-]+", "-", self.describe().replace(", ", "_").replace(" to ", "--")
        ).strip("-")
        return f"{readable[:80]}-{hashlib.sha256(canon.encode()).hexdigest()[:8]}"

    def job_filter(self) -> str:
        """SQL over ``job_attempts``: the scope's attempts (overlapping [from, to), not clipped)."""
        conds = [
            f'"{k}" = {_lit(v)}'
            for k in ("cluster", "partition", "account")
            if (v := getattr(self, k)) is not None
        ]
        if self.start is not None:
            # [start, end) meets [from, to); an attempt with one time only counts where it is
            conds.append(
                f"(coalesce(end_time, start_time, submit_time) > {_ts(self.start)} "
                f"OR coalesce(start_time, submit_time, end_time) >= {_ts(self.start)})"
            )
        if self.end is not None:
            conds.append(f"coalesce(start_time, submit_time, end_time) < {_ts(self.end)}")
        return " AND ".join(conds) or "true"

    def time_filter(self, column: str) -> str | None:
        conds = []
        if self.start is not None:
            conds.append(f'"{column}" >= {_ts(self.start)}')
        if self.end is not None:
            conds.append(f'"{column}" < {_ts(self.end)}')
        return " AND ".join(conds) or None


def _day(t: datetime) -> str:
    return (
        f"{t:%Y-%m-%d}"
        if (t.hour, t.minute, t.second, t.microsecond) == (0, 0, 0, 0)
        else f"{t:%Y-%m-%d %H:%M}"
    )


def _lit(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def _ts(t: datetime) -> str:
    return f"TIMESTAMP '{t.isoformat(sep=' ')}'"


def scope_home(wh, scope: Scope) -> Path:
    return wh.home / "scopes" / scope.slug


def known_values(wh) -> dict[str, list[str]]:
    """The clusters, partitions and accounts the data names (for validation messages)."""
    out: dict[str, list[str]] = {}
    with wh.connect() as con:
        for col in ("cluster", "partition", "account"):
            sql = (
                f'SELECT DISTINCT "{col}" FROM ({wh.view_sql("job_attempts")}) '
                f'WHERE "{col}" IS NOT NULL'
            )
            if col == "cluster":
                for t in ("node_events", "hw_events", "gpu_sightings"):
                    if wh.files(t):
                        sql += (
                            f" UNION SELECT DISTINCT cluster FROM ({wh.view_sql(t)}) "
                            "WHERE cluster IS NOT NULL"
                        )
            out[col] = sorted(r[0] for r in con.execute(sql).fetchall())
    return out


def scope_hosts(wh, scope: Scope) -> list[str] | None:
    """The hosts the scope covers (None: no host restriction, a time range alone)."""
    if scope.cluster is None and scope.partition is None and scope.account is None:
        return None
    with wh.connect() as con:
        hosts = None
        if scope.cluster is not None:
            c = _lit(scope.cluster)
            parts = [
                (
                    f"SELECT unnest(nodes) AS host FROM ({wh.view_sql('job_attempts')}) WHERE "
                    f"cluster = {c}"
                )
            ]
            parts += [
                f"SELECT host FROM ({wh.view_sql(t)}) WHERE cluster = {c}"
                for t in ("node_events", "hw_events", "gpu_sightings")
                if wh.files(t)
            ]
            hosts = {r[0] for r in con.execute(" UNION ".join(parts)).fetchall() if r[0]}
        if scope.partition is not None or scope.account is not None:
            ran = {
                r[0]
                for r in con.execute(
                    f"SELECT DISTINCT unnest(nodes) FROM ({wh.view_sql('job_attempts')}) "
                    f"WHERE {scope.job_filter()}"
                ).fetchall()
                if r[0]
            }
            hosts = ran if hosts is None else hosts & ran
    return sorted(hosts)


def open_scope(wh, scope: Scope) -> ScopedWarehouse:
    """The scoped warehouse of ``scope`` over ``wh`` (its filters, its home). Raises
    ``ScopeError`` naming the known values for an unknown cluster / partition / account, and
    when the scope holds no job attempt and no host."""
    known = known_values(wh)
    for key in ("cluster", "partition", "account"):
        value = getattr(scope, key)
        if value is not None and value not in known[key]:
            names = ", ".join(known[key][:20]) + (" ..." if len(known[key]) > 20 else "") or "none"
            raise ScopeError(f"unknown {key} {value!r}; the data has: {names}")
    hosts = scope_hosts(wh, scope)
    with wh.connect() as con:
        jobs = con.execute(
            f"SELECT count(*) FROM ({wh.view_sql('job_attempts')}) WHERE {scope.job_filter()}"
        ).fetchall()[0][0]
    if not jobs and not hosts:
        raise ScopeError(
            f"scope {scope.describe()!r} holds no job attempt and no host{_data_span(wh)}"
        )
    home = scope_home(wh, scope)
    home.mkdir(parents=True, exist_ok=True)
    host_cond = None
    if hosts is not None:
        tmp = home / f".{HOSTS_FILE}.{os.getpid()}.tmp"
        pl.DataFrame({"host": hosts}, schema={"host": pl.Utf8}).write_parquet(tmp)
        os.replace(tmp, home / HOSTS_FILE)
        host_cond = (
            f"host IN (SELECT host FROM read_parquet({_lit(literal_path(str(home / HOSTS_FILE)))}))"
        )
    inputs: dict[str, str | None] = {}
    for name, spec in TABLES.items():
        if spec.kind != "ingest" and name not in ROLLUPS:
            continue
        if name == "job_attempts":
            inputs[name] = scope.job_filter()
            continue
        if name in UNFILTERED:
            inputs[name] = None
            continue
        conds = []
        if name in HOST_TABLES and host_cond:
            conds.append(host_cond)
        if name in TIMED and (t := scope.time_filter(TIMED[name])):
            conds.append(t)
        if name == "gpu_daily":  # whole days: those overlapping [from, to)
            if scope.start is not None:
                conds.append(f"date >= CAST({_ts(scope.start)} AS DATE)")
            if scope.end is not None:
                conds.append(f"date < {_ts(scope.end)}")
        if name == "gpu_sightings":
            if scope.start is not None:
                conds.append(f"last_seen >= {_ts(scope.start)}")
            if scope.end is not None:
                conds.append(f"first_seen < {_ts(scope.end)}")
        inputs[name] = " AND ".join(conds) or None
    return ScopedWarehouse(wh, home, inputs)


def _data_span(wh) -> str:
    """Where the jobs are, for the empty-scope message."""
    with wh.connect() as con:
        lo, hi = con.execute(
            f"SELECT min(start_time), max(end_time) FROM ({wh.view_sql('job_attempts')})"
        ).fetchall()[0]
    return "" if lo is None else f" (the jobs run {lo:%Y-%m-%d} to {hi:%Y-%m-%d})"


def input_fingerprint(wh, scoped: ScopedWarehouse) -> str:
    """A digest of the parent's files the scope reads (path, size, modification time): equal
    digests mean the scope's stored results are still those of the data."""
    h = hashlib.sha256()
    for name in sorted(scoped.inputs):
        for f, info in sorted(wh.fs.find(wh._path(name), detail=True).items()):
            if f.endswith(".parquet"):
                h.update(
                    (
                        f"{f}\0{info.get('size')}\0{info.get('mtime', info.get('LastModified'))}\n"
                    ).encode()
                )
    return h.hexdigest()


def is_fresh(wh, scoped: ScopedWarehouse, settings: dict) -> bool:
    """Whether the scope's results were built from the parent's current inputs with these
    settings."""
    try:
        state = json.loads((scoped.home / STATE_FILE).read_text())
    except (OSError, ValueError):
        return False
    return (
        state.get("inputs") == input_fingerprint(wh, scoped) and state.get("settings") == settings
    )


def mark_fresh(wh, scoped: ScopedWarehouse, scope: Scope, settings: dict) -> None:
    state = {
        "scope": scope.describe(),
        "inputs": input_fingerprint(wh, scoped),
        "settings": settings,
    }
    tmp = scoped.home / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, scoped.home / STATE_FILE)
