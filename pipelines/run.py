"""Run the asset graph in-process: ``goodput demo`` (ingest + build) and ``goodput build``.

The CLI and Dagster share one code path: both materialize the assets of pipelines/assets.py.
The build run covers every daily rollup partition that has telemetry, as one single-run
backfill, so a fresh warehouse is complete after one command.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path

import dagster as dg

from analysis.goodput_measured import fleet_mtti
from pipelines.assets import BUILD_ASSETS, INGEST_ASSETS, gpu_hourly
from pipelines.checks import ALL_CHECKS
from pipelines.resources import GoodputConfig
from warehouse.store import Warehouse

_STEP_DONE = re.compile(r'Finished execution of step "([^"]+)" in ([0-9.]+\s*\w+)')


class PipelineError(RuntimeError):
    pass


@dg.logger(description="One line on stderr per finished step: progress for CLI runs.")
def progress_logger(_init_context):
    log = logging.getLogger("goodput.progress")
    log.setLevel(logging.DEBUG)  # Dagster logs step events at DEBUG; the filter keeps only ends
    log.propagate = False
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(lambda rec: bool(_STEP_DONE.search(rec.getMessage())))
        handler.setFormatter(_StepFormatter())
        log.addHandler(handler)
    return log


class _StepFormatter(logging.Formatter):
    def format(self, record):
        step, took = _STEP_DONE.search(record.getMessage()).groups()
        return f"  done: {step} ({took})"


def _materialize(assets, config: GoodputConfig, tags: dict | None = None):
    """``dagster.materialize`` with the progress logger instead of Dagster's console log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dagster beta/preview notices are not for CLI users
        defs = dg.Definitions(
            jobs=[dg.define_asset_job("goodput_cli_run", selection=assets)],
            assets=assets,
            asset_checks=ALL_CHECKS,  # selecting an asset also runs its checks
            resources={"goodput": config},
            loggers={"progress": progress_logger},
        )
        result = defs.resolve_job_def("goodput_cli_run").execute_in_process(
            run_config={"loggers": {"progress": {}}}, tags=tags or {}, raise_on_error=False
        )
    if not result.success:
        failed = [e for e in result.all_events if e.is_failure]
        reason = failed[0].message if failed else "see the Dagster event log"
        raise PipelineError(f"pipeline run failed: {reason.splitlines()[0]}")
    return result


def ingest(config: GoodputConfig):
    return _materialize(INGEST_ASSETS, config)


def build(config: GoodputConfig):
    """Everything downstream of ingest; rollups for every date that has telemetry."""
    wh = config.warehouse()
    days = wh.query("SELECT min(date)::VARCHAR, max(date)::VARCHAR FROM gpu_samples") if wh.files("gpu_samples") else None
    first, last = days.row(0) if days is not None else (None, None)
    assets = BUILD_ASSETS if first else [a for a in BUILD_ASSETS if a is not gpu_hourly]
    tags = {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last} if first else {}
    return _materialize(assets, config, tags)


def run_pipeline(wh: Warehouse, sources: list[Path | str], **settings) -> list:
    """Ingest ``sources`` then build; returns the asset check results of the build run."""
    config = GoodputConfig(home=str(wh.home), warehouse_uri=wh.parquet, sources=[str(s) for s in sources], **settings)
    wh.refresh_catalog()
    ingested = ingest(config)
    wh.refresh_catalog()
    built = build(config)
    return ingested.get_asset_check_evaluations() + built.get_asset_check_evaluations()


