"""Component installation history (RMA / CMDB exports) CSV to ``component_history``.

Canonical header: ``component_class,serial,slot,installed_at,removed_at,removal_reason,failed``
(optional ``model``; ``host`` + ``position`` may replace ``slot``). One record = one data row.

- Other exports: ``ctx.column_map`` (``--map serial=SN,slot=location,installed_at=InstallDate``,
  canonical -> their header; headers match case- and space-insensitively). A required column
  (``component_class``, ``serial``, ``installed_at``, and ``slot`` or ``host``) still missing
  after mapping quarantines the whole file with one row naming it and the ``--map`` flag.
- CSV records are split per record (``ingest.csv_records``): a quoted field may span lines; a quote
  never closed, a quote inside an unquoted field or a row with another field count than the header
  quarantines that record only, with the reason; the other records land. A record repeating an
  earlier one exactly is an ordinary row here: the warehouse stores the unit once and counts the
  repeat as a duplicate (``rows_duplicate``).
- ``slot`` is ``host/position``: split at the first ``/`` into ``host`` and ``position``.
- Times: ISO-8601 with or without zone, and common export forms (``2024-01-31 10:00``,
  ``01/31/2024 10:00``, ``31.01.2024``, ``2024/01/31``, epoch seconds), tried in that order (first
  that parses wins: a slash date is read month first; pass ``ctx.options['time_format']`` for
  day-first exports). Zone-less times are read in ``ctx.tz``.
- Empty ``removed_at`` = still in service: stays null (lifetimes censor it at ``--as-of`` or at
  the latest time in the data). ``removed_at`` before ``installed_at``, an unreadable time or one
  outside ``ctx``'s plausible window, an empty serial or class, or an unreadable ``failed``
  quarantines the row.
- ``failed``: true/false, 1/0, yes/no, y/n, t/f. Without a ``failed`` column, a removed unit
  counts as failed when its ``removal_reason`` says so (fail, fault, error, dead, RMA, defect).
- ``component_class`` is lower-cased and common names are mapped to the DESIGN.md taxonomy
  (``GPU``, ``HBM`` -> gpu_memory, ``DIMM`` -> host_memory, ``PSU``, ``fan`` -> cooling,
  ``SSD``/``NVMe`` -> storage, ``HCA``/``NIC`` -> nic); other names are kept as given.

Three other layouts real collectors write are recognised by their first line (``layout``):

- **Inventory intervals** (``serial | location | first seen | last seen``), the shape OLCF
  published for Titan's GPUs: one row per contiguous sighting of a serial in a location, a
  blank serial continuing the serial above, and event rows `` | | DBE | time`` marking the
  serial's failure. A record is one interval row; an event row belongs to the serial's latest
  interval starting at or before the event (that unit failed; ``removal_reason`` = the event,
  ``removed_at`` = the later of last seen and the event). The class is not in the file: it comes
  from the file name (``titan.gpu.history.txt`` -> gpu), else the whole file is quarantined
  saying so. ``location`` is the node; ``position`` is the class.
- **HPE ``sat hwhist``** tables (``| xname | FRUID | Timestamp | EventType |`` in either column
  order, ``+---+`` borders): Hardware State Manager events (Added, Removed, Detected, Scanned)
  of each FRU at each location, folded into installations: a record is one FRU's stay at one
  xname, from its first event to its ``Removed`` event (null while still seen). The FRUID
  (``Type.Maker.Part.Serial``) is the serial, its type the class (``NodeAccel`` -> gpu,
  ``Processor`` -> cpu, ``Memory`` -> host_memory, ...), its middle the model. HSM does not
  say why a FRU was removed: ``failed`` is false and the removal is censored, not a failure.
- **Insert / remove with events** (header ``SN,location,insert,remove,...,event``; ``out`` and
  ``duration`` optional), the shape OLCF published for Titan's 37,343 GPU installations
  (``gc_full.csv``). A row with an ``insert`` time is an installation (a record): ``location``
  is the node (Cray cname ``c11-2c1s4n1``, which lifetimes read as cabinet column, row, cage,
  blade slot and node), ``remove`` its last sighting, ``event`` why it ended (``DBE`` double-bit
  ECC -> gpu_memory, ``OTB`` off the bus -> gpu). A row without ``insert`` is an event of the
  serial's installation at that location starting at or before it (the GPU stayed in after a
  reboot). An installation failed when it ended with an event, or was removed after one of its
  events; one not ``out`` whose remove is the file's last time is still in service (removed_at
  null); else its removal is censored. The class comes from the file name (``psu_history.csv``),
  else gpu. Every event row, installation or not, is also a ``failures`` row (the system's
  failure log: start = the event time, no repair time); an event row that is no installation
  is not a component-history record.

Any layout: ``ctx.options['exclude_hosts']`` (``goodput ingest --exclude-hosts FILE``: every
whitespace-separated word of the file is a host name, so a plain list and a node table such as
Titan's ``titan.service.txt`` both work) quarantines each installation on those hosts, saying so:
service nodes are not compute units.
"""

