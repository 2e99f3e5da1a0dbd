"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output to ``gpu_samples``.

One record = one numeric field of one GPU row (long form, metric = the nvidia-smi field name such
as ``temperature.gpu``; ``analysis.telemetry.metrics.CANONICAL_METRICS`` maps them to
covariates).
Units are stripped from headers (``memory.used [MiB]``) and values (``5 %``, ``250.00 W``);
``N/A``, ``[Not Supported]``, ``[Unknown Error]`` and the other bracketed blanks are null values
(still rows). Identity fields (``index``, ``uuid``, ``name``, ``timestamp``, ``pci.bus_id``,
version strings ...) become columns or are dropped, not samples. A header line may appear several
times (``-l`` loops); a headerless file needs ``--fields`` (the ``--query-gpu`` list), else its
rows are quarantined with that reason. Lines starting with ``#`` are comments. The sample time is
the ``timestamp`` column if queried (local time in ``--tz``), else ``--time``, else file mtime;
a row whose ``timestamp`` cannot be read, or lies outside the plausible window, is quarantined
(never re-dated). Headers of current drivers are accepted whole: 590.x prints 212 columns with
digits and capitals in names (``c2c.mode``, ``pci.baseClass``, ``fabric.cliqueId``); a field
named twice keeps its first column. Text attributes of those drivers (``fabric.state``,
``platform.*``, ``hostname`` ...) are not samples; ``hostname`` names the host when no
``--host`` is given. An exact duplicate of an earlier data line gives ordinary rows here: the
warehouse stores its samples once and counts the repeats as duplicates (``rows_duplicate``).
"""

from __future__ import annotations

import re

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import normalize_pci
from ingest.base import numbered_lines
from ingest.base import stand_ins
from ingest.gpu_labels import host_from_path
from ingest.times import local_to_utc
from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

SOURCE = "nvidia-smi"
IDENTITY_FIELDS = {"index", "uuid", "gpu_uuid", "name", "gpu_name", "timestamp", "hostname"}
# Text attributes that are neither identity nor measurements: not samples.
TEXT_FIELDS = {
    "pci.bus_id", "gpu_bus_id", "pci.bus", "pci.domain", "pci.device", "pci.device_id",
    "pci.sub_device_id", "serial", "gpu_serial", "driver_version", "vbios_version",
    "inforom.img", "inforom.oem", "inforom.ecc", "inforom.pwr", "compute_mode", "display_mode",
    "display_active", "persistence_mode", "accounting.mode", "mig.mode.current",
    "mig.mode.pending", "gom.current", "gom.pending", "driver_model.current",
    "driver_model.pending", "count", "compute_cap", "addressing_mode",
    # 590.x: identifiers and states that are text, not measurements (--help-query-gpu)
    "pci.baseclass", "pci.subclass", "gpu_recovery_action", "inforom.checksum_validation",
    "fabric.state", "fabric.status", "fabric.cliqueid", "fabric.clusteruuid",
    "platform.chassis_serial_number", "platform.slot_number", "platform.tray_index",
    "platform.host_id", "platform.peer_type", "platform.module_id", "platform.gpu_fabric_guid",
}  # fmt: skip
BLANKS = (
    r"^(N/A|\[N/A\]|\[Not Supported\]|\[Unknown Error\]|\[Insufficient Permissions\]|\[GPU "
    r"is lost\]|\[Requested functionality has been deprecated\])$"
)
_NUMBER = r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:\s*[A-Za-z%/]+)?$"
_TIME_FORMAT = "%Y/%m/%d %H:%M:%S%.f"


# A field name as nvidia-smi prints it in a header: dotted, digits and capitals allowed
# (``c2c.mode``, ``pci.baseClass``), optionally followed by its unit (``memory.used [MiB]``).
_NAME = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*(?:\s*\[[^\],]*\])?"
_HEADER_SHAPE = rf"^\s*{_NAME}(?:\s*,\s*{_NAME})*\s*$"


def _field_name(header: str) -> str:
    """``memory.used [MiB]`` -> ``memory.used``."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header.strip()).strip().lower()


