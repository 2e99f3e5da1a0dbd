"""Slurm ``sacct --json`` (and slurmrestd ``/slurmdb/.../jobs``) to ``job_attempts``.

Every data_parser generation from Slurm 21.08 (dbv0.0.37) to 24.x (v0.0.41) is accepted: numbers
are plain or ``{"set", "infinite", "number"}`` objects, ``state.current`` is a string or a list,
``exit_code.return_code`` / ``signal`` are plain or nested, epoch times use ``0`` for unset, and
``time.limit`` is minutes. The ``tres`` lists are read as sacct's text prints them, by the text
parser's GPU rule (``job_checks.job_gpus``: the untyped ``gpu`` count, not it plus each typed
``gpu:<type>``); an unset signal whose ``status`` is no ``SIGNALED`` is 0, as the text's ``rc:0``;
the cluster is the one given, else the job's own (``ingest.base.record_cluster``). Arrays become
``<array_job_id>_<task>`` (as sacct text prints them), heterogeneous components
``<het_job_id>+<offset>``; with ``--duplicates`` a requeued job appears once per run and each run
is an attempt, numbered in time order.

A record is one element of ``jobs`` (its ``steps`` are folded into it). An element that is not an
object, has no usable job id, or holds a value a job cannot have (a number field that is not a
number, a count / exit code / signal out of range, end before start, a time outside ``ctx``'s
plausible window: ``ingest.job_checks``) is quarantined with its index as the record number; a file
that is not valid JSON, or has no ``jobs`` list, is one quarantined record. The per-job extraction
is Python over parsed JSON (the objects are nested and change shape by release); the per-column work
after it (hostlists, states, attempt numbering) is columnar.

Against sacct's text of the same jobs, every ``job_attempts`` column agrees but ``raw_state`` (the
text's ``CANCELLED by <uid>`` is ``CANCELLED`` here) and where the row was read
(``benchmarks/validate_differential_sacct.py``).

Slurm 22.05's ``sacct --json`` (data_parser ``openapi/dbv0.0.38``) prints ``exit_code``
``{"status": "SUCCESS", "return_code": 0}`` for a job that exited non-zero (``LOST_EXIT``): a
FAILED job's exit code from such a dump is stored as unknown (null), never as 0.
"""

from __future__ import annotations

import json
import math
import re

import polars as pl

from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import json_error
from ingest.base import record_cluster
from ingest.base import whole_file_quarantine
from ingest.hostlist import expand_column
from ingest.job_checks import STATES
from ingest.job_checks import job_gpus
from ingest.job_checks import job_value_errors
from ingest.job_checks import number_attempts
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame


def _num(v):
    """A plain number, or the number of a ``{set, infinite, number}`` object (None if unset or
    not a number; ``_unreadable`` tells the two apart)."""
    if isinstance(v, dict):
        if v.get("infinite") or not v.get("set", True):
            return None
        v = v.get("number")
    if isinstance(v, bool):
        return None
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,30}", v.strip()):
        v = int(v)
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, (int, float)):
        return v
    return None


def _unset(v) -> bool:
    if isinstance(v, dict):
        return bool(v.get("infinite")) or not v.get("set", True) or v.get("number") is None
    return v is None or v == ""


def _unreadable(name: str, v) -> str | None:
    """Why a numeric field present in the job cannot be stored, else None."""
    if _unset(v):
        return None
    n = _num(v)
    if n is None:
        return f"{name} {json.dumps(v, default=str)[:60]} is not a number"
    if abs(n) >= 2**53:  # beyond that it is no real count, code or time
        return f"{name} {n} is out of range"
    return None


def _epoch(v):
    n = _num(v)
    return None if n is None or n == 0 or abs(n) >= 2**53 else int(n) * 1_000_000  # 0 = unset


def _str(v) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    return s or None


def _states(state) -> list[str]:
    cur = state.get("current") if isinstance(state, dict) else state
    if isinstance(cur, list):
        return [str(s) for s in cur if s is not None]
    return [str(cur)] if cur not in (None, "") else []


