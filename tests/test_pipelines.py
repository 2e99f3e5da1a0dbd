"""Dagster wiring: the whole graph on the sample fleet, the landing sensor, the asset checks.

The demo run is shared by the end-to-end tests (it materializes every asset once: the session
fixture ``demo`` of tests/conftest.py, which tests/test_engines.py reads too)."""

import json
import re
import shutil
import subprocess
import warnings
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import dagster as dg
import polars as pl

from analysis import checks as analysis_checks
from analysis.assumptions import RESTART_S
from analysis.checks.bounds import fits_converged
from analysis.checks.bounds import goodput_bounds
from ingest.runner import ingest_paths
from pipelines import checks
from pipelines.assets import ALL_CHECKS
from pipelines.assets import ingested_sources
from pipelines.assets.ingest import conservation_check
from pipelines.assets.ingest import quarantine_ratio_check
from pipelines.assets.ingest import schema_check
from pipelines.definitions import defs
from pipelines.definitions import ingest_job
from pipelines.resources import Settings
from pipelines.run import instance_for
from pipelines.sensors import build_sensor
from pipelines.sensors import new_landing_files
from tests.conftest import REPO
from tests.conftest import SAMPLE_FLEET
from tests.conftest import simulate_with_cli
from warehouse import checks as warehouse_checks
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

GROUP_ORDER = ["ingest", "warehouse", "analysis", "catalog", "dashboards"]


def test_demo_materializes_every_asset_and_every_check_passes(demo):
    wh, out = demo
    m = re.search(r"asset checks: (\d+)/(\d+) passed", out)
    # every check but those of the live-source pull, which the demo does not run
    demo_checks = [
        c
        for c in ALL_CHECKS
        if all(k.asset_key.to_user_string() != "pulled_sources" for k in c.check_keys)
    ]
    assert m and m.group(1) == m.group(2) and int(m.group(2)) == len(demo_checks)
    for name in [
        "job_attempts",
        "hw_events",
        "gpu_samples",
        "gpu_hourly",
        "component_history",
        "interruptions",
        "component_lifetimes",
        "failure_rates",
        "survival_curves",
        "goodput_jobs",
        "goodput_projections",
    ]:
        assert wh.read(name).height > 0, name
    assert f"warehouse: {wh.db_path}" in out


def test_full_sample_fleet_report_is_small_with_an_image_per_chart(demo):
    wh, _ = demo
    page = (wh.reports / "goodput_report.html").read_text()
    assert len(page.encode()) < 5 * 2**20
    charts = re.findall(r'<div class="chart" id="chart-([^"]+)">', page)
    assert len(charts) >= 10  # every section of the report has data on the full fleet
    for key in charts:
        for ext in ("png", "svg"):
            assert (wh.reports / "charts" / f"{key}.{ext}").stat().st_size > 1000, (key, ext)


def test_demo_summary_is_computed_from_the_warehouse(demo):
    wh, out = demo
    truth = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    attempts = wh.query("SELECT count(*) n FROM job_attempts")["n"][0]
    assert f"attempts: {attempts:,}" in out
    killed = sum(len(f["killed_attempts"]) for f in truth["faults"])
    unexpected_infra = wh.query(
        "SELECT count(*) n FROM interruptions WHERE NOT planned AND failure_domain = "
        "'infrastructure'"
    )["n"][0]
    assert unexpected_infra == killed  # every fault-killed attempt attributed to infrastructure
    assert "unexpected interruptions:" in out and "failure rates per 1,000 unit-days" in out


def test_demo_jobs_hold_the_gpus_of_their_nodes_and_the_fleet_holds_them_all(demo):
    """sacct text and --json list each GPU of the typed fleet twice (gres/gpu and gres/gpu:h100):
    job 1355, 17 nodes of 8 GPUs, holds 136, and the jobs' GPU-hours fit in the fleet's."""
    wh, out = demo
    truth = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    gpus = truth["nodes"] * truth["gpus_per_node"]
    assert set(wh.query("select n_gpus from job_attempts where job_id = '1355'")["n_gpus"]) == {136}
    att = wh.read("job_attempts").filter(pl.col("scheduler") == "slurm")
    assert (att["n_gpus"] <= att["n_nodes"] * truth["gpus_per_node"]).all()
    hours = (datetime.fromisoformat(truth["end"]) - datetime.fromisoformat(truth["start"])) / (
        timedelta(hours=1)
    )
    used = re.search(r"GPU-hours: ([\d,]+)", out).group(1)
    assert 0.5 * gpus * hours < int(used.replace(",", "")) <= gpus * hours  # 256 GPUs x 60 days


