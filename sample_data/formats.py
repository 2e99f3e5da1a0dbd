"""Writers: one function per on-disk format, each laid out like the real samples.

Every writer takes the simulated :class:`~sample_data.fleet.Fleet` and appends the evidence it
emitted to a shared dict (fault index -> list of evidence dicts), so ground_truth.json records
exactly what a parser can find. All randomness here comes from a generator seeded from the
fleet seed, and every collection is emitted in a sorted/fixed order (byte-identical reruns).
"""

from __future__ import annotations

import csv
import functools
import gzip
import hashlib
import io
import json
import math
import shutil
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from sample_data.fleet import (
    CLUSTER,
    CPUS_PER_NODE,
    GPU_MODEL,
    GPU_PCI_BUS,
    GPU_TEMP_BETA,
    MEM_PER_NODE_MB,
    NIC_PCI_BUS,
    TEMP_SD_C,
    Attempt,
    Fleet,
    host_name,
    hostlist,
)

SACCT_FIELDS = (
    "JobID|JobIDRaw|JobName|Partition|Account|User|Submit|Start|End|Elapsed|State|"
    "ExitCode|NNodes|AllocCPUS|AllocTRES|NodeList|Cluster"
)
K8S_NAMESPACE = "ml-train"
GENERATED = ("slurm", "kernel", "dcgm", "ipmi", "redfish", "k8s", "components", "ground_truth.json")
BLANK_SENTINEL = "9223372036854775794"
SXID_TEXT = {
    "24007": "Fatal, Link 42 sourcetrack TCEN0 crumbstore ECC DBE Error",
    "12028": "Fatal, Link 17 egress non-posted PRIV error",
    "20034": "Fatal, Link 30 LTSSM Fault Up",
}
XID_TEXT = {
    "79": "GPU has fallen off the bus.",
    "119": "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 "
    "(GSP_RM_CONTROL) (0x20801348 0x98).",
    "48": "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
    "at partition 6, subpartition 0.",
    "94": "Contained ECC error",
    "95": "Uncontained: FBHUB. RST: Yes, D-RST: No",
    "74": "NVLink: fatal error detected on link 5(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
}
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


