"""Every warehouse table, declared once.

This module is the table contract (docs/design.md): parsers and analyses produce exactly these
columns (``conform`` enforces it), the DuckDB catalog builds its views from them, and nothing
else in the project spells a column list. Times are UTC: in memory (Polars frames, the
warehouse's own queries) naive ``Datetime('us')`` holding UTC (``UTC_TS``); stored, and shown
to users, as timestamps with time zone UTC (``STORED_TS``: Parquet ``isAdjustedToUTC=true``,
DuckDB ``TIMESTAMPTZ``), so Spark, Trino, pyarrow and Polars read the files as instants.
Durations carry their unit in the name (``_s``, ``_hours``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import polars as pl

UTC_TS = pl.Datetime("us")
STORED_TS = pl.Datetime("us", "UTC")
STR = pl.Utf8
I32 = pl.Int32
I64 = pl.Int64
F64 = pl.Float64
BOOL = pl.Boolean


@dataclass(frozen=True)
class Dedupe:
    """How rows that describe the same thing twice (overlapping dumps, one history exported in
    several formats) merge into the table's canonical rows. The table's own Parquet folder holds
    only those; every source's row is kept apart (provenance, what ``forget`` removes) and each
    commit recomputes the canonical rows of the partitions it touched (warehouse/store.py).

    Each of ``keys`` is applied in turn: rows with equal key values (none of them null) become
    one row whose every column comes from the most preferred row (``prefer``, best first) that
    has a value for it; list columns take the longest list. Then ``renumber`` is rewritten
    1-based within ``renumber_within`` by ``renumber_order``. Entries are DuckDB SQL."""

    keys: tuple[tuple[str, ...], ...]
    prefer: tuple[str, ...]
    renumber: str | None = None
    renumber_within: tuple[str, ...] = ()
    renumber_order: tuple[str, ...] = ()


@dataclass(frozen=True)
class Table:
    name: str
    grain: str
    columns: dict[str, pl.DataType]
    key: tuple[str, ...] = ()
    # Hive partition column (must be one of ``columns``); None = unpartitioned.
    partition: str | None = None
    # "ingest": appended per ingested batch; "derived": replaced whole by an analysis step.
    kind: str = "ingest"
    dedupe: Dedupe | None = None  # applied when writing (Batch.stage_canonical)
    # Ingest tables: the columns that identify one record ("content": every column but the
    # provenance ones). A batch stores only records not stored yet (Warehouse.batch), so a log
    # that grew, was rotated or re-compressed, or repeats a line, contributes each record once.
    record_key: tuple[str, ...] | str | None = None
    # Columns a repeat of a record must agree on: a record with a stored record's key and other
    # values here is a conflict, quarantined naming both files (Warehouse.batch), not a repeat.
    values: tuple[str, ...] = ()

    @property
    def record_columns(self) -> tuple[str, ...]:
        if self.record_key == "content":
            return tuple(c for c in self.columns if c not in PROVENANCE)
        return tuple(self.record_key or ())

    @property
    def schema(self) -> pl.Schema:
        return pl.Schema(self.columns)

    def empty(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)


# Column groups several tables share, declared once; a table lists them where their columns stand.
# The source and file a row was read from (the telemetry tables do not keep the line).
_SOURCE_FILE = {"source": STR, "source_file": STR}
_SOURCE = {**_SOURCE_FILE, "source_line": I64}
_JOB = {
    "cluster": STR,
    "scheduler": STR,  # slurm | k8s
    "job_id": STR,  # Slurm JobID (arrays as 123_4, het as 1853+0); k8s namespace/name
}
_ATTEMPT_KEY = (*_JOB, "attempt")
# one GPU: the slot it sat in (host, index) and the unit itself (uuid)
_GPU = {"cluster": STR, "host": STR, "gpu": I32, "uuid": STR}
# one telemetry series (a metric of one GPU or MIG instance): what a sample or an hour keys on
_SERIES_KEY = (*_GPU, "pci_bus", "mig_instance", "metric")
# an hour of a series as a TSDB or gpu_hourly summarise it
_ROLLUP = {"n": I64, "mean": F64, "min": F64, "max": F64, "last": F64}
# what one ingested file or pulled window contributed
_RECORD_COUNTS = {
    "records_read": I64,
    "rows_ok": I64,  # rows stored in the primary tables of the formats read
    "rows_quarantined": I64,
    # records already stored (earlier files or an overlap, or repeated in this one)
    "rows_duplicate": I64,
}


def _ci(estimate: str, stem: str | None = None) -> dict[str, pl.DataType]:
    """An estimate and its 95% interval: ``estimate``, ``{stem}_ci_low``, ``{stem}_ci_high``
    (``stem`` defaults to the estimate's own name)."""
    stem = stem or estimate
    return {estimate: F64, f"{stem}_ci_low": F64, f"{stem}_ci_high": F64}


def _test(estimate: str, p: str | None = None) -> dict[str, pl.DataType]:
    """A tested change: the estimate with its 95% interval (``_ci``) and ``p`` (default
    ``{estimate}_p``), the two-sided p-value of "no change"."""
    return {**_ci(estimate), p or f"{estimate}_p": F64}


def _daily(name: str, grain: str, columns: dict[str, pl.DataType]) -> Table:
    """A table derived from the telemetry one day at a time (analysis/telemetry/rollups.py
    rewrites a day's partition whole): ``columns``, then the ``date`` it is partitioned by."""
    return Table(name, grain, {**columns, "date": pl.Date}, partition="date", kind="derived")


# where a row was read from, not what it says: never part of a record key
PROVENANCE = (
    "source_file",
    "source_line",
    "sha256",
    "event_id",
    "caused_by",
    "ingested_at",
    "batch",
)

# The values of every ``component_class`` / ``cause_class`` column (docs/design.md, component
# taxonomy). Declared here, with the columns, so ingest and analysis import the one list
# (``ingest.xid_catalog`` and ``analysis.taxonomy`` re-export it).
COMPONENT_CLASSES = (
    "gpu", "gpu_memory", "gpu_sram", "nvlink", "nvswitch", "nic", "ib_link", "psu", "cooling",
    "cpu", "host_memory", "storage", "bmc", "host_os", "software", "unknown",
)  # fmt: skip

# ``failure_rates``' class of fail-slow episodes (a GPU running slow: analysis/slowness/rates.py),
# kept apart from the fail-stop classes above: no projection of interruptions reads it
FAIL_SLOW = "fail_slow"

# How many units of each class a node or job carries: (scope, units per scope). Scope "gpu"
# scales with the GPUs (a job's N, a node's G), "node" with the nodes, "job" is once per job. A
# class missing here counts once per node (``DEFAULT_UNIT``). Declared here, beside the classes,
# so the analyses (``analysis.taxonomy`` re-exports it) and the simulator count units alike.
UNITS: dict[str, tuple[str, int]] = {
    "gpu": ("gpu", 1),
    "gpu_memory": ("gpu", 1),
    "gpu_sram": ("gpu", 1),
    "nvlink": ("gpu", 1),
    "ib_link": ("gpu", 1),  # one NIC / IB port per GPU
    "nic": ("gpu", 1),
    "software": ("gpu", 1),  # application / NCCL interruptions grow with the job's ranks
    "psu": ("node", 2),
    "cooling": ("node", 6),
    "cpu": ("node", 2),
    "host_memory": ("node", 16),
    "storage": ("node", 2),
    "nvswitch": ("node", 4),
    "host_os": ("node", 1),
    "bmc": ("node", 1),
    "unknown": ("node", 1),
    "workload": ("gpu", 1),  # the job's own failures (pseudo-class ``WORKLOAD``), per rank
}
DEFAULT_UNIT = ("node", 1)

# dcgm-exporter's count of XIDs in a window has one series per XID code; gpu_samples has no
# column for the code, so the metric name carries it: ``DCGM_EXP_XID_ERRORS_COUNT{xid="79"}``
# (written by ingest, read by the telemetry rollups and counter events).
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
UNIT_SCOPES = ("gpu", "node", "job")
# between the parts of a health event's ``fault``, general to specific (``GpuXidError / gpu:0``):
# written by ingest, matched by the pairing (an end ends the faults at or under its own)
FAULT_SEP = " / "

TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        Table(
            "job_attempts",
            "one run of a job; a requeue or restart is a new attempt",
            {
                **_JOB,
                "attempt": I32,  # 1-based, in time order within (cluster, scheduler, job_id)
                "array_job_id": STR,
                "array_task_id": STR,
                "name": STR,
                "user": STR,
                "account": STR,
                "partition": STR,
                "submit_time": UTC_TS,
                "start_time": UTC_TS,
                "end_time": UTC_TS,
                "state": STR,  # normalized (COMPLETED, FAILED, NODE_FAIL, ... or UNKNOWN)
                "raw_state": STR,
                "reason": STR,  # raw termination reason where the source gives one
                "exit_code": I32,
                "signal": I32,
                "n_nodes": I32,
                "n_cpus": I32,
                "n_gpus": I32,
                "nodes": pl.List(STR),
                "elapsed_s": F64,
                "timelimit_s": F64,
                # the cluster the scheduler's record names (sacct's Cluster) where it is not the
                # cluster given to the ingest or pull, which the row is stored under; else null
                "reported_cluster": STR,
                **_SOURCE,
            },
            key=_ATTEMPT_KEY,
            # One run is one row: the same start (sacct text vs --json, a dump that saw it
            # running vs one that saw it end), else the same end (a k8s restart seen by a pod's
            # lastState, with its start, and by a PyTorchJobRestarting event, with all nodes).
            dedupe=Dedupe(
                keys=(
                    (*_JOB, "coalesce(start_time, submit_time, end_time)"),
                    (*_JOB, "end_time"),
                ),
                prefer=(
                    "end_time IS NULL",
                    "state IN ('RUNNING', 'PENDING', 'REQUEUED', 'SUSPENDED', 'UNKNOWN')",
                    (
                        '(name IS NULL)::INT + ("user" IS NULL)::INT + (n_gpus IS NULL)::INT'
                        " + (exit_code IS NULL)::INT + (len(nodes) = 0 OR nodes IS NULL)::INT"
                    ),
                    "source_file",
                    "source_line",
                ),
                renumber="attempt",
                renumber_within=tuple(_JOB),
                renumber_order=("coalesce(start_time, submit_time, end_time)", "attempt"),
            ),
            record_key="content",
        ),
        Table(
            "node_events",
            "one node state change or scheduler action on a node",
            {
                "time": UTC_TS,
                "cluster": STR,
                "host": STR,
                # down | drain | resume | not_ready | ready | reboot | not_responding |
                # job_killed | job_requeue
                "event": STR,
                "reason": STR,
                "job_id": STR,  # set for job_killed / job_requeue
                **_SOURCE,
            },
            record_key="content",
        ),
        Table(
            "checkpoints",
            "one checkpoint save of a training job, from its own log or a job_id,time,event CSV",
            {
                "time": UTC_TS,
                "cluster": STR,
                "job_id": STR,
                "event": STR,  # save_start | save_end (durable)
                "iteration": I64,  # training step / iteration, when the line names it
                "duration_s": F64,  # how long the save took, when the line says so
                "framework": STR,  # megatron | lightning | torchtitan | csv
                **_SOURCE,
            },
        ),
        Table(
            "training_steps",
            "one logged training step or logging interval of a job, from its own log",
            {
                "time": UTC_TS,  # when the line was logged; null: the line carries no timestamp
                "cluster": STR,
                "job_id": STR,
                "host": STR,  # the host whose log it is, where the file or --host names one
                "iteration": I64,  # the step the line reports (the last of its interval)
                # iterations since the previous logged one of the file; null for a log's first
                # line and after a restart (the iteration went back)
                "steps": I64,
                # seconds per iteration over the interval (Megatron's elapsed time per iteration,
                # NeMo's train_step_timing, torchtitan's time between step lines / steps)
                "step_s": F64,
                "tflops_per_gpu": F64,  # as the framework logged it
                "tokens_per_s": F64,  # per GPU (torchtitan's tps)
                "framework": STR,  # megatron | nemo | torchtitan
                **_SOURCE,
            },
            record_key="content",
        ),
        Table(
            "step_timers",
            (
                "one timer of one logging interval of a job (Megatron --timing-log-level), "
                "summarised over its ranks or for one rank"
            ),
            {
                "time": UTC_TS,  # of the step line it follows; null when untimed
                "cluster": STR,
                "job_id": STR,
                "host": STR,
                "iteration": I64,  # the step line it follows; null before the first
                "timer": STR,  # forward-backward, forward-compute, optimizer, ...
                "rank": I32,  # the rank of a per-rank value; null for a summary over ranks
                "value_ms": F64,  # one rank's time, or the one value a 'time (ms) |' line gives
                "min_ms": F64,  # across ranks ('(min, max) time across ranks')
                "max_ms": F64,
                "framework": STR,
                **_SOURCE,
            },
            record_key="content",
        ),
        Table(
            "rank_scores",
            (
                "one rank's performance score in a straggler report (NVIDIA resiliency "
                "extension): 1 = as fast as the reference, 0.5 = twice as slow"
            ),
            {
                "time": UTC_TS,  # of the report; null when the log carries no timestamp
                "cluster": STR,
                "job_id": STR,
                "host": STR,  # the host whose log it is
                "iteration": I64,  # the last step line before the report
                # relative (to the fastest rank) | individual (to the rank's own best)
                "kind": STR,
                "rank": I32,
                "node": STR,  # the node the report names for the rank
                "score": F64,
                **_SOURCE,
            },
            record_key="content",
        ),
        Table(
            "hw_events",
            "one hardware error, SEL entry or health event",
            {
                "event_id": STR,  # stable id: hash of source file + line + fields
                "time": UTC_TS,
                "cluster": STR,
                "host": STR,
                "component_class": STR,  # docs/design.md taxonomy
                # GPU index / PSU number / DIMM slot ... as the source names it
                "component_id": STR,
                "gpu": I32,
                "uuid": STR,
                "pci_bus": STR,  # normalized by parsers: dddd:bb:dd.f, lowercase
                "event_type": STR,  # xid | sxid | sel | redfish | counter | link_down ...
                "code": STR,  # XID / SXID number, SEL sensor number, MessageId ...
                # the source's own id of the entry (SEL record id); null where none
                "record_id": STR,
                "severity": STR,  # fatal | critical | warning | info
                "action": STR,  # NVIDIA immediate action (RESET_GPU ...) or SEL assertion
                "message": STR,
                "count": I32,  # repeats merged into this event
                "caused_by": STR,  # event_id of the initiating event (e.g. Xid 45 -> 149)
                # process the driver blamed (XID pid=); null for <unknown> / N/A / absent
                "pid": I64,
                "process": STR,  # its name (XID name=)
                # NVLink / NVSwitch link the error names (XID 144-150, SXid); null otherwise
                "link": I32,
                **_SOURCE,
            },
            partition="source",
            # not count / severity: a repeat group cut differently (a log that grew) is one event
            # the source's record id too: three SEL entries alike but for their ids are three events
            record_key=(
                "source",
                "time",
                "cluster",
                "host",
                "event_type",
                "code",
                "record_id",
                "component_id",
                "gpu",
                "uuid",
                "action",
                "message",
            ),
        ),
        Table(
            "gpu_samples",
            "one telemetry sample (long form)",
            {
                "time": UTC_TS,
                **_GPU,
                "pci_bus": STR,  # dddd:bb:dd.f, as hw_events.pci_bus
                "model": STR,
                "mig_profile": STR,
                "mig_instance": STR,
                "pod": STR,
                "namespace": STR,
                "container": STR,
                "metric": STR,
                "value": F64,  # null for "blank/unsupported" sentinels
                "date": pl.Date,
                **_SOURCE_FILE,
            },
            partition="date",
            record_key=("date", "time", *_SERIES_KEY),
            values=("value",),
        ),
        Table(
            "gpu_rollups",
            "n / mean / min / max / last of one series for one hour, as a TSDB computed them",
            {
                "hour": UTC_TS,  # the hour's start; the rollup covers [hour, hour + 1 h)
                **_GPU,
                "pci_bus": STR,
                "model": STR,
                "mig_instance": STR,
                "metric": STR,
                **_ROLLUP,
                "date": pl.Date,
                **_SOURCE_FILE,
            },
            partition="date",
            # the series-hour, keyed as gpu_samples keys a sample
            record_key=("date", "hour", *_SERIES_KEY),
            values=tuple(_ROLLUP),
        ),
        Table(
            "metric_metadata",
            "HELP / TYPE text of one metric as a source declared it",
            {
                "metric": STR,
                "type": STR,
                "help": STR,
                "unit": STR,
                **_SOURCE_FILE,
            },
            key=("metric", "source"),
            record_key="content",
            # every scrape file repeats its HELP/TYPE lines: one row per metric and source,
            # from the most recently named file that declared it
            dedupe=Dedupe(
                keys=(("metric", "source"),), prefer=("help IS NULL", "source_file DESC")
            ),
        ),
        _daily(
            "gpu_hourly",
            "rollup per GPU per hour per metric",
            {
                "hour": UTC_TS,
                **_GPU,
                "pci_bus": STR,
                "metric": STR,
                **_ROLLUP,
            },
        ),
        _daily(
            "gpu_counter_changes",
            (
                "a cumulative error-counter sample that starts its series' day or differs from "
                "the one before"
            ),
            {
                "time": UTC_TS,
                **_GPU,
                "metric": STR,
                "value": F64,
                "source_file": STR,
            },
        ),
        _daily(
            "gpu_sightings",
            "first and last sample per day of one GPU (uuid) in one slot (host, gpu index)",
            {
                **_GPU,
                "model": STR,  # min over the day's samples
                "first_seen": UTC_TS,
                "last_seen": UTC_TS,
            },
        ),
        _daily(
            "gpu_sample_times",
            (
                "samples per hour with their first and last time: the telemetry's time "
                "distribution (observation spans)"
            ),
            {
                "hour": UTC_TS,
                "n": I64,
                "first": UTC_TS,
                "last": UTC_TS,
            },
        ),
        _daily(
            "gpu_signal_spans",
            (
                "a span of one day a GPU ran slow by its own telemetry: clock-event reasons "
                "holding its clock down, or its PCIe link below its width or generation "
                "(analysis/telemetry/signals.py)"
            ),
            {
                **_GPU,
                "signal": STR,  # clocks | pcie_width | pcie_gen
                "start_time": UTC_TS,  # half-way from the sample before to its first slow sample
                "end_time": UTC_TS,  # half-way from its last slow sample to the next
                # clocks: the OR of the slowdown bits over the span (warehouse/signals.py)
                "reasons": I64,
                # clocks: whether a job ran on the GPU (GPU idle clear) through the span; a span
                # of one GPU is cut where that changes
                "busy": BOOL,
                # mean over the span of its level over the reference: the SM clock over the
                # GPU's max clock (else the highest its host ran that day); the link's width or
                # generation over its max (else its host's highest); null: no level sampled
                "ratio": F64,
                "samples": I64,  # the samples (or an hour's rollup count) the span rests on
                "spacing_s": F64,  # the series' typical time between samples that day
            },
        ),
        _daily(
            "gpu_daily",
            "rollup per GPU per day per metric, from that day's gpu_hourly (24x fewer rows)",
            {
                **_GPU,
                "pci_bus": STR,
                "metric": STR,
                "n": I64,
                "sum": F64,  # sum of the hourly mean * n: the day's mean is sum / n
                "min": F64,
                "max": F64,
                "first_hour": UTC_TS,
                "last_hour": UTC_TS,
            },
        ),
        Table(
            "bmc_sensors",
            "one BMC sensor reading",
            {
                "time": UTC_TS,
                "cluster": STR,
                "host": STR,
                "sensor": STR,
                "sensor_type": STR,
                "value": F64,
                "unit": STR,
                "status": STR,
                **_SOURCE,
            },
            record_key=("time", "cluster", "host", "sensor"),
            values=("value",),
        ),
        Table(
            "component_history",
            "one installation of a unit in a slot",
            {
                "component_class": STR,
                "serial": STR,
                "slot": STR,  # host/position
                "host": STR,
                "position": STR,
                "model": STR,
                "installed_at": UTC_TS,
                "removed_at": UTC_TS,  # null while in service
                "removal_reason": STR,
                "failed": BOOL,
                **_SOURCE,
            },
            # per source, so a derived source (telemetry UUID changes) can be rewritten alone
            partition="source",
            record_key="content",
        ),
        Table(
            "failures",
            (
                "one failure of a node or system, with its repair where the source gives it "
                "(failure-log)"
            ),
            {
                "system": STR,  # the system (cluster) it happened on
                "host": STR,  # the node; null when the record names only the system
                "start_time": UTC_TS,  # when the problem started
                "end_time": UTC_TS,  # when it was fixed; null when the source does not say
                # the source's own downtime, else end - start; null when unknown
                "downtime_hours": F64,
                "repair_known": BOOL,  # false: the source gives no repair time (never invented)
                "cause": STR,  # root-cause category as the source classifies it, lower case
                "sub_cause": STR,  # what failed, as the source words it
                "component_class": STR,  # docs/design.md taxonomy where the failed part is known
                "serial": STR,  # the failed unit, where named
                "system_nodes": I32,  # the system's size, where the source gives it
                "system_processors": I32,
                # true: still failing at the end of its event stream (a start never closed): no
                # end_time; availability counts it down until the end of observation
                "open": BOOL,
                **_SOURCE,
            },
            partition="source",
            record_key="content",
        ),
        Table(
            "health_events",
            (
                "one event of a health stream: a fault starting or ending, a condition's new "
                "status (paired into failures rows, source health-events)"
            ),
            {
                "time": UTC_TS,
                "system": STR,  # the system (cluster)
                "host": STR,
                # start | end (of a fault) | healthy (a status saying so) | info (neither)
                "kind": STR,
                # what is failing, general to specific joined by FAULT_SEP (GpuXidError / gpu:0,
                # Ready, a ticket); an end or healthy ends every open failure of its node at or
                # under it; null: every open failure of the node (a reboot)
                "fault": STR,
                "cause": STR,  # root-cause category as the source classifies it, lower case
                "sub_cause": STR,  # what failed, as the source words it
                "component_class": STR,  # docs/design.md taxonomy where the part is known
                "code": STR,  # the source's error code (XID 79, DCGM_FR_...)
                "severity": STR,
                "action": STR,  # the source's recommended action
                "message": STR,
                **_SOURCE,
            },
            partition="source",
            # not message / severity / action: a condition pulled again with new wording is the
            # same transition
            record_key=(
                "source",
                "system",
                "host",
                "fault",
                "kind",
                "time",
                "cause",
                "sub_cause",
                "component_class",
                "code",
            ),
        ),
        Table(
            "health_event_pairs",
            (
                "what pairing made of one stored health event: the failure it opened, closed or "
                "repeated, or why it made none (analysis/health_events.py)"
            ),
            {
                "system": STR,
                "host": STR,
                "fault": STR,
                "kind": STR,
                "time": UTC_TS,
                # opens | open (opens a failure still open at the end) | closes | repeats (a
                # start while open, an end after the close) | unopened (an end with no start
                # before it: no failure) | healthy (nothing open) | info
                "outcome": STR,
                "failure_start": UTC_TS,  # start of the failure it belongs to
                "reason": STR,  # why an end made no failure
                **_SOURCE,
            },
            kind="derived",
        ),
        Table(
            "interruptions",
            "a job attempt that did not end normally, with its attributed cause",
            {
                **_JOB,
                "attempt": I32,
                "start_time": UTC_TS,
                "end_time": UTC_TS,
                "n_gpus": I32,
                "state": STR,
                "cause_class": STR,
                "cause_event": STR,  # hw_events.event_id or node_events reference
                "cause_host": STR,
                "failure_domain": STR,  # infrastructure | workload | unknown
                "planned": BOOL,  # maintenance drain, user cancel, preemption
                "method": STR,
                "confidence": F64,
                "lost_gpu_hours": F64,
            },
            key=_ATTEMPT_KEY,
            kind="derived",
        ),
        Table(
            "component_lifetimes",
            "survival input: one row per unit installation",
            {
                "component_class": STR,
                "unit_id": STR,
                "host": STR,
                "slot": STR,
                "model": STR,
                "rack": STR,
                "observed_from": UTC_TS,
                "observed_to": UTC_TS,
                "entry": F64,  # age in hours when observation starts (left truncation)
                "duration": F64,  # age in hours at failure or censoring (>= entry)
                # last age known healthy, when the failure is interval-censored
                "duration_low": F64,
                "event": BOOL,
                # inventory | telemetry (UUIDs seen) | observed_units (hosts seen x units per host)
                "population": STR,
                "failure_cause": STR,
                # telemetry over the unit's first analysis.survival.cox.COVARIATE_DAYS days
                # observed (its whole observation if shorter): the same window for every unit
                "temp_mean": F64,
                "temp_max": F64,
                "power_mean": F64,
                "util_mean": F64,
                # the unit's place, from a Cray cname host (cX-YcCsSnN: cabinet column X, row Y,
                # cage C, blade slot S, node N), else null; and its cohort
                "cabinet_column": I32,
                "cabinet_row": I32,
                "cage": STR,
                "blade": I32,
                "node_position": STR,
                "batch": STR,  # year the serial was first installed (its installation cohort)
            },
            key=("component_class", "unit_id"),
            kind="derived",
        ),
        Table(
            "node_failures",
            "one failure episode of a node (repairable-system view, analysis/repairable.py)",
            {
                "host": STR,
                "time": UTC_TS,  # first evidence of the episode
                "failure_index": I32,  # 1-based, per host in time order
                # since the previous failure, or since observation start for the first
                "gap_hours": F64,
                "cause_class": STR,
                "cause_event": STR,  # hw_events.event_id or the interruption's cause_event
                "source": STR,  # hw_events | interruptions
            },
            key=("host", "failure_index"),
            kind="derived",
        ),
        Table(
            "node_mcf",
            "Nelson mean cumulative function of node failures, one point per distinct failure time",
            {
                "t_hours": F64,  # hours since each node's own observation start
                "n_failures": I64,
                "n_at_risk": I64,
                "mcf": F64,
                "se": F64,  # Lawless-Nadeau robust standard error
                "ci_low": F64,
                "ci_high": F64,
            },
            kind="derived",
        ),
        Table(
            "system_mtbf",
            (
                "failures and MTBF of a whole system per calendar month / quarter, overall and "
                "per class (analysis/system_mtbf.py)"
            ),
            {
                "source": STR,  # failures | interruptions | node_failures: each a separate series
                "system": STR,
                "period": STR,  # month | quarter
                "label": STR,  # 2016-04 | 2016-Q2
                "period_start": UTC_TS,
                "period_end": UTC_TS,
                "grouping": STR,  # all | cause | component_class
                "class": STR,  # the cause or component class; null for 'all'
                "failures": I64,  # distinct failure instants (simultaneous events count once)
                "events": I64,  # event rows
                "exposure_hours": F64,  # the period's overlap with the series' observation span
                "partial": BOOL,  # the span covers only part of the period
                # exact Poisson 95% CI; without a failure the MTBF and the CI's (unbounded) high
                # end are null
                **_ci("mtbf_hours", "mtbf"),
            },
            key=("source", "system", "period", "period_start", "grouping", "class"),
            kind="derived",
        ),
        Table(
            "availability",
            (
                "failures, MTBF, MTTR and availability of a system or one of its nodes "
                "(analysis/availability.py)"
            ),
            {
                "source": STR,  # failures | node_events
                "system": STR,
                "level": STR,  # system | node
                "host": STR,  # null at system level
                # the system's size (given by the source, else hosts seen); 1 for a node
                "nodes": I64,
                "processors": I64,  # the system's processors where the source gives them
                "span_hours": F64,  # observation span
                "failures": I64,
                # failures whose repair time the source gives, or still open (down until the
                # span's end)
                "repairs_known": I64,
                "repairs_open": I64,  # still open at the span's end: right-censored repairs
                "downtime_hours": F64,  # sum of the known repair times (open ones to the end)
                **_ci("mtbf_hours", "mtbf"),  # span / failures, exact Poisson 95% CI
                # per node-hour of the span x nodes, x 8760; exact CI
                **_ci("failures_per_node_year"),
                **_ci("failures_per_processor_year"),  # where processors are known
                # repair hours / repairs completed (open ones censored); bootstrap 95% CI
                **_ci("mttr_hours", "mttr"),
                # median and 90th percentile of the repair times (Kaplan-Meier, open ones
                # censored; null where not reached)
                "repair_median_hours": F64,
                "repair_p90_hours": F64,
                # node-hours up / node-hours (overlapping faults of a node down once); null
                # unless every repair is known or open; bootstrap 95% CI within [0, 1]
                **_ci("availability"),
                **_ci("nines"),  # -log10(1 - availability)
                # age-trend parameter (Weibull shape) of the system's times between failures
                **_ci("tbf_shape"),
                "tbf_reading": STR,
            },
            key=("source", "system", "level", "host"),
            kind="derived",
        ),
        Table(
            "repair_fits",
            (
                "one candidate distribution of a system's repair times or times between failures "
                "(lifelines)"
            ),
            {
                "source": STR,
                "system": STR,
                "quantity": STR,  # repair | tbf
                "model": STR,  # a registered lifetime model (analysis/lifetime_models/)
                "selected": BOOL,  # lowest AIC of the quantity's candidates
                "converged": BOOL,
                "params": STR,  # JSON: the model's parameters, each with its 95% CI
                "aic": F64,
                "n": I64,  # positive durations fitted
                "n_censored": I64,  # of them right-censored (repairs still open, the last gap)
                "n_zero": I64,  # zero durations left out
                "median_hours": F64,  # the fitted median
                # the model's age-trend parameter (Weibull shape) with its CI; null for a model
                # without one
                **_ci("shape"),
            },
            key=("source", "system", "quantity", "model"),
            kind="derived",
        ),
        Table(
            "root_causes",
            (
                "failures and downtime per root cause of a system (system null: all systems of "
                "the source)"
            ),
            {
                "source": STR,
                "system": STR,
                "cause": STR,  # null: the record names none
                "failures": I64,
                "share": F64,
                "downtime_hours": F64,  # known repair times
                "downtime_share": F64,
            },
            key=("source", "system", "cause"),
            kind="derived",
        ),
        Table(
            "node_health",
            (
                "one node: its exposure, failures, interruptions, hardware events, repairs, and "
                "whether it is a lemon"
            ),
            {
                "host": STR,
                "cluster": STR,
                "node_hours": F64,  # observed (node_failures' window); 0 = not tested
                "gpu_hours_scheduled": F64,  # GPU-hours of job attempts that ran on it
                "failures": I64,  # node_failures episodes
                "expected_failures": F64,  # fleet rate (failures per node-hour) x node_hours
                "excess_failures": F64,  # failures - expected_failures
                "rate_ratio": F64,  # failures / expected_failures
                # unplanned infrastructure interruptions with cause_host = host
                "interruptions": I64,
                "lost_gpu_hours": F64,  # their lost work
                "hw_events": I64,  # warning, critical or fatal hardware events
                "hw_events_critical": I64,  # critical or fatal
                "repairs": I64,  # component_history removals (replacements, RMAs) on the host
                "failed_parts": I64,  # of those, removed because they failed
                # the significance test and its multiple-testing correction, or why untested
                "test": STR,
                "p_value": F64,  # one-sided: P(failures >= observed) at the expected count
                "p_adjusted": F64,
                "alpha": F64,  # level of ``lemon``
                "lemon": BOOL,  # p_adjusted < alpha (null when untested)
                # the episodes slow_periods name it the culprit of (overlapping periods: one)
                "slow_episodes": I64,
                "slow_gpu_hours": F64,  # what those periods cost the jobs
                "expected_slow": F64,  # at the other nodes' rate x node_hours
                "slow_p_value": F64,  # the same test as p_value, of slow_episodes
                "slow_p_adjusted": F64,
                "slow_lemon": BOOL,  # slow_p_adjusted < alpha: slows jobs more than the fleet
            },
            key=("host",),
            kind="derived",
        ),
        Table(
            "failure_rates",
            "one candidate model per component class, stratum and window",
            {
                "component_class": STR,
                "stratum": STR,  # 'all' or a model / SKU
                "window": STR,  # 'all' or a calendar month 'YYYY-MM'
                # a registered analysis.lifetime_models name (exponential, weibull...)
                "model": STR,
                # the row quoted and projected: exponential unless another model is clearly better
                # (analysis.survival)
                "selected": BOOL,
                "params": STR,  # JSON
                "aic": F64,
                "n_units": I64,
                "n_events": I64,
                "exposure_hours": F64,
                **_ci("rate_per_1k_unit_days", "rate"),
                **_ci("mtbf_hours", "mtbf"),
                **_ci("shape"),
                # Weibull rows only: a direction only where shape_p_adjusted < 0.05
                "shape_reading": STR,
                # test of Weibull shape = 1, Holm-adjusted across the window's classes
                "shape_p_adjusted": F64,
                "method": STR,  # exposure-table | per-unit | per-unit-lifelines | subsample-N
                "converged": BOOL,
                # where the units came from: inventory | telemetry | observed_units (joined by '+')
                "population": STR,
                "period_start": UTC_TS,  # calendar span the row's observation covers
                "period_end": UTC_TS,
                "partial": BOOL,  # a monthly window that covers less than its calendar month
                "low_exposure": BOOL,  # monthly exposure < 1/4 of the class's median month
                "aic_weight": F64,  # Akaike weight within (class, stratum, window)
                # the row's mean lifetime lies beyond the oldest observed age
                "mean_extrapolated": BOOL,
            },
            kind="derived",
        ),
        Table(
            "survival_curves",
            "Kaplan-Meier / Nelson-Aalen / Aalen-Johansen estimate points",
            {
                "component_class": STR,
                # kaplan_meier | nelson_aalen | aalen_johansen | breslow_fleming_harrington
                "estimator": STR,
                "cause": STR,  # competing cause for aalen_johansen, else null
                "t": F64,  # age in hours
                "survival": F64,
                "cumulative_hazard": F64,
                "cumulative_incidence": F64,
                "ci_low": F64,
                "ci_high": F64,
                "at_risk": I64,
                # at_risk < 10 (analysis.survival.MIN_AT_RISK): flagged, not read
                "small_risk_set": BOOL,
            },
            kind="derived",
        ),
        Table(
            "hazard_ratios",
            "Cox proportional-hazards output",
            {
                "component_class": STR,
                "covariate": STR,
                "hr": F64,
                "ci_low": F64,
                "ci_high": F64,
                "p": F64,
                "n": I64,
                "ph_test_p": F64,  # Schoenfeld-residual test of proportional hazards
                "ph_ok": BOOL,
                "unit": STR,  # what one step of the covariate is: 'per degC', 'rack-03 vs rack-02'
                "reference": STR,  # categoricals: the reference level (null for continuous)
                # Holm over the table's covariates; a categorical's level: the larger of that and
                # its Holm p within the covariate (analysis.survival.cox)
                "p_adjusted": F64,
                "p_adjust_method": STR,  # 'holm'
                "penalizer": F64,  # Cox ridge penalizer used (0: none)
                "clear_effect": BOOL,  # p_adjusted < 0.05 and ph_ok
                "kind": STR,  # 'effect' | 'association' (power, utilisation: consequences of load)
                # the covariate as a whole: its Wald p, a categorical's likelihood-ratio test
                "family_p": F64,
                # an association's model leaves out the covariates collinear with it (named here)
                "left_out": STR,
            },
            kind="derived",
        ),
        Table(
            "goodput_jobs",
            "measured goodput per job chain",
            {
                **_JOB,
                "name": STR,
                "user": STR,
                "attempts": I32,
                "n_gpus": I32,
                "first_start": UTC_TS,
                "final_end": UTC_TS,
                "final_state": STR,
                "wall_hours": F64,
                "productive_hours": F64,  # at full speed
                # work kept but lost running slow (slow_periods: the extra time inside it)
                "slow_hours": F64,
                "lost_work_hours": F64,
                "restart_hours": F64,
                "checkpoint_hours": F64,
                "queue_after_failure_hours": F64,
                "other_hours": F64,
                "gpu_hours": F64,
                "goodput": F64,  # productive_hours / wall_hours: time at full speed
                # how badput was split: measured (checkpoint times from ``checkpoints``) or
                # assumed (the stated interval below), and the assumptions used
                "method": STR,
                "n_checkpoints": I64,  # checkpoint saves counted (measured) or implied (assumed)
                # the badput columns whose size rests on the assumptions below, not on the
                # records (comma-separated; queue and other gaps are always measured)
                "assumed_parts": STR,
                "ckpt_interval_s": F64,
                "ckpt_cost_s": F64,
                "restart_s": F64,
            },
            key=tuple(_JOB),
            kind="derived",
        ),
        Table(
            "job_step_times",
            (
                "one job's logged step times: its healthy baseline, its noise and the time it "
                "lost running slow (analysis/slowness/steps.py)"
            ),
            {
                "cluster": STR,
                "job_id": STR,
                "first_time": UTC_TS,  # of its first logged interval; null when untimed
                "last_time": UTC_TS,
                "intervals": I64,  # logged intervals with a step time and a length
                "steps": I64,  # iterations they cover
                "baseline_step_s": F64,  # median step time of its healthy intervals
                "noise_s": F64,  # robust s.d. of an interval's step time about its level
                "logged_hours": F64,  # training time the intervals cover
                "slow_periods": I64,
                "slow_hours": F64,  # extra time in its slow periods
                "n_gpus": I32,  # its largest attempt's GPUs (job_attempts); null when unknown
                "slow_gpu_hours": F64,  # slow_hours x n_gpus
                "slow_share": F64,  # slow_hours / logged_hours
            },
            key=("cluster", "job_id"),
            kind="derived",
        ),
        Table(
            "slow_periods",
            (
                "one period a job ran slower than its own healthy step time, or than its GPUs "
                "allow while one of them ran slow (analysis/slowness/steps.py, attribution.py)"
            ),
            {
                "cluster": STR,
                "job_id": STR,
                "period": I32,  # 1-based, in the job's order
                "start_time": UTC_TS,  # when its first slow interval began; null when untimed
                "end_time": UTC_TS,
                "first_iteration": I64,
                "last_iteration": I64,
                "steps": I64,
                "baseline_step_s": F64,  # the job's
                "step_s": F64,  # its typical step time (smoothed: saves and stalls left out)
                "slowdown": F64,  # step_s / baseline_step_s (telemetry: 1 / the span's ratio)
                "duration_hours": F64,
                # duration less the same steps at the baseline (telemetry: duration x (1 - ratio))
                "extra_hours": F64,
                "n_gpus": I32,
                "slow_gpu_hours": F64,  # extra_hours x n_gpus
                # transient: the job came back to its baseline; persistent: the log ends slow
                "kind": STR,
                # the rank that was slowest in the period, where the log has per-rank timers
                # (its compute time over the median rank's) or straggler scores (1 / score)
                "slow_rank": I32,
                "slow_node": STR,
                "rank_ratio": F64,
                "rank_evidence": STR,  # timers | scores | null: the log names no rank
                # step_log: found in the job's step times; telemetry: a GPU of the job ran slow
                # while no step log covered it (analysis/slowness/attribution.py)
                "source": STR,
                # thermal | power | pcie | nvlink | host | workload | unknown (warehouse/signals.py)
                "cause": STR,
                "culprit_host": STR,  # the node the evidence names; null: none
                "culprit_gpu": I32,
                "evidence": STR,  # what the attribution rests on, in words
                # high: a GPU signal over half the period; medium: a shorter GPU signal, NVLink
                # errors or the log's ranks; low: nothing, or telemetry alone
                "confidence": STR,
                "signal_share": F64,  # share of the period the culprit's GPU signal covered
                # telemetry: the chance the slow GPU was the job's (1 for a job holding whole
                # nodes); extra_hours is that chance times the loss
                "gpu_share": F64,
            },
            key=("cluster", "job_id", "period"),
            kind="derived",
        ),
        Table(
            "goodput_breakdown",
            "interruptions, lost GPU-hours and measured goodput per cluster, partition and account",
            {
                "dimension": STR,  # cluster | partition | account
                "value": STR,  # null: the jobs that name none
                "jobs": I64,  # job chains (their last attempt's partition / account)
                "attempts": I64,
                "gpu_hours": F64,  # n_gpus x (end - start) of the attempts
                "interruptions": I64,  # unexpected (not planned) interrupted attempts
                "infrastructure": I64,  # of those, outside the jobs' own (workload) domain
                "lost_gpu_hours": F64,  # of the unexpected interruptions
                "goodput": F64,  # measured, weighted by GPU-hours (productive / wall of the chains)
                "slow_gpu_hours": F64,  # the chains' work lost running slow (n_gpus x slow_hours)
            },
            key=("dimension", "value"),
            kind="derived",
        ),
        Table(
            "goodput_trend",
            (
                "goodput, lost GPU-hours, interruptions and MTBF per calendar week and month, "
                "with the change against the period before"
            ),
            {
                "period": STR,  # week (ISO, from Monday) | month
                "period_start": UTC_TS,
                "period_end": UTC_TS,  # exclusive
                "hours": F64,  # of the period the job attempts cover
                "gpu_hours": F64,  # held by job attempts within the period
                "goodput": F64,  # measured, GPU-hour weighted, job chains ending in the period
                "lost_gpu_hours": F64,  # of the unexpected interruptions ending in the period
                "slow_gpu_hours": F64,  # lost running slow by the job chains ending in the period
                "interruptions": I64,  # unexpected
                "infrastructure": I64,  # of those, outside the jobs' own (workload) domain
                "workload": I64,  # the jobs' own failures
                "mtbf_hours": F64,  # fleet-wide: hours covered / unexpected interruptions
                "mtbf_infrastructure_hours": F64,  # hours covered / infrastructure interruptions
                "partial": BOOL,  # the data covers part of the calendar period only
                "lost_share": F64,  # lost_gpu_hours / gpu_hours
                # each change against the previous period with its 95% CI and the two-sided p of
                # "no change" (analysis/changes.py): measured goodput and the lost share as
                # differences (fractions: 0.01 = 1 point), unexpected interruptions per hour
                # covered as a rate ratio (exact conditional Poisson test)
                **_test("goodput_change"),
                **_test("lost_share_change"),
                **_test("interruption_rate_ratio", "interruption_rate_p"),
                "mtbf_hours_change": F64,  # hours (its test: the interruption rate's)
            },
            key=("period", "period_start"),
            kind="derived",
        ),
        Table(
            "goodput_projections",
            "one what-if scenario",
            {
                "scenario": STR,
                "method": STR,  # analytic | mc
                "rates_source": STR,  # fitted | interruptions | file | mtti override (joined by +)
                "n_gpus": I64,
                "gpus_per_node": I32,
                "ckpt_cost_s": F64,
                "restart_s": F64,
                "interval_hours": F64,
                "spares": I32,
                "knob": STR,  # what a sweep varied, null for a single scenario
                "knob_value": F64,
                "mtti_hours": F64,
                "mtti_ci_low": F64,  # 95% band of the MTTI from rate uncertainty
                "mtti_ci_high": F64,
                "optimal_interval_hours": F64,  # Daly's optimum (the one meaning everywhere)
                "young_interval_hours": F64,  # Young's first-order sqrt(2 delta M)
                "goodput": F64,  # expected goodput (Monte Carlo: mean over simulated jobs)
                "goodput_ci_low": F64,  # 95% band of the expected goodput from rate uncertainty
                "goodput_ci_high": F64,
                "goodput_spread_low": F64,  # 2.5-97.5% of single simulated jobs (mc only)
                "goodput_spread_high": F64,
                # goodput = goodput_fail_stop x (1 - slow_lost_share): the fail-stop part (slow
                # GPUs replaced at detection among its interruptions) and the share of compute
                # time lost running slow; slow_* null where no fail-slow rate was measured
                "goodput_fail_stop": F64,
                "slow_lost_share": F64,
                "slow_detect_hours": F64,  # hours to replace a slow GPU (inf: never)
                "scope": STR,  # hardware | infrastructure | all (analysis.taxonomy.SCOPES)
                # unit ages at job start: stationary | new | observed (analysis.fleet_age)
                "fleet_age": STR,
                # job length a non-stationary fleet's failures are counted over
                "horizon_hours": F64,
            },
            kind="derived",
        ),
        Table(
            "fleetsim_results",
            (
                "one metric of one fleet-simulator scenario point (baseline, sweep point or spare "
                "count), with its 95% CI and the parts of it from the fits and from simulation"
            ),
            {
                "scenario": STR,  # the scenario's name (HOME/scenarios/*.yaml)
                "study": STR,  # baseline | sweep | spare_curve
                # what the point changed (section.key, jobs.<key>, rate:<class>); null: baseline
                "knob": STR,
                "knob_value": F64,
                # fleet_goodput, ettr:<gpus>, goodput:<gpus>, lost_gpu_hours:<cause>, ...
                "metric": STR,
                "mean": F64,
                # 95% CI: mean +- sqrt(halfwidth_fit^2 + halfwidth_sim^2)
                "ci_low": F64,
                "ci_high": F64,
                "halfwidth_fit": F64,  # the part from the failure laws' fits (0: not drawn)
                "halfwidth_sim": F64,  # the Student-t half-width of the mean over replications
                "replications": I64,
                "converged": BOOL,  # the stopping rule's half-width target was met
            },
            key=("scenario", "study", "knob", "knob_value", "metric"),
            kind="derived",
        ),
        Table(
            "analysis_status",
            "one analysis step of the last build: ran, skipped for lack of inputs, or failed",
            {
                "analysis": STR,
                "status": STR,  # ok | skipped | failed
                "reason": STR,
                "rows": I64,
                "at": UTC_TS,
            },
            key=("analysis",),
            partition="analysis",  # one file per analysis: steps record their outcome independently
            kind="derived",
        ),
        Table(
            "observation_window",
            (
                "the robust span of each dated source, and the window exposures are measured over "
                "(source 'window')"
            ),
            {
                "source": STR,  # scheduler | telemetry | node_events | hw_events | window
                "observed_from": UTC_TS,
                "observed_to": UTC_TS,
                "first": UTC_TS,  # earliest record, outliers included
                "last": UTC_TS,
                "records": I64,
                "outliers": I64,  # record times outside the robust span
                # span | explicit | inferred | earliest_record | none (bounds may mix:
                # 'explicit/inferred')
                "method": STR,
                "flagged": BOOL,  # the window could not be inferred from dated sources
                "note": STR,
            },
            key=("source",),
            kind="derived",
        ),
        Table(
            "ingest_manifest",
            "one ingested source file",
            {
                "path": STR,
                "sha256": STR,
                "bytes": I64,
                "format": STR,
                **_RECORD_COUNTS,
                # what the file, not its records or the options, supplied: "file time" (its
                # modification time stood in for record times), "host from file name"; null: nothing
                "stand_ins": STR,
                "batch": STR,
                "ingested_at": UTC_TS,
            },
            key=("sha256",),
            record_key=("sha256",),
        ),
        Table(
            "pull_log",
            "one window (or one failed target) of a live source's pull",
            {
                "source": STR,  # the source's name in sources.toml
                "kind": STR,  # slurm | prometheus | redfish ...
                "cluster": STR,
                "window_start": UTC_TS,
                "window_end": UTC_TS,
                "target": STR,  # the part of the source this row is about (a BMC); null: all of it
                "status": STR,  # ok | failed
                "error": STR,  # failed: one line saying why
                "documents": I64,  # responses / command outputs parsed
                "bytes": I64,
                **_RECORD_COUNTS,
                "started_at": UTC_TS,
                "finished_at": UTC_TS,
                "batch": STR,
            },
            key=("source", "window_start", "target", "started_at"),
            record_key="content",
        ),
        Table(
            "quarantine",
            "one rejected record",
            {
                "source_file": STR,
                "sha256": STR,
                "format": STR,
                "line": I64,  # line or record number, 1-based
                "raw": STR,  # truncated
                "error": STR,
                "ingested_at": UTC_TS,
            },
            # per file (conservation counts them per sha256); a failed file retried is not doubled
            record_key=("sha256", "source_file", "line", "raw", "error"),
        ),
    ]
}

