"""Dagster entry point: ``dagster dev`` from the repository root loads ``defs`` from here.

Runs launched from the UI, a schedule or a sensor use the multiprocess executor: each step in a
process of its own, up to ``max_concurrent`` at once (default 0: the CPU count), set per run with
``execution: {config: {max_concurrent: N}}``. Step processes fork from a forkserver that has
already imported these definitions, so a step does not import the code location again (a fresh
interpreter per step, Dagster's default, would: benchmarks/bench_ui_vs_cli.py measures the
difference). The steps share nothing but the warehouse (they
return metadata, never data), so the same definitions run with ``k8s_job_executor`` (a pod per
step) by configuration only: ``GOODPUT_EXECUTOR=k8s`` in the code location's environment, and
the executor's settings in the run config (docs/dagster.md, Kubernetes). The CLI runs the same jobs
in-process.
"""

import os

import dagster as dg

from pipelines.assets import ALL_ASSETS
from pipelines.assets import ALL_CHECKS
from pipelines.assets import BUILD_ASSETS
from pipelines.assets import DOMAIN_JOBS
from pipelines.assets import INGEST_ASSETS
from pipelines.assets import JOB_DESCRIPTIONS
from pipelines.assets import PULL_ASSETS
from pipelines.resources import Settings
from pipelines.sensors import build_schedule
from pipelines.sensors import build_sensor
from pipelines.sensors import pull_schedule

PRELOAD = {"forkserver": {"preload_modules": ["pipelines.definitions"]}}


@dg.configured(
    dg.multiprocess_executor,
    config_schema={"max_concurrent": dg.Field(int, is_required=False, default_value=0)},
)
def preloaded_multiprocess(config: dict) -> dict:
    """The multiprocess executor, its step processes forked from the preloaded definitions."""
    return {"max_concurrent": config["max_concurrent"], "start_method": PRELOAD}


EXECUTOR_ENV = "GOODPUT_EXECUTOR"
EXECUTORS = ("multiprocess", "k8s")


def run_executor(name: str | None = None) -> dg.ExecutorDefinition:
    """The executor of the runs Dagster launches, chosen by ``$GOODPUT_EXECUTOR``:
    ``multiprocess`` (default; this machine's cores) or ``k8s`` (dagster-k8s's
    ``k8s_job_executor``: a Kubernetes Job per step)."""
    name = name or os.environ.get(EXECUTOR_ENV) or "multiprocess"
    if name == "multiprocess":
        return preloaded_multiprocess
    if name == "k8s":
        from dagster_k8s import k8s_job_executor  # imports the Kubernetes client: only when chosen

        return k8s_job_executor
    raise ValueError(f"{EXECUTOR_ENV}={name!r}: use one of {', '.join(EXECUTORS)}")


def _job(name: str, assets: list):
    return dg.define_asset_job(
        name, selection=dg.AssetSelection.assets(*assets), description=JOB_DESCRIPTIONS[name]
    )


ingest_job = _job("ingest", INGEST_ASSETS)
build_job = _job("build", BUILD_ASSETS)
pull_job = _job("pull", PULL_ASSETS)


def definitions(executor: dg.ExecutorDefinition) -> dg.Definitions:
    """Every asset, check, job, sensor and schedule, with ``executor`` for launched runs."""
    return dg.Definitions(
        assets=ALL_ASSETS,
        asset_checks=ALL_CHECKS,
        jobs=[ingest_job, pull_job, build_job, *DOMAIN_JOBS],
        sensors=[build_sensor(ingest_job)],
        schedules=[build_schedule(build_job), pull_schedule(pull_job)],
        resources={"settings": Settings()},
        executor=executor,
    )


defs = definitions(run_executor())


def resolved_job(name: str = "build") -> dg.JobDefinition:
    """A job of ``defs``, resolved: what ``dg.reconstructable`` needs to run it out of process
    (``dg.execute_job``) as the UI's run launcher does."""
    return defs.resolve_job_def(name)


def resolved_build_job() -> dg.JobDefinition:
    return resolved_job("build")
