"""The general layout: a stream whose fields are found by their usual names (``ALIASES``;
case, spaces and punctuation ignored) or named by ``--map canonical=theirs`` (a dotted path into
nested JSON: ``cause=fault_type.Level``), and whose kind field's values mean start or end
(``VALUES``, or ``--map start=fault_start,end=fault_end``; several values with ``|``). Fault
traces, ticket state-change exports and a site's own event logs are read here."""

from __future__ import annotations

import orjson
import polars as pl

from ingest.base import ParseContext

from .finish import joined
from .records import HEADER_SEARCH
from .records import Records
from .records import Unreadable
from .records import norm

ALIASES = {
    "system": ("system", "cluster", "systemname", "site"),
    "host": (
        "host", "node", "hostname", "nodename", "nodeid", "server", "serverid", "machine",
        "nodenum", "instance", "cmdbci", "configurationitem", "ci", "asset",
    ),
    "time": (
        "time", "timestamp", "eventtime", "ts", "datetime", "date", "occurred", "occurredat",
        "createdat", "created", "sysupdatedon", "updatedon", "updated", "changed",
    ),
    "kind": ("kind", "eventtype", "eventkind", "event", "transition", "status", "state", "type"),
    # what is failing, when the source names it once for its start and its end (a ticket)
    "fault": (
        "fault", "faultid", "ticket", "ticketid", "incident", "incidentid", "number", "case",
        "caseid", "issue", "issuekey", "alertid",
    ),
    "cause": ("cause", "rootcause", "causeclass", "category", "level", "faultlevel"),
    "component": ("component", "componentclass", "class", "faultclass", "part", "subcategory"),
    "sub_cause": (
        "subcause", "description", "desc", "detail", "problem", "failure", "shortdescription",
    ),
    "code": ("code", "errorcode", "xid"),
    "severity": ("severity", "priority", "urgency"),
    "action": ("recommendedaction", "suggestedaction", "action"),
    "message": ("message", "msg", "text", "summary", "note", "comment"),
}  # fmt: skip
# the kind field's values (compared by ``value_key``) and what they mean
VALUES = {
    "start": (
        "start", "started", "begin", "fault_start", "failure_start", "open", "opened", "new",
        "reopened", "down", "fail", "failed", "failure", "fault", "unhealthy", "problem",
        "raised", "firing", "triggered", "in_progress", "on_hold", "assigned", "active",
    ),
    "end": (
        "end", "ended", "stop", "stopped", "fault_end", "failure_end", "close", "closed",
        "resolved", "fixed", "done", "up", "recovered", "repaired", "restored", "cleared",
        "resolution", "canceled", "cancelled",
    ),
    "healthy": ("healthy", "ok"),
    "info": ("info", "information", "warning", "notice", "update", "updated", "note"),
}  # fmt: skip
MAP_KEYS = (*ALIASES, *VALUES)


def value_key(expr: pl.Expr) -> pl.Expr:
    """A kind value compared without case or punctuation: ``In Progress`` -> ``in_progress``."""
    return expr.str.to_lowercase().str.replace_all(r"[^a-z0-9]+", "_").str.strip_chars("_")


def _value_key(text: str) -> str:
    return pl.select(value_key(pl.lit(text))).item()


def _names(records: Records) -> dict[str, str]:
    """normalised name -> the name as the file spells it: a CSV header's, or the top-level
    keys of the first JSON records."""
    if not records.json:
        return {n: n for n in records.columns}
    out: dict[str, str] = {}
    good = records.frame.filter(pl.col("_shape").is_null()).head(HEADER_SEARCH)["raw"]
    for raw in good:
        obj = orjson.loads(raw)
        for k in reversed(list(obj)):
            out.setdefault(norm(k), k)
    return out


def fields(records: Records, column_map: dict[str, str]) -> dict[str, str]:
    """canonical -> the field (a JSON path or a header name) that holds it in this file."""
    unknown = [k for k in column_map if k not in MAP_KEYS]
    if unknown:
        raise Unreadable(
            f"--map names {unknown[0]!r}, not a health-event field; known: {', '.join(MAP_KEYS)}"
        )
    names = _names(records)
    out = {}
    for canon, aliases in ALIASES.items():
        if canon in column_map:
            out[canon] = column_map[canon]
        else:
            found = next((names[a] for a in aliases if a in names), None)
            if found is not None:
                out[canon] = found
    return out


def vocabulary(column_map: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """What each kind's values are: ``--map start=a|b`` replaces the usual ones of that kind
    (and, if any kind is mapped, the unmapped kinds mean nothing)."""
    given = {k: column_map[k] for k in VALUES if k in column_map}
    if not given:
        return VALUES
    return {k: tuple(_value_key(v) for v in given.get(k, "").split("|") if v) for k in VALUES}


def read(records: Records, ctx: ParseContext) -> pl.DataFrame:
    """The records as the canonical columns (``finish.CANON``), with ``_error`` where the kind
    field's value means none of start, end, healthy, info."""
    where = fields(records, ctx.column_map)
    vocab = vocabulary(ctx.column_map)
    cols = {c: records.get(path) for c, path in where.items()}
    kind_text = cols.get("kind", pl.lit(None, pl.Utf8))
    k = value_key(kind_text)
    kind = pl.lit(None, pl.Utf8)
    for name in reversed(list(vocab)):
        kind = pl.when(k.is_in(list(vocab[name]))).then(pl.lit(name)).otherwise(kind)
    meaning = "; ".join(f"{n}: {'|'.join(v)}" for n, v in vocab.items() if v)
    part = {c: cols.get(c, pl.lit(None, pl.Utf8)) for c in ("cause", "component", "sub_cause")}
    frame = records.frame.with_columns(
        **{c: e for c, e in cols.items() if c not in ("kind", "fault")},
        kind=kind,
        fault=pl.coalesce(
            cols.get("fault", pl.lit(None, pl.Utf8)),
            joined(part["cause"], part["component"], part["sub_cause"]),
        ),
        _error=pl.when(kind_text.is_not_null() & kind.is_null()).then(
            pl.format(
                "event kind '{}' means none of start, end, healthy, info ({}); "
                "name its values with --map start=...,end=...",
                kind_text,
                pl.lit(meaning),
            )
        ),
    )
    return frame
