"""Ingest assets: source files and live sources into the Parquet warehouse, and the checks
that guard them (conservation per file and per pulled window, schema, quarantine share).

Both sources write every ingest table: an asset reading one depends on both (``SOURCE_ASSETS``,
every pulled day of ``pulled_sources``).
"""

from datetime import UTC
from datetime import date
from datetime import datetime
from datetime import timedelta

import dagster as dg
import polars as pl

from analysis.health_events import refresh_health_failures
from analysis.observation import source_spans
from ingest.runner import ingest_paths
from pipelines.assets.factory import OWNERS
from pipelines.assets.factory import POLARS
from pipelines.assets.factory import guarded
from pipelines.assets.factory import register
from pipelines.assets.factory import writers
from pipelines.checks import asset_check
from pipelines.checks import primary_tables
from pipelines.resources import PULL_BACKFILL_START
from pipelines.resources import Settings
from pipelines.resources import naive_utc
from pipelines.resources import select_sources
from sources.pull import pull
from warehouse import checks as warehouse_checks
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

TELEMETRY_DAYS = dg.DynamicPartitionsDefinition(name="telemetry_days")
# days a backfill of the live sources can pull, one run a day (scheduled pulls take no partition)
PULL_DAYS = dg.DailyPartitionsDefinition(start_date=PULL_BACKFILL_START, end_offset=1)


def rollup_days(wh: Warehouse) -> tuple[str | None, str | None]:
    """The gpu_hourly partitions to build (first, last day): the days of the telemetry's robust
    span (one sample dated 2023 or 9999 neither stretches nor breaks it), up to today (UTC);
    (None, why not) when there are none."""
    spans = source_spans(wh).filter(pl.col("source") == "telemetry")
    if spans.height == 0:
        return None, "no telemetry (gpu_samples or gpu_rollups)"
    first = spans["span_from"][0].date()
    last = min(spans["span_to"][0].date(), datetime.now(UTC).date())
    if first > last:
        span = f"{spans['span_from'][0]:%Y-%m-%d}..{spans['span_to'][0]:%Y-%m-%d}"
        return None, f"telemetry span {span} starts after today"
    return first.isoformat(), last.isoformat()


def register_days(instance: dg.DagsterInstance, wh: Warehouse) -> list[str]:
    """Every day of the telemetry's span, added to the ``telemetry_days`` partitions where new;
    returns those days (oldest first)."""
    first, last = rollup_days(wh)
    if first is None:
        return []
    start = date.fromisoformat(first)
    n = (date.fromisoformat(last) - start).days + 1
    days = [(start + timedelta(days=i)).isoformat() for i in range(n)]
    known = set(instance.get_dynamic_partitions(TELEMETRY_DAYS.name))
    new = [d for d in days if d not in known]
    if new:
        instance.add_dynamic_partitions(TELEMETRY_DAYS.name, new)
    return days


class IngestConfig(dg.Config):
    paths: list[str] = []  # noqa: RUF012 (pydantic copies defaults) - set by the landing sensor


@dg.asset(group_name="ingest", kinds={"polars", "parquet"}, owners=OWNERS)
def ingested_sources(
    context: dg.AssetExecutionContext, config: IngestConfig, settings: Settings
) -> dg.MaterializeResult:
    """Parse every new source file (sha256-deduplicated) into the Parquet warehouse; bad
    records go to quarantine."""
    wh = settings.warehouse()
    reports = ingest_paths(
        wh,
        config.paths or settings.source_paths(),
        "auto",
        settings.parse_context(),
        jobs=settings.ingest_jobs or None,
    )
    days = register_days(context.instance, wh)
    return dg.MaterializeResult(metadata=ingest_metadata(reports, days))


def ingest_metadata(reports, days: list[str]) -> dict:
    """What an ingest materialization shows (the asset's and `goodput ingest`'s): files new and
    already ingested, rows and quarantined rows, per format, and the telemetry days now known."""
    new = [r for r in reports if not r.skipped]
    by_format: dict[str, dict[str, int]] = {}
    for r in new:
        f = by_format.setdefault(r.format, {"files": 0, "rows": 0, "quarantined": 0})
        f["files"] += 1
        f["rows"] += r.rows_ok
        f["quarantined"] += r.rows_quarantined
    return {
        "files_new": len(new),
        "files_already_ingested": len(reports) - len(new),
        "rows": sum(r.rows_ok for r in new),
        "rows_quarantined": sum(r.rows_quarantined for r in new),
        "by_format": dg.MetadataValue.json(by_format),
        "telemetry_days": len(days),
    }


