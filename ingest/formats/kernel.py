"""Kernel logs (dmesg, syslog, journald, /dev/kmsg) to ``hw_events``: NVIDIA XID and NVSwitch
SXID lines, plus the host faults the kernel reports (mlx5 IB link down / port module errors,
machine checks, EDAC memory errors, NVMe controller loss).

Stamps (each optionally after ``dmesg --decode``'s ``kern  :warn  : ``): ``dmesg -T/--ctime``
``[Fri Aug 30 11:43:09 2024]`` (local, ``ctx.tz``), also with ``--show-delta``'s ``<  0.000293>``;
``--time-format=iso`` ``2025-01-21T04:41:44,283302+00:00``; ``--time-format=reltime``
``[Jan21 04:41]`` headers and ``[  +0.000123]`` lines (minute precision: a ``+`` line takes the
minute of the header above it, the year as for syslog); syslog RFC 3164 / journald ``short`` /
``short-precise`` ``Nov 20 10:00:00 host kernel:`` (no year: the year that puts the line not
after ``ctx.time``, else the file's mtime); RFC 5424 ``<4>1 2025-...Z host kernel - - -``;
journald ``short-iso[-precise]`` ``2025-05-01T09:58:12+0000 host kernel:``, ``short-unix``
``1737434504.283302 host kernel:`` and ``json`` (one object per line: ``__REALTIME_TIMESTAMP``,
``_HOSTNAME``, ``MESSAGE``). Time since boot (raw dmesg ``[24128.828315]``, journald
``short-monotonic`` ``[24128.828315] host kernel:``, ``/dev/kmsg`` ``6,1234,5678901,-;``, json
``__MONOTONIC_TIMESTAMP`` alone) needs the boot's time: the file's own ``setting system clock to
... (epoch)`` banner of the same boot, else ``ctx.options['boot_time']``, else ``ctx.time``.
Lines with no stamp (``--time-format=notime``) or only ``--time-format=delta``'s gap take
``ctx.time``. Otherwise a line is quarantined with the reason true for it; times outside the
plausible window (``ingest.base.implausible_time``) are quarantined per line.

Records: one row per event. Several lines of one event (same host, device, code and link within
a second, different text: XID 13's per-SM lines, SXID ``Severity``/``Data`` lines) collapse into
one whose severity is the worst its lines state; identical repeats of an event within
``ctx.options['xid_merge_window_s']`` (default 60 s) of the previous one merge into one row whose
``count`` says how many events it holds. NVLink XIDs (144-150 ...) and SXids carry ``link``
(``Link N``; SXid ``Engine instance N``; ``Data`` lines continue the line above): one event per
link. The same line twice (overlapping rotated files) is one record: the repeat is dropped
before repeat merging (it would raise a ``count``) and counted as a duplicate
(``ParseResult.duplicates``); a repeat of a quarantined line is quarantined again. A record is
such a row, so records = rows + quarantined lines + duplicates. Lines that are not faults (boot
banners, ``NVRM: GPU at ...`` identity lines, other drivers) are not records; the identity lines
fill ``uuid``. ``caused by previous Xid N`` links ``caused_by`` to the latest earlier event with
code N on the same GPU, else on the same host. Large files arrive in chunks: the runner has
``_extract`` classify each chunk's candidate lines (``FormatSpec.extract``) and ``merge`` finish
them once, as one file, so the events do not depend on chunking or compression.

Host: the syslog/journald host, else ``ctx.host``, else a host-like file name
(``gpu-node-001.log``), else null. ``gpu`` stays null (the kernel names PCI bus ids only):
``analysis.gpu_identity.fill_gpu_index`` maps them to indices downstream.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import PurePath

import numpy as np
import polars as pl

from ingest.base import (
    FormatSpec,
    ParseContext,
    ParseResult,
    drop_repeats,
    event_ids,
    implausible_time,
    normalize_pci,
    settle_repeats,
    stand_ins,
    text_pieces,
    valid_utf8,
)
from ingest.kernel_host_faults import HOST_FAULTS
from ingest.times import local_to_utc
from ingest.xid_catalog import UNKNOWN_XID, xid_catalog
from warehouse.schemas import TABLES, conform, quarantine_frame

DEFAULT_MERGE_WINDOW_S = 60.0
COLLAPSE_S = 1.0  # lines of one multi-line event are printed within this
MESSAGE_LIMIT = 1000

# Literals every record line contains (one regex alternation of them is the prefilter before the
# field regexes run).
CANDIDATE_LITERALS = [
    "NVRM: Xid", "NVRM: GPU at", "SXid", "SXID", "Link down", "Port module event[error]",
    "Machine Check Exception", "Machine check events logged", "context corrupt", " UE ",
    "controller is down", "setting system clock to", "Linux version ",
]  # fmt: skip

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_ISO = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?"
_DELTA = r"<\s*[-+]?\d+\.\d+>"  # dmesg --show-delta / --time-format=delta: gap to the previous line
# The stamp/host head of a line; the body is the rest (sliced off, not captured: capturing
# ``.*$`` would walk every line through the slow capture engine). One alternative per stamp:
# dmesg --ctime, raw uptime (journald short-monotonic adds a host), delta only, reltime minute
# header and ``+delta`` lines, /dev/kmsg, RFC 5424, ISO (dmesg --time-format=iso, journald
# short-iso[-precise], rsyslog RFC 3339), journald short-unix, RFC 3164 / journald short[-precise];
# dmesg --decode puts ``kern  :warn  : `` before any of them.
_PREFIX = (
    r"^(?P<head>(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:"
    r"\[(?P<ctime>[A-Z][a-z]{2} +"
    + _MONTH
    + r" +\d{1,2} \d\d:\d\d:\d\d \d{4})(?: "
    + _DELTA
    + r")?\]"
    r"|\[\s*(?P<up>\d+\.\d+)(?: " + _DELTA + r")?\](?: (?P<mhost>\S+) kernel:)?"
    r"|\[(?P<dlt>" + _DELTA + r")\]"
    r"|\[(?P<rmon>" + _MONTH + r") ?(?P<rday>\d{1,2}) (?P<rhm>\d\d:\d\d)\]"
    r"|\[\s*(?P<rdelta>\+\d+\.\d+)\]"
    r"|\d+,\d+,(?P<kmsg>\d+),[^;]*;"
    r"|1 (?:(?P<iso5>" + _ISO + r")(?P<off5>Z|[+-]\d\d:\d\d)|-) (?P<h5>\S+) \S+ \S+ \S+ "
    r"(?:-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: \x{FEFF}?)?"
    r"|(?P<iso>" + _ISO + r")(?P<off>Z|[+-]\d\d:?\d\d)?(?: (?P<ihost>\S+) kernel:)?"
    r"|(?P<unix>\d{9,11}\.\d{1,6}) (?P<uhost>\S+) kernel:"
    r"|(?P<sys>" + _MONTH + r" +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)?) (?P<shost>\S+) kernel:"
    r")?\s*(?:kernel:\s*)?(?:\[\s*(?P<up2>\d+\.\d+)\]\s*)?)"
)
_PREFIX_GROUPS = [
    "ctime", "up", "mhost", "dlt", "rmon", "rday", "rhm", "rdelta", "kmsg", "iso5", "off5", "h5",
    "iso", "off", "ihost", "unix", "uhost", "sys", "shost", "up2",
]  # fmt: skip
# dmesg --time-format=reltime prints ``[Jan21 04:41]`` when the minute changes and ``[  +0.000123]``
# (gap to the previous line) otherwise: a ``+`` line's minute is that of the header above it.
_REL_HEADER = re.compile(
    rb"(?m)^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?\[("
    + _MONTH.encode()
    + rb") ?(\d{1,2}) (\d\d:\d\d)\]"
)
_REL_FIRST = re.compile(
    rb"^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?\[(?:\s*\+\d|" + _MONTH.encode() + rb" ?\d)"
)
_PCI = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?"
# What follows ``NVRM: Xid`` (split off as a literal: a leading ``.*`` or a trailing ``(.*)$``
# capture would run every line through the slow capture engine); the message is the rest.
_XID = (
    r"^(?P<head> \((?:PCI:)?(?P<pci>" + _PCI + r")\):? (?P<code>\d+)\b,?\s*"
    r"(?:pid=(?P<pid>'[^']*'|\"[^\"]*\"|<[^>]*>|[^,\s]*),\s*)?(?:name=(?P<pname><[^>]*>|[^,]*),\s*)?)"
)
_SXID = (
    r"(?P<dev>nvidia-nvswitch\d+): SX[Ii][Dd](?:=|\s*\((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\):\s*)"
    r"(?P<code>\d+)\b,?\s*(?P<msg>.*)$"
)
_MLX5 = r"mlx5_core (?P<pci>" + _PCI + r")(?: (?P<ifname>[^:\s]+))?: (?P<msg>.*)$"
_MCE = r"mce: \[Hardware Error\]: (?P<msg>.*)$"
_EDAC = r"EDAC (?P<mc>[^:]+): (?P<n>\d+) (?P<kind>UE) (?P<msg>.*)$"
_NVME = r"nvme (?P<dev>nvme\d+): (?P<msg>controller is down.*)$"
_GPU_AT = r"NVRM: GPU at (?:PCI:)?(?P<pci>" + _PCI + r"): (?P<uuid>GPU-[0-9a-fA-F-]+)"
# The boot banner that dates uptime stamps: the RTC driver sets the clock early in boot.
_CLOCK = r"setting system clock to \S+ UTC \((?P<epoch>\d+)\)"
_LINK = r"(?i)\blink (-?\d+)|\bEngine instance (\d+)"

SXID_DEFAULT_SEVERITY = "critical"  # an SXID line that says neither Fatal nor Non-fatal
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


def _to_datetime(v) -> datetime | None:
    """An ISO string or datetime; zone-aware values are converted to naive UTC."""
    if v is None:
        return None
    t = v if isinstance(v, datetime) else datetime.fromisoformat(str(v))
    return t if t.tzinfo is None else t.astimezone(UTC).replace(tzinfo=None)


_BLOCK = 1 << 20  # the candidate search runs over newline-aligned blocks of about this size
_CANDIDATE_RE = "|".join(re.escape(lit) for lit in CANDIDATE_LITERALS)


def _lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """Candidate lines (line number, text), found without splitting the chunk into lines.

    One regex pass over newline-aligned ~1 MiB blocks (the literal alternation runs as a SIMD
    multi-literal search) prefixes each hit with a byte the chunk does not contain; a literal
    search for that byte then gives the hit offsets. Only the lines around hits are cut out, and
    their numbers come from counting newlines between consecutive candidate lines. This keeps
    extraction near ``grep -c`` speed (benchmarks/bench_kernel.py)."""
    buf = data  # valid UTF-8 (``valid_utf8``): offsets index these bytes
    blocks = _blocks(buf)
    hits = _hit_offsets(blocks, buf)
    if len(hits) == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "raw": pl.Utf8})
    rfind, find, n = buf.rfind, buf.find, len(buf)
    starts = np.unique(
        np.fromiter((rfind(b"\n", 0, h) + 1 for h in hits.tolist()), np.int64, len(hits))
    )
    ends = [find(b"\n", s) for s in starts.tolist()]
    raw = [buf[s : (e if e >= 0 else n)].decode("utf-8") for s, e in zip(starts.tolist(), ends)]
    # newlines before each candidate line: counted over the line-aligned stretches between them
    seg = np.concatenate(([0], starts)).astype(np.int64)
    gaps = text_pieces(buf, seg).str.count_matches("\n").cast(pl.Int64).cum_sum()
    return pl.DataFrame({"line": gaps + (ctx.line_offset + 1), "raw": raw}).with_columns(
        pl.col("raw").str.strip_suffix("\r")
    )


def _nul_lines(buf: bytes, ctx: ParseContext) -> pl.DataFrame:
    """Lines holding NUL bytes (a crash leaves them in logs) that hold a candidate literal once
    the NULs are removed: (line, raw without the NULs, nul_raw: the text with each NUL shown
    as ``\\0``). A NUL can split a literal (``NV\\0RM``) or a code (``7\\09``): such a line
    is a damaged record, not a record and not nothing."""
    a = np.frombuffer(buf, np.uint8)
    newlines = np.flatnonzero(a == 10)
    before = np.searchsorted(newlines, np.flatnonzero(a == 0))  # newlines before each NUL
    idx = np.unique(before)
    starts = np.concatenate(([0], newlines + 1))[idx]
    ends = np.concatenate((newlines, [len(buf)]))[idx]
    text = [
        buf[s:e].decode("utf-8").removesuffix("\r")
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    df = pl.DataFrame(
        {"line": pl.Series(idx + 1 + ctx.line_offset, dtype=pl.Int64), "nul_raw": text}
    )
    return (
        df.with_columns(raw=pl.col("nul_raw").str.replace_all("\x00", "", literal=True))
        .filter(pl.col("raw").str.contains(_CANDIDATE_RE))
        .with_columns(pl.col("nul_raw").str.replace_all("\x00", "\\0", literal=True))
        .select("line", "raw", "nul_raw")
    )


def _blocks(buf: bytes) -> pl.DataFrame:
    """(block text, byte offset of the block) over newline-aligned ~_BLOCK-byte pieces of
    ``buf`` (valid UTF-8) without copying it."""
    cuts, find, p = [0], buf.find, _BLOCK
    while p < len(buf) and (nl := find(b"\n", p)) >= 0:
        cuts.append(nl + 1)
        p = nl + 1 + _BLOCK
    if cuts[-1] != len(buf):
        cuts.append(len(buf))
    cuts = np.array(cuts, dtype=np.int64)
    return pl.DataFrame({"block": text_pieces(buf, cuts), "base": cuts[:-1]})


def _hit_offsets(blocks: pl.DataFrame, buf: bytes) -> np.ndarray:
    """Byte offsets of candidate-literal matches (at least one in every line that holds one)."""
    marker = next((chr(c) for c in range(32) if buf.find(bytes([c])) < 0), None)
    if marker is None:  # every control byte occurs: search the literals directly (slower)
        hits = blocks.select(h=pl.col("block").str.find_many(CANDIDATE_LITERALS) + pl.col("base"))[
            "h"
        ]
        return hits.explode().drop_nulls().to_numpy()
    marked = blocks.select(
        h=pl.col("block").str.replace_all(_CANDIDATE_RE, marker + "$0").str.find_many([marker]),
        base="base",
    ).with_row_index("b")
    # the k-th marker of a block sits k bytes after its hit
    hits = (
        marked.explode("h")
        .drop_nulls("h")
        .select(pl.col("h") - pl.int_range(pl.len()).over("b") + pl.col("base"))
    )
    return hits["h"].to_numpy()


def _reltime_headers(buf: bytes, cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The ``[Jan21 04:41]`` minute headers of a ``dmesg --time-format=reltime`` chunk (line,
    month, day, hh:mm), so that a ``+delta`` line can take the minute of the header above it even
    when the header is no fault line or sits in an earlier chunk. Only reltime chunks are
    scanned."""
    rel = _REL_FIRST.match(buf) or (
        cand.height
        and cand["raw"].str.contains(r"^[^\[]{0,20}\[(?:\s*\+\d|[A-Z][a-z]{2} ?\d)").any()
    )
    if not rel:
        return pl.DataFrame()
    found = [(m.start(), *(g.decode() for g in m.groups())) for m in _REL_HEADER.finditer(buf)]
    if not found:
        return pl.DataFrame()
    newlines = np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)
    at = np.array([f[0] for f in found], dtype=np.int64)
    return pl.DataFrame(
        {
            "line": np.searchsorted(newlines, at) + (ctx.line_offset + 1),
            "h_rmon": [f[1] for f in found],
            "h_rday": [f[2] for f in found],
            "h_rhm": [f[3] for f in found],
        },
        schema={"line": pl.Int64, "h_rmon": pl.Utf8, "h_rday": pl.Utf8, "h_rhm": pl.Utf8},
    )


