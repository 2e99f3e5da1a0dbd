"""Component lifetimes' covariates: n-weighted means of the hourly means of temp / power / util
and the max of temp per unit, over a window of its observation.

Every unit is measured over its first ``COVARIATE_DAYS`` days observed, [observed_from,
min(observed_to, observed_from + COVARIATE_DAYS)): the same window for every unit, so a covariate
does not grow with the follow-up a failure cuts short (the Cox model starts each unit at the
window's end: ``analysis.survival.cox``). Metric names are mapped by
``analysis.telemetry.metrics.CANONICAL_METRICS``; GPU-family units use their own GPU (host +
index), other units the mean over all GPUs of their host (the node's thermal and load
environment). Out of core, whole days come from ``gpu_daily`` and only the days a unit enters or
leaves from ``gpu_hourly`` (``covariate_sql``), so the cost follows the fleet, not the hours stored.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import duckdb
import polars as pl

from analysis.survival.cox import COVARIATE_DAYS
from analysis.telemetry.covariates import covariate_daily_sql
from analysis.telemetry.covariates import covariate_hourly_sql
from analysis.telemetry.covariates import exact_sum
from analysis.telemetry.metrics import CANONICAL_METRICS

COVARIATES = ("temp", "power", "util")


def _hourly_covariates(gpu_hourly: pl.DataFrame) -> pl.DataFrame:
    return (
        gpu_hourly.with_columns(
            cov=pl.col("metric").replace_strict(CANONICAL_METRICS, default=None)
        )
        .filter(pl.col("cov").is_in(COVARIATES) & pl.col("mean").is_not_null())
        .select("hour", "host", "gpu", "uuid", "cov", "n", "mean", "max")
    )


# Per unit (``u``: its window [lo, hi) in hours) n-weighted means and maxima of the covariates,
# computed once per distinct (host, gpu, window) ``w`` (a host's many node-level parts share one):
# each whole day inside the window from a ``daily`` row (day, host, gpu, cov, s = sum of mean * n,
# n, mx, last_hour), every other hour from an ``hourly`` row (hour, host, gpu, cov, n, mean, max).
# Only the days a window starts or ends in need hourly rows.
_FULL_DAY = "{d} >= w.lo AND {d} + INTERVAL 23 HOUR < w.hi"


def _mean(cov: str) -> str:
    """The n-weighted mean of a covariate over a window's rows (exact sums: ``exact_sum``)."""
    only = f"FILTER (WHERE cov = '{cov}')"
    return f"{exact_sum('s', only)} / sum(n) {only}"


_COV_SQL = f"""
WITH u AS (
    SELECT _u, host, gpu, date_trunc('hour', observed_from) AS lo, observed_to AS hi FROM units
), w AS (  -- units with the same slot and window have the same covariates: each window once
    SELECT DISTINCT host, gpu, lo, hi FROM u
), edges AS (
    SELECT DISTINCT host, date_trunc('day', lo) AS day FROM w
    UNION SELECT DISTINCT host, date_trunc('day', hi) FROM w
), hours AS (
    SELECT h.*, date_trunc('day', h.hour) AS day FROM hourly h SEMI JOIN edges e
      ON h.host = e.host AND date_trunc('day', h.hour) = e.day
), per_gpu AS (
    SELECT w.host, w.gpu, w.lo, w.hi, d.cov, d.s, d.n, d.mx, d.last_hour FROM w JOIN daily d
      ON w.host = d.host AND w.gpu = d.gpu AND {_FULL_DAY.format(d="d.day")}
    UNION ALL
    SELECT w.host, w.gpu, w.lo, w.hi, h.cov, h.mean * h.n, h.n, h.max, h.hour FROM w JOIN hours h
      ON w.host = h.host AND w.gpu = h.gpu AND h.hour >= w.lo AND h.hour < w.hi
     AND NOT ({_FULL_DAY.format(d="h.day")})
), host_daily AS (
    SELECT host, day, cov, {exact_sum("s")} AS s, sum(n) AS n, max(mx) AS mx FROM daily GROUP BY ALL
), host_hours AS (
    SELECT host, hour, day, cov, {exact_sum("mean * n")} AS s, sum(n) AS n, max(max) AS mx
    FROM hours GROUP BY ALL
), per_host AS (
    SELECT w.host, w.gpu, w.lo, w.hi, d.cov, d.s, d.n, d.mx, NULL::TIMESTAMP AS last_hour
    FROM w JOIN host_daily d
      ON w.host = d.host AND {_FULL_DAY.format(d="d.day")} WHERE w.gpu IS NULL
    UNION ALL
    SELECT w.host, w.gpu, w.lo, w.hi, h.cov, h.s, h.n, h.mx, NULL FROM w JOIN host_hours h
      ON w.host = h.host AND h.hour >= w.lo AND h.hour < w.hi
     AND NOT ({_FULL_DAY.format(d="h.day")})
    WHERE w.gpu IS NULL
), allc AS (SELECT * FROM per_gpu UNION ALL SELECT * FROM per_host
), per_window AS (
    SELECT host, gpu, lo, hi,
        {_mean("temp")} AS temp_mean,
        max(mx) FILTER (WHERE cov = 'temp') AS temp_max,
        {_mean("power")} AS power_mean,
        {_mean("util")} AS util_mean,
        max(last_hour) AS last_seen_hour
    FROM allc GROUP BY ALL
)
SELECT u._u, p.temp_mean, p.temp_max, p.power_mean, p.util_mean, p.last_seen_hour
FROM u JOIN per_window p
  ON u.host = p.host AND u.gpu IS NOT DISTINCT FROM p.gpu AND u.lo = p.lo AND u.hi = p.hi
"""
_DAILY_FROM_HOURLY = (
    f"SELECT date_trunc('day', hour) AS day, host, gpu, cov, {exact_sum('mean * n')} AS s, "
    "sum(n) AS n, "
    "max(max) AS mx, max(hour) AS last_hour FROM hourly GROUP BY ALL"
)

