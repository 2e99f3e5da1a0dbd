"""Dagster entry point: ``dagster dev`` from the repository root loads ``defs`` from here.

Runs launched from the UI, a schedule or a sensor use the multiprocess executor: each step in a
process of its own, up to ``max_concurrent`` at once (default: the CPU count), set per run with
``execution: {config: {max_concurrent: N}}``. The steps share nothing but the warehouse (they
return metadata, never data), so the same definitions run with ``k8s_job_executor`` (a pod per
step) by configuration: see README "Scale". The CLI runs the same jobs in-process.
"""

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
    executor=dg.multiprocess_executor,
)


def resolved_job(name: str = "build") -> dg.JobDefinition:
    """A job of ``defs``, resolved: what ``dg.reconstructable`` needs to run it out of process
    (``dg.execute_job``) as the UI's run launcher does."""
    return defs.resolve_job_def(name)


def resolved_build_job() -> dg.JobDefinition:
    return resolved_job("build")