_MAX_UPTIME_S = 100 * 365 * 86400  # an uptime beyond a century is a corrupt stamp


def _times(df: pl.DataFrame, headers: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Add ``time`` (naive UTC) and ``time_error`` (why it is null, true for that line) from the
    prefix groups, the file's boot banners (``setting system clock``) and reltime headers."""
    tz = ctx.tz or "UTC"
    ref = ctx.time or ctx.mtime
    df = df.sort("line")
    # a reltime ``+delta`` line takes the minute of the latest header above it
    if headers.height:
        df = df.join_asof(
            headers.sort("line"), on="line", strategy="backward", check_sortedness=False
        )
    else:
        df = df.with_columns(
            h_rmon=pl.lit(None, pl.Utf8), h_rday=pl.lit(None, pl.Utf8), h_rhm=pl.lit(None, pl.Utf8)
        )
    rel_own = pl.format("{} {} {}:00", "rmon", "rday", "rhm")
    rel_hdr = pl.when(pl.col("rdelta").is_not_null()).then(
        pl.format("{} {} {}:00", "h_rmon", "h_rday", "h_rhm")
    )
    df = df.with_columns(rel=pl.coalesce(rel_own, rel_hdr))
    # a space in a strptime format matches any run of spaces (``Aug  2``): no normalising pass
    # a log is written in time order per host: that order decides the hour a DST fall-back repeats
    order = [pl.col("ihost").fill_null("")]
    ctime, ctime_dst = local_to_utc(pl.col("ctime"), tz, "%a %b %d %H:%M:%S %Y", order)
    iso_base = pl.col("iso").str.replace(" ", "T").str.replace(",", ".")
    off = pl.col("off").str.extract_groups(r"^([+-])(\d\d):?(\d\d)$")
    off_s = pl.when(off.struct.field("1") == "-").then(-1).otherwise(1) * (
        off.struct.field("2").cast(pl.Int64) * 3600 + off.struct.field("3").cast(pl.Int64) * 60
    )
    iso_naive = iso_base.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    iso_local, iso_dst = local_to_utc(iso_base, tz, "%Y-%m-%dT%H:%M:%S%.f", order)
    iso = (
        pl.when(pl.col("off") == "Z")
        .then(iso_naive)
        .when(pl.col("off").is_not_null())
        .then(iso_naive - pl.duration(seconds=off_s))
        .otherwise(iso_local)
    )
    epoch_us = pl.coalesce(
        (pl.col("unix").cast(pl.Float64, strict=False) * 1e6).round().cast(pl.Int64, strict=False),
        pl.col("j_rt").cast(pl.Int64, strict=False),
    )
    epoch = pl.when(epoch_us.abs() < _MAX_UPTIME_S * 10**6).then(
        pl.from_epoch(epoch_us, time_unit="us")
    )
    up_s = pl.coalesce(
        pl.col("up").cast(pl.Float64, strict=False),
        pl.col("kmsg").cast(pl.Float64, strict=False) / 1e6,
        pl.col("j_mono").cast(pl.Float64, strict=False) / 1e6,
    )
    if ref is not None:
        fmt = "%Y %b %d %H:%M:%S%.f"
        sys_s = pl.coalesce("sys", "rel")
        this_year, this_dst = local_to_utc(pl.lit(f"{ref.year} ") + sys_s, tz, fmt, order)
        last_year, last_dst = local_to_utc(pl.lit(f"{ref.year - 1} ") + sys_s, tz, fmt, order)
        # clock skew / zone slack before deciding the line belongs to the previous year
        late = pl.lit(ref + timedelta(days=1), dtype=pl.Datetime("us"))
        this_wall = (pl.lit(f"{ref.year} ") + sys_s).str.to_datetime(
            fmt, strict=False, time_unit="us"
        )
        this_first = (this_wall <= late).fill_null(False)
        sys_t = pl.when(this_first).then(this_year).otherwise(last_year)
        sys_dst = pl.when(this_first).then(this_dst).otherwise(last_dst)
    else:
        sys_t = pl.lit(None, dtype=pl.Datetime("us"))
        sys_dst = pl.lit(None, pl.Utf8)
    has_abs = pl.any_horizontal(
        pl.col(c).is_not_null() for c in ("ctime", "iso", "unix", "j_rt", "sys", "rel")
    )
    df = df.with_columns(
        abs_t=pl.when(pl.col("ctime").is_not_null())
        .then(ctime)
        .when(pl.col("iso").is_not_null())
        .then(iso)
        .when(pl.col("unix").is_not_null() | pl.col("j_rt").is_not_null())
        .then(epoch)
        .when(pl.col("sys").is_not_null() | pl.col("rel").is_not_null())
        .then(sys_t),
        has_abs=has_abs,
        up_us=pl.when(up_s.is_between(0, _MAX_UPTIME_S)).then((up_s * 1e6).round().cast(pl.Int64)),
        has_up=up_s.is_not_null(),
    )
    df = _boot_times(df, ctx)
    since_boot = pl.col("boot") + pl.duration(microseconds=pl.col("up_us"))
    time = (
        pl.when(pl.col("has_abs"))
        .then(pl.col("abs_t"))
        .when(pl.col("has_up"))
        .then(since_boot)
        .when(pl.col("rdelta").is_null())  # a reltime '+delta' line without its header has no time
        .then(pl.lit(ctx.time, dtype=pl.Datetime("us")))
    )
    no_year = "timestamp has no year and no reference time; pass --time"
    err = (
        pl.when(pl.col("sys").is_not_null() & (ref is None))
        .then(pl.lit("syslog " + no_year))
        .when(pl.col("rel").is_not_null() & (ref is None))
        .then(pl.lit("dmesg reltime " + no_year))
        .when(pl.col("rdelta").is_not_null() & pl.col("rel").is_null())
        .then(
            pl.lit(
                "dmesg reltime '+delta' stamp with no '[Mon DD HH:MM]' header line before it "
                "in the file"
            )
        )
        .when(pl.col("j_rt").is_not_null() | pl.col("unix").is_not_null())
        .then(pl.lit("epoch timestamp out of range"))
        .when(~pl.col("has_abs") & pl.col("has_up") & pl.col("up_us").is_null())
        .then(pl.format("uptime stamp {} s is out of range", up_s.cast(pl.Utf8)))
        .when(~pl.col("has_abs") & pl.col("has_up"))
        .then(
            pl.lit(
                "uptime stamp and no boot time (no 'setting system clock' line before it in "
                "this boot); pass the boot time as --time"
            )
        )
        .when(pl.col("dlt").is_not_null())
        .then(
            pl.lit(
                "dmesg delta stamp gives only the gap to the previous line, no time; pass --time"
            )
        )
        .when(~pl.col("has_abs"))
        .then(pl.lit("kernel line without a timestamp; pass --time"))
        .when(pl.col("ctime").is_not_null())
        .then(pl.coalesce(ctime_dst, pl.lit("unparseable local timestamp")))
        .when(pl.col("iso").is_not_null())
        .then(pl.coalesce(iso_dst, pl.lit("unparseable local timestamp")))
        .otherwise(pl.coalesce(sys_dst, pl.lit("unparseable local timestamp")))
    )
    df = df.with_columns(time=time)
    return df.with_columns(
        time_error=pl.when(pl.col("time").is_null())
        .then(err)
        .otherwise(implausible_time(pl.col("time"), ctx))
    )


def _boot_times(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """``boot`` per line: the boot the latest ``setting system clock to ... (epoch)`` banner
    above it in the same boot dates (banner clock minus banner uptime), else
    ``ctx.options['boot_time']``, else ``ctx.time``. A new boot starts at a ``Linux version``
    line or where the uptime goes backwards."""
    fallback = _to_datetime(ctx.options.get("boot_time")) or ctx.time
    fb = pl.lit(fallback, dtype=pl.Datetime("us"))
    banners = df.filter((pl.col("kind") == "boot_clock") & pl.col("up_us").is_not_null())
    if banners.height == 0:
        return df.with_columns(boot=fb)
    prev_up = pl.col("up_us").shift(1).forward_fill()
    restart = (pl.col("kind") == "boot_start") | (pl.col("up_us") < prev_up).fill_null(False)
    df = df.with_columns(_boot_no=restart.cum_sum())
    clock_us = pl.col("epoch").cast(pl.Int64, strict=False) * 1_000_000
    banners = df.filter((pl.col("kind") == "boot_clock") & pl.col("up_us").is_not_null()).select(
        "line", "_boot_no", b_boot=pl.from_epoch(clock_us - pl.col("up_us"), time_unit="us")
    )
    df = df.join_asof(
        banners, on="line", by="_boot_no", strategy="backward", check_sortedness=False
    )
    return df.with_columns(boot=pl.coalesce("b_boot", fb)).drop("_boot_no", "b_boot")


def _classify(df: pl.DataFrame) -> pl.DataFrame:
    """Per candidate line: kind (xid/sxid/host fault/identity/None) and its fields."""
    body = pl.col("body")
    # each regex runs once, and only on lines holding its literal: the groups are materialised
    # before the many expressions that read them
    parts = {
        "_s": ("nvidia-nvswitch", _SXID), "_m": ("mlx5_core ", _MLX5), "_mce": ("mce: ", _MCE),
        "_ed": ("EDAC ", _EDAC), "_nv": ("nvme", _NVME), "_ga": ("NVRM: GPU at", _GPU_AT),
        "_cl": ("setting system clock", _CLOCK),
    }  # fmt: skip
    after_xid = body.str.split_exact("NVRM: Xid", 1).struct.field("field_1")
    df = df.with_columns(
        _x=after_xid.str.extract_groups(_XID),
        _xa=after_xid,
        **{
            k: pl.when(body.str.contains(lit, literal=True)).then(body).str.extract_groups(rx)
            for k, (lit, rx) in parts.items()
        },
    ).with_columns(_xmsg=pl.col("_xa").str.slice(pl.col("_x").struct.field("head").str.len_chars()))
    x, s, m, mce, ed, nv, ga = (pl.col(k) for k in ("_x", "_s", "_m", "_mce", "_ed", "_nv", "_ga"))
    mlx_msg = m.struct.field("msg")
    mce_msg = mce.struct.field("msg")
    pid = x.struct.field("pid")
    pname = x.struct.field("pname").str.strip_chars()
    host_code = (
        pl.when(mlx_msg.str.contains(r"(?i)\blink down\b"))
        .then(pl.lit("mlx5_link_down"))
        .when(mlx_msg.str.contains(r"(?i)port module event\[error\]"))
        .then(pl.lit("mlx5_port_module_error"))
        .when(
            mce_msg.str.contains(
                r"(?i)machine check exception|machine check: processor context corrupt"
            )
        )
        .then(pl.lit("mce"))
        .when(mce_msg.str.contains(r"(?i)machine check events logged"))
        .then(pl.lit("mce_corrected"))
        .when(ed.struct.field("kind") == "UE")
        .then(pl.lit("edac_ue"))
        .when(nv.struct.field("dev").is_not_null())
        .then(pl.lit("nvme_controller_down"))
    )
    xid_like = body.str.contains("NVRM: Xid")
    sxid_like = body.str.contains(r"nvidia-nvswitch\d+: SX[Ii][Dd]")
    kind = (
        pl.when(x.struct.field("code").is_not_null())
        .then(pl.lit("xid"))
        .when(xid_like)
        .then(pl.lit("bad_xid"))
        .when(s.struct.field("code").is_not_null())
        .then(pl.lit("sxid"))
        .when(sxid_like)
        .then(pl.lit("bad_sxid"))
        .when(host_code.is_not_null())
        .then(pl.lit("host"))
        .when(ga.struct.field("uuid").is_not_null())
        .then(pl.lit("gpu_at"))
        .when(pl.col("_cl").struct.field("epoch").is_not_null())
        .then(pl.lit("boot_clock"))
        .when(body.str.starts_with("Linux version "))
        .then(pl.lit("boot_start"))
    )
    sev_word = s.struct.field("msg").str.extract(r"^(?i)(fatal|non-?fatal)\b").str.to_lowercase()
    edac_on = ed.struct.field("msg").str.extract(r"\bon (\S+)")
    return df.with_columns(
        kind=kind,
        code=pl.coalesce(x.struct.field("code"), s.struct.field("code"), host_code),
        pci_raw=pl.coalesce(
            x.struct.field("pci"),
            s.struct.field("pci"),
            m.struct.field("pci"),
            ga.struct.field("pci"),
        ),
        message=pl.coalesce(
            pl.col("_xmsg"),
            s.struct.field("msg"),
            mlx_msg,
            mce_msg,
            pl.concat_str(
                ed.struct.field("n"),
                pl.lit(" "),
                ed.struct.field("kind"),
                pl.lit(" "),
                ed.struct.field("msg"),
            ),
            nv.struct.field("msg"),
        ),
        component_id=pl.coalesce(
            s.struct.field("dev"),
            m.struct.field("ifname"),
            mce_msg.str.extract(r"^(CPU \d+)"),
            pl.coalesce(edac_on, ed.struct.field("mc")),
            nv.struct.field("dev"),
        ),
        pid=pl.when(pid.str.contains(r"^\d+$")).then(pid.cast(pl.Int64, strict=False)),
        process=pl.when(
            pname.is_not_null() & ~pname.is_in(["<unknown>", "'<unknown>'", "N/A", ""])
        ).then(pname),
        uuid_at=ga.struct.field("uuid"),
        sxid_severity=pl.when(sev_word == "fatal")
        .then(pl.lit("fatal"))
        .when(sev_word.is_not_null())
        .then(pl.lit("warning")),
        epoch=pl.col("_cl").struct.field("epoch"),
    ).drop(*parts, "_x", "_xa", "_xmsg")


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    return _finish(_extract(data, ctx), ctx)


def merge(parts: list[pl.DataFrame], ctx: ParseContext) -> ParseResult:
    """One file's chunks (``_extract`` of each, in file order) finished as one: collapse, repeat
    merging, exact duplicates, boot banners, reltime headers, UUIDs and cause links then cross
    chunk boundaries, so the events do not depend on how the runner cut the file."""
    return _finish(pl.concat(parts, how="diagonal_relaxed"), ctx)


# kinds of candidate lines that are records (a row or a quarantine row each); the others
# (``gpu_at`` identity lines, ``boot_clock`` banners, reltime headers) only inform them
_RECORD_KINDS = ["xid", "sxid", "host", "bad_xid", "bad_sxid", "bad_nul"]


def _extract(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """The chunk's candidate lines, classified, with their raw stamp fields (times are resolved
    in ``_finish``, where the whole file's boot banners and reltime headers are known)."""
    buf = valid_utf8(data)
    cand = _lines(buf, ctx)
    nul = _nul_lines(buf, ctx) if buf.find(b"\x00") >= 0 else None
    if nul is not None:  # lines with NUL bytes are classified without them, and quarantined
        cand = pl.concat(
            [cand.filter(~pl.col("raw").str.contains("\x00", literal=True)), nul], how="diagonal"
        ).sort("line")
    headers = _reltime_headers(buf, cand, ctx)
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
        cand.with_columns(_p=pl.col("_text").str.extract_groups(_PREFIX))
        .with_columns(
            **{k: prefix.struct.field(k) for k in _PREFIX_GROUPS},
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
    cand = _classify(cand).filter(pl.col("kind").is_not_null()).drop("body")
    if nul is not None:
        damaged = pl.col("nul_raw").is_not_null()
        cand = (
            cand.filter(~damaged | pl.col("kind").is_in(_RECORD_KINDS))
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


def _finish(lines: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    if lines.height == 0:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    hcols = ["h_rmon", "h_rday", "h_rhm"]
    is_header = pl.col("kind") == "rel_header"
    headers = (
        lines.filter(is_header).select("line", *hcols)
        if "h_rmon" in lines.columns
        else pl.DataFrame()
    )
    cand = _times(lines.filter(~is_header).drop(hcols, strict=False), headers, ctx)
    # the same line twice (overlapping rotated files concatenated) is one record: the repeat is
    # a duplicate of what its first occurrence made (see the module docstring)
    cand, repeats = drop_repeats(cand, ["raw", "time"])
    host = ctx.host or host_from_filename(ctx.path)
    cand = cand.with_columns(
        host=pl.coalesce(pl.col("ihost"), pl.lit(host, dtype=pl.Utf8)),
        pci_bus=normalize_pci(pl.col("pci_raw")),
    )
    records = cand.filter(pl.col("kind").is_in(_RECORD_KINDS))
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
    events = _describe(_attach_uuid(events, gpu_at))
    window = float(ctx.options.get("xid_merge_window_s", DEFAULT_MERGE_WINDOW_S))
    rows = _merge_repeats(_collapse_multiline(events), window)
    rows = rows.with_columns(
        cluster=pl.lit(ctx.cluster), source=pl.lit("kernel"), source_file=pl.lit(ctx.path)
    )
    rows = rows.with_columns(event_id=_event_ids(rows))
    rows = _link_causes(rows)
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


def _describe(events: pl.DataFrame) -> pl.DataFrame:
    """Event type, class, severity and action: XIDs from the catalogue, the rest from tables."""
    cat = xid_catalog().select(
        xid="xid", cat_class="component_class", cat_severity="severity", cat_action="action"
    )
    host = pl.DataFrame(
        {
            "code": list(HOST_FAULTS),
            "h_type": [v[0] for v in HOST_FAULTS.values()],
            "h_class": [v[1] for v in HOST_FAULTS.values()],
            "h_severity": [v[2] for v in HOST_FAULTS.values()],
        }
    )
    ev = (
        events.with_columns(
            xid=pl.when(pl.col("kind") == "xid").then(pl.col("code").cast(pl.Int32, strict=False))
        )
        .join(cat, on="xid", how="left")
        .join(host, on="code", how="left")
    )
    is_xid = pl.col("kind") == "xid"
    is_sxid = pl.col("kind") == "sxid"
    # NVLink XIDs name their own severity (``Fatal`` / ``Nonfatal``) per line.
    nvlink_word = pl.col("message").str.extract(r"(?i)\b(non-?fatal|fatal)\b").str.to_lowercase()
    xid_sev = (
        pl.when((pl.col("cat_class") == "nvlink") & (nvlink_word == "fatal"))
        .then(pl.lit("fatal"))
        .when((pl.col("cat_class") == "nvlink") & nvlink_word.is_not_null())
        .then(pl.lit("warning"))
        .otherwise(pl.col("cat_severity").fill_null(UNKNOWN_XID["severity"]))
    )
    return ev.with_columns(
        event_type=pl.when(is_xid)
        .then(pl.lit("xid"))
        .when(is_sxid)
        .then(pl.lit("sxid"))
        .otherwise("h_type"),
        component_class=pl.when(is_xid)
        .then(pl.col("cat_class").fill_null(UNKNOWN_XID["component_class"]))
        .when(is_sxid)
        .then(pl.lit("nvswitch"))
        .otherwise("h_class"),
        severity=pl.when(is_xid)
        .then(xid_sev)
        .when(is_sxid)
        .then(pl.col("sxid_severity"))  # null on continuation lines: they do not vote
        .otherwise("h_severity"),
        action=pl.when(is_xid).then(pl.col("cat_action")),
        component_id=pl.when(is_xid)
        .then(pl.col("pci_bus"))
        .otherwise(pl.coalesce("component_id", "pci_bus")),
        device=pl.coalesce("pci_bus", "component_id", pl.lit("")),
        hk=pl.col("host").fill_null(""),
        link=pl.when(is_sxid | (is_xid & (pl.col("cat_class") == "nvlink"))).then(
            _link_number(pl.col("message"))
        ),
    )


def _link_number(message: pl.Expr) -> pl.Expr:
    """The link an NVLink XID or SXid line names (``Link 13``; SXid ``Severity`` lines say
    ``Engine instance 13``); ``Link -1`` (no particular link) is null."""
    g = message.str.extract_groups(_LINK)
    n = pl.coalesce(g.struct.field("1"), g.struct.field("2")).cast(pl.Int32, strict=False)
    return pl.when(n >= 0).then(n)


_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2, "fatal": 3}


def _worst(severity: pl.Expr) -> pl.Expr:
    """The worst severity of a group (an aggregation; nulls do not vote)."""
    rank = severity.replace_strict(_SEVERITY_RANK, default=None, return_dtype=pl.Int8)
    return severity.sort_by(rank, nulls_last=False).last()


_KEY = [
    "hk",
    "event_type",
    "device",
    "code",
    "lk",
]  # one event source: collapse and merge stay within it


def _runs(ev: pl.DataFrame, order: list[str], starts: pl.Expr) -> pl.DataFrame:
    """Sort by ``_KEY`` then ``order`` and number runs of rows: a run starts at a new key or
    where ``starts`` (which may read ``prev_*`` of the previous row) is true. One sort and
    shifts, not windows over four string columns."""
    ev = ev.sort([*_KEY, *order])
    same_key = pl.all_horizontal([(pl.col(k) == pl.col(k).shift(1)).fill_null(False) for k in _KEY])
    ev = ev.with_columns(prev_t=pl.col("time").shift(1), prev_m=pl.col("message").shift(1))
    return ev.with_columns(run=(~same_key | starts.fill_null(True)).cum_sum())


def _collapse_multiline(ev: pl.DataFrame) -> pl.DataFrame:
    """Lines of one event -> one row: same host/device/code, within ``COLLAPSE_S`` of the
    previous line and with a different text (an identical text is a repeat, not a continuation)."""
    source = _KEY[:-1]
    # an SXid ``Data`` line names no link: it continues the line above it
    ev = (
        ev.sort([*source, "line"])
        .with_columns(
            link=pl.when(pl.col("event_type") == "sxid")
            .then(pl.col("link").forward_fill().over(source))
            .otherwise("link")
        )
        .with_columns(lk=pl.col("link").fill_null(-1))
    )
    starts = ((pl.col("time") - pl.col("prev_t")).abs() > pl.duration(seconds=COLLAPSE_S)) | (
        pl.col("message") == pl.col("prev_m")
    )
    firsts = [
        *_KEY,
        "time",
        "host",
        "component_class",
        "component_id",
        "pci_bus",
        "uuid",
        "link",
        "action",
        "pid",
        "process",
        "line",
        "raw",
    ]
    return (
        _runs(ev, ["line"], starts)
        .group_by("run")
        .agg(
            *[pl.col(c).first() for c in firsts],
            severity=_worst(pl.col("severity")),
            message=pl.col("message")
            .unique(maintain_order=True)
            .str.join(" | ")
            .str.slice(0, MESSAGE_LIMIT),
        )
        .drop("run")
        .with_columns(pl.col("severity").fill_null(SXID_DEFAULT_SEVERITY))
    )


def _merge_repeats(ev: pl.DataFrame, window_s: float) -> pl.DataFrame:
    """Repeats of the same (host, device, code, link) less than ``window_s`` after the previous one
    merge into the first, with ``count`` events."""
    starts = (pl.col("time") - pl.col("prev_t")) > pl.duration(microseconds=int(window_s * 1e6))
    out = (
        _runs(ev, ["time", "line"], starts)
        .group_by("run")
        .agg(
            pl.all().exclude("run", "prev_t", "prev_m", "severity").first(),
            severity=_worst(pl.col("severity")),
            count=pl.len().cast(pl.Int32),
        )
    )
    return out.drop("run").sort("line").rename({"line": "source_line"})


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


def _link_causes(rows: pl.DataFrame) -> pl.DataFrame:
    """``caused by previous Xid N``: the latest earlier event with code N on the same GPU,
    else on the same host."""
    cause = rows["message"].str.extract(r"caused by previous Xid (\d+)")
    rows = rows.with_columns(cause_code=cause, hk=pl.col("host").fill_null(""))
    if rows["cause_code"].null_count() == rows.height:
        return rows.with_columns(caused_by=pl.lit(None, dtype=pl.Utf8))
    xids = (
        rows.filter(pl.col("event_type") == "xid")
        .select("hk", "time", cause_code="code", cause_pci="pci_bus", cause_id="event_id")
        .sort("time")
    )
    want = rows.filter(pl.col("cause_code").is_not_null()).select(
        "event_id", "hk", "time", "pci_bus", "cause_code"
    )
    same_gpu = (
        want.sort("time")
        .join_asof(
            xids.rename({"cause_pci": "pci_bus"}),
            on="time",
            by=["hk", "pci_bus", "cause_code"],
            strategy="backward",
            check_sortedness=False,
        )
        .select("event_id", gpu_cause="cause_id")
    )
    same_host = (
        want.sort("time")
        .join_asof(
            xids.drop("cause_pci"),
            on="time",
            by=["hk", "cause_code"],
            strategy="backward",
            check_sortedness=False,
        )
        .select("event_id", host_cause="cause_id")
    )
    return (
        rows.join(same_gpu, on="event_id", how="left")
        .join(same_host, on="event_id", how="left")
        .with_columns(caused_by=pl.coalesce("gpu_cause", "host_cause"))
    )


_HW_COLUMNS = set(TABLES["hw_events"].columns)

_SNIFF_XID = re.compile(rb"NVRM: Xid|nvidia-nvswitch\d+: SX[Ii][Dd]")
_SNIFF_LINE = re.compile(
    rb"(?m)^(?:<\d+>)?(?:[a-z0-9]+ *:[a-z]+ *: )?(?:\[\s*\d+\.\d+(?: <[^>]*>)?\] |"
    rb"\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}(?: <[^>]*>)?\] |"
    rb"\d+,\d+,\d+,[-c+]*;|\[[A-Z][a-z]{2} ?\d{1,2} \d\d:\d\d\] |\[\s*\+\d+\.\d+\] |"
    rb"\S+ +\S+ \S+ \S+ kernel: |1 \S+ \S+ kernel |"
    rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+[+-]\d\d:\d\d |"
    rb"(?:\d{4}-\d\d-\d\dT|\d{9,11}\.)\S+ \S+ kernel: )"
)


def detect(head: bytes, name: str) -> int:
    """Kernel logs: any XID/SXID line is decisive; otherwise most lines must carry a
    dmesg / kmsg / syslog-kernel prefix."""
    if _SNIFF_XID.search(head):
        return 90
    lines = [ln for ln in head.split(b"\n")[:200] if ln.strip()]
    if not lines:
        return 0
    hits = sum(
        1 for ln in lines if _SNIFF_LINE.match(ln)
    )  # per sniffed line (<= 200), not per record
    return 60 if hits >= 0.8 * len(lines) else 0


FORMAT = FormatSpec(
    name="kernel",
    primary="hw_events",
    parse=parse,
    detect=detect,
    description=(
        "kernel logs (dmesg, syslog, journald, /dev/kmsg): NVIDIA XID / SXID, mlx5 link, MCE, "
        "EDAC, NVMe"
    ),
    line_oriented=True,
    extract=_extract,
    merge=merge,
)
