"""Run the asset graph in-process (what ``goodput demo`` / ``goodput build`` do), and summarize."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from pipelines.assets import ALL_ASSETS
from pipelines.resources import GoodputConfig
from warehouse.store import Warehouse

_QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def run_pipeline(wh: Warehouse, sources: list[Path | str], cluster: str = "default", tz: str = "UTC") -> None:
    config = GoodputConfig(home=str(wh.home), sources=[str(s) for s in sources], cluster=cluster, tz=tz)
    result = dg.materialize(ALL_ASSETS, resources={"goodput": config}, run_config=_QUIET)
    if not result.success:
        raise RuntimeError("pipeline run failed")


def summary_lines(wh: Warehouse) -> list[str]:
    """A short, computed summary of what the warehouse holds."""
    q = wh.sql
    jobs, attempts, gpu_hours = q(
        "SELECT count(DISTINCT (cluster, scheduler, job_id)), count(*), "
        "coalesce(sum(n_gpus * date_diff('second', start_time, end_time)) / 3600.0, 0) "
        "FROM job_attempts"
    ).fetchone()
    files, quarantined = q("SELECT count(*), coalesce(sum(rows_quarantined), 0) FROM ingest_manifest").fetchone()
    lines = [
        f"files ingested: {files:,} ({quarantined:,} records quarantined)",
        f"jobs: {jobs:,}  attempts: {attempts:,}  GPU-hours: {gpu_hours:,.0f}",
    ]
    failed = q(
        "SELECT state, count(*) FROM job_attempts WHERE state NOT IN ('COMPLETED', 'RUNNING', 'PENDING') "
        "GROUP BY 1 ORDER BY 2 DESC"
    ).fetchall()
    if failed:
        lines.append("attempts not completed, by state: " + ", ".join(f"{s} {n:,}" for s, n in failed))
    return lines
