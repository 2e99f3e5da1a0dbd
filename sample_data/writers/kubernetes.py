"""`kubectl get pods/events/pytorchjobs -o json` Lists (read by
``ingest/formats/kubernetes/``)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from sample_data.model import K8S_NAMESPACE
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import write_text


def _json(obj, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, ensure_ascii=False) + "\n"


def _k8s_time(f: Fleet, t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(round(f.start_epoch + t)))


def _uid(*parts) -> str:
    h = hashlib.sha1("|".join(map(str, parts)).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _cid(*parts) -> str:
    """containerd container id: 64 hex digits, stable for the same inputs."""
    return "containerd://" + hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


IMAGE = "nvcr.io/nvidia/pytorch:24.03-py3"
OPERATOR = "pytorchjob-controller"


class _Events:
    """The events of the whole List, collected as rows: (time, involved kind, involved name,
    reason, message, type, reporting component, reporting host, count). ``items`` sorts and
    numbers them once all are in (rows at the same time keep the order they were added in)."""

    def __init__(self, f: Fleet) -> None:
        self.f = f
        self.rows: list[tuple] = []

    def add(
        self,
        t: float,
        kind: str,
        name: str,
        reason: str,
        msg: str,
        typ: str,
        comp: str,
        host: str = "",
        count: int = 1,
    ) -> None:
        self.rows.append((t, kind, name, reason, msg, typ, comp, host, count))

    def items(self) -> list[dict]:
        """The Event objects inside the window, in time order."""
        f = self.f
        out = []
        self.rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
        for j, (t0, kind, name, reason, msg, typ, comp, host, count) in enumerate(self.rows):
            if t0 >= f.horizon:
                continue
            ns = "default" if kind == "Node" else K8S_NAMESPACE
            out.append(
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
                    "lastTimestamp": _k8s_time(f, t0 + (count - 1) * 10),
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
        return out


class _Conditions:
    """A PyTorchJob's status conditions, one per type, in the order they first appeared."""

    def __init__(self, f: Fleet) -> None:
        self.f = f
        self.by_type: dict[str, dict] = {}

    def set(self, typ: str, t: float, reason: str, msg: str) -> None:
        """``typ`` becomes true at ``t``; Running and Restarting exclude each other."""
        for c in self.by_type.values():
            if c["type"] in ("Running", "Restarting") and c["type"] != typ:
                c["status"] = "False"
        self.by_type[typ] = {
            "lastTransitionTime": _k8s_time(self.f, t),
            "lastUpdateTime": _k8s_time(self.f, t),
            "message": msg,
            "reason": reason,
            "status": "True",
            "type": typ,
        }


@dataclass
class _Worker:
    """One worker pod of a PyTorchJob across its attempts."""

    created: float
    node: int | None = None
    restarts: int = 0  # container restarts in the current pod
    last_error: tuple[float, float] | None = None  # (start, end) of its last failed container


def _place_workers(
    f: Fleet, events: _Events, name: str, a: Attempt, workers: list[_Worker]
) -> None:
    """Each worker the attempt puts on another node gets a new pod (the operator creates it,
    the scheduler binds it); then the kubelet starts every worker's container."""
    for w, worker in enumerate(workers):
        if worker.node == a.nodes[w]:
            continue
        if worker.node is not None:
            worker.created, worker.restarts, worker.last_error = a.start - 20, 0, None
            events.add(
                a.start - 20,
                "PyTorchJob",
                name,
                "SuccessfulCreatePod",
                f"Created pod: {name}-worker-{w}",
                "Normal",
                OPERATOR,
            )
        worker.node = a.nodes[w]
        events.add(
            a.start - 5,
            "Pod",
            f"{name}-worker-{w}",
            "Scheduled",
            f"Successfully assigned {K8S_NAMESPACE}/{name}-worker-{w} to {f.hosts[a.nodes[w]]}",
            "Normal",
            "default-scheduler",
        )
    for w in range(len(workers)):  # the kubelet starts every worker's container: the start
        events.add(
            a.start,
            "Pod",
            f"{name}-worker-{w}",
            "Started",
            "Started container pytorch",
            "Normal",
            "kubelet",
            f.hosts[a.nodes[w]],
        )


def _lost_worker(f: Fleet, events: _Events, name: str, a: Attempt) -> int | None:
    """The worker whose node a fault or a drain took (its pod is killed or evicted, it does not
    restart in place), or None when the workload itself failed."""
    if not (a.cause and a.cause[0] in ("fault", "maint")):
        return None
    is_fault = a.cause[0] == "fault"
    bad_n = (f.faults if is_fault else f.maint)[a.cause[1]]["node"]
    bad_w = a.nodes.index(bad_n)
    reason, msg, typ = (
        ("Killing", "Stopping container pytorch", "Normal")
        if is_fault
        else ("Evicted", "The node was drained for maintenance.", "Warning")
    )
    events.add(a.end, "Pod", f"{name}-worker-{bad_w}", reason, msg, typ, "kubelet", f.hosts[bad_n])
    return bad_w


