"""`kubectl get pods/events/pytorchjobs -o json` Lists (read by ``ingest/formats/kubernetes/``):
``events`` runs each PyTorchJob's attempts on Kubernetes, ``objects`` writes its pods and the
job as the API server lists them."""

from __future__ import annotations

import json
from pathlib import Path

from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.writers.base import write_text
from sample_data.writers.kubernetes._utils import uid
from sample_data.writers.kubernetes.events import Events
from sample_data.writers.kubernetes.events import node_events
from sample_data.writers.kubernetes.events import run_job
from sample_data.writers.kubernetes.objects import pod
from sample_data.writers.kubernetes.objects import pytorchjob


def _json(obj, indent: int | None = 2) -> str:
    return json.dumps(obj, indent=indent, ensure_ascii=False) + "\n"


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
    events = Events(f)
    pods, pjs = [], []
    for name in sorted(jobs):
        atts = sorted(jobs[name], key=lambda a: a.attempt)
        job_uid = uid("pytorchjob", name)
        conds, workers = run_job(f, events, name, atts)
        for w, worker in enumerate(workers):
            pods.append(pod(f, name, job_uid, w, worker, atts[-1], 100000 + len(pods)))
        pjs.append(pytorchjob(f, name, job_uid, atts, conds, 200000 + len(pjs)))
    node_events(f, events, ev)
    items = events.items()
    _write_list(out / "k8s" / "pods.json", pods)
    _write_list(out / "k8s" / "events.json", items)
    _write_list(out / "k8s" / "pytorchjob.json", pjs)
    return {"pods": len(pods), "events": len(items), "pytorchjobs": len(pjs)}
