"""The simulated fleet's ground truth (``ground_truth.json``): every fault with the attempts it
interrupted, the replacements, planned drains, the covariate effect, and each training chain's
true goodput (``chain_truth``), against which the analysis is checked."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from sample_data.model import CLUSTER
from sample_data.model import K8S_NAMESPACE
from sample_data.model import TEMP_SD_C
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.model import uuid_at


def _attempt_ref(f: Fleet, a: Attempt) -> dict:
    """An attempt as ground truth names it: attempts count from 1, as the warehouse numbers them."""
    return {
        "scheduler": a.scheduler,
        "job_id": a.job_id,
        "attempt": a.attempt + 1,
        "nodes": [f.hosts[n] for n in a.nodes],
        "end_time": ts(f, a.end) if a.end is not None else None,
    }


# the work an attempt lost running slow within [lo, hi) (sample_data.fail_slow, which the
# simulation passes in, so the truth does not depend on how slowness is drawn)
SlowLoss = Callable[[Attempt, float, float], float]


def chain_truth(f: Fleet, atts: list[Attempt], slow: SlowLoss | None = None) -> dict:
    """A training chain's attempts as they ran and its true time budget (seconds, over its
    ended attempts: a chain still running ends at its last ended attempt). Every attempt first
    spends ``overhead_s`` starting up or restoring (``restart``, capped at its length), then
    computes; a checkpoint every ``ckpt_s`` of compute keeps it (saves are free in this model),
    so a failed attempt keeps whole intervals and loses the rest (``lost_work``), a completed
    one keeps all; gaps between attempts are ``queue_after_failure``. Of the kept compute, the
    work lost running slow (``slow``) is ``slow``, not productive."""
    atts = sorted(atts, key=lambda a: a.attempt)
    ended = [a for a in atts if a.end is not None]
    b = {
        "productive": 0.0,
        "slow": 0.0,
        "lost_work": 0.0,
        "restart": 0.0,
        "queue_after_failure": 0.0,
    }
    for i, a in enumerate(ended):
        d = a.end - a.start
        restart = min(a.overhead_s, d)
        compute = d - restart
        kept = compute if a.state == "COMPLETED" else math.floor(compute / a.ckpt_s) * a.ckpt_s
        lost = slow(a, a.start + restart, a.start + restart + kept) if slow else 0.0
        b["restart"] += restart
        b["productive"] += kept - lost
        b["slow"] += lost
        b["lost_work"] += compute - kept
        if i:
            b["queue_after_failure"] += a.start - ended[i - 1].end
    wall = ended[-1].end - ended[0].start if ended else 0.0
    return {
        "scheduler": atts[0].scheduler,
        "job_id": atts[0].job_id,
        "ckpt_interval_s": atts[0].ckpt_s,
        "attempts": [
            {
                "attempt": a.attempt + 1,
                "start": ts(f, a.start),
                "end": ts(f, a.end) if a.end is not None else None,
                "state": a.state,
                "n_gpus": sum(len(g) for g in a.gpus),
                "overhead_s": round(a.overhead_s, 3),
            }
            for a in atts
        ],
        "wall_s": round(wall, 3),
        **{f"{k}_s": round(v, 3) for k, v in b.items()},
        "goodput": round(b["productive"] / wall, 6) if wall > 0 else None,
    }


def _attempts_by_cause(
    f: Fleet,
) -> tuple[dict[int, list[Attempt]], dict[int, list[Attempt]], list[dict]]:
    """(fault index -> attempts it killed, drain index -> attempts it requeued, the ended
    workload failures as ground truth lists them), in job order."""
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
    return killed, requeued, wl


def _fault_truth(
    f: Fleet, codes: list[dict], ev: dict, killed: dict[int, list[Attempt]]
) -> list[dict]:
    """Every fault: its unit, code, the evidence the writers emitted, its repair and
    replacement, and the attempts it killed."""
    repl_by_old = {r["old"]: r for r in f.replacements}
    faults = []
    for i, flt in enumerate(f.faults):
        s, inst = flt["slot"], f.inst[flt["inst"]]
        uuid = None
        if flt["gpu_index"] is not None:
            uuid, _ = uuid_at(f, flt["node"], flt["gpu_index"], flt["time"])
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
    return faults


def _replacement_truth(f: Fleet) -> list[dict]:
    """Every unit swapped: the old and new serials (and UUIDs) and the fault that caused it."""
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
    return replacements


def _planned_truth(f: Fleet, requeued: dict[int, list[Attempt]]) -> list[dict]:
    """The maintenance drains that start inside the window, and the attempts they requeued."""
    planned = []
    for i, m in enumerate(f.maint):
        if m["start"] >= f.horizon:
            continue
        planned.append(
            {
                "host": f.hosts[m["node"]],
                "start": ts(f, m["start"]),
                "end": ts(f, min(m["end"], f.horizon)),
                "reason": "maintenance",
                "action": "drain",
                "scheduler": "k8s" if m["node"] >= f.nodes - f.k8s_nodes else "slurm",
                "requeued_attempts": [_attempt_ref(f, a) for a in requeued.get(i, [])],
                "killed_attempts": [],
            }
        )
    return planned


def _covariate_truth(f: Fleet) -> dict:
    """The planted GPU temperature covariate: its law and every slot's offset."""
    return {
        "gpu": {
            "name": "gpu_temp_offset_c",
            "meaning": "per-slot GPU temperature offset (C) added to DCGM_FI_DEV_GPU_TEMP; gpu "
            "hazard multiplied by exp(beta*z - beta^2/2), z = offset / sd",
            "sd_c": TEMP_SD_C,
            "beta_per_sd": f.gpu_temp_beta,
            "hazard_ratio_per_degC": round(math.exp(f.gpu_temp_beta / TEMP_SD_C), 6),
            "offsets": {
                f"{f.hosts[n]}/gpu{g}": float(f.gpu_temp_offset[n, g])
                for n in range(f.nodes)
                for g in range(f.gpus_per_node)
            },
        }
    }


def ground_truth(
    f: Fleet,
    codes: list[dict],
    ev: dict,
    files: dict,
    fail_slow: dict | None = None,
    slow: SlowLoss | None = None,
) -> dict:
    """The ground_truth.json document: the laws, every fault with its codes and the evidence the
    writers emitted (``ev``: fault index -> evidence dicts), workload failures, drains,
    replacements, the fail-slow episodes and what they cost (``fail_slow``; ``slow``: an
    attempt's loss in a window), and the writers' file counts (``files``)."""
    killed, requeued, wl = _attempts_by_cause(f)
    ckpt = {a.job_id: a.ckpt_s for a in f.attempts if a.ckpt_s}
    chains: dict[tuple[str, str], list[Attempt]] = defaultdict(list)
    for a in f.attempts:
        if a.ckpt_s:
            chains[(a.scheduler, a.job_id)].append(a)
    return {
        "seed": f.seed,
        "start": f.start,
        "end": ts(f, f.horizon),
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
        "covariates": _covariate_truth(f),
        "checkpoint_interval_s": dict(sorted(ckpt.items())),
        "chains": [chain_truth(f, atts, slow) for _, atts in sorted(chains.items())],
        "laws": {
            c: {k: (float(v) if isinstance(v, (np.floating,)) else v) for k, v in law.items()}
            for c, law in f.laws.items()
        },
        "faults": _fault_truth(f, codes, ev, killed),
        "workload_failures": wl,
        "planned": _planned_truth(f, requeued),
        "replacements": _replacement_truth(f),
        "fail_slow": fail_slow or {},
        "files": files,
    }
