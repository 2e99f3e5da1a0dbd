"""``sacctmgr --parsable2 show event`` (slurmdbd's node state history) to ``node_events``.

A record is one node state change. An event line is the node entering a state at ``TimeStart``
(``State``: ``DOWN`` -> down; ``DRAIN``/``FAIL`` -> drain, ``REBOOT...`` -> reboot; flags such as
``IDLE+DRAIN`` or ``DOWN*`` read by their tokens) with its ``Reason``, and, once ``TimeEnd`` is
known, the node leaving it: a ``resume`` row at ``TimeEnd``, unless another event of the same
node starts at that second in the same text (the state changed, e.g. DOWN to DRAIN: no resume).
An open event (``TimeEnd`` ``Unknown``) gives the start row only; the same event read again
after it ended gives the same start row (stored once) and its end. A hostlist in ``NodeName``
is one record per host.

The field order comes from the header line (``Cluster|NodeName|TimeStart|...``, what sacctmgr
prints without ``-n``); headerless text is read in ``EVENT_FIELDS``' order (the order
``sources.slurm`` asks for). ``Reason`` may contain the delimiter when it is the last field.
``--parsable``'s trailing ``|`` is accepted. Times without a zone are read in ``ctx.tz``. The
cluster is the one given, else the event's own (``ingest.base.record_cluster``).

Not records (skipped, not counted): blank lines, header lines, and cluster events (empty
``NodeName`` / ``Event`` ``Cluster``: the cluster's registered TRES, not a node). Quarantined,
per line: a wrong number of fields, an unreadable or implausible time, an end before the start,
a state that is no down/drain/fail/reboot state, an unreadable hostlist.
"""

from __future__ import annotations

import re
from functools import partial

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import numbered_lines
from ingest.base import record_cluster
from ingest.hostlist import expand_column
from ingest.times import NULL_TIMES
from ingest.times import local_span
from ingest.times import naive_times
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

# sacctmgr's format names, in the order sources.slurm asks for them (Reason last: it is free
# text). Its header prints Start/End as TimeStart/TimeEnd.
EVENT_FIELDS = ("Cluster", "NodeName", "Start", "End", "State", "User", "Reason")
_ALIASES = {"timestart": "start", "timeend": "end"}
_REQUIRED = ("nodename", "start", "state")
_TIME = "%Y-%m-%dT%H:%M:%S"
_FLAG = r"[*~#!%$@^-]*"  # sacct state suffixes (not responding, powered off, ...)
# (event, regex on the upper-cased state) in priority order: DOWN+DRAIN is down
_STATE_EVENTS = (
    ("down", rf"(?:^|\+)DOWN{_FLAG}(?:\+|$)"),
    ("drain", rf"(?:^|\+)(?:DRAIN|DRAINING|DRAINED|FAIL|FAILING){_FLAG}(?:\+|$)"),
    ("reboot", rf"(?:^|\+)REBOOT\w*{_FLAG}(?:\+|$)"),
)
_HEADER = re.compile(r"(?i)(?:^|\|)(?:NodeName|TimeStart)(?:\||$)")


def _names(header: str) -> list[str]:
    names = [f.strip().lower() for f in header.split("|")]
    if names and names[-1] == "":  # --parsable ends the header with the delimiter too
        names = names[:-1]
    return [_ALIASES.get(n, n) for n in names]


def _event(state: pl.Expr) -> pl.Expr:
    s = state.str.strip_chars().str.to_uppercase()
    out = pl.lit(None, pl.Utf8)
    for name, pat in reversed(_STATE_EVENTS):
        out = pl.when(s.str.contains(pat)).then(pl.lit(name)).otherwise(out)
    return out


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    df, names = _event_lines(data, ctx)
    if df.height == 0:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        why = f"the header has no {', '.join(missing)} field: no line can be read as a node event"
        return ParseResult(
            {}, quarantine_frame(df["line"], df["raw"], [why] * df.height), df.height
        )
    df, bad_shape = _fields(df, names)
    df = _checked(df.filter(~_cluster_event(names)), names, ctx)
    bad_value = df.filter(pl.col("_err").is_not_null())
    rows, bad_host = _per_host(df.filter(pl.col("_err").is_null()), names, ctx)
    quarantine = pl.concat(
        [
            bad_shape,
            quarantine_frame(bad_value["line"], bad_value["raw"], bad_value["_err"]),
            quarantine_frame(bad_host["line"], bad_host["raw"], bad_host["_herr"]),
        ]
    )
    tables = {"node_events": _rows(rows, ctx)} if rows.height else {}
    n_rows = tables["node_events"].height if tables else 0
    return ParseResult(tables, quarantine, n_rows + quarantine.height)


def _event_lines(data: bytes, ctx: ParseContext) -> tuple[pl.DataFrame, list[str]]:
    """The event lines, and the field names (the first header's, else ``EVENT_FIELDS``)."""
    df = numbered_lines(data, ctx).filter(pl.col("raw").str.strip_chars() != "")
    is_header = pl.col("raw").str.contains(_HEADER.pattern)
    headers = df.filter(is_header)["raw"]
    names = _names(headers[0]) if headers.len() else [f.lower() for f in EVENT_FIELDS]
    return df.filter(~is_header), [_ALIASES.get(n, n) for n in names]


def _field(names: list[str], name: str) -> pl.Expr:
    """A field's column, or null where the field list has no such field."""
    return pl.col(name) if name in names else pl.lit(None, pl.Utf8)