from __future__ import annotations

import re
from pathlib import PurePath

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
from ingest.times import parse_times
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

CANONICAL = ("component_class", "serial", "slot", "host", "position", "model", "installed_at",
             "removed_at", "removal_reason", "failed")  # fmt: skip
REQUIRED = ("component_class", "serial", "installed_at")

TRUE = ["true", "1", "yes", "y", "t"]
FALSE = ["false", "0", "no", "n", "f"]
FAILURE_REASON = r"(?i)fail|fault|error|dead|\brma\b|defect|broken|\bdbe\b|xid"


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def _resolve(header: list[str], column_map: dict[str, str]) -> dict[str, str]:
    """canonical name -> header name in this file."""
    by_norm = {_norm(h): h for h in header}
    out = {}
    for canon in CANONICAL:
        theirs = column_map.get(canon, canon)
        if _norm(theirs) in by_norm:
            out[canon] = by_norm[_norm(theirs)]
    return out


# the first line that is not blank, a comment or a table border tells the layout apart
_HWHIST_HEADER = re.compile(
    r"^\s*\|(?=.*\bxname\b)(?=.*\bfruid\b)(?=.*\btimestamp\b)(?=.*\beventtype\b).*\|\s*$",
    re.IGNORECASE,
)
_INTERVAL_ROW = re.compile(r"^[^|,]*\|[^|]*\S[^|]*\|\s*\d[^|]*\|\s*\d[^|]*$")
_BORDER = r"^\+[-+=]*\+$"  # a table border line: not a record
_INSERT_REMOVE = {"sn", "location", "insert", "remove", "event"}
EVENT_CLASSES = {"DBE": "gpu_memory", "OTB": "gpu"}  # Titan's events in the DESIGN.md taxonomy
HSM_EVENTS = ("added", "removed", "detected", "scanned")


def layout(head: bytes) -> str:
    """``csv``, ``intervals`` (serial | location | first seen | last seen) or ``hwhist``."""
    for line in head.decode("utf-8-sig", errors="replace").split("\n"):
        line = line.strip()
        if line and not line.startswith("#") and not re.match(_BORDER, line):
            if _HWHIST_HEADER.match(line):
                return "hwhist"
            if _INSERT_REMOVE <= {_norm(c) for c in line.split(",")}:
                return "insert-remove"
            return "intervals" if _INTERVAL_ROW.match(line) else "csv"
    return "csv"


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    data = data.removeprefix(b"\xef\xbb\xbf")  # drop a BOM
    kind = layout(data[:65536])
    if kind == "insert-remove":
        return _parse_insert_remove(csv_records(numbered_lines(data, ParseContext()), ","), ctx)
    if kind != "csv":
        lines = numbered_lines(data, ParseContext())
        text = pl.col("raw").str.strip_chars()
        lines = lines.filter(
            (text != "") & ~text.str.starts_with("#") & ~text.str.contains(_BORDER)
        )
        return (_parse_hwhist if kind == "hwhist" else _parse_intervals)(lines, data, ctx)
    delim = ctx.delimiter or ","
    recs = csv_records(numbered_lines(data, ParseContext()), delim)
    if recs.height == 0:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    header = [h.strip() for h in recs["fields"][0]]
    recs = recs.slice(1)
    cols = _resolve(header, ctx.column_map)
    missing = [c for c in REQUIRED if c not in cols]
    if "slot" not in cols and "host" not in cols:
        missing.append("slot")
    if missing:
        wanted = ",".join(f"{m}=<their header>" for m in missing)
        err = (f"component history: required column(s) {', '.join(missing)} not found in header "
               f"{header}; map them with --map {wanted}")  # fmt: skip
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    n = len(header)
    nf = pl.col("fields").list.len()
    recs = recs.with_columns(
        _shape=pl.when(pl.col("_shape").is_not_null())
        .then("_shape")
        .when(nf != n)
        .then(
            pl.format(f"expected {n} fields separated by {delim!r} (as the header), found {{}}", nf)
        )
    )
    bad_shape = recs.filter(pl.col("_shape").is_not_null())
    recs = recs.filter(pl.col("_shape").is_null())
    index = {h: i for i, h in enumerate(header)}
    df = recs.select(
        "line",
        "raw",
        **{
            c: pl.col("fields").list.get(index[h]).str.strip_chars().replace("", None)
            for c, h in cols.items()
        },
    )
    res = _normalize(df, ctx)
    q = pl.concat(
        [quarantine_frame(bad_shape["line"], bad_shape["raw"], bad_shape["_shape"]), res.quarantine]
    )
    return ParseResult(res.tables, q, res.records + bad_shape.height)


