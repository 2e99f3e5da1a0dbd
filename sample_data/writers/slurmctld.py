"""slurmctld.log (read by ``ingest/formats/slurmctld.py``)."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from pathlib import Path

from sample_data.model import UNIT_CLASSES, Attempt, Fleet, ts
from sample_data.writers.base import alloc, nodelist, slurm_attempts, write_text

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


def write(f: Fleet, path: Path, codes: list[dict], ev: dict) -> int:
    """slurmctld.log: allocations, completions, node failures/drains/resumes, requeues."""
    rows: list[tuple[float, int, str]] = []
    seq = 0

    def add(t: float, msg: str) -> None:
        nonlocal seq
        seq += 1
        rows.append((t, seq, msg))

    def jid(a: Attempt) -> str:
        return f"JobId={a.job_id}({a.job_raw})" if a.array_task >= 0 else f"JobId={a.job_id}"

    killed: dict[int, list[Attempt]] = defaultdict(list)
    requeued: dict[int, list[Attempt]] = defaultdict(list)
    for a in slurm_attempts(f):
        cpus, _, _ = alloc(f, a)
        nl = nodelist(tuple(a.nodes))
        add(a.start, f"sched: Allocate {jid(a)} NodeList={nl} #CPUs={cpus} Partition={a.partition}")
        if a.end is None:
            continue
        state = a.state.split()[0]
        if a.cause and a.cause[0] == "fault":
            killed[a.cause[1]].append(a)
        elif a.cause and a.cause[0] == "maint":
            requeued[a.cause[1]].append(a)
        elif state == "TIMEOUT":
            add(a.end, f"Time limit exhausted for {jid(a)}")
        elif state == "CANCELLED":
            add(a.end, f"_slurm_rpc_kill_job: REQUEST_KILL_JOB {jid(a)} uid {a.user[1]}")
        elif state == "PREEMPTED":
            add(a.end, f"job_signal: 9 of running {jid(a)} successful 0x8004")
        else:
            rc = a.exit_code.split(":")[0]
            add(a.end, f"_job_complete: {jid(a)} WEXITSTATUS {rc}")
            add(a.end, f"_job_complete: {jid(a)} done")
            if state == "FAILED" and a.partition == "train":
                add(a.end + 5.0, f"_slurm_rpc_requeue: Requeue of {jid(a)} returned: Success")
                add(a.end + 5.0, f"Requeuing {jid(a)}")
    slurm_nodes = set(range(f.nodes - f.k8s_nodes))
    for i, flt in enumerate(f.faults):
        n = flt["node"]
        if not flt["fatal"] or flt["secondary"] or n not in slurm_nodes:
            continue
        host = f.hosts[n]
        t = flt["time"]
        if UNIT_CLASSES[flt["cls"]].crash:
            t_ev = t + 20.0
            add(t_ev, f"error: Nodes {host} not responding, setting DOWN")
            ev[i].append({"source": "slurmctld", "code": "not responding", "time": ts(f, t_ev)})
        else:
            t_ev = t + 3.0
            reason = f"{REASON[flt['cls']]} ({codes[i]['code']})"
            add(t_ev, f"update_node: node {host} reason set to: {reason}")
            add(t_ev, f"update_node: node {host} state set to DRAINING")
            ev[i].append({"source": "slurmctld", "code": reason, "time": ts(f, t_ev)})
        for a in sorted(killed.get(i, []), key=lambda a: a.job_raw):
            add(a.end, f"Killing {jid(a)} on failed node {host}")
            if a.partition == "train":
                add(a.end, f"requeue job {jid(a)} due to failure of node {host}")
                add(a.end, f"Requeuing {jid(a)}")
        if flt["t_off"] > t_ev:
            add(flt["t_off"], f"update_node: node {host} state set to DOWN")
        add(flt["t_rep"], f"Node {host} now responding")
        add(flt["t_rep"] + 1.0, f"node {host} returned to service")
    for i, m in enumerate(f.maint):
        if m["node"] not in slurm_nodes:
            continue
        host = f.hosts[m["node"]]
        add(m["start"], f"update_node: node {host} reason set to: maintenance")
        add(m["start"], f"update_node: node {host} state set to DRAINING")
        for a in requeued.get(i, []):
            add(a.end, f"_slurm_rpc_requeue: Requeue of {jid(a)} returned: Success")
            add(a.end, f"Requeuing {jid(a)}")
        add(m["start"] + 30.0, f"update_node: node {host} state set to DOWN")
        add(m["end"], f"update_node: node {host} state set to IDLE")
        add(m["end"], f"node {host} returned to service")
    rows.sort()
    out = []
    for t, _, msg in rows:
        if t >= f.horizon:
            continue
        sec = f.start_epoch + t
        ms = round((sec - math.floor(sec)) * 1000) % 1000
        out.append(
            f"[{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(math.floor(sec)))}.{ms:03d}] {msg}"
        )
    write_text(path, "\n".join(out) + "\n")
    return len(out)
