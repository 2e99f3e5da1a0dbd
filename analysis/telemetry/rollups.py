"""The daily derived tables of the GPU telemetry, recomputed only for the date partitions whose
``gpu_samples`` (or ``gpu_rollups``) files are newer than them, one day at a time out of core
(DuckDB, memory-limited, spilling): memory does not grow with the fleet or the history.

``gpu_hourly``: per (hour, host, gpu, uuid, PCI bus, metric) n/mean/min/max/last of non-null
values. ``gpu_counter_changes``: the error-counter samples where a value changes (and each
series' first of the day), all that counter events need. ``gpu_sightings``: per day, each GPU's
first and last sample in its slot, all that replacements need. ``gpu_daily``: per GPU, day and
metric, n / sum / min / max / first and last hour, from the day's gpu_hourly: what component
lifetimes need for whole days. ``gpu_sample_times``: samples per hour with their first and last
time, what the telemetry's observation span needs. ``gpu_signal_spans``: the spans a GPU ran
slow by its clock-event reasons, clock or PCIe link (``analysis.telemetry.signals``), what the
slowness analyses need. The whole-history steps read these compact tables, never raw samples
nor every hour.
"""

import tempfile
from datetime import date
from pathlib import Path

import polars as pl

from analysis.telemetry.metrics import COUNTER_METRICS
from analysis.telemetry.signals import SPANS_SQL
from analysis.telemetry.sql import SERIES
from analysis.telemetry.sql import SERIES_SQL
from analysis.telemetry.sql import files_view
from analysis.telemetry.sql import sql_list
from analysis.telemetry.sql import sql_str
from analysis.telemetry.sql import sql_values
from warehouse.schemas import XID_COUNT_METRIC
from warehouse.schemas import conform
from warehouse.store import Warehouse

_COUNTER_FILTER = (
    f"metric IN ({sql_values(COUNTER_METRICS)}) OR metric LIKE '{XID_COUNT_METRIC}{{%'"
)

# One day of gpu_samples (``day``) and gpu_rollups (``rolled``) -> that day's partition of
# each daily derived table, in the table's column order (``date`` is the partition). ``loose``:
# the samples of series-hours no rollup covers; ``seen``: those samples and the rollups, each
# with its sample count ``n`` (a rollup's time is its hour: sightings and sample times of
# pulled telemetry have hour resolution). Written in this order, then gpu_daily from
# the day's gpu_hourly: a crash part-way leaves the day stale and the next run redoes it.
_DAILY_SQL: dict[str, str] = {
    # every counter sample that starts its series' day or differs from the sample before: the
    # increments between consecutive rows are those between consecutive samples (rows left out
    # repeat the value before them), so counter_events over this table equals it over samples
    "gpu_counter_changes": f"""
        SELECT time, cluster, host, gpu, uuid, metric, value, source_file FROM (
            SELECT *, lag(value) OVER (PARTITION BY {SERIES_SQL} ORDER BY time) AS prev FROM day
            WHERE ({_COUNTER_FILTER}) AND value IS NOT NULL
        ) WHERE prev IS NULL OR value <> prev
        ORDER BY {SERIES_SQL}, time""",
    # a GPU's first and last sample of the day (every uuid, null included: a day with samples
    # always has rows, which marks it done); a rollup's samples count at their hour
    "gpu_sightings": """
        SELECT cluster, host, gpu, uuid, min(model) AS model, min(time) AS first_seen,
            max(time) AS last_seen
        FROM seen GROUP BY ALL ORDER BY host, gpu, uuid, cluster""",
    # samples per hour with the first and last time (null included: a day with samples always
    # has rows): the time distribution the telemetry's observation span is measured on
    # (``sample_hours_sql``); a rollup's samples count at their hour
    "gpu_sample_times": """
        SELECT date_trunc('hour', time) AS hour, sum(n)::BIGINT AS n, min(time) AS first,
            max(time) AS last
        FROM seen GROUP BY ALL ORDER BY hour NULLS FIRST""",
    # per (hour, GPU, metric): the TSDB's rollups, and n / mean / min / max / last of the finite
    # values of the samples no rollup covers; stored host by host, so reading some hosts'
    # hours (lifetimes' covariates on the days a unit enters or leaves) skips the other hosts'
    # row groups
    "gpu_hourly": """
        SELECT * FROM (
            SELECT date_trunc('hour', time) AS hour, cluster, host, gpu, uuid, pci_bus, metric,
                count(*)::BIGINT AS n, avg(value) AS mean, min(value) AS min, max(value) AS max,
                arg_max(value, time) AS last
            -- isnan() misses some NaN payloads in DuckDB 2.0
            FROM loose WHERE value IS NOT NULL AND isfinite(value)
            GROUP BY ALL
            -- MIG instances of one GPU (one series each) make one row, as their samples do
            UNION ALL
            SELECT hour, cluster, host, gpu, uuid, pci_bus, metric, sum(n)::BIGINT,
                CASE WHEN count(*) = 1 THEN any_value(mean) ELSE sum(mean * n) / sum(n) END,
                min(min), max(max), arg_max(last, coalesce(mig_instance, ''))
            FROM rolled GROUP BY ALL
        ) ORDER BY host NULLS FIRST, gpu NULLS FIRST, metric NULLS FIRST, hour NULLS FIRST""",
    "gpu_signal_spans": SPANS_SQL,
}
# the samples of series-hours a rollup covers (counter samples pulled at scrape resolution) are
# not counted again
_LOOSE_SQL = (
    "SELECT * FROM day s ANTI JOIN (SELECT DISTINCT hour, " + SERIES_SQL + " FROM rolled) r "
    "ON r.hour = date_trunc('hour', s.time) AND "
    + " AND ".join(f"r.{c} IS NOT DISTINCT FROM s.{c}" for c in SERIES)
)
_SEEN_SQL = """
    SELECT cluster, host, gpu, uuid, model, time, 1 AS n FROM loose
    UNION ALL SELECT cluster, host, gpu, uuid, model, hour, n FROM rolled"""