def ts(f: Fleet, t: float) -> str:
    """Seconds-from-start -> `YYYY-MM-DDTHH:MM:SS` UTC (Slurm and ground-truth layout)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(round(f.start_epoch + t)))


def epoch(f: Fleet, t: float) -> int:
    return round(f.start_epoch + t)


def elapsed(sec: float) -> str:
    """Slurm Elapsed: D-HH:MM:SS or HH:MM:SS."""
    s = max(0, round(sec))
    d, r = divmod(s, 86400)
    h, r = divmod(r, 3600)
    m, s = divmod(r, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def _json(obj, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, ensure_ascii=False) + "\n"


def choose_codes(f: Fleet, rng: np.random.Generator) -> list[dict]:
    """Per fault: the error code and text the hardware reports (XID, SXID, mlx5, SEL)."""
    out = []
    for flt in f.faults:
        c = flt["cls"]
        u = rng.uniform()
        if c == "gpu":
            code = "79" if u < 0.7 else "119"
        elif c == "gpu_memory":
            code = "48" if u < 0.5 else ("95" if u < 0.8 else "94")
        elif c == "nvlink":
            code = "74"
        elif c == "nvswitch":
            code = ("24007", "12028", "20034")[int(u * 3)]
        elif c == "ib_link":
            code = "mlx5_link_down" if u < 0.6 else "mlx5_port_module_error"
        elif c == "cpu":
            code = "IERR"
        elif c == "host_memory":
            code = "Uncorrectable ECC"
        elif c == "psu":
            code = "Failure detected"
        elif c == "cooling":
            code = "Lower Critical going low" if flt["fatal"] else "Lower Non-critical going low"
        else:
            code = "Drive Fault"
        out.append(
            {
                "code": code,
                "multiline": bool(rng.uniform() < 0.4),
                "followups": int(rng.integers(1, 4)) if rng.uniform() < 0.35 else 0,
                "pid": int(rng.integers(100000, 4000000)),
            }
        )
    return out


# ----------------------------------------------------------------------------- Slurm
def _tres(cpus: int, gpus: int, mem_mb: int, nodes: int, billing: bool = True) -> str:
    head = f"billing={cpus}," if billing else ""
    gres = f"gres/gpu={gpus},gres/gpu:h100={gpus}," if gpus else ""
    return f"{head}cpu={cpus},{gres}mem={mem_mb}M,node={nodes}"


@functools.lru_cache(maxsize=1 << 16)
def _nodelist(nodes: tuple[int, ...]) -> str:
    """Hostlist expression of node indices (cached: gang jobs repeat long node sets)."""
    return hostlist([host_name(n) for n in nodes])


def _alloc(f: Fleet, a: Attempt) -> tuple[int, int, int]:
    """(cpus, gpus, mem MB) of an attempt: whole nodes for gang jobs, per-GPU share otherwise."""
    G = f.gpus_per_node
    ng = sum(len(g) for g in a.gpus)
    cpus = sum(CPUS_PER_NODE * len(g) // G for g in a.gpus)
    mem = sum(MEM_PER_NODE_MB * len(g) // G for g in a.gpus)
    return cpus, ng, mem


STEP_STATE = {  # job state -> (batch/.0 state, step exit code, extern state)
    "COMPLETED": ("COMPLETED", None, "COMPLETED"),
    "FAILED": ("FAILED", None, "COMPLETED"),
    "OUT_OF_MEMORY": ("OUT_OF_MEMORY", "0:125", "COMPLETED"),
    "CANCELLED": ("CANCELLED", "0:15", "COMPLETED"),
    "TIMEOUT": ("CANCELLED", "0:15", "COMPLETED"),
    "PREEMPTED": ("CANCELLED", "0:15", "COMPLETED"),
    "REQUEUED": ("CANCELLED", "0:15", "COMPLETED"),
    "NODE_FAIL": ("CANCELLED", "0:9", "CANCELLED"),
    "RUNNING": ("RUNNING", "0:0", "RUNNING"),
}


def slurm_attempts(f: Fleet) -> list[Attempt]:
    """Slurm attempts in sacct order (job raw id, then attempt)."""
    return sorted(
        (a for a in f.attempts if a.scheduler == "slurm"), key=lambda a: (a.job_raw, a.attempt)
    )


def write_sacct_txt(f: Fleet, path: Path) -> int:
    """`sacct --parsable2 --duplicates --allusers` with header; job line then its steps."""
    H = f.horizon
    lines = [SACCT_FIELDS]
    for a in slurm_attempts(f):
        cpus, ng, mem = _alloc(f, a)
        hosts = [f.hosts[n] for n in a.nodes]
        nl = _nodelist(tuple(a.nodes))
        end = ts(f, a.end) if a.end is not None else "Unknown"
        el = elapsed((a.end if a.end is not None else H) - a.start)
        lines.append(
            "|".join(
                [
                    a.job_id,
                    str(a.job_raw),
                    a.name,
                    a.partition,
                    a.user[2],
                    a.user[0],
                    ts(f, a.submit),
                    ts(f, a.start),
                    end,
                    el,
                    a.state,
                    a.exit_code,
                    str(len(a.nodes)),
                    str(cpus),
                    _tres(cpus, ng, mem, len(a.nodes)),
                    nl,
                    CLUSTER,
                ]
            )
        )
        st, sec, ext = STEP_STATE[a.state.split()[0]]
        sec = sec or a.exit_code
        c0, g0, m0 = cpus // len(a.nodes), len(a.gpus[0]), mem // len(a.nodes)
        steps = [
            ("batch", "batch", st, sec, 1, c0, _tres(c0, g0, m0, 1, False), hosts[0]),
            (
                "extern",
                "extern",
                ext,
                "0:0",
                len(hosts),
                cpus,
                _tres(cpus, ng, mem, len(hosts), False),
                nl,
            ),
            (
                "0",
                "torchrun" if a.partition == "train" else "python",
                st,
                sec,
                len(hosts),
                cpus,
                _tres(cpus, ng, mem, len(hosts), False),
                nl,
            ),
        ]
        for sid, sname, sst, sec_, nn, c, tres, snl in steps:
            lines.append(
                "|".join(
                    [
                        f"{a.job_id}.{sid}",
                        f"{a.job_raw}.{sid}",
                        sname,
                        "",
                        a.user[2],
                        "",
                        ts(f, a.start),
                        ts(f, a.start),
                        end,
                        el,
                        sst,
                        sec_,
                        str(nn),
                        str(c),
                        tres,
                        snl,
                        CLUSTER,
                    ]
                )
            )
    _write(path, "\n".join(lines) + "\n")
    return len(lines) - 1


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


def write_sacct_json(f: Fleet, path: Path) -> int:
    """`sacct --json` (Slurm 23.11, data_parser v0.0.40): one record per attempt."""
    jobs = []
    for a in slurm_attempts(f):
        cpus, ng, mem = _alloc(f, a)
        state = a.state.split()[0]
        end = epoch(f, a.end) if a.end is not None else 0
        el = round((a.end if a.end is not None else f.horizon) - a.start)
        failed_node = ""
        if a.cause and a.cause[0] == "fault":
            failed_node = f.hosts[f.faults[a.cause[1]]["node"]]
        jobs.append(
            {
                "account": a.user[2],
                "comment": {"administrator": "", "job": "", "system": ""},
                "allocation_nodes": len(a.nodes),
                "array": {
                    "job_id": a.array_job_id,
                    "limits": {"max": {"running": {"tasks": 0}}},
                    "task_id": _num(max(a.array_task, 0), a.array_task >= 0),
                    "task": "",
                },
                "association": {
                    "account": a.user[2],
                    "cluster": CLUSTER,
                    "partition": "",
                    "user": a.user[0],
                    "id": 100 + a.user[1] % 100,
                },
                "block": "",
                "cluster": CLUSTER,
                "constraints": "",
                "container": "",
                "derived_exit_code": _exit_obj("0:0" if state != "FAILED" else a.exit_code, state),
                "time": {
                    "elapsed": el,
                    "eligible": epoch(f, a.submit),
                    "end": end,
                    "start": epoch(f, a.start),
                    "submission": epoch(f, a.submit),
                    "suspended": 0,
                    "system": {"seconds": 0, "microseconds": 0},
                    "limit": _num(a.time_limit_min),
                    "total": {"seconds": 0, "microseconds": 0},
                    "user": {"seconds": 0, "microseconds": 0},
                },
                "exit_code": _exit_obj(a.exit_code, state),
                "extra": "",
                "failed_node": failed_node,
                "flags": ["STARTED_ON_SCHEDULER"],
                "group": a.user[0],
                "het": {"job_id": 0, "job_offset": _num(0, False)},
                "job_id": a.job_raw,
                "name": a.name,
                "licenses": "",
                "mcs": {"label": ""},
                "nodes": _nodelist(tuple(a.nodes)),
                "partition": a.partition,
                "hold": False,
                "priority": _num(10000 + (a.job_raw * 7919) % 90000),
                "qos": "normal",
                "required": {
                    "CPUs": cpus,
                    "memory_per_cpu": _num(0, False),
                    "memory_per_node": _num(mem // len(a.nodes)),
                },
                "kill_request_user": a.user[0] if state == "CANCELLED" else "",
                "reservation": {"id": 0, "name": ""},
                "script": "",
                "state": {"current": [state], "reason": "None"},
                "steps": [],
                "submit_line": "",
                "tres": {
                    "allocated": _tres_list(cpus, mem, len(a.nodes), ng),
                    "requested": _tres_list(cpus, mem, len(a.nodes), ng),
                },
                "used_gres": "",
                "user": a.user[0],
                "wckey": {"wckey": "", "flags": []},
                "working_directory": f"/home/{a.user[0]}",
            }
        )
    start = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(f.start_epoch))
    endt = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(f.start_epoch + f.horizon))
    doc = {
        "jobs": jobs,
        "meta": {
            "plugin": {
                "type": "",
                "name": "",
                "data_parser": "data_parser/v0.0.40",
                "accounting_storage": "accounting_storage/slurmdbd",
            },
            "client": {"source": "/dev/pts/0", "user": "root", "group": "root"},
            "command": [
                "sacct",
                "--json",
                "-X",
                "--duplicates",
                "--allusers",
                "-S",
                start,
                "-E",
                endt,
            ],
            "slurm": {
                "version": {"major": "23", "micro": "5", "minor": "11"},
                "release": "23.11.5",
                "cluster": CLUSTER,
            },
        },
        "errors": [],
        "warnings": [],
    }
    # One job record per line: the C encoder keeps large histories fast, the result is the
    # same JSON document (parsers must not depend on whitespace).
    body = ",\n".join("    " + json.dumps(j, ensure_ascii=False) for j in jobs)
    rest = json.dumps({k: v for k, v in doc.items() if k != "jobs"}, indent=2)
    _write(path, '{\n  "jobs": [\n' + body + ("\n" if jobs else "") + "  ],\n" + rest[2:] + "\n")
    return len(jobs)


def write_slurmctld(f: Fleet, path: Path, codes: list[dict], ev: dict) -> int:
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
        cpus, _, _ = _alloc(f, a)
        nl = _nodelist(tuple(a.nodes))
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
        if flt["cls"] in ("psu", "cpu", "host_memory", "cooling"):
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
    _write(path, "\n".join(out) + "\n")
    return len(out)


# ----------------------------------------------------------------------------- kernel
BENIGN_KERNEL = (
    (
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
        "further processing"
    ),
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    (
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 "
        "page:0x4a1c2 offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0000:009f socket:0 "
        "ha:0 channel_mask:4 rank:1)"
    ),
    (
        "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate "
        "to 79750"
    ),
    "nvidia-nvswitch1: open (major=510)",
    "xfs filesystem being remounted at /tmp supports timestamps until 2038 (0x7fffffff)",
)
BOOT_KERNEL = (
    (
        "Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~"
        "22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 "
        "09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.149)"
    ),
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Sat Feb 17 22:55:48 UTC 2024",
    "nvidia-nvswitch0: open (major=510)",
)


def _pci(g: int) -> str:
    return f"0000:{GPU_PCI_BUS[g]}:00"


def kernel_lines_for_fault(
    f: Fleet, i: int, code: dict, gpu_uuid: str | None, gpu_serial: str | None, name: str
) -> list[tuple[float, str]]:
    """Kernel lines of one fault: one primary line with its code, plus optional context."""
    flt = f.faults[i]
    t, c, k = flt["time"], flt["cls"], code["code"]
    G = f.gpus_per_node
    idx = f.slot_index[flt["slot"]]
    pid = f"{code['pid']}" if name != "<unknown>" else "'<unknown>'"
    lines: list[tuple[float, str]] = []

    def add(at: float, msg: str) -> None:
        lines.append((at, msg))

    if c in ("gpu", "gpu_memory", "nvlink"):
        pci = _pci(idx)
        if code["multiline"]:
            add(t, f"NVRM: GPU at PCI:{pci}: {gpu_uuid}")
            add(t, f"NVRM: GPU Board Serial Number: {gpu_serial}")
        text = XID_TEXT[k].replace("GPU0", f"GPU{idx}")
        add(t, f"NVRM: Xid (PCI:{pci}): {k}, pid={pid}, name={name}, {text}")
        if code["multiline"] and k == "79":
            add(t, f"NVRM: GPU {pci}.0: GPU has fallen off the bus.")
        if code["followups"] and k in ("74", "79", "48") and G > 1:
            others = [g for g in range(G) if g != idx][: code["followups"]]
            for j, g in enumerate(others):
                add(
                    t + 0.5 + j,
                    f"NVRM: Xid (PCI:{_pci(g)}): 45, pid={pid}, name={name}, "
                    f"Ch {8 + j:08x} caused by previous Xid {k}",
                )
    elif c == "nvswitch":
        sw = f"nvidia-nvswitch{idx}"
        add(t, f"{sw}: SXID={k}, {SXID_TEXT[k]}")
        if code["multiline"]:
            add(t, f"{sw}: SXID={k}, Severity 1 Engine instance 42 Sub-engine instance 00")
            add(
                t,
                f"{sw}: SXID={k}, Data {{0x00000000, 0x00000000, 0x00000004, 0x00000000, "
                f"0x00000000, 0x00000000, 0x00000000, 0x00000000}}",
            )
    elif c == "ib_link":
        dev = f"mlx5_core 0000:{NIC_PCI_BUS[idx % len(NIC_PCI_BUS)]}:00.0"
        if k == "mlx5_port_module_error":
            add(
                t,
                f"{dev}: mlx5_port_module_event:1151:(pid 0): Port module event[error]: "
                f"module {idx}, Cable error, High Temperature",
            )
        else:
            add(t, f"{dev} ib{idx}: Link down")
    elif c == "cpu":
        add(
            t,
            f"mce: [Hardware Error]: CPU {idx * 56}: Machine Check Exception: 5 Bank 4: "
            f"be00000000800400",
        )
        add(t, "mce: [Hardware Error]: Run the above through 'mcelog --ascii'")
    elif c == "host_memory":
        add(
            t,
            f"EDAC MC{idx // 8}: 1 UE memory read error on CPU_SrcID#{idx // 8}_MC#0_"
            f"Chan#{idx % 8}_DIMM#0 (channel:{idx % 8} slot:0 page:0x1f2a3 offset:0x0 "
            f"grain:32 - area:DRAM err_code:0000:009f)",
        )
    elif c == "storage":
        add(
            t, f"nvme nvme{idx}: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff"
        )
    return lines


KERNEL_CODE_FOR_EVIDENCE = {
    "cpu": "mce",
    "host_memory": "edac_ue",
    "storage": "nvme_controller_down",
}


def _running_name(f: Fleet, node: int, t: float, by_node: dict) -> str:
    for a in by_node.get(node, ()):
        if a.start <= t and (a.end is None or t <= a.end + 60):
            return "pt_main_thread" if a.partition in ("train", "") else "python3"
    return "<unknown>"


def write_kernel(
    f: Fleet, out: Path, codes: list[dict], ev: dict, rng: np.random.Generator
) -> dict:
    """kernel/<host>.log; odd-numbered hosts use `dmesg --ctime`, even ones journald short-iso."""
    by_node: dict[int, list[Attempt]] = defaultdict(list)
    for a in f.attempts:
        for n in a.nodes:
            by_node[n].append(a)
    per_node: dict[int, list[tuple[float, int, str]]] = defaultdict(list)
    stats = {"primary_lines": 0, "xid45_followups": 0, "benign_lines": 0}
    for i, flt in enumerate(f.faults):
        c = flt["cls"]
        if c in ("psu", "cooling"):
            continue
        gpu_uuid = gpu_serial = None
        if flt["gpu_index"] is not None:
            gpu_uuid, gpu_serial = _uuid_at(f, flt["node"], flt["gpu_index"], flt["time"])
        name = _running_name(f, flt["node"], flt["time"], by_node)
        lines = kernel_lines_for_fault(f, i, codes[i], gpu_uuid, gpu_serial, name)
        for t, msg in lines:
            per_node[flt["node"]].append((t, 1, msg))
        code = codes[i]["code"]
        ev[i].append(
            {
                "source": "kernel",
                "code": KERNEL_CODE_FOR_EVIDENCE.get(c, code),
                "time": ts(f, flt["time"]),
            }
        )
        if flt["fatal"] and not flt["secondary"]:
            for j, msg in enumerate(BOOT_KERNEL):
                per_node[flt["node"]].append((flt["t_rep"] + 20 + j, 0, msg))
    for m in f.maint:
        for j, msg in enumerate(BOOT_KERNEL):
            per_node[m["node"]].append((m["end"] - 300 + j, 0, msg))
    H = f.horizon
    for n in range(f.nodes):
        k = int(rng.poisson(H / (12 * 3600.0)))
        tt = np.sort(rng.uniform(0, H, k))
        which = rng.integers(0, len(BENIGN_KERNEL), k)
        for t, w in zip(tt, which):
            per_node[n].append((float(t), 2, BENIGN_KERNEL[int(w)]))
    for n in range(f.nodes):
        host = f.hosts[n]
        rows = sorted(r for r in per_node[n] if 0 <= r[0] < H)
        journald = (n + 1) % 2 == 0
        lines = []
        for t, kind, msg in rows:
            if kind == 1:
                if "caused by previous Xid" in msg:
                    stats["xid45_followups"] += 1
                elif _is_primary_kernel(msg):
                    stats["primary_lines"] += 1
            elif kind == 2:
                stats["benign_lines"] += 1
            g = time.gmtime(round(f.start_epoch + t))
            if journald:
                lines.append(f"{time.strftime('%Y-%m-%dT%H:%M:%S', g)}+0000 {host} kernel: {msg}")
            else:
                lines.append(f"[{time.strftime('%a %b %e %H:%M:%S %Y', g)}] {msg}")
        _write(out / "kernel" / f"{host}.log", "\n".join(lines) + ("\n" if lines else ""))
    return stats


PRIMARY_KERNEL_MARKERS = (
    "NVRM: Xid (",
    "Fatal, Link",
    "Link down",
    "Port module event[error]",
    "Machine Check Exception",
    " UE memory read error",
    "controller is down",
)


def _is_primary_kernel(msg: str) -> bool:
    """The one line per fault that carries its code (XID, SXID, mlx5, MCE, EDAC UE, NVMe)."""
    return any(m in msg for m in PRIMARY_KERNEL_MARKERS) and "caused by previous Xid" not in msg


def _uuid_at(f: Fleet, node: int, gpu: int, t: float) -> tuple[str, str]:
    """UUID and board serial of the GPU in (node, gpu) at time t."""
    hist = f.gpu_uuid_at[(node, gpu)]
    cur = hist[0]
    for h in hist:
        if h[0] <= t:
            cur = h
    return cur[1], cur[2]


# ----------------------------------------------------------------------------- BMC
SEL_SENSOR = {  # class -> (sensor type, base sensor number, Redfish SensorType)
    "psu": ("Power Supply", 0x51, "Power Supply / Converter"),
    "host_memory": ("Memory", 0x87, "Memory"),
    "cpu": ("Processor", 0x04, "Processor"),
    "cooling": ("Fan", 0x30, "Fan"),
    "storage": ("Drive Slot / Bay", 0xA0, "Drive Slot/Bay"),
}


def write_bmc(f: Fleet, out: Path, codes: list[dict], ev: dict, rng: np.random.Generator) -> int:
    """ipmi/<host>.sel.txt (`ipmitool sel elist`) and redfish/<host>.LogEntries.json."""
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
    n_rows = 0
    for n in range(f.nodes):
        host = f.hosts[n]
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
        sel, members = [], []
        for rid, (t, _, st, num, desc, direc, extra, sev, fi) in enumerate(rows, start=1):
            g = time.gmtime(round(f.start_epoch + t))
            line = (
                f"{rid:>4x} | {time.strftime('%m/%d/%Y', g)} | {time.strftime('%H:%M:%S', g)}"
                f" | {st} #0x{num:02x} | {desc} | {direc}"
            )
            if extra:
                line += f" | {extra}"
            sel.append(line)
            msg_id = "0x" + hashlib.sha1(f"{st}|{desc}|{direc}".encode()).hexdigest()[:6].upper()
            rf_type = next((v[2] for v in SEL_SENSOR.values() if v[0] == st), st)
            members.append(
                {
                    "@odata.id": f"/redfish/v1/Systems/1/LogServices/SEL/Entries/{rid}",
                    "@odata.type": "#LogEntry.v1_14_0.LogEntry",
                    "Id": str(rid),
                    "Name": f"Log Entry {rid}",
                    "EntryType": "SEL",
                    "Severity": sev,
                    "Created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", g),
                    "EntryCode": "Assert" if direc == "Asserted" else "Deassert",
                    "SensorType": rf_type,
                    "SensorNumber": num,
                    "Message": f"{st} #0x{num:02x} {desc}"
                    + (f" ({extra})" if extra else "")
                    + ("" if direc == "Asserted" else " - deasserted"),
                    "MessageId": msg_id,
                    "Links": {
                        "OriginOfCondition": {"@odata.id": "/redfish/v1/Chassis/1"},
                        "Oem": {},
                    },
                    "Oem": {},
                }
            )
            if fi >= 0:
                iso_t = ts(f, t)
                ev[fi].append({"source": "ipmi", "code": desc, "time": iso_t})
                ev[fi].append({"source": "redfish", "code": msg_id, "time": iso_t})
        n_rows += len(sel)
        _write(out / "ipmi" / f"{host}.sel.txt", "\n".join(sel) + "\n")
        coll = {
            "@odata.type": "#LogEntryCollection.LogEntryCollection",
            "Name": "Log Service Collection",
            "Description": "Collection of Logs for this System",
            "Members@odata.count": len(members),
            "Members": members,
            "@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries",
        }
        _write(out / "redfish" / f"{host}.LogEntries.json", json.dumps(coll, indent=4) + "\n")
    return n_rows


# ----------------------------------------------------------------------------- DCGM
DCGM_METRICS = (  # name, type, help
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
)


def write_dcgm(f: Fleet, out: Path, codes: list[dict], ev: dict, rng: np.random.Generator) -> int:
    """dcgm/<host>/<date>.prom.gz: concatenated /metrics scrapes with ms timestamps.

    No scrape while the node is powered off (repair or maintenance); counters and the last
    XID reset at the reboot that ends such an interval; a replaced GPU shows its new UUID.
    """
    G, H, dt = f.gpus_per_node, f.horizon, float(f.scrape_interval_s)
    by_node: dict[int, list[Attempt]] = defaultdict(list)
    for a in f.attempts:
        for n in a.nodes:
            by_node[n].append(a)
    off: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for flt in f.faults:
        if flt["fatal"]:
            off[flt["node"]].append((flt["t_off"], flt["t_rep"]))
    for m in f.maint:
        off[m["node"]].append((m["start"] + 60, m["end"]))
    faults_by_node: dict[int, list[int]] = defaultdict(list)
    for i, flt in enumerate(f.faults):
        faults_by_node[flt["node"]].append(i)
    headers = [(f"# HELP {m} {h}", f"# TYPE {m} {ty}") for m, ty, h in DCGM_METRICS]
    gpu_off = f.gpu_temp_offset
    total = 0
    if dt <= 0:
        return 0
    for n in range(f.nodes):
        phase = float(rng.uniform(0, 59))
        pod_names = {"": 0}
        tt = np.arange(phase, H, dt)
        up = np.ones(tt.size, bool)
        boot = np.zeros(tt.size, np.int64)
        for a, b in sorted(off[n]):
            up &= ~((tt >= a) & (tt < b))
            boot += tt >= b
        S = tt.size
        # busy GPUs and pod names
        busy = np.zeros((S, G), bool)
        pod = np.zeros((S, G), np.int64)  # index into pod names, 0 = no pod
        for a in by_node[n]:
            e = a.end if a.end is not None else H
            i0, i1 = np.searchsorted(tt, [a.start, e])
            if i1 <= i0:
                continue
            gl = a.gpus[a.nodes.index(n)]
            busy[i0:i1, gl] = True
            if a.scheduler == "k8s":
                pname = f"{a.name}-worker-{a.nodes.index(n)}"
                pod_names.setdefault(pname, len(pod_names))
                pod[i0:i1, gl] = pod_names[pname]
        util = (
            np.where(busy, np.clip(rng.normal(93, 5, (S, G)), 0, 100), 0).round().astype(np.int64)
        )
        temp = (33 + 0.33 * util + gpu_off[n] + rng.normal(0, 1.2, (S, G))).round().astype(np.int64)
        mtemp = (temp + 4 + rng.normal(0, 1, (S, G))).round().astype(np.int64)
        power = (68 + 5.9 * util + rng.normal(0, 6, (S, G))).round(3)
        fb = np.where(busy, rng.integers(52000, 79000, (S, G)), 0)
        dbe = np.zeros((S, G), np.int64)
        xid = np.zeros((S, G), np.int64)
        remap = np.zeros((S, G), np.int64)
        crc_inc = rng.poisson(0.15 * dt / 3600.0, (S, G))
        for i in faults_by_node[n]:
            flt = f.faults[i]
            g = flt["gpu_index"]
            if g is None or not flt["fatal"] or flt["secondary"]:
                continue
            i0, i1 = np.searchsorted(tt, [flt["time"], flt["t_off"]])
            if i1 <= i0:
                continue
            code = codes[i]["code"]
            xid[i0:i1, g] = int(code)
            first = ts(f, float(tt[i0]))
            if flt["cls"] == "gpu_memory":
                dbe[i0:i1, g] = 1
                if code in ("48", "95"):
                    remap[i0:i1, g] = 1
                ev[i].append(
                    {"source": "dcgm", "code": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "time": first}
                )
            if flt["cls"] == "nvlink":
                crc_inc[i0, g] += int(rng.integers(1000, 100000))
            if codes[i]["followups"] and code in ("74", "79", "48") and G > 1:
                others = [x for x in range(G) if x != g][: codes[i]["followups"]]
                xid[i0:i1, others] = 45
            ev[i].append(
                {"source": "dcgm", "code": f"DCGM_FI_DEV_XID_ERRORS={code}", "time": first}
            )
        # counters since last boot: cumulative sum restarted at each boot segment
        crc = np.cumsum(crc_inc, axis=0)
        seg_start = np.searchsorted(boot, boot, side="left")
        base = np.where(seg_start[:, None] > 0, crc[np.maximum(seg_start - 1, 0)], 0)
        crc = crc - base
        vals = [temp, mtemp, power, util, fb, dbe, xid, remap, crc]
        sel = np.nonzero(up)[0]
        if sel.size == 0:
            continue
        total += _write_dcgm_host(
            f, out, n, tt[sel], [v[sel] for v in vals], pod[sel], list(pod_names), headers, rng
        )
    return total


def _write_dcgm_host(
    f: Fleet,
    out: Path,
    n: int,
    tt: np.ndarray,
    vals: list[np.ndarray],
    pod: np.ndarray,
    pod_names: list[str],
    headers: list,
    rng,
) -> int:
    """Format one host's scrapes with Polars string ops and write one gzip file per UTC day."""
    G, S = f.gpus_per_node, tt.size
    host = f.hosts[n]
    labels, lab_idx = [], np.zeros((S, G), np.int64)
    for g in range(G):
        hist = f.gpu_uuid_at[(n, g)]
        starts = np.array([h[0] for h in hist])
        which = np.maximum(np.searchsorted(starts, tt, side="right") - 1, 0)
        lab_idx[:, g] = len(labels) + which
        labels += [
            f'gpu="{g}",UUID="{h[1]}",pci_bus_id="0000{_pci(g)}.0",device="nvidia{g}",'
            f'modelName="{GPU_MODEL}",Hostname="{host}"'
            for h in hist
        ]
    lab = pl.Series(labels, dtype=pl.String).gather(lab_idx.ravel())
    if n >= f.nodes - f.k8s_nodes:
        suffix = [',container="",namespace="",pod=""'] + [
            f',container="pytorch",namespace="{K8S_NAMESPACE}",pod="{p}"' for p in pod_names[1:]
        ]
        sfx = pl.Series(suffix, dtype=pl.String).gather(pod.ravel())
        lab = pl.DataFrame({"a": lab, "b": sfx}).select(pl.concat_str(["a", "b"])).to_series()
    ms = np.round((f.start_epoch + tt) * 1000).astype(np.int64)
    s_idx = np.repeat(np.arange(S), G)
    g_idx = np.tile(np.arange(G), S)
    blank_mem = n % 8 == 5  # an exporter on old firmware: memory temperature unsupported
    days = ((f.start_epoch + tt) // 86400).astype(np.int64)
    frames = []
    for mi, (name, _, _) in enumerate(DCGM_METRICS):
        v = vals[mi].ravel()
        if mi == 2:
            vs = pl.Series(v).round(3).cast(pl.String)
        elif mi == 1 and blank_mem:
            vs = pl.repeat(BLANK_SENTINEL, v.size, eager=True, dtype=pl.String)
        else:
            vs = pl.Series(v).cast(pl.String)
        tms = pl.Series(np.repeat(ms, G) + rng.integers(0, 40, S * G)).cast(pl.String)
        line = (
            pl.DataFrame({"l": lab, "v": vs, "t": tms})
            .select(
                pl.concat_str(
                    [
                        pl.lit(name + "{"),
                        pl.col("l"),
                        pl.lit("} "),
                        pl.col("v"),
                        pl.lit(" "),
                        pl.col("t"),
                    ]
                )
            )
            .to_series()
        )
        frames.append(
            pl.DataFrame(
                {"day": days[s_idx], "s": s_idx, "k": mi * (G + 2) + 2 + g_idx, "line": line}
            )
        )
        for h in (0, 1):
            frames.append(
                pl.DataFrame(
                    {
                        "day": days,
                        "s": np.arange(S),
                        "k": np.full(S, mi * (G + 2) + h),
                        "line": pl.repeat(headers[mi][h], S, eager=True),
                    }
                )
            )
    df = (
        pl.concat(frames)
        .sort(["s", "k"])
        .group_by("day", maintain_order=True)
        .agg(pl.col("line").str.join("\n"))
    )
    written = 0
    for d, text in zip(df["day"].to_list(), df["line"].to_list()):
        date = time.strftime("%Y-%m-%d", time.gmtime(int(d) * 86400))
        p = out / "dcgm" / host / f"{date}.prom.gz"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(gzip.compress((text + "\n").encode(), compresslevel=6, mtime=0))
        written += 1
    return written


# ----------------------------------------------------------------------------- Kubernetes
def _k8s_time(f: Fleet, t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(round(f.start_epoch + t)))


def _uid(*parts) -> str:
    h = hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _cid(*parts) -> str:
    """containerd container id: 64 hex digits, stable for the same inputs."""
    return "containerd://" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def write_k8s(f: Fleet, out: Path, ev: dict) -> dict:
    """k8s/pods.json, k8s/events.json, k8s/pytorchjob.json for the PyTorchJob chain."""
    G, H = f.gpus_per_node, f.horizon
    k8s = [a for a in f.attempts if a.scheduler == "k8s"]
    jobs: dict[str, list[Attempt]] = {}
    for a in k8s:
        jobs.setdefault(a.name, []).append(a)
    pods, events, pjs = [], [], []
    ev_rows: list[tuple] = []

    def event(
        t0: float,
        t1: float,
        kind: str,
        name: str,
        reason: str,
        msg: str,
        typ: str,
        comp: str,
        host: str = "",
        count: int = 1,
    ) -> None:
        ev_rows.append((t0, kind, name, reason, msg, typ, comp, host, count, t1))

    image = "nvcr.io/nvidia/pytorch:24.03-py3"
    for name in sorted(jobs):
        atts = sorted(jobs[name], key=lambda a: a.attempt)
        W = len(atts[0].nodes)
        job_uid = _uid("pytorchjob", name)
        created = atts[0].submit
        conds: dict[str, dict] = {}

        def cond(typ: str, t: float, reason: str, msg: str, conds: dict = conds) -> None:
            for c in conds.values():
                if c["type"] in ("Running", "Restarting") and c["type"] != typ:
                    c["status"] = "False"
            conds[typ] = {
                "lastTransitionTime": _k8s_time(f, t),
                "lastUpdateTime": _k8s_time(f, t),
                "message": msg,
                "reason": reason,
                "status": "True",
                "type": typ,
            }

        cond("Created", created, "PyTorchJobCreated", f"PyTorchJob {name} is created.")
        pod_node = [None] * W
        restarts = [0] * W
        last_term: list = [None] * W
        pod_created = [created] * W
        for a in atts:
            for w in range(W):
                if pod_node[w] != a.nodes[w]:
                    if pod_node[w] is not None:
                        pod_created[w] = a.start - 20
                        restarts[w], last_term[w] = 0, None
                        event(
                            a.start - 20,
                            a.start - 20,
                            "PyTorchJob",
                            name,
                            "SuccessfulCreatePod",
                            f"Created pod: {name}-worker-{w}",
                            "Normal",
                            "pytorchjob-controller",
                        )
                    pod_node[w] = a.nodes[w]
                    event(
                        a.start - 5,
                        a.start - 5,
                        "Pod",
                        f"{name}-worker-{w}",
                        "Scheduled",
                        f"Successfully assigned {K8S_NAMESPACE}/{name}-worker-{w} to "
                        f"{f.hosts[a.nodes[w]]}",
                        "Normal",
                        "default-scheduler",
                    )
            cond(
                "Running",
                a.start,
                "PyTorchJobRunning",
                f"PyTorchJob {K8S_NAMESPACE}/{name} is running.",
            )
            if a.end is None:
                break
            state = a.state
            if state == "COMPLETED":
                cond(
                    "Succeeded",
                    a.end,
                    "PyTorchJobSucceeded",
                    f"PyTorchJob {K8S_NAMESPACE}/{name} successfully completed.",
                )
                for w in range(W):
                    last_term[w] = ("done", a.start, a.end)
                continue
            bad_w = 0
            if a.cause and a.cause[0] in ("fault", "maint"):
                bad_n = (
                    f.faults[a.cause[1]]["node"]
                    if a.cause[0] == "fault"
                    else f.maint[a.cause[1]]["node"]
                )
                bad_w = a.nodes.index(bad_n)
            if a.cause and a.cause[0] == "fault":
                event(
                    a.end,
                    a.end,
                    "Pod",
                    f"{name}-worker-{bad_w}",
                    "Killing",
                    "Stopping container pytorch",
                    "Normal",
                    "kubelet",
                    f.hosts[bad_n],
                )
            elif a.cause and a.cause[0] == "maint":
                event(
                    a.end,
                    a.end,
                    "Pod",
                    f"{name}-worker-{bad_w}",
                    "Evicted",
                    "The node was drained for maintenance.",
                    "Warning",
                    "kubelet",
                    f.hosts[bad_n],
                )
            for w in range(W):
                if a.cause and a.cause[0] in ("fault", "maint") and w == bad_w:
                    continue
                restarts[w] += 1
                last_term[w] = ("Error", 1, a.start, a.end)
            if not (a.cause and a.cause[0] in ("fault", "maint")):
                event(
                    a.end + 10,
                    a.end + 10,
                    "Pod",
                    f"{name}-worker-0",
                    "BackOff",
                    "Back-off restarting failed container pytorch in pod "
                    f"{name}-worker-0_{K8S_NAMESPACE}({_uid('pod', name, 0)})",
                    "Warning",
                    "kubelet",
                    f.hosts[a.nodes[0]],
                    2,
                )
            cond(
                "Restarting",
                a.end + 2,
                "PyTorchJobRestarting",
                f"PyTorchJob {name} is restarting because 1 Worker replica(s) failed.",
            )
            event(
                a.end + 2,
                a.end + 2,
                "PyTorchJob",
                name,
                "PyTorchJobRestarting",
                f"PyTorchJob {name} is restarting because 1 Worker replica(s) failed.",
                "Warning",
                "pytorchjob-controller",
            )
        final = atts[-1]
        running = final.end is None
        for w in range(W):
            pname = f"{name}-worker-{w}"
            start_c = final.start
            if running:
                state = {"running": {"startedAt": _k8s_time(f, start_c)}}
            else:
                state = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": _k8s_time(f, start_c),
                        "finishedAt": _k8s_time(f, final.end),
                        "containerID": _cid(pname, final.attempt, final.start),
                    }
                }
            last = {}
            lt = last_term[w]
            if lt is not None and lt[0] == "Error":
                last = {
                    "terminated": {
                        "exitCode": lt[1],
                        "reason": "Error",
                        "startedAt": _k8s_time(f, lt[2]),
                        "finishedAt": _k8s_time(f, lt[3]),
                        "containerID": _cid(pname, lt[2], "error"),
                    }
                }
            node = f.hosts[pod_node[w]]
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "creationTimestamp": _k8s_time(f, pod_created[w]),
                        "labels": {
                            "training.kubeflow.org/job-name": name,
                            "training.kubeflow.org/operator-name": "pytorchjob-controller",
                            "training.kubeflow.org/replica-index": str(w),
                            "training.kubeflow.org/replica-type": "worker",
                        },
                        "name": pname,
                        "namespace": K8S_NAMESPACE,
                        "ownerReferences": [
                            {
                                "apiVersion": "kubeflow.org/v1",
                                "blockOwnerDeletion": True,
                                "controller": True,
                                "kind": "PyTorchJob",
                                "name": name,
                                "uid": job_uid,
                            }
                        ],
                        "resourceVersion": str(100000 + len(pods)),
                        "uid": _uid("pod", name, w, pod_created[w]),
                    },
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch",
                                "image": image,
                                "command": [
                                    "torchrun",
                                    "--nnodes",
                                    str(W),
                                    "--nproc-per-node",
                                    str(G),
                                    "train.py",
                                ],
                                "resources": {
                                    "limits": {"nvidia.com/gpu": str(G)},
                                    "requests": {"nvidia.com/gpu": str(G)},
                                },
                            }
                        ],
                        "nodeName": node,
                        "restartPolicy": "OnFailure",
                        "schedulerName": "default-scheduler",
                    },
                    "status": {
                        "phase": "Running" if running else "Succeeded",
                        "hostIP": f"10.1.{pod_node[w] // 250}.{pod_node[w] % 250 + 2}",
                        "podIP": f"10.244.{pod_node[w] % 250}.{10 + w}",
                        "qosClass": "BestEffort",
                        "startTime": _k8s_time(f, pod_created[w]),
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True" if running else "False",
                                "lastTransitionTime": _k8s_time(f, start_c),
                            }
                        ],
                        "containerStatuses": [
                            {
                                "name": "pytorch",
                                "image": image,
                                "imageID": "nvcr.io/nvidia/pytorch@sha256:"
                                + hashlib.sha256(image.encode()).hexdigest(),
                                "containerID": _cid(pname, final.attempt, final.start),
                                "ready": running,
                                "started": running,
                                "restartCount": restarts[w],
                                "state": state,
                                "lastState": last,
                            }
                        ],
                    },
                }
            )
        status = {
            "conditions": list(conds.values()),
            "replicaStatuses": {
                "Worker": {
                    "selector": f"training.kubeflow.org/job-name={name},training.kubeflow.org/"
                    "operator-name=pytorchjob-controller,training.kubeflow.org/"
                    "replica-type=worker",
                    **({"active": W} if running else {"succeeded": W}),
                }
            },
            "startTime": _k8s_time(f, atts[0].start),
            "lastReconcileTime": _k8s_time(f, min(H, (final.end or H))),
        }
        if not running:
            status["completionTime"] = _k8s_time(f, final.end)
        pjs.append(
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "metadata": {
                    "creationTimestamp": _k8s_time(f, created),
                    "generation": 1,
                    "name": name,
                    "namespace": K8S_NAMESPACE,
                    "resourceVersion": str(200000 + len(pjs)),
                    "uid": job_uid,
                },
                "spec": {
                    "pytorchReplicaSpecs": {
                        "Worker": {
                            "replicas": W,
                            "restartPolicy": "OnFailure",
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "pytorch",
                                            "image": image,
                                            "resources": {"limits": {"nvidia.com/gpu": str(G)}},
                                        }
                                    ]
                                }
                            },
                        }
                    },
                    "runPolicy": {"backoffLimit": 100, "cleanPodPolicy": "None"},
                },
                "status": status,
            }
        )
    k8s_nodes = set(range(f.nodes - f.k8s_nodes, f.nodes))
    for i, flt in enumerate(f.faults):
        if flt["node"] in k8s_nodes and flt["fatal"] and not flt["secondary"]:
            host = f.hosts[flt["node"]]
            t_nr = flt["time"] + 40.0
            event(
                t_nr,
                t_nr,
                "Node",
                host,
                "NodeNotReady",
                f"Node {host} status is now: NodeNotReady",
                "Normal",
                "node-controller",
            )
            event(
                flt["t_rep"],
                flt["t_rep"],
                "Node",
                host,
                "NodeReady",
                f"Node {host} status is now: NodeReady",
                "Normal",
                "kubelet",
                host,
            )
            ev[i].append({"source": "k8s", "code": "NodeNotReady", "time": ts(f, t_nr)})
    for m in f.maint:
        if m["node"] in k8s_nodes:
            host = f.hosts[m["node"]]
            event(
                m["start"],
                m["start"],
                "Node",
                host,
                "NodeNotSchedulable",
                f"Node {host} status is now: NodeNotSchedulable",
                "Normal",
                "kubelet",
                host,
            )
            event(
                m["end"],
                m["end"],
                "Node",
                host,
                "NodeSchedulable",
                f"Node {host} status is now: NodeSchedulable",
                "Normal",
                "kubelet",
                host,
            )
    ev_rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
    for j, (t0, kind, name, reason, msg, typ, comp, host, count, t1) in enumerate(ev_rows):
        if t0 >= H:
            continue
        ns = "default" if kind == "Node" else K8S_NAMESPACE
        events.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "count": count,
                "eventTime": None,
                "firstTimestamp": _k8s_time(f, t0),
                "involvedObject": {
                    "apiVersion": {"Pod": "v1", "Node": "v1"}.get(kind, "kubeflow.org/v1"),
                    "kind": kind,
                    "name": name,
                    **({} if kind == "Node" else {"namespace": ns}),
                    "uid": _uid(kind, name),
                },
                "lastTimestamp": _k8s_time(f, t1 + (count - 1) * 10),
                "message": msg,
                "metadata": {
                    "creationTimestamp": _k8s_time(f, t0),
                    "name": f"{name}.{hashlib.sha1(f'{j}{t0}'.encode()).hexdigest()[:16]}",
                    "namespace": ns,
                    "resourceVersion": str(300000 + j),
                    "uid": _uid("event", j, t0),
                },
                "reason": reason,
                "reportingComponent": comp if comp != "kubelet" else "",
                "reportingInstance": "",
                "source": {"component": comp, **({"host": host} if host else {})},
                "type": typ,
            }
        )
    meta = {"resourceVersion": ""}
    _write(
        out / "k8s" / "pods.json",
        _json({"apiVersion": "v1", "items": pods, "kind": "List", "metadata": meta}, 4),
    )
    _write(
        out / "k8s" / "events.json",
        _json({"apiVersion": "v1", "items": events, "kind": "List", "metadata": meta}, 4),
    )
    _write(
        out / "k8s" / "pytorchjob.json",
        _json({"apiVersion": "v1", "items": pjs, "kind": "List", "metadata": meta}, 4),
    )
    return {"pods": len(pods), "events": len(events), "pytorchjobs": len(pjs)}


