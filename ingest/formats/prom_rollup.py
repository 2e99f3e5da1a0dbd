"""Hourly rollups a Prometheus-compatible TSDB computed (``query_range`` JSON of rollup series,
see ``ingest.tsdb``) to ``gpu_rollups``.

One record = one series-hour: its five rollup points (n, mean, min, max, last) make one row.
Labels map to columns as for dcgm-exporter scrapes (``Hostname``, ``gpu``, ``UUID``, ...; the
host falls back to the ``instance`` label without its port); ``DCGM_EXP_XID_ERRORS_COUNT`` and
``DCGM_EXP_CLOCK_EVENTS_COUNT`` keep their ``xid`` / ``clock_event`` label in the metric name.
Quarantined, per record, with the reason: a series-hour that cannot stand for its samples (a
rollup missing, a value that is not a finite number, a min..max range that may hold a DCGM
blank, an hour the GPU's metric spends under several label sets: ``ingest.tsdb.unusable``; the
source pulls such an hour's raw samples instead), a series that names no GPU and no host, an
hour outside the plausible window; each point of a series without a known ``goodput_rollup``
label or without a numeric time; each result entry of the wrong shape; a response that is not a
success or not a matrix (one record, with Prometheus' own error text). A series the answer
holds twice is one record more: the warehouse counts it as a duplicate, or quarantines it as a
conflict when its values differ.
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
from ingest.gpu_labels import NO_GPU_NO_HOST
from ingest.gpu_labels import folded_metric
from ingest.prom_series import LABEL_SCHEMA
from ingest.prom_series import label_columns
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
    """One row per series key (sorted label JSON): its ``metric`` and label columns."""
    rows = []
    for key in keys:
        labels = json.loads(key)
        rows.append({"key": key, "metric": labels.get("__name__"), **label_columns(labels)})
    return pl.DataFrame(rows, schema={"key": pl.Utf8, "metric": pl.Utf8, **LABEL_SCHEMA})


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    result, why = _matrix(data)
    if why is not None:
        return ParseResult({}, whole_file_quarantine(data, why), 1)
    points, labels, bad_entries = series_points(result)
    rows = _checked(rollup_rows(points, labels), ctx)
    stray = _stray(points, labels)
    good = rows.filter(pl.col("error").is_null())
    return ParseResult(
        tables={"gpu_rollups": conform("gpu_rollups", _rollups(good, ctx))},
        quarantine=_quarantine(rows.filter(pl.col("error").is_not_null()), stray, bad_entries),
        records=rows.height + stray.height + len(bad_entries),
    )


def _matrix(data: bytes) -> tuple[list | None, str | None]:
    """The result series of a successful matrix response, or why the file is not one."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        try:  # what orjson refuses (NaN literals, ...) as the standard library reads it
            doc = json.loads(data)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            return None, f"not JSON: {exc}"
    if not isinstance(doc, dict) or doc.get("status") != "success":
        err = doc.get("error", "no status") if isinstance(doc, dict) else "not an object"
        return None, f"Prometheus response is not a success: {err}"
    body = doc.get("data")
    if (
        not isinstance(body, dict)
        or body.get("resultType") != "matrix"
        or not isinstance(body.get("result"), list)
    ):
        kind = body.get("resultType") if isinstance(body, dict) else None
        return None, f"resultType {kind!r} is not a matrix of rollups"
    return body["result"], None


def _stray(points: pl.DataFrame, labels: list[dict]) -> pl.DataFrame:
    """The points ``rollup_rows`` leaves out: no readable time, or no known rollup label."""
    fns = pl.DataFrame(
        {"series": range(len(labels)), "fn": [rollup_column(x) for x in labels]},
        schema={"series": pl.Int64, "fn": pl.Utf8},
    )
    return points.join(fns, on="series", how="left").filter(
        ~readable_time() | ~pl.col("fn").is_in(list(ROLLUP_FUNCTIONS)).fill_null(False)
    )


def _checked(rows: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """Series-hours with label columns and host, and ``error``: why one cannot be stored."""
    rows = rows.join(_series_columns(rows["key"].unique(maintain_order=True)), on="key", how="left")
    return rows.with_columns(
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


def _rollups(good: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The good series-hours as ``gpu_rollups`` rows, in the table's column order."""
    out = good.with_columns(
        metric=folded_metric(pl.col("metric"), pl.col),
        gpu=pl.col("gpu").cast(pl.Int32, strict=False),
        pci_bus=normalize_pci(pl.col("pci_bus")),
        n=pl.col("n").cast(pl.Int64),
        date=pl.col("hour").dt.date(),
        cluster=pl.lit(ctx.cluster),
        source=pl.lit(SOURCE),
        source_file=pl.lit(ctx.path),
    )
    return out.select(c for c in TABLES["gpu_rollups"].columns if c in out.columns)


def _quarantine(
    bad: pl.DataFrame, stray: pl.DataFrame, bad_entries: list[tuple[int, str, str]]
) -> pl.DataFrame:
    """Quarantine rows: the rejected series-hours, the stray points, the misshapen entries."""
    return pl.concat(
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
                error=pl.when(~readable_time())
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


def detect(head: bytes, name: str) -> int:
    text = head[:4096].decode("utf-8", errors="replace")
    return 95 if f'"{ROLLUP_LABEL}"' in text and '"resultType"' in text else 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="gpu_rollups",
    description=(
        "hourly rollups (n, mean, min, max, last) a Prometheus-compatible TSDB computed "
        "(query_range JSON)"
    ),
)
