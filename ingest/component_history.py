"""Component installation history (RMA / CMDB exports) CSV to ``component_history``.

Canonical header: ``component_class,serial,slot,installed_at,removed_at,removal_reason,failed``
(optional ``model``; ``host`` + ``position`` may replace ``slot``). One record = one data row.

- Other exports: ``ctx.column_map`` (``--map serial=SN,slot=location,installed_at=InstallDate``,
  canonical -> their header; headers match case- and space-insensitively). A required column
  (``component_class``, ``serial``, ``installed_at``, and ``slot`` or ``host``) still missing
  after mapping quarantines the whole file with one row naming it and the ``--map`` flag.
- ``slot`` is ``host/position``: split at the first ``/`` into ``host`` and ``position``.
- Times: ISO-8601 with or without zone, and common export forms (``2024-01-31 10:00``,
  ``01/31/2024 10:00``, ``31.01.2024``, ``2024/01/31``, epoch seconds), tried in that order (first
  that parses wins: a slash date is read month first; pass ``ctx.options['time_format']`` for
  day-first exports). Zone-less times are read in ``ctx.tz``.
- Empty ``removed_at`` = still in service: stays null (lifetimes censor it at ``--as-of`` or at
  the latest time in the data). ``removed_at`` before ``installed_at``, an unreadable time, an
  empty serial or class, or an unreadable ``failed`` quarantines the row.
- ``failed``: true/false, 1/0, yes/no, y/n, t/f. Without a ``failed`` column, a removed unit
  counts as failed when its ``removal_reason`` says so (fail, fault, error, dead, RMA, defect).
- ``component_class`` is lower-cased and common names are mapped to the DESIGN.md taxonomy
  (``GPU``, ``HBM`` -> gpu_memory, ``DIMM`` -> host_memory, ``PSU``, ``fan`` -> cooling,
  ``SSD``/``NVMe`` -> storage, ``HCA``/``NIC`` -> nic); other names are kept as given.
"""

from __future__ import annotations

import io
import re

import polars as pl

from ingest.base import FormatSpec, ParseContext, ParseResult, numbered_lines, whole_file_quarantine
from warehouse.schemas import conform, quarantine_frame

CANONICAL = ("component_class", "serial", "slot", "host", "position", "model", "installed_at",
             "removed_at", "removal_reason", "failed")  # fmt: skip
REQUIRED = ("component_class", "serial", "installed_at")

# Tried in order; zone-aware forms first. All are applied vectorized and coalesced.
AWARE_FORMATS = ("%Y-%m-%dT%H:%M:%S%.f%z", "%Y-%m-%d %H:%M:%S%.f%z")
NAIVE_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
    "%Y-%m-%d", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y %H:%M", "%m/%d/%Y", "%d.%m.%Y %H:%M:%S",
    "%d.%m.%Y %H:%M", "%d.%m.%Y", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d %H:%M", "%Y/%m/%d",
)  # fmt: skip
TRUE = ["true", "1", "yes", "y", "t"]
FALSE = ["false", "0", "no", "n", "f"]
FAILURE_REASON = r"(?i)fail|fault|error|dead|\brma\b|defect|broken|\bdbe\b|xid"
CLASS_NAMES = {
    "gpu": "gpu", "gpus": "gpu", "hbm": "gpu_memory", "hbm3": "gpu_memory", "gpu memory": "gpu_memory",
    "dimm": "host_memory", "dram": "host_memory", "memory": "host_memory", "ram": "host_memory",
    "psu": "psu", "power supply": "psu", "fan": "cooling", "fans": "cooling",
    "ssd": "storage", "nvme": "storage", "disk": "storage", "drive": "storage", "hdd": "storage",
    "nic": "nic", "hca": "nic", "cpu": "cpu", "processor": "cpu",
}  # fmt: skip


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


