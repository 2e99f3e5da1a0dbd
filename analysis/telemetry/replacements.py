"""``component_history`` (``source='telemetry'``): a (host, gpu index) slot that shows a new UUID
had its GPU replaced; both installations of every such slot become rows."""

import polars as pl

from analysis.telemetry.rollups import refresh_gpu_hourly
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse

REPLACEMENT_SOURCE = "telemetry"


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
    """GPU replacements seen in the whole gpu_samples table, as component_history rows, from
    gpu_sightings (brought up to date first)."""
    refresh_gpu_hourly(wh)
    with wh.connect() as con:
        # two rows per (slot, uuid), its first and last sighting, stand in for all its samples
        view = wh.view_sql("gpu_sightings")
        frame = con.sql(
            "SELECT cluster, host, gpu, uuid, min(model) AS model, min(first_seen) AS time "
            f"FROM ({view}) "
            f"WHERE uuid IS NOT NULL GROUP BY cluster, host, gpu, uuid UNION ALL "
            f"SELECT cluster, host, gpu, uuid, min(model), max(last_seen) FROM ({view}) "
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