def _tres_count(items, kind: str) -> int | None:
    """The count of the TRES of type ``kind`` (``cpu``, ``node``) in a TRES list."""
    if not isinstance(items, list):
        return None
    for t in items:
        if isinstance(t, dict) and t.get("type") == kind:
            n = _num(t.get("count"))
            if n is not None and n >= 0:
                return int(n)
    return None


def _tres_text(items) -> str | None:
    """A TRES list as sacct's text prints it (``cpu=8,gres/gpu=8,gres/gpu:h100=8``), for the GPU
    rule the text parser applies (``ingest.job_checks.job_gpus``); None when it lists nothing."""
    if not isinstance(items, list):
        return None
    parts = []
    for t in items:
        if not isinstance(t, dict) or not isinstance(t.get("type"), str):
            continue
        n = _num(t.get("count"))
        if n is None or n < 0 or (isinstance(n, float) and not n.is_integer()):
            continue  # unset (energy -2), or no count
        name = t.get("name") if isinstance(t.get("name"), str) else ""
        parts.append(f"{t['type']}{'/' + name if name else ''}={int(n)}")
    return ",".join(parts) or None


def _signal(ec) -> int | None:
    """The signal that ended the job; 0 when ``status`` says no signal did (``SUCCESS``,
    ``ERROR``: the signal is then unset, where sacct's text prints ``rc:0``)."""
    if not isinstance(ec, dict):
        return None
    sig = ec.get("signal")
    raw = sig.get("id", sig.get("signal_id")) if isinstance(sig, dict) else sig
    n = _num(raw)
    if n is None and _unset(raw):
        status = ec.get("status")
        status = status if isinstance(status, list) else [status]
        return 0 if status != [None] and "SIGNALED" not in status else None
    return int(n) if n is not None and abs(n) < 2**53 else None