def _get(i: int) -> pl.Expr:
    return pl.col("fields").list.get(i, null_on_oob=True)


def _parse_intervals(lines: pl.DataFrame, data: bytes, ctx: ParseContext) -> ParseResult:
    """``serial | location | first seen | last seen`` rows and `` | | EVENT | time`` rows."""
    cls = _file_class(ctx)
    if cls is None:
        err = (
            "component history: a 'serial | location | first seen | last seen' listing does "
            "not say which "
            "component it lists; name the file after it (e.g. gpu_history.txt, psu_history.txt)"
        )
        return ParseResult(
            {}, whole_file_quarantine(data, err, int(lines["line"][0]) if lines.height else 1), 1
        )
    fields = pl.col("raw").str.split("|").list.eval(pl.element().str.strip_chars())
    df = lines.with_columns(fields=fields, nf=fields.list.len()).with_columns(
        sn=_get(0), loc=_get(1), a=_get(2), b=_get(3)
    )
    kind = (
        pl.when(pl.col("nf") != 4).then(pl.lit("bad"))
        .when(pl.col("loc") != "").then(pl.lit("interval"))
        .when((pl.col("sn") == "") & (pl.col("a") != "")).then(pl.lit("event"))
        .otherwise(pl.lit("bad"))
    )  # fmt: skip
    df = df.with_columns(kind=kind).with_columns(
        serial=pl.when((pl.col("kind") == "interval") & (pl.col("sn") != ""))
        .then("sn")
        .forward_fill()
    )
    error = (
        pl.when(pl.col("nf") != 4)
        .then(
            pl.format(
                "expected 4 '|'-separated fields (serial | location | first seen | last seen, "
                "or ' | | EVENT | time'), found {}",
                "nf",
            )
        )
        .when(pl.col("kind") == "bad")
        .then(
            pl.lit(
                "neither an installation (a location in field 2) nor an event (its name in field 3)"
            )
        )
        .when(pl.col("serial").is_null())
        .then(
            pl.format(
                "a{} row with a blank serial before any serial",
                pl.when(pl.col("kind") == "event")
                .then(pl.lit("n event"))
                .otherwise(pl.lit(" continuation")),
            )
        )
    )
    df = df.with_columns(_error=error)
    bad = df.filter(pl.col("_error").is_not_null())
    ivs = df.filter(pl.col("_error").is_null() & (pl.col("kind") == "interval")).with_columns(
        inst=parse_times(pl.col("a"), ctx.tz)[0], rem=parse_times(pl.col("b"), ctx.tz)[0]
    )
    ev = df.filter(pl.col("_error").is_null() & (pl.col("kind") == "event")).with_columns(
        t=parse_times(pl.col("b"), ctx.tz)[0], _dst=parse_times(pl.col("b"), ctx.tz)[1]
    )
    # an event belongs to the serial's latest installation that starts at or before it
    owner = (
        ev.join(ivs.select("serial", iline="line", inst="inst"), on="serial")
        .filter(pl.col("inst") <= pl.col("t"))
        .sort("inst", "iline")
        .group_by("line")
        .agg(pl.col("iline").last())
    )
    ev = ev.join(owner, on="line", how="left")
    orphan = ev.filter(pl.col("iline").is_null()).with_columns(
        _error=pl.when(pl.col("_dst").is_not_null())
        .then(pl.format("event time: {}", "_dst"))
        .when(pl.col("t").is_null())
        .then(pl.format("unreadable event time '{}'", "b"))
        .otherwise(
            pl.format(
                "{} at {} for serial {}: no readable installation of that serial starts at or "
                "before it",
                "a",
                "b",
                "serial",
            )
        )
    )
    fail = (
        ev.filter(pl.col("iline").is_not_null())
        .group_by("iline")
        .agg(reason=pl.col("a").unique(maintain_order=True).str.join(", "), t_max=pl.col("t").max(),
             t_text=pl.col("b").sort_by("t").last())
    )  # fmt: skip
    ivs = ivs.join(fail, left_on="line", right_on="iline", how="left")
    later = pl.col("t_max").is_not_null() & (
        pl.col("rem").is_null() | (pl.col("t_max") > pl.col("rem"))
    )
    canonical = ivs.select(
        "line",
        "raw",
        "serial",
        component_class=pl.lit(cls),
        host=pl.col("loc"),
        position=pl.lit(cls),
        installed_at="a",
        removed_at=pl.when(later).then("t_text").otherwise("b"),
        removal_reason="reason",
        failed=pl.when(pl.col("t_max").is_not_null())
        .then(pl.lit("true"))
        .otherwise(pl.lit("false")),
    )
    return _with_quarantine(
        _normalize(canonical, ctx), pl.concat([bad, orphan], how="diagonal_relaxed")
    )


