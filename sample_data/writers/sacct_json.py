"""`sacct --json` in the Slurm 23.11 shape (read by ``ingest/formats/sacct_json.py``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from sample_data.model import CLUSTER
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.writers.base import alloc
from sample_data.writers.base import nodelist
from sample_data.writers.base import slurm_attempts
from sample_data.writers.base import write_text


def epoch(f: Fleet, t: float) -> int:
    return round(f.start_epoch + t)


def _num(n: int, set_: bool = True) -> dict:
    return {"set": set_, "infinite": False, "number": n}


def _exit_obj(code: str, state: str) -> dict:
    rc, sig = (int(x) for x in code.split(":"))
    if sig:
        status = ["SIGNALED"]
    elif rc:
        status = ["ERROR"]
    else:
        status = ["SUCCESS"]
    names = {9: "KILL", 15: "TERM", 125: ""}
    return {
        "status": status,
        "return_code": _num(rc),
        "signal": {"id": _num(sig, bool(sig)), "name": names.get(sig, "") if sig else ""},
    }


def _tres_list(cpus: int, mem: int, nodes: int, gpus: int) -> list[dict]:
    return [
        {"type": "cpu", "name": "", "id": 1, "count": cpus},
        {"type": "mem", "name": "", "id": 2, "count": mem},
        {"type": "energy", "name": "", "id": 3, "count": -2},
        {"type": "node", "name": "", "id": 4, "count": nodes},
        {"type": "billing", "name": "", "id": 5, "count": cpus},
        {"type": "gres", "name": "gpu", "id": 1001, "count": gpus},
        {"type": "gres", "name": "gpu:h100", "id": 1002, "count": gpus},
    ]


def _times(f: Fleet, a: Attempt) -> dict:
    """The record's ``time`` block: eligible at submission, no CPU-time accounting."""
    zero = {"seconds": 0, "microseconds": 0}
    return {
        "elapsed": round((a.end if a.end is not None else f.horizon) - a.start),
        "eligible": epoch(f, a.submit),
        "end": epoch(f, a.end) if a.end is not None else 0,
        "start": epoch(f, a.start),
        "submission": epoch(f, a.submit),
        "suspended": 0,
        "system": zero,
        "limit": _num(a.time_limit_min),
        "total": zero,
        "user": zero,
    }


def _job_record(f: Fleet, a: Attempt) -> dict:
    """One attempt as a ``jobs`` record (keys in the order Slurm 23.11 writes them)."""
    cpus, ng, mem = alloc(f, a)
    state = a.state.split()[0]
    failed_node = ""
    if a.cause and a.cause[0] == "fault":
        failed_node = f.hosts[f.faults[a.cause[1]]["node"]]
    account, user = a.user[2], a.user[0]
    tres = _tres_list(cpus, mem, len(a.nodes), ng)
    return {
        "account": account,
        "comment": {"administrator": "", "job": "", "system": ""},
        "allocation_nodes": len(a.nodes),
        "array": {
            "job_id": a.array_job_id,
            "limits": {"max": {"running": {"tasks": 0}}},
            "task_id": _num(max(a.array_task, 0), a.array_task >= 0),
            "task": "",
        },
        "association": {
            "account": account,
            "cluster": CLUSTER,
            "partition": "",
            "user": user,
            "id": 100 + a.user[1] % 100,
        },
        "block": "",
        "cluster": CLUSTER,
        "constraints": "",
        "container": "",
        "derived_exit_code": _exit_obj("0:0" if state != "FAILED" else a.exit_code, state),
        "time": _times(f, a),
        "exit_code": _exit_obj(a.exit_code, state),
        "extra": "",
        "failed_node": failed_node,
        "flags": ["STARTED_ON_SCHEDULER"],
        "group": user,
        "het": {"job_id": 0, "job_offset": _num(0, False)},
        "job_id": a.job_raw,
        "name": a.name,
        "licenses": "",
        "mcs": {"label": ""},
        "nodes": nodelist(tuple(a.nodes)),
        "partition": a.partition,
        "hold": False,
        "priority": _num(10000 + (a.job_raw * 7919) % 90000),
        "qos": "normal",
        "required": {
            "CPUs": cpus,
            "memory_per_cpu": _num(0, False),
            "memory_per_node": _num(mem // len(a.nodes)),
        },
        "kill_request_user": user if state == "CANCELLED" else "",
        "reservation": {"id": 0, "name": ""},
        "script": "",
        "state": {"current": [state], "reason": "None"},
        "steps": [],
        "submit_line": "",
        "tres": {"allocated": tres, "requested": tres},
        "used_gres": "",
        "user": user,
        "wckey": {"wckey": "", "flags": []},
        "working_directory": f"/home/{user}",
    }


def _meta(f: Fleet) -> dict:
    """The document's ``meta``: the sacct command that covers the window, and the Slurm release."""
    start = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(f.start_epoch))
    end = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(f.start_epoch + f.horizon))
    return {
        "plugin": {
            "type": "",
            "name": "",
            "data_parser": "data_parser/v0.0.40",
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "/dev/pts/0", "user": "root", "group": "root"},
        "command": ["sacct", "--json", "-X", "--duplicates", "--allusers", "-S", start, "-E", end],
        "slurm": {
            "version": {"major": "23", "micro": "5", "minor": "11"},
            "release": "23.11.5",
            "cluster": CLUSTER,
        },
    }


def write(f: Fleet, path: Path) -> int:
    """`sacct --json` (Slurm 23.11, data_parser v0.0.40): one record per attempt."""
    jobs = [_job_record(f, a) for a in slurm_attempts(f)]
    rest = json.dumps({"meta": _meta(f), "errors": [], "warnings": []}, indent=2)
    # One job record per line: the C encoder keeps large histories fast, the result is the
    # same JSON document (parsers must not depend on whitespace).
    body = ",\n".join("    " + json.dumps(j, ensure_ascii=False) for j in jobs)
    write_text(
        path, '{\n  "jobs": [\n' + body + ("\n" if jobs else "") + "  ],\n" + rest[2:] + "\n"
    )
    return len(jobs)
