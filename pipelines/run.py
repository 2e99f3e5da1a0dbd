"""Run the asset graph in-process: ``goodput demo`` (ingest + build), ``goodput build`` and
``fit``; record ``goodput ingest`` as a run too.

The CLI and Dagster share one code path: both materialize the assets of pipelines/assets/,
and the CLI records its runs in the persistent Dagster instance under the home
(``<home>/.dagster``), so ``DAGSTER_HOME=<home>/.dagster dagster dev`` shows them. The build run
is launched without a partition, so it rolls up every day of the telemetry's span and a fresh
warehouse is complete after one command.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import sys
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

import dagster as dg
from sqlalchemy import event
from sqlalchemy.engine import Engine

from pipelines.assets import ALL_CHECKS
from pipelines.assets import BUILD_ASSETS
from pipelines.assets import INGEST_ASSETS
from pipelines.assets import JOB_DESCRIPTIONS
from pipelines.assets import ingest_metadata
from pipelines.assets import ingested_sources
from pipelines.assets import pull_metadata
from pipelines.assets import pulled_sources
from pipelines.assets import register_days
from pipelines.assets.factory import written_by
from pipelines.resources import Settings
from warehouse.store import Warehouse

_STEP_DONE = re.compile(r'Finished execution of step "([^"]+)" in ([0-9.]+\s*\w+)')


CLI_TAGS = {"goodput/launched_by": "cli"}  # the runs of `goodput` commands, told apart in the UI


class PipelineError(RuntimeError):
    pass


@dg.logger(description="One line on stderr per finished step: progress for CLI runs.")
def progress_logger(_init_context):
    log = logging.getLogger("goodput.progress")
    log.setLevel(logging.DEBUG)  # Dagster logs step events at DEBUG; the filter keeps only ends
    log.propagate = False
    if not log.handlers:
        handler = _StderrHandler()
        handler.addFilter(lambda rec: bool(_STEP_DONE.search(rec.getMessage())))
        handler.setFormatter(_StepFormatter())
        log.addHandler(handler)
    return log


@dg.logger(description="Nothing on the console: `goodput ingest` prints its own summary.")
def quiet_logger(_init_context):
    log = logging.getLogger("goodput.quiet")
    log.propagate = False
    if not log.handlers:
        log.addHandler(logging.NullHandler())
    return log


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted, not the stream it was
    created with: the logger lives as long as the process, and a caller may redirect stderr
    between runs (a closed redirect would swallow progress and print 'Logging error')."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):
        pass


class _StepFormatter(logging.Formatter):
    def format(self, record):
        step, took = _STEP_DONE.search(record.getMessage()).groups()
        return f"  done: {step} ({took})"


DAGSTER_YAML = """\
# The Dagster instance of this goodput home: `goodput demo` / `build` record their runs here.
# Open it with: DAGSTER_HOME=<this directory> GOODPUT_HOME=<the home> dagster dev
telemetry:
  enabled: false
# runs launched from the UI, a schedule or a sensor wait in the queue for the daemon: look every
# second, not Dagster's default five (a sample-fleet build takes about 25 s)
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""


def dagster_home(home: Path | str) -> Path:
    """``<home>/.dagster``, with its dagster.yaml (written once; a user's edits are kept)."""
    path = Path(home) / ".dagster"
    path.mkdir(parents=True, exist_ok=True)
    if not (path / "dagster.yaml").exists():
        (path / "dagster.yaml").write_text(DAGSTER_YAML)
    return path


_ALIASES: dict[Path, TemporaryDirectory] = {}


def instance_for(home: Path | str) -> dg.DagsterInstance:
    """The persistent Dagster instance (SQLite run, event and schedule storage) of a home."""
    return dg.DagsterInstance.from_config(_instance_dir(home))


def _instance_dir(home: Path | str) -> str:
    """The home's Dagster folder as Dagster may be given it. Dagster writes the folder into
    SQLite URLs unescaped, where ``?``, ``#`` or ``%`` would end the path: such a folder is
    reached through a symlink in a temporary folder (kept for the process; SQLite, unlike
    DuckDB, opens the path as given)."""
    path = dagster_home(home)
    if set("?#%") & set(str(path)):
        if path not in _ALIASES:
            _ALIASES[path] = TemporaryDirectory(prefix="goodput-dagster-")
            (Path(_ALIASES[path].name) / "dagster").symlink_to(path, target_is_directory=True)
        path = Path(_ALIASES[path].name) / "dagster"
    return str(path)


