"""Kubernetes (format k8s): pods, events, nodes, PyTorchJob, JobSet, the operator log; pinned
expectations on the real samples and hand-built objects; property-based fuzzing."""

import json
from datetime import datetime

import polars as pl
import yaml
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.kubernetes import detect
from ingest.formats.kubernetes import parse
from tests.conftest import FIXTURES

K8S = FIXTURES / "kubernetes"


def _parse(data, **ctx):
    data = json.dumps(data).encode() if isinstance(data, (dict, list)) else data
    data = data.encode() if isinstance(data, str) else data
    res = parse(data, ParseContext(**ctx))
    ok = res.tables.get("job_attempts", pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height  # conservation
    return ok, res.tables.get("node_events", pl.DataFrame()), res.quarantine


def _object(kind, metadata, api="v1", **body):
    """A Kubernetes object as the API server writes it: apiVersion, kind, metadata, then the
    ``body`` sections (spec, status) in the order given."""
    return {"apiVersion": api, "kind": kind, "metadata": metadata, **body}


def _list(items):
    """A ``kubectl get -o json`` List of ``items``."""
    return {"apiVersion": "v1", "kind": "List", "items": items}


def test_crashloop_pod_last_termination_is_a_failed_attempt():
    ok, ne, q = _parse((K8S / "is-healthy__Pod_crashloopbackoff.yaml").read_bytes())
    assert q.height == 0 and ne.height == 0 and ok.height == 1  # waiting in back-off: no run
    a = ok.row(0, named=True)
    assert a["job_id"] == "argocd/my-pod" and a["scheduler"] == "k8s" and a["attempt"] == 3
    assert (
        a["state"] == "FAILED" and a["reason"] == "Error" and a["raw_state"] == "terminated/Error"
    )
    assert a["exit_code"] == 1 and a["signal"] is None and a["nodes"] == ["minikube"]
    assert a["end_time"] == datetime(2018, 12, 2, 9, 20, 25) and a["submit_time"] == datetime(
        2018, 12, 2, 9, 19, 36
    )


def test_oomkilled_in_last_state_while_running():
    ok, _, q = _parse((K8S / "is-healthy__Pod_oomkilled-unhealthy.yaml").read_bytes())
    assert q.height == 0
    assert ok["attempt"].to_list() == [9, 10] and ok["state"].to_list() == [
        "OUT_OF_MEMORY",
        "RUNNING",
    ]
    oom = ok.row(0, named=True)
    assert oom["exit_code"] == 1 and oom["reason"] == "OOMKilled"  # exit code is not always 137
    assert oom["start_time"] == datetime(2024, 11, 20, 7, 18, 53)
    assert oom["end_time"] is None  # '@now-2h' is that repo's test marker, not a time
    assert ok["job_id"].unique().to_list() == ["mission-control/oomkilled-pod"]


def test_evicted_pod_without_container_statuses():
    ok, _, q = _parse((K8S / "is-healthy__Pod_evicted.yaml").read_bytes())
    a = ok.row(0, named=True)
    assert q.height == 0 and ok.height == 1
    assert (
        a["state"] == "PREEMPTED"
        and a["reason"] == "Evicted"
        and a["raw_state"] == "Failed/Evicted"
    )
    assert a["start_time"] == datetime(2024, 5, 22, 9, 52, 34) and a["nodes"] == ["some-node"]


def test_node_without_any_condition_time_is_counted_as_quarantined():
    ok, ne, q = _parse((K8S / "is-healthy__Node_healthy.yaml").read_bytes())
    assert ok.height == 0 and ne.height == 0
    assert q["error"].to_list() == [
        (
            "object 1: Node gk3-infra-cluster-pool-2-be3fcd50-lzd5 Ready=True has no "
            "lastTransitionTime or lastHeartbeatTime: its state cannot be placed in time"
        )
    ]


def _node(name, **ready):
    return _object(
        "Node",
        {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"},
        status={"conditions": [{"type": "Ready", **ready}]},
    )


def test_not_ready_node_without_transition_time_is_counted():
    not_ready = {"status": "False", "reason": "KubeletNotReady"}
    unknown = {"status": "Unknown", "reason": "NodeStatusUnknown"}
    objs = _list(
        [
            _node("a", **not_ready, lastHeartbeatTime="2025-03-01T10:00:00Z"),
            _node("b", **not_ready),
            _node(
                "c",
                **unknown,
                lastTransitionTime="2025-03-01T11:00:00Z",
                lastHeartbeatTime="2025-03-01T10:59:00Z",
            ),
        ]
    )
    res = parse(json.dumps(objs).encode(), ParseContext())
    ne = res.tables["node_events"]
    assert ne.select("host", "event", "time", "reason").rows() == [
        (
            "a",
            "not_ready",
            datetime(2025, 3, 1, 10),
            "KubeletNotReady (no lastTransitionTime: time of the last heartbeat)",
        ),
        ("c", "not_ready", datetime(2025, 3, 1, 11), "NodeStatusUnknown"),
    ]
    assert res.quarantine["error"].to_list() == [
        (
            "object 2: Node b Ready=False has no lastTransitionTime or lastHeartbeatTime: "
            "its state cannot be placed in time"
        )
    ]
    assert res.records == 1


def test_every_skipped_object_is_counted():
    svc = _object("Service", {"name": "s"})
    waiting = _pod(
        "w",
        "n1",
        [{"name": "main", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
    )
    restart = _event("PyTorchJob", "pt", "PyTorchJobRestarting", None)
    down = _event("Node", "n4", "NodeNotReady", None)
    res = parse(
        json.dumps({"kind": "List", "items": [svc, waiting, restart, down]}).encode(),
        ParseContext(),
    )
    assert res.records == 4 and "job_attempts" not in res.tables
    assert res.quarantine["error"].to_list() == [
        (
            "object 1: kind Service is not read by the k8s format "
            "(it reads Pod, PyTorchJob, JobSet, Node, Event)"
        ),
        "object 2: Pod ml/w: no container status shows a run (no state, lastState or phase)",
        (
            "object 4: NodeNotReady event of node n4 without firstTimestamp, eventTime or "
            "lastTimestamp"
        ),
        "object 3: PyTorchJobRestarting event without firstTimestamp, eventTime or lastTimestamp",
    ]


def test_implausible_times_and_end_before_start_are_quarantined():
    ok_run = _term("Error", 1, "2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z")
    backwards = _term("Error", 1, "2025-01-01T05:00:00Z", "2025-01-01T01:00:00Z")
    future = _term("Error", 1, "2025-01-01T05:00:00Z", "2999-01-01T01:00:00Z")
    pods = [_pod(f"p{i}", "n1", [{"name": "main", "restartCount": 0, "state": t}])
            for i, t in enumerate((ok_run, backwards, future))]  # fmt: skip
    res = parse(json.dumps({"kind": "List", "items": pods}).encode(), ParseContext())
    assert res.tables["job_attempts"]["job_id"].to_list() == ["ml/p0"]
    assert res.quarantine.select("line", "error").rows() == [
        (2, "end_time 2025-01-01T01:00:00 is before start_time 2025-01-01T05:00:00"),
        (
            3,
            "end_time: time 2999-01-01T01:00:00 is after "
            + res.quarantine["error"][1].split(" is after ")[1],
        ),
    ]
    assert res.records == 3


def test_operator_log_restart_without_a_start_is_quarantined_with_its_end_and_exit_code():
    ok, _, q = _parse((K8S / "kubeflow-trainer_issue2044_operator_log.txt").read_bytes())
    assert ok.height == 0 and q.height == 1  # the log shows restarts, never starts
    assert q["error"][0] == (
        "PyTorchJobRestarting at 2024-04-05T15:12:25 ends an attempt of default/kfto-01 (exit "
        "code 1) whose start an operator log does not show: the job's pod events or pods "
        "(kubectl get events/pods -o json) give it"
    )  # -04:00 converted to UTC


def test_vendor_doc_invalid_json_is_recognised_and_rejected_readably():
    data = (K8S / "hyperpod_pytorchjob_status_doc.json").read_bytes()
    assert detect(data, "status.json") >= 60
    ok, _, q = _parse(data)
    assert ok.height == 0 and q.height == 1
    assert q["error"][0] == "invalid JSON at line 46 column 144: Invalid control character"
    assert q["line"][0] == 46


def _pod(name, node, statuses, owner=None, gpus=8, ns="ml", **status):
    md = {"name": name, "namespace": ns, "creationTimestamp": "2025-01-01T00:00:00Z"}
    if owner:
        md["ownerReferences"] = [
            {"kind": "PyTorchJob", "name": owner, "apiVersion": "kubeflow.org/v1"}
        ]
    return _object(
        "Pod",
        md,
        spec={
            "nodeName": node,
            "containers": [
                {"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ],
        },
        status={"containerStatuses": statuses, **status},
    )


def _term(reason, code, start, end):
    return {
        "terminated": {"reason": reason, "exitCode": code, "startedAt": start, "finishedAt": end}
    }


def _restarted_worker(name, node, exit_code, failed_at, completed_at):
    """A PyTorchJob worker pod whose one container failed once (exit_code at failed_at, started
    01:00) and then ran to completion (02:05 to completed_at)."""
    last = _term("Error", exit_code, "2025-01-01T01:00:00Z", f"2025-01-01T{failed_at}Z")
    state = _term("Completed", 0, "2025-01-01T02:05:00Z", f"2025-01-01T{completed_at}Z")
    container = {"name": "main", "restartCount": 1, "lastState": last, "state": state}
    return _pod(name, node, [container], owner="pt")


def test_pytorchjob_pods_fold_into_gang_attempts():
    w0 = _restarted_worker("pt-worker-0", "n1", 137, "02:00:00", "05:00:00")
    w1 = _restarted_worker("pt-worker-1", "n2", 1, "02:00:05", "05:00:10")
    solo = _pod(
        "solo",
        "n3",
        [
            {
                "name": "main",
                "restartCount": 0,
                "state": _term(
                    "ContainerCannotRun", 128, "2025-01-01T00:00:00Z", "2025-01-01T00:00:01Z"
                ),
            }
        ],
        gpus=0,
    )
    w1["metadata"].pop("ownerReferences")
    w1["metadata"]["labels"] = {"training.kubeflow.org/job-name": "pt"}  # owner by label only
    ok, _, q = _parse(_list([w0, w1, solo]))
    assert q.height == 0
    ok = ok.sort("job_id", "attempt")
    assert ok["job_id"].to_list() == ["ml/pt", "ml/pt", "ml/solo"]
    first, second, solo_row = ok.rows(named=True)
    assert first["state"] == "FAILED" and first["nodes"] == ["n1", "n2"] and first["n_nodes"] == 2
    assert first["n_gpus"] == 16 and first["exit_code"] == 137 and first["signal"] == 9
    assert first["end_time"] == datetime(2025, 1, 1, 2, 0, 5) and first["attempt"] == 1
    assert second["state"] == "COMPLETED" and second["attempt"] == 2
    assert second["start_time"] == datetime(2025, 1, 1, 2, 5) and second["end_time"] == datetime(
        2025, 1, 1, 5, 0, 10
    )
    assert (
        solo_row["state"] == "FAILED"
        and solo_row["reason"] == "ContainerCannotRun"
        and solo_row["n_gpus"] == 0
    )


def _event(kind, name, reason, t, msg="", ns="ml"):
    obj = {"kind": kind, "name": name, **({} if kind == "Node" else {"namespace": ns})}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": obj,
        "reason": reason,
        "message": msg,
        "eventTime": None,
        "firstTimestamp": t,
        "lastTimestamp": t,
        "count": 1,
    }


def _scheduled(pod, node, t="2025-01-01T00:59:00Z"):
    """The scheduler's event placing pod ``ml/POD`` on ``node`` (at 00:59 unless told)."""
    return _event("Pod", pod, "Scheduled", t, f"Successfully assigned ml/{pod} to {node}")


def test_events_give_restarts_with_nodes_and_node_transitions():
    items = [
        _scheduled("pt-worker-0", "n1"),
        _scheduled("pt-worker-1", "n2"),
        _event("Pod", "pt-worker-1", "Killing", "2025-01-01T02:00:00Z", "Stopping container main"),
        _event(
            "Node",
            "n2",
            "NodeNotReady",
            "2025-01-01T02:00:30Z",
            "Node n2 status is now: NodeNotReady",
        ),
        _event("PyTorchJob", "pt", "PyTorchJobRestarting", "2025-01-01T02:00:02Z", "restarting"),
        _scheduled("pt-worker-1", "n3", "2025-01-01T02:01:00Z"),
        _event(
            "PyTorchJob",
            "pt",
            "ExitedWithCode",
            "2025-01-01T03:00:00Z",
            "Pod: ml.pt-worker-0 exited with code 1",
        ),
        _event("PyTorchJob", "pt", "PyTorchJobRestarting", "2025-01-01T03:00:01Z", "restarting"),
        _event(
            "Pod",
            "pt-worker-0",
            "BackOff",
            "2025-01-01T03:00:10Z",
            "Back-off restarting failed container",
        ),
        _event("Node", "n2", "NodeReady", "2025-01-01T04:00:00Z"),
        _event("Node", "n3", "NodeNotSchedulable", "2025-01-01T05:00:00Z"),
        _event("Node", "n3", "NodeSchedulable", "2025-01-01T06:00:00Z"),
        _event("Node", "n3", "Starting", "2025-01-01T06:00:00Z"),
    ]
    ok, ne, q = _parse(_list(items))
    assert q.height == 0 and ok.height == 2  # one record per restart event
    assert ok["end_time"].to_list() == [datetime(2025, 1, 1, 2), datetime(2025, 1, 1, 3)]
    assert ok["nodes"].to_list() == [["n1", "n2"], ["n1", "n3"]]  # worker-1 was rescheduled to n3
    assert ok["reason"].to_list() == ["Killing", "ExitedWithCode"] and ok[
        "exit_code"
    ].to_list() == [None, 1]
    assert ok["attempt"].to_list() == [1, 2]
    # attempt 1 began when its pods were scheduled, attempt 2 when worker-1 was placed anew
    assert ok["start_time"].to_list() == [datetime(2025, 1, 1, 0, 59), datetime(2025, 1, 1, 2, 1)]
    assert ne["event"].to_list() == ["not_ready", "ready", "drain", "resume"]
    assert ne["host"].to_list() == ["n2", "n2", "n3", "n3"]
    assert ne["time"][0] == datetime(2025, 1, 1, 2, 0, 30)


def test_restart_events_take_their_start_from_container_starts_and_quarantine_an_unknown_start():
    started = _event(
        "Pod", "pt-worker-0", "Started", "2025-01-01T01:00:00Z", "Started container main"
    )
    started |= {"lastTimestamp": "2025-01-01T02:00:20Z", "count": 2}  # restarted in place
    items = [
        _scheduled("pt-worker-0", "n1"),
        _scheduled("pt-worker-1", "n2"),
        started,
        _event("Pod", "pt-worker-1", "Started", "2025-01-01T01:00:30Z", "Started container main"),
        _event(
            "PyTorchJob",
            "pt",
            "ExitedWithCode",
            "2025-01-01T02:00:00Z",
            "Pod: ml.pt-worker-0 exited with code 1",
        ),
        _event("PyTorchJob", "pt", "PyTorchJobRestarting", "2025-01-01T02:00:01Z", "restarting"),
        _event("Pod", "pt-worker-1", "Started", "2025-01-01T02:00:25Z", "Started container main"),
        _event("Pod", "pt-worker-1", "Killing", "2025-01-01T03:00:00Z", "Stopping container main"),
        _event("PyTorchJob", "pt", "PyTorchJobRestarting", "2025-01-01T03:00:02Z", "restarting"),
        _event("PyTorchJob", "lone", "PyTorchJobRestarting", "2025-01-01T04:00:00Z", "restarting"),
    ]
    ok, _, q = _parse(_list(items))
    # the container starts, not the earlier scheduling, begin each attempt
    assert ok["start_time"].to_list() == [datetime(2025, 1, 1, 1), datetime(2025, 1, 1, 2, 0, 20)]
    assert ok["end_time"].to_list() == [datetime(2025, 1, 1, 2), datetime(2025, 1, 1, 3)]
    assert ok["exit_code"].to_list() == [1, None] and ok["reason"].to_list() == [
        "ExitedWithCode",
        "Killing",
    ]
    assert q["line"].to_list() == [10] and q["error"][0] == (
        "object 10: PyTorchJobRestarting at 2025-01-01T04:00:00 ends an attempt of ml/lone whose "
        "start "
        "is not in this file (no Started or Scheduled event of its pods before it): the job's pod "
        "events or pods give it"
    )


def _condition(kind, status, at, **more):
    """One entry of an object's status.conditions, as the API server writes it."""
    return {"type": kind, "status": status, "lastTransitionTime": at, **more}


def _pytorchjob():
    """A PyTorchJob of 1 master and 3 workers of 8 GPUs that restarted once, then failed."""
    return _object(
        "PyTorchJob",
        {"name": "pt", "namespace": "ml", "creationTimestamp": "2025-01-01T00:00:00Z"},
        api="kubeflow.org/v1",
        spec={
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {
                        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 8}}}]}
                    },
                },
                "Worker": {
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "containers": [{"resources": {"requests": {"nvidia.com/gpu": "8"}}}]
                        }
                    },
                },
            }
        },
        status={
            "startTime": "2025-01-01T00:01:00Z",
            "completionTime": "2025-01-01T09:00:00Z",
            "conditions": [
                _condition("Created", "True", "2025-01-01T00:00:00Z"),
                _condition("Running", "False", "2025-01-01T03:05:00Z"),
                _condition("Restarting", "False", "2025-01-01T03:00:00Z"),
                _condition("Failed", "True", "2025-01-01T09:00:00Z", reason="PyTorchJobFailed"),
            ],
        },
    )