def _workload_exit(f: Fleet, events: _Events, name: str, a: Attempt) -> None:
    """The operator's record of the worker that exited with an error, and its back-off."""
    events.add(
        a.end,
        "PyTorchJob",
        name,
        "ExitedWithCode",
        f"Pod: {K8S_NAMESPACE}.{name}-worker-0 exited with code 1",
        "Normal",
        OPERATOR,
    )
    events.add(
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


def _end_failed_attempt(
    f: Fleet, events: _Events, conds: _Conditions, name: str, a: Attempt, workers: list[_Worker]
) -> None:
    """An attempt that did not complete: the lost worker's pod goes, the others' containers
    exit with an error and restart, and the job restarts."""
    bad_w = _lost_worker(f, events, name, a)
    for w, worker in enumerate(workers):
        if w != bad_w:
            worker.restarts += 1
            worker.last_error = (a.start, a.end)
    if bad_w is None:
        _workload_exit(f, events, name, a)
    msg = f"PyTorchJob {name} is restarting because 1 Worker replica(s) failed."
    conds.set("Restarting", a.end + 2, "PyTorchJobRestarting", msg)
    events.add(a.end + 2, "PyTorchJob", name, "PyTorchJobRestarting", msg, "Warning", OPERATOR)


def _run_job(
    f: Fleet, events: _Events, name: str, atts: list[Attempt]
) -> tuple[_Conditions, list[_Worker]]:
    """Walk a PyTorchJob's attempts: the events they leave, the job's conditions and its
    workers' pods as they stand at the end."""
    conds = _Conditions(f)
    conds.set("Created", atts[0].submit, "PyTorchJobCreated", f"PyTorchJob {name} is created.")
    workers = [_Worker(created=atts[0].submit) for _ in atts[0].nodes]
    for a in atts:
        _place_workers(f, events, name, a, workers)
        conds.set(
            "Running",
            a.start,
            "PyTorchJobRunning",
            f"PyTorchJob {K8S_NAMESPACE}/{name} is running.",
        )
        if a.end is None:
            break
        if a.state == "COMPLETED":
            conds.set(
                "Succeeded",
                a.end,
                "PyTorchJobSucceeded",
                f"PyTorchJob {K8S_NAMESPACE}/{name} successfully completed.",
            )
            for worker in workers:
                worker.last_error = None
            continue
        _end_failed_attempt(f, events, conds, name, a, workers)
    return conds, workers


def _container_state(f: Fleet, pname: str, final: Attempt) -> dict:
    """The worker container's state after the job's last attempt."""
    if final.end is None:
        return {"running": {"startedAt": _k8s_time(f, final.start)}}
    return {
        "terminated": {
            "exitCode": 0,
            "reason": "Completed",
            "startedAt": _k8s_time(f, final.start),
            "finishedAt": _k8s_time(f, final.end),
            "containerID": _cid(pname, final.attempt, final.start),
        }
    }


def _last_state(f: Fleet, pname: str, worker: _Worker) -> dict:
    """The container's previous run, when it ended in an error."""
    if worker.last_error is None:
        return {}
    start, end = worker.last_error
    return {
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": _k8s_time(f, start),
            "finishedAt": _k8s_time(f, end),
            "containerID": _cid(pname, start, "error"),
        }
    }


def _pod(
    f: Fleet, name: str, job_uid: str, w: int, worker: _Worker, final: Attempt, version: int
) -> dict:
    """A worker's Pod object as ``kubectl get pods -o json`` lists it."""
    G, W = f.gpus_per_node, len(final.nodes)
    pname = f"{name}-worker-{w}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": _k8s_time(f, worker.created),
            "labels": {
                "training.kubeflow.org/job-name": name,
                "training.kubeflow.org/operator-name": OPERATOR,
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
            "resourceVersion": str(version),
            "uid": _uid("pod", name, w, worker.created),
        },
        "spec": {
            "containers": [
                {
                    "name": "pytorch",
                    "image": IMAGE,
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
            "nodeName": f.hosts[worker.node],
            "restartPolicy": "OnFailure",
            "schedulerName": "default-scheduler",
        },
        "status": _pod_status(f, pname, w, worker, final),
    }


def _pod_status(f: Fleet, pname: str, w: int, worker: _Worker, final: Attempt) -> dict:
    """A worker pod's status: its addresses, readiness and its container's current and last
    state."""
    running = final.end is None
    node = worker.node
    return {
        "phase": "Running" if running else "Succeeded",
        "hostIP": f"10.1.{node // 250}.{node % 250 + 2}",
        "podIP": f"10.244.{node % 250}.{10 + w}",
        "qosClass": "BestEffort",
        "startTime": _k8s_time(f, worker.created),
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if running else "False",
                "lastTransitionTime": _k8s_time(f, final.start),
            }
        ],
        "containerStatuses": [
            {
                "name": "pytorch",
                "image": IMAGE,
                "imageID": "nvcr.io/nvidia/pytorch@sha256:"
                + hashlib.sha256(IMAGE.encode()).hexdigest(),
                "containerID": _cid(pname, final.attempt, final.start),
                "ready": running,
                "started": running,
                "restartCount": worker.restarts,
                "state": _container_state(f, pname, final),
                "lastState": _last_state(f, pname, worker),
            }
        ],
    }


