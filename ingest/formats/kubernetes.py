"""Kubernetes objects to ``job_attempts`` (and ``node_events``): format ``k8s``.

Accepts ``kubectl get ... -o json`` lists, single objects, YAML (several documents too), and the
Kubeflow training-operator log (its ``events`` lines). Dispatch is on ``kind``:

- ``Pod``: every container run the pod still shows is an attempt: ``lastState.terminated`` (run
  number ``restartCount``) and ``state`` running/terminated (run ``restartCount + 1``); a pod
  without container statuses is one attempt from its phase (``Evicted`` pods land here).
  ``job_id`` is ``namespace/name`` of the owning PyTorchJob / JobSet (``ownerReferences`` or the
  ``training.kubeflow.org/job-name`` / ``jobset.sigs.k8s.io/jobset-name`` labels), else of the pod.
  The pods of one training job are a gang: their container runs are folded into job attempts
  by time (runs that overlap belong to the same attempt; a gap starts the next), with the union
  of their nodes, the sum of their GPUs and the worst state of any member, just as sacct folds
  steps into their job.
- ``PyTorchJob`` / ``JobSet``: the job's current attempt from its conditions (the start is the
  ``Running`` transition after the last ``Restarting`` one). Conditions keep only the latest
  transition per type, so earlier attempts come from pods and events, not from here.
- ``Event`` lists: each ``PyTorchJobRestarting`` / ``JobSetRestarting`` event ends a failed
  attempt of its job. Its end is the time of the job's pod termination event just before it
  (``Killing``, ``Evicted``, ``Preempting``, or the operator's ``ExitedWithCode``, which also
  gives the exit code), else the restart event's own time; its start is the earliest start of
  any of the job's pods after the job's previous attempt ended (a pod's container ``Started``
  event, else its ``Scheduled`` one); its nodes are where the job's pods were last
  ``Scheduled`` (``Successfully assigned ns/pod to node``) before that end. A restart whose
  attempt's start is not in the file is quarantined with that reason: its end alone measures
  nothing (the pods' ``lastState`` or a fuller event export gives the attempt).
- The training-operator log shows restarts, never starts: each ``PyTorchJobRestarting`` line is
  quarantined the same way, naming the attempt's end and exit code.
- ``Node`` (``Ready`` condition transitions, cordon taints) and ``Event`` objects about nodes
  (NodeNotReady, NodeReady, Rebooted, NodeNotSchedulable, NodeSchedulable) go to ``node_events``.

Records (conservation): a standalone pod's container run, a training job's attempt (folded from
its pods, or from a PyTorchJob / JobSet object), one job restart event, and one
``PyTorchJobRestarting`` line of an operator log. ``node_events`` rows are extra output, not
records. Nothing is skipped silently: an object of a kind not read here (Service, ConfigMap...),
an object without ``kind`` or ``metadata.name``, an unreadable document of a multi-document YAML
file, a Pod that shows no run, a Node whose Ready condition carries no time (a Ready condition
without ``lastTransitionTime`` is placed at its ``lastHeartbeatTime``, said in the reason), a node
or restart Event without a time, a restart whose attempt's start is not in the file, an attempt
ending before it starts and a time outside ``ctx``'s plausible window are each one quarantine row
(and so one record). Events of other reasons (Scheduled, Started, Killing, Pulled...) are read as
context for restarts and are not records; a file that is not valid JSON (when it starts like JSON)
or YAML is one quarantined record with the parser's line and column. ``source_line`` is the object's
1-based position in the file (or the log line). The work is Python per object: the objects are
nested documents, not lines, and a cluster's dump holds thousands, not millions.

The same run often arrives twice (a pod's ``lastState`` and a restart event, a PyTorchJob and
its pods); the warehouse view merges them (``warehouse.schemas`` ``Dedupe`` on job_attempts).

Termination reasons map to the normalized state (``reason`` keeps the raw one): OOMKilled ->
OUT_OF_MEMORY; Error, ContainerCannotRun, StartError -> FAILED; Completed -> COMPLETED;
DeadlineExceeded -> TIMEOUT; Evicted / Preempting -> PREEMPTED (the kubelet or scheduler took the
node's resources back: not the workload's fault, and not proof the node failed); NodeLost /
NodeShutdown / Terminated -> NODE_FAIL. Otherwise exit code 0 is COMPLETED and any other FAILED.
Exit codes above 128 carry a signal (137 = SIGKILL, 143 = SIGTERM).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import polars as pl
import yaml

from ingest.base import (
    FormatSpec,
    ParseContext,
    ParseResult,
    implausible_time,
    json_error,
    whole_file_quarantine,
)
from warehouse.schemas import TABLES, conform, quarantine_frame

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


# ------------------------------------------------------------------ small helpers
def _ts(v) -> datetime | None:
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


def _d(obj, *path):
    for p in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(p)
    return obj


def _int(v) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*", v):
        return int(v)
    return None


def _container_gpus(container) -> int:
    res = _d(container, "resources") or {}
    lim, req = _int(_d(res, "limits", GPU_RESOURCE)), _int(_d(res, "requests", GPU_RESOURCE))
    return lim if lim is not None else (req or 0)


def _pod_template_gpus(template) -> int:
    containers = _d(template, "spec", "containers")
    return sum(_container_gpus(c) for c in containers) if isinstance(containers, list) else 0


def _state(reason: str | None, exit_code: int | None) -> str:
    if reason in REASON_STATE:
        return REASON_STATE[reason]
    if exit_code is None:
        return "UNKNOWN"
    return "COMPLETED" if exit_code == 0 else "FAILED"


def _signal(term: dict, exit_code: int | None) -> int | None:
    sig = _int(term.get("signal"))
    if sig:
        return sig
    if exit_code is not None and 128 < exit_code <= 128 + 64:
        return exit_code - 128
    return None


def _meta(obj: dict) -> tuple[str, str, dict]:
    md = obj.get("metadata")
    if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
        raise BadObject(f"{obj.get('kind')} object without metadata.name")
    ns = (
        md.get("namespace")
        if isinstance(md.get("namespace"), str) and md.get("namespace")
        else "default"
    )
    return ns, md["name"], md


def _owner_job(md: dict) -> str | None:
    for ref in md.get("ownerReferences") or []:
        if (
            isinstance(ref, dict)
            and ref.get("kind") in JOB_KINDS
            and isinstance(ref.get("name"), str)
        ):
            return ref["name"]
    labels = md.get("labels") if isinstance(md.get("labels"), dict) else {}
    for key in JOB_LABELS:
        if isinstance(labels.get(key), str) and labels[key]:
            return labels[key]
    return None


# ------------------------------------------------------------------ pods
def _pod_runs(pod: dict, ctx: ParseContext, index: int) -> tuple[str | None, list[dict]]:
    """(owning job name or None, one row per container run the pod shows)."""
    ns, name, md = _meta(pod)
    owner = _owner_job(md)
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    gpus_by_name = {c.get("name"): _container_gpus(c) for c in containers}
    base = {
        "cluster": ctx.cluster,
        "scheduler": "k8s",
        "job_id": f"{ns}/{owner or name}",
        "name": owner or name,
        "account": ns,
        "submit_time": _ts(md.get("creationTimestamp")),
        "n_nodes": 1 if node else 0,
        "nodes": [node] if node else [],
        "source": "k8s",
        "source_file": ctx.path,
        "source_line": index,
        "_pod": name,
        "_container": None,
    }
    rows: list[dict] = []
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    for cs in statuses:
        restarts = _int(cs.get("restartCount")) or 0
        gpus = gpus_by_name.get(cs.get("name"), 0)
        base["_container"] = cs.get("name")
        last = _d(cs, "lastState", "terminated")
        if isinstance(last, dict):
            rows.append({**base, **_terminated(last), "attempt": max(restarts, 1), "n_gpus": gpus})
        cur = cs.get("state") if isinstance(cs.get("state"), dict) else {}
        if isinstance(cur.get("terminated"), dict):
            rows.append(
                {**base, **_terminated(cur["terminated"]), "attempt": restarts + 1, "n_gpus": gpus}
            )
        elif isinstance(cur.get("running"), dict):
            rows.append(
                {
                    **base,
                    "attempt": restarts + 1,
                    "n_gpus": gpus,
                    "state": "RUNNING",
                    "raw_state": "running",
                    "start_time": _ts(cur["running"].get("startedAt")),
                }
            )
        elif not isinstance(last, dict) and restarts == 0:
            reason = _d(cur, "waiting", "reason")
            rows.append(
                {
                    **base,
                    "attempt": 1,
                    "n_gpus": gpus,
                    "state": "PENDING",
                    "raw_state": "waiting",
                    "reason": reason if isinstance(reason, str) else None,
                }
            )
    if not statuses:
        phase = status.get("phase") if isinstance(status.get("phase"), str) else None
        reason = status.get("reason") if isinstance(status.get("reason"), str) else None
        state = REASON_STATE.get(reason) or PHASE_STATE.get(phase, "UNKNOWN")
        ends = [
            _ts(c.get("lastTransitionTime"))
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ]
        ends = [e for e in ends if e is not None]
        final = phase in ("Failed", "Succeeded")
        rows.append(
            {
                **base,
                "attempt": 1,
                "n_gpus": sum(gpus_by_name.values()),
                "state": state,
                "raw_state": "/".join(x for x in (phase, reason) if x) or None,
                "reason": reason,
                "start_time": _ts(status.get("startTime")),
                "end_time": max(ends) if final and ends else None,
            }
        )
    if not rows:
        raise BadObject(
            f"Pod {ns}/{name}: no container status shows a run (no state, lastState or phase)"
        )
    return owner, rows


def _terminated(term: dict) -> dict:
    reason = term.get("reason") if isinstance(term.get("reason"), str) else None
    code = _int(term.get("exitCode"))
    return {
        "state": _state(reason, code),
        "raw_state": f"terminated/{reason}" if reason else "terminated",
        "reason": reason,
        "exit_code": code,
        "signal": _signal(term, code),
        "start_time": _ts(term.get("startedAt")),
        "end_time": _ts(term.get("finishedAt")),
    }


def _fold_gang(rows: list[dict]) -> list[dict]:
    """Container runs of one training job -> job attempts (overlapping runs are one attempt)."""

    def key(r):
        t = r.get("start_time") or r.get("end_time") or r.get("submit_time")
        return (t is None, t or datetime.min, r["source_line"])

    groups: list[list[dict]] = []
    group_end: datetime | None = None
    open_ended = False
    for r in sorted(rows, key=key):
        start = r.get("start_time")
        new = not groups or (
            start is not None and not open_ended and group_end is not None and start > group_end
        )
        if new:
            groups.append([])
            group_end, open_ended = None, False
        groups[-1].append(r)
        end = r.get("end_time")
        if end is None:
            open_ended = True
        elif group_end is None or end > group_end:
            group_end = end
    out: list[dict] = []
    for g in groups:
        # attempt numbers only grow; pods restarted in place carry theirs (restartCount + 1)
        attempt = max(
            [len(out) + 1, (out[-1]["attempt"] + 1) if out else 1]
            + [r["attempt"] for r in g if r.get("attempt")]
        )
        lead = min(
            g,
            key=lambda r: (
                STATE_PRIORITY.index(r.get("state", "UNKNOWN"))
                if r.get("state", "UNKNOWN") in STATE_PRIORITY
                else len(STATE_PRIORITY)
            ),
        )
        starts = [r["start_time"] for r in g if r.get("start_time")]
        ends = [r["end_time"] for r in g if r.get("end_time")]
        submits = [r["submit_time"] for r in g if r.get("submit_time")]
        running = any(r.get("state") == "RUNNING" for r in g)
        nodes = sorted({n for r in g for n in r["nodes"]})
        gpus: dict[tuple, int] = {}  # a container's GPUs count once however often it ran
        for r in g:
            k = (r["_pod"], r["_container"])
            gpus[k] = max(gpus.get(k, 0), r.get("n_gpus") or 0)
        out.append(
            {
                **lead,
                "submit_time": min(submits) if submits else None,
                "start_time": min(starts) if starts else None,
                "end_time": None if running or not ends else max(ends),
                "nodes": nodes,
                "n_nodes": len(nodes),
                "n_gpus": sum(gpus.values()),
                "attempt": attempt,
                "source_line": min(r["source_line"] for r in g),
            }
        )
    return out


# ------------------------------------------------------------------ training job objects
def _job_gpus(obj: dict) -> int | None:
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    total, seen = 0, False
    replica_specs = spec.get("pytorchReplicaSpecs")
    if isinstance(replica_specs, dict):
        for rs in replica_specs.values():
            if isinstance(rs, dict):
                total += (_int(rs.get("replicas")) or 1) * _pod_template_gpus(rs.get("template"))
                seen = True
    for rj in spec.get("replicatedJobs") or []:
        if isinstance(rj, dict):
            job_spec = _d(rj, "template", "spec") or {}
            pods = _int(job_spec.get("parallelism")) or 1
            total += (
                (_int(rj.get("replicas")) or 1)
                * pods
                * _pod_template_gpus(job_spec.get("template"))
            )
            seen = True
    return total if seen else None


def _job_runs(obj: dict, ctx: ParseContext, index: int) -> list[dict]:
    ns, name, md = _meta(obj)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    conds = sorted(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, dict) and _ts(c.get("lastTransitionTime"))
        ),
        key=lambda c: _ts(c["lastTransitionTime"]),
    )
    base = {
        "cluster": ctx.cluster, "scheduler": "k8s", "job_id": f"{ns}/{name}", "name": name,
        "account": ns, "submit_time": _ts(md.get("creationTimestamp")), "n_gpus": _job_gpus(obj),
        "nodes": [], "source": "k8s", "source_file": ctx.path, "source_line": index,
    }  # fmt: skip
    start = _ts(status.get("startTime"))
    restarting = [_ts(c["lastTransitionTime"]) for c in conds if c.get("type") == "Restarting"]
    if restarting:  # the current attempt began at the Running transition after the restart
        running = [_ts(c["lastTransitionTime"]) for c in conds if c.get("type") == "Running"]
        start = max(running) if running and max(running) >= restarting[-1] else None
    elif start is None:
        running = [_ts(c["lastTransitionTime"]) for c in conds if c.get("type") == "Running"]
        start = min(running) if running else None
    true = [
        c for c in conds if str(c.get("status")) == "True" and c.get("type") in JOB_CONDITION_STATE
    ]
    final = true[-1] if true else (conds[-1] if conds else None)
    ctype = final.get("type") if final else None
    state = JOB_CONDITION_STATE.get(ctype, "UNKNOWN")
    end = _ts(status.get("completionTime"))
    if end is None and state in ("COMPLETED", "FAILED"):
        end = _ts(final["lastTransitionTime"])
    restarts = _int(status.get("restarts"))  # JobSet counts its restarts; PyTorchJob does not
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


# ------------------------------------------------------------------ nodes and events
def _node_rows(node: dict, ctx: ParseContext, index: int) -> list[dict]:
    """A Node's Ready state at its last transition (else, said in the reason, at its last
    heartbeat: the condition held then) and its cordon taint. A Node that yields nothing is
    quarantined by the caller: its Ready state cannot be placed in time."""
    _, name, _ = _meta(node)
    rows = []
    for c in _d(node, "status", "conditions") or []:
        if not (isinstance(c, dict) and c.get("type") == "Ready"):
            continue
        event = "ready" if str(c.get("status")) == "True" else "not_ready"
        why = c.get("reason") or c.get("message")
        why = why if isinstance(why, str) else f"Ready={c.get('status')}"
        if _ts(c.get("lastTransitionTime")):
            rows.append(_node_event(ctx, index, _ts(c["lastTransitionTime"]), name, event, why))
        elif _ts(c.get("lastHeartbeatTime")):
            rows.append(
                _node_event(
                    ctx,
                    index,
                    _ts(c["lastHeartbeatTime"]),
                    name,
                    event,
                    f"{why} (no lastTransitionTime: time of the last heartbeat)",
                )
            )
    for t in _d(node, "spec", "taints") or []:
        if (
            isinstance(t, dict)
            and t.get("key") == "node.kubernetes.io/unschedulable"
            and _ts(t.get("timeAdded"))
        ):
            rows.append(_node_event(ctx, index, _ts(t["timeAdded"]), name, "drain", "cordoned"))
    if not rows:
        ready = [
            c
            for c in _d(node, "status", "conditions") or []
            if isinstance(c, dict) and c.get("type") == "Ready"
        ]
        if not ready:
            raise BadObject(f"Node {name} has no Ready condition")
        raise BadObject(f"Node {name} Ready={ready[0].get('status')} has no lastTransitionTime or "
                        "lastHeartbeatTime: its state cannot be placed in time")  # fmt: skip
    return rows


def _event_rows(ev: dict, ctx: ParseContext, index: int) -> list[dict]:
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    reason = ev.get("reason") if isinstance(ev.get("reason"), str) else None
    host = obj.get("name") if isinstance(obj, dict) else None
    if not isinstance(host, str) or obj.get("kind") != "Node" or reason not in NODE_EVENT_REASONS:
        return []
    times = {
        _ts(ev.get("firstTimestamp")) or _ts(ev.get("eventTime")),
        _ts(ev.get("lastTimestamp")),
    }
    msg = ev.get("message") if isinstance(ev.get("message"), str) else reason
    if times == {None}:
        raise BadObject(
            f"{reason} event of node {host} without firstTimestamp, eventTime or lastTimestamp"
        )
    return [
        _node_event(ctx, index, t, host, NODE_EVENT_REASONS[reason], msg)
        for t in sorted(times - {None})
    ]


RESTART_REASONS = ("PyTorchJobRestarting", "JobSetRestarting")
POD_END_REASONS = {
    "Killing": "FAILED",
    "Evicted": "PREEMPTED",
    "Preempting": "PREEMPTED",
    "ExitedWithCode": "FAILED",
}
_ASSIGNED = re.compile(r"assigned (?P<ns>[^/\s]+)/(?P<pod>\S+) to (?P<host>\S+)")
_EXITED = re.compile(r"Pod: (?P<ns>[^.\s]+)\.(?P<pod>\S+) exited with code (?P<code>-?\d+)")
END_WINDOW_S = 120  # a pod termination this long before a restart event ended that attempt


def _restart_runs(events: list[tuple[int, dict]], ctx: ParseContext, bad: list) -> list[dict]:
    """Failed attempts of training jobs from their restart events (see the module docstring);
    a restart event without a time is appended to ``bad``."""
    placed: dict[tuple[str, str], list[tuple[datetime, str]]] = {}  # (ns, pod) -> [(t, host)]
    started: dict[tuple[str, str], list[datetime]] = {}  # (ns, pod) -> container Started times
    ended: list[tuple[datetime, str, str, str, int | None]] = []  # (t, ns, pod, reason, exit)
    restarts: list[tuple[datetime, str, str, int, str]] = []
    for index, ev in events:
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        reason = ev.get("reason") if isinstance(ev.get("reason"), str) else None
        msg = ev.get("message") if isinstance(ev.get("message"), str) else ""
        t = (
            _ts(ev.get("firstTimestamp"))
            or _ts(ev.get("eventTime"))
            or _ts(ev.get("lastTimestamp"))
        )
        if not isinstance(obj, dict):
            continue
        if t is None:
            if obj.get("kind") in JOB_KINDS and reason in RESTART_REASONS:
                bad.append(
                    (
                        index,
                        json.dumps(ev, default=str)[:500],
                        (
                            f"object {index}: {reason} event without firstTimestamp, eventTime or "
                            "lastTimestamp"
                        ),
                    )
                )
            continue
        ns = obj.get("namespace") if isinstance(obj.get("namespace"), str) else "default"
        if reason == "Scheduled" and (m := _ASSIGNED.search(msg)):
            placed.setdefault((m["ns"], m["pod"]), []).append((t, m["host"]))
        elif reason == "Started" and obj.get("kind") == "Pod" and isinstance(obj.get("name"), str):
            # a repeated event (count > 1) shows its first and its latest occurrence
            last = _ts(ev.get("lastTimestamp"))
            started.setdefault((ns, obj["name"]), []).extend({t, last or t})
        elif reason == "ExitedWithCode" and (m := _EXITED.search(msg)):
            ended.append((t, m["ns"], m["pod"], reason, int(m["code"])))
        elif (
            obj.get("kind") == "Pod"
            and reason in POD_END_REASONS
            and isinstance(obj.get("name"), str)
        ):
            ended.append((t, ns, obj["name"], reason, None))
        elif (
            obj.get("kind") in JOB_KINDS
            and reason in RESTART_REASONS
            and isinstance(obj.get("name"), str)
        ):
            restarts.append((t, ns, obj["name"], index, reason))
    events_by_index = dict(events)
    rows = []
    prev_end: dict[tuple[str, str], datetime] = {}  # (ns, job) -> end of its previous attempt
    for r_time, ns, job, index, r_reason in sorted(restarts):
        member = re.compile(rf"^{re.escape(job)}-[a-z]+-\d+$")
        before = [
            e
            for e in ended
            if e[1] == ns
            and member.match(e[2])
            and 0 <= (r_time - e[0]).total_seconds() <= END_WINDOW_S
        ]
        end, state, reason, code = r_time, "FAILED", r_reason, None
        if before:
            last = max(before, key=lambda e: (e[0], e[3] != "ExitedWithCode"))
            end, reason = last[0], last[3]
            state = POD_END_REASONS[reason]
            codes = [e[4] for e in before if e[4] is not None]
            code = codes[-1] if codes else None
        hosts = set()
        for (pns, pod), where in placed.items():
            if pns == ns and member.match(pod):
                seen = [h for t, h in sorted(where) if t <= end]
                if seen:
                    hosts.add(seen[-1])
        after = prev_end.get((ns, job))
        prev_end[(ns, job)] = end
        start = _attempt_start(ns, member, after, end, started, placed)
        if start is None:
            since = (
                f"since its previous attempt ended at {after:%Y-%m-%dT%H:%M:%S}"
                if after
                else "before it"
            )
            why = (f"object {index}: {r_reason} at {r_time:%Y-%m-%dT%H:%M:%S} ends an attempt of "
                   f"{ns}/{job} whose start is not in this file (no Started or Scheduled event of "
                   f"its pods {since}): the job's pod events or pods give it")  # fmt: skip
            bad.append((index, json.dumps(events_by_index[index], default=str)[:500], why))
            continue
        rows.append(
            {
                "cluster": ctx.cluster,
                "scheduler": "k8s",
                "job_id": f"{ns}/{job}",
                "name": job,
                "account": ns,
                "start_time": start,
                "end_time": end,
                "state": state,
                "raw_state": "Restarting",
                "reason": reason,
                "exit_code": code,
                "signal": _signal({}, code),
                "nodes": sorted(hosts),
                "n_nodes": len(hosts) or None,
                "source": "k8s-events",
                "source_file": ctx.path,
                "source_line": index,
            }
        )
    return rows


def _attempt_start(ns, member, after, end, started, placed) -> datetime | None:
    """When a failed attempt of a gang began: the earliest start of any of its pods after the
    previous attempt's end (``after``; None: the first attempt) and not after its ``end``. A
    pod's start is its container's ``Started`` event, else its ``Scheduled`` one (a pod
    created anew); None when the file holds neither."""

    def within(t):
        return (after is None or t > after) and t <= end

    firsts = []
    for pns, pod in started.keys() | placed.keys():
        if pns != ns or not member.match(pod):
            continue
        times = [t for t in started.get((pns, pod), []) if within(t)]
        times = times or [t for t, _ in placed.get((pns, pod), []) if within(t)]
        if times:
            firsts.append(min(times))
    return min(firsts) if firsts else None


def _node_event(ctx, index, time, host, event, reason) -> dict:
    return {"time": time, "cluster": ctx.cluster, "host": host, "event": event,
            "reason": reason if isinstance(reason, str) else None, "source": "k8s",
            "source_file": ctx.path, "source_line": index}  # fmt: skip


# ------------------------------------------------------------------ operator log
_OPLOG = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\S+)\t\w+\tevents\t(?P<msg>[^\t]*)\t(?P<json>\{.*\})\s*$"
)


def _operator_log(text: str, ctx: ParseContext) -> list[tuple[int, str, str]]:
    """``PyTorchJobRestarting`` lines of a training-operator log, each one quarantine row: the
    line ends a failed attempt but the log never shows when that attempt started (it records
    restarts, not starts), so the attempt cannot be measured from it; the reason names the
    attempt's end and exit code and where its start is found."""
    bad = []
    exit_codes: dict[str, int] = {}
    for i, line in enumerate(text.split("\n"), start=1 + ctx.line_offset):
        m = _OPLOG.match(line)
        if not m:
            continue
        try:
            info = json.loads(m["json"])
            obj = info["object"]
            job = f"{obj.get('namespace') or 'default'}/{obj['name']}"
            reason = info.get("reason")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            if "Restarting" in line:
                bad.append((i, line, f"unreadable operator event: {exc!r}"))
            continue
        code = re.search(r"exited with code (-?\d+)", m["msg"])
        if code:
            exit_codes[job] = int(code.group(1))
        if reason != "PyTorchJobRestarting":
            continue
        end = _ts(m["ts"])
        if end is None:
            bad.append((i, line, f"unreadable timestamp {m['ts']!r}"))
            continue
        ec = f" (exit code {exit_codes[job]})" if job in exit_codes else ""
        why = (f"{reason} at {end:%Y-%m-%dT%H:%M:%S} ends an attempt of {job}{ec} whose start an "
               "operator log does not show: the job's pod events or pods (kubectl get events/pods "
               "-o json) give it")  # fmt: skip
        bad.append((i, line, why))
    return bad