def parse_times(expr: pl.Expr, tz: str, fmt: str | None = None) -> pl.Expr:
    """Several export time forms, vectorized: the first format that parses wins; naive UTC."""
    s = expr.str.strip_chars().str.replace(r"[zZ]$", "+00:00").str.replace(r" UTC$", "+00:00")
    aware = pl.coalesce(
        [s.str.to_datetime(f, strict=False, time_zone="UTC", time_unit="us") for f in AWARE_FORMATS]
    ).dt.replace_time_zone(None)
    naive_formats = (fmt,) if fmt else NAIVE_FORMATS
    naive = pl.coalesce([s.str.to_datetime(f, strict=False, time_unit="us") for f in naive_formats])
    epoch = pl.when(s.str.contains(r"^\d{9,10}(?:\.\d+)?$")).then(
        pl.from_epoch((s.cast(pl.Float64, strict=False) * 1e6).cast(pl.Int64), time_unit="us")
    )
    if tz.upper() != "UTC":
        naive = (
            naive.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
            .dt.convert_time_zone("UTC")
            .dt.replace_time_zone(None)
        )
    zoned = s.str.contains(r"[+-]\d{2}:?\d{2}$")
    return pl.when(zoned).then(aware).otherwise(pl.coalesce(naive, epoch))


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    # Blank and '#' comment lines are not records; keep each kept line's physical number.
    lines = numbered_lines(data.removeprefix(b"\xef\xbb\xbf"), ParseContext())  # drop a BOM
    stripped = pl.col("raw").str.strip_chars()
    kept = lines.filter((stripped != "") & ~stripped.str.starts_with("#"))
    try:
        raw = pl.read_csv(
            io.StringIO("\n".join(kept["raw"])), infer_schema=False,
            separator=ctx.delimiter or ",", truncate_ragged_lines=False,
        )  # fmt: skip
    except (pl.exceptions.PolarsError, ValueError) as exc:
        return ParseResult({}, whole_file_quarantine(data, f"not a readable CSV: {exc}"), 1)
    cols = _resolve(raw.columns, ctx.column_map)
    missing = [c for c in REQUIRED if c not in cols]
    if "slot" not in cols and "host" not in cols:
        missing.append("slot")
    if missing:
        wanted = ",".join(f"{m}=<their header>" for m in missing)
        err = (f"component history: required column(s) {', '.join(missing)} not found in header "
               f"{raw.columns}; map them with --map {wanted}")  # fmt: skip
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    # One kept line per record unless quoted fields span lines: then number records instead.
    lines = (
        kept["line"][1:].to_list() if kept.height - 1 == raw.height else list(range(2, raw.height + 2))
    )
    raw_line = pl.concat_str([pl.col(c).fill_null("") for c in raw.columns], separator=",")
    df = raw.select(
        line=pl.Series(lines, dtype=pl.Int64),
        raw=raw_line,
        **{c: pl.col(h).str.strip_chars().replace("", None) for c, h in cols.items()},
    )
    return _normalize(df, ctx)


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
    removed = parse_times(_col(df, "removed_at"), ctx.tz, fmt)
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
        installed_at=parse_times(_col(df, "installed_at"), ctx.tz, fmt),
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
        .when(pl.col("installed_at").is_null())
        .then(pl.format("unreadable installed_at '{}'", pl.col("_inst_raw").fill_null("")))
        .when(pl.col("_rem_raw").is_not_null() & pl.col("removed_at").is_null())
        .then(pl.format("unreadable removed_at '{}'", "_rem_raw"))
        .when(pl.col("removed_at") < pl.col("installed_at"))
        .then(pl.format("removed_at {} is before installed_at {}", "removed_at", "installed_at"))
        .when(pl.col("_failed_raw").is_not_null() & pl.col("failed").is_null())
        .then(pl.format("unreadable failed '{}' (want true/false, 1/0, yes/no)", "_failed_raw"))
    )
    out = out.with_columns(_error=error)
    bad = out.filter(pl.col("_error").is_not_null())
    ok = out.filter(pl.col("_error").is_null())
    q = quarantine_frame(bad["line"], bad["raw"], bad["_error"])
    table = conform(
        "component_history",
        ok.drop("raw", "_error", "_inst_raw", "_rem_raw", "_failed_raw")
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
    first = head.decode("utf-8-sig", errors="replace").lstrip().split("\n", 1)[0]
    cols = {_norm(c) for c in first.split(",")}
    if {"componentclass", "serial", "installedat"} <= cols:
        return 95
    if any("serial" in c or c == "sn" for c in cols) and any("install" in c for c in cols):
        return 50
    return 0


FORMAT = FormatSpec(
    name="component-history",
    primary="component_history",
    parse=parse,
    detect=detect,
    description="component installation history CSV (canonical header or --map)",
)