def _pytorchjob(
    f: Fleet, name: str, job_uid: str, atts: list[Attempt], conds: _Conditions, version: int
) -> dict:
    """The PyTorchJob object as ``kubectl get pytorchjobs -o json`` lists it."""
    W, final = len(atts[0].nodes), atts[-1]
    running = final.end is None
    status = {
        "conditions": list(conds.by_type.values()),
        "replicaStatuses": {
            "Worker": {
                "selector": f"training.kubeflow.org/job-name={name},training.kubeflow.org/"
                f"operator-name={OPERATOR},training.kubeflow.org/replica-type=worker",
                **({"active": W} if running else {"succeeded": W}),
            }
        },
        "startTime": _k8s_time(f, atts[0].start),
        "lastReconcileTime": _k8s_time(f, min(f.horizon, (final.end or f.horizon))),
    }
    if not running:
        status["completionTime"] = _k8s_time(f, final.end)
    container = {
        "name": "pytorch",
        "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": str(f.gpus_per_node)}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "creationTimestamp": _k8s_time(f, atts[0].submit),
            "generation": 1,
            "name": name,
            "namespace": K8S_NAMESPACE,
            "resourceVersion": str(version),
            "uid": job_uid,
        },
        "spec": {
            "pytorchReplicaSpecs": {
                "Worker": {
                    "replicas": W,
                    "restartPolicy": "OnFailure",
                    "template": {"spec": {"containers": [container]}},
                }
            },
            "runPolicy": {"backoffLimit": 100, "cleanPodPolicy": "None"},
        },
        "status": status,
    }


def _node_events(f: Fleet, events: _Events, ev: dict) -> None:
    """The Kubernetes nodes' readiness around fatal faults (evidence of the fault) and their
    schedulability around maintenance drains."""
    k8s_nodes = set(range(f.nodes - f.k8s_nodes, f.nodes))
    for i, flt in enumerate(f.faults):
        if flt["node"] in k8s_nodes and flt["fatal"] and not flt["secondary"]:
            host = f.hosts[flt["node"]]
            t_nr = flt["time"] + 40.0
            events.add(
                t_nr,
                "Node",
                host,
                "NodeNotReady",
                f"Node {host} status is now: NodeNotReady",
                "Normal",
                "node-controller",
            )
            events.add(
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
            for t, reason in ((m["start"], "NodeNotSchedulable"), (m["end"], "NodeSchedulable")):
                events.add(
                    t,
                    "Node",
                    host,
                    reason,
                    f"Node {host} status is now: {reason}",
                    "Normal",
                    "kubelet",
                    host,
                )


def _write_list(path: Path, items: list[dict]) -> None:
    meta = {"resourceVersion": ""}
    write_text(
        path, _json({"apiVersion": "v1", "items": items, "kind": "List", "metadata": meta}, 4)
    )


def write(f: Fleet, out: Path, ev: dict) -> dict:
    """k8s/pods.json, k8s/events.json, k8s/pytorchjob.json for the PyTorchJob chain."""
    jobs: dict[str, list[Attempt]] = {}
    for a in f.attempts:
        if a.scheduler == "k8s":
            jobs.setdefault(a.name, []).append(a)
    events = _Events(f)
    pods, pjs = [], []
    for name in sorted(jobs):
        atts = sorted(jobs[name], key=lambda a: a.attempt)
        job_uid = _uid("pytorchjob", name)
        conds, workers = _run_job(f, events, name, atts)
        for w, worker in enumerate(workers):
            pods.append(_pod(f, name, job_uid, w, worker, atts[-1], 100000 + len(pods)))
        pjs.append(_pytorchjob(f, name, job_uid, atts, conds, 200000 + len(pjs)))
    _node_events(f, events, ev)
    items = events.items()
    _write_list(out / "k8s" / "pods.json", pods)
    _write_list(out / "k8s" / "events.json", items)
    _write_list(out / "k8s" / "pytorchjob.json", pjs)
    return {"pods": len(pods), "events": len(items), "pytorchjobs": len(pjs)}
