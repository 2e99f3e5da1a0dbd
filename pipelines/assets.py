"""Dagster assets: thin wrappers over the plain functions in ingest/, analysis/, dashboards/.

Groups follow the data: ingest (sources -> Parquet), warehouse (rollups, derived events),
analysis (interruptions, lifetimes, fits, goodput), catalog (the DuckDB views over all of it),
dashboards (the report). Each asset reports what a user looks for in the UI: row counts
(``dagster/row_count``), quarantine, coverage, fit and goodput summaries, the report path; its
definition carries kinds, owners and the column schema of the table it writes.

``gpu_hourly`` is partitioned by the days the telemetry covers (dynamic partitions, added by
the ingest asset and by every build), so the UI shows no day before the data's first. A day's
partition writes that day of every daily table (gpu_hourly and the compact gpu_daily,
gpu_counter_changes, gpu_sightings); a backfill runs ``BACKFILL_DAYS`` days per run. The
whole-history assets after it (counter events, replacements, lifetimes) read only the compact
tables, so a daily run costs one day of samples plus a history of compact rows.
"""


from datetime import UTC, date, datetime, timedelta

import dagster as dg
import polars as pl

from analysis import (
    attribution,
    availability,
    breakdown,
    goodput_measured,
    lifetimes,
    node_health,
    repairable,
    status,
    survival,
    system_mtbf,
    telemetry,
    trend,
    whatif,
)
from analysis.headline import fleet_headline, selected_rates
from analysis.observation import source_spans
from analysis.status import MissingInputs
from dashboards.report import build_report
from ingest.runner import ingest_paths
from pipelines.resources import PULL_BACKFILL_START, GoodputConfig, _utc, select_sources
from sources.pull import pull
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

TELEMETRY_DAYS = dg.DynamicPartitionsDefinition(name="telemetry_days")
# days a backfill of the live sources can pull, one run a day (scheduled pulls take no partition)
PULL_DAYS = dg.DailyPartitionsDefinition(start_date=PULL_BACKFILL_START, end_offset=1)
CATALOG_POOL = "duckdb_catalog"  # one writer at a time: DuckDB's rule
BACKFILL_DAYS = 7  # telemetry days per backfill run: a bounded chunk of work, whatever the range
OWNERS = ["team:fleet-goodput"]


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
        return None, f"telemetry span {spans['span_from'][0]:%Y-%m-%d}..{spans['span_to'][0]:%Y-%m-%d} starts after today"
    return first.isoformat(), last.isoformat()


def register_days(instance: dg.DagsterInstance, wh: Warehouse) -> list[str]:
    """Every day of the telemetry's span, added to the ``telemetry_days`` partitions where new;
    returns those days (oldest first)."""
    first, last = rollup_days(wh)
    if first is None:
        return []
    start, n = date.fromisoformat(first), (date.fromisoformat(last) - date.fromisoformat(first)).days + 1
    days = [(start + timedelta(days=i)).isoformat() for i in range(n)]
    known = set(instance.get_dynamic_partitions(TELEMETRY_DAYS.name))
    new = [d for d in days if d not in known]
    if new:
        instance.add_dynamic_partitions(TELEMETRY_DAYS.name, new)
    return days


def table_metadata(table: str) -> dict:
    """Definition metadata of an asset that writes ``table``: its declared columns."""
    cols = [dg.TableColumn(name, column_type(dtype)) for name, dtype in TABLES[table].columns.items()]
    return {"dagster/column_schema": dg.TableSchema(columns=cols), "table": table}


def column_type(dtype: pl.DataType) -> str:
    """A column's declared type as the UI shows it; times are naive UTC (warehouse/schemas.py)."""
    return f"Datetime({dtype.time_unit}, UTC)" if isinstance(dtype, pl.Datetime) else str(dtype)


