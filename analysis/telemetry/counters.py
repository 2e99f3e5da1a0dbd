"""``hw_events`` (``source='dcgm_counter'``): increments of cumulative error counters per
(host, gpu, uuid, metric), from ``gpu_counter_changes``. A decrease is a reset (reboot,
replacement) and not an event; the first sample of a series sets its baseline.
``DCGM_FI_DEV_XID_ERRORS`` holds only the last XID value, so a change of it is not turned into an
event here (a repeat of the same XID is invisible, and kernel logs are the XID record: counting
both would double-count); it stays in gpu_samples / gpu_hourly as a hint."""

import duckdb
import polars as pl

from analysis.telemetry.metrics import COUNTER_METRICS
from analysis.telemetry.rollups import refresh_gpu_hourly
from analysis.telemetry.sql import SERIES_SQL
from analysis.telemetry.sql import sql_list
from analysis.telemetry.sql import sql_str
from analysis.telemetry.sql import sql_values
from warehouse.schemas import conform
from warehouse.store import Warehouse

COUNTER_SOURCE = "dcgm_counter"
COUNTER_CHUNK_ROWS = 100_000  # counter rises turned into hw_events rows and written per chunk
COUNTER_GROUP_ROWS = (
    200_000  # stored counter changes per group of hosts whose increments DuckDB takes at once
)


def _increments_sql(series: str, extra: str = "") -> str:
    """DuckDB SQL over a relation of counter samples (cluster, host, gpu, uuid, metric, time,
    value, source_file, and the ``extra`` columns, e.g. ", date"): every rise of a cumulative
    counter over the sample before it in its series (``lag`` over each series), with its
    ``base`` metric (the XID count's per-code name without its labels) and the increase
    ``inc``. Run out of core: only the rises come back."""
    return f"""
        SELECT * FROM (
            SELECT *,
                value - lag(value) OVER (PARTITION BY {SERIES_SQL} ORDER BY time NULLS LAST) AS inc
            FROM (
                SELECT cluster, host, gpu, uuid, metric,
                    regexp_replace(metric, '\\{{.*$', '') AS base,
                    time, value, source_file{extra}
                FROM {series} WHERE value IS NOT NULL
            ) WHERE base IN ({sql_values(COUNTER_METRICS)})
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
                f"SELECT sum(num_rows)::BIGINT FROM parquet_file_metadata({sql_list(files)})"
            ).fetchall()[0][0]


def _write_counter_days(wh: Warehouse, days: list[str]) -> None:
    """Write the counter-events piece of each of ``days`` (consecutive, the last days of
    gpu_counter_changes): the changes from the first of them, each series seeded with its
    last value before it (the seed is the first row of its series here, so never a rise)."""
    view = wh.view_sql("gpu_counter_changes")
    first = f"DATE {sql_str(days[0])}"
    with wh.connect_out_of_core() as con, wh.write_pieces("hw_events", COUNTER_SOURCE) as write:
        for d in days:  # a day without rises still gets its (empty) piece: it is done
            write(_counter_piece(d), pl.DataFrame())
        # one row per series: small, computed once (every host range reads it)
        con.execute(f"""CREATE TEMP TABLE seeds AS
            SELECT {SERIES_SQL}, max(time) AS time, arg_max(value, time) AS value FROM ({view})
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
            where = "false" if hi is None else f"host BETWEEN {sql_str(lo)} AND {sql_str(hi)}"
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
