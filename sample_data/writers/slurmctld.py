"""slurmctld.log (read by ``ingest/formats/slurmctld.py``)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path

from sample_data.model import UNIT_CLASSES
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import alloc
from sample_data.writers.base import nodelist
from sample_data.writers.base import slurm_attempts
from sample_data.writers.base import write_text

# Drain reasons a node health check would set in Slurm, by class.
REASON = {
    "gpu": "GPU health check failed",
    "gpu_memory": "GPU ECC DBE",
    "nvlink": "NVLink error",
    "nvswitch": "NVSwitch fatal SXID",
    "ib_link": "IB link down",
    "psu": "Not responding",
    "cooling": "Not responding",
    "cpu": "Not responding",
    "host_memory": "Not responding",
    "storage": "NVMe controller down",
}


class _Log:
    """slurmctld's lines as (time, sequence, message): lines at the same time keep the order
    they were added in."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, int, str]] = []

    def add(self, t: float, msg: str) -> None:
        self.rows.append((t, len(self.rows) + 1, msg))


def _jid(a: Attempt) -> str:
    return f"JobId={a.job_id}({a.job_raw})" if a.array_task >= 0 else f"JobId={a.job_id}"


def _job_lines(f: Fleet, log: _Log) -> tuple[dict[int, list[Attempt]], dict[int, list[Attempt]]]:
    """Each attempt's allocation and its end, except the ends a fault or a drain caused: those
    are returned (fault index -> killed attempts, drain index -> requeued attempts) for the
    node's own lines to report."""
    killed: dict[int, list[Attempt]] = defaultdict(list)
    requeued: dict[int, list[Attempt]] = defaultdict(list)
    for a in slurm_attempts(f):
        cpus, _, _ = alloc(f, a)
        nl = nodelist(tuple(a.nodes))
        log.add(
            a.start, f"sched: Allocate {_jid(a)} NodeList={nl} #CPUs={cpus} Partition={a.partition}"
        )
        if a.end is None:
            continue
        state = a.state.split()[0]
        if a.cause and a.cause[0] == "fault":
            killed[a.cause[1]].append(a)
        elif a.cause and a.cause[0] == "maint":
            requeued[a.cause[1]].append(a)
        elif state == "TIMEOUT":
            log.add(a.end, f"Time limit exhausted for {_jid(a)}")
        elif state == "CANCELLED":
            log.add(a.end, f"_slurm_rpc_kill_job: REQUEST_KILL_JOB {_jid(a)} uid {a.user[1]}")
        elif state == "PREEMPTED":
            log.add(a.end, f"job_signal: 9 of running {_jid(a)} successful 0x8004")
        else:
            rc = a.exit_code.split(":")[0]
            log.add(a.end, f"_job_complete: {_jid(a)} WEXITSTATUS {rc}")
            log.add(a.end, f"_job_complete: {_jid(a)} done")
            if state == "FAILED" and a.partition == "train":
                log.add(a.end + 5.0, f"_slurm_rpc_requeue: Requeue of {_jid(a)} returned: Success")
                log.add(a.end + 5.0, f"Requeuing {_jid(a)}")
    return killed, requeued


def _fault_lines(
    f: Fleet, log: _Log, codes: list[dict], ev: dict, killed: dict[int, list[Attempt]]
) -> None:
    """A fatal fault on a Slurm node: the node stops responding (a crash) or a health check
    drains it with the fault's code; its jobs are killed (training requeued); it comes back."""
    slurm_nodes = set(range(f.nodes - f.k8s_nodes))
    for i, flt in enumerate(f.faults):
        n = flt["node"]
        if not flt["fatal"] or flt["secondary"] or n not in slurm_nodes:
            continue
        host = f.hosts[n]
        t = flt["time"]
        if UNIT_CLASSES[flt["cls"]].crash:
            t_ev = t + 20.0
            log.add(t_ev, f"error: Nodes {host} not responding, setting DOWN")
            ev[i].append({"source": "slurmctld", "code": "not responding", "time": ts(f, t_ev)})
        else:
            t_ev = t + 3.0
            reason = f"{REASON[flt['cls']]} ({codes[i]['code']})"
            log.add(t_ev, f"update_node: node {host} reason set to: {reason}")
            log.add(t_ev, f"update_node: node {host} state set to DRAINING")
            ev[i].append({"source": "slurmctld", "code": reason, "time": ts(f, t_ev)})
        for a in sorted(killed.get(i, []), key=lambda a: a.job_raw):
            log.add(a.end, f"Killing {_jid(a)} on failed node {host}")
            if a.partition == "train":
                log.add(a.end, f"requeue job {_jid(a)} due to failure of node {host}")
                log.add(a.end, f"Requeuing {_jid(a)}")
        if flt["t_off"] > t_ev:
            log.add(flt["t_off"], f"update_node: node {host} state set to DOWN")
        log.add(flt["t_rep"], f"Node {host} now responding")
        log.add(flt["t_rep"] + 1.0, f"node {host} returned to service")


def _maintenance_lines(f: Fleet, log: _Log, requeued: dict[int, list[Attempt]]) -> None:
    """A maintenance drain of a Slurm node: its jobs requeued, the node down, then back idle."""
    slurm_nodes = set(range(f.nodes - f.k8s_nodes))
    for i, m in enumerate(f.maint):
        if m["node"] not in slurm_nodes:
            continue
        host = f.hosts[m["node"]]
        log.add(m["start"], f"update_node: node {host} reason set to: maintenance")
        log.add(m["start"], f"update_node: node {host} state set to DRAINING")
        for a in requeued.get(i, []):
            log.add(a.end, f"_slurm_rpc_requeue: Requeue of {_jid(a)} returned: Success")
            log.add(a.end, f"Requeuing {_jid(a)}")
        log.add(m["start"] + 30.0, f"update_node: node {host} state set to DOWN")
        log.add(m["end"], f"update_node: node {host} state set to IDLE")
        log.add(m["end"], f"node {host} returned to service")


def write(f: Fleet, path: Path, codes: list[dict], ev: dict) -> int:
    """slurmctld.log: allocations, completions, node failures/drains/resumes, requeues."""
    log = _Log()
    killed, requeued = _job_lines(f, log)
    _fault_lines(f, log, codes, ev, killed)
    _maintenance_lines(f, log, requeued)
    out = []
    for t, _, msg in sorted(log.rows):
        if t >= f.horizon:
            continue
        sec = f.start_epoch + t
        ms = round((sec - math.floor(sec)) * 1000) % 1000
        out.append(
            f"[{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(math.floor(sec)))}.{ms:03d}] {msg}"
        )
    write_text(path, "\n".join(out) + "\n")
    return len(out)