# ------------------------------------------------------------------ entry points
def _load(text: str) -> tuple[list, list[tuple[int, str, str]]]:
    """(documents of the file, unreadable documents as (line, raw, reason)); raises ValueError
    with a readable message when the file as a whole cannot be read. In a multi-document YAML
    file one bad document costs only itself: the others are read on their own."""
    stripped = text.lstrip("\ufeff \t\r\n")
    if stripped[:1] in ("{", "["):
        try:
            return [json.loads(stripped)], []
        except json.JSONDecodeError as exc:
            raise ValueError(json_error(exc)) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None], []
    except yaml.YAMLError as exc:
        whole = _yaml_error(exc, 0)
    starts = [0] + [m.start() for m in re.finditer(r"(?m)^---[ \t]*(?:#.*)?$", text)]
    pieces = [
        (text.count("\n", 0, a), text[a:b])
        for a, b in zip(starts, starts[1:] + [len(text)], strict=True)
    ]
    if len([p for _, p in pieces if p.strip()]) < 2:
        raise ValueError(whole)
    docs, bad = [], []
    for first_line, piece in pieces:
        try:
            docs.extend(d for d in yaml.safe_load_all(piece) if d is not None)
        except yaml.YAMLError as exc:
            bad.append((first_line + 1, piece.strip()[:500], _yaml_error(exc, first_line)))
    return docs, bad


