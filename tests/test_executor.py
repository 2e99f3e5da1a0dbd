"""The definitions run out of process: the daily tables and the whole-history steps after them,
materialized by the build job with the multiprocess executor (both cores, one process per step,
forked from a server that imported the definitions once), equal the in-process run's."""

import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml
from dagster_k8s.models import k8s_model_from_dict
from kubernetes import client

from pipelines.cli import main
from pipelines.definitions import definitions
from pipelines.definitions import defs
from pipelines.definitions import resolved_build_job
from pipelines.definitions import run_executor
from pipelines.run import instance_for
from tests.conftest import simulate_with_cli
from warehouse.store import Warehouse

# gpu_hourly fans out to two steps that run at once; each writes its own tables
ASSETS = ["gpu_hourly", "dcgm_counter_events", "telemetry_gpu_replacements"]
TABLES = [
    "gpu_hourly",
    "gpu_daily",
    "gpu_counter_changes",
    "gpu_sightings",
    "hw_events",
    "component_history",
]
MULTIPROCESS = {
    "execution": {"config": {"max_concurrent": 2}}
}  # forkserver preloading is the definitions' own


def _run(home, monkeypatch, out_of_process: bool) -> dict[str, int]:
    """Materialize ``ASSETS`` in ``home``; each step's (assets' and their checks') process id."""
    monkeypatch.setenv(
        "GOODPUT_HOME", str(home)
    )  # the resource reads it, in every step process too
    selection = [dg.AssetKey(a) for a in ASSETS]
    with warnings.catch_warnings(), instance_for(home) as instance:
        warnings.simplefilter("ignore")
        if out_of_process:
            with dg.execute_job(
                dg.reconstructable(resolved_build_job),
                instance=instance,
                run_config=MULTIPROCESS,
                asset_selection=selection,
            ) as result:
                assert result.success
                return {e.step_key: e.pid for e in result.all_events if e.is_step_start}
        result = resolved_build_job().execute_in_process(
            instance=instance, asset_selection=selection
        )
        assert result.success
        return {e.step_key: e.pid for e in result.all_events if e.is_step_start}


def test_multiprocess_executor_writes_what_the_in_process_run_writes(tmp_path, monkeypatch):
    src, one, two = tmp_path / "fleet", tmp_path / "in_process", tmp_path / "multiprocess"
    simulate_with_cli(src, "--nodes 2 --days 3 --fault-scale 30 --seed 4")
    assert main(["--home", str(one), "ingest", str(src / "dcgm")]) == 0
    shutil.copytree(one, two)  # the same ingested warehouse (and Dagster instance) twice
    assert defs.resolve_job_def("build").executor_def.name == "preloaded_multiprocess"
    in_process = _run(one, monkeypatch, out_of_process=False)
    assert set(ASSETS) <= set(in_process) and len(set(in_process.values())) == 1
    steps = _run(two, monkeypatch, out_of_process=True)
    assert set(steps) == set(in_process)
    assert len(set(steps.values())) == len(steps)  # a process per step
    a, b = Warehouse(one), Warehouse(two)
    assert a.read("gpu_hourly").height > 0 and a.read("hw_events").height > 0
    for name in TABLES:
        want = a.read(name)
        keys = [c for c, t in want.schema.items() if t != pl.Float64 and not isinstance(t, pl.List)]
        assert b.read(name).sort(keys, nulls_last=True).equals(want.sort(keys, nulls_last=True)), (
            name
        )


def _readme_k8s_run_config() -> dict:
    """The run config docs/dagster.md "Kubernetes" documents for ``GOODPUT_EXECUTOR=k8s``."""
    text = (Path(__file__).parents[1] / "docs" / "dagster.md").read_text()
    return yaml.safe_load(
        text.split("## Kubernetes", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    )


def test_the_documented_kubernetes_settings_are_valid_k8s_job_executor_config():
    for name in ("build", "ingest"):
        job = definitions(run_executor("k8s")).resolve_job_def(name)
        assert job.executor_def.name == "k8s"
        config = _readme_k8s_run_config()
        k8s = dg.validate_run_config(job, config)["execution"]["k8s"]
        assert k8s["job_namespace"] == "goodput" and k8s["max_concurrent"] == 4
        # the pod's parts build into Kubernetes models as the executor builds them
        volumes = [k8s_model_from_dict(client.V1Volume, v) for v in k8s["volumes"]]
        assert volumes[0].persistent_volume_claim.claim_name == "goodput-home"
        mounts = [k8s_model_from_dict(client.V1VolumeMount, m) for m in k8s["volume_mounts"]]
        assert {m.name: m.mount_path for m in mounts} == {
            "home": "/goodput/home",
            "scratch": "/scratch",
        }
        limits = k8s_model_from_dict(
            client.V1ResourceRequirements, k8s["step_k8s_config"]["container_config"]["resources"]
        )
        assert limits.limits == {"cpu": "2", "memory": "4Gi"}
        assert "GOODPUT_EXECUTOR=k8s" in k8s["env_vars"]
        steps = set(k8s["per_step_k8s_config"])  # each names a step of the ingest or build job
        assert steps == {"ingested_sources", "gpu_hourly"}
        assert steps <= set(defs.resolve_job_def("ingest").graph.node_dict) | set(
            defs.resolve_job_def("build").graph.node_dict
        )
        config["execution"]["config"]["volume_mount"] = config["execution"]["config"].pop(
            "volume_mounts"
        )
        with pytest.raises(dg.DagsterInvalidConfigError, match="volume_mount"):  # a typo is caught
            dg.validate_run_config(job, config)


def test_goodput_executor_picks_the_executor_of_launched_runs(monkeypatch):
    assert run_executor().name == "preloaded_multiprocess"
    assert run_executor("multiprocess").name == "preloaded_multiprocess"
    with pytest.raises(ValueError, match="GOODPUT_EXECUTOR='slurm': use one of multiprocess, k8s"):
        run_executor("slurm")
    monkeypatch.setenv("GOODPUT_EXECUTOR", "k8s")  # as the code location's pod sets it
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "from pipelines.definitions import defs; "
                "print(defs.resolve_job_def('build').executor_def.name)"
            ),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
    )
    assert out.stdout.strip() == "k8s"