def _job_row(job: dict, lost_exit: bool = False) -> dict:
    """One job element as a flat row; raises ValueError when it has no usable id. ``lost_exit``:
    the dump comes from a release that prints a non-zero exit status as 0 (``LOST_EXIT``)."""
    raw_id = _num(job.get("job_id"))
    if raw_id is None or raw_id <= 0:
        raise ValueError(f"no usable job_id ({job.get('job_id')!r})")
    job_id = str(int(raw_id))
    array = job.get("array") if isinstance(job.get("array"), dict) else {}
    arr_job = _num(array.get("job_id"))
    arr_task = _num(array.get("task_id"))
    array_job_id = array_task_id = None
    if arr_job and arr_task is not None:
        array_job_id, array_task_id = str(int(arr_job)), str(int(arr_task))
        job_id = f"{array_job_id}_{array_task_id}"
    elif arr_job and _str(array.get("task")):  # a pending array record: 123_[1-5]
        array_job_id, array_task_id = str(int(arr_job)), f"[{_str(array.get('task'))}]"
        job_id = f"{array_job_id}_{array_task_id}"
    het = job.get("het") if isinstance(job.get("het"), dict) else {}
    het_job, het_off = _num(het.get("job_id")), _num(het.get("job_offset"))
    if het_job and het_off is not None:
        job_id = f"{int(het_job)}+{int(het_off)}"
    t = job.get("time") if isinstance(job.get("time"), dict) else {}
    states = _states(job.get("state"))
    state = job.get("state") if isinstance(job.get("state"), dict) else {}
    ec = job.get("exit_code")
    rc_raw = ec.get("return_code") if isinstance(ec, dict) else ec
    rc = _num(rc_raw)
    sig_raw = ec.get("signal") if isinstance(ec, dict) else None
    sig_raw = sig_raw.get("id", sig_raw.get("signal_id")) if isinstance(sig_raw, dict) else sig_raw
    problems = [
        _unreadable("exit_code.return_code", rc_raw),
        _unreadable("exit_code.signal", sig_raw),
        _unreadable("allocation_nodes", job.get("allocation_nodes")),
        *(
            _unreadable(f"time.{k}", t.get(k))
            for k in ("submission", "start", "end", "elapsed", "limit")
        ),
    ]
    limit = _num(t.get("limit"))
    tres = job.get("tres") if isinstance(job.get("tres"), dict) else {}
    assoc = job.get("association") if isinstance(job.get("association"), dict) else {}
    row = {
        "reported_cluster": _str(job.get("cluster")) or _str(assoc.get("cluster")),
        "job_id": job_id,
        "array_job_id": array_job_id,
        "array_task_id": array_task_id,
        "name": _str(job.get("name")),
        "user": _str(job.get("user")) or _str(assoc.get("user")),
        "account": _str(job.get("account")) or _str(assoc.get("account")),
        "partition": _str(job.get("partition")),
        "submit_time": _epoch(t.get("submission")),
        "start_time": _epoch(t.get("start")),
        "end_time": _epoch(t.get("end")),
        "state_tok": states[0].upper() if states else None,
        "raw_state": ",".join(states) or None,
        "reason": _str(state.get("reason")),
        "exit_code": None
        if lost_exit and _exit_lost(ec, states)
        else int(rc)
        if rc is not None and abs(rc) < 2**53
        else None,
        "signal": _signal(ec),
        "n_nodes": _num(job.get("allocation_nodes"))
        if _unreadable("", job.get("allocation_nodes")) is None
        else None,
        "n_cpus": _tres_count(tres.get("allocated"), "cpu"),
        "alloctres": _tres_text(tres.get("allocated")),
        "reqtres": _tres_text(tres.get("requested")),
        "nodelist": _str(job.get("nodes")),
        "elapsed_s": _num(t.get("elapsed")) if _unreadable("", t.get("elapsed")) is None else None,
        "timelimit_s": limit * 60 if limit is not None and abs(limit) < 2**53 else None,
        "_unreadable": next((p for p in problems if p), None),
    }
    if row["n_cpus"] is not None and row["n_cpus"] >= 2**53:  # too large for any job (and Int64)
        row["_unreadable"] = row["_unreadable"] or f"n_cpus {row['n_cpus']} is out of range"
        row["n_cpus"] = None
    return row


# data_parser generations whose exit_code of a job that exited non-zero reads {"status":
# "SUCCESS", "return_code": 0}: seen on Slurm 22.05.8 (sacct --json of a job that ran
# ``exit 3``: text sacct says 3:0) and in a 22.05.9 capture (SARC__slurm_22_5_9.json: FAILED, 0).
LOST_EXIT = ("openapi/dbv0.0.38",)


def _exit_lost(ec, states: list[str]) -> bool:
    """A FAILED job whose exit_code says it succeeded: the release lost the code (stored as
    unknown, not as 0). Signals are printed right (status SIGNALED) and kept."""
    status = ec.get("status") if isinstance(ec, dict) else None
    return bool(states) and states[0].upper() == "FAILED" and status == "SUCCESS"


_ROW_SCHEMA = {
    "reported_cluster": pl.Utf8,
    "job_id": pl.Utf8,
    "array_job_id": pl.Utf8,
    "array_task_id": pl.Utf8,
    "name": pl.Utf8,
    "user": pl.Utf8,
    "account": pl.Utf8,
    "partition": pl.Utf8,
    "submit_time": pl.Int64,
    "start_time": pl.Int64,
    "end_time": pl.Int64,
    "state_tok": pl.Utf8,
    "raw_state": pl.Utf8,
    "reason": pl.Utf8,
    "exit_code": pl.Int64,
    "signal": pl.Int64,
    "n_nodes": pl.Int64,
    "n_cpus": pl.Int64,
    "alloctres": pl.Utf8,
    "reqtres": pl.Utf8,
    "nodelist": pl.Utf8,
    "elapsed_s": pl.Float64,
    "timelimit_s": pl.Float64,
    "_unreadable": pl.Utf8,
    "source_line": pl.Int64,
}


