"""What every kind of object is read with: the state vocabularies, the object error, and the
readers of timestamps, nested fields, integers, GPU requests, signals and metadata."""

import re
from datetime import UTC
from datetime import datetime

REASON_STATE = {
    "OOMKilled": "OUT_OF_MEMORY",
    "Error": "FAILED",
    "ContainerCannotRun": "FAILED",
    "StartError": "FAILED",
    "Completed": "COMPLETED",
    "DeadlineExceeded": "TIMEOUT",
    "Evicted": "PREEMPTED",
    "Preempting": "PREEMPTED",
    "NodeLost": "NODE_FAIL",
    "NodeShutdown": "NODE_FAIL",
    "Terminated": "NODE_FAIL",
}
PHASE_STATE = {
    "Pending": "PENDING",
    "Running": "RUNNING",
    "Succeeded": "COMPLETED",
    "Failed": "FAILED",
}
JOB_CONDITION_STATE = {
    "Succeeded": "COMPLETED",
    "Completed": "COMPLETED",
    "Failed": "FAILED",
    "Running": "RUNNING",
    "Restarting": "REQUEUED",
    "Suspended": "SUSPENDED",
    "Created": "PENDING",
}
# Which state of a gang member decides the attempt's state (first wins).
STATE_PRIORITY = [
    "NODE_FAIL", "OUT_OF_MEMORY", "FAILED", "TIMEOUT", "PREEMPTED", "CANCELLED", "REQUEUED",
    "RUNNING", "PENDING", "SUSPENDED", "UNKNOWN", "COMPLETED",
]  # fmt: skip
NODE_EVENT_REASONS = {
    "NodeNotReady": "not_ready",
    "NodeReady": "ready",
    "Rebooted": "reboot",
    "NodeNotSchedulable": "drain",
    "NodeSchedulable": "resume",
}
JOB_KINDS = ("PyTorchJob", "JobSet")
READ_KINDS = ("Pod", *JOB_KINDS, "Node", "Event")
JOB_LABELS = ("training.kubeflow.org/job-name", "jobset.sigs.k8s.io/jobset-name")
GPU_RESOURCE = "nvidia.com/gpu"


class BadObject(ValueError):
    pass


def timestamp(v) -> datetime | None:
    """RFC 3339 string or YAML datetime to naive UTC; anything else (``@now-5m``) to None."""
    if isinstance(v, datetime):
        dt = v
    elif isinstance(v, str):
        try:
            dt = datetime.fromisoformat(v.strip())
        except ValueError:
            return None
    else:
        return None
    try:
        return dt.astimezone(UTC).replace(tzinfo=None) if dt.tzinfo is not None else dt
    except (OverflowError, ValueError):  # year 1 or 9999 pushed past the calendar by the offset
        return None


def dig(obj, *path):
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def as_int(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*", v):
        return int(v)
    return None


def container_gpus(container) -> int:
    res = dig(container, "resources") or {}
    lim, req = as_int(dig(res, "limits", GPU_RESOURCE)), as_int(dig(res, "requests", GPU_RESOURCE))
    return lim if lim is not None else (req or 0)


def pod_template_gpus(template) -> int:
    containers = dig(template, "spec", "containers")
    return sum(container_gpus(c) for c in containers) if isinstance(containers, list) else 0


def exit_signal(term: dict, exit_code: int | None) -> int | None:
    sig = as_int(term.get("signal"))
    if sig:
        return sig
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        return exit_code - 128
    return None


def metadata(obj: dict) -> tuple[str, str, dict]:
    md = obj.get("metadata")
    if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
        raise BadObject(f"{obj.get('kind')} object without metadata.name")
    ns = (
        md.get("namespace")
        if isinstance(md.get("namespace"), str) and md.get("namespace")
        else "default"
    )
    return ns, md["name"], md
