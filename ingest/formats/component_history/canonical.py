"""The canonical CSV layout (``component_class,serial,slot,installed_at,...``), and other
exports mapped onto it with ``ctx.column_map``."""

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import numbered_lines
from ingest.base import whole_file_quarantine
from ingest.csv_records import csv_records
from warehouse.schemas import quarantine_frame

from .normalize import header_key
from .normalize import normalize

CANONICAL = ("component_class", "serial", "slot", "host", "position", "model", "installed_at",
             "removed_at", "removal_reason", "failed")  # fmt: skip
REQUIRED = ("component_class", "serial", "installed_at")


def _resolve(header: list[str], column_map: dict[str, str]) -> dict[str, str]:
    """canonical name -> header name in this file."""
    by_key = {header_key(h): h for h in header}
    out = {}
    for canon in CANONICAL:
        theirs = column_map.get(canon, canon)
        if header_key(theirs) in by_key:
            out[canon] = by_key[header_key(theirs)]
    return out


def parse_csv(data: bytes, ctx: ParseContext) -> ParseResult:
    """One record per data row; a file whose header lacks a required column is one quarantined
    record naming it and the ``--map`` flag."""
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
    res = normalize(df, ctx)
    q = pl.concat(
        [quarantine_frame(bad_shape["line"], bad_shape["raw"], bad_shape["_shape"]), res.quarantine]
    )
    return ParseResult(res.tables, q, res.records + bad_shape.height)