# ----------------------------------------------------------------------------- history / truth
def write_component_history(f: Fleet, path: Path) -> int:
    """One row per installation of every unit seen during the window (ISO UTC times)."""
    rows = []
    H = f.horizon
    for inst in f.inst:
        if inst.get("removed") is not None and inst["removed"] <= 0:
            continue
        s = inst["slot"]
        removed = inst.get("removed")
        failed = bool(inst.get("failed")) and inst["fail"] < H
        if removed is not None and removed < H:
            rem, reason = ts(f, removed), inst.get("reason", "")
        elif failed:  # failed in the window, still in its slot awaiting the repair
            rem, reason = ts(f, inst["fail"]), "failed_awaiting_replacement"
        else:
            rem, reason = "", ""
        rows.append(
            (
                f.slot_class[s],
                inst["serial"],
                f"{f.hosts[f.slot_node[s]]}/{f.slot_pos[s]}",
                ts(f, inst["install"]),
                rem,
                reason,
                "true" if failed else "false",
            )
        )
    rows.sort(key=lambda r: (r[2], r[3], r[1]))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "component_class",
            "serial",
            "slot",
            "installed_at",
            "removed_at",
            "removal_reason",
            "failed",
        ]
    )
    w.writerows(rows)
    _write(path, buf.getvalue())
    return len(rows)


