"""Catalog and dashboard assets: the DuckDB catalog over every table (``warehouse.duckdb``),
with the duplicate-keys check, and the leadership report built from it."""

import dagster as dg

from dashboards.report import build_report
from pipelines.assets.factory import OWNERS
from pipelines.assets.factory import every_writer
from pipelines.assets.factory import guarded
from pipelines.checks import invariant_checks
from pipelines.resources import Settings

CATALOG_POOL = "duckdb_catalog"  # one writer at a time: DuckDB's rule


@dg.asset(
    group_name="catalog", pool=CATALOG_POOL, kinds={"duckdb"}, owners=OWNERS, deps=every_writer()
)
def warehouse_catalog(settings: Settings) -> dg.MaterializeResult:
    """DuckDB catalog (warehouse.duckdb): one view per table over its Parquet files."""
    wh = settings.warehouse()
    path = wh.refresh_catalog()
    counts = wh.query(
        "SELECT (SELECT count(*) FROM job_attempts) attempts, (SELECT count(*) FROM hw_events) "
        "hw_events, (SELECT count(*) FROM quarantine) quarantined, "
        "(SELECT min(start_time) FROM job_attempts) first_start, "
        "(SELECT max(end_time) FROM job_attempts) last_end"
    ).row(0, named=True)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            **{k: str(v) for k, v in counts.items()},
        }
    )


@dg.asset(
    group_name="dashboards", deps=[warehouse_catalog], kinds={"altair", "html"}, owners=OWNERS
)
def leadership_report(settings: Settings) -> dg.MaterializeResult:
    """The self-contained HTML leadership report, with a PNG and SVG per chart."""
    wh = settings.analysis_warehouse()
    path = guarded(
        wh,
        "leadership_report",
        (),
        lambda: build_report(
            wh,
            target_gpus=settings.target_gpus,
            scope=settings.scope().header(),
            gpu_hour_cost=None if settings.gpu_hour_cost < 0 else settings.gpu_hour_cost,
            gpus_per_node=settings.gpus_per_node,
        ),
        lambda p: None,
    )
    return dg.MaterializeResult(
        metadata={"path": dg.MetadataValue.path(str(path)), "bytes": path.stat().st_size}
    )


checks = invariant_checks(warehouse_catalog)  # duplicate keys (analysis.checks.BUILD_CHECKS)