# Views over the tables above (SQL, created by the catalog after the tables).
VIEWS: dict[str, str] = {
    # One row per job chain (all attempts of one job; array tasks are separate jobs).
    "job_chains": """
        SELECT cluster, scheduler, job_id,
               min(start_time) AS first_start,
               max(end_time) FILTER (WHERE is_last) AS final_end,
               count(*)::INTEGER AS attempts,
               max(state) FILTER (WHERE is_last) AS final_state,
               max(n_gpus) AS n_gpus,
               arg_max(name, attempt) AS name,
               arg_max("user", attempt) AS "user"
        FROM (
            SELECT *,
                attempt = max(attempt) OVER (PARTITION BY cluster, scheduler, job_id) AS is_last
            FROM job_attempts
        )
        GROUP BY cluster, scheduler, job_id
    """,
}

QUARANTINE_COLUMNS = {"line": I64, "raw": STR, "error": STR}
RAW_LIMIT = 500


def conform(table: str, df: pl.DataFrame) -> pl.DataFrame:
    """Return ``df`` with exactly ``table``'s columns, order and types.

    Missing columns are added as nulls; extra columns are a programming error (a parser
    inventing a column would bypass the contract), so they raise.
    """
    columns, dtypes = _layout(table)
    if df.columns == columns and df.dtypes == dtypes:  # a parser's output usually is already
        return df
    spec = TABLES[table]
    if df.width == 0:  # no rows either: a select of literals would make one row of nulls
        return pl.DataFrame(schema=spec.columns)
    extra = [c for c in df.columns if c not in spec.columns]
    if extra:
        raise ValueError(f"{table}: columns not in the schema: {extra}")
    return df.select(
        [
            (pl.col(c) if c in df.columns else pl.lit(None)).cast(dtype).alias(c)
            for c, dtype in spec.columns.items()
        ]
    )


@cache
def _layout(table: str) -> tuple[list[str], list[pl.DataType]]:
    """``table``'s column names and types as lists: comparing them with a frame's is cheap
    (a ``pl.Schema`` comparison costs more than conforming a small file's rows)."""
    return list(TABLES[table].columns), list(TABLES[table].columns.values())


def quarantine_frame(lines, raws, errors) -> pl.DataFrame:
    """Quarantine rows as a parser emits them (the runner adds file, sha and time)."""
    return pl.DataFrame(
        {"line": lines, "raw": raws, "error": errors}, schema=QUARANTINE_COLUMNS
    ).with_columns(pl.col("raw").str.slice(0, RAW_LIMIT))