def _attempt_ref(f: Fleet, a: Attempt) -> dict:
    """An attempt as ground truth names it: attempts count from 1, as the warehouse numbers them."""
    return {
        "scheduler": a.scheduler,
        "job_id": a.job_id,
        "attempt": a.attempt + 1,
        "nodes": [f.hosts[n] for n in a.nodes],
        "end_time": ts(f, a.end) if a.end is not None else None,
    }


def write_ground_truth(f: Fleet, path: Path, codes: list[dict], ev: dict, extra: dict) -> dict:
    """ground_truth.json: the laws, every fault with its evidence, workload failures, drains."""
    H = f.horizon
    killed: dict[int, list[Attempt]] = defaultdict(list)
    requeued: dict[int, list[Attempt]] = defaultdict(list)
    wl = []
    for a in sorted(f.attempts, key=lambda a: (a.scheduler, a.job_raw, a.job_id, a.attempt)):
        if a.cause and a.cause[0] == "fault":
            killed[a.cause[1]].append(a)
        elif a.cause and a.cause[0] == "maint":
            requeued[a.cause[1]].append(a)
        elif a.cause and a.cause[0] == "workload" and a.end is not None:
            wl.append(
                {
                    "scheduler": a.scheduler,
                    "job_id": a.job_id,
                    "attempt": a.attempt + 1,
                    "state": a.state,
                    "exit_code": a.exit_code,
                    "reason": a.reason,
                    "end_time": ts(f, a.end),
                }
            )
    repl_by_old = {r["old"]: r for r in f.replacements}
    faults = []
    for i, flt in enumerate(f.faults):
        s, inst = flt["slot"], f.inst[flt["inst"]]
        uuid = None
        if flt["gpu_index"] is not None:
            uuid, _ = _uuid_at(f, flt["node"], flt["gpu_index"], flt["time"])
        rep = repl_by_old.get(flt["inst"])
        faults.append(
            {
                "fault_id": f"F{i + 1:04d}",
                "time": ts(f, flt["time"]),
                "host": f.hosts[flt["node"]],
                "component_class": flt["cls"],
                "unit_serial": inst["serial"],
                "unit_installed_at": ts(f, inst["install"]),
                "unit_age_hours": round((flt["time"] - inst["install"]) / 3600.0, 3),
                "slot": f"{f.hosts[flt['node']]}/{f.slot_pos[s]}",
                "gpu_index": flt["gpu_index"],
                "uuid": uuid,
                "code": codes[i]["code"],
                "evidence": sorted(
                    ev.get(i, []), key=lambda e: (e["time"], e["source"], e["code"])
                ),
                "fatal": flt["fatal"],
                "during_repair": flt["secondary"],
                "repair_hours": round((flt["t_rep"] - flt["time"]) / 3600.0, 3),
                "replacement_serial": f.inst[rep["new"]]["serial"] if rep else None,
                "killed_attempts": [_attempt_ref(f, a) for a in killed.get(i, [])],
            }
        )
    replacements = []
    for r in f.replacements:
        s = r["slot"]
        o, nw = f.inst[r["old"]], f.inst[r["new"]]
        replacements.append(
            {
                "time": ts(f, r["time"]),
                "slot": f"{f.hosts[f.slot_node[s]]}/{f.slot_pos[s]}",
                "component_class": f.slot_class[s],
                "old_serial": o["serial"],
                "new_serial": nw["serial"],
                "old_uuid": o["uuid"],
                "new_uuid": nw["uuid"],
                "old_failed": bool(o.get("failed")),
                "fault_id": f"F{r['fault'] + 1:04d}",
            }
        )
    planned = []
    for i, m in enumerate(f.maint):
        if m["start"] >= H:
            continue
        planned.append(
            {
                "host": f.hosts[m["node"]],
                "start": ts(f, m["start"]),
                "end": ts(f, min(m["end"], H)),
                "reason": "maintenance",
                "action": "drain",
                "scheduler": "k8s" if m["node"] >= f.nodes - f.k8s_nodes else "slurm",
                "requeued_attempts": [_attempt_ref(f, a) for a in requeued.get(i, [])],
                "killed_attempts": [],
            }
        )
    ckpt = {a.job_id: a.ckpt_s for a in f.attempts if a.ckpt_s}
    truth = {
        "seed": f.seed,
        "start": f.start,
        "end": ts(f, H),
        "cluster": CLUSTER,
        "site_tz": "UTC",
        "time_format": "ISO-8601 UTC, YYYY-MM-DDTHH:MM:SS, no zone suffix",
        "nodes": f.nodes,
        "gpus_per_node": f.gpus_per_node,
        "k8s_nodes": f.k8s_nodes,
        "k8s_hosts": f.hosts[f.nodes - f.k8s_nodes :],
        "k8s_job_id_format": f"{K8S_NAMESPACE}/<pytorchjob name>",
        "fault_scale": f.fault_scale,
        "scrape_interval_s": f.scrape_interval_s,
        "covariates": {
            "gpu": {
                "name": "gpu_temp_offset_c",
                "meaning": "per-slot GPU temperature offset (C) added to DCGM_FI_DEV_GPU_TEMP; gpu "
                "hazard multiplied by exp(beta*z - beta^2/2), z = offset / sd",
                "sd_c": TEMP_SD_C,
                "beta_per_sd": GPU_TEMP_BETA,
                "hazard_ratio_per_degC": round(math.exp(GPU_TEMP_BETA / TEMP_SD_C), 6),
                "offsets": {
                    f"{f.hosts[n]}/gpu{g}": float(f.gpu_temp_offset[n, g])
                    for n in range(f.nodes)
                    for g in range(f.gpus_per_node)
                },
            }
        },
        "checkpoint_interval_s": dict(sorted(ckpt.items())),
        "laws": {
            c: {k: (float(v) if isinstance(v, (np.floating,)) else v) for k, v in law.items()}
            for c, law in f.laws.items()
        },
        "faults": faults,
        "workload_failures": wl,
        "planned": planned,
        "replacements": replacements,
        "files": extra,
    }
    _write(path, json.dumps(truth, indent=2, sort_keys=True) + "\n")
    return truth


