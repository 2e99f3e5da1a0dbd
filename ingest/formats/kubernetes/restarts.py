"""Event lists: the failed attempts of training jobs, one per restart event, bounded by their
pods' termination, start and scheduling events."""

import json
import re
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime

from ingest.base import ParseContext

from .common import JOB_KINDS
from .common import exit_signal
from .common import timestamp

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


@dataclass
class _Timeline:
    """What an Event list says about the pods and restarts of training jobs."""

    placed: dict[tuple[str, str], list[tuple[datetime, str]]] = field(default_factory=dict)
    started: dict[tuple[str, str], list[datetime]] = field(default_factory=dict)
    ended: list[tuple[datetime, str, str, str, int | None]] = field(default_factory=list)
    restarts: list[tuple[datetime, str, str, int, str]] = field(default_factory=list)

    def read(self, index: int, ev: dict, t: datetime) -> None:
        """Files one timed event: a pod placed on a node ((ns, pod) -> [(t, host)]), a container
        started ((ns, pod) -> [t]), a pod ended ((t, ns, pod, reason, exit code)) or a job
        restarted ((t, ns, job, object index, reason))."""
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        reason = ev.get("reason") if isinstance(ev.get("reason"), str) else None
        msg = ev.get("message") if isinstance(ev.get("message"), str) else ""
        ns = obj.get("namespace") if isinstance(obj.get("namespace"), str) else "default"
        named = isinstance(obj.get("name"), str)
        if reason == "Scheduled" and (m := _ASSIGNED.search(msg)):
            self.placed.setdefault((m["ns"], m["pod"]), []).append((t, m["host"]))
        elif reason == "Started" and obj.get("kind") == "Pod" and named:
            # a repeated event (count > 1) shows its first and its latest occurrence
            last = timestamp(ev.get("lastTimestamp"))
            self.started.setdefault((ns, obj["name"]), []).extend({t, last or t})
        elif reason == "ExitedWithCode" and (m := _EXITED.search(msg)):
            self.ended.append((t, m["ns"], m["pod"], reason, int(m["code"])))
        elif obj.get("kind") == "Pod" and reason in POD_END_REASONS and named:
            self.ended.append((t, ns, obj["name"], reason, None))
        elif obj.get("kind") in JOB_KINDS and reason in RESTART_REASONS and named:
            self.restarts.append((t, ns, obj["name"], index, reason))


def _timeline(events: list[tuple[int, dict]], bad: list) -> _Timeline:
    """The timed events read into a ``_Timeline``; a restart event without a time is appended
    to ``bad``."""
    line = _Timeline()
    for index, ev in events:
        obj = ev.get("involvedObject") or ev.get("regarding") or {}
        reason = ev.get("reason") if isinstance(ev.get("reason"), str) else None
        t = (
            timestamp(ev.get("firstTimestamp"))
            or timestamp(ev.get("eventTime"))
            or timestamp(ev.get("lastTimestamp"))
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
        line.read(index, ev, t)
    return line


def restart_runs(events: list[tuple[int, dict]], ctx: ParseContext, bad: list) -> list[dict]:
    """Failed attempts of training jobs from their restart events (see the module docstring);
    a restart event without a time, or whose attempt's start is not in the file, is appended
    to ``bad``."""
    line = _timeline(events, bad)
    events_by_index = dict(events)
    rows = []
    prev_end: dict[tuple[str, str], datetime] = {}  # (ns, job) -> end of its previous attempt
    for r_time, ns, job, index, r_reason in sorted(line.restarts):
        member = re.compile(rf"^{re.escape(job)}-[a-z]+-\d+$")
        end, state, reason, code = _attempt_end(line, ns, member, r_time, r_reason)
        hosts = set()
        for (pns, pod), where in line.placed.items():
            if pns == ns and member.match(pod):
                seen = [h for t, h in sorted(where) if t <= end]
                if seen:
                    hosts.add(seen[-1])
        after = prev_end.get((ns, job))
        prev_end[(ns, job)] = end
        start = _attempt_start(ns, member, after, end, line.started, line.placed)
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
                "signal": exit_signal({}, code),
                "nodes": sorted(hosts),
                "n_nodes": len(hosts) or None,
                "source": "k8s-events",
                "source_file": ctx.path,
                "source_line": index,
            }
        )
    return rows


def _attempt_end(
    line: _Timeline, ns: str, member: re.Pattern, r_time: datetime, r_reason: str
) -> tuple[datetime, str, str, int | None]:
    """(end, state, reason, exit code) of the attempt a restart at ``r_time`` ends: the job's
    latest pod termination within ``END_WINDOW_S`` before it, else the restart itself."""
    before = [
        e
        for e in line.ended
        if e[1] == ns
        and member.match(e[2])
        and 0 <= (r_time - e[0]).total_seconds() <= END_WINDOW_S
    ]
    if not before:
        return r_time, "FAILED", r_reason, None
    last = max(before, key=lambda e: (e[0], e[3] != "ExitedWithCode"))
    codes = [e[4] for e in before if e[4] is not None]
    return last[0], POD_END_REASONS[last[3]], last[3], codes[-1] if codes else None


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