# the day's gpu_hourly (``hourly``, the file just written) -> its gpu_daily partition: what
# whole-history analyses read instead of every hour (lifetimes' covariates, GPU presence)
_GPU_DAILY_SQL = """
    SELECT cluster, host, gpu, uuid, pci_bus, metric, sum(n)::BIGINT AS n, sum(mean * n) AS sum,
        min(min) AS min, max(max) AS max, min(hour) AS first_hour, max(hour) AS last_hour
    FROM read_parquet({hourly}) GROUP BY ALL
    ORDER BY host NULLS FIRST, gpu NULLS FIRST, metric NULLS FIRST"""
DAILY_OUTPUTS = (*_DAILY_SQL, "gpu_daily")  # every table the daily step writes, in order
# a day is done when all of these are newer than its samples (each has rows on any day with samples)
DAILY_TABLES = ("gpu_sightings", "gpu_sample_times", "gpu_hourly", "gpu_daily")
_ROLLUP_INPUT = (
    "hour",
    *SERIES,
    "pci_bus",
    "model",
    "mig_instance",
    "n",
    "mean",
    "min",
    "max",
    "last",
)
_DAY_INPUT = (
    "time",
    "cluster",
    "host",
    "gpu",
    "uuid",
    "pci_bus",
    "model",
    "metric",
    "value",
    "source_file",
)


def _input_mtimes(wh: Warehouse) -> dict[str, float]:
    """date partition -> newest file mtime of the daily tables' inputs (gpu_samples,
    gpu_rollups)."""
    out = dict(wh.partition_mtimes("gpu_samples"))
    for d, t in wh.partition_mtimes("gpu_rollups").items():
        out[d] = max(out.get(d, t), t)
    return out


def _partition_dates(wh: Warehouse, table: str) -> dict[date, float]:
    """date partition -> newest file mtime."""
    return {date.fromisoformat(d): t for d, t in wh.partition_mtimes(table).items()}


def stale_dates(wh: Warehouse) -> list[date]:
    """Dates whose gpu_samples or gpu_rollups changed after their daily derived partitions
    were written."""
    inputs = {date.fromisoformat(d): t for d, t in _input_mtimes(wh).items()}
    done = [_partition_dates(wh, t) for t in DAILY_TABLES]
    return sorted(d for d, t in inputs.items() if any(d not in got or got[d] < t for got in done))


def _day_view(files: list[str]) -> str:
    """The needed gpu_samples columns of ``files`` with their declared types."""
    return files_view("gpu_samples", files, _DAY_INPUT)


def _refresh_day(
    wh: Warehouse, d: date, files: list[str], rollups: list[str], scratch: Path
) -> None:
    """Write day ``d`` of every daily derived table from its gpu_samples ``files`` and
    gpu_rollups ``rollups``, out of core: DuckDB streams each result to a Parquet file in
    ``scratch`` (memory-limited, spilling), which becomes the table's partition; a table with no
    rows that day loses its partition."""
    with wh.connect_out_of_core() as con:
        con.execute(f"CREATE TEMP VIEW day AS {_day_view(files)}")
        con.execute(
            f"CREATE TEMP VIEW rolled AS {files_view('gpu_rollups', rollups, _ROLLUP_INPUT)}"
        )
        con.execute(f"CREATE TEMP VIEW loose AS {_LOOSE_SQL if rollups else 'SELECT * FROM day'}")
        con.execute(f"CREATE TEMP VIEW seen AS {_SEEN_SQL}")
        daily = _GPU_DAILY_SQL.format(hourly=sql_list([str(scratch / "gpu_hourly.parquet")]))
        for table, sql in [*_DAILY_SQL.items(), ("gpu_daily", daily)]:
            out = scratch / f"{table}.parquet"
            rows = con.execute(
                f"COPY ({sql}) TO {sql_str(out)} (FORMAT parquet, COMPRESSION zstd)"
            ).fetchall()[0][0]
            if rows:
                wh.put_partition(table, d.isoformat(), out)
            else:
                wh.drop_partition(table, d.isoformat())
        for table in DAILY_OUTPUTS:
            (scratch / f"{table}.parquet").unlink(missing_ok=True)