def row_count(wh: Warehouse, table: str) -> dict:
    """``dagster/row_count``: the rows the table's view holds now."""
    if not wh.files(table):
        return {"dagster/row_count": dg.MetadataValue.int(0)}
    with wh.connect() as con:
        n = con.execute(f"SELECT count(*) FROM ({wh.view_sql(table)})").fetchall()[0][0]
    return {"dagster/row_count": dg.MetadataValue.int(int(n))}


class IngestConfig(dg.Config):
    paths: list[str] = []  # noqa: RUF012 (pydantic copies defaults) - set by the landing sensor


@dg.asset(group_name="ingest", kinds={"polars", "parquet"}, owners=OWNERS, description="Parse every new source file (sha256-deduplicated) into the Parquet warehouse; bad records go to quarantine.")
def ingested_sources(context: dg.AssetExecutionContext, config: IngestConfig, goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    reports = ingest_paths(wh, config.paths or goodput.source_paths(), "auto", goodput.parse_context(),
                           jobs=goodput.ingest_jobs or None)
    return dg.MaterializeResult(metadata=ingest_metadata(reports, register_days(context.instance, wh)))


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
    sources: list[str] = []  # noqa: RUF012 (pydantic copies defaults) - names in sources.toml; empty: every source
    since: str = ""  # ISO-8601 UTC; empty: each source from its cursor (a backfill gives both)
    until: str = ""  # ISO-8601 UTC; empty: now


@dg.asset(group_name="ingest", kinds={"python", "parquet"}, owners=OWNERS,
          description="Pull every live source of HOME/sources.toml (slurmdbd, Prometheus-compatible TSDB, Redfish "
          "BMCs, commands) from its cursor to now, through the same parsers and record keys as files; a source that "
          "fails is a failed pull_log row and is caught up by the next run. A run with a partition (a day) pulls "
          "that day: a backfill.",
          partitions_def=PULL_DAYS)
def pulled_sources(context: dg.AssetExecutionContext, config: PullConfig, goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    chosen = select_sources(wh, config.sources)
    since, until = _utc(config.since), _utc(config.until)
    if context.has_partition_key:
        window = context.partition_time_window
        since, until = _naive(window.start), _naive(window.end)
    reports = pull(wh, chosen, since, until)
    return dg.MaterializeResult(metadata=pull_metadata(reports, register_days(context.instance, wh)))


def _naive(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


# what everything downstream reads: files ingested and sources pulled (every pulled day)
SOURCE_ASSETS = [ingested_sources, dg.AssetDep(pulled_sources, partition_mapping=dg.AllPartitionMapping())]


def pull_metadata(reports, days: list[str]) -> dict:
    """What a pull's materialization shows (the asset's and `goodput pull`'s): windows pulled and
    failed per source, rows stored, quarantined and already stored, the failures' reasons."""
    by_source: dict[str, dict] = {}
    for r in reports:
        s = by_source.setdefault(r.source, {"windows_ok": 0, "failed": 0, "rows": 0, "quarantined": 0, "already_stored": 0})
        s["windows_ok" if r.status == "ok" else "failed"] += 1
        s["rows"] += r.rows_ok
        s["quarantined"] += r.rows_quarantined
        s["already_stored"] += r.rows_duplicate
    failed = [f"{r.source}{'/' + r.target if r.target else ''} {r.window}: {r.error}" for r in reports if r.status == "failed"]
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


@dg.asset(
    group_name="warehouse", deps=SOURCE_ASSETS, partitions_def=TELEMETRY_DAYS,
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=BACKFILL_DAYS), kinds={"duckdb", "parquet"}, owners=OWNERS,
    metadata=table_metadata("gpu_hourly"),
    description="Per GPU, hour and metric rollup of gpu_samples (n, mean, min, max, last), one telemetry day per "
    "partition. A run without a partition rolls up every day of the telemetry's span.",
)
def gpu_hourly(context: dg.AssetExecutionContext, goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    partitioned = context.has_partition_key or context.has_partition_key_range
    keys = context.partition_keys if partitioned else register_days(context.instance, wh)
    if not keys:
        status.record(wh, "gpu_hourly", "skipped", f"gpu_hourly: {rollup_days(wh)[1]}", 0)
        return _skipped_result(wh, "gpu_hourly")
    dates = [date.fromisoformat(k) for k in keys]
    done = _guarded(wh, "gpu_hourly", (), lambda: telemetry.refresh_gpu_hourly(wh, dates), len)
    if not partitioned:  # the days' partitions show as materialized, as after a backfill
        for key in keys:
            context.log_event(dg.AssetMaterialization("gpu_hourly", partition=key, metadata={"run": "every telemetry day"}))
    return dg.MaterializeResult(metadata={
        "days": len(dates), "days_with_samples": len(done or []), **row_count(wh, "gpu_hourly"),
    })


@dg.asset(group_name="warehouse", deps=[*SOURCE_ASSETS, gpu_hourly], kinds={"duckdb", "parquet"}, owners=OWNERS, metadata=table_metadata("hw_events"), description="Increments of DCGM error counters (ECC DBE, row remap, NVLink ...) as hw_events (source dcgm_counter); counter resets are not events.")
def dcgm_counter_events(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    return dg.MaterializeResult(metadata={"events": telemetry.refresh_counter_events(wh), **row_count(wh, "hw_events")})


@dg.asset(group_name="warehouse", deps=[*SOURCE_ASSETS, gpu_hourly], kinds={"duckdb", "parquet"}, owners=OWNERS, metadata=table_metadata("component_history"), description="GPU replacements inferred from UUID changes per (host, GPU index), as component_history rows (source telemetry).")
def telemetry_gpu_replacements(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    return dg.MaterializeResult(metadata={"replacements": telemetry.refresh_gpu_replacements(wh), **row_count(wh, "component_history")})


@dg.asset(group_name="analysis", deps=[*SOURCE_ASSETS, dcgm_counter_events], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("interruptions"), description="Every job attempt that did not end normally, with its attributed root cause, domain and lost GPU-hours.")
def interruptions(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "interruptions", ("job_attempts",))
        return attribution.refresh_interruptions(
            wh, window_before_s=goodput.window_before_s,
            window_after_s=goodput.window_after_s, ckpt_interval_s=goodput.ckpt_interval_s,
        )

    df = _guarded(wh, "interruptions", ("interruptions",), run)
    if df is None:
        return _skipped_result(wh, "interruptions")
    mix = attribution.interruption_mix(df)
    return dg.MaterializeResult(
        metadata={
            "interruptions": df.height,
            "dagster/row_count": df.height,
            "unexpected": int((~df["planned"]).sum()) if df.height else 0,
            "mix": dg.MetadataValue.md(_md(mix)),
        }
    )


@dg.asset(group_name="analysis", deps=[gpu_hourly, telemetry_gpu_replacements, interruptions], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("component_lifetimes"), description="One survival row per unit installation: entry age (left truncation), exit age, failed or censored, covariates.")
def component_lifetimes(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()
    observed_from, observed_to = goodput.window_bounds()
    df = _guarded(wh, "component_lifetimes", ("component_lifetimes",), lambda: lifetimes.refresh_component_lifetimes(
        wh, as_of=observed_to, data_start=observed_from, nodes_per_rack=goodput.nodes_per_rack or None,
        gpus_per_node=goodput.gpus_per_node,
    ))
    if df is None:
        return _skipped_result(wh, "component_lifetimes")
    populations = df.group_by("population").len().sort("population").rows()
    return dg.MaterializeResult(metadata={
        "units": df.height, "dagster/row_count": df.height, "failures": int(df["event"].sum()),
        "populations": dg.MetadataValue.json(dict(populations)),
    })


@dg.asset(group_name="analysis", deps=[interruptions], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("node_failures"), description="Per-node failures, times between them, and the mean cumulative function across nodes.")
def repairable_systems(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "repairable_systems", ("interruptions", "hw_events"), any_of=True)
        return repairable.refresh_repairable(wh)

    out = _guarded(wh, "repairable_systems", ("node_failures", "node_mcf"), run, lambda r: r[0].height)
    if out is None:
        return _skipped_result(wh, "repairable_systems")
    failures, mcf = out
    return dg.MaterializeResult(metadata={"node_failures": failures.height, "dagster/row_count": failures.height, "mcf_points": mcf.height})


@dg.asset(name="node_health", group_name="analysis", deps=[repairable_systems, telemetry_gpu_replacements], kinds={"duckdb", "parquet"}, owners=OWNERS, metadata=table_metadata("node_health"), description="Lemon nodes: per node its exposure, failures, interruptions, hardware events, repairs and lost GPU-hours, and whether it fails significantly more than the fleet (one-sided exact Poisson, Benjamini-Hochberg).")
def node_health_asset(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "node_health", ("job_attempts", "hw_events", "node_events", "component_history"), any_of=True)
        return node_health.refresh_node_health(wh)

    df = _guarded(wh, "node_health", ("node_health",), run)
    if df is None:
        return _skipped_result(wh, "node_health")
    s = node_health.summary(df)
    lemons = df.filter(pl.col("lemon").fill_null(False)).select("host", "failures", "expected_failures", "p_adjusted")
    return dg.MaterializeResult(metadata={
        "dagster/row_count": df.height, "lemons": s["lemons"], "untested": s["untested"],
        "test": s["test"] or "none", "lemon_nodes": dg.MetadataValue.md(_md(lemons)),
    })


@dg.asset(name="system_mtbf", group_name="analysis", deps=[*SOURCE_ASSETS, interruptions, repairable_systems], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("system_mtbf"), description="System MTBF per month and quarter (exact Poisson 95% CI), overall, per root cause and per component class, for each series of failures: failure records, job interruptions, node failure episodes.")
def system_mtbf_asset(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()
    observed_from, observed_to = goodput.window_bounds()
    df = _guarded(wh, "system_mtbf", ("system_mtbf",), lambda: system_mtbf.refresh_system_mtbf(wh, observed_from, observed_to))
    if df is None:
        return _skipped_result(wh, "system_mtbf")
    series = df.select("source", "system").unique().sort("source", "system").rows()
    return dg.MaterializeResult(metadata={"dagster/row_count": df.height, "series": dg.MetadataValue.json([list(r) for r in series])})


@dg.multi_asset(
    group_name="analysis",
    specs=[
        dg.AssetSpec(name, deps=SOURCE_ASSETS, kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata(name), description=text)
        for name, text in (
            ("availability", "Per system and node: failures, MTBF, MTTR, availability (with nines) and normalised rates with 95% CIs, from failure records and node down/resume events."),
            ("repair_fits", "Lognormal / Weibull / exponential fits of repair times and times between failures per system; the AIC winner is selected."),
            ("root_causes", "Failures and downtime per root cause per system and overall."),
        )
    ],
)
def availability_assets(goodput: GoodputConfig):
    wh = goodput.analysis_warehouse()
    outputs = ("availability", "repair_fits", "root_causes")
    observed_from, observed_to = goodput.window_bounds()
    out = _guarded(wh, "availability", outputs, lambda: availability.refresh_availability(wh, observed_from, observed_to),
                   lambda r: r[0].height)  # fmt: skip
    for key, df in zip(outputs, out or (None,) * 3, strict=True):
        yield dg.MaterializeResult(asset_key=key, metadata=_skipped_meta(wh, "availability") if df is None else {"dagster/row_count": df.height})


@dg.multi_asset(
    group_name="analysis",
    specs=[
        dg.AssetSpec("failure_rates", deps=[component_lifetimes], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("failure_rates"), description="Every candidate model per component class and window; the AIC winner is flagged selected."),
        dg.AssetSpec("survival_curves", deps=[component_lifetimes], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("survival_curves"), description="Kaplan-Meier, Nelson-Aalen and Aalen-Johansen estimates."),
        dg.AssetSpec("hazard_ratios", deps=[component_lifetimes], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("hazard_ratios"), description="Cox proportional-hazards ratios with the PH check."),
    ],
)
def failure_fits(goodput: GoodputConfig):
    wh = goodput.analysis_warehouse()
    outputs = ("failure_rates", "survival_curves", "hazard_ratios")

    def run():
        status.require(wh, "failure_fits", ("component_lifetimes",))
        return survival.refresh_fits(wh)

    summary = _guarded(wh, "failure_fits", outputs, run, lambda s: s["failure_rates_rows"])
    if summary is None:
        for key in outputs:
            yield dg.MaterializeResult(asset_key=key, metadata=_skipped_meta(wh, "failure_fits"))
        return
    meta = {k: (v if isinstance(v, (int, float, str)) else dg.MetadataValue.json(v)) for k, v in summary.items()}
    for key in outputs:
        yield dg.MaterializeResult(asset_key=key, metadata={**meta, **row_count(wh, key)})


@dg.asset(group_name="analysis", deps=SOURCE_ASSETS, kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("goodput_jobs"), description="Measured goodput per job chain with badput split into lost work, restart, checkpoint, queue after failure and other.")
def goodput_jobs(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "goodput_jobs", ("job_attempts",))
        return goodput_measured.refresh_goodput_jobs(
            wh, ckpt_interval_s=goodput.ckpt_interval_s,
            ckpt_cost_s=goodput.ckpt_cost_s, restart_s=goodput.restart_s,
        )

    df = _guarded(wh, "goodput_jobs", ("goodput_jobs",), run)
    if df is None:
        return _skipped_result(wh, "goodput_jobs")
    return dg.MaterializeResult(metadata={"job_chains": df.height, "dagster/row_count": df.height, "summary": dg.MetadataValue.md(_md(goodput_measured.summarize(df)))})


@dg.asset(group_name="analysis", deps=["failure_rates", interruptions], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("goodput_projections"), description="Goodput projections: scale sweep with CI bands, sensitivity ranking, joint best checkpoint interval and spares.")
def goodput_projections(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "goodput_projections", ("failure_rates",))
        fr = selected_rates(wh.read("failure_rates"))
        if int(fr["n_events"].sum()) == 0:
            raise MissingInputs("goodput_projections: no failure in failure_rates (a zero rate gives no MTTI to project)")
        return whatif.refresh_projections(
            wh, target_gpus=goodput.target_gpus, gpus_per_node=goodput.gpus_per_node,
            ckpt_cost_s=goodput.ckpt_cost_s, restart_s=goodput.restart_s,
        )

    df = _guarded(wh, "goodput_projections", ("goodput_projections",), run)
    if df is None:
        return _skipped_result(wh, "goodput_projections")
    return dg.MaterializeResult(metadata={"scenarios": df.height, "dagster/row_count": df.height})


@dg.asset(
    group_name="catalog", pool=CATALOG_POOL, kinds={"duckdb"}, owners=OWNERS,
    deps=[*SOURCE_ASSETS, gpu_hourly, dcgm_counter_events, telemetry_gpu_replacements, interruptions,
          component_lifetimes, repairable_systems, node_health_asset, system_mtbf_asset, "availability", "repair_fits",
          "root_causes", "failure_rates", "survival_curves", "hazard_ratios",
          goodput_jobs, goodput_projections, "goodput_breakdown", "goodput_trend"],
    description="DuckDB catalog (warehouse.duckdb): one view per table over its Parquet files.",
)
def warehouse_catalog(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.warehouse()
    path = wh.refresh_catalog()
    counts = wh.query(
        "SELECT (SELECT count(*) FROM job_attempts) attempts, (SELECT count(*) FROM hw_events) hw_events, "
        "(SELECT count(*) FROM quarantine) quarantined, (SELECT min(start_time) FROM job_attempts) first_start, "
        "(SELECT max(end_time) FROM job_attempts) last_end"
    ).row(0, named=True)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)), **{k: str(v) for k, v in counts.items()}})


@dg.asset(group_name="dashboards", deps=[warehouse_catalog], kinds={"altair", "html"}, owners=OWNERS, description="The self-contained HTML leadership report, with a PNG and SVG per chart.")
def leadership_report(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()
    path = _guarded(wh, "leadership_report", (), lambda: build_report(wh, target_gpus=goodput.target_gpus, scope=goodput.scope().header(), gpu_hour_cost=goodput.gpu_hour_cost), lambda p: None)
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)), "bytes": path.stat().st_size})


# ---------------------------------------------------------------- scope: breakdowns
@dg.asset(group_name="analysis", deps=[interruptions, goodput_jobs], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("goodput_breakdown"), description="Interruptions, lost GPU-hours and measured goodput per cluster, partition and account.")
def goodput_breakdown(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "goodput_breakdown", ("job_attempts",))
        return breakdown.refresh_breakdown(wh)

    df = _guarded(wh, "goodput_breakdown", ("goodput_breakdown",), run)
    if df is None:
        return _skipped_result(wh, "goodput_breakdown")
    head = fleet_headline(wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"))
    return dg.MaterializeResult(metadata={
        "dagster/row_count": df.height, "scope": goodput.scope().describe(), "breakdown": dg.MetadataValue.md(_md(df)),
        "headline": dg.MetadataValue.json({k: v for k, v in head.items() if v is not None}),
    })


@dg.asset(group_name="analysis", deps=[interruptions, goodput_jobs], kinds={"polars", "parquet"}, owners=OWNERS, metadata=table_metadata("goodput_trend"), description="Goodput, lost GPU-hours, interruptions and MTBF per week and month, with the change against the period before.")
def goodput_trend(goodput: GoodputConfig) -> dg.MaterializeResult:
    wh = goodput.analysis_warehouse()

    def run():
        status.require(wh, "goodput_trend", ("job_attempts",))
        return trend.refresh_trend(wh)

    df = _guarded(wh, "goodput_trend", ("goodput_trend",), run)
    if df is None:
        return _skipped_result(wh, "goodput_trend")
    return dg.MaterializeResult(metadata={"dagster/row_count": df.height, "scope": goodput.scope().describe(),
                                          "weeks": _md(df.filter(pl.col("period") == "week").tail(8))})


def _guarded(wh, analysis: str, outputs: tuple[str, ...], run, rows=lambda r: r.height):
    """Run one analysis and record its outcome in ``analysis_status``. Missing inputs: its
    output tables are written empty, the reason recorded, and None returned (the run goes on).
    Any other error is recorded as 'failed' with its one-line cause and re-raised."""
    try:
        result = run()
    except MissingInputs as exc:
        for table in outputs:
            wh.replace_table(table, TABLES[table].empty())
        status.record(wh, analysis, "skipped", str(exc), 0)
        return None
    except Exception as exc:
        status.record(wh, analysis, "failed", one_line(exc))
        raise
    status.record(wh, analysis, "ok", None, rows(result))
    return result


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line: what a user reads when a step fails."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _skipped_meta(wh, analysis: str) -> dict:
    reason = wh.read("analysis_status", f"analysis = '{analysis}'")["reason"]
    return {"skipped": reason[0] if reason.len() else "no inputs"}


def _skipped_result(wh, analysis: str) -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata=_skipped_meta(wh, analysis))


def _md(df) -> str:
    """A small frame as a Markdown table for the Dagster UI."""
    if df.height == 0:
        return "(none)"
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "\n".join("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |" for row in df.rows())


INGEST_ASSETS = [ingested_sources]
PULL_ASSETS = [pulled_sources]
BUILD_ASSETS = [
    gpu_hourly, dcgm_counter_events, telemetry_gpu_replacements, interruptions, component_lifetimes,
    repairable_systems, node_health_asset, system_mtbf_asset, availability_assets, failure_fits, goodput_jobs, goodput_projections, warehouse_catalog, leadership_report,
    goodput_breakdown, goodput_trend,
]
ALL_ASSETS = INGEST_ASSETS + PULL_ASSETS + BUILD_ASSETS
