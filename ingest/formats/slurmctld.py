"""``slurmctld.log`` / ``slurmd.log`` lines to ``node_events``.

Lines look like ``[2023-08-28T16:55:46.905] [error: |sched: |...]message``; the timestamp has
no zone unless Slurm's RFC 5424 format added one (``...905+02:00``), so zone-less times are read
in ``ctx.tz``. Record kinds (one record per line and per host its node field names; a hostlist
``gpu[01-04]`` is four records):

- ``update_node: node X state set to DOWN|DRAIN|DRAINING|DRAINED|IDLE|RESUME`` -> down / drain /
  resume; ``drain_nodes: ...``, ``set node X to DOWN`` alike.
- ``Nodes X not responding`` -> not_responding; ``..., setting DOWN`` -> down;
  ``Node X now responding`` / ``node X returned to service`` -> resume;
  ``Node X rebooted`` / ``unexpectedly rebooted`` -> reboot.
- ``Killing JobId=J on failed node X`` (also ``job_id J``) -> job_killed with ``job_id``;
  ``requeue job JobId=J due to failure of node X`` -> job_requeue. Array jobs print
  ``JobId=A_T(N)``: ``job_id`` is ``A_T`` as sacct names it.

Not records (skipped): every other line, e.g. ``POWER:`` chatter, ``sched: Allocate``,
``Requeuing JobId=`` (the requeue line above already names the node), and
``update_node: ... reason set to: R`` lines, whose text becomes the ``reason`` of the host's
following events. A would-be record whose timestamp or hostlist cannot be read, or whose time lies
outside ``ctx``'s plausible window, is quarantined. A line repeating an earlier record line of
the same chunk exactly is the same record: stored once and counted as a duplicate
(``ParseResult.duplicates``; a repeat of a rejected line is quarantined again; dropped here, since a
repeat placed after a ``reason set to`` line would take another reason). Repeats in different chunks
of a file larger than the runner's chunk are left to the warehouse's dedupe.
"""

from __future__ import annotations

import re

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import drop_repeats
from ingest.base import implausible_time
from ingest.base import numbered_lines
from ingest.base import settle_repeats
from ingest.hostlist import expand_column
from ingest.times import local_to_utc
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

_TS = r"^\s*\[(?P<ts>[^\]]*)\]\s*"
_PREFIX = (
    r"(?:(?:error|debug\d?|verbose|info|warning|fatal|sched|update_node|drain_nodes|_?\w+):\s+)*"
)
_NODE = r"(?P<nodes>\S+)"  # a name or hostlist (``gpu[01-04],cpu7``)
_JOB = r"(?:JobId=|job_id |job )(?P<job>\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?)(?:\(\d+\))?"

# (event, message regex) in priority order; the first match wins.
PATTERNS: list[tuple[str, str]] = [
    ("job_requeue", rf"requeue job {_JOB} due to failure of node {_NODE}"),
    ("job_killed", rf"Killing {_JOB} on failed node {_NODE}"),
    ("down", rf"Nodes? {_NODE} not responding, setting DOWN"),
    ("not_responding", rf"Nodes? {_NODE} not responding"),
    ("resume", rf"Node {_NODE} now responding"),
    ("resume", rf"[Nn]ode {_NODE} returned to service"),
    ("reboot", rf"Node {_NODE} (?:unexpectedly )?rebooted"),
    ("down", rf"node {_NODE} state set to DOWN"),
    ("drain", rf"node {_NODE} state set to DRAIN(?:ING|ED)?"),
    ("resume", rf"node {_NODE} state set to (?:IDLE|RESUME)"),
    ("down", rf"set node {_NODE} to DOWN"),
    ("drain", rf"set node {_NODE} to DRAIN"),
]
_REASON = rf"node {_NODE} reason set to:\s*(?P<reason>.*)$"


def _extract(msg: pl.Expr) -> pl.Expr:
    """Struct (event, nodes, job) of the first pattern matching each message, else nulls."""
    event = pl.lit(None, pl.Utf8)
    nodes = pl.lit(None, pl.Utf8)
    job = pl.lit(None, pl.Utf8)
    for name, pat in reversed(PATTERNS):  # build so the first pattern has priority
        g = msg.str.extract_groups(pat)
        hit = msg.str.contains(pat)
        event = pl.when(hit).then(pl.lit(name)).otherwise(event)
        nodes = pl.when(hit).then(g.struct.field("nodes")).otherwise(nodes)
        job = (
            pl.when(hit)
            .then(g.struct.field("job") if "(?P<job>" in pat else pl.lit(None, pl.Utf8))
            .otherwise(job)
        )
    return pl.struct(event=event, nodes=nodes, job=job)


