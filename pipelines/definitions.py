"""Dagster entry point: ``dagster dev`` from the repository root loads ``defs`` from here."""

import dagster as dg

from pipelines.assets import ALL_ASSETS, BUILD_ASSETS, INGEST_ASSETS
from pipelines.checks import ALL_CHECKS
from pipelines.resources import GoodputConfig
from pipelines.sensors import build_schedule, build_sensor

ingest_job = dg.define_asset_job("ingest", selection=dg.AssetSelection.assets(*INGEST_ASSETS))
build_job = dg.define_asset_job("build", selection=dg.AssetSelection.assets(*BUILD_ASSETS))

defs = dg.Definitions(
    assets=ALL_ASSETS,
    asset_checks=ALL_CHECKS,
    jobs=[ingest_job, build_job],
    sensors=[build_sensor(ingest_job)],
    schedules=[build_schedule(build_job)],
    resources={"goodput": GoodputConfig()},
    # Steps run in the run's own process, as the CLI's runs do. Dagster's default (a subprocess
    # per step) re-imported this code location for each of the build's 15 steps: 320 s of
    # worker start-up against 118 s of work under load (benchmarks/bench_ui_vs_cli.py).
    executor=dg.in_process_executor,
)