def test_demo_summary_gives_infrastructure_and_all_causes_mtti_side_by_side(demo):
    wh, out = demo
    intr = wh.read("interruptions").filter(~pl.col("planned"))
    own = intr.filter(pl.col("failure_domain") == "workload").height
    att = wh.read("job_attempts").drop_nulls(["start_time", "end_time"])
    span = (att["end_time"].max() - att["start_time"].min()).total_seconds() / 3600
    assert 0 < own < intr.height
    assert (
        f"fleet MTTI: infrastructure {span / (intr.height - own):.2f} h ({intr.height - own:,} "
        f"interruptions), all causes {span / intr.height:.2f} h (+{own:,} the jobs' own failures)"
    ) in out
    software = intr.filter(pl.col("cause_class") == "software").height  # as stored, as in SQL
    assert re.search(rf"^  software\s+{software:,} ", out, re.MULTILINE)
    assert "-GPU job, infrastructure scope: MTTI" in out
    jobs = wh.read("goodput_jobs")
    assert set(jobs["method"]) == {"assumed"} and set(jobs["restart_s"]) == {RESTART_S}
    proj = wh.read("goodput_projections")
    assert set(proj["scope"]) == {"infrastructure"}


def test_plain_check_functions_agree_with_dagster(demo):
    wh, _ = demo
    assert warehouse_checks.conservation(wh, checks.primary_tables()).passed
    assert warehouse_checks.schema(wh).passed and warehouse_checks.duplicate_keys(wh).passed
    assert fits_converged(wh).passed and goodput_bounds(wh).passed
    assert warehouse_checks.quarantine_ratio(wh, 0.05).passed


def test_the_configuration_resource_is_named_settings():
    """What every asset, check, sensor and schedule reads its configuration from is one
    resource, ``settings``, as the UI's launchpad lists it."""
    repo = defs.get_repository_def()
    assert set(repo.get_top_level_resources()) == {"settings"}
    needed = set()
    for assets in repo.asset_graph.assets_defs:
        needed |= assets.required_resource_keys
    assert needed - {"io_manager"} == {"settings"}  # Dagster's own, for outputs


def test_sensor_requests_new_files_once(tmp_path):
    cfg = Settings(home=str(tmp_path / "home"))
    landing = cfg.warehouse().landing
    (landing / "day1").mkdir()
    (landing / "day1" / "sacct.txt").write_text("JobID|State\n1|COMPLETED\n")
    sensor = build_sensor(ingest_job)
    with dg.instance_for_test() as instance:
        ctx = dg.build_sensor_context(instance=instance, resources={"settings": cfg})
        requests = list(sensor(ctx))
        assert len(requests) == 1 and isinstance(requests[0], dg.RunRequest)
        assert requests[0].run_config["ops"]["ingested_sources"]["config"]["paths"] == [
            str(landing / "day1" / "sacct.txt")
        ]
        cursor = ctx.cursor
        # the same bytes dropped again, under another name, request nothing
        shutil.copy(landing / "day1" / "sacct.txt", landing / "again.txt")
        ctx2 = dg.build_sensor_context(
            instance=instance, cursor=cursor, resources={"settings": cfg}
        )
        assert not [r for r in sensor(ctx2) if isinstance(r, dg.RunRequest)]
    # once ingested, the pending sha leaves the cursor and still nothing is requested
    ingest_paths(cfg.warehouse(), [landing / "day1"])
    found, cursor3 = new_landing_files(cfg, cursor)
    assert found == [] and json.loads(cursor3)["pending"] == {}


