"""Failure / repair records (``--format failure-log``) to ``failures``: one row per failure of a
node or system, with its repair where the source gives it. One record = one data row.

The header is the first line that names a start-time column; lines above it (LANL's title
line) are not records. Columns are found by their canonical name or a common other name
(``ALIASES``; case, spaces, punctuation and a parenthesised note ignored), and ``--map
canonical=theirs,...`` names any other (ticket systems, vendor RMA logs):

- ``system`` (else ``--cluster``), ``host``, ``start_time`` (required), ``end_time``,
  ``downtime_hours`` / ``downtime_minutes`` / ``downtime_s`` (a bare ``Down Time`` is minutes,
  as in LANL's release), ``cause`` (root-cause category), ``sub_cause`` (what failed),
  ``component_class``, ``serial``, ``system_nodes`` / ``system_processors`` (the system's size).
- LANL's layout (LA-UR-05-7318) is read natively: the root cause is the one filled column among
  Facilities, Hardware, Human Error, Network, Undetermined and Software (``cause`` = that
  column's name, lower case with ``_``; ``sub_cause`` = the cell). A record with two filled is
  quarantined; one with none keeps a null cause (the source did not record it).
- A log of only a date, a host and what failed is read too (``--map
  start_time=date,sub_cause=part``): its repair is unknown.

Repair: ``downtime_hours`` is the source's own downtime where it gives one (it wins over
``end - start``, which a local clock's DST change or a typo can skew), else ``end - start``;
``end_time`` is ``start + downtime`` when only the downtime is given. With neither, both stay
null and ``repair_known`` is false: a repair time is never invented.
``component_class`` is the source's, else ``sub_cause`` looked up in the common component names
(``GPU``, ``DIMM``, ``PSU`` ...); ``cause`` is lower-cased with ``_`` for spaces.

Quarantined per record, with the reason: a malformed CSV record or a wrong field count, an
empty / unreadable / implausible start, an unreadable end, an end before the start, an
unreadable or negative downtime, two root-cause columns filled. Times: the export forms of
``ingest.times.parse_times`` (``6/21/2005 10:54`` month first; ``ctx.options['time_format']``
for others), zone-less ones read in ``--tz``.
"""

from __future__ import annotations

import re

import polars as pl

from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import numbered_lines
from ingest.base import split_rejected
from ingest.base import whole_file_quarantine
from ingest.component_names import CLASS_NAMES
from ingest.csv_records import csv_records
from ingest.times import parse_span
from warehouse.schemas import conform

ALIASES = {
    "system": ("system", "cluster", "machine", "systemname"),
    "host": ("host", "node", "hostname", "nodename", "nodenum", "nodeid", "server"),
    "start_time": (
        "starttime",
        "start",
        "probstarted",
        "started",
        "date",
        "time",
        "timestamp",
        "failedat",
        "failuretime",
        "opened",
        "reported",
    ),
    "end_time": (
        "endtime",
        "end",
        "probfixed",
        "fixed",
        "repaired",
        "resolved",
        "closed",
        "restored",
    ),
    "downtime_hours": ("downtimehours",),
    "downtime_minutes": ("downtimeminutes", "downtime"),
    "downtime_s": ("downtimes", "downtimeseconds"),
    "cause": ("cause", "rootcause", "causeclass", "category"),
    "sub_cause": (
        "subcause",
        "whatfailed",
        "component",
        "part",
        "problem",
        "failure",
        "description",
    ),
    "component_class": ("componentclass",),
    "serial": ("serial", "sn", "serialnumber"),
    "system_nodes": ("systemnodes", "nodes"),
    "system_processors": ("systemprocessors", "procstot", "processors"),
}
CAUSE_COLUMNS = ("facilities", "hardware", "human_error", "network", "undetermined", "software")
HEADER_SEARCH = 10  # records looked at for the header
MINUTES = {"downtime_hours": 60.0, "downtime_minutes": 1.0, "downtime_s": 1 / 60}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\(.*?\)", "", name.lower()))


def _resolve(header: list[str], column_map: dict[str, str]) -> dict[str, int]:
    """canonical name -> field index in this header."""
    at = {_norm(h): i for i, h in reversed(list(enumerate(header)))}
    out = {}
    for canon, names in ALIASES.items():
        wanted = (_norm(column_map[canon]),) if canon in column_map else (_norm(canon), *names)
        found = next((at[n] for n in wanted if n in at), None)
        if found is not None:
            out[canon] = found
    return out


def _cause_columns(header: list[str]) -> dict[str, int]:
    """LANL's root-cause columns present in the header: cause -> field index."""
    at = {_norm(h): i for i, h in enumerate(header)}
    return {c: at[_norm(c)] for c in CAUSE_COLUMNS if _norm(c) in at}


def _header(recs: pl.DataFrame, column_map: dict[str, str]) -> int | None:
    """Row index of the header: the first record that names a start-time column."""
    for i, fields in enumerate(recs["fields"].head(HEADER_SEARCH).to_list()):
        if fields and "start_time" in _resolve([f.strip() for f in fields], column_map):
            return i
    return None


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    data = data.removeprefix(b"\xef\xbb\xbf")
    recs = csv_records(numbered_lines(data, ParseContext()), ctx.delimiter or ",")
    if recs.height == 0:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    h = _header(recs, ctx.column_map)
    if h is None:
        err = (
            "failure log: no start-time column (start_time, Prob Started, date, ...) "
            "in the first lines; "
            "name it with --map start_time=<their header>"
        )
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    header = [f.strip() for f in recs["fields"][h]]
    cols, causes = _resolve(header, ctx.column_map), _cause_columns(header)
    df = _with_spans(_with_fields(recs.slice(h + 1), cols, causes), ctx)
    df = df.with_columns(_error=_error(len(header), list(causes), ctx))
    ok, q = split_rejected(df, "_error")
    table = _failures(ok, ctx)
    return ParseResult({"failures": table} if table.height else {}, q, table.height + q.height)