def _parse_hwhist(lines: pl.DataFrame, data: bytes, ctx: ParseContext) -> ParseResult:
    """HPE ``sat hwhist`` tables: one record per FRU stay at one xname."""
    names = (
        [h.strip().lower() for h in lines["raw"][0].strip().strip("|").split("|")]
        if lines.height
        else []
    )
    if not {"xname", "fruid", "timestamp", "eventtype"} <= set(names):
        err = (
            "sat hwhist: the first table row is not the header "
            "'| xname | FRUID | Timestamp | EventType |'"
        )
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    at = {n: names.index(n) for n in ("xname", "fruid", "timestamp", "eventtype")}
    text = pl.col("raw").str.strip_chars()
    df = (
        lines.slice(1)
        .with_columns(
            pl.col("raw")
            .str.strip_chars()
            .str.strip_chars("|")
            .str.split("|")
            .list.eval(pl.element().str.strip_chars())
            .alias("fields")
        )
        .with_columns(
            nf=pl.col("fields").list.len(),
            xname=_get(at["xname"]),
            fruid=_get(at["fruid"]),
            ts=_get(at["timestamp"]),
            event=_get(at["eventtype"]).str.to_lowercase(),
        )
        .with_columns(
            time=parse_times(pl.col("ts"), ctx.tz)[0], _dst=parse_times(pl.col("ts"), ctx.tz)[1]
        )
    )
    error = (
        pl.when(~text.str.starts_with("|") | ~text.str.ends_with("|"))
        .then(pl.lit("not a table row ('| xname | FRUID | Timestamp | EventType |')"))
        .when(pl.col("nf") != len(names))
        .then(
            pl.format(
                f"expected {len(names)} '|'-separated columns as the header, found {{}}", "nf"
            )
        )
        .when(pl.col("xname") == "")
        .then(pl.lit("empty xname"))
        .when(pl.col("fruid") == "")
        .then(pl.lit("empty FRUID"))
        .when(pl.col("_dst").is_not_null())
        .then(pl.format("Timestamp: {}", "_dst"))
        .when(pl.col("time").is_null())
        .then(pl.format("unreadable Timestamp '{}'", "ts"))
        .when(implausible_time(pl.col("time"), ctx).is_not_null())
        .then(pl.format("Timestamp: {}", implausible_time(pl.col("time"), ctx)))
        .when(~pl.col("event").is_in(HSM_EVENTS))
        .then(
            pl.format(
                "unknown EventType '{}' (want Added, Removed, Detected or Scanned)",
                _get(at["eventtype"]),
            )
        )
    )
    df = df.with_columns(_error=error)
    bad = df.filter(pl.col("_error").is_not_null())
    removed = pl.col("event") == "removed"
    # a Removed event ends a stay; the FRU's next event at that xname starts another
    stays = (
        df.filter(pl.col("_error").is_null())
        .sort("fruid", "xname", "time", "line")
        .with_columns(
            stay=(removed.cast(pl.Int64).cum_sum() - removed.cast(pl.Int64)).over("fruid", "xname")
        )
        .group_by("fruid", "xname", "stay", maintain_order=True)
        .agg(
            line=pl.col("line").first(),
            raw=pl.col("raw").first(),
            installed_at=pl.col("ts").filter(~removed).first(),
            removed_at=pl.col("ts").filter(removed).first(),
        )
    )
    orphan = stays.filter(pl.col("installed_at").is_null()).with_columns(
        _error=pl.format(
            "Removed at {} with no earlier event of this FRU at {}", "removed_at", "xname"
        )
    )
    stays = stays.filter(pl.col("installed_at").is_not_null())
    node = pl.col("xname").str.extract(r"^(x\d+c\d+s\d+b\d+n\d+)", 1)
    parts = pl.col("fruid").str.split(".")
    canonical = stays.sort("line").select(
        "line",
        "raw",
        "installed_at",
        "removed_at",
        component_class=parts.list.first(),
        serial="fruid",
        model=pl.when(parts.list.len() > 2).then(
            parts.list.slice(1, parts.list.len() - 2).list.join(".")
        ),
        host=pl.coalesce(node, pl.col("xname").str.extract(r"^(.+?)[a-z]+\d+$", 1), "xname"),
        position=pl.coalesce(
            pl.when(node.is_not_null())
            .then(pl.col("xname").str.slice(node.str.len_chars()))
            .replace("", None),
            pl.col("xname").str.extract(r"([a-z]+\d+)$", 1),
        ),
        removal_reason=pl.when(pl.col("removed_at").is_not_null()).then(pl.lit("Removed")),
        failed=pl.lit("false"),
    )
    return _with_quarantine(
        _normalize(canonical, ctx), pl.concat([bad, orphan], how="diagonal_relaxed")
    )


