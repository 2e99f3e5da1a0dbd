"""`kubectl get pods/events/pytorchjobs -o json` Lists (read by
``ingest/formats/kubernetes/``)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from sample_data.model import K8S_NAMESPACE, Attempt, Fleet, ts
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


def write(f: Fleet, out: Path, ev: dict) -> dict:
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
            for w in range(W):  # the kubelet starts every worker's container: the attempt's start
                event(
                    a.start,
                    a.start,
                    "Pod",
                    f"{name}-worker-{w}",
                    "Started",
                    "Started container pytorch",
                    "Normal",
                    "kubelet",
                    f.hosts[a.nodes[w]],
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
                event(  # the training operator's record of the worker that exited
                    a.end,
                    a.end,
                    "PyTorchJob",
                    name,
                    "ExitedWithCode",
                    f"Pod: {K8S_NAMESPACE}.{name}-worker-0 exited with code 1",
                    "Normal",
                    "pytorchjob-controller",
                )
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
    write_text(
        out / "k8s" / "pods.json",
        _json({"apiVersion": "v1", "items": pods, "kind": "List", "metadata": meta}, 4),
    )
    write_text(
        out / "k8s" / "events.json",
        _json({"apiVersion": "v1", "items": events, "kind": "List", "metadata": meta}, 4),
    )
    write_text(
        out / "k8s" / "pytorchjob.json",
        _json({"apiVersion": "v1", "items": pjs, "kind": "List", "metadata": meta}, 4),
    )
    return {"pods": len(pods), "events": len(events), "pytorchjobs": len(pjs)}
