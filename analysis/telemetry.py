"""GPU telemetry derived tables: hourly rollups, error-counter events, UUID-change replacements.

- Daily derived tables, recomputed only for the date partitions whose ``gpu_samples`` files are
  newer than them, one day at a time out of core (DuckDB, memory-limited, spilling): memory does
  not grow with the fleet or the history.
  ``gpu_hourly``: per (hour, host, gpu, uuid, PCI bus, metric) n/mean/min/max/last of non-null
  values.
  ``gpu_counter_changes``: the error-counter samples where a value changes (and each series'
  first of the day), all that counter events need. ``gpu_sightings``: per day, each GPU's first
  and last sample in its slot, all that replacements need. ``gpu_daily``: per GPU, day and
  metric, n / sum / min / max / first and last hour, from the day's gpu_hourly: what component
  lifetimes need for whole days. ``gpu_sample_times``: samples per hour with their first and last
  time, what the telemetry's observation span needs. The whole-history steps read these compact
  tables, never raw samples nor every hour.
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

import tempfile
from datetime import date
from pathlib import Path

import duckdb
import polars as pl

from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse
from warehouse.store import duck_type
from warehouse.store import literal_path

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
    # see ingest.formats.dcgm): a rise is a new XID of that code; a fall is the window moving on
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
        f"SELECT hour, n, first, last, {_sql_str(d)} AS d FROM "
        f"({_files_view('gpu_sample_times', [f], ('hour', 'n', 'first', 'last'))})"
        for d, f in counted
    ] + [
        "SELECT date_trunc('hour', time) AS hour, count(*) AS n, min(time) AS first, "
        "max(time) AS last, "
        f"{_sql_str(d)} AS d FROM ({_files_view('gpu_samples', files, ('time',))}) GROUP BY ALL"
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
    raw = (
        f"SELECT time FROM ({_files_view('gpu_samples', files, ('time',))}) WHERE time IS NOT NULL"
    )
    if not rollups:
        return raw
    return (
        f"{raw} UNION ALL SELECT hour AS time FROM (SELECT hour, unnest(range(n)) FROM "
        f"({_files_view('gpu_rollups', rollups, ('hour', 'n'))}))"
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


COUNTER_CHUNK_ROWS = 100_000  # counter rises turned into hw_events rows and written per chunk
COUNTER_GROUP_ROWS = (
    200_000  # stored counter changes per group of hosts whose increments DuckDB takes at once
)

_COUNTER_FILTER = (
    "metric IN (" + ", ".join("'" + m + "'" for m in COUNTER_METRICS) + ")"
    f" OR metric LIKE '{XID_COUNT_METRIC}{{%'"
)
_SERIES = "cluster, host, gpu, uuid, metric"

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
            SELECT *, lag(value) OVER (PARTITION BY {_SERIES} ORDER BY time) AS prev FROM day
            WHERE ({_COUNTER_FILTER}) AND value IS NOT NULL
        ) WHERE prev IS NULL OR value <> prev
        ORDER BY {_SERIES}, time""",
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
}
# the hourly series a rollup covers: its samples (counter samples pulled at scrape resolution)
# are not counted again
_ROLLUP_SERIES = ("cluster", "host", "gpu", "uuid", "metric")
_LOOSE_SQL = (
    "SELECT * FROM day s ANTI JOIN (SELECT DISTINCT hour, "
    + ", ".join(_ROLLUP_SERIES)
    + " FROM rolled) r "
    "ON r.hour = date_trunc('hour', s.time) AND "
    + " AND ".join(f"r.{c} IS NOT DISTINCT FROM s.{c}" for c in _ROLLUP_SERIES)
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
    *_ROLLUP_SERIES,
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


def _day_view(files: list[str]) -> str:
    """The needed gpu_samples columns of ``files`` with their declared types."""
    return _files_view("gpu_samples", files, _DAY_INPUT)


def _files_view(table: str, files: list[str], columns: tuple[str, ...]) -> str:
    """``columns`` of some of ``table``'s Parquet ``files`` with their declared types; a column
    an older file lacks reads as null (no file: no rows)."""
    types = {c: duck_type(TABLES[table].columns[c]) for c in columns}
    typed = ", ".join(f'CAST(NULL AS {t}) AS "{c}"' for c, t in types.items())
    if not files:
        return f"SELECT {typed} WHERE false"
    cast = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in types.items())
    return (
        f"SELECT {cast} FROM (SELECT * FROM read_parquet({_sql_list(files)}, union_by_name = true, "
        f"hive_partitioning = false) UNION ALL BY NAME SELECT {typed} WHERE false)"
    )