def _file_class(ctx: ParseContext) -> str | None:
    """The component class a file's name gives (``titan.gpu.history.txt`` -> gpu), else None."""
    tokens = re.split(r"[^a-z0-9]+", PurePath(ctx.path or "").name.lower())
    return next((CLASS_NAMES[t] for t in tokens if t in CLASS_NAMES), None)


def _parse_insert_remove(recs: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    """``SN,location,insert,remove,[duration,out,]event`` rows: installations and event rows."""
    header = [_norm(h) for h in recs["fields"][0]]
    at = {h: i for i, h in enumerate(header)}
    recs = recs.slice(1)
    n = len(header)
    value = lambda name: (
        _get(at[name]).str.strip_chars().replace("", None) if name in at else pl.lit(None, pl.Utf8)
    )
    df = recs.with_columns(
        sn=value("sn"),
        loc=value("location"),
        ins=value("insert"),
        rem=value("remove"),
        out=value("out").str.to_lowercase(),
        ev=value("event"),
        nf=pl.col("fields").list.len(),
    ).with_columns(
        t=parse_times(pl.col("rem"), ctx.tz)[0], _dst=parse_times(pl.col("rem"), ctx.tz)[1]
    )
    error = (
        pl.when(pl.col("_shape").is_not_null())
        .then("_shape")
        .when(pl.col("nf") != n)
        .then(pl.format(f"expected {n} fields separated by ',' (as the header), found {{}}", "nf"))
        .when(pl.col("ins").is_null() & pl.col("ev").is_null())
        .then(pl.lit("neither an installation (no insert time) nor an event (no event)"))
    )
    df = df.with_columns(_error=error)
    bad = df.filter(pl.col("_error").is_not_null())
    ivs = df.filter(pl.col("_error").is_null() & pl.col("ins").is_not_null()).with_columns(
        inst=parse_times(pl.col("ins"), ctx.tz)[0]
    )
    ev = df.filter(pl.col("_error").is_null() & pl.col("ins").is_null())
    excluded = list(ctx.options.get("exclude_hosts", ()))
    ev_error = (
        pl.when(pl.col("_dst").is_not_null())
        .then(pl.format("event {}: {}", "ev", "_dst"))
        .when(pl.col("t").is_null())
        .then(pl.format("event {}: unreadable time '{}'", "ev", pl.col("rem").fill_null("")))
        .when(implausible_time(pl.col("t"), ctx).is_not_null())
        .then(pl.format("event time: {}", implausible_time(pl.col("t"), ctx)))
        .when(pl.col("loc").is_null())
        .then(pl.lit("event without a location"))
        .when(pl.col("loc").is_in(excluded))
        .then(pl.format("host {} excluded (--exclude-hosts)", "loc"))
    )
    ev = ev.with_columns(_error=ev_error)
    bad = pl.concat([bad, ev.filter(pl.col("_error").is_not_null())], how="diagonal_relaxed")
    ev = ev.filter(pl.col("_error").is_null())
    # an event row belongs to the serial's latest installation at that location starting at or
    # before it
    owner = (
        ev.join(ivs.select("sn", "loc", iline="line", inst="inst"), on=["sn", "loc"])
        .filter(pl.col("inst") <= pl.col("t"))
        .sort("inst", "iline")
        .group_by("line")
        .agg(pl.col("iline").last())
    )
    attached = (
        ev.join(owner, on="line").group_by("iline")
        .agg(_events=pl.col("ev").unique(maintain_order=True).str.join(", "))
    )  # fmt: skip
    last = (
        ivs["t"].drop_nulls().max() if ivs.height else None
    )  # the file's last time: still in service
    ivs = ivs.join(attached, left_on="line", right_on="iline", how="left")
    in_service = (
        pl.col("ev").is_null()
        & (pl.col("out").fill_null("") != "true")
        & (pl.col("t") == pl.lit(last))
    )
    failed = pl.col("ev").is_not_null() | (pl.col("_events").is_not_null() & ~in_service)
    cls = _file_class(ctx) or "gpu"
    canonical = ivs.select(
        "line",
        "raw",
        serial="sn",
        component_class=pl.lit(cls),
        host="loc",
        position=pl.lit(cls),
        installed_at="ins",
        removed_at=pl.when(in_service).then(pl.lit(None, pl.Utf8)).otherwise("rem"),
        removal_reason=pl.coalesce("ev", "_events"),
        failed=pl.when(failed).then(pl.lit("true")).otherwise(pl.lit("false")),
    )
    res = _with_quarantine(_normalize(canonical, ctx), bad)
    stored = (
        res.tables["component_history"]["source_line"]
        if res.tables
        else pl.Series([], dtype=pl.Int64)
    )
    events = pl.concat(
        [ivs.filter(pl.col("line").is_in(stored.implode()) & pl.col("ev").is_not_null()), ev],
        how="diagonal_relaxed",
    )
    failures = conform(
        "failures",
        events.sort("line").select(
            system=pl.lit(ctx.cluster),
            host="loc",
            start_time="t",
            repair_known=pl.lit(False),
            cause=pl.lit("hardware"),
            sub_cause="ev",
            component_class=pl.col("ev").replace_strict(EVENT_CLASSES, default=None),
            serial="sn",
            source=pl.lit("component-history"),
            source_file=pl.lit(ctx.path),
            source_line="line",
        ),
    )
    if failures.height:
        res.tables["failures"] = failures
    return res


def _with_quarantine(res: ParseResult, bad: pl.DataFrame) -> ParseResult:
    """``res`` plus the layout's own rejected records (``line``, ``raw``, ``_error``)."""
    q = pl.concat([quarantine_frame(bad["line"], bad["raw"], bad["_error"]), res.quarantine]).sort(
        "line"
    )
    return ParseResult(res.tables, q, res.records + bad.height)


def _col(df: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name) if name in df.columns else pl.lit(None, pl.Utf8)


def _normalize(df: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    fmt = ctx.options.get("time_format")
    slot = pl.coalesce(
        _col(df, "slot"),
        pl.when(_col(df, "host").is_not_null()).then(
            pl.concat_str(_col(df, "host"), pl.lit("/"), _col(df, "position").fill_null(""))
        ),
    )
    cls = _col(df, "component_class").str.to_lowercase()
    failed_text = _col(df, "failed").str.to_lowercase()
    # a unit is removed no earlier than installed: that decides a time in a repeated DST hour
    installed, removed, dst = parse_span(
        _col(df, "installed_at"),
        _col(df, "removed_at"),
        ctx.tz,
        fmt,
        names=("installed_at", "removed_at"),
    )
    failed_col = (
        pl.when(failed_text.is_in(TRUE)).then(True).when(failed_text.is_in(FALSE)).then(False)
    )
    if "failed" in df.columns:
        failed = failed_col
    else:
        failed = removed.is_not_null() & _col(df, "removal_reason").str.contains(
            FAILURE_REASON
        ).fill_null(False)
    out = df.select(
        "line",
        "raw",
        component_class=cls.replace(CLASS_NAMES),
        serial=_col(df, "serial"),
        slot=slot,
        host=pl.coalesce(_col(df, "host"), slot.str.split("/").list.first()),
        position=pl.coalesce(
            _col(df, "position"),
            pl.when(slot.str.contains("/")).then(slot.str.splitn("/", 2).struct.field("field_1")),
        ),
        model=_col(df, "model"),
        installed_at=installed,
        _dst=dst,
        removed_at=removed,
        removal_reason=_col(df, "removal_reason"),
        failed=failed,
        _inst_raw=_col(df, "installed_at"),
        _rem_raw=_col(df, "removed_at"),
        _failed_raw=_col(df, "failed"),
    )
    error = (
        pl.when(pl.col("serial").is_null())
        .then(pl.lit("empty serial"))
        .when(pl.col("component_class").is_null())
        .then(pl.lit("empty component_class"))
        .when(pl.col("slot").is_null())
        .then(pl.lit("empty slot / host"))
        .when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("installed_at").is_null())
        .then(pl.format("unreadable installed_at '{}'", pl.col("_inst_raw").fill_null("")))
        .when(pl.col("_rem_raw").is_not_null() & pl.col("removed_at").is_null())
        .then(pl.format("unreadable removed_at '{}'", "_rem_raw"))
        .when(pl.col("removed_at") < pl.col("installed_at"))
        .then(pl.format("removed_at {} is before installed_at {}", "removed_at", "installed_at"))
        .when(implausible_time(pl.col("installed_at"), ctx).is_not_null())
        .then(pl.format("installed_at: {}", implausible_time(pl.col("installed_at"), ctx)))
        .when(implausible_time(pl.col("removed_at"), ctx).is_not_null())
        .then(pl.format("removed_at: {}", implausible_time(pl.col("removed_at"), ctx)))
        .when(pl.col("_failed_raw").is_not_null() & pl.col("failed").is_null())
        .then(pl.format("unreadable failed '{}' (want true/false, 1/0, yes/no)", "_failed_raw"))
        .when(pl.col("host").is_in(list(ctx.options.get("exclude_hosts", ()))))
        .then(pl.format("host {} excluded (--exclude-hosts)", "host"))
    )
    out = out.with_columns(_error=error)
    ok, q = split_rejected(out, "_error")
    table = conform(
        "component_history",
        ok.drop("raw", "_error", "_dst", "_inst_raw", "_rem_raw", "_failed_raw")
        .rename({"line": "source_line"})
        .with_columns(
            failed=pl.col("failed").fill_null(False),
            source=pl.lit("component-history"),
            source_file=pl.lit(ctx.path),
        ),
    )
    tables = {"component_history": table} if table.height else {}
    return ParseResult(tables, q, table.height + q.height)


def detect(head: bytes, name: str) -> int:
    kind = layout(head)
    if kind == "insert-remove":
        return CERTAIN
    if kind != "csv":
        return 90 if kind == "hwhist" else 60
    first = head.decode("utf-8-sig", errors="replace").lstrip().split("\n", 1)[0]
    cols = {_norm(c) for c in first.split(",")}
    if {"componentclass", "serial", "installedat"} <= cols:
        return CERTAIN
    if any("serial" in c or c == "sn" for c in cols) and any("install" in c for c in cols):
        return 50
    return 0


FORMAT = FormatSpec(
    name="component-history",
    primary="component_history",
    parse=parse,
    detect=detect,
    description=(
        "component installation history: CSV (canonical header or --map), inventory intervals, "
        "HPE sat hwhist"
    ),
)
