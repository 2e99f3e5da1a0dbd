"""The pod and PyTorchJob objects of a simulated job's workers as ``kubectl get -o json`` lists
them: metadata, spec, status and the containers' current and last states."""

from __future__ import annotations

import hashlib

from sample_data.model import K8S_NAMESPACE
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.writers.kubernetes._utils import IMAGE
from sample_data.writers.kubernetes._utils import OPERATOR
from sample_data.writers.kubernetes._utils import cid
from sample_data.writers.kubernetes._utils import k8s_time
from sample_data.writers.kubernetes._utils import uid
from sample_data.writers.kubernetes.events import Conditions
from sample_data.writers.kubernetes.events import Worker


def _container_state(f: Fleet, pname: str, final: Attempt) -> dict:
    """The worker container's state after the job's last attempt."""
    if final.end is None:
        return {"running": {"startedAt": k8s_time(f, final.start)}}
    return {
        "terminated": {
            "exitCode": 0,
            "reason": "Completed",
            "startedAt": k8s_time(f, final.start),
            "finishedAt": k8s_time(f, final.end),
            "containerID": cid(pname, final.attempt, final.start),
        }
    }


def _last_state(f: Fleet, pname: str, worker: Worker) -> dict:
    """The container's previous run, when it ended in an error."""
    if worker.last_error is None:
        return {}
    start, end = worker.last_error
    return {
        "terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": k8s_time(f, start),
            "finishedAt": k8s_time(f, end),
            "containerID": cid(pname, start, "error"),
        }
    }


def pod(
    f: Fleet, name: str, job_uid: str, w: int, worker: Worker, final: Attempt, version: int
) -> dict:
    """A worker's Pod object as ``kubectl get pods -o json`` lists it."""
    G, W = f.gpus_per_node, len(final.nodes)
    pname = f"{name}-worker-{w}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "creationTimestamp": k8s_time(f, worker.created),
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
            "uid": uid("pod", name, w, worker.created),
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


def _pod_status(f: Fleet, pname: str, w: int, worker: Worker, final: Attempt) -> dict:
    """A worker pod's status: its addresses, readiness and its container's current and last
    state."""
    running = final.end is None
    node = worker.node
    return {
        "phase": "Running" if running else "Succeeded",
        "hostIP": f"10.1.{node // 250}.{node % 250 + 2}",
        "podIP": f"10.244.{node % 250}.{10 + w}",
        "qosClass": "BestEffort",
        "startTime": k8s_time(f, worker.created),
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if running else "False",
                "lastTransitionTime": k8s_time(f, final.start),
            }
        ],
        "containerStatuses": [
            {
                "name": "pytorch",
                "image": IMAGE,
                "imageID": "nvcr.io/nvidia/pytorch@sha256:"
                + hashlib.sha256(IMAGE.encode()).hexdigest(),
                "containerID": cid(pname, final.attempt, final.start),
                "ready": running,
                "started": running,
                "restartCount": worker.restarts,
                "state": _container_state(f, pname, final),
                "lastState": _last_state(f, pname, worker),
            }
        ],
    }


def pytorchjob(
    f: Fleet, name: str, job_uid: str, atts: list[Attempt], conds: Conditions, version: int
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
        "startTime": k8s_time(f, atts[0].start),
        "lastReconcileTime": k8s_time(f, min(f.horizon, (final.end or f.horizon))),
    }
    if not running:
        status["completionTime"] = k8s_time(f, final.end)
    container = {
        "name": "pytorch",
        "image": IMAGE,
        "resources": {"limits": {"nvidia.com/gpu": str(f.gpus_per_node)}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "creationTimestamp": k8s_time(f, atts[0].submit),
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