def _sql_list(paths: list[str]) -> str:
    """Files as a DuckDB list literal, each read as named (never as a glob)."""
    return "[" + ", ".join(_sql_str(literal_path(p)) for p in paths) + "]"


def _sql_str(text: str | Path) -> str:
    return "'" + str(text).replace("'", "''") + "'"


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
            f"CREATE TEMP VIEW rolled AS {_files_view('gpu_rollups', rollups, _ROLLUP_INPUT)}"
        )
        con.execute(f"CREATE TEMP VIEW loose AS {_LOOSE_SQL if rollups else 'SELECT * FROM day'}")
        con.execute(f"CREATE TEMP VIEW seen AS {_SEEN_SQL}")
        daily = _GPU_DAILY_SQL.format(hourly=_sql_list([str(scratch / "gpu_hourly.parquet")]))
        for table, sql in [*_DAILY_SQL.items(), ("gpu_daily", daily)]:
            out = scratch / f"{table}.parquet"
            rows = con.execute(
                f"COPY ({sql}) TO {_sql_str(out)} (FORMAT parquet, COMPRESSION zstd)"
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


def _covariate_case() -> str:
    return (
        "CASE metric "
        + " ".join(f"WHEN {_sql_str(m)} THEN {_sql_str(c)}" for m, c in CANONICAL_METRICS.items())
        + " END"
    )


def _covariate_metrics(covariates: tuple[str, ...]) -> str:
    return ", ".join(_sql_str(m) for m, c in CANONICAL_METRICS.items() if c in covariates)


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
        f"SELECT * FROM ({_files_view('gpu_hourly', files, columns)}) WHERE {where} "
        f"AND host IN ({', '.join(_sql_str(h) for h in sorted(hosts))})"
        for d, hosts in sorted(hosts_by_date.items())
        if hosts and (files := wh.files("gpu_hourly", partition=d.isoformat()))
    ] or [_files_view("gpu_hourly", [], columns)]
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
        "sum(sum) AS s, "
        "sum(n) AS n, max(max) AS mx, max(last_hour) AS last_hour FROM "
        f"({wh.view_sql('gpu_daily')}) "
        f"WHERE metric IN ({_covariate_metrics(covariates)}) GROUP BY ALL"
    )


def _increments_sql(series: str, extra: str = "") -> str:
    """DuckDB SQL over a relation of counter samples (cluster, host, gpu, uuid, metric, time,
    value, source_file, and the ``extra`` columns, e.g. ", date"): every rise of a cumulative
    counter over the sample before it in its series (``lag`` over each series), with its
    ``base`` metric (the XID count's per-code name without its labels) and the increase
    ``inc``. Run out of core: only the rises come back."""
    bases = ", ".join(_sql_str(m) for m in COUNTER_METRICS)
    return f"""
        SELECT * FROM (
            SELECT *,
                value - lag(value) OVER (PARTITION BY {_SERIES} ORDER BY time NULLS LAST) AS inc
            FROM (
                SELECT cluster, host, gpu, uuid, metric,
                    regexp_replace(metric, '\\{{.*$', '') AS base,
                    time, value, source_file{extra}
                FROM {series} WHERE value IS NOT NULL
            ) WHERE base IN ({bases})
        ) WHERE inc > 0"""


def _counter_event_rows(rises: pl.DataFrame) -> pl.DataFrame:
    """hw_events rows from ``_increments_sql`` rows (count = the increase)."""
    cls = {m: c for m, (c, _) in COUNTER_METRICS.items()}
    sev = {m: s for m, (_, s) in COUNTER_METRICS.items()}
    df = rises.filter(pl.col("inc") > 0)  # Polars' NaN order, as the counters were always read
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


def counter_events(samples: pl.DataFrame) -> pl.DataFrame:
    """hw_events rows for increases of cumulative error counters in ``samples`` (count = the
    increase); the same SQL as ``refresh_counter_events`` runs over the stored table."""
    cols = ["cluster", "host", "gpu", "uuid", "metric", "time", "value", "source_file"]
    with duckdb.connect() as con:
        con.register("series", samples.select(cols))
        rises = con.sql(_increments_sql("series")).pl()
    return _counter_event_rows(rises)


# + YYYY-MM-DD: the hw_events piece (file of the counter-events partition) of one day's rises
COUNTER_PIECE = "day-"


def _counter_piece(day: str) -> str:
    return COUNTER_PIECE + day


