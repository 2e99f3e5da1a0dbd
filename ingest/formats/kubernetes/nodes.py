"""Node objects and node Events to ``node_events``: Ready transitions, cordons, reboots."""

from ingest.base import ParseContext

from .common import NODE_EVENT_REASONS
from .common import BadObject
from .common import dig
from .common import metadata
from .common import timestamp


def node_rows(node: dict, ctx: ParseContext, index: int) -> list[dict]:
    """A Node's Ready state at its last transition (else, said in the reason, at its last
    heartbeat: the condition held then) and its cordon taint. A Node that yields nothing is
    quarantined by the caller: its Ready state cannot be placed in time."""
    _, name, _ = metadata(node)
    rows = []
    for c in dig(node, "status", "conditions") or []:
        if not (isinstance(c, dict) and c.get("type") == "Ready"):
            continue
        event = "ready" if str(c.get("status")) == "True" else "not_ready"
        why = c.get("reason") or c.get("message")
        why = why if isinstance(why, str) else f"Ready={c.get('status')}"
        if timestamp(c.get("lastTransitionTime")):
            rows.append(
                node_event(ctx, index, timestamp(c["lastTransitionTime"]), name, event, why)
            )
        elif timestamp(c.get("lastHeartbeatTime")):
            rows.append(
                node_event(
                    ctx,
                    index,
                    timestamp(c["lastHeartbeatTime"]),
                    name,
                    event,
                    f"{why} (no lastTransitionTime: time of the last heartbeat)",
                )
            )
    for t in dig(node, "spec", "taints") or []:
        if (
            isinstance(t, dict)
            and t.get("key") == "node.kubernetes.io/unschedulable"
            and timestamp(t.get("timeAdded"))
        ):
            rows.append(
                node_event(ctx, index, timestamp(t["timeAdded"]), name, "drain", "cordoned")
            )
    if not rows:
        ready = [
            c
            for c in dig(node, "status", "conditions") or []
            if isinstance(c, dict) and c.get("type") == "Ready"
        ]
        if not ready:
            raise BadObject(f"Node {name} has no Ready condition")
        raise BadObject(f"Node {name} Ready={ready[0].get('status')} has no lastTransitionTime or "
                        "lastHeartbeatTime: its state cannot be placed in time")  # fmt: skip
    return rows


def event_rows(ev: dict, ctx: ParseContext, index: int) -> list[dict]:
    obj = ev.get("involvedObject") or ev.get("regarding") or {}
    reason = ev.get("reason") if isinstance(ev.get("reason"), str) else None
    host = obj.get("name") if isinstance(obj, dict) else None
    if not isinstance(host, str) or obj.get("kind") != "Node" or reason not in NODE_EVENT_REASONS:
        return []
    times = {
        timestamp(ev.get("firstTimestamp")) or timestamp(ev.get("eventTime")),
        timestamp(ev.get("lastTimestamp")),
    }
    msg = ev.get("message") if isinstance(ev.get("message"), str) else reason
    if times == {None}:
        raise BadObject(
            f"{reason} event of node {host} without firstTimestamp, eventTime or lastTimestamp"
        )
    return [
        node_event(ctx, index, t, host, NODE_EVENT_REASONS[reason], msg)
        for t in sorted(times - {None})
    ]


def node_event(ctx, index, time, host, event, reason) -> dict:
    return {"time": time, "cluster": ctx.cluster, "host": host, "event": event,
            "reason": reason if isinstance(reason, str) else None, "source": "k8s",
            "source_file": ctx.path, "source_line": index}  # fmt: skip
