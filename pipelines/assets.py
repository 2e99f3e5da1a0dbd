"""Dagster assets: thin wrappers over the plain functions in ingest/, analysis/, dashboards/."""

from __future__ import annotations

import dagster as dg

from ingest.runner import ingest_paths
from pipelines.resources import GoodputConfig


@dg.asset(group_name="ingest", description="Parse every new source file (sha256-deduplicated) into the Parquet warehouse.")
def ingested_sources(context: dg.AssetExecutionContext, goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    reports = ingest_paths(wh, goodput.source_paths(), "auto", goodput.parse_context())
    new = [r for r in reports if not r.skipped]
    by_format: dict[str, int] = {}
    for r in new:
        by_format[r.format] = by_format.get(r.format, 0) + r.rows_ok
    return dg.MaterializeResult(
        metadata={
            "files_new": len(new),
            "files_already_ingested": len(reports) - len(new),
            "rows": sum(r.rows_ok for r in new),
            "rows_quarantined": sum(r.rows_quarantined for r in new),
            "rows_by_format": dg.MetadataValue.json(by_format),
        }
    )


@dg.asset(group_name="warehouse", deps=[ingested_sources], description="DuckDB catalog: one view per warehouse table over its Parquet files.")
def warehouse_catalog(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    path = wh.refresh_catalog()
    counts = wh.sql("SELECT (SELECT count(*) FROM job_attempts), (SELECT count(*) FROM quarantine)").fetchone()
    return dg.MaterializeResult(
        metadata={"path": dg.MetadataValue.path(str(path)), "job_attempts": counts[0], "quarantine": counts[1]}
    )


ALL_ASSETS = [ingested_sources, warehouse_catalog]
