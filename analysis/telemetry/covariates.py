"""The lifetime covariates' DuckDB SQL over the GPU rollups: the hours of ``gpu_hourly`` and the
days of ``gpu_daily`` of the metrics that are covariates (``CANONICAL_METRICS``), by covariate
name."""

from datetime import date

from analysis.telemetry.metrics import CANONICAL_METRICS
from analysis.telemetry.sql import files_view
from analysis.telemetry.sql import sql_str
from analysis.telemetry.sql import sql_values
from warehouse.store import Warehouse


def exact_sum(expr: str, where: str = "") -> str:
    """SQL summing ``expr`` (finite floats: the rollups keep no other) over the rows ``where``
    (an aggregate ``FILTER`` clause) exactly, as decimals to 1e-9, so the sum does not depend on
    the order DuckDB's threads add the rows in; a float sum's last bits do, and a Cox fit of a
    covariate that separates the failures magnifies them into its PH test."""
    return f"CAST(sum(CAST({expr} AS DECIMAL(38, 9))) {where} AS DOUBLE)"


def _covariate_case() -> str:
    return (
        "CASE metric "
        + " ".join(f"WHEN {sql_str(m)} THEN {sql_str(c)}" for m, c in CANONICAL_METRICS.items())
        + " END"
    )


def _covariate_metrics(covariates: tuple[str, ...]) -> str:
    return sql_values(m for m, c in CANONICAL_METRICS.items() if c in covariates)


def covariate_hourly_sql(
    wh: Warehouse, covariates: tuple[str, ...], hosts_by_date: dict[date, list[str]]
) -> str:
    """DuckDB SQL over gpu_hourly's Parquet: (hour, host, gpu, uuid, cov, n, mean, max) of the
    metrics whose covariate name (``CANONICAL_METRICS``) is one of ``covariates``, for queries
    that join it out of core instead of loading the table: the partitions of ``hosts_by_date``
    only, and in each only the rows of the hosts listed (filtered in the scan: a unit that
    fails mid-history needs its own host's hours of that day, not the fleet's)."""
    where = f"metric IN ({_covariate_metrics(covariates)}) AND mean IS NOT NULL"
    columns = ("hour", "host", "gpu", "uuid", "metric", "n", "mean", "max")
    scans = [
        f"SELECT * FROM ({files_view('gpu_hourly', files, columns)}) WHERE {where} "
        f"AND host IN ({sql_values(sorted(hosts))})"
        for d, hosts in sorted(hosts_by_date.items())
        if hosts and (files := wh.files("gpu_hourly", partition=d.isoformat()))
    ] or [files_view("gpu_hourly", [], columns)]
    return (
        f"SELECT hour, host, gpu, uuid, {_covariate_case()} AS cov, n, mean, max "
        f"FROM ({' UNION ALL '.join(scans)})"
    )


def covariate_daily_sql(wh: Warehouse, covariates: tuple[str, ...]) -> str:
    """DuckDB SQL over gpu_daily's Parquet: (day, host, gpu, cov, s, n, mx, last_hour) per GPU,
    day and covariate: the sum of the hourly mean * n, the samples, the max and the last hour
    with data. Whole days of the history in 24x fewer rows than gpu_hourly."""
    return (
        f"SELECT CAST(date AS TIMESTAMP) AS day, host, gpu, {_covariate_case()} AS cov, "
        f"{exact_sum('sum')} AS s, "
        "sum(n) AS n, max(max) AS mx, max(last_hour) AS last_hour FROM "
        f"({wh.view_sql('gpu_daily')}) "
        f"WHERE metric IN ({_covariate_metrics(covariates)}) GROUP BY ALL"
    )
