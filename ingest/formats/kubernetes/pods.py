"""Pods: one row per container run a pod still shows; the runs of a training job's pods folded
into its attempts (a gang)."""

from datetime import datetime

from ingest.base import ParseContext

from .common import JOB_KINDS
from .common import JOB_LABELS
from .common import PHASE_STATE
from .common import REASON_STATE
from .common import STATE_PRIORITY
from .common import BadObject
from .common import as_int
from .common import container_gpus
from .common import dig
from .common import exit_signal
from .common import metadata
from .common import timestamp


def _state(reason: str | None, exit_code: int | None) -> str:
    if reason in REASON_STATE:
        return REASON_STATE[reason]
    if exit_code is None:
        return "UNKNOWN"
    return "COMPLETED" if exit_code == 0 else "FAILED"


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


def pod_runs(pod: dict, ctx: ParseContext, index: int) -> tuple[str | None, list[dict]]:
    """(owning job name or None, one row per container run the pod shows)."""
    ns, name, md = metadata(pod)
    owner = _owner_job(md)
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    status = pod.get("status") if isinstance(pod.get("status"), dict) else {}
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else None
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    gpus_by_name = {c.get("name"): container_gpus(c) for c in containers}
    base = {
        "cluster": ctx.cluster,
        "scheduler": "k8s",
        "job_id": f"{ns}/{owner or name}",
        "name": owner or name,
        "account": ns,
        "submit_time": timestamp(md.get("creationTimestamp")),
        "n_nodes": 1 if node else 0,
        "nodes": [node] if node else [],
        "source": "k8s",
        "source_file": ctx.path,
        "source_line": index,
        "_pod": name,
    }
    statuses = [s for s in status.get("containerStatuses") or [] if isinstance(s, dict)]
    rows = [
        r
        for cs in statuses
        for r in _container_runs(
            {**base, "_container": cs.get("name")}, cs, gpus_by_name.get(cs.get("name"), 0)
        )
    ]
    if not statuses:
        rows.append(_phase_run(base, status, sum(gpus_by_name.values())))
    if not rows:
        raise BadObject(
            f"Pod {ns}/{name}: no container status shows a run (no state, lastState or phase)"
        )
    return owner, rows


def _container_runs(base: dict, cs: dict, gpus: int) -> list[dict]:
    """The runs one container status shows: its last termination (run ``restartCount``) and
    its current state, terminated or running (run ``restartCount + 1``); a container that
    never ran is one pending run."""
    rows = []
    restarts = as_int(cs.get("restartCount")) or 0
    last = dig(cs, "lastState", "terminated")
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
                "start_time": timestamp(cur["running"].get("startedAt")),
            }
        )
    elif not isinstance(last, dict) and restarts == 0:
        reason = dig(cur, "waiting", "reason")
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
    return rows


def _phase_run(base: dict, status: dict, gpus: int) -> dict:
    """The one run of a pod without container statuses, from its phase (``Evicted`` pods)."""
    phase = status.get("phase") if isinstance(status.get("phase"), str) else None
    reason = status.get("reason") if isinstance(status.get("reason"), str) else None
    state = REASON_STATE.get(reason) or PHASE_STATE.get(phase, "UNKNOWN")
    ends = [
        timestamp(c.get("lastTransitionTime"))
        for c in status.get("conditions") or []
        if isinstance(c, dict)
    ]
    ends = [e for e in ends if e is not None]
    final = phase in ("Failed", "Succeeded")
    return {
        **base,
        "_container": None,
        "attempt": 1,
        "n_gpus": gpus,
        "state": state,
        "raw_state": "/".join(x for x in (phase, reason) if x) or None,
        "reason": reason,
        "start_time": timestamp(status.get("startTime")),
        "end_time": max(ends) if final and ends else None,
    }


def _terminated(term: dict) -> dict:
    reason = term.get("reason") if isinstance(term.get("reason"), str) else None
    code = as_int(term.get("exitCode"))
    return {
        "state": _state(reason, code),
        "raw_state": f"terminated/{reason}" if reason else "terminated",
        "reason": reason,
        "exit_code": code,
        "signal": exit_signal(term, code),
        "start_time": timestamp(term.get("startedAt")),
        "end_time": timestamp(term.get("finishedAt")),
    }


def fold_gang(rows: list[dict]) -> list[dict]:
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
