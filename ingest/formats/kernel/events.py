"""Finishing a file's classified lines as one: times, exact repeats, quarantine, UUIDs, event
rows, ids and cause links (``FormatSpec.merge``: once per file, whatever the chunking)."""

import re
from pathlib import PurePath

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import drop_repeats
from ingest.base import event_ids
from ingest.base import normalize_pci
from ingest.base import settle_repeats
from ingest.base import stand_ins
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

from .causes import link_causes
from .classify import RECORD_KINDS
from .describe import describe
from .repeats import DEFAULT_MERGE_WINDOW_S
from .repeats import collapse_multiline
from .repeats import merge_repeats
from .stamps import times

GENERIC_LOG_NAMES = {
    "kern",
    "kernel",
    "syslog",
    "messages",
    "dmesg",
    "kmsg",
    "journal",
    "log",
    "all",
}


def host_from_filename(path: str) -> str | None:
    """``gpu-node-001.log`` / ``gpu-node-001.log.1.gz`` -> ``gpu-node-001``; generic names
    (``kern.log``, ``messages``) and names that cannot be hosts give None."""
    name = PurePath(path).name
    stem = re.sub(r"(\.(log|txt|gz|zst|\d+))+$", "", name)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]*", stem) or stem.lower() in GENERIC_LOG_NAMES:
        return None
    return stem


_HW_COLUMNS = set(TABLES["hw_events"].columns)


def finish(lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    if lines.height == 0:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    hcols = ["h_rmon", "h_rday", "h_rhm"]
    is_header = pl.col("kind") == "rel_header"
    headers = (
        lines.filter(is_header).select("line", *hcols)
        if "h_rmon" in lines.columns
        else pl.DataFrame()
    )
    cand = times(lines.filter(~is_header).drop(hcols, strict=False), headers, ctx)
    # the same line twice (overlapping rotated files concatenated) is one record: the repeat is
    # a duplicate of what its first occurrence made (see the module docstring)
    cand, repeats = drop_repeats(cand, ["raw", "time"])
    host = ctx.host or host_from_filename(ctx.path)
    cand = cand.with_columns(
        host=pl.coalesce(pl.col("ihost"), pl.lit(host, dtype=pl.Utf8)),
        pci_bus=normalize_pci(pl.col("pci_raw")),
    )
    records = cand.filter(pl.col("kind").is_in(RECORD_KINDS))
    bad_kind = pl.col("kind").str.starts_with("bad_")
    bad = records.filter(bad_kind | pl.col("time_error").is_not_null())
    quarantine = quarantine_frame(
        bad["line"],
        bad["raw"],
        bad.select(
            pl.when(pl.col("kind") == "bad_xid")
            .then(pl.lit("NVRM: Xid line without a PCI id and numeric code"))
            .when(pl.col("kind") == "bad_sxid")
            .then(pl.lit("NVSwitch SXid line without a numeric code"))
            .when(pl.col("kind") == "bad_nul")
            .then(pl.lit("NUL byte inside the line (a corrupt or crash-damaged log): not read"))
            .otherwise(pl.col("time_error"))
        ).to_series(),
    )
    events = records.filter(~bad_kind & pl.col("time_error").is_null())
    guessed = host is not None and not ctx.host and events["ihost"].is_null().any()
    dups, quarantine = settle_repeats(repeats, events["line"], quarantine)
    if events.height == 0:
        return ParseResult({}, quarantine, quarantine.height + dups, duplicates=dups)
    gpu_at = cand.filter((pl.col("kind") == "gpu_at") & pl.col("time_error").is_null())
    events = describe(_attach_uuid(events, gpu_at))
    window = float(ctx.options.get("xid_merge_window_s", DEFAULT_MERGE_WINDOW_S))
    rows = merge_repeats(collapse_multiline(events), window)
    rows = rows.with_columns(
        cluster=pl.lit(ctx.cluster), source=pl.lit("kernel"), source_file=pl.lit(ctx.path)
    )
    rows = rows.with_columns(event_id=_event_ids(rows))
    rows = link_causes(rows)
    table = conform("hw_events", rows.select([c for c in rows.columns if c in _HW_COLUMNS]))
    return ParseResult(
        {"hw_events": table},
        quarantine,
        table.height + quarantine.height + dups,
        duplicates=dups,
        stand_ins=stand_ins(ctx, table, guessed),
    )


def _attach_uuid(events: pl.DataFrame, gpu_at: pl.DataFrame) -> pl.DataFrame:
    """UUID from the driver's ``NVRM: GPU at PCI:...: GPU-...`` line, the latest one before the
    event on the same host and bus (the driver prints it once per GPU per boot)."""
    if gpu_at.height == 0:
        return events.with_columns(uuid=pl.lit(None, dtype=pl.Utf8))
    ids = gpu_at.select(
        hk=pl.col("host").fill_null(""), pci_bus="pci_bus", time="time", uuid="uuid_at"
    ).sort("time")
    return (
        events.with_columns(hk=pl.col("host").fill_null(""))
        .sort("time")
        .join_asof(
            ids, on="time", by=["hk", "pci_bus"], strategy="backward", check_sortedness=False
        )
        .with_columns(uuid=pl.when(pl.col("kind") == "xid").then(pl.col("uuid")))
        .drop("hk")
        .sort("line")
    )


def _event_ids(rows: pl.DataFrame) -> pl.Series:
    """Ids over the identity of each output row (rows, not log lines)."""
    key = pl.concat_str(
        [
            pl.col("host").fill_null(""),
            pl.col("time").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f"),
            pl.col("event_type"),
            pl.col("code"),
            pl.col("source_file"),
            pl.col("source_line").cast(pl.Utf8),
        ],
        separator="|",
    )
    return event_ids(rows.select(key).to_series())