def write_all(f: Fleet, out: Path) -> dict:
    """Write every format under out and return a count summary."""
    out.mkdir(parents=True, exist_ok=True)
    # Regenerating into the same folder must not leave files of an earlier, different run
    # (e.g. DCGM days beyond a shorter window); only our own sub-trees are removed.
    for sub in GENERATED:
        p = out / sub
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    r_codes, r_kern, r_bmc, r_dcgm = (
        np.random.default_rng(s) for s in np.random.SeedSequence([f.seed, 7]).spawn(4)
    )
    codes = choose_codes(f, r_codes)
    ev: dict[int, list] = defaultdict(list)
    summary = {}
    summary["sacct_rows"] = write_sacct_txt(f, out / "slurm" / "sacct.txt")
    summary["sacct_json_jobs"] = write_sacct_json(f, out / "slurm" / "sacct.json")
    summary["slurmctld_lines"] = write_slurmctld(f, out / "slurm" / "slurmctld.log", codes, ev)
    kstats = write_kernel(f, out, codes, ev, r_kern)
    summary["sel_rows"] = write_bmc(f, out, codes, ev, r_bmc)
    summary["dcgm_files"] = write_dcgm(f, out, codes, ev, r_dcgm)
    summary.update({f"k8s_{k}": v for k, v in write_k8s(f, out, ev).items()})
    summary["component_rows"] = write_component_history(
        f, out / "components" / "component_history.csv"
    )
    truth = write_ground_truth(f, out / "ground_truth.json", codes, ev, {"kernel": kstats})
    summary["faults"] = len(truth["faults"])
    summary["faults_by_class"] = {c: l["n_failures"] for c, l in truth["laws"].items()}
    summary["attempts"] = len(f.attempts)
    summary["jobs"] = len({(a.scheduler, a.job_id) for a in f.attempts})
    summary["workload_failures"] = len(truth["workload_failures"])
    summary["replacements"] = len(truth["replacements"])
    return summary
