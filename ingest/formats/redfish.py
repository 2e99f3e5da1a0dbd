"""Redfish ``LogEntry`` JSON (a ``LogEntryCollection`` page, a single ``LogEntry``, or a JSON array
of entries) to ``hw_events``. One record = one entry.

- Paging: a file holds one page; its ``@odata.nextLink`` is not followed (the collector saves
  each page as its own file, and the parser does no I/O).
- ``Created`` (ISO-8601, ``Z`` or an offset) -> UTC; without an offset it is read in ``ctx.tz``.
  An entry without a readable ``Created``, or dated outside the plausible window, is
  quarantined, as is a collection member that is only an ``@odata.id`` link (fetch with
  ``$expand=.``). An entry that repeats an earlier one of the file exactly (same JSON) is an
  ordinary row here: the warehouse stores it once and counts the repeat as a duplicate
  (``rows_duplicate``).
- ``Severity`` OK / Warning / Critical -> info / warning / critical (missing: from the message
  text, as for IPMI); an ``EntryCode`` of ``Deassert`` is a recovery -> info.
- ``EntryType`` SEL -> ``event_type`` ``sel`` (the same BMC log IPMI reads), else ``redfish``.
- ``SensorType`` -> ``component_class`` through the table IPMI uses (``sel_sensor_classes``);
  where that says nothing, the message, ``MessageId`` and ``OriginOfCondition`` path name the
  device (``.../Memory/DIMM1``, ``GPU``). ``code`` is ``MessageId`` (else ``EntryCode``),
  ``action`` the ``EntryCode``, ``component_id`` the ``SensorNumber`` as ``0x..`` (the form
  ``ipmitool`` prints), else the last segment of ``OriginOfCondition``. ``Oem`` blocks are ignored.
- Host: ``ctx.host``, else the file name up to its first dot, else (in-memory data) the system /
  chassis id in the resource's ``@odata.id``.
"""

from __future__ import annotations

import polars as pl

from ingest import sel_sensor_classes as sc
from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import split_rejected
from ingest.base import stand_ins
from ingest.base import whole_file_quarantine
from ingest.bmc_common import ODATA_TYPE
from ingest.bmc_common import event_rows
from ingest.bmc_common import host_from_path
from ingest.bmc_common import iso_to_utc
from ingest.bmc_common import load
from ingest.bmc_common import odata_type
from ingest.bmc_common import raw_json
from ingest.bmc_common import resource_host

SEVERITY = {"ok": "info", "warning": "warning", "critical": "critical"}


def members(doc: object) -> tuple[list, str | None]:
    """The entries of a collection page, a single entry, or an array; or (None, reason)."""
    if isinstance(doc, list):
        return doc, None
    if isinstance(doc, dict) and isinstance(doc.get("Members"), list):
        return doc["Members"], None
    if isinstance(doc, dict) and odata_type(doc) == "LogEntry":
        return [doc], None
    return None, "not a Redfish LogEntry collection, LogEntry or array of entries"


def _str(v) -> str | None:
    if v is None or isinstance(v, (dict, list)):
        return None
    return str(v)


def _sensor_number(v) -> str | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return f"0x{v:02x}"
    return _str(v)


def _origin(entry: dict) -> str | None:
    links = entry.get("Links")
    origin = links.get("OriginOfCondition") if isinstance(links, dict) else None
    oid = origin.get("@odata.id") if isinstance(origin, dict) else None
    return oid if isinstance(oid, str) else None


