"""GPU telemetry derived tables: hourly rollups, error-counter events, UUID-change replacements.

- ``gpu_hourly``: per (hour, host, gpu, uuid, PCI bus, metric) n/mean/min/max/last of non-null values,
  recomputed only for the date partitions whose ``gpu_samples`` files are newer than the rollup.
- ``hw_events`` (``source='dcgm_counter'``): increments of cumulative error counters per
  (host, gpu, uuid, metric). A decrease is a reset (reboot, replacement) and not an event; the
  first sample of a series sets its baseline. ``DCGM_FI_DEV_XID_ERRORS`` holds only the last XID
  value, so a change of it is not turned into an event here (a repeat of the same XID is
  invisible, and kernel logs are the XID record: counting both would double-count); it stays in
  gpu_samples / gpu_hourly as a hint.
- ``component_history`` (``source='telemetry'``): a (host, gpu index) slot that shows a new UUID
  had its GPU replaced; both installations of every such slot become rows.

``CANONICAL_METRICS`` maps DCGM and nvidia-smi metric names to covariate names
(temp, power, util, fb_used) so analyses need not know the source.
"""

from __future__ import annotations

from datetime import date

import polars as pl

from warehouse.schemas import TABLES, conform
from warehouse.store import Warehouse

CANONICAL_METRICS: dict[str, str] = {
    "DCGM_FI_DEV_GPU_TEMP": "temp",
    "temperature.gpu": "temp",
    "DCGM_FI_DEV_POWER_USAGE": "power",
    "power.draw": "power",
    "power.draw.average": "power",
    "DCGM_FI_DEV_GPU_UTIL": "util",
    "utilization.gpu": "util",
    "DCGM_FI_DEV_FB_USED": "fb_used",
    "memory.used": "fb_used",
}

# cumulative error counters -> (component_class, severity)
COUNTER_METRICS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("gpu_memory", "critical"),
    "ecc.errors.uncorrected.volatile.total": ("gpu_memory", "critical"),
    "ecc.errors.uncorrected.aggregate.total": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gpu_memory", "critical"),
    "remapped_rows.failure": ("gpu_memory", "critical"),
    "DCGM_FI_DEV_RETIRED_DBE": ("gpu_memory", "warning"),
    "DCGM_FI_DEV_RETIRED_PAGES": ("gpu_memory", "warning"),
    "retired_pages.double_bit.count": ("gpu_memory", "warning"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("gpu_memory", "warning"),
    # dcgm-exporter's XIDs-in-a-window count, one series per code (metric name carries the code,
    # see ingest.dcgm): a rise is a new XID of that code; a fall is the window moving on
    "DCGM_EXP_XID_ERRORS_COUNT": ("gpu", "critical"),
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": ("nvlink", "warning"),
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": ("nvlink", "critical"),
}
XID_COUNT_METRIC = "DCGM_EXP_XID_ERRORS_COUNT"
COUNTER_SOURCE = "dcgm_counter"
REPLACEMENT_SOURCE = "telemetry"


def canonical_metric(metric: pl.Expr) -> pl.Expr:
    """Source metric name -> covariate name (null for metrics that are not covariates)."""
    return metric.replace_strict(CANONICAL_METRICS, default=None, return_dtype=pl.Utf8)


def _partition_dates(wh: Warehouse, table: str) -> dict[date, float]:
    """date partition -> newest file mtime."""
    return {date.fromisoformat(d): t for d, t in wh.partition_mtimes(table).items()}


def stale_dates(wh: Warehouse) -> list[date]:
    """Dates whose gpu_samples changed after their gpu_hourly partition was written."""
    samples = _partition_dates(wh, "gpu_samples")
    hourly = _partition_dates(wh, "gpu_hourly")
    return sorted(d for d, t in samples.items() if d not in hourly or hourly[d] < t)


