"""PyTorchJob and JobSet objects: the job's current attempt from its conditions."""

from ingest.base import ParseContext

from .common import JOB_CONDITION_STATE
from .common import as_int
from .common import dig
from .common import metadata
from .common import pod_template_gpus
from .common import timestamp


def _job_gpus(obj: dict) -> int | None:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    total, seen = 0, False
    replica_specs = spec.get("pytorchReplicaSpecs")
    if isinstance(replica_specs, dict):
        for rs in replica_specs.values():
            if isinstance(rs, dict):
                total += (as_int(rs.get("replicas")) or 1) * pod_template_gpus(rs.get("template"))
                seen = True
    for rj in spec.get("replicatedJobs") or []:
        if isinstance(rj, dict):
            job_spec = dig(rj, "template", "spec") or {}
            pods = as_int(job_spec.get("parallelism")) or 1
            total += (
                (as_int(rj.get("replicas")) or 1)
                * pods
                * pod_template_gpus(job_spec.get("template"))
            )
            seen = True
    return total if seen else None


def job_runs(obj: dict, ctx: ParseContext, index: int) -> list[dict]:
    ns, name, md = metadata(obj)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    conds = sorted(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, dict) and timestamp(c.get("lastTransitionTime"))
        ),
        key=lambda c: timestamp(c["lastTransitionTime"]),
    )
    base = {
        "cluster": ctx.cluster, "scheduler": "k8s", "job_id": f"{ns}/{name}", "name": name,
        "account": ns, "submit_time": timestamp(md.get("creationTimestamp")),
        "n_gpus": _job_gpus(obj), "nodes": [], "source": "k8s", "source_file": ctx.path,
        "source_line": index,
    }  # fmt: skip
    start = timestamp(status.get("startTime"))
    restarting = [
        timestamp(c["lastTransitionTime"]) for c in conds if c.get("type") == "Restarting"
    ]
    if restarting:  # the current attempt began at the Running transition after the restart
        running = [timestamp(c["lastTransitionTime"]) for c in conds if c.get("type") == "Running"]
        start = max(running) if running and max(running) >= restarting[-1] else None
    elif start is None:
        running = [timestamp(c["lastTransitionTime"]) for c in conds if c.get("type") == "Running"]
        start = min(running) if running else None
    true = [
        c for c in conds if str(c.get("status")) == "True" and c.get("type") in JOB_CONDITION_STATE
    ]
    final = true[-1] if true else (conds[-1] if conds else None)
    ctype = final.get("type") if final else None
    state = JOB_CONDITION_STATE.get(ctype, "UNKNOWN")
    end = timestamp(status.get("completionTime"))
    if end is None and state in ("COMPLETED", "FAILED"):
        end = timestamp(final["lastTransitionTime"])
    restarts = as_int(status.get("restarts"))  # JobSet counts its restarts; PyTorchJob does not
    return [
        {
            **base,
            "start_time": start,
            "end_time": end if state not in ("RUNNING", "PENDING") else None,
            "state": state,
            "raw_state": ctype,
            "reason": final.get("reason") if final else None,
            "attempt": (restarts or 0) + 1 if restarts is not None else None,
        }
    ]