class PullConfig(dg.Config):
    # names in sources.toml; empty: every source
    sources: list[str] = []  # noqa: RUF012 (pydantic copies defaults)
    since: str = ""  # ISO-8601 UTC; empty: each source from its cursor (a backfill gives both)
    until: str = ""  # ISO-8601 UTC; empty: now


@dg.asset(group_name="ingest", kinds={"python", "parquet"}, owners=OWNERS, partitions_def=PULL_DAYS)
def pulled_sources(
    context: dg.AssetExecutionContext, config: PullConfig, settings: Settings
) -> dg.MaterializeResult:
    """Pull every live source of HOME/sources.toml (slurmdbd, Prometheus-compatible TSDB,
    Redfish BMCs, commands) from its cursor to now, through the same parsers and record keys as
    files; a source that fails is a failed pull_log row and is caught up by the next run. A run
    with a partition (a day) pulls that day: a backfill."""
    wh = settings.warehouse()
    chosen = select_sources(wh, config.sources)
    since, until = naive_utc(config.since), naive_utc(config.until)
    if context.has_partition_key:
        window = context.partition_time_window
        since, until = _naive(window.start), _naive(window.end)
    reports = pull(wh, chosen, since, until)
    days = register_days(context.instance, wh)
    return dg.MaterializeResult(metadata=pull_metadata(reports, days))


def _naive(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


# what everything downstream reads: files ingested and sources pulled (every pulled day)
SOURCE_ASSETS = [
    ingested_sources,
    dg.AssetDep(pulled_sources, partition_mapping=dg.AllPartitionMapping()),
]
register([name for name, spec in TABLES.items() if spec.kind == "ingest"], SOURCE_ASSETS)


@dg.asset(
    group_name="warehouse",
    deps=writers("health_events"),
    kinds=set(POLARS),
    owners=OWNERS,
)
def health_event_failures(settings: Settings) -> dg.MaterializeResult:
    """Failures (source health-events) paired from every stored health event, whichever file or
    pull brought its start and its end, and what became of each event (health_event_pairs)."""
    wh = settings.warehouse()
    counts = guarded(
        wh,
        "health_event_failures",
        (),
        lambda: refresh_health_failures(wh),
        lambda c: c["failures"],
    )
    return dg.MaterializeResult(metadata=counts or {})


register(["failures", "health_event_pairs"], [health_event_failures])


def pull_metadata(reports, days: list[str]) -> dict:
    """What a pull's materialization shows (the asset's and `goodput pull`'s): windows pulled and
    failed per source, rows stored, quarantined and already stored, the failures' reasons."""
    by_source: dict[str, dict] = {}
    for r in reports:
        s = by_source.setdefault(
            r.source,
            {"windows_ok": 0, "failed": 0, "rows": 0, "quarantined": 0, "already_stored": 0},
        )
        s["windows_ok" if r.status == "ok" else "failed"] += 1
        s["rows"] += r.rows_ok
        s["quarantined"] += r.rows_quarantined
        s["already_stored"] += r.rows_duplicate
    failed = [
        f"{r.source}{'/' + r.target if r.target else ''} {r.window}: {r.error}"
        for r in reports
        if r.status == "failed"
    ]
    return {
        "sources": len(by_source),
        "rows": sum(r.rows_ok for r in reports),
        "rows_quarantined": sum(r.rows_quarantined for r in reports),
        "rows_already_stored": sum(r.rows_duplicate for r in reports),
        "failures": len(failed),
        "first_failures": dg.MetadataValue.md("\n".join(f"- {f}" for f in failed[:20]) or "(none)"),
        "by_source": dg.MetadataValue.json(by_source),
        "telemetry_days": len(days),
    }


conservation_check = asset_check(
    "conservation_check",
    "ingested_sources",
    warehouse_checks.conservation,
    lambda settings: (primary_tables(),),
    blocking=True,
)
pull_conservation_check = asset_check(
    "pull_conservation_check", "pulled_sources", warehouse_checks.pull_conservation, blocking=True
)
schema_check = asset_check(
    "schema_check", "ingested_sources", warehouse_checks.schema, blocking=True
)
quarantine_ratio_check = asset_check(
    "quarantine_ratio_check",
    "ingested_sources",
    warehouse_checks.quarantine_ratio,
    lambda settings: (settings.max_quarantine_ratio,),
    severity=dg.AssetCheckSeverity.WARN,
)
