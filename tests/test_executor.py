"""The definitions run out of process: the daily tables and the whole-history steps after them,
materialized by the build job with the multiprocess executor (both cores, one process per step,
forked from a server that imported the definitions once), equal the in-process run's."""

import shutil
import warnings

import dagster as dg
import polars as pl

from pipelines.cli import main
from pipelines.definitions import defs, resolved_build_job
from pipelines.run import instance_for
from warehouse.store import Warehouse

# gpu_hourly fans out to two steps that run at once; each writes its own tables
ASSETS = ["gpu_hourly", "dcgm_counter_events", "telemetry_gpu_replacements"]
TABLES = ["gpu_hourly", "gpu_daily", "gpu_counter_changes", "gpu_sightings", "hw_events", "component_history"]
MULTIPROCESS = {"execution": {"config": {"max_concurrent": 2}}}  # forkserver preloading is the definitions' own


def _run(home, monkeypatch, out_of_process: bool) -> set[str]:
    """Materialize ``ASSETS`` in ``home``; the step processes' ids."""
    monkeypatch.setenv("GOODPUT_HOME", str(home))  # the resource reads it, in every step process too
    selection = [dg.AssetKey(a) for a in ASSETS]
    with warnings.catch_warnings(), instance_for(home) as instance:
        warnings.simplefilter("ignore")
        if out_of_process:
            with dg.execute_job(
                dg.reconstructable(resolved_build_job), instance=instance, run_config=MULTIPROCESS, asset_selection=selection
            ) as result:  # fmt: skip
                assert result.success
                return {e.pid for e in result.all_events if e.is_step_start}
        result = resolved_build_job().execute_in_process(instance=instance, asset_selection=selection)
        assert result.success
        return {e.pid for e in result.all_events if e.is_step_start}


def test_multiprocess_executor_writes_what_the_in_process_run_writes(tmp_path, monkeypatch):
    src, one, two = tmp_path / "fleet", tmp_path / "in_process", tmp_path / "multiprocess"
    assert main(["simulate", "--out", str(src), "--nodes", "2", "--days", "3", "--fault-scale", "30", "--seed", "4"]) == 0
    assert main(["--home", str(one), "ingest", str(src / "dcgm")]) == 0
    shutil.copytree(one, two)  # the same ingested warehouse (and Dagster instance) twice
    assert defs.get_job_def("build").executor_def.name == "preloaded_multiprocess"
    assert len(_run(one, monkeypatch, out_of_process=False)) == 1
    assert len(_run(two, monkeypatch, out_of_process=True)) == len(ASSETS)  # a process per step
    a, b = Warehouse(one), Warehouse(two)
    assert a.read("gpu_hourly").height > 0 and a.read("hw_events").height > 0
    for name in TABLES:
        want = a.read(name)
        keys = [c for c, t in want.schema.items() if t != pl.Float64 and not isinstance(t, pl.List)]
        assert b.read(name).sort(keys, nulls_last=True).equals(want.sort(keys, nulls_last=True)), name