def hourly_rollup(samples: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """gpu_hourly rows from gpu_samples rows (null values are skipped; n counts the rest)."""
    return (
        samples.lazy()
        .filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
        .with_columns(hour=pl.col("time").dt.truncate("1h"))
        .group_by("hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric")
        .agg(
            n=pl.len().cast(pl.Int64),
            mean=pl.col("value").mean(),
            min=pl.col("value").min(),
            max=pl.col("value").max(),
            last=pl.col("value").sort_by("time").last(),
        )
        .with_columns(date=pl.col("hour").dt.date())
        .sort("hour", "host", "gpu", "metric")
        .collect()
    )


_ROLLUP_INPUT = ("time", "cluster", "host", "gpu", "uuid", "pci_bus", "metric", "value")


def refresh_gpu_hourly(wh: Warehouse, dates: list[date] | None = None) -> list[date]:
    """Recompute gpu_hourly for ``dates`` (default: the stale ones); returns the dates done."""
    todo = stale_dates(wh) if dates is None else sorted(set(dates))
    for d in todo:
        files = wh.files("gpu_samples", partition=d.isoformat())
        if not files:
            continue
        with wh.connect() as con:
            # only the columns the rollup needs, of those the files have (older files may lack
            # a column the schema gained; conform adds it as nulls)
            frame = con.sql(
                f"SELECT COLUMNS(lambda c: c IN {_ROLLUP_INPUT}) FROM read_parquet($files, union_by_name = true)",
                params={"files": files},
            ).pl()
        wh.replace_table("gpu_hourly", hourly_rollup(conform("gpu_samples", frame)), partitions="touched")
    return todo


def counter_events(samples: pl.DataFrame) -> pl.DataFrame:
    """hw_events rows for increases of cumulative error counters (count = the increase)."""
    keys = ["cluster", "host", "gpu", "uuid", "metric"]
    cls = {m: c for m, (c, _) in COUNTER_METRICS.items()}
    sev = {m: s for m, (_, s) in COUNTER_METRICS.items()}
    df = (
        samples.lazy()
        .with_columns(base=pl.col("metric").str.replace(r"\{.*$", ""))  # XID count: per-code series
        .filter(pl.col("base").is_in(list(COUNTER_METRICS)) & pl.col("value").is_not_null())
        .select(keys + ["base", "time", "value", "source_file"])
        .sort(keys + ["time"], nulls_last=True)
        .with_columns(inc=pl.col("value").diff().over(keys))
        .filter(pl.col("inc") > 0)
        .collect()
    )
    return conform(
        "hw_events",
        df.with_columns(
            event_id=pl.format(
                "dcgm_counter:{}:{}:{}:{}:{}",
                pl.col("host").fill_null(""),
                pl.col("gpu").cast(pl.Utf8).fill_null(""),
                pl.col("uuid").fill_null(""),
                "metric",
                pl.col("time").dt.strftime("%Y-%m-%dT%H:%M:%S%.6f"),
            ),
            component_class=pl.col("base").replace_strict(cls, return_dtype=pl.Utf8),
            component_id=pl.col("gpu").cast(pl.Utf8),
            event_type=pl.lit("counter"),
            code=pl.col("metric"),
            severity=pl.col("base").replace_strict(sev, return_dtype=pl.Utf8),
            message=pl.format("{} rose by {} to {}", "metric", "inc", "value"),
            count=pl.col("inc").round().clip(upper_bound=2**31 - 1).cast(pl.Int32),
            source=pl.lit(COUNTER_SOURCE),
        ).drop("metric", "base", "value", "inc"),
    )


def refresh_counter_events(wh: Warehouse) -> int:
    """Rewrite the ``source=dcgm_counter`` partition of hw_events; returns the event count."""
    names = ", ".join("'" + m + "'" for m in COUNTER_METRICS)
    events = counter_events(
        wh.read("gpu_samples", where=f"metric IN ({names}) OR metric LIKE '{XID_COUNT_METRIC}{{%'")
    )
    if events.height:
        wh.replace_table("hw_events", events, partitions="touched")
    else:  # nothing to write: an old partition must not survive
        wh.drop_partition("hw_events", COUNTER_SOURCE)
    return events.height


def gpu_replacements(samples: pl.DataFrame) -> pl.DataFrame:
    """component_history rows from UUID changes per (cluster, host, gpu index).

    Each UUID seen in a slot is one installation, ordered by first sighting. Only slots with
    more than one UUID produce rows. The first unit's install time is unknown (null); a later
    unit's ``installed_at`` is its first sighting, which is also the ``removed_at`` of the unit
    before it (the swap happened between that unit's last sighting and this moment).
    """
    slot = ["cluster", "host", "gpu"]
    seen = (
        samples.lazy()
        .filter(
            pl.col("uuid").is_not_null()
            & pl.col("gpu").is_not_null()
            & pl.col("host").is_not_null()
        )
        .group_by(slot + ["uuid"])
        .agg(
            first_seen=pl.col("time").min(),
            last_seen=pl.col("time").max(),
            model=pl.col("model").drop_nulls().first(),
        )
        .sort(slot + ["first_seen"])
        .with_columns(
            n_units=pl.len().over(slot),
            rank=pl.int_range(pl.len()).over(slot),
            next_seen=pl.col("first_seen").shift(-1).over(slot),
        )
        .filter(pl.col("n_units") > 1)
        .collect()
    )
    out = seen.select(
        component_class=pl.lit("gpu"),
        serial="uuid",
        slot=pl.format("{}/gpu{}", "host", "gpu"),
        host="host",
        position=pl.col("gpu").cast(pl.Utf8),
        model="model",
        installed_at=pl.when(pl.col("rank") > 0).then(pl.col("first_seen")),
        removed_at="next_seen",
        removal_reason=pl.when(pl.col("next_seen").is_not_null()).then(
            pl.lit("replaced (UUID changed in telemetry)")
        ),
        failed=pl.lit(None, dtype=pl.Boolean),
        source=pl.lit(REPLACEMENT_SOURCE),
        source_file=pl.lit("gpu_samples"),
    )
    return conform("component_history", out)


def infer_gpu_replacements(wh: Warehouse) -> pl.DataFrame:
    """GPU replacements seen in the whole gpu_samples table, as component_history rows."""
    with wh.connect() as con:
        # two rows per (slot, uuid), its first and last sighting, stand in for all its samples
        view = wh.view_sql("gpu_samples")
        frame = con.sql(
            f"SELECT cluster, host, gpu, uuid, min(model) AS model, min(time) AS time FROM ({view}) "
            f"WHERE uuid IS NOT NULL GROUP BY cluster, host, gpu, uuid UNION ALL "
            f"SELECT cluster, host, gpu, uuid, min(model), max(time) FROM ({view}) "
            f"WHERE uuid IS NOT NULL GROUP BY cluster, host, gpu, uuid"
        ).pl()
    return gpu_replacements(frame)


def refresh_gpu_replacements(wh: Warehouse) -> int:
    """Rewrite the ``source=telemetry`` partition of component_history; returns the row count."""
    rows = infer_gpu_replacements(wh)
    if TABLES["component_history"].partition != "source":
        raise RuntimeError(
            "component_history must be partitioned by source to be rewritten per source"
        )
    if rows.height:
        wh.replace_table("component_history", rows, partitions="touched")
    else:
        wh.drop_partition("component_history", REPLACEMENT_SOURCE)
    return rows.height