def _is_header(line: str) -> bool:
    """A header line: every field is name-shaped and at least one is unmistakably a field name
    (dotted, with a unit, or a known identity/text field), so that a data row of bare words
    (``Tesla, P0``) is not taken for one."""
    if not re.fullmatch(_HEADER_SHAPE, line):
        return False
    fields = [f.strip() for f in line.split(",")]
    return any(
        "." in f or "[" in f or _field_name(f) in IDENTITY_FIELDS | TEXT_FIELDS for f in fields
    )


def _segment(rows: pl.DataFrame, fields: list[str], ctx: ParseContext):
    """Long-form samples and quarantine rows of data lines that share one header."""
    n = len(fields)
    split = rows.with_columns(cells=pl.col("raw").str.split(","))
    wrong = split.filter(pl.col("cells").list.len() != n)
    split = split.filter(pl.col("cells").list.len() == n)
    quarantine = wrong.select(
        "line",
        "raw",
        error=pl.format(
            "expected {} comma-separated fields, found {}", pl.lit(n), pl.col("cells").list.len()
        ),
    )
    # a field queried twice prints twice: its first column is the one kept. Columns are
    # prefixed so that no field name can collide with the frame's own columns.
    first = {}
    for i, f in enumerate(fields):
        first.setdefault(f, i)
    wide = split.with_columns(
        [pl.col("cells").list.get(i).str.strip_chars().alias(f"f:{f}") for f, i in first.items()]
    ).drop("cells")

    def ident(*names):
        for nm in names:
            if nm in first:
                return pl.col(f"f:{nm}")
        return pl.lit(None, dtype=pl.Utf8)

    stamp = ident("timestamp")
    if "timestamp" in first:
        # a --loop log is written in time order per host: that order places a repeated DST hour
        own, dst = local_to_utc(stamp, ctx.tz, _TIME_FORMAT, [ident("hostname").fill_null("")])
        time = own
        time_error = (
            pl.when(dst.is_not_null())
            .then(dst)
            .when(own.is_null())
            .then(
                pl.format(
                    "unreadable timestamp '{}' (want YYYY/MM/DD HH:MM:SS.fff)", stamp.fill_null("")
                )
            )
            .otherwise(implausible_time(own, ctx))
        )
    else:
        time = pl.lit(ctx.time or ctx.mtime, dtype=pl.Datetime("us"))
        time_error = (
            pl.lit("no timestamp column and no --time or file time was given")
            if ctx.time is None and ctx.mtime is None
            else implausible_time(time, ctx)
        )
    hostname = ident("hostname")
    wide = wide.with_columns(
        gpu=ident("index").cast(pl.Int32, strict=False),
        uuid=ident("uuid", "gpu_uuid"),
        pci_bus=normalize_pci(ident("pci.bus_id", "gpu_bus_id")),
        model=ident("name", "gpu_name"),
        host=pl.when(hostname.str.contains(BLANKS) | (hostname == ""))
        .then(None)
        .otherwise(hostname),
        time=time,
        time_error=time_error,
    )
    metrics = [f"f:{f}" for f in first if f not in IDENTITY_FIELDS and f not in TEXT_FIELDS]
    if not metrics:
        return pl.DataFrame(), quarantine
    long = wide.unpivot(
        index=["line", "raw", "gpu", "uuid", "pci_bus", "model", "host", "time", "time_error"],
        on=metrics,
        variable_name="metric",
        value_name="text",
    ).with_columns(pl.col("metric").str.strip_prefix("f:"))
    text = pl.col("text")
    pstate = text.str.extract(r"^P(\d+)$", 1)
    hexval = text.str.extract(r"^0x([0-9A-Fa-f]+)$", 1)
    enabled = text.str.to_lowercase().replace_strict(
        {"enabled": 1.0, "disabled": 0.0, "active": 1.0, "not active": 0.0, "yes": 1.0, "no": 0.0},
        default=None,
        return_dtype=pl.Float64,
    )
    number = pl.coalesce(
        text.str.extract(_NUMBER, 1).cast(pl.Float64, strict=False),
        pstate.cast(pl.Float64),
        hexval.str.to_integer(base=16, strict=False).cast(pl.Float64),
        enabled,
    )
    blank = text.str.contains(BLANKS) | (text == "")
    long = long.with_columns(value=number, blank=blank)
    long = long.with_columns(
        error=pl.when(pl.col("time_error").is_not_null())
        .then(pl.col("time_error"))
        .when(pl.col("value").is_null() & ~pl.col("blank"))
        .then(pl.format("non-numeric value for {}: {}", "metric", "text"))
        .when(~pl.col("value").is_finite().fill_null(True))
        .then(pl.format("non-finite value for {}: {}", "metric", "text"))
    )
    bad = long.filter(pl.col("error").is_not_null()).select("line", "raw", "error")
    good = long.filter(pl.col("error").is_null()).with_columns(
        value=pl.when(pl.col("blank")).then(None).otherwise(pl.col("value"))
    )
    return good.drop("time_error"), pl.concat([quarantine, bad])


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    lines = numbered_lines(data, ctx)
    lines = lines.filter(
        (pl.col("raw").str.strip_chars() != "") & ~pl.col("raw").str.starts_with("#")
    )
    # header lines are few: the shape regex runs over every line, the final judgement per
    # distinct candidate; data lines are then segmented by the cumulative header count
    candidates = lines.filter(pl.col("raw").str.contains(_HEADER_SHAPE))["raw"].unique()
    header_lines = [h for h in candidates.to_list() if _is_header(h)]
    lines = lines.with_columns(is_header=pl.col("raw").is_in(header_lines)).with_columns(
        segment=pl.col("is_header").cast(pl.Int32).cum_sum()
    )
    headers = lines.filter(pl.col("is_header"))
    data_lines = lines.filter(~pl.col("is_header"))
    given = [f.strip().lower() for f in ctx.fields] if ctx.fields else None
    samples = []
    quarantines = []
    for seg, rows in data_lines.group_by("segment", maintain_order=True):
        seg_id = seg[0]
        if seg_id > 0:
            header = headers.filter(pl.col("segment") == seg_id)
            fields = [_field_name(h) for h in header["raw"][0].split(",")]
        elif given:
            fields = given
        else:
            quarantines.append(
                rows.select(
                    "line",
                    "raw",
                    error=pl.lit(
                        "headerless nvidia-smi CSV (noheader): pass --fields with the --query-gpu "
                        "list"
                    ),
                )
            )
            continue
        good, bad = _segment(rows.select("line", "raw"), fields, ctx)
        if good.height:
            samples.append(good)
        quarantines.append(bad)
    host = ctx.host or host_from_path(ctx.path)
    if samples:
        out = (
            pl.concat(samples, how="diagonal")
            .with_columns(
                host=pl.lit(ctx.host, dtype=pl.Utf8)
                if ctx.host
                else pl.coalesce(pl.col("host"), pl.lit(host, dtype=pl.Utf8)),
                cluster=pl.lit(ctx.cluster),
                date=pl.col("time").dt.date(),
                source=pl.lit(SOURCE),
                source_file=pl.lit(ctx.path),
            )
            .drop("line", "raw", "text", "blank", "error")
        )
    else:
        out = pl.DataFrame()
    q = [x.cast(QUARANTINE_COLUMNS) for x in quarantines if x.height]
    quarantine = (
        quarantine_frame(*[pl.concat(q)[c] for c in ("line", "raw", "error")])
        if q
        else pl.DataFrame(schema=QUARANTINE_COLUMNS)
    )
    samples_df = conform("gpu_samples", out) if out.height else TABLES["gpu_samples"].empty()
    guessed = bool(
        samples
        and host
        and not ctx.host
        and pl.concat(samples, how="diagonal")["host"].is_null().any()
    )
    return ParseResult(
        tables={"gpu_samples": samples_df},
        quarantine=quarantine,
        records=samples_df.height + quarantine.height,
        stand_ins=stand_ins(ctx, samples_df, guessed),
    )


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    if re.search(
        r"^#?\s*(index|timestamp|name|uuid|pci\.bus_id), "
        r".*(temperature\.gpu|utilization\.gpu|memory\.used|power\.draw)",
        text,
        re.MULTILINE,
    ):
        return 90
    if "nvidia-smi" in name.lower() and name.lower().endswith(".csv"):
        return 50
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="gpu_samples",
    description="nvidia-smi --query-gpu=... --format=csv (with/without noheader, nounits)",
)
