"""Hourly rollups a Prometheus-compatible TSDB computed (``query_range`` JSON of rollup series,
see ``ingest.tsdb``) to ``gpu_rollups``.

One record = one series-hour: its five rollup points (n, mean, min, max, last) make one row.
Labels map to columns as for dcgm-exporter scrapes (``Hostname``, ``gpu``, ``UUID``, ...; the
host falls back to the ``instance`` label without its port); ``DCGM_EXP_XID_ERRORS_COUNT`` keeps
its ``xid`` label in the metric name. Quarantined, per record, with the reason: a series-hour
that cannot stand for its samples (a rollup missing, a value that is not a finite number, a
min..max range that may hold a DCGM blank: ``ingest.tsdb.unusable``; the source pulls such an
hour's raw samples instead), a series that names no GPU and no host, an hour outside the
plausible window; each point of a series without a known ``goodput_rollup`` label or without a
numeric time; each result entry of the wrong shape; a response that is not a success or not a
matrix (one record, with Prometheus' own error text).
"""

from __future__ import annotations

import json

import orjson
import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import normalize_pci
from ingest.base import whole_file_quarantine
from ingest.gpu_labels import LABEL_COLUMNS
from ingest.gpu_labels import NO_GPU_NO_HOST
from ingest.gpu_labels import xid_metric
from ingest.tsdb import ROLLUP_FUNCTIONS
from ingest.tsdb import ROLLUP_LABEL
from ingest.tsdb import readable_time
from ingest.tsdb import rollup_column
from ingest.tsdb import rollup_rows
from ingest.tsdb import series_points
from ingest.tsdb import unusable
from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

SOURCE = "prometheus"


def _series_columns(keys: pl.Series) -> pl.DataFrame:
    """One row per series key (sorted label JSON): the gpu_rollups label columns, ``metric``
    and ``instance_host``."""
    rows = []
    for key in keys:
        labels = json.loads(key)
        rows.append(
            {
                "key": key,
                "metric": labels.get("__name__"),
                "xid": labels.get("xid"),
                "instance_host": labels.get("instance", "").rsplit(":", 1)[0] or None,
                **{col: labels.get(lab) or None for lab, col in LABEL_COLUMNS.items()},
            }
        )
    schema = {
        "key": pl.Utf8,
        "metric": pl.Utf8,
        "xid": pl.Utf8,
        "instance_host": pl.Utf8,
        **{c: pl.Utf8 for c in LABEL_COLUMNS.values()},
    }
    return pl.DataFrame(rows, schema=schema)


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses (NaN literals, ...) as the standard library reads it
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            return ParseResult({}, whole_file_quarantine(data, f"not JSON: {exc}"), 1)
    if not isinstance(doc, dict) or doc.get("status") != "success":
        err = doc.get("error", "no status") if isinstance(doc, dict) else "not an object"
        return ParseResult(
            {}, whole_file_quarantine(data, f"Prometheus response is not a success: {err}"), 1
        )
    body = doc.get("data")
    if (
        not isinstance(body, dict)
        or body.get("resultType") != "matrix"
        or not isinstance(body.get("result"), list)
    ):
        kind = body.get("resultType") if isinstance(body, dict) else None
        return ParseResult(
            {}, whole_file_quarantine(data, f"resultType {kind!r} is not a matrix of rollups"), 1
        )
    points, labels, bad_entries = series_points(body["result"])
    rows = rollup_rows(points, labels)
    fns = pl.DataFrame(
        {"series": range(len(labels)), "fn": [rollup_column(x) for x in labels]},
        schema={"series": pl.Int64, "fn": pl.Utf8},
    )
    no_time = ~readable_time()
    stray = points.join(fns, on="series", how="left").filter(
        no_time | ~pl.col("fn").is_in(list(ROLLUP_FUNCTIONS)).fill_null(False)
    )
    rows = rows.join(_series_columns(rows["key"].unique(maintain_order=True)), on="key", how="left")
    rows = rows.with_columns(
        host=pl.coalesce("host", pl.lit(ctx.host, pl.Utf8), "instance_host"),
        error=unusable(),
    ).with_columns(
        error=pl.when(pl.col("error").is_not_null())
        .then("error")
        .when(pl.col("metric").is_null())
        .then(pl.lit("series has no __name__ label"))
        .when(pl.all_horizontal(pl.col(c).is_null() for c in ("host", "gpu", "uuid", "pci_bus")))
        .then(pl.lit(NO_GPU_NO_HOST))
        .otherwise(implausible_time(pl.col("hour"), ctx))
    )
    good = rows.filter(pl.col("error").is_null())
    bad = rows.filter(pl.col("error").is_not_null())
    out = good.with_columns(
        metric=xid_metric(pl.col("metric"), pl.col("xid")),
        gpu=pl.col("gpu").cast(pl.Int32, strict=False),
        pci_bus=normalize_pci(pl.col("pci_bus")),
        n=pl.col("n").cast(pl.Int64),
        date=pl.col("hour").dt.date(),
        cluster=pl.lit(ctx.cluster),
        source=pl.lit(SOURCE),
        source_file=pl.lit(ctx.path),
    )
    out = out.select(c for c in TABLES["gpu_rollups"].columns if c in out.columns)
    quarantine = pl.concat(
        [
            bad.select(
                line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64),
                raw=pl.format(
                    "{} {} n={} mean={} min={} max={} last={}",
                    "key",
                    pl.col("hour").dt.to_string("%Y-%m-%dT%H:%M"),
                    *ROLLUP_FUNCTIONS,
                ),
                error="error",
            ).cast(QUARANTINE_COLUMNS),
            stray.select(
                line=pl.col("series") + 1,
                raw=pl.format("series {}: {} = {}", pl.col("series") + 1, "t", "raw"),
                error=pl.when(no_time)
                .then(pl.lit("point has no readable timestamp"))
                .otherwise(
                    pl.format(
                        "series has no known {} label (one of {}): not a rollup",
                        pl.lit(ROLLUP_LABEL),
                        pl.lit(", ".join(ROLLUP_FUNCTIONS)),
                    )
                ),
            ).cast(QUARANTINE_COLUMNS),
            quarantine_frame(
                [i + 1 for i, _, _ in bad_entries],
                [r for _, r, _ in bad_entries],
                [e for _, _, e in bad_entries],
            ),
        ]
    )
    return ParseResult(
        tables={"gpu_rollups": conform("gpu_rollups", out)},
        quarantine=quarantine,
        records=rows.height + stray.height + len(bad_entries),
    )


def detect(head: bytes, name: str) -> int:
    text = head[:4096].decode("utf-8", errors="replace")
    return 95 if f'"{ROLLUP_LABEL}"' in text and '"resultType"' in text else 0


FORMAT = FormatSpec(
    name="prom-rollup",
    primary="gpu_rollups",
    parse=parse,
    detect=detect,
    description=(
        "hourly rollups (n, mean, min, max, last) a Prometheus-compatible TSDB computed "
        "(query_range JSON)"
    ),
)
