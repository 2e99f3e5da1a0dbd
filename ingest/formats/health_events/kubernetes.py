"""Kubernetes node health: the conditions of ``Node`` objects (``kubectl get nodes -o json``: the
kubelet's ``Ready`` and pressure conditions and those health agents set, such as
node-problem-detector's ``KernelDeadlock`` or NVSentinel's ``GpuXidError``) and ``Event``s about
nodes (``kubectl get events --field-selector involvedObject.kind=Node -o json``).

A condition is one record: its status since ``lastTransitionTime``. A problem condition is
``True`` while failing, ``Ready`` is ``True`` while healthy: the bad status starts a fault named by
the condition type, the good one says healthy (a node list pulled again shows each transition
once more: stored once). ``Unknown`` (the kubelet stopped reporting) starts a ``Ready`` fault and
says nothing of the other conditions (information). A snapshot shows only each condition's last
transition: a fault that started and ended between two pulls is not seen.

Node events pair as their conditions do (``NodeNotReady`` / ``NodeReady``, ``NodeHasDiskPressure``
/ ``NodeHasNoDiskPressure``, the memory and PID pairs); other node events (``Rebooted``, an
agent's warnings) are information. Events about other objects are not records (as in the k8s
format); an object of another kind is quarantined. Python per object: a node list is one
document of thousands of nodes, not millions of lines."""

from __future__ import annotations

import re

import orjson
import polars as pl

from warehouse.schemas import FAULT_SEP

from .records import Records

HEALTHY_WHEN_TRUE = ("Ready",)
# node events that are a condition's transitions: reason -> (condition, kind)
EVENT_REASONS = {
    "NodeNotReady": ("Ready", "start"),
    "NodeReady": ("Ready", "healthy"),
    "NodeHasDiskPressure": ("DiskPressure", "start"),
    "NodeHasNoDiskPressure": ("DiskPressure", "healthy"),
    "NodeHasInsufficientMemory": ("MemoryPressure", "start"),
    "NodeHasSufficientMemory": ("MemoryPressure", "healthy"),
    "NodeHasInsufficientPID": ("PIDPressure", "start"),
    "NodeHasSufficientPID": ("PIDPressure", "healthy"),
}
# condition types (kubelet's, node-problem-detector's, NVSentinel's) by the docs/design.md class of
# what failed; the first pattern that matches
CLASSES = (
    (r"^(GpuMem|SysLogsRowRemap)", "gpu_memory"),
    (r"^GpuNvlink", "nvlink"),
    (r"^(NVSwitch|SysLogsSXID)", "nvswitch"),
    (r"^GpuThermal", "cooling"),
    (r"^(Gpu|SysLogsXID|SysLogsGPU|DCGM)", "gpu"),
    (r"^(MemoryPressure|MemoryHardware)", "host_memory"),
    (r"^(DiskPressure|OutOfDisk|Readonly|Xfs|Disk)", "storage"),
    (r"^(NetworkUnavailable|FrequentUnregisterNetDevice|Nic|Network)", "nic"),
    (r"^CPU", "cpu"),
    (r"^(PIDPressure|Kernel|Frequent|CorruptDocker|ContainerRuntime)", "host_os"),
)
# the kubelet's own conditions: a node list of only these is the k8s format's (node_events)
KUBELET_CONDITIONS = (
    "Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable", "OutOfDisk",
)  # fmt: skip


def condition_class(kind: str | None) -> str | None:
    return next((c for p, c in CLASSES if kind and re.match(p, kind)), None)


def _str(v) -> str | None:
    return v if isinstance(v, str) and v else None


def _objects(records: Records) -> list[tuple[int, dict | object]]:
    """Every object of the file, a List's items unwrapped (the items' kind from the List's)."""
    out = []
    for line, obj in records.objects():
        if isinstance(obj, dict) and isinstance(obj.get("items"), list):
            item_kind = (_str(obj.get("kind")) or "").removesuffix("List") or None
            for it in obj["items"]:
                if isinstance(it, dict) and "kind" not in it and item_kind:
                    it = {**it, "kind": item_kind}
                out.append((line, it))
        else:
            out.append((line, obj))
    return out