def counter_days_to_redo(wh: Warehouse) -> tuple[list[str], list[str]]:
    """(days of gpu_counter_changes whose counter events must be recomputed, pieces of the
    counter-events partition to delete). A day's rises depend on its changes and on each
    series' last value before it, so from the first day whose piece is missing or older than
    the changes of that day or of any day before it, every later day is redone (a daily run:
    only the new day). A piece whose day has no changes any more is deleted, and the days
    after it are redone; a whole-partition file of an older version means every day."""
    changes = wh.partition_mtimes("gpu_counter_changes")
    pieces = wh.piece_mtimes("hw_events", COUNTER_SOURCE)
    days = sorted(changes)
    stored = {
        p.removeprefix(COUNTER_PIECE): t for p, t in pieces.items() if p.startswith(COUNTER_PIECE)
    }
    drop = sorted(p for p in pieces if p not in {_counter_piece(d) for d in days})
    gone = [d for d in stored if d not in changes]
    first = days[0] if days and any(not p.startswith(COUNTER_PIECE) for p in pieces) else None
    newest = 0.0
    for d in days:
        newest = max(newest, changes[d])
        if d not in stored or stored[d] < newest or any(g < d for g in gone):
            first = d if first is None else min(first, d)
            break
    return [d for d in days if first is not None and d >= first], drop


def refresh_counter_events(wh: Warehouse) -> int:
    """Bring the ``source=dcgm_counter`` partition of hw_events up to date with
    gpu_counter_changes (itself brought up to date first), incrementally: one piece per day
    of changes (``Warehouse.write_pieces``), and only the days ``counter_days_to_redo`` names
    are computed, from their changes and each series' last value before the first of them.
    Out of core and in bounded memory: hosts are split into ranges of about
    ``COUNTER_GROUP_ROWS`` changes (a series never spans hosts, so each range's increments are
    exact), DuckDB takes each range's increments within ``OUT_OF_CORE_MEMORY``, and the rises
    reach Python ``COUNTER_CHUNK_ROWS`` at a time. Returns the partition's event count."""
    refresh_gpu_hourly(wh)
    with wh.writer():
        todo, drop = counter_days_to_redo(wh)
        if todo:
            _write_counter_days(wh, todo)
        wh.drop_pieces("hw_events", COUNTER_SOURCE, drop)
        files = wh.files("hw_events", partition=COUNTER_SOURCE)
        if not files:
            return 0
        with wh.connect() as con:
            return con.execute(
                f"SELECT sum(num_rows)::BIGINT FROM parquet_file_metadata({_sql_list(files)})"
            ).fetchall()[0][0]


def _write_counter_days(wh: Warehouse, days: list[str]) -> None:
    """Write the counter-events piece of each of ``days`` (consecutive, the last days of
    gpu_counter_changes): the changes from the first of them, each series seeded with its
    last value before it (the seed is the first row of its series here, so never a rise)."""
    view = wh.view_sql("gpu_counter_changes")
    first = f"DATE {_sql_str(days[0])}"
    with wh.connect_out_of_core() as con, wh.write_pieces("hw_events", COUNTER_SOURCE) as write:
        for d in days:  # a day without rises still gets its (empty) piece: it is done
            write(_counter_piece(d), pl.DataFrame())
        # one row per series: small, computed once (every host range reads it)
        con.execute(f"""CREATE TEMP TABLE seeds AS
            SELECT {_SERIES}, max(time) AS time, arg_max(value, time) AS value FROM ({view})
            WHERE date < {first} AND value IS NOT NULL GROUP BY ALL""")
        changes = f"(SELECT * FROM ({view}) WHERE date >= {first})"
        per_host = con.sql(
            f"SELECT host, count(*) AS n FROM {changes} GROUP BY host ORDER BY host NULLS FIRST"
        ).pl()
        group = (per_host["n"].cum_sum() - per_host["n"]) // COUNTER_GROUP_ROWS
        ranges = per_host.group_by(group.alias("g"), maintain_order=True).agg(
            lo=pl.col("host").min(), hi=pl.col("host").max(), null=pl.col("host").is_null().any()
        )
        for lo, hi, null in ranges.select("lo", "hi", "null").iter_rows():
            where = "false" if hi is None else f"host BETWEEN {_sql_str(lo)} AND {_sql_str(hi)}"
            where = f"(host IS NULL OR {where})" if null else where
            series = f"""(
                SELECT cluster, host, gpu, uuid, metric, time, value, source_file, date
                FROM {changes} WHERE {where}
                UNION ALL BY NAME
                SELECT *, NULL AS source_file, NULL::DATE AS date FROM seeds WHERE {where}
            )"""
            for batch in con.sql(_increments_sql(series, ", date")).to_arrow_reader(
                COUNTER_CHUNK_ROWS
            ):
                rises = pl.from_arrow(batch).filter(
                    pl.col("inc") > 0
                )  # as _counter_event_rows does
                write(
                    COUNTER_PIECE + rises["date"].cast(pl.Utf8),
                    _counter_event_rows(rises.drop("date")),
                )


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