def _with_fields(recs: pl.DataFrame, cols: dict[str, int], causes: dict[str, int]) -> pl.DataFrame:
    """The records' fields as the canonical columns (null where the file has none), and the
    LANL cause: the one cause column filled (``_n_causes`` counts them)."""

    def get(i):
        return pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars().replace("", None)

    df = recs.with_columns(
        nf=pl.col("fields").list.len(),
        **{c: get(i) for c, i in cols.items()},
        **{f"_cause_{c}": get(i) for c, i in causes.items()},
    )
    for c in ALIASES:
        if c not in df.columns:
            df = df.with_columns(pl.lit(None, pl.Utf8).alias(c))
    filled = [f"_cause_{c}" for c in causes]
    if filled and "cause" not in cols:  # LANL: the cause is the column that holds the sub-cause
        df = df.with_columns(
            _n_causes=pl.sum_horizontal([pl.col(c).is_not_null() for c in filled]),
            cause=pl.coalesce(
                [pl.when(pl.col(f"_cause_{c}").is_not_null()).then(pl.lit(c)) for c in causes]
            ),
            sub_cause=pl.coalesce(pl.col("sub_cause"), *filled),
        )
    else:
        df = df.with_columns(_n_causes=pl.lit(0))
    return df


def _with_spans(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Start, end (naive UTC) and downtime minutes of each record."""
    fmt = ctx.options.get("time_format")
    minutes = pl.coalesce(
        [pl.col(c).cast(pl.Float64, strict=False) * f for c, f in MINUTES.items()]
    )
    downtime_text = pl.coalesce(*MINUTES)
    # the downtime, else the order of start and end, decides a time in a repeated DST hour
    start, end, dst = parse_span(
        pl.col("start_time"),
        pl.col("end_time"),
        ctx.tz,
        fmt,
        seconds=minutes * 60,
        tolerance_s=60,
        names=("start time", "end time"),
        evidence="the downtime or their order",
    )
    return df.with_columns(
        start=start,
        end=end,
        _dst=dst,
        minutes=minutes,
        downtime_text=downtime_text,
    )


def _error(n: int, causes: list[str], ctx: ParseContext) -> pl.Expr:
    """Why a record (of a file whose header has ``n`` fields) cannot be stored, else null."""
    return (
        pl.when(pl.col("_shape").is_not_null())
        .then("_shape")
        .when(pl.col("nf") != n)
        .then(pl.format(f"expected {n} fields (as the header), found {{}}", "nf"))
        .when(pl.col("start_time").is_null())
        .then(pl.lit("empty start time"))
        .when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("start").is_null())
        .then(pl.format("unreadable start time '{}'", "start_time"))
        .when(implausible_time(pl.col("start"), ctx).is_not_null())
        .then(pl.format("start time: {}", implausible_time(pl.col("start"), ctx)))
        .when(pl.col("end_time").is_not_null() & pl.col("end").is_null())
        .then(pl.format("unreadable end time '{}'", "end_time"))
        .when(pl.col("end") < pl.col("start"))
        .then(pl.format("end time {} is before start time {}", "end_time", "start_time"))
        .when(pl.col("downtime_text").is_not_null() & pl.col("minutes").is_null())
        .then(pl.format("unreadable downtime '{}'", "downtime_text"))
        .when(pl.col("minutes") < 0)
        .then(pl.format("negative downtime '{}'", "downtime_text"))
        .when(pl.col("_n_causes") > 1)
        .then(
            pl.format(
                "{} root-cause columns filled (want one of {})",
                "_n_causes",
                pl.lit(", ".join(causes)),
            )
        )
    )


def _failures(ok: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The good records as ``failures`` rows."""
    hours = pl.coalesce(
        pl.col("minutes") / 60.0, (pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9
    )
    cause = pl.col("cause").str.to_lowercase().str.replace_all(r"[\s\-]+", "_")
    known_class = pl.col("sub_cause").str.to_lowercase().replace_strict(CLASS_NAMES, default=None)
    return conform(
        "failures",
        ok.select(
            system=pl.coalesce("system", pl.lit(ctx.cluster)),
            host="host",
            start_time="start",
            end_time=pl.coalesce(
                "end", pl.col("start") + pl.duration(microseconds=(pl.col("minutes") * 6e7).round())
            ),
            downtime_hours=hours,
            repair_known=hours.is_not_null(),
            cause=cause,
            sub_cause="sub_cause",
            component_class=pl.coalesce(pl.col("component_class").str.to_lowercase(), known_class),
            serial="serial",
            system_nodes=pl.col("system_nodes").cast(pl.Int32, strict=False),
            system_processors=pl.col("system_processors").cast(pl.Int32, strict=False),
            source=pl.lit("failure-log"),
            source_file=pl.lit(ctx.path),
            source_line="line",
        ),
    )


def detect(head: bytes, name: str) -> int:
    """LANL's release (Prob Started, Down Time and the cause columns) or a header with
    ``start_time`` and a cause column; other logs are read with ``--format failure-log``."""
    lines = head.decode("utf-8-sig", errors="replace").split("\n")[:HEADER_SEARCH]
    for line in lines:
        names = {_norm(f) for f in line.split(",")}
        if {"probstarted", "downtime"} <= names and len(
            names & {_norm(c) for c in CAUSE_COLUMNS}
        ) >= 2:
            return CERTAIN
        if "starttime" in names and names & {"cause", "subcause", "rootcause"}:
            return 80
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="failures",
    description=(
        "failure / repair records: LANL's release natively, other exports by header names or --map"
    ),
)
