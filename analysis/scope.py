"""Scope: the slice of a fleet a question is asked about (a time range, cluster, partition,
account, user), and the one statement of how each stored table is cut to it.

``Scope`` is the value (``describe()`` a human line, ``meta()`` the JSON object every scoped
output carries, ``slug`` a stable directory name). ``check_scope(wh, scope)`` refuses a scope
the data cannot answer. ``scope_conditions(scope, view)`` gives, per table, the SQL condition
that keeps the scope's rows of the whole fleet's stored table (``warehouse/scoped.py`` applies
them), so a scoped answer is the unscoped table filtered, never a second computation of it:

- Rows (``ROWS``) are filtered. Job attempts by their own cluster, partition, account and user,
  and by time: every attempt that overlaps [from, to), kept whole. Interruptions: those of an
  attempt in scope that end in [from, to), with the cause the whole fleet's attribution gave them
  (a hardware event just outside the window still explains an interruption inside it). Job
  chains (``goodput_jobs``): by the cluster and user of the chain and the partition and account
  of its last attempt, ending in [from, to). Host-keyed tables (events, telemetry, BMC
  readings, the inventory, node failure episodes): with a cluster, the hosts seen in that
  cluster (its jobs, node events, hardware events, telemetry); with a partition, account or
  user, the hosts that ran the scope's jobs in the window (both: hosts meeting both); dated rows
  in [from, to). Inventory rows are not cut by time (units installed before ``from`` enter
  left-truncated).
- Ingest bookkeeping (``UNFILTERED``: manifest, quarantine, pull log, metric metadata) is shown
  whole.
- Every other table is an aggregate over the fleet (fits, MTBF per period, availability, node
  health, breakdowns, trends, projections): no row of it belongs to a slice, so a scope
  recomputes what a command needs of it from its rows (``RECOMPUTED``, ``SCOPE_NEEDS``), into
  its own home ``HOME/scopes/<slug>/`` (``scope_warehouse``), reused while the whole fleet's
  files and the settings are unchanged (``fresh_tables``); a filtered view of the fleet
  (``filtered``) refuses to show the whole fleet's aggregates as the scope's.

Hours: a scope's period is [from, to) clipped to the data's window (``job_window``: the fleet's
first job start to its last job end), so a month's scope has the month's own hours.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict
from dataclasses import dataclass
from datetime import datetime

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import RESTART_S
from analysis.assumptions import TARGET_GPUS

DIMENSIONS = ("cluster", "partition", "account", "user")  # the job-keyed scope dimensions
# how the reading commands group and set side by side (here, beside the dimensions, so that the
# command line declares its choices without importing the analyses)
PERIODS = {"week": "1w", "month": "1mo"}  # calendar weeks start on Monday (ISO), months on the 1st
LOSS_KEYS = ("cause", "domain", *DIMENSIONS, "node")
COMPARE_BY = (*DIMENSIONS, "cluster,partition")
JOB_KEYS = ("cluster", "scheduler", "job_id", "attempt")
CHAIN_KEYS = ("cluster", "scheduler", "job_id")
UNFILTERED = ("ingest_manifest", "quarantine", "metric_metadata", "pull_log")

# host-keyed tables -> (time column cut to [from, to), or None: not cut by time)
HOSTED: dict[str, str | None] = {
    "node_events": "time",
    "hw_events": "time",
    "gpu_samples": "time",
    "gpu_rollups": "hour",
    "gpu_hourly": "hour",
    "gpu_counter_changes": "time",
    "bmc_sensors": "time",
    "failures": "start_time",
    "node_failures": "time",
    "health_events": "time",
    "health_event_pairs": "time",
    "gpu_signal_spans": "start_time",
    "gpu_daily": None,  # whole days overlapping [from, to) (below)
    "gpu_sightings": None,  # sightings overlapping [from, to) (below)
    "component_history": None,  # not cut: units installed before `from` enter left-truncated
}
# a job's logs and per-job results, by job id (logs may name no cluster) -> the columns whose
# span must meet [from, to) (one column: a record dated in it)
JOB_LOGGED: dict[str, tuple[str, str]] = {
    "checkpoints": ("time", "time"),
    "training_steps": ("time", "time"),
    "step_timers": ("time", "time"),
    "rank_scores": ("time", "time"),
    "job_step_times": ("first_time", "last_time"),
    "slow_periods": ("start_time", "end_time"),
}
# the tables a scope filters row by row; every other table but UNFILTERED is recomputed
ROWS = ("job_attempts", "interruptions", "goodput_jobs", "gpu_sample_times", *JOB_LOGGED, *HOSTED)
# aggregates over the fleet: no row of them belongs to a slice (every table is in one of ROWS,
# UNFILTERED and RECOMPUTED: tests/test_scope.py keeps a new table from being left out)
RECOMPUTED = (
    "component_lifetimes",
    "node_mcf",
    "system_mtbf",
    "availability",
    "repair_fits",
    "root_causes",
    "node_health",
    "failure_rates",
    "survival_curves",
    "hazard_ratios",
    "goodput_breakdown",
    "goodput_trend",
    "goodput_projections",
    "fleetsim_results",
    "analysis_status",
    "observation_window",
)
# what a scope's rebuild writes in its own home: the aggregates, and node failure episodes,
# which the step that recomputes the mean cumulative function across nodes (node_mcf) writes too
REBUILT = (*RECOMPUTED, "node_failures")
# what a scope recomputes for a command, by need (with the scope's own tables they read): its
# survival fits (`fit`, `project`, `whatif`), system MTBF, availability, node health (and the
# fits its goodput gain projects from), or every aggregate of the fleet's rows (`build`, `report`)
SCOPE_NEEDS = {
    "fits": ("component_lifetimes", "failure_rates"),
    "mtbf": ("node_failures", "system_mtbf"),
    "availability": ("availability",),
    "nodes": ("node_failures", "node_health", "component_lifetimes", "failure_rates"),
    "all": REBUILT,
}
# the settings (``pipelines.resources.Settings`` fields) a scope's recomputed tables depend
# on besides its rows, with their defaults: a change recomputes them
SCOPE_SETTINGS = {
    "observed_from": "",
    "observed_to": "",
    "nodes_per_rack": 0,
    "gpus_per_node": GPUS_PER_NODE,
    "target_gpus": TARGET_GPUS,
    "ckpt_cost_s": CKPT_COST_S,
    "restart_s": RESTART_S,
}


class ScopeError(ValueError):
    """A scope the data cannot answer (unknown cluster, empty slice, from >= to): one line."""


@dataclass(frozen=True)
class Scope:
    start: datetime | None = None  # --from, inclusive (naive UTC)
    end: datetime | None = None  # --to, exclusive
    cluster: str | None = None
    partition: str | None = None
    account: str | None = None
    user: str | None = None

    def __post_init__(self):
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ScopeError(
                f"--to ({self.end:%Y-%m-%d %H:%M}) must be after --from "
                f"({self.start:%Y-%m-%d %H:%M})"
            )

    @property
    def whole(self) -> bool:
        return all(v is None for v in asdict(self).values())

    @property
    def timed(self) -> bool:
        return self.start is not None or self.end is not None

    def values(self) -> dict[str, str]:
        """The job-keyed dimensions given: {dimension: value}."""
        return {k: v for k in DIMENSIONS if (v := getattr(self, k)) is not None}

    def describe(self) -> str:
        """One human line: 'cluster c1, partition gpu, 2026-01-01 to 2026-02-01'."""
        parts = [f"{k} {v}" for k, v in self.values().items()]
        if self.timed:
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
        if self.timed:
            rules.append(
                "job attempts overlapping the period, kept whole; interruptions and job chains "
                "ending in it; events and hours cut to it"
            )
        if self.cluster is not None:
            rules.append("hardware of the cluster's hosts")
        if set(self.values()) - {"cluster"}:
            rules.append("hardware of the hosts that ran these jobs")
        return f"{self.describe()} ({'; '.join(rules)})"

    def meta(self) -> dict:
        """The ``scope`` object of every reading command's JSON: each bound and dimension (null
        when not given) and the human line."""
        return {
            "from": self.start.isoformat() if self.start else None,
            "to": self.end.isoformat() if self.end else None,
            **{k: getattr(self, k) for k in DIMENSIONS},
            "description": self.describe(),
        }

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
        conds = [f'"{k}" = {_lit(v)}' for k, v in self.values().items()]
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

    def clip(self, window: tuple[datetime, datetime] | None) -> tuple[datetime, datetime] | None:
        """[from, to) clipped to ``window`` (the data's [start, end)); None when they do not
        meet or there is no window."""
        if window is None:
            return None
        lo = max(window[0], self.start) if self.start else window[0]
        hi = min(window[1], self.end) if self.end else window[1]
        return (lo, hi) if hi > lo else None


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


def _keys(cols) -> str:
    return ", ".join(f'"{c}"' for c in cols)


def hosts_sql(scope: Scope, view: Callable[[str], str]) -> str | None:
    """A query of the scope's hosts over the tables ``view(name)`` reads (None: no host
    restriction, a time range alone)."""
    parts = []
    if scope.cluster is not None:
        c = _lit(scope.cluster)
        seen = [f"SELECT unnest(nodes) AS host FROM ({view('job_attempts')}) WHERE cluster = {c}"]
        seen += [
            f"SELECT host FROM ({view(t)}) WHERE cluster = {c}"
            for t in ("node_events", "hw_events", "gpu_sightings")
        ]
        parts.append(" UNION ".join(seen))
    if set(scope.values()) - {"cluster"}:
        parts.append(
            f"SELECT unnest(nodes) AS host FROM ({view('job_attempts')}) WHERE {scope.job_filter()}"
        )
    if not parts:
        return None
    return " INTERSECT ".join(f"SELECT host FROM ({p}) WHERE host IS NOT NULL" for p in parts)


def scope_conditions(scope: Scope, view: Callable[[str], str]) -> dict[str, str | None]:
    """table -> SQL condition over its columns keeping the scope's rows (None: every row), for
    every table of ``ROWS`` and ``UNFILTERED``; ``view(name)`` is the SQL of the whole fleet's
    table, for the subqueries (the scope's jobs and hosts)."""
    jobs = scope.values()
    out: dict[str, str | None] = dict.fromkeys(UNFILTERED)
    out["job_attempts"] = scope.job_filter()
    attempts = view("job_attempts")
    dims = " AND ".join(f'"{k}" = {_lit(v)}' for k, v in jobs.items())
    # an interruption is its attempt's: by cluster alone it carries the column itself
    of_attempt = (
        f"({_keys(JOB_KEYS)}) IN (SELECT {_keys(JOB_KEYS)} FROM ({attempts}) WHERE {dims})"
        if set(jobs) - {"cluster"}
        else dims
    )
    out["interruptions"] = _and(of_attempt, scope.time_filter("end_time"))
    last = (
        f"SELECT * FROM ({attempts}) QUALIFY row_number() OVER "
        f"(PARTITION BY {_keys(CHAIN_KEYS)} ORDER BY attempt DESC) = 1"
    )
    of_chain = f"({_keys(CHAIN_KEYS)}) IN (SELECT {_keys(CHAIN_KEYS)} FROM ({last}) WHERE {dims})"
    out["goodput_jobs"] = _and(of_chain if jobs else None, scope.time_filter("final_end"))
    of_job = f"job_id IN (SELECT job_id FROM ({attempts}) WHERE {scope.job_filter()})"
    for table, (first, last) in JOB_LOGGED.items():
        met = [f'"{last}" >= {_ts(scope.start)}' if scope.start else None]
        met.append(f'"{first}" < {_ts(scope.end)}' if scope.end else None)
        out[table] = _and(of_job if jobs else None, *met)
    out["gpu_sample_times"] = scope.time_filter("hour")
    hosts = hosts_sql(scope, view)
    for table, column in HOSTED.items():
        conds = [f"host IN ({hosts})" if hosts else None]
        if column is not None:
            conds.append(scope.time_filter(column))
        if table == "gpu_daily":  # whole days: those overlapping [from, to)
            if scope.start is not None:
                conds.append(f"date >= CAST({_ts(scope.start)} AS DATE)")
            if scope.end is not None:
                conds.append(f"date < {_ts(scope.end)}")
        if table == "gpu_sightings":
            if scope.start is not None:
                conds.append(f"last_seen >= {_ts(scope.start)}")
            if scope.end is not None:
                conds.append(f"first_seen < {_ts(scope.end)}")
        out[table] = _and(*conds)
    return out


def _and(*conds: str | None) -> str | None:
    return " AND ".join(f"({c})" for c in conds if c) or None


def known_values(wh) -> dict[str, list[str]]:
    """The clusters, partitions, accounts and users the data names (for validation messages and
    completion)."""
    out: dict[str, list[str]] = {}
    with wh.connect() as con:
        for col in DIMENSIONS:
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


def check_scope(wh, scope: Scope) -> None:
    """Raise ``ScopeError`` naming the known values for an unknown cluster / partition /
    account / user, and when the scope holds no job attempt and no host."""
    known = known_values(wh)
    for key, value in scope.values().items():
        if value not in known[key]:
            names = ", ".join(known[key][:20]) + (" ..." if len(known[key]) > 20 else "") or "none"
            raise ScopeError(f"unknown {key} {value!r}; the data has: {names}")
    with wh.connect() as con:
        jobs = con.execute(
            f"SELECT count(*) FROM ({wh.view_sql('job_attempts')}) WHERE {scope.job_filter()}"
        ).fetchall()[0][0]
        hosts = hosts_sql(scope, wh.view_sql)
        held = jobs or (
            hosts is not None and con.execute(f"SELECT count(*) FROM ({hosts})").fetchall()[0][0]
        )
    if not held:
        raise ScopeError(
            f"scope {scope.describe()!r} holds no job attempt and no host{_data_span(wh)}"
        )


def _data_span(wh) -> str:
    """Where the jobs are, for the empty-scope message."""
    with wh.connect() as con:
        lo, hi = con.execute(
            f"SELECT min(start_time), max(end_time) FROM ({wh.view_sql('job_attempts')})"
        ).fetchall()[0]
    return "" if lo is None else f" (the jobs run {lo:%Y-%m-%d} to {hi:%Y-%m-%d})"


def filtered(wh, scope: Scope, home=None, own=()):
    """The whole fleet's warehouse ``wh`` seen through ``scope``: its ``ROWS`` and
    ``UNFILTERED`` tables filtered (``scope_conditions``); the tables in ``own`` kept in
    ``home`` (a scope's recomputed analyses); any other table refused. The scope is not
    checked here (``check_scope``)."""
    from warehouse.scoped import ScopedWarehouse

    conds = scope_conditions(scope, wh.view_sql)
    inputs = {t: c for t, c in conds.items() if t not in own}
    scoped = ScopedWarehouse(wh, inputs, home, scope.describe())
    scoped.scope = scope
    return scoped


def scope_of(wh) -> Scope:
    """The scope a warehouse answers for (``filtered`` sets it; the whole fleet otherwise)."""
    return getattr(wh, "scope", None) or Scope()


def fleet_of(wh):
    """The whole fleet's warehouse behind ``wh`` (itself when it is not scoped)."""
    return getattr(wh, "parent", None) or wh


def job_window(wh) -> tuple[datetime, datetime] | None:
    """The hours job-time figures (MTBF of ``goodput losses`` / ``trend``) are counted over:
    the whole fleet's job attempts' [first start, last end) (``analysis.trend.data_window``),
    clipped to ``wh``'s scope; None without attempts or when the scope lies outside them."""
    from analysis.trend import span_window

    fleet = fleet_of(wh)
    with fleet.connect() as con:
        first, last = con.execute(
            f"SELECT min(start_time), max(end_time) FROM ({fleet.view_sql('job_attempts')}) "
            "WHERE start_time IS NOT NULL AND end_time IS NOT NULL"
        ).fetchall()[0]
    return None if first is None else scope_of(wh).clip(span_window(first, last))


def scope_home(wh, scope: Scope):
    return wh.home / "scopes" / scope.slug


def scope_warehouse(wh, scope: Scope):
    """The warehouse a scope's recomputed analyses live in (``HOME/scopes/<slug>/``): the whole
    fleet's rows filtered (``filtered``), the ``REBUILT`` tables its own."""
    return filtered(wh, scope, scope_home(wh, scope), REBUILT)


STATE_FILE = "scope.json"


def input_fingerprint(wh, scoped) -> str:
    """A digest of the whole fleet's files the scope reads (path, size, modification time):
    equal digests mean the scope's recomputed tables are still those of the data."""
    h = hashlib.sha256()
    for name in sorted(scoped.inputs):
        for f, info in sorted(wh.fs.find(wh.storage.path(name), detail=True).items()):
            if f.endswith(".parquet"):
                h.update(
                    (
                        f"{f}\0{info.get('size')}\0{info.get('mtime', info.get('LastModified'))}\n"
                    ).encode()
                )
    return h.hexdigest()


def fresh_tables(wh, scoped, settings: dict) -> set[str]:
    """The tables of the scope's home recomputed from the whole fleet's current files with
    these settings (empty when the data or the settings changed since)."""
    try:
        state = json.loads((scoped.home / STATE_FILE).read_text())
    except (OSError, ValueError):
        return set()
    if state.get("inputs") != input_fingerprint(wh, scoped) or state.get("settings") != settings:
        return set()
    return set(state.get("tables", ()))


def mark_fresh(wh, scoped, scope: Scope, settings: dict, tables) -> None:
    """Record that ``tables`` of the scope's home are recomputed from the current data."""
    state = {
        "scope": scope.describe(),
        "inputs": input_fingerprint(wh, scoped),
        "settings": settings,
        "tables": sorted(tables),
    }
    tmp = scoped.home / f".{STATE_FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(state, default=str))
    os.replace(tmp, scoped.home / STATE_FILE)