def summary_lines(wh: Warehouse) -> list[str]:
    """A short summary computed from the warehouse (nothing printed here is canned)."""
    q = wh.query
    s = q(
        "SELECT (SELECT count(*) FROM ingest_manifest) files, (SELECT coalesce(sum(rows_quarantined), 0) FROM ingest_manifest) quarantined, "
        "(SELECT count(*) FROM job_chains) jobs, (SELECT count(*) FROM job_attempts) attempts, "
        "(SELECT coalesce(sum(n_gpus * date_diff('second', start_time, end_time)) / 3600.0, 0) FROM job_attempts) gpu_hours, "
        "(SELECT count(DISTINCT host) FROM (SELECT unnest(nodes) host FROM job_attempts)) hosts"
    ).row(0, named=True)
    lines = [
        f"files ingested: {s['files']:,} ({s['quarantined']:,} records quarantined)",
        f"hosts: {s['hosts']:,}  jobs: {s['jobs']:,}  attempts: {s['attempts']:,}  GPU-hours: {s['gpu_hours']:,.0f}",
    ]
    failed = q(
        "SELECT state, count(*) n FROM job_attempts WHERE state NOT IN ('COMPLETED', 'RUNNING', 'PENDING') GROUP BY 1 ORDER BY 2 DESC"
    )
    if failed.height:
        lines.append("attempts not completed, by state: " + ", ".join(f"{a} {n:,}" for a, n in failed.rows()))
    mix = q(  # the jobs' own failures (workload domain) apart from infrastructure causes
        "SELECT CASE WHEN failure_domain = 'workload' THEN 'workload' ELSE cause_class END cause_class, "
        "count(*) n, sum(lost_gpu_hours) lost FROM interruptions WHERE NOT planned GROUP BY 1 ORDER BY 2 DESC"
    )
    if mix.height:
        total = mix["n"].sum()
        fm = fleet_mtti(wh.read("job_attempts"), wh.read("interruptions"))
        lines.append(f"unexpected interruptions: {total:,} (lost {mix['lost'].sum():,.0f} GPU-hours); by cause:")
        lines += [f"  {c:<12} {n:>5,}  {100 * n / total:5.1f}%" for c, n, _ in mix.rows()]
        infra, every = (
            "n/a" if h is None else f"{h:.2f} h" for h in (fm["mtti_infrastructure_hours"], fm["mtti_all_hours"])
        )
        lines.append(
            f"fleet MTTI: infrastructure {infra} ({fm['infrastructure']:,} interruptions), all causes {every} "
            f"(+{fm['workload']:,} the jobs' own failures)"
        )
    rates = q(
        "SELECT component_class, model, n_events, rate_per_1k_unit_days r, rate_ci_low lo, rate_ci_high hi, shape_reading "
        "FROM failure_rates WHERE selected AND \"window\" = 'all' AND stratum = 'all' ORDER BY r DESC"
    )
    if rates.height:
        lines.append("failure rates per 1,000 unit-days (95% CI), best model by AIC:")
        lines += [
            f"  {c:<12} {r:8.3f} [{lo:.3f}, {hi:.3f}]  {m:<11} {n:>4} failures  {reading or ''}"
            for c, m, n, r, lo, hi, reading in rates.rows()
        ]
    good = q("SELECT sum(productive_hours * n_gpus) / nullif(sum(wall_hours * n_gpus), 0) g, avg(goodput) a FROM goodput_jobs")
    if good.height and good["g"][0] is not None:
        lines.append(f"measured goodput: {good['g'][0]:.1%} weighted by GPU-hours, {good['a'][0]:.1%} mean over job chains")
    proj = q(
        "SELECT n_gpus, mtti_hours, optimal_interval_hours, goodput, goodput_ci_low, goodput_ci_high, scope FROM goodput_projections "
        "WHERE scenario = 'sensitivity' AND knob = 'baseline' LIMIT 1"
    )
    if proj.height:
        n, mtti, interval, g, lo, hi, scope = proj.row(0)
        lines.append(
            f"projected for a {n:,}-GPU job, {scope or 'hardware'} scope: MTTI {mtti:.2f} h, "
            f"checkpoint every {60 * interval:.0f} min (Daly), "
            f"goodput {g:.1%} [{lo:.1%}, {hi:.1%}] (95% band from the fitted rates)"
        )
    return lines


def checks_line(evaluations) -> str:
    failed = [e.check_name for e in evaluations if not e.passed]
    return f"asset checks: {len(evaluations) - len(failed)}/{len(evaluations)} passed" + (f" (failed: {', '.join(failed)})" if failed else "")

