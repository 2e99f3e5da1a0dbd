"""A simulated job's run on Kubernetes: its workers placed on nodes, the events and job
conditions of each attempt (scheduled, started, lost or failed, restarted) and the node events."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from sample_data.model import K8S_NAMESPACE
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.kubernetes._utils import OPERATOR
from sample_data.writers.kubernetes._utils import k8s_time
from sample_data.writers.kubernetes._utils import uid


class Events:
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
                    "firstTimestamp": k8s_time(f, t0),
                    "involvedObject": {
                        "apiVersion": {"Pod": "v1", "Node": "v1"}.get(kind, "kubeflow.org/v1"),
                        "kind": kind,
                        "name": name,
                        **({} if kind == "Node" else {"namespace": ns}),
                        "uid": uid(kind, name),
                    },
                    "lastTimestamp": k8s_time(f, t0 + (count - 1) * 10),
                    "message": msg,
                    "metadata": {
                        "creationTimestamp": k8s_time(f, t0),
                        "name": f"{name}.{hashlib.sha1(f'{j}{t0}'.encode()).hexdigest()[:16]}",
                        "namespace": ns,
                        "resourceVersion": str(300000 + j),
                        "uid": uid("event", j, t0),
                    },
                    "reason": reason,
                    "reportingComponent": comp if comp != "kubelet" else "",
                    "reportingInstance": "",
                    "source": {"component": comp, **({"host": host} if host else {})},
                    "type": typ,
                }
            )
        return out


class Conditions:
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
            "lastTransitionTime": k8s_time(self.f, t),
            "lastUpdateTime": k8s_time(self.f, t),
            "message": msg,
            "reason": reason,
            "status": "True",
            "type": typ,
        }


@dataclass
class Worker:
    """One worker pod of a PyTorchJob across its attempts."""

    created: float
    node: int | None = None
    restarts: int = 0  # container restarts in the current pod
    last_error: tuple[float, float] | None = None  # (start, end) of its last failed container


def _place_workers(f: Fleet, events: Events, name: str, a: Attempt, workers: list[Worker]) -> None:
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


def _lost_worker(f: Fleet, events: Events, name: str, a: Attempt) -> int | None:
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


def _workload_exit(f: Fleet, events: Events, name: str, a: Attempt) -> None:
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
        f"{name}-worker-0_{K8S_NAMESPACE}({uid('pod', name, 0)})",
        "Warning",
        "kubelet",
        f.hosts[a.nodes[0]],
        2,
    )


def _end_failed_attempt(
    f: Fleet, events: Events, conds: Conditions, name: str, a: Attempt, workers: list[Worker]
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


def run_job(
    f: Fleet, events: Events, name: str, atts: list[Attempt]
) -> tuple[Conditions, list[Worker]]:
    """Walk a PyTorchJob's attempts: the events they leave, the job's conditions and its
    workers' pods as they stand at the end."""
    conds = Conditions(f)
    conds.set("Created", atts[0].submit, "PyTorchJobCreated", f"PyTorchJob {name} is created.")
    workers = [Worker(created=atts[0].submit) for _ in atts[0].nodes]
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


def node_events(f: Fleet, events: Events, ev: dict) -> None:
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
