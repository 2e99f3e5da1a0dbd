"""What the BMC formats (ipmitool text, Redfish JSON) share: the host a per-host dump's file name
gives, reading Redfish JSON (decoding, ``@odata.type``, resource ids, ISO times), and the
``hw_events`` rows their event logs make."""

from __future__ import annotations

import json
import re
from pathlib import PurePath

import polars as pl

from ingest.base import ParseContext
from ingest.base import event_ids
from ingest.times import wall_clock
from warehouse.schemas import conform


def host_from_path(path: str) -> str | None:
    """``/x/gpu-node-001.sel.txt`` -> ``gpu-node-001``; None for in-memory data."""
    if not path or path.startswith("<"):
        return None
    name = PurePath(path).name.split(".")[0]
    return name or None


ODATA_TYPE = re.compile(r'"@odata\.type"\s*:\s*"#([A-Za-z]+)\.')
_RESOURCE_ID = re.compile(r"/redfish/v1/(?:Systems|Chassis|Managers)/([^/#?]+)")


def load(data: bytes) -> tuple[object, str | None]:
    """The decoded JSON document, or (None, reason)."""
    try:
        return json.loads(data.decode("utf-8-sig", errors="replace")), None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return (
            None,
            (
                f"not valid JSON: {exc.msg if hasattr(exc, 'msg') else exc} (line "
                f"{getattr(exc, 'lineno', '?')})"
            ),
        )


def odata_type(obj: object) -> str:
    """``#LogEntry.v1_14_0.LogEntry`` -> ``LogEntry``; '' when absent."""
    t = obj.get("@odata.type", "") if isinstance(obj, dict) else ""
    return t.lstrip("#").split(".")[0] if isinstance(t, str) else ""


def resource_host(ctx: ParseContext, doc: object) -> str | None:
    """ctx.host, else the file name, else the system/chassis id of the resource."""
    host = ctx.host or host_from_path(ctx.path)
    if host:
        return host
    oid = doc.get("@odata.id", "") if isinstance(doc, dict) else ""
    m = _RESOURCE_ID.search(oid if isinstance(oid, str) else "")
    return m.group(1) if m else None


def iso_to_utc(expr: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr]:
    """ISO-8601 with ``Z`` / offset -> naive UTC; zone-less -> read in ``tz``, where a time in a
    DST change (no order among a resource's members to decide it) is null with the reason
    returned beside it (``ingest.times.wall_clock``)."""
    s = expr.str.strip_chars().str.replace(r"[zZ]$", "+00:00")
    has_zone = s.str.contains(r"[+-]\d{2}:?\d{2}$")
    aware = s.str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_zone="UTC", time_unit="us"
    ).dt.replace_time_zone(None)
    naive, why = wall_clock(
        s.str.replace("T", " ").str.to_datetime(
            "%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"
        ),
        tz,
    )
    return pl.when(has_zone).then(aware).otherwise(naive), pl.when(~has_zone).then(why)


def raw_json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, default=str)[:500]


def event_rows(
    df: pl.DataFrame, ctx: ParseContext, line: str, host: str | None, **columns: pl.Expr
) -> pl.DataFrame:
    """``hw_events`` rows of one host's BMC event log (one event per record): its ``time``,
    ``columns`` over ``df``, the file and record (``line``) as the source, and an event id over
    file, record and raw text, in record order."""
    out = df.select(
        time=pl.col("time"),
        cluster=pl.lit(ctx.cluster),
        host=pl.lit(host, pl.Utf8),
        **columns,
        count=pl.lit(1, pl.Int32),
        source_file=pl.lit(ctx.path),
        source_line=pl.col(line),
        _key=pl.format("{}\x1f{}\x1f{}", pl.lit(ctx.path), pl.col(line), pl.col("raw")),
    ).sort("source_line")
    out = out.with_columns(event_id=event_ids(out["_key"])).drop("_key")
    return conform("hw_events", out)