def refresh_gpu_hourly(
    wh: Warehouse, dates: list[date] | None = None, force: bool = False
) -> list[date]:
    """Recompute the daily derived tables (``DAILY_OUTPUTS``: gpu_hourly and the compact ones) for
    the stale dates, of ``dates`` only when given (all of ``dates`` when ``force``), one day at
    a time in bounded memory; returns the dates done. Counter events and GPU replacements call
    it first, so whichever step runs first does each day once."""
    stale = stale_dates(wh)
    if dates is None:
        todo = stale
    else:
        todo = sorted(set(dates) if force else set(dates) & set(stale))
    done = []
    with tempfile.TemporaryDirectory(prefix="daily-", dir=wh.scratch) as tmp:
        for d in todo:
            files = wh.files("gpu_samples", partition=d.isoformat())
            rollups = wh.files("gpu_rollups", partition=d.isoformat())
            if files or rollups:
                _refresh_day(wh, d, files, rollups, Path(tmp))
                done.append(d)
    return done


def sample_hours_sql(wh: Warehouse) -> str:
    """DuckDB SQL: (hour, n, first, last, dates) of the non-null gpu_samples times: per hour the
    samples, their first and last time and the gpu_samples partitions holding them (for
    ``sample_times_sql``). The days whose gpu_sample_times partition is up to date come from
    it (24 rows a day), the others (not rolled up yet, e.g. a day just ingested) from their
    gpu_samples files: the cost follows the days, not every sample of the history. A day of
    TSDB rollups (gpu_rollups) counts its samples as gpu_sample_times does: at their hour."""
    samples = _input_mtimes(wh)
    rolled = wh.partition_mtimes("gpu_sample_times")
    fresh = sorted(d for d, t in samples.items() if d in rolled and rolled[d] >= t)
    counted = [(d, f) for d in fresh for f in wh.files("gpu_sample_times", partition=d)]
    raw = [(d, wh.files("gpu_samples", partition=d)) for d in sorted(set(samples) - set(fresh))]
    parts = [
        f"SELECT hour, n, first, last, {sql_str(d)} AS d FROM "
        f"({files_view('gpu_sample_times', [f], ('hour', 'n', 'first', 'last'))})"
        for d, f in counted
    ] + [
        "SELECT date_trunc('hour', time) AS hour, count(*) AS n, min(time) AS first, "
        "max(time) AS last, "
        f"{sql_str(d)} AS d FROM ({files_view('gpu_samples', files, ('time',))}) GROUP BY ALL"
        for d, files in raw
    ]
    if not parts:
        return (
            "SELECT NULL::TIMESTAMP AS hour, 0::BIGINT AS n, NULL::TIMESTAMP AS first, "
            "NULL::TIMESTAMP AS last, [] AS dates WHERE false"
        )
    return (
        "SELECT hour, sum(n)::BIGINT AS n, min(first) AS first, max(last) AS last, "
        "list(DISTINCT d ORDER BY d) AS dates "
        f"FROM ({' UNION ALL '.join(parts)}) WHERE hour IS NOT NULL GROUP BY hour"
    )


def sample_times_sql(wh: Warehouse, dates: list[str]) -> str:
    """DuckDB SQL: the non-null sample times (``time``) of some gpu_samples partitions, and of
    their days' rollups each of its ``n`` samples at its hour."""
    files = [f for d in sorted(set(dates)) for f in wh.files("gpu_samples", partition=d)]
    rollups = [f for d in sorted(set(dates)) for f in wh.files("gpu_rollups", partition=d)]
    raw = f"SELECT time FROM ({files_view('gpu_samples', files, ('time',))}) WHERE time IS NOT NULL"
    if not rollups:
        return raw
    return (
        f"{raw} UNION ALL SELECT hour AS time FROM (SELECT hour, unnest(range(n)) FROM "
        f"({files_view('gpu_rollups', rollups, ('hour', 'n'))}))"
    )


def gpu_presence(wh: Warehouse) -> pl.DataFrame:
    """gpu_hourly-shaped rows with no metric: per (cluster, host, gpu, uuid, PCI bus) one at its
    first and one at its last hour. What component lifetimes need of gpu_hourly besides the
    covariates (observation bounds, telemetry-only units, the UUID / bus -> GPU index layout),
    selected out of core from the compact gpu_daily."""
    slot = "cluster, host, gpu, uuid, pci_bus"
    with wh.connect_out_of_core() as con:
        frame = con.sql(
            f"SELECT unnest([min(first_hour), max(last_hour)]) AS hour, {slot} "
            f"FROM ({wh.view_sql('gpu_daily')}) GROUP BY {slot}"
        ).pl()
    return conform("gpu_hourly", frame)
