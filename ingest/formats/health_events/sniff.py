"""Recognising a health-event file and its layout from its first 64 KiB."""

from __future__ import annotations

import re

from ingest.base import CERTAIN

from .kubernetes import KUBELET_CONDITIONS
from .mapped import ALIASES
from .mapped import VALUES
from .records import norm

# NVSentinel: its store's document, or a HealthEvent's own fields
_NVSENTINEL = re.compile(
    rb'"healthevent"\s*:\s*\{|"check[Nn]ame"\s*:.*"is[Hh]ealthy"\s*:|"is[Hh]ealthy"\s*:.*"check[Nn]ame"\s*:',
    re.DOTALL,
)
# gpud's /v1/events answer: per component, its window and its events
_GPUD = re.compile(rb'"component"\s*:\s*"[^"]+"\s*,\s*"startTime"\s*:[^{]*"events"\s*:\s*\[')
_K8S_NODES = re.compile(rb'"kind"\s*:\s*"(?:NodeList|Node)"')
_K8S_EVENTS = re.compile(rb'"kind"\s*:\s*"(?:EventList|Event)"')
_INVOLVED = re.compile(rb'"involvedObject"\s*:\s*\{[^{}]*?"kind"\s*:\s*"(\w+)"')
_TYPES = re.compile(rb'"type"\s*:\s*"(\w+)"')
# a Node's "type"s that are not health conditions (its addresses)
_NOT_CONDITIONS = {b"InternalIP", b"ExternalIP", b"InternalDNS", b"ExternalDNS", b"Hostname"}
_KUBELET = {c.encode() for c in KUBELET_CONDITIONS}
_NODE_HEALTH_REASONS = re.compile(
    rb'"reason"\s*:\s*"(?:NodeHas(?:No)?DiskPressure|NodeHas(?:In)?[Ss]ufficient(?:Memory|PID))"'
)
_VOCABULARY = re.compile(
    rb'(?i)(?:^|[,:\[]\s*"?)(?:' + b"|".join(re.escape(v.encode()) for v in
    (*VALUES["start"], *VALUES["end"])).replace(b"_", b"[ _-]") + rb')"?\s*(?:[,\]}\r\n]|$)',
    re.MULTILINE,
)  # fmt: skip
_JSON_KEY = re.compile(rb'"([^"\\]{1,64})"\s*:')
SNIFF_LINES = 10


def layout(head: bytes) -> tuple[str | None, int]:
    """(layout name, confidence) of a file's head: ``nvsentinel``, ``gpud``, ``k8s`` (node
    conditions a health agent sets, or an event list about nodes' health only), ``events`` (a
    stream whose fields have their usual names and whose kinds are start / end words)."""
    if _NVSENTINEL.search(head):
        return "nvsentinel", CERTAIN
    if _GPUD.search(head):
        return "gpud", CERTAIN
    if _K8S_NODES.search(head):
        types = set(_TYPES.findall(head)) - _NOT_CONDITIONS
        # the k8s format reads the kubelet's Ready; a health agent's conditions are read here
        if types - _KUBELET:
            return "k8s", 92
        return None, 0
    if _K8S_EVENTS.search(head):
        kinds = set(_INVOLVED.findall(head))
        if kinds == {b"Node"} and _NODE_HEALTH_REASONS.search(head):
            return "k8s", 92
        return None, 0
    return ("events", 80) if _general(head) else (None, 0)


def _general(head: bytes) -> bool:
    """A header (or the first JSON records' keys) naming a host, a time and an event kind, one
    record holding one event (not a failure log's start and end columns), with start / end
    words among its values."""
    lines = head.split(b"\n")[:SNIFF_LINES]
    if head.lstrip()[:1] in (b"{", b"["):
        names = {norm(k.decode("utf-8", "replace")) for k in _JSON_KEY.findall(b"\n".join(lines))}
    else:
        names = set()
        for line in lines:
            fields = [norm(f) for f in line.decode("utf-8", "replace").split(",")]
            if len(fields) >= 3:
                names = set(fields)
                break
    has = {c: bool(names & set(ALIASES[c])) for c in ("host", "time", "kind")}
    one_record_span = {"starttime", "endtime"} <= names
    return all(has.values()) and not one_record_span and bool(_VOCABULARY.search(head))