def _utc(ts: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr]:
    """``2023-08-28T16:55:46.905`` in ``tz``, or with an explicit offset, to naive UTC, and the
    DST reason of a local time the log's order (every line of the file) does not place."""
    has_off = ts.str.contains(r"(?:Z|[+-]\d\d:?\d\d)$")
    with_off = (
        ts.str.replace(r"Z$", "+00:00")
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
    )
    plain, why = local_to_utc(ts.str.replace(" ", "T"), tz, order=[])
    return pl.when(has_off).then(with_off).otherwise(plain), pl.when(~has_off).then(why)


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    df = _read_lines(data, ctx)
    # An exact repeat of a record line (a log shipped twice, a collector's retry) is the same
    # record: stored once, counted as a duplicate.
    rec, repeats = drop_repeats(
        df.filter(pl.col("event").is_not_null()), ["raw"], line="source_line"
    )
    rec = rec.with_columns(_time_err=_time_error(ctx))
    bad_time = rec.filter(pl.col("_time_err").is_not_null())
    rec, bad_host = _per_host(rec.filter(pl.col("_time_err").is_null()))
    rec = _with_reasons(rec, _reason_marks(df), ctx)
    quarantine = pl.concat(
        [
            quarantine_frame(bad_time["source_line"], bad_time["raw"], bad_time["_time_err"]),
            quarantine_frame(
                bad_host["source_line"],
                bad_host["raw"],
                bad_host.select(pl.coalesce("_err", pl.lit("no host in node field"))).to_series(),
            ),
        ]
    )
    events = rec.select(list(TABLES["node_events"].columns))  # the working columns left out
    tables = {"node_events": conform("node_events", events)} if rec.height else {}
    dups, quarantine = settle_repeats(repeats, rec["source_line"], quarantine)
    return ParseResult(tables, quarantine, rec.height + quarantine.height + dups, duplicates=dups)


def _read_lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """Every line with its UTC time, message, the event it records and the reason it sets."""
    df = numbered_lines(data, ctx).rename({"line": "source_line"})
    ts = pl.col("raw").str.extract(_TS)
    msg = (
        pl.when(ts.is_not_null()).then(pl.col("raw").str.replace(_TS, "")).otherwise(pl.col("raw"))
    )
    df = df.with_columns(ts=ts, msg=msg.str.replace(r"^" + _PREFIX, ""))
    df = df.with_columns(m=_extract(pl.col("msg")), r=pl.col("msg").str.extract_groups(_REASON))
    df = df.with_columns(
        event=pl.col("m").struct.field("event"),
        nodelist=pl.col("m").struct.field("nodes").str.strip_chars_end(",.;:"),
        job_id=pl.col("m").struct.field("job"),
        reason_host=pl.col("r").struct.field("nodes"),
        reason_text=pl.col("r").struct.field("reason").str.strip_chars(),
    ).drop("m", "r")
    time, dst = _utc(pl.col("ts"), ctx.tz)
    return df.with_columns(time=time, _dst=dst)


def _time_error(ctx: ParseContext) -> pl.Expr:
    """Why a record's time cannot be stored (unreadable, in a DST gap or fold, implausible)."""
    return (
        pl.when(pl.col("time").is_null())
        .then(
            pl.coalesce(
                "_dst", pl.format("unreadable timestamp '{}'", pl.col("ts").fill_null("(none)"))
            )
        )
        .otherwise(implausible_time(pl.col("time"), ctx))
    )


def _per_host(rec: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One record per host its node field names; the records naming no readable host."""
    hosts, err = expand_column(rec["nodelist"])
    rec = rec.with_columns(host=hosts, _err=err)
    named = pl.col("_err").is_null() & (pl.col("host").list.len() > 0)
    return rec.filter(named).explode("host"), rec.filter(~named)


def _reason_marks(df: pl.DataFrame) -> pl.DataFrame:
    """The ``reason set to`` lines as (line, host, reason): carried to the host's later events."""
    return df.filter(pl.col("reason_host").is_not_null()).select(
        "source_line", host=pl.col("reason_host"), last_reason=pl.col("reason_text")
    )


def _with_reasons(rec: pl.DataFrame, reasons: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Records with ``reason`` (down, drain: the host's last reason set, else the message)."""
    if rec.height and reasons.height:
        # a reason holds until the host resumes: a resume resets it, so a maintenance reason
        # never labels a later crash of the same node
        resets = rec.filter(pl.col("event") == "resume").select(
            "source_line", "host", last_reason=pl.lit(None, pl.Utf8)
        )
        marks = pl.concat([reasons, resets]).sort("source_line")
        rec = rec.sort("source_line").join_asof(
            marks,
            on="source_line",
            by="host",
            strategy="backward",
            check_sortedness=False,  # both sides are sorted on source_line just above
        )
    else:
        rec = rec.with_columns(last_reason=pl.lit(None, pl.Utf8))
    return rec.with_columns(
        reason=pl.when(pl.col("event").is_in(["down", "drain"]))
        .then(pl.coalesce(pl.col("last_reason"), pl.col("msg")))
        .otherwise(pl.col("msg")),
        cluster=pl.lit(ctx.cluster),
        source=pl.lit("slurmctld"),
        source_file=pl.lit(ctx.path),
    )


_HEAD = re.compile(
    rb"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\] ", re.MULTILINE
)


def detect(head: bytes, name: str) -> int:
    hits = len(_HEAD.findall(head[:65536]))
    if not hits:
        return 0
    slurmish = re.search(rb"JobId=|update_node|not responding|sched: |_job_complete|slurm", head)
    if slurmish:
        return 85
    return 40 if "slurm" in name.lower() else 20


FORMAT = FormatSpec.declare(
    globals(),
    primary="node_events",
    description="slurmctld.log / slurmd.log node state changes, job kills and requeues",
    line_oriented=True,
)