def _rows(items: list) -> tuple[pl.DataFrame, list[tuple[int, str, str]]]:
    """Per-entry fields (JSON objects have no columnar form: one pass builds the columns)."""
    cols = {
        k: []
        for k in (
            "rec",
            "raw",
            "entry_type",
            "severity",
            "created",
            "message_id",
            "message",
            "sensor_type",
            "sensor_number",
            "entry_code",
            "origin",
            "name",
        )
    }
    bad: list[tuple[int, str, str]] = []
    for i, e in enumerate(items, start=1):
        if not isinstance(e, dict):
            bad.append((i, raw_json(e), "entry is not a JSON object"))
            continue
        if set(e) <= {"@odata.id", "@odata.type"}:
            bad.append(
                (i, raw_json(e), "collection member is only a link; fetch the page with $expand=.")
            )
            continue
        cols["rec"].append(i)
        cols["raw"].append(raw_json(e))
        cols["entry_type"].append(_str(e.get("EntryType")))
        cols["severity"].append(_str(e.get("Severity")))
        cols["created"].append(_str(e.get("Created")))
        cols["message_id"].append(_str(e.get("MessageId")))
        cols["message"].append(_str(e.get("Message")))
        cols["sensor_type"].append(_str(e.get("SensorType")))
        cols["sensor_number"].append(_sensor_number(e.get("SensorNumber")))
        cols["entry_code"].append(_str(e.get("EntryCode")))
        cols["origin"].append(_origin(e))
        cols["name"].append(_str(e.get("Name")))
    schema = {k: (pl.Int64 if k == "rec" else pl.Utf8) for k in cols}
    return pl.DataFrame(cols, schema=schema), bad


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    doc, err = load(data)
    items = None
    if err is None:
        items, err = members(doc)
    if err is not None:
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    df, bad = _rows(items)
    time, dst = iso_to_utc(pl.col("created"), ctx.tz)
    df = df.with_columns(time=time, dst=dst)
    df = df.with_columns(
        error=pl.when(pl.col("created").is_null())
        .then(pl.lit("entry has no Created time"))
        .when(pl.col("dst").is_not_null())
        .then(pl.format("Created: {}", "dst"))
        .when(pl.col("time").is_null())
        .then(pl.format("no readable Created time ('{}')", "created"))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    df, q = split_rejected(df, line="rec", also=bad)
    table = _events(df, ctx, resource_host(ctx, doc)) if df.height else None
    return ParseResult(
        {"hw_events": table} if table is not None else {},
        q,
        df.height + q.height,
        stand_ins=stand_ins(ctx, None, table is not None and host_from_path(ctx.path) is not None),
    )


def _events(df: pl.DataFrame, ctx: ParseContext, host: str | None) -> pl.DataFrame:
    hint = pl.concat_str(
        [pl.col(c).fill_null("") for c in ("message", "message_id", "origin", "name")],
        separator=" ",
    )
    df = df.with_columns(
        hint=hint,
        text=pl.coalesce("message", "entry_code"),
        recovered=pl.col("entry_code")
        .str.to_lowercase()
        .str.starts_with("deassert")
        .fill_null(False),
    )
    df = sc.with_class_and_severity(df, "sensor_type", "hint", "text", "recovered")
    given = (
        pl.col("severity")
        .str.to_lowercase()
        .replace_strict(SEVERITY, default=None, return_dtype=pl.Utf8)
    )
    origin_id = pl.col("origin").str.split("/").list.last().replace("", None)
    return event_rows(
        df,
        ctx,
        "rec",
        host,
        component_class=pl.col("component_class"),
        component_id=pl.coalesce("sensor_number", origin_id),
        event_type=pl.when(pl.col("entry_type").str.to_uppercase() == "SEL")
        .then(pl.lit("sel"))
        .otherwise(pl.lit("redfish")),
        code=pl.coalesce("message_id", "entry_code"),
        severity=pl.when(pl.col("recovered"))
        .then(pl.lit("info"))
        .otherwise(pl.coalesce(given, "text_severity")),
        action=pl.col("entry_code"),
        message=pl.coalesce("message", "name"),
        source=pl.lit("redfish"),
    )


def detect(head: bytes, name: str) -> int:
    types = set(ODATA_TYPE.findall(head.decode("utf-8", errors="replace")))
    return CERTAIN if types & {"LogEntry", "LogEntryCollection"} else 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="hw_events",
    description="Redfish LogEntry collection page / LogEntry JSON",
)