def _condition(node: str, c, line: int) -> dict:
    raw = orjson.dumps(c).decode()
    if not isinstance(c, dict) or not _str(c.get("type")) or not _str(c.get("status")):
        return {
            "line": line,
            "raw": raw,
            "_shape": f"condition of node {node} has no type or status",
        }
    kind_of, status = c["type"], c["status"]
    good = "True" if kind_of in HEALTHY_WHEN_TRUE else "False"
    kind = (
        "healthy"
        if status == good
        else "info"
        if status == "Unknown" and kind_of not in HEALTHY_WHEN_TRUE
        else "start"
    )
    time = _str(c.get("lastTransitionTime"))
    return {
        "line": line,
        "raw": raw,
        "host": node,
        "time": time,
        "kind": kind,
        "fault": kind_of,
        "cause": "not_ready" if kind_of == "Ready" else kind_of,
        "sub_cause": _str(c.get("reason")),
        "component_class": condition_class(kind_of),
        "message": _str(c.get("message")),
        "severity": None,
        "_error": None
        if time
        else f"condition {kind_of} of node {node} has no lastTransitionTime: when its status "
        "began is unknown",
    }


def _event(ev: dict, line: int) -> dict | None:
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    if not isinstance(obj, dict) or obj.get("kind") != "Node":
        return None  # about a pod, a job ...: not a node's health
    host, reason = _str(obj.get("name")), _str(ev.get("reason"))
    condition, kind = EVENT_REASONS.get(reason, (None, "info"))
    agent = _str(ev.get("type")) if ev.get("type") not in ("Normal", "Warning") else None
    return {
        "line": line,
        "raw": orjson.dumps(ev).decode()[:2000],
        "host": host,
        "time": _str(ev.get("eventTime")) or _str(ev.get("firstTimestamp"))
        or _str(ev.get("lastTimestamp")),
        "kind": kind,
        "fault": condition or FAULT_SEP.join(filter(None, (agent, reason))) or None,
        "cause": "not_ready" if condition == "Ready" else condition or agent or reason,
        "sub_cause": reason,
        "component_class": condition_class(condition or agent),
        "message": _str(ev.get("message")),
        "severity": _str(ev.get("type")) if ev.get("type") in ("Normal", "Warning") else None,
    }  # fmt: skip


def read(records: Records) -> pl.DataFrame:
    rows = []
    for line, obj in _objects(records):
        kind = obj.get("kind") if isinstance(obj, dict) else None
        raw = orjson.dumps(obj).decode()[:500]
        if kind == "Node":
            name = _str((obj.get("metadata") or {}).get("name")) or "(unnamed)"
            conditions = (obj.get("status") or {}).get("conditions")
            if not isinstance(conditions, list) or not conditions:
                rows.append({"line": line, "raw": raw, "_shape": f"Node {name} has no conditions"})
            else:
                rows += [_condition(name, c, line) for c in conditions]
        elif kind == "Event":
            row = _event(obj, line)
            if row is not None:
                rows.append(row)
        else:
            what = f"kind {kind}" if isinstance(kind, str) else "an object without kind"
            why = f"{what} is not read as health events (Node, Event)"
            rows.append({"line": line, "raw": raw, "_shape": why})
    cols = ("raw", "host", "time", "kind", "fault", "cause", "sub_cause", "component_class",
            "message", "severity", "_shape", "_error")  # fmt: skip
    frame = pl.DataFrame(rows, schema={"line": pl.Int64, **dict.fromkeys(cols, pl.Utf8)})
    return pl.concat([frame, records.rejected()], how="diagonal_relaxed").sort(
        "line", maintain_order=True
    )