def _jobset():
    """A JobSet of 2 x 4 pods of 4 GPUs that completed after 2 restarts."""
    return _object(
        "JobSet",
        {"name": "js"},
        api="jobset.x-k8s.io/v1alpha2",
        spec={
            "replicatedJobs": [
                {
                    "replicas": 2,
                    "template": {
                        "spec": {
                            "parallelism": 4,
                            "template": {
                                "spec": {
                                    "containers": [{"resources": {"limits": {"nvidia.com/gpu": 4}}}]
                                }
                            },
                        }
                    },
                }
            ]
        },
        status={
            "restarts": 2,
            "conditions": [_condition("Completed", "True", "2025-02-01T00:00:00Z")],
        },
    )


def _cordoned_node():
    """A cordoned node whose kubelet stopped reporting."""
    return _object(
        "Node",
        {"name": "n9"},
        spec={
            "taints": [
                {"key": "node.kubernetes.io/unschedulable", "timeAdded": "2025-01-02T00:00:00Z"}
            ]
        },
        status={
            "conditions": [
                _condition("Ready", "Unknown", "2025-01-02T01:00:00Z", reason="NodeStatusUnknown")
            ]
        },
    )


def test_pytorchjob_and_jobset_objects_and_yaml_documents():
    pj, js, node = _pytorchjob(), _jobset(), _cordoned_node()
    text = "---\n".join(
        yaml.safe_dump(o) for o in (pj, js, node, _object("Service", {"name": "s"}))
    )
    ok, ne, q = _parse(text)
    assert q["error"].to_list() == [
        (
            "object 4: kind Service is not read by the k8s format "
            "(it reads Pod, PyTorchJob, JobSet, Node, Event)"
        )
    ]
    assert ok.height == 2
    j, p = ok.sort("job_id").rows(named=True)
    assert p["job_id"] == "ml/pt" and p["state"] == "FAILED" and p["n_gpus"] == 32
    assert p["start_time"] == datetime(2025, 1, 1, 3, 5)  # the Running transition after the restart
    assert p["end_time"] == datetime(2025, 1, 1, 9) and p["reason"] == "PyTorchJobFailed"
    assert (
        j["job_id"] == "default/js"
        and j["state"] == "COMPLETED"
        and j["attempt"] == 3
        and j["n_gpus"] == 32
    )
    assert ne.sort("time")["event"].to_list() == ["drain", "not_ready"]


