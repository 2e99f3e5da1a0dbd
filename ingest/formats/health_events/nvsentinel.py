"""NVIDIA NVSentinel ``HealthEvent``s: documents of its store as exported (MongoDB
``{_id, createdAt, healthevent: {...}, healtheventstatus: {...}}`` with BSON's lower-case field
names, or the PostgreSQL store's camel-case document), and bare ``HealthEvent`` JSON (the
protobuf's camel-case names). Read in Arrow by path, both spellings.

A fatal unhealthy event starts a fault (``isFatal``: NVSentinel sets the node condition and
cordons), a healthy one (``isHealthy``) ends it, a non-fatal unhealthy one is information (a
Kubernetes event, not a condition). The fault is the check and the entities it names
(``GpuXidError / gpu:0``); a recovery that names no entity ends every fault of its check."""

from __future__ import annotations

import polars as pl

from .finish import category
from .finish import joined
from .records import Records

# HealthEvent.recommendedAction (data-models/protobufs/health_event.proto)
ACTIONS = {
    "0": "NONE",
    "2": "COMPONENT_RESET",
    "5": "CONTACT_SUPPORT",
    "6": "RUN_FIELDDIAG",
    "15": "RESTART_VM",
    "24": "RESTART_BM",
    "25": "REPLACE_VM",
    "26": "RUN_DCGMEUD",
    "39": "RESTART_APP",
    "99": "UNKNOWN",
}
# a health event's fields: stored (lower case, under healthevent), PostgreSQL's camel case
# under healthevent, or a bare event's
_PREFIXES = ("healthevent.", "")


def _field(records: Records, *names: str) -> pl.Expr:
    return records.get(*(p + n for n in names for p in _PREFIXES))


def read(records: Records) -> pl.DataFrame:
    get = lambda *names: _field(records, *names)  # noqa: E731
    healthy = get("ishealthy", "isHealthy") == "true"
    fatal = get("isfatal", "isFatal") == "true"
    check = get("checkname", "checkName")
    # entities as "type:value", sorted and joined: the same set names the same fault
    entities = (
        get("entitiesimpacted", "entitiesImpacted")
        .str.to_lowercase()
        .str.extract_all(r"\{[^{}]*\}")
        .list.eval(
            pl.format(
                "{}:{}",
                pl.element().str.extract(r'"entitytype"\s*:\s*"([^"]*)"'),
                pl.element().str.extract(r'"entityvalue"\s*:\s*"([^"]*)"'),
            )
        )
        .list.sort()
        .list.join(",")
        .replace("", None)
    )
    seconds = get("generatedtimestamp.seconds", "generatedTimestamp.seconds").cast(
        pl.Float64, strict=False
    )
    nanos = get("generatedtimestamp.nanos", "generatedTimestamp.nanos").cast(
        pl.Float64, strict=False
    )
    action = get("recommendedaction", "recommendedAction")
    generated = get("generatedtimestamp", "generatedTimestamp")
    return records.frame.with_columns(
        host=get("nodename", "nodeName"),
        time_s=seconds + nanos.fill_null(0) / 1e9,
        # the protobuf's JSON form writes the timestamp as text; the store's own insert time
        # (createdAt, extended JSON or text) when the event carries none
        time=pl.coalesce(
            pl.when(~generated.str.starts_with("{")).then(generated),
            records.get("createdAt.$date.$numberLong", "createdAt.$date", "createdAt"),
        ),
        kind=pl.when(healthy)
        .then(pl.lit("healthy"))
        .when(fatal)
        .then(pl.lit("start"))
        .otherwise(pl.lit("info")),
        fault=joined(check, entities),
        cause=category(check),
        sub_cause=entities,
        component=get("componentclass", "componentClass"),
        code=get("errorcode", "errorCode").str.replace_all(r'[\[\]"\s]', "").replace("", None),
        severity=pl.when(healthy)
        .then(pl.lit("info"))
        .when(fatal)
        .then(pl.lit("fatal"))
        .otherwise(pl.lit("warning")),
        action=action.replace(ACTIONS),
        message=get("message"),
    )
