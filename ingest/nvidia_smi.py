"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` output to ``gpu_samples``.

One record = one numeric field of one GPU row (long form, metric = the nvidia-smi field name such
as ``temperature.gpu``; ``analysis.telemetry.CANONICAL_METRICS`` maps them to covariates).
Units are stripped from headers (``memory.used [MiB]``) and values (``5 %``, ``250.00 W``);
``N/A``, ``[Not Supported]``, ``[Unknown Error]`` and the other bracketed blanks are null values
(still rows). Identity fields (``index``, ``uuid``, ``name``, ``timestamp``, ``pci.bus_id``,
version strings ...) become columns or are dropped, not samples. A header line may appear several
times (``-l`` loops); a headerless file needs ``--fields`` (the ``--query-gpu`` list), else its
rows are quarantined with that reason. Lines starting with ``#`` are comments. The sample time is
the ``timestamp`` column if queried (local time in ``--tz``), else ``--time``, else file mtime.
"""

from __future__ import annotations

import re

import polars as pl

from ingest.base import FormatSpec, ParseContext, ParseResult, normalize_pci, numbered_lines
from ingest.dcgm import host_from_path
from ingest.times import local_to_utc
from warehouse.schemas import QUARANTINE_COLUMNS, TABLES, conform, quarantine_frame

SOURCE = "nvidia-smi"
IDENTITY_FIELDS = {"index", "uuid", "gpu_uuid", "name", "gpu_name", "timestamp"}
# Text attributes that are neither identity nor measurements: not samples.
TEXT_FIELDS = {
    "pci.bus_id", "gpu_bus_id", "pci.bus", "pci.domain", "pci.device", "pci.device_id",
    "pci.sub_device_id", "serial", "gpu_serial", "driver_version", "vbios_version",
    "inforom.img", "inforom.oem", "inforom.ecc", "inforom.pwr", "compute_mode", "display_mode",
    "display_active", "persistence_mode", "accounting.mode", "mig.mode.current",
    "mig.mode.pending", "gom.current", "gom.pending", "driver_model.current",
    "driver_model.pending", "count", "compute_cap", "addressing_mode",
}  # fmt: skip
BLANKS = r"^(N/A|\[N/A\]|\[Not Supported\]|\[Unknown Error\]|\[Insufficient Permissions\]|\[GPU is lost\]|\[Requested functionality has been deprecated\])$"
_NUMBER = r"^([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:\s*[A-Za-z%/]+)?$"
_TIME_FORMAT = "%Y/%m/%d %H:%M:%S%.f"


def _field_name(header: str) -> str:
    """``memory.used [MiB]`` -> ``memory.used``."""
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", header.strip()).strip().lower()


def _is_header(first_field: str) -> bool:
    """A header's first field is a lowercase dotted field name (data starts with a number,
    a GPU name, a UUID or a timestamp)."""
    return bool(re.fullmatch(r"[a-z_]+(\.[a-z0-9_]+)*(\s*\[[^\]]*\])?", first_field))


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
    wide = split.with_columns(
        [pl.col("cells").list.get(i).str.strip_chars().alias(f) for i, f in enumerate(fields)]
    ).drop("cells")

    def ident(*names):
        for nm in names:
            if nm in fields:
                return pl.col(nm)
        return pl.lit(None, dtype=pl.Utf8)

    if "timestamp" in fields:
        own = local_to_utc(pl.col("timestamp"), ctx.tz, _TIME_FORMAT)
    else:
        own = pl.lit(None, dtype=pl.Datetime("us"))
    wide = wide.with_columns(
        gpu=ident("index").cast(pl.Int32, strict=False),
        uuid=ident("uuid", "gpu_uuid"),
        pci_bus=normalize_pci(ident("pci.bus_id", "gpu_bus_id")),
        model=ident("name", "gpu_name"),
        time=pl.coalesce(own, pl.lit(ctx.time or ctx.mtime, dtype=pl.Datetime("us"))),
    )
    metrics = [f for f in fields if f not in IDENTITY_FIELDS and f not in TEXT_FIELDS]
    if not metrics:
        return pl.DataFrame(), quarantine
    long = wide.unpivot(
        index=["line", "raw", "gpu", "uuid", "pci_bus", "model", "time"],
        on=metrics,
        variable_name="metric",
        value_name="text",
    )
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
        error=pl.when(pl.col("time").is_null())
        .then(pl.lit("no timestamp column and no --time or file time was given"))
        .when(pl.col("value").is_null() & ~pl.col("blank"))
        .then(pl.format("non-numeric value for {}: {}", "metric", "text"))
    )
    bad = long.filter(pl.col("error").is_not_null()).select("line", "raw", "error")
    good = long.filter(pl.col("error").is_null()).with_columns(
        value=pl.when(pl.col("blank")).then(None).otherwise(pl.col("value"))
    )
    return good, pl.concat([quarantine, bad])


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    lines = numbered_lines(data, ctx)
    lines = lines.filter(
        (pl.col("raw").str.strip_chars() != "") & ~pl.col("raw").str.starts_with("#")
    )
    # header lines are few: classify per distinct first field, then segment by cumulative count
    first = lines.select(pl.col("raw").str.split(",").list.first().str.strip_chars().unique())
    header_firsts = [f for f in first.to_series().to_list() if f and _is_header(f)]
    lines = lines.with_columns(
        is_header=pl.col("raw").str.split(",").list.first().str.strip_chars().is_in(header_firsts)
    ).with_columns(segment=pl.col("is_header").cast(pl.Int32).cum_sum())
    headers = lines.filter(pl.col("is_header"))
    given = [f.strip().lower() for f in ctx.fields] if ctx.fields else None
    samples, quarantines = [], []
    for seg, rows in lines.filter(~pl.col("is_header")).group_by("segment", maintain_order=True):
        seg_id = seg[0]
        if seg_id > 0:
            header = headers.filter(pl.col("segment") == seg_id)
            fields = [_field_name(h) for h in header["raw"][0].split(",")]
            if len(set(fields)) != len(fields) or not all(_is_header(f) for f in fields):
                quarantines.append(
                    pl.concat(
                        [header.select("line", "raw"), rows.select("line", "raw")]
                    ).with_columns(
                        error=pl.lit(
                            "no valid nvidia-smi header above this line (fields must be distinct names)"
                        )
                    )
                )
                continue
        elif given:
            fields = given
        else:
            quarantines.append(
                rows.select(
                    "line", "raw",
                    error=pl.lit("headerless nvidia-smi CSV (noheader): pass --fields with the --query-gpu list"),
                )
            )  # fmt: skip
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
                host=pl.lit(host, dtype=pl.Utf8),
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
    return ParseResult(
        tables={"gpu_samples": samples_df},
        quarantine=quarantine,
        records=samples_df.height + quarantine.height,
    )


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    if re.search(
        r"^#?\s*(index|timestamp|name|uuid|pci\.bus_id), .*(temperature\.gpu|utilization\.gpu|memory\.used|power\.draw)",
        text,
        re.MULTILINE,
    ):
        return 90
    if "nvidia-smi" in name.lower() and name.lower().endswith(".csv"):
        return 50
    return 0


FORMAT = FormatSpec(
    name="nvidia-smi",
    primary="gpu_samples",
    parse=parse,
    detect=detect,
    description="nvidia-smi --query-gpu=... --format=csv (with/without noheader, nounits)",
)