def _yaml_error(exc: yaml.YAMLError, line_offset: int) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1 + line_offset} column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc).split("\n")[0]
    return f"invalid YAML{where}: {problem}"


def _objects(docs: list) -> list:
    out = []
    for d in docs:
        if (
            isinstance(d, dict)
            and isinstance(d.get("items"), list)
            and (d.get("kind") or "").endswith("List")
        ):
            item_kind = d["kind"][: -len("List")] or None
            for it in d["items"]:
                if isinstance(it, dict) and "kind" not in it and item_kind:
                    it = {**it, "kind": item_kind}
                out.append(it)
        elif isinstance(d, list):
            out.extend(d)
        else:
            out.append(d)
    return out


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    text = data.decode("utf-8", errors="replace")
    attempts: list[dict] = []
    node_events: list[dict] = []
    bad: list[tuple[int, str, str]] = []
    if _looks_like_oplog(text):
        bad = _operator_log(text, ctx)
    else:
        try:
            docs, bad = _load(text)
        except (ValueError, RecursionError) as exc:
            msg = str(exc) if isinstance(exc, ValueError) else "document nested too deeply"
            m = re.search(r"at line (\d+)", msg)
            return ParseResult({}, whole_file_quarantine(data, msg, int(m.group(1)) if m else 1), 1)
        gangs: dict[str, list[dict]] = {}
        events: list[tuple[int, dict]] = []
        for i, obj in enumerate(_objects(docs), start=1):
            try:
                if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
                    raise BadObject("object without kind")
                kind = obj["kind"]
                if kind == "Pod":
                    owner, runs = _pod_runs(obj, ctx, i)
                    if owner:
                        for r in runs:
                            gangs.setdefault(r["job_id"], []).append(r)
                    else:
                        attempts.extend(runs)
                elif kind in JOB_KINDS:
                    attempts.extend(_job_runs(obj, ctx, i))
                elif kind == "Node":
                    node_events.extend(_node_rows(obj, ctx, i))
                elif kind == "Event":
                    events.append((i, obj))
                    node_events.extend(_event_rows(obj, ctx, i))
                else:
                    raise BadObject(
                        f"kind {kind} is not read by the k8s format (it reads "
                        f"{', '.join(READ_KINDS)})"
                    )
            except (BadObject, TypeError, AttributeError, ValueError) as exc:
                bad.append((i, json.dumps(obj, default=str)[:500], f"object {i}: {exc}"))
        for runs in gangs.values():
            attempts.extend(_fold_gang(runs))
        attempts.extend(_restart_runs(events, ctx, bad))
    tables, quarantines = (
        {},
        [quarantine_frame([b[0] for b in bad], [b[1] for b in bad], [b[2] for b in bad])],
    )
    if attempts:
        df = _frame("job_attempts", attempts).with_columns(
            elapsed_s=(pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
        )
        order = pl.struct(pl.coalesce("start_time", "end_time", "submit_time"), "source_line")
        df = df.with_columns(  # attempts from events carry no number: time order within the job
            attempt=pl.col("attempt").fill_null(order.rank("ordinal").over("job_id").cast(pl.Int32))
        )
        df, q = _split_bad(df, _attempt_error(ctx))
        quarantines.append(q)
        if df.height:
            tables["job_attempts"] = conform("job_attempts", df)
    node_events = [r for r in node_events if r["time"] is not None]
    if node_events:
        df, q = _split_bad(_frame("node_events", node_events), _implausible("time", ctx))
        quarantines.append(q)
        if df.height:
            tables["node_events"] = df
    q = pl.concat(quarantines)
    n_ok = tables["job_attempts"].height if "job_attempts" in tables else 0
    return ParseResult(tables, q, n_ok + q.height)


def _implausible(col: str, ctx: ParseContext) -> pl.Expr:
    return pl.format(f"{col}: {{}}", implausible_time(pl.col(col), ctx))


def _attempt_error(ctx: ParseContext) -> pl.Expr:
    """Why an attempt cannot be stored (a time outside the plausible window, an end before its
    start), else null."""
    return (
        pl.when(pl.col("end_time") < pl.col("start_time"))
        .then(
            pl.format(
                "end_time {} is before start_time {}",
                *(pl.col(c).dt.to_string("%Y-%m-%dT%H:%M:%S") for c in ("end_time", "start_time")),
            )
        )
        .otherwise(
            pl.coalesce(
                _implausible("submit_time", ctx),
                _implausible("start_time", ctx),
                _implausible("end_time", ctx),
            )
        )
    )


def _split_bad(df: pl.DataFrame, error: pl.Expr) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows without an error, their quarantine rows): a rejected row is one quarantine row
    whose raw text is the row as parsed (its object's JSON is not kept)."""
    df = df.with_columns(_error=error)
    bad = df.filter(pl.col("_error").is_not_null())
    raw = (
        bad.drop("_error").select(pl.struct(pl.all()).struct.json_encode()).to_series()
        if bad.height
        else []
    )
    return (
        df.filter(pl.col("_error").is_null()).drop("_error"),
        quarantine_frame(bad["source_line"], raw, bad["_error"]),
    )


def _frame(table: str, rows: list[dict]) -> pl.DataFrame:
    """Rows to a typed frame; a value of the wrong type (odd input objects) becomes null."""
    schema = TABLES[table].columns

    def fit(v, dtype):
        if dtype == pl.Utf8:
            return v if isinstance(v, str) else None
        if isinstance(dtype, pl.Datetime):
            return v if isinstance(v, datetime) else None
        if isinstance(dtype, pl.List):
            return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []
        if dtype.is_integer():
            return v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**31 else None
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return pl.DataFrame(
        [{c: fit(r.get(c), t) for c, t in schema.items()} for r in rows],
        schema=schema,
        orient="row",
    )


def _looks_like_oplog(text: str) -> bool:
    return bool(re.search(r"^\d{4}-\d\d-\d\dT\S+\t\w+\tevents\t", text[:65536], re.MULTILINE))


_K8S_KINDS = (
    rb"(Pod|PodList|List|Event|EventList|Node|NodeList|PyTorchJob|PyTorchJobList|JobSet|JobSetList)"
)


def detect(head: bytes, name: str) -> int:
    if re.search(rb'"kind"\s*:\s*"' + _K8S_KINDS + rb'"', head) and b'"apiVersion"' in head:
        return 90
    if re.search(rb"(?m)^kind:\s*" + _K8S_KINDS + rb"\s*$", head) and re.search(
        rb"(?m)^apiVersion:", head
    ):
        return 90
    if (
        re.search(rb"(?m)^\d{4}-\d\d-\d\dT\S+\t\w+\tevents\t", head)
        and b'"kind":"PyTorchJob"' in head
    ):
        return 70
    if re.search(rb'"(Status|status)"\s*:', head) and re.search(
        rb"PyTorchJob|training\.kubeflow\.org|JobSet", head
    ):
        return 70  # a PyTorchJob-like object, e.g. a vendor CLI's describe output
    return 0


FORMAT = FormatSpec(
    name="k8s",
    primary="job_attempts",
    parse=parse,
    detect=detect,
    description=(
        "Kubernetes pods / events / nodes / PyTorchJob / JobSet (JSON or YAML), "
        "training-operator log"
    ),
)
