"""Warehouse assets: the telemetry rollups (``gpu_hourly`` per telemetry day, with the compact
daily tables) and the events derived from them (DCGM counter increments, GPU replacements).

``gpu_hourly`` is partitioned by the days the telemetry covers (dynamic partitions, added by
the ingest asset and by every build), so the UI shows no day before the data's first. A day's
partition writes that day of every daily table (gpu_hourly and the compact gpu_daily,
gpu_counter_changes, gpu_sightings, gpu_signal_spans); a backfill runs ``BACKFILL_DAYS`` days
per run. The whole-history assets after it (counter events, replacements, lifetimes, slowness)
read only the compact tables, so a daily run costs one day of samples plus a history of compact
rows.
"""

from datetime import date

import dagster as dg

from analysis import status
from analysis.telemetry.counters import refresh_counter_events
from analysis.telemetry.replacements import refresh_gpu_replacements
from analysis.telemetry.rollups import refresh_gpu_hourly
from pipelines.assets.factory import DUCKDB
from pipelines.assets.factory import OWNERS
from pipelines.assets.factory import guarded
from pipelines.assets.factory import register
from pipelines.assets.factory import row_count
from pipelines.assets.factory import skipped_meta
from pipelines.assets.factory import table_metadata
from pipelines.assets.factory import writers
from pipelines.assets.ingest import TELEMETRY_DAYS
from pipelines.assets.ingest import register_days
from pipelines.assets.ingest import rollup_days
from pipelines.checks import invariant_checks
from pipelines.resources import Settings

BACKFILL_DAYS = 7  # telemetry days per backfill run: a bounded chunk of work, whatever the range


@dg.asset(
    group_name="warehouse",
    deps=writers("gpu_samples", "gpu_rollups"),
    partitions_def=TELEMETRY_DAYS,
    kinds=set(DUCKDB),
    owners=OWNERS,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_DAYS),
    metadata=table_metadata("gpu_hourly"),
)
def gpu_hourly(context: dg.AssetExecutionContext, settings: Settings) -> dg.MaterializeResult:
    """Per GPU, hour and metric rollup of gpu_samples (n, mean, min, max, last), one telemetry
    day per partition. A run without a partition rolls up every day of the telemetry's span."""
    wh = settings.warehouse()
    partitioned = context.has_partition_key or context.has_partition_key_range
    keys = context.partition_keys if partitioned else register_days(context.instance, wh)
    if not keys:
        status.record(wh, "gpu_hourly", "skipped", f"gpu_hourly: {rollup_days(wh)[1]}", 0)
        return dg.MaterializeResult(metadata=skipped_meta(wh, "gpu_hourly"))
    dates = [date.fromisoformat(k) for k in keys]
    done = guarded(wh, "gpu_hourly", (), lambda: refresh_gpu_hourly(wh, dates), len)
    if not partitioned:  # the days' partitions show as materialized, as after a backfill
        for key in keys:
            context.log_event(
                dg.AssetMaterialization(
                    "gpu_hourly", partition=key, metadata={"run": "every telemetry day"}
                )
            )
    return dg.MaterializeResult(
        metadata={
            "days": len(dates),
            "days_with_samples": len(done or []),
            **row_count(wh, "gpu_hourly"),
        }
    )


# the daily step writes every daily table; the slowness analyses read its signal spans and how
# densely each GPU's reasons were sampled (gpu_daily)
register(["gpu_hourly", "gpu_daily", "gpu_signal_spans"], [gpu_hourly])
checks = invariant_checks(gpu_hourly)  # samples per hour (analysis.checks.BUILD_CHECKS)


def _from_telemetry(table: str):
    """The asset of a step that derives rows of the ingest table ``table`` from the telemetry."""
    return dg.asset(
        group_name="warehouse",
        deps=writers("gpu_samples", "gpu_hourly"),
        kinds=set(DUCKDB),
        owners=OWNERS,
        metadata=table_metadata(table),
    )


@_from_telemetry("hw_events")
def dcgm_counter_events(settings: Settings) -> dg.MaterializeResult:
    """Increments of DCGM error counters (ECC DBE, row remap, NVLink ...) as hw_events (source
    dcgm_counter); counter resets are not events."""
    wh = settings.warehouse()
    events = refresh_counter_events(wh)
    return dg.MaterializeResult(metadata={"events": events, **row_count(wh, "hw_events")})


@_from_telemetry("component_history")
def telemetry_gpu_replacements(settings: Settings) -> dg.MaterializeResult:
    """GPU replacements inferred from UUID changes per (host, GPU index), as component_history
    rows (source telemetry)."""
    wh = settings.warehouse()
    swaps = refresh_gpu_replacements(wh)
    rows = row_count(wh, "component_history")
    return dg.MaterializeResult(metadata={"replacements": swaps, **rows})


register(["hw_events"], [dcgm_counter_events])
register(["component_history"], [telemetry_gpu_replacements])