def test_corrupted_input_fails_the_quarantine_check(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "good.txt").write_text("JobID|State\n1|COMPLETED\n2|FAILED\n")
    (src / "bad.txt").write_text("JobID|State\n" + "x|y|z\n" * 5)
    cfg = Settings(home=str(tmp_path / "home"), sources=[str(src)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = dg.materialize(
            [ingested_sources, quarantine_ratio_check, conservation_check, schema_check],
            resources={"settings": cfg},
        )
    by_name = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not by_name["quarantine_ratio_check"].passed  # 5 of 7 records quarantined
    assert by_name["conservation_check"].passed and by_name["schema_check"].passed


def test_tampered_parquet_fails_the_schema_check(tmp_path):
    wh = Warehouse(tmp_path / "home")
    ingest_paths(wh, [REPO / "tests" / "fixtures" / "slurm" / "xdmod__accounting-logs.log"])
    assert warehouse_checks.schema(wh).passed
    bogus = Path(wh.parquet) / "job_attempts" / "part-bogus.parquet"
    pl.DataFrame({"job_id": ["1"], "surprise": [1]}).write_parquet(bogus)
    res = warehouse_checks.schema(wh)
    assert not res.passed and "surprise" in res.metadata["first"]


def test_definitions_load_from_the_repository_root():
    assert {j.name for j in defs.resolve_all_job_defs()} >= {"ingest", "build"}
    assert defs.resolve_sensor_def("landing_sensor") and defs.resolve_schedule_def("daily_build")
    proc = subprocess.run(
        [str(REPO / ".venv" / "bin" / "dagster"), "definitions", "validate"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Validation successful" in proc.stderr + proc.stdout


def _days(first: str, last: str) -> list[str]:
    d = pl.date_range(pl.lit(first).str.to_date(), pl.lit(last).str.to_date(), eager=True)
    return [x.isoformat() for x in d]


def test_demo_records_its_runs_in_the_dagster_instance_under_the_home(demo):
    wh, _ = demo
    yaml = (wh.home / ".dagster" / "dagster.yaml").read_text()
    assert "telemetry:\n  enabled: false" in yaml and "dequeue_interval_seconds: 1" in yaml
    graph = defs.resolve_asset_graph()
    with instance_for(wh.home) as instance:
        assert sorted(r.dagster_run.job_name for r in instance.get_run_records()) == [
            "build",
            "ingest",
        ]
        # the demo has no live sources; fleetsim_results is its own job
        # (pipelines/assets/fleetsim.py)
        for key in graph.get_all_asset_keys() - {
            dg.AssetKey("pulled_sources"),
            dg.AssetKey("fleetsim_results"),
        }:
            assert instance.get_latest_materialization_event(key) is not None, key
        for check in (
            c for c in graph.asset_check_keys if c.asset_key != dg.AssetKey("pulled_sources")
        ):
            last = instance.event_log_storage.get_asset_check_execution_history(check, limit=1)
            assert last and last[0].status.value == "SUCCEEDED", check
        # partitions: exactly the telemetry's days, from its first (no phantom days before)
        samples = wh.query(
            'SELECT min("time")::DATE::VARCHAR a, max("time")::DATE::VARCHAR b FROM gpu_samples'
        ).row(0)
        days = instance.get_dynamic_partitions("telemetry_days")
        assert days == _days(*samples) and days[0] == "2026-01-05"
        assert instance.get_materialized_partitions(dg.AssetKey("gpu_hourly")) == set(days)


# tables whose input the committed sample fleet does not have (the simulator writes no training
# logs), with the reason their analysis gives
def test_asset_metadata_kinds_owners_schema_and_row_counts(demo):
    wh, _ = demo
    graph = defs.resolve_asset_graph()
    with instance_for(wh.home) as instance:
        for key in graph.get_all_asset_keys():
            node = graph.get(key)
            assert node.owners == ["team:fleet-goodput"] and node.kinds, key
            # groups follow the data: no asset reads from a later group
            for parent in node.parent_keys:
                assert GROUP_ORDER.index(graph.get(parent).group_name) <= GROUP_ORDER.index(
                    node.group_name
                ), (parent, key)
            if "table" not in node.metadata:
                continue
            table = node.metadata["table"]
            columns = node.metadata["dagster/column_schema"].columns
            assert [c.name for c in columns] == list(TABLES[table].columns)
            types = {c.name: c.type for c in columns}
            assert all(
                types[c] == str(t)
                for c, t in TABLES[table].columns.items()
                if not isinstance(t, pl.Datetime)
            )
            meta = instance.get_latest_materialization_event(key).asset_materialization.metadata
            assert meta["dagster/row_count"].value == wh.read(table).height > 0, key
    assert graph.get(dg.AssetKey("warehouse_catalog")).group_name == "catalog"
    assert graph.get(dg.AssetKey("gpu_hourly")).kinds == {"duckdb", "parquet"}
    hourly = {
        c.name: c.type
        for c in graph.get(dg.AssetKey("gpu_hourly")).metadata["dagster/column_schema"].columns
    }
    assert (hourly["hour"], hourly["n"]) == (
        "Datetime(us, UTC)",
        str(TABLES["gpu_hourly"].columns["n"]),
    )


def test_every_job_runs_from_the_definitions_with_and_without_a_partition(tmp_path, monkeypatch):
    """What the UI launches: the jobs of pipelines.definitions, on a small simulated fleet."""
    src, home = tmp_path / "fleet", tmp_path / "home"
    simulate_with_cli(src, "--nodes 2 --days 2 --fault-scale 0.001 --seed 1")
    monkeypatch.setenv(
        "GOODPUT_HOME", str(home)
    )  # the resource of the definitions reads it, as under `dagster dev`
    paths = [str(src / "slurm"), str(src / "dcgm")]
    with warnings.catch_warnings(), instance_for(home) as instance:
        warnings.simplefilter("ignore")
        ingest = defs.resolve_job_def("ingest").execute_in_process(
            instance=instance,
            run_config={"ops": {"ingested_sources": {"config": {"paths": paths}}}},
        )
        assert ingest.success
        days = instance.get_dynamic_partitions("telemetry_days")
        assert days == ["2026-01-05", "2026-01-06"]  # added by the ingest asset
        build = defs.resolve_job_def("build")
        assert build.execute_in_process(
            instance=instance
        ).success  # no partition: every telemetry day
        assert instance.get_materialized_partitions(dg.AssetKey("gpu_hourly")) == set(days)
        hourly = Warehouse(home).read("gpu_hourly")
        assert sorted({t.date().isoformat() for t in hourly["hour"]}) == days
        one = build.execute_in_process(instance=instance, partition_key=days[-1])
        assert one.success
        [mat] = [m for m in one.asset_materializations_for_node("gpu_hourly") if m.partition]
        assert mat.partition == days[-1] and mat.metadata["days"].value == 1
        assert (
            Warehouse(home).read("gpu_hourly").sort(pl.all()).equals(hourly.sort(pl.all()))
        )  # same rollup again
        assert (
            instance.get_latest_materialization_event(dg.AssetKey("leadership_report")) is not None
        )


def test_daily_build_requests_yesterdays_partition_only_when_it_has_telemetry():
    from datetime import UTC
    from datetime import datetime

    schedule = defs.resolve_schedule_def("daily_build")
    at = datetime(2026, 1, 7, 2, 30, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        ctx = dg.build_schedule_context(
            instance=instance, scheduled_execution_time=at, repository_def=defs.get_repository_def()
        )
        assert "no telemetry ingested for 2026-01-06" in schedule.evaluate_tick(ctx).skip_message
        instance.add_dynamic_partitions("telemetry_days", ["2026-01-05", "2026-01-06"])
        [request] = schedule.evaluate_tick(ctx).run_requests
        assert request.partition_key == "2026-01-06"


def test_demo_builds_node_health_over_every_node_it_counted_failures_on(demo):
    wh, _ = demo
    health = wh.read("node_health")
    ran_on = set(wh.query("SELECT DISTINCT unnest(nodes) AS host FROM job_attempts")["host"])
    assert ran_on <= set(health["host"])
    assert health["failures"].sum() == wh.read("node_failures").height > 0
    tested = health.filter(pl.col("node_hours") > 0)
    assert tested["test"][0].endswith(f"Benjamini-Hochberg over {tested.height} nodes")


def test_definitions_list_every_asset_job_schedule_sensor_and_check_with_a_description():
    """What the UI shows, pinned: asset keys by group, jobs, schedules and the sensor (each on by
    default), checks by asset; every one described."""
    graph = defs.resolve_asset_graph()
    by_group: dict[str, set[str]] = {}
    for key in graph.get_all_asset_keys():
        by_group.setdefault(graph.get(key).group_name, set()).add(key.to_user_string())
        assert graph.get(key).description, key
    assert by_group == {
        "ingest": {"ingested_sources", "pulled_sources"},
        "warehouse": {
            "gpu_hourly",
            "dcgm_counter_events",
            "telemetry_gpu_replacements",
            "health_event_failures",
        },
        "analysis": {
            "interruptions",
            "component_lifetimes",
            "repairable_systems",
            "node_health",
            "system_mtbf",
            "availability",
            "repair_fits",
            "root_causes",
            "failure_rates",
            "survival_curves",
            "hazard_ratios",
            "goodput_jobs",
            "goodput_projections",
            "goodput_breakdown",
            "goodput_trend",
            "fleetsim_results",
            "slow_periods",
            "job_step_times",
        },
        "catalog": {"warehouse_catalog"},
        "dashboards": {"leadership_report"},
    }
    repo = defs.get_repository_def()
    jobs = {j.name: j for j in repo.get_all_jobs() if not j.name.startswith("__")}
    assert sorted(jobs) == ["build", "fleetsim", "ingest", "pull"]
    assert all(j.description for j in jobs.values())
    built = {
        k.to_user_string() for k in defs.resolve_job_def("build").asset_layer.selected_asset_keys
    }
    assert built == set().union(*by_group.values()) - {
        "ingested_sources",
        "pulled_sources",
        "fleetsim_results",
    }  # its own job
    running = dg.DefaultScheduleStatus.RUNNING
    assert {(s.name, s.job_name, s.default_status == running) for s in repo.schedule_defs} == {
        ("daily_build", "build", True),
        ("hourly_pull", "pull", True),
    }
    [sensor] = repo.sensor_defs
    assert (sensor.name, sensor.job_name) == ("landing_sensor", "ingest")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert all(s.description for s in [*repo.schedule_defs, sensor])
    specs = [s for c in ALL_CHECKS for s in c.check_specs]
    assert {(s.name, s.asset_key.to_user_string()) for s in specs} == {
        ("conservation_check", "ingested_sources"),
        ("schema_check", "ingested_sources"),
        ("quarantine_ratio_check", "ingested_sources"),
        ("pull_conservation_check", "pulled_sources"),
        *((inv.name, inv.asset) for inv in analysis_checks.BUILD_CHECKS),
    }
    assert all(s.description for s in specs)


def test_an_analysis_asset_depends_on_the_writers_of_the_tables_it_declares():
    """One declaration feeds both the graph and the skip logic (pipelines/assets/factory.py)."""
    graph = defs.resolve_asset_graph()

    def parents(name: str) -> set[str]:
        return {k.to_user_string() for k in graph.get(dg.AssetKey(name)).parent_keys}

    sources = {"ingested_sources", "pulled_sources"}
    # needs job_attempts, reads hw_events (also written by the DCGM counter events) and node_events
    assert parents("interruptions") == sources | {"dcgm_counter_events"}
    # the fail-slow class reads the GPU signal spans and reason sampling the daily step writes
    assert parents("failure_rates") == {"component_lifetimes", "gpu_hourly"}
    assert parents("goodput_projections") == {"failure_rates", "interruptions"}
    # needs training_steps, reads job_attempts, step_timers, rank_scores (all ingested), the GPU
    # signal spans (the daily step) and NVLink errors in hw_events (also the DCGM counter events)
    assert parents("slow_periods") == sources | {"gpu_hourly", "dcgm_counter_events"}
    # the catalog reads every table: it follows every asset that writes one before it (the
    # report after it, and the fleet simulator's domain, listed after it in DOMAINS)
    assert parents("warehouse_catalog") == {
        k.to_user_string() for k in graph.get_all_asset_keys()
    } - {"warehouse_catalog", "leadership_report", "fleetsim_results"}


def test_cli_runs_are_tagged_and_described(tmp_path):
    from pipelines.run import ingest

    src = tmp_path / "src"
    src.mkdir()
    (src / "sacct.txt").write_text("JobID|State\n1|COMPLETED\n")
    cfg = Settings(home=str(tmp_path / "home"), sources=[str(src)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ingest(cfg)
    with instance_for(cfg.warehouse().home) as instance:
        [run] = instance.get_runs()
        assert run.job_name == "ingest" and run.tags["goodput/launched_by"] == "cli"