def test_objects_without_kind_or_name_are_quarantined_and_bad_yaml_is_one_row():
    ok, _, q = _parse(_list([{"metadata": {}}, {"kind": "Pod", "metadata": {}}]))
    assert ok.height == 0 and q["error"].to_list() == [
        "object 1: object without kind",
        "object 2: Pod object without metadata.name",
    ]
    ok, _, q = _parse("apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n")
    assert q.height == 1 and q["error"][0].startswith("invalid YAML at line")


def test_detect():
    for f in K8S.iterdir():
        assert detect(f.read_bytes(), f.name) >= 60, f.name
    assert detect((FIXTURES / "slurm" / "SARC__slurm_21_8_8.json").read_bytes(), "x") == 0
    assert detect(b"JobID|State\n", "x") == 0


REAL = (K8S / "is-healthy__Pod_crashloopbackoff.yaml").read_bytes()
REAL_JSON = json.dumps(yaml.safe_load(REAL), default=str, indent=1).encode()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([REAL, REAL_JSON]),
    st.integers(0, 2600),
    st.integers(1, 30),
    st.binary(max_size=20),
)
def test_fuzz_mutated_real_objects(real, pos, cut, insert):
    pos = min(pos, len(real) - 1)
    _parse(real[:pos] + insert + real[pos + cut :])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=25),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
