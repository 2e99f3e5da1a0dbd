"""The warehouse's invariants as plain checks (docs/design.md): conservation per ingested file, only
declared columns, no duplicate record keys, a bounded quarantine share, no telemetry hour
holding more samples than its series' scrape interval allows.

Each takes a :class:`~warehouse.store.Warehouse` and returns a :class:`CheckResult` (passed,
description, metadata); ``pipelines/checks.py`` wraps them as Dagster asset checks and
``analysis/checks.py`` holds the analyses' own.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field

import duckdb
import polars as pl
import pyarrow.parquet as pq

from warehouse.schemas import TABLES
from warehouse.store import Warehouse
from warehouse.store import literal_path


@dataclass(frozen=True)
class CheckResult:
    """One invariant check's outcome: whether it held, what it checks, and what it measured
    (for a check of rows: ``violations``, how many break it, and ``examples``, a few of them in
    words)."""

    passed: bool
    description: str
    metadata: dict = field(default_factory=dict)


def invariant(description: str) -> Callable:
    """Declare a check: the function returns (passed, metadata); the declared check returns a
    CheckResult with this one-line description (also ``check.description``, for the wrappers)."""

    def declare(fn: Callable[..., tuple[bool, dict]]) -> Callable[..., CheckResult]:
        @functools.wraps(fn)
        def check(*args, **kwargs) -> CheckResult:
            passed, metadata = fn(*args, **kwargs)
            return CheckResult(bool(passed), description, metadata)

        check.description = description
        return check

    return declare


def query_tables(wh: Warehouse, sql: str, *tables: str) -> pl.DataFrame:
    """``sql`` over views of ``tables`` only: a check reads what it names, so an unreadable
    table fails the checks that read it and no other."""
    with wh.connect() as con:
        for t in tables:
            con.execute(f'CREATE TEMP VIEW "{t}" AS {wh.view_sql(t)}')
        return con.sql(sql).pl()


def raw_counts(wh: Warehouse, table: str) -> dict[str, int]:
    """Rows per source_file in a table's Parquet as ingested (a Dedupe table's source rows)."""
    files = wh.record_files(table)
    if not files or "source_file" not in TABLES[table].columns:
        return {}
    with wh.connect() as con:
        rows = con.execute(
            "SELECT source_file, count(*) FROM read_parquet($files, hive_partitioning=true) "
            "GROUP BY 1",
            {"files": [literal_path(f) for f in files]},
        ).fetchall()
    return dict(rows)


@invariant("Records read = rows written + rows quarantined, per ingested file.")
def conservation(wh: Warehouse, primary: Mapping[str, str]) -> tuple[bool, dict]:
    """Every ingested file: records read = rows in its primary table (``primary``: format name ->
    table, from the ingest registry) + rows quarantined + rows already stored (an earlier file or
    line held the same record), and the rows the manifest claims are really in the table."""
    manifest = wh.read("ingest_manifest")
    quarantined = (
        wh.query("SELECT sha256, count(*) n FROM quarantine GROUP BY 1")
        if manifest.height
        else None
    )
    q_by_sha = dict(quarantined.rows()) if quarantined is not None else {}
    counts = {t: raw_counts(wh, t) for t in set(primary.values())}
    bad = []
    for m in manifest.iter_rows(named=True):
        table = primary.get(m["format"])
        in_table = counts[table].get(m["path"], 0) if table else 0
        in_quarantine = q_by_sha.get(m["sha256"], 0)
        if (
            m["records_read"] != m["rows_ok"] + m["rows_quarantined"] + (m["rows_duplicate"] or 0)
            or in_table < m["rows_ok"]
            or in_quarantine != m["rows_quarantined"]
        ):
            bad.append(
                f"{m['path']}: read {m['records_read']}, table {in_table}, quarantine "
                f"{in_quarantine}"
            )
    return not bad, {"files": manifest.height, "violations": len(bad), "first": "; ".join(bad[:5])}


@invariant("Records read = rows written + rows quarantined + repeats, per pulled window.")
def pull_conservation(wh: Warehouse) -> tuple[bool, dict]:
    """Every window a live source pulled whole: records read = rows stored + quarantined + already
    stored, and the rows each source claims are in the warehouse (its documents are named
    ``pull://<source>/...``; a later forget may only lower what is there)."""
    log = wh.read("pull_log", "status = 'ok' AND target IS NULL")
    bad = [
        f"{r['source']} {r['window_start']}: read {r['records_read']}, stored {r['rows_ok']}, "
        f"quarantined {r['rows_quarantined']}, repeats {r['rows_duplicate']}"
        for r in log.iter_rows(named=True)
        if r["records_read"] != r["rows_ok"] + r["rows_quarantined"] + r["rows_duplicate"]
    ]
    stored: dict[str, int] = {}
    tables = {
        t for t, spec in TABLES.items() if spec.kind == "ingest" and "source_file" in spec.columns
    }
    for table in sorted(tables | {"quarantine"}):
        if not (files := wh.record_files(table)):
            continue
        with wh.connect() as con:  # counted in DuckDB: only the pulled rows' sources come back
            rows = con.execute(
                "SELECT split_part(source_file[8:], '/', 1), count(*) FROM read_parquet($files, "
                "hive_partitioning=true) WHERE starts_with(source_file, 'pull://') GROUP BY 1",
                {"files": [literal_path(f) for f in files]},
            ).fetchall()
        for source, n in rows:
            stored[source] = stored.get(source, 0) + n
    claimed = log.group_by("source").agg(n=(pl.col("rows_ok") + pl.col("rows_quarantined")).sum())
    bad += [
        f"{s}: {n} rows pulled, {stored.get(s, 0)} stored"
        for s, n in claimed.rows()
        if stored.get(s, 0) < n
    ]
    return not bad, {"windows": log.height, "violations": len(bad), "first": "; ".join(bad[:5])}


@invariant("Parquet files hold exactly the declared columns and types.")
def schema(wh: Warehouse) -> tuple[bool, dict]:
    """Every Parquet file holds only declared columns, with types DuckDB can cast to the
    declared ones."""
    bad = []
    for name, spec in TABLES.items():
        files = wh.files(name)
        for f in files:
            cols = set(pq.read_schema(f, filesystem=wh.fs).names)
            extra = cols - set(spec.columns)
            if extra:
                bad.append(f"{f[len(wh.parquet) + 1 :]}: undeclared {sorted(extra)}")
        if files:
            try:
                with wh.connect() as con:
                    con.execute(f"SELECT * FROM ({wh.view_sql(name)}) LIMIT 1").fetchall()
            except duckdb.Error as exc:
                bad.append(f"{name}: {str(exc).splitlines()[0]}")
    return not bad, {"violations": len(bad), "first": "; ".join(bad[:5]), "tables": len(TABLES)}


@invariant("No table has two rows with the same key.")
def duplicate_keys(wh: Warehouse) -> tuple[bool, dict]:
    """Per table with a record key: how many keys occur on more than one row (none may)."""
    dups: dict[str, int] = {}
    for name, spec in TABLES.items():
        if not spec.key or not wh.files(name):
            continue
        keys = ", ".join(f'"{k}"' for k in spec.key)
        with wh.connect() as con:
            n = con.execute(
                f"SELECT count(*) FROM (SELECT {keys} FROM ({wh.view_sql(name)}) GROUP BY ALL "
                "HAVING count(*) > 1)"
            ).fetchall()[0][0]
        if n:
            dups[name] = n
    return not dups, {
        "tables_with_duplicates": dups,
        "violations": sum(dups.values()),
        "examples": [f"{t}: {n:,} keys on more than one row" for t, n in dups.items()],
    }


# A series' scrape interval on a day: the median gap between its consecutive samples (a late or
# missed scrape moves the median little). An hour [h, h + 1 h) holds at most floor(3600 / step)
# + 1 samples of it: the + 1 for a sample at the hour's edge that jitter moved inside, and the
# step taken 0.1% short for a median gap a jitter lengthened. A gpu_hourly row sums a GPU's MIG
# instances (one series each). A series-day with no two samples (a TSDB rollup pulled alone)
# takes the median step of its host's series that day, once per instance the rollups hold; an
# hour with neither is not checked (``unchecked``). Only days with an hour of more than one
# sample are read: one sample fits any interval.
_HOURLY_SAMPLES = """
    WITH days AS (SELECT DISTINCT date FROM gpu_hourly WHERE n > 1),
    gaps AS (
        SELECT date, cluster, host, gpu, uuid, pci_bus, mig_instance, metric,
            epoch(time) - epoch(lag(time) OVER (PARTITION BY cluster, host, gpu, uuid, pci_bus,
                mig_instance, metric ORDER BY time)) AS gap
        FROM gpu_samples WHERE date IN (SELECT date FROM days)
    ),
    steps AS (
        SELECT date, cluster, host, gpu, uuid, pci_bus, mig_instance, metric, median(gap) AS step
        FROM gaps WHERE gap > 0 GROUP BY ALL
    ),
    series AS (
        SELECT date, cluster, host, gpu, uuid, pci_bus, metric, min(step) AS step,
            sum(floor(3600 / (step * 0.999)) + 1) AS cap
        FROM steps GROUP BY ALL
    ),
    hosts AS (SELECT date, cluster, host, median(step) AS step FROM steps GROUP BY ALL),
    instances AS (
        SELECT hour, cluster, host, gpu, uuid, pci_bus, metric,
            count(DISTINCT coalesce(mig_instance, '')) AS k
        FROM gpu_rollups WHERE date IN (SELECT date FROM days) GROUP BY ALL
    ),
    hours AS (
        SELECT h.hour, h.cluster, h.host, h.gpu, h.metric, h.n,
            coalesce(s.step, o.step) AS step,
            coalesce(s.cap, (floor(3600 / (o.step * 0.999)) + 1) * coalesce(i.k, 1)) AS cap
        FROM gpu_hourly h
        LEFT JOIN series s ON s.date = h.date AND s.cluster IS NOT DISTINCT FROM h.cluster
            AND s.host IS NOT DISTINCT FROM h.host AND s.gpu IS NOT DISTINCT FROM h.gpu
            AND s.uuid IS NOT DISTINCT FROM h.uuid AND s.pci_bus IS NOT DISTINCT FROM h.pci_bus
            AND s.metric = h.metric
        LEFT JOIN hosts o ON o.date = h.date AND o.cluster IS NOT DISTINCT FROM h.cluster
            AND o.host IS NOT DISTINCT FROM h.host
        LEFT JOIN instances i ON i.hour = h.hour AND i.cluster IS NOT DISTINCT FROM h.cluster
            AND i.host IS NOT DISTINCT FROM h.host AND i.gpu IS NOT DISTINCT FROM h.gpu
            AND i.uuid IS NOT DISTINCT FROM h.uuid AND i.pci_bus IS NOT DISTINCT FROM h.pci_bus
            AND i.metric = h.metric
        WHERE h.n > 1
    )
    SELECT * FROM hours WHERE cap IS NULL OR n > cap ORDER BY n / cap DESC NULLS LAST, hour"""


@invariant("No telemetry hour holds more samples than its series' scrape interval allows.")
def hourly_samples(wh: Warehouse) -> tuple[bool, dict]:
    """Every ``gpu_hourly`` row's ``n`` at most the samples an hour can hold at its series'
    scrape interval (``_HOURLY_SAMPLES``)."""
    if not wh.files("gpu_hourly"):
        return True, {"violations": 0, "examples": [], "unchecked_hours": 0}
    rows = query_tables(wh, _HOURLY_SAMPLES, "gpu_hourly", "gpu_samples", "gpu_rollups")
    over = rows.filter(pl.col("cap").is_not_null())
    shown = [
        f"{r['host']} GPU {r['gpu']} {r['metric']} {r['hour']:%Y-%m-%d %H}:00: {r['n']:,} "
        f"samples, at most {r['cap']:,.0f} at one every {r['step']:.3g} s"
        for r in over.head(5).iter_rows(named=True)
    ]
    return over.height == 0, {
        "violations": over.height,
        "examples": shown,
        "unchecked_hours": rows.height - over.height,
    }


@invariant("Share of quarantined records stays under the configured threshold.")
def quarantine_ratio(wh: Warehouse, limit: float) -> tuple[bool, dict]:
    """Quarantined records / records read, over the whole manifest, at most ``limit``."""
    m = wh.read("ingest_manifest")
    read = int(m["records_read"].sum()) if m.height else 0
    bad = int(m["rows_quarantined"].sum()) if m.height else 0
    ratio = bad / read if read else 0.0
    return ratio <= limit, {
        "records_read": read,
        "quarantined": bad,
        "ratio": ratio,
        "limit": limit,
    }
