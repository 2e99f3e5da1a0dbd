"""One chunk's candidate lines, classified, with their raw stamp fields: the per-chunk stage
(``FormatSpec.extract``) that runs on every core."""

import polars as pl

from ingest.base import ParseContext
from ingest.base import valid_utf8

from .classify import RECORD_KINDS
from .classify import classify
from .lines import candidate_lines
from .lines import nul_lines
from .patterns import PREFIX
from .patterns import PREFIX_GROUPS
from .stamps import reltime_headers


def extract(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """The chunk's candidate lines, classified, with their raw stamp fields (times are resolved
    in ``finish``, where the whole file's boot banners and reltime headers are known)."""
    buf = valid_utf8(data)
    cand = candidate_lines(buf, ctx)
    nul = nul_lines(buf, ctx) if buf.find(b"\x00") >= 0 else None
    if nul is not None:  # lines with NUL bytes are classified without them, and quarantined
        cand = pl.concat(
            [cand.filter(~pl.col("raw").str.contains("\x00", literal=True)), nul], how="diagonal"
        ).sort("line")
    headers = reltime_headers(buf, cand, ctx)
    if cand.height == 0 and headers.height == 0:
        return pl.DataFrame()
    raw = pl.col("raw")
    is_json = raw.str.starts_with("{")
    json_raw = pl.when(is_json).then(raw)
    cand = cand.with_columns(
        j_rt=json_raw.str.json_path_match("$.__REALTIME_TIMESTAMP"),
        j_mono=json_raw.str.json_path_match("$.__MONOTONIC_TIMESTAMP"),
        j_host=json_raw.str.json_path_match("$._HOSTNAME"),
        _text=pl.when(is_json).then(json_raw.str.json_path_match("$.MESSAGE")).otherwise(raw),
    )
    prefix = pl.col("_p")
    cand = (
        cand.with_columns(_p=pl.col("_text").str.extract_groups(PREFIX))
        .with_columns(
            **{k: prefix.struct.field(k) for k in PREFIX_GROUPS},
            body=pl.col("_text").str.slice(prefix.struct.field("head").str.len_chars()),
        )
        .drop("_p", "_text")
    )
    cand = cand.with_columns(
        up=pl.coalesce("up", "up2"),
        iso=pl.coalesce("iso", "iso5"),
        off=pl.coalesce("off", "off5"),
        ihost=pl.coalesce("j_host", "ihost", "h5", "mhost", "uhost", "shost"),
    ).drop("up2", "iso5", "off5", "h5", "mhost", "uhost", "shost", "j_host")
    cand = classify(cand).filter(pl.col("kind").is_not_null()).drop("body")
    if nul is not None:
        damaged = pl.col("nul_raw").is_not_null()
        cand = (
            cand.filter(~damaged | pl.col("kind").is_in(RECORD_KINDS))
            .with_columns(
                kind=pl.when(damaged).then(pl.lit("bad_nul")).otherwise("kind"),
                raw=pl.coalesce("nul_raw", "raw"),
            )
            .drop("nul_raw")
        )
    if headers.height:
        cand = pl.concat(
            [cand, headers.with_columns(kind=pl.lit("rel_header"))], how="diagonal_relaxed"
        )
    return cand