def document(data: bytes) -> tuple[dict | None, str | None, int]:
    """(the document, why ``data`` is not one with a ``jobs`` list, the line that says so):
    what this parser reads as a whole, also what a live source checks an answer by."""
    try:
        doc = json.loads(data.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        return None, json_error(exc), exc.lineno
    except RecursionError:
        return None, "JSON nested too deeply", 1
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        return None, "sacct JSON without a 'jobs' list", 1
    return doc, None, 1


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    doc, why, line = document(data)
    if doc is None:
        return ParseResult({}, whole_file_quarantine(data, why, line), 1)
    jobs = doc["jobs"]
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    plugin = meta.get("plugin") if isinstance(meta.get("plugin"), dict) else {}
    lost_exit = plugin.get("type") in LOST_EXIT
    rows, bad = [], ([], [], [])
    for i, job in enumerate(jobs, start=1):
        try:
            if not isinstance(job, dict):
                raise TypeError(f"job record is a {type(job).__name__}, not an object")
            row = _job_row(job, lost_exit)
        except (ValueError, TypeError, OverflowError, AttributeError) as exc:
            bad[0].append(i)
            bad[1].append(json.dumps(job)[:500])
            bad[2].append(f"job record {i}: {exc}")
            continue
        row["source_line"] = i
        rows.append(row)
    df = pl.DataFrame(rows, schema=_ROW_SCHEMA, orient="row")
    tok = pl.col("state_tok")
    n_gpus, gpus_err = job_gpus(pl.col("alloctres"), pl.col("reqtres"))
    cluster, reported, cluster_err = record_cluster(pl.col("reported_cluster"), ctx)
    df = df.with_columns(
        cluster=cluster,
        reported_cluster=reported,
        n_gpus=n_gpus,
        _unreadable=pl.coalesce(cluster_err, "_unreadable", gpus_err),
        scheduler=pl.lit("slurm"),
        state=pl.when(tok.is_in(list(STATES))).then(tok).otherwise(pl.lit("UNKNOWN")),
        submit_time=pl.col("submit_time").cast(pl.Datetime("us")),
        start_time=pl.col("start_time").cast(pl.Datetime("us")),
        end_time=pl.col("end_time").cast(pl.Datetime("us")),
        source=pl.lit("sacct-json"),
        source_file=pl.lit(ctx.path),
    )
    hosts, err = expand_column(df["nodelist"], df["n_nodes"])
    df = df.with_columns(nodes=hosts, _err=pl.coalesce("_unreadable", job_value_errors(ctx), err))
    node_bad = df.filter(pl.col("_err").is_not_null())
    df = df.filter(pl.col("_err").is_null())
    quarantine = pl.concat(
        [
            quarantine_frame(*bad),
            quarantine_frame(
                node_bad["source_line"],
                [
                    json.dumps(jobs[i - 1])[:500] for i in node_bad["source_line"]
                ],  # only the bad ones
                node_bad.select(pl.format("job record {}: {}", "source_line", "_err")).to_series(),
            ),
        ]
    )
    df = df.drop("state_tok", "nodelist", "alloctres", "reqtres", "_err", "_unreadable")
    tables = {}
    if df.height:
        tables["job_attempts"] = conform("job_attempts", number_attempts(df))
    return ParseResult(tables, quarantine, df.height + quarantine.height)


def detect(head: bytes, name: str) -> int:
    text = head[:65536].decode("utf-8", errors="replace").lstrip()
    if not text.startswith("{"):
        return 0
    if '"jobs"' in text and re.search(r'"(data_parser|Slurm|slurm)"', text):
        return CERTAIN
    if '"jobs"' in text and '"job_id"' in text and '"apiVersion"' not in text:
        return 70
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="job_attempts",
    description="sacct --json / slurmrestd job lists, Slurm 21.08 to 24.x",
)