# The command line's runs do not mirror their steps' stdout/stderr into compute-log files: that
# costs a `tail` and a Python watcher process per step, and the watcher, in the terminal's process
# group, printed a KeyboardInterrupt traceback at Ctrl-C. The CLI prints its own output.
CLI_INSTANCE = {
    "compute_logs": {
        "module": "dagster._core.storage.noop_compute_log_manager",
        "class": "NoOpComputeLogManager",
    }
}


@contextmanager
def cli_instance(home: Path | str):
    """``instance_for(home)`` as the command line's runs use it (``CLI_INSTANCE``), open while
    the block runs, with its SQLite files written without waiting for the disk
    (``_unsynced``)."""
    from dagster._core.instance.ref import InstanceRef

    folder = _instance_dir(home)
    with (
        _unsynced(folder),
        dg.DagsterInstance.from_ref(InstanceRef.from_dir(folder, overrides=CLI_INSTANCE)) as inst,
    ):
        yield inst


@contextmanager
def _unsynced(folder: str):
    """Dagster's SQLite storage opens a connection per event and commits each, and SQLite waits
    for the disk at every commit or closing checkpoint (SQLite's default ``synchronous =
    FULL``): about 600 waits in a small build, seconds of a build's time. Within the block,
    connections to databases under ``folder`` (the home's Dagster instance, in WAL mode) use
    ``synchronous = NORMAL``: in WAL mode SQLite then waits for the disk only at a checkpoint,
    not at every commit, and the database stays consistent through any crash; a crash of the
    machine can only roll back the newest run records. The warehouse's own files do not go
    through here."""
    inside = os.path.join(os.path.realpath(folder), "")

    def on_connect(con, _record):
        if isinstance(con, sqlite3.Connection):
            path = con.execute("PRAGMA database_list").fetchone()[2]
            if os.path.realpath(path).startswith(inside):
                con.execute("PRAGMA synchronous = NORMAL")

    event.listen(Engine, "connect", on_connect)
    try:
        yield
    finally:
        event.remove(Engine, "connect", on_connect)


def _materialize(assets, config: Settings, job: str):
    """Run ``assets`` (and their checks) as ``job`` in-process, recorded in the home's Dagster
    instance, with the progress logger instead of Dagster's console log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dagster beta/preview notices are not for CLI users
        defs = dg.Definitions(
            jobs=[
                dg.define_asset_job(
                    job, selection=assets, description=JOB_DESCRIPTIONS[job], tags=CLI_TAGS
                )
            ],
            assets=assets,
            asset_checks=ALL_CHECKS,  # selecting an asset also runs its checks
            resources={"settings": config},
            loggers={"progress": progress_logger},
        )
        with cli_instance(config.warehouse().home) as instance:
            result = defs.resolve_job_def(job).execute_in_process(
                run_config={"loggers": {"progress": {}}}, instance=instance, raise_on_error=False
            )
    if not result.success:
        failed = [e for e in result.all_events if e.is_failure]
        if any(_interrupted(e) for e in failed):  # Ctrl-C: the CLI's one line, not a failed step
            raise KeyboardInterrupt
        raise PipelineError(
            "pipeline run failed: "
            f"{failure_cause(failed[0]) if failed else 'see the Dagster event log'}"
        )
    return result


def _interrupted(event) -> bool:
    """Whether a failure event is an interrupt (Ctrl-C, SIGTERM) rather than an error."""
    err = getattr(event.event_specific_data, "error", None)
    while err is not None:
        if err.cls_name in ("DagsterExecutionInterruptedError", "KeyboardInterrupt"):
            return True
        err = err.cause or err.context
    return False


def failure_cause(event) -> str:
    """The root cause of a failed step in one line: ``step: Type: message``, not Dagster's
    "Execution of step X failed"."""
    err = getattr(event.event_specific_data, "error", None)
    while err is not None and err.cause is not None:
        err = err.cause
    text = (err.message if err is not None else event.message or "").strip().splitlines()
    line = text[0] if text else "unknown error"
    return f"{event.step_key}: {line}" if event.step_key else line


def ingest(config: Settings):
    return _materialize(INGEST_ASSETS, config, "ingest")


def build(config: Settings):
    """Everything downstream of ingest (the ``build`` job, without a partition): rollups for
    every day of the telemetry's robust span."""
    return _materialize(BUILD_ASSETS, config, "build")