# out-of-core covariate rows: day -> the hosts with a window starting or ending in it -> (daily
# SQL, hourly SQL of those days and hosts)
CovariateSQL = Callable[[dict[date, list[str]]], tuple[str, str]]


def _covariates(
    units: pl.DataFrame, hourly: pl.DataFrame | CovariateSQL, connect=duckdb.connect
) -> pl.DataFrame:
    """Per unit covariates from hourly rows: a frame (its days summed in DuckDB), or the daily
    and edge-day hourly rows of ``hourly(dates)``, joined out of core on ``connect()``."""
    schema = {
        "_u": pl.UInt32,
        "temp_mean": pl.Float64,
        "temp_max": pl.Float64,
        "power_mean": pl.Float64,
        "util_mean": pl.Float64,
        "last_seen_hour": pl.Datetime("us"),
    }
    if units.height == 0 or (isinstance(hourly, pl.DataFrame) and hourly.height == 0):
        return pl.DataFrame(schema=schema)
    win = units.select("_u", "host", "gpu", "observed_from", "observed_to")
    with connect() as con:
        con.register("units", win)
        if isinstance(hourly, pl.DataFrame):
            con.register("hourly", hourly)
            con.execute(f"CREATE TEMP VIEW daily AS {_DAILY_FROM_HOURLY}")
        else:
            # the days a window enters or leaves part way (not ``_FULL_DAY``): only those
            # need their hours; a window from midnight to a day's last hour takes daily rows
            lo, hi = pl.col("observed_from").dt.truncate("1h"), pl.col("observed_to")
            enter, leave = lo.dt.truncate("1d"), hi.dt.truncate("1d")
            edges = (
                pl.concat(
                    [
                        win.filter((lo > enter) | (enter + pl.duration(hours=23) >= hi)).select(
                            "host", day=enter.dt.date()
                        ),
                        win.filter(leave + pl.duration(hours=23) >= hi).select(
                            "host", day=leave.dt.date()
                        ),
                    ]
                )
                .drop_nulls()
                .unique()
                .group_by("day")
                .agg(pl.col("host").sort())
            )
            daily_sql, hourly_sql = hourly(dict(edges.iter_rows()))
            con.execute(
                f"CREATE TEMP TABLE daily AS {daily_sql}"
            )  # tables: computed once, spillable
            con.execute(f"CREATE TEMP TABLE hourly AS {hourly_sql}")
        out = con.sql(_COV_SQL).pl()
    return out.cast(schema) if out.height else pl.DataFrame(schema=schema)


def unit_covariates(
    units: pl.DataFrame, hourly: pl.DataFrame | CovariateSQL, connect=duckdb.connect
) -> pl.DataFrame:
    """Units with their covariates over the same first days of every unit (exposure-matched:
    see analysis.survival.cox), and the last hour seen over the whole observation, needed only
    where a failure has no event to date it (``duration_low`` in ``analysis.lifetimes``).
    ``hourly``: ``gpu_hourly`` rows, or the out-of-core rows of ``covariate_sql``."""
    if isinstance(hourly, pl.DataFrame):
        hourly = _hourly_covariates(hourly)
    first_days = units.with_columns(
        observed_to=pl.min_horizontal(
            "observed_to", pl.col("observed_from") + pl.duration(days=COVARIATE_DAYS)
        )
    )
    cov = _covariates(first_days, hourly, connect).drop("last_seen_hour")
    undated = units.filter(pl.col("_failed") & pl.col("fail_time").is_null())
    seen = _covariates(undated, hourly, connect).select("_u", "last_seen_hour")
    return units.join(cov, on="_u", how="left").join(seen, on="_u", how="left")


def covariate_sql(wh, covariates: tuple[str, ...] = COVARIATES) -> CovariateSQL:
    """The out-of-core covariate rows of a warehouse: gpu_daily for whole days, gpu_hourly's
    partitions of the given days and hosts only, so the cost follows the fleet, not the hours
    stored."""
    return lambda hosts_by_date: (
        covariate_daily_sql(wh, covariates),
        covariate_hourly_sql(wh, covariates, hosts_by_date),
    )