def _fields(df: pl.DataFrame, names: list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The lines with the right field count split into columns; quarantine rows of the rest."""
    n = len(names)
    last_free = names[-1] == "reason"  # the free-text field may hold the delimiter
    nf = pl.col("raw").str.count_matches("|", literal=True) + 1
    trailing = pl.col("raw").str.ends_with("|") & (nf == n + 1)
    df = df.with_columns(
        body=pl.when(trailing).then(pl.col("raw").str.strip_suffix("|")).otherwise(pl.col("raw")),
        nf=nf - trailing.cast(pl.Int64),
    )
    fits = (pl.col("nf") >= n) if last_free else (pl.col("nf") == n)
    bad = df.filter(~fits)
    split = pl.col("body").str.splitn("|", n)
    ok = df.filter(fits).with_columns(
        **{
            name: split.struct.field(f"field_{i}").str.strip_chars().replace("", None)
            for i, name in enumerate(names)
        }
    )
    errors = bad.select(pl.format(f"expected {n} fields separated by '|', found {{}}", "nf"))
    return ok, quarantine_frame(bad["line"], bad["raw"], errors.to_series())


def _cluster_event(names: list[str]) -> pl.Expr:
    """A cluster event (no node, or ``Event`` ``Cluster``): the cluster's TRES, not a record."""
    return _field(names, "nodename").is_null() | (
        _field(names, "event").str.to_lowercase() == "cluster"
    ).fill_null(False)


def _checked(df: pl.DataFrame, names: list[str], ctx: ParseContext) -> pl.DataFrame:
    """Events with UTC start, end and event, and ``_err``: why one cannot be stored."""
    col = partial(_field, names)
    end_raw = col("end")
    # an event's end is not before its start: that decides a time in a repeated DST hour
    start, end, dst = local_span(
        naive_times(col("start"), _TIME),
        naive_times(pl.when(~end_raw.is_in(NULL_TIMES)).then(end_raw), _TIME),
        ctx.tz,
        names=("TimeStart", "TimeEnd"),
    )
    df = df.with_columns(_start=start, _end=end, _dst=dst, _event=_event(col("state")))
    checks = [
        (pl.col("_dst").is_not_null(), pl.col("_dst")),
        (
            pl.col("_start").is_null(),
            pl.format(
                "unreadable TimeStart '{}' (want YYYY-MM-DDTHH:MM:SS in " + ctx.tz + ")",
                col("start").fill_null("(empty)"),
            ),
        ),
        (
            pl.col("_end").is_null() & end_raw.is_not_null() & ~end_raw.is_in(NULL_TIMES),
            pl.format(
                "unreadable TimeEnd '{}' (want YYYY-MM-DDTHH:MM:SS in " + ctx.tz + ")", end_raw
            ),
        ),
        (
            pl.col("_event").is_null(),
            pl.format(
                "node state '{}' is no down, drain, fail or reboot state",
                col("state").fill_null("(empty)"),
            ),
        ),
        (
            pl.col("_end") < pl.col("_start"),
            pl.format("TimeEnd {} is before TimeStart {}", col("end"), col("start")),
        ),
        (
            implausible_time(pl.col("_start"), ctx).is_not_null(),
            implausible_time(pl.col("_start"), ctx),
        ),
        (
            implausible_time(pl.col("_end"), ctx).is_not_null(),
            implausible_time(pl.col("_end"), ctx),
        ),
    ]
    err = record_cluster(col("cluster"), ctx)[2]
    for cond, text in reversed(checks):
        err = pl.when(cond.fill_null(False)).then(text).otherwise(err)
    return df.with_columns(_err=err)


def _per_host(
    df: pl.DataFrame, names: list[str], ctx: ParseContext
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One event per host of a line's hostlist; the lines with an unreadable one (``_herr``)."""
    hosts, host_err = expand_column(df["nodename"])
    df = df.with_columns(host=hosts, _herr=host_err)
    rows = (
        df.filter(pl.col("_herr").is_null())
        .explode("host")
        .select(
            "host",
            "_start",
            "_end",
            "_event",
            "line",
            cluster=record_cluster(_field(names, "cluster"), ctx)[0],
            reason=_field(names, "reason"),
        )
    )
    return rows, df.filter(pl.col("_herr").is_not_null())


def _rows(ev: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Start rows, and resume rows for ended events that no other event of the host follows at
    the same second."""
    starts = ev.select("cluster", "host", "reason", "line", time="_start", event="_event")
    ended = ev.filter(pl.col("_end").is_not_null())
    followed = (
        ended.join(ev.select("host", _end="_start", _by="line"), on=["host", "_end"])
        .filter(pl.col("_by") != pl.col("line"))
        .select("line", "host")
        .unique()
    )
    ends = ended.join(followed, on=["line", "host"], how="anti").select(
        "cluster", "host", "reason", "line", time="_end", event=pl.lit("resume")
    )
    out = pl.concat([starts, ends]).sort("line", "time")
    return conform(
        "node_events",
        out.select(
            "time",
            "cluster",
            "host",
            "event",
            "reason",
            job_id=pl.lit(None, pl.Utf8),
            source=pl.lit("sacctmgr"),
            source_file=pl.lit(ctx.path),
            source_line="line",
        ),
    )


_LINE = re.compile(
    rb"^[^|\n]*\|[^|\n]+\|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\|(?:Unknown|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\|[A-Za-z_+*~#!%$@^-]+\|",
    re.MULTILINE,
)


def detect(head: bytes, name: str) -> int:
    first = head[:4096].lstrip().split(b"\n", 1)[0].decode("utf-8", "replace")
    names = _names(first) if _HEADER.search(first) else []
    if "nodename" in names and ("start" in names or "timestart" in names) and "state" in names:
        return 90
    return 60 if _LINE.search(head[:65536]) else 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="node_events",
    description="sacctmgr --parsable2 show event: node down/drain/fail history from slurmdbd",
)