keys = st.sampled_from(
    ["kind", "metadata", "spec", "status", "involvedObject", "reason", "firstTimestamp", "items"]
)
kinds = st.sampled_from(["Pod", "Event", "Node", "PyTorchJob", "JobSet", "List"])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(kinds, st.dictionaries(keys, json_values, max_size=5)), max_size=4))
def test_fuzz_structurally_odd_objects(objs):
    items = [{**body, "kind": kind} for kind, body in objs]
    _parse(_list(items))


def test_real_kubectl_get_pods_list_running_pod():
    ok, ne, q = _parse((K8S / "kuard__kubectl_get_pods_list.json").read_bytes())
    assert q.height == 0 and ne.height == 0
    assert ok.select("job_id", "attempt", "state", "raw_state", "nodes", "n_gpus").rows() == [
        ("default/queue-l4dv8", 1, "RUNNING", "running", ["minikube"], 0)
    ]
    assert ok["start_time"][0] == datetime(2022, 12, 23, 9, 36, 47) and ok["end_time"][0] is None
    assert ok["submit_time"][0] == datetime(2022, 12, 23, 9, 36, 45)


def test_one_bad_yaml_document_costs_only_itself():
    good = (
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}, namespace: ml}}\nstatus: {{phase: "
        "Succeeded, startTime: '2025-01-01T00:00:00Z'}}\n"
    )
    text = (
        good.format(n="a")
        + "---\napiVersion: v1\nkind: Pod\nmetadata: [unclosed\n---\n"
        + good.format(n="b")
    )
    ok, _, q = _parse(text)
    assert ok["job_id"].to_list() == ["ml/a", "ml/b"]
    assert q.select("line").to_series().to_list() == [5] and q["error"][0].startswith(
        "invalid YAML at line 9"
    )


def test_real_oomkilled_daemonset_pod_is_two_runs():
    # a live minikube Pod (docker runtime) captured by kubeshark: OOMKilled once, running again
    data = (K8S / "kubeshark-scripts__oomkilled_worker_pod_in_podlist.json").read_bytes()
    assert detect(data, "pods.json") > 0
    ok, ne, q = _parse(data)
    assert q.height == 0 and ne.height == 0
    assert ok.select(
        "job_id", "attempt", "state", "raw_state", "reason", "exit_code", "signal", "nodes"
    ).rows() == [
        (
            "kubeshark/kubeshark-worker-daemon-set-hvn25",
            1,
            "OUT_OF_MEMORY",
            "terminated/OOMKilled",
            "OOMKilled",
            137,
            9,
            ["mizu"],
        ),
        (
            "kubeshark/kubeshark-worker-daemon-set-hvn25",
            2,
            "RUNNING",
            "running",
            None,
            None,
            None,
            ["mizu"],
        ),
    ]
    assert ok["start_time"].to_list() == [
        datetime(2023, 5, 6, 16, 54, 42),
        datetime(2023, 5, 6, 21, 3, 58),
    ]
    assert ok["end_time"].to_list() == [datetime(2023, 5, 6, 21, 3, 57), None]
    assert ok["elapsed_s"][0] == 4 * 3600 + 9 * 60 + 15  # the OOM-killed run
    assert ok["n_gpus"].to_list() == [0, 0] and ok["submit_time"][0] == datetime(
        2023, 5, 6, 16, 54, 36
    )