def recorded_ingest(wh: Warehouse, ingest_files: Callable[[], list]) -> list:
    """Run ``ingest_files()`` (``goodput ingest`` with all its flags) as a run of the home's
    Dagster instance that materializes ``ingested_sources``, with the same metadata as the
    asset, and adds the telemetry's days to the ``gpu_hourly`` partitions, as the asset does.
    Returns its file reports; an error it raises (a user's mistake) is raised here, unchanged."""
    return _recorded(
        wh,
        ingested_sources.key,
        "ingest",
        "goodput ingest PATH...: parse files into the warehouse",
        ingest_files,
        lambda reports, instance: ingest_metadata(reports, register_days(instance, wh)),
    )


def recorded_pull(wh: Warehouse, pull_sources: Callable[[], list]) -> list:
    """``goodput pull``, recorded like ``recorded_ingest``: a run that materializes
    ``pulled_sources`` with the asset's metadata. Returns the pull reports."""
    return _recorded(
        wh,
        pulled_sources.key,
        "pull",
        "goodput pull: pull live sources into the warehouse",
        pull_sources,
        lambda reports, instance: pull_metadata(reports, register_days(instance, wh)),
    )


def _recorded(
    wh: Warehouse,
    key: dg.AssetKey,
    name: str,
    description: str,
    work: Callable[[], list],
    metadata: Callable[[list, dg.DagsterInstance], dict],
) -> list:
    @dg.op(name=f"{name}_step", description=description)
    def step(context):  # (no annotation: this module has postponed annotations)
        reports = work()
        context.log_event(
            dg.AssetMaterialization(
                key, description=f"goodput {name}", metadata=metadata(reports, context.instance)
            )
        )
        return reports

    @dg.job(
        name=name,
        logger_defs={"quiet": quiet_logger},
        tags=CLI_TAGS,
        description=JOB_DESCRIPTIONS[name],
    )
    def job():
        step()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Dagster beta/preview notices are not for CLI users
        with cli_instance(wh.home) as instance:
            result = job.execute_in_process(
                run_config={"loggers": {"quiet": {}}}, instance=instance, raise_on_error=True
            )
    return result.output_for_node(f"{name}_step")


def refit(config: Settings):
    """Lifetimes and fits again (e.g. over a new observation window), then what depends on them."""
    from pipelines.assets import component_lifetimes
    from pipelines.assets import failure_fits
    from pipelines.assets import goodput_projections

    return _materialize([component_lifetimes, failure_fits, goodput_projections], config, "refit")


def scope_assets(tables) -> list:
    """The build assets that write any of ``tables`` (and the tables written beside them)."""
    return [a for a in BUILD_ASSETS if set(tables) & _written(a)]


def _written(asset) -> set[str]:
    return {t for k in asset.keys for t in written_by(k.to_user_string())}


def build_scope(config: Settings, needs: str = "all") -> Warehouse:
    """The scoped warehouse of ``config``'s scope (``analysis.scope.scope_warehouse``) with the
    tables of ``needs`` (``analysis.scope.SCOPE_NEEDS``) recomputed from the whole fleet's rows
    filtered to it, or reused when they were recomputed from the current data with the same
    settings."""
    from analysis.scope import SCOPE_NEEDS
    from analysis.scope import SCOPE_SETTINGS
    from analysis.scope import fresh_tables
    from analysis.scope import mark_fresh

    wh, scoped = config.warehouse(), config.analysis_warehouse()
    if scoped is wh:
        return wh
    settings = {k: getattr(config, k) for k in SCOPE_SETTINGS}
    fresh = fresh_tables(wh, scoped, settings)
    wanted = set(SCOPE_NEEDS[needs])
    if not wanted <= fresh:
        assets = scope_assets(wanted)
        _materialize(assets, config, "build_scope")
        written = {t for a in assets for t in _written(a)}
        mark_fresh(wh, scoped, config.scope(), settings, fresh | written)
    return scoped


def run_pipeline(wh: Warehouse, sources: list[Path | str], **settings) -> list:
    """Ingest ``sources`` then build; returns the asset check results of the build run."""
    config = Settings(
        home=str(wh.home), warehouse_uri=wh.parquet, sources=[str(s) for s in sources], **settings
    )
    wh.refresh_catalog()
    ingested = ingest(config)
    wh.refresh_catalog()
    try:
        built = build(config)
    finally:
        wh.refresh_catalog()  # what did build stays queryable, even after a failed step
    return ingested.get_asset_check_evaluations() + built.get_asset_check_evaluations()
