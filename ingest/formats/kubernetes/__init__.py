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

The package, one module per kind of input: ``pods``, ``jobs`` (PyTorchJob / JobSet), ``nodes``
(Node objects and node Events), ``restarts`` (restart Events) and ``oplog`` (the operator log);
``documents`` reads the file's objects, ``frames`` types their rows, ``common`` holds what all
kinds are read with and ``sniff`` recognises the format.
"""

from __future__ import annotations

import json
import re

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import whole_file_quarantine
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

from .common import JOB_KINDS
from .common import READ_KINDS
from .common import BadObject
from .documents import load_documents
from .documents import objects
from .frames import attempt_error
from .frames import implausible
from .frames import split_bad
from .frames import typed_frame
from .jobs import job_runs
from .nodes import event_rows
from .nodes import node_rows
from .oplog import looks_like_oplog
from .oplog import operator_log
from .pods import fold_gang
from .pods import pod_runs
from .restarts import restart_runs
from .sniff import detect as detect  # FormatSpec.declare finds it by this name


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    text = data.decode("utf-8", errors="replace")
    attempts: list[dict] = []
    node_events: list[dict] = []
    bad: list[tuple[int, str, str]] = []
    if looks_like_oplog(text):
        bad = operator_log(text, ctx)
    else:
        try:
            docs, bad = load_documents(text)
        except (ValueError, RecursionError) as exc:
            msg = str(exc) if isinstance(exc, ValueError) else "document nested too deeply"
            m = re.search(r"at line (\d+)", msg)
            return ParseResult({}, whole_file_quarantine(data, msg, int(m.group(1)) if m else 1), 1)
        gangs: dict[str, list[dict]] = {}
        events: list[tuple[int, dict]] = []
        for i, obj in enumerate(objects(docs), start=1):
            try:
                if not isinstance(obj, dict) or not isinstance(obj.get("kind"), str):
                    raise BadObject("object without kind")
                kind = obj["kind"]
                if kind == "Pod":
                    owner, runs = pod_runs(obj, ctx, i)
                    if owner:
                        for r in runs:
                            gangs.setdefault(r["job_id"], []).append(r)
                    else:
                        attempts.extend(runs)
                elif kind in JOB_KINDS:
                    attempts.extend(job_runs(obj, ctx, i))
                elif kind == "Node":
                    node_events.extend(node_rows(obj, ctx, i))
                elif kind == "Event":
                    events.append((i, obj))
                    node_events.extend(event_rows(obj, ctx, i))
                else:
                    raise BadObject(
                        f"kind {kind} is not read by the k8s format (it reads "
                        f"{', '.join(READ_KINDS)})"
                    )
            except (BadObject, TypeError, AttributeError, ValueError) as exc:
                bad.append((i, json.dumps(obj, default=str)[:500], f"object {i}: {exc}"))
        for runs in gangs.values():
            attempts.extend(fold_gang(runs))
        attempts.extend(restart_runs(events, ctx, bad))
    tables, quarantines = (
        {},
        [quarantine_frame([b[0] for b in bad], [b[1] for b in bad], [b[2] for b in bad])],
    )
    if attempts:
        df = typed_frame("job_attempts", attempts).with_columns(
            elapsed_s=(pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
        )
        order = pl.struct(pl.coalesce("start_time", "end_time", "submit_time"), "source_line")
        df = df.with_columns(  # attempts from events carry no number: time order within the job
            attempt=pl.col("attempt").fill_null(order.rank("ordinal").over("job_id").cast(pl.Int32))
        )
        df, q = split_bad(df, attempt_error(ctx))
        quarantines.append(q)
        if df.height:
            tables["job_attempts"] = conform("job_attempts", df)
    node_events = [r for r in node_events if r["time"] is not None]
    if node_events:
        df, q = split_bad(typed_frame("node_events", node_events), implausible("time", ctx))
        quarantines.append(q)
        if df.height:
            tables["node_events"] = df
    q = pl.concat(quarantines)
    n_ok = tables["job_attempts"].height if "job_attempts" in tables else 0
    return ParseResult(tables, q, n_ok + q.height)


FORMAT = FormatSpec.declare(
    globals(),
    name="k8s",
    primary="job_attempts",
    description=(
        "Kubernetes pods / events / nodes / PyTorchJob / JobSet (JSON or YAML), "
        "training-operator log"
    ),
)
