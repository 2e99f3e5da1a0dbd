"""Checkpoint evidence (ingest/formats/checkpoints.py) and
measured badput from real checkpoint times."""

from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.goodput_measured import refresh_goodput_jobs
from ingest.base import ParseContext
from ingest.formats.checkpoints import parse
from ingest.registry import detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES
from warehouse.schemas import conform

CK = FIXTURES / "checkpoints"


def _parse(name, **ctx):
    r = parse((CK / name).read_bytes(), ParseContext(path=str(CK / name), **ctx))
    rows = r.tables.get("checkpoints", TABLES["checkpoints"].empty())
    assert r.records == rows.height + r.quarantine.height  # conservation
    return rows, dict(
        zip(r.quarantine["line"].to_list(), r.quarantine["error"].to_list(), strict=True)
    )


def test_every_checkpoint_fixture_is_detected_as_checkpoints():
    for f in CK.iterdir():
        assert detect(f.read_bytes()[:65536], f.name).name == "checkpoints", f.name


def test_megatron_progress_log_saves_are_durable_times_with_the_job_of_the_line():
    rows, bad = _parse("megatron_progress.txt", tz="Europe/Berlin")
    assert rows["event"].to_list() == ["save_end", "save_end"]
    assert rows["iteration"].to_list() == [500, 1000]
    assert rows["job_id"].to_list() == ["81234", "81234"]
    # progress.txt is written in local time: 09:45:12 in Berlin (CET) is 08:45:12 UTC
    assert rows["time"][0] == datetime(2025, 3, 2, 8, 45, 12)
    assert list(bad) == [5] and "cannot tell the job" in bad[5]  # empty Job ID (not under Slurm)


def test_nemo_lightning_saves_are_starts_and_the_job_comes_from_the_slurm_output_name():
    rows, bad = _parse("slurm-4242.out")
    assert rows["event"].to_list() == ["save_start", "save_start"]
    assert rows["framework"].to_list() == ["lightning", "lightning"]
    assert rows["iteration"].to_list() == [500, 1500] and set(rows["job_id"]) == {"4242"}
    assert rows["time"].to_list() == [
        datetime(2025, 2, 11, 14, 32, 9),
        datetime(2025, 2, 11, 15, 33, 40),
    ]
    assert list(bad) == [5] and "no timestamp" in bad[5]  # plain Lightning line: no time


def test_torchtitan_dcp_saves_carry_their_duration_and_the_job_of_the_script():
    rows, bad = _parse("torchtitan_train.log")
    assert rows["event"].to_list() == ["save_start", "save_end"] * 2 and not bad
    assert rows["duration_s"].to_list()[1::2] == [5.53, 5.77]
    assert set(rows["job_id"]) == {"90517"}
    assert rows["time"][1] == datetime(2025, 4, 1, 0, 5, 8, 541000)


def test_megatron_stdout_without_timestamps_is_quarantined_not_guessed():
    rows, bad = _parse("megatron_stdout_no_time.log")
    assert rows.height == 0 and sorted(bad) == [2, 3]


def test_csv_rows_with_zones_aliases_and_bad_values():
    rows, bad = _parse("checkpoints.csv")
    assert rows["event"].to_list() == ["save_end", "save_end", "save_start", "save_end"]
    assert rows["time"][3] == datetime(2026, 1, 5, 1, 3)  # +01:00 to UTC
    assert bad == {
        6: "unreadable time 'yesterday' (want ISO-8601)",
        7: "no job_id",
        8: "unknown event 'uploaded' (want save_start or save_end)",
    }


T0 = datetime(2026, 1, 5)


def test_measured_badput_uses_ingested_checkpoint_times(wh, tmp_path):
    def att(job, n, s, e, state):
        return {
            "cluster": "default",
            "scheduler": "slurm",
            "job_id": job,
            "attempt": n,
            "name": "t",
            "user": "u",
            "state": state,
            "n_gpus": 8,
            "start_time": T0 + timedelta(minutes=s),
            "end_time": T0 + timedelta(minutes=e),
        }

    attempts = [
        att("7001", 1, 0, 180, "NODE_FAIL"),
        att("7001", 2, 190, 250, "COMPLETED"),
        att("7002", 1, 0, 180, "NODE_FAIL"),
        att("7002", 2, 190, 250, "COMPLETED"),
    ]
    wh.replace_table("job_attempts", conform("job_attempts", pl.DataFrame(attempts)))
    csv = tmp_path / "ck.csv"
    # job 7001 checkpointed every ~3 h, not every 30 min: its last durable save was at 0:40
    csv.write_text("job_id,time,event\n7001,2026-01-05T00:40:00Z,save_end\n")
    ingest_paths(wh, [csv], "auto", ParseContext())
    jobs = refresh_goodput_jobs(wh, 1800, 60, 600)
    by = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    assert by["7001"]["method"] == "measured" and by["7002"]["method"] == "assumed"
    # measured: 180 - 40 = 140 min lost; assumed: 5 checkpoints of 31 min leave 25 min lost
    assert by["7001"]["lost_work_hours"] * 60 == pytest.approx(140)
    assert by["7002"]["lost_work_hours"] * 60 == pytest.approx(25)
    assert by["7001"]["goodput"] < by["7002"]["goodput"]
    assert (by["7001"]["ckpt_interval_s"], by["7001"]["restart_s"]) == (1800.0, 600.0)


def test_build_flags_state_the_assumptions_in_the_resource(wh, monkeypatch):
    import pipelines.run
    from pipelines.cli import main

    seen = {}

    def fake_build(config):
        seen.update(config.model_dump())
        raise pipelines.run.PipelineError("stop here")

    monkeypatch.setattr(pipelines.run, "build", fake_build)
    assert (
        main(
            [
                "--home",
                str(wh.home),
                "ingest",
                str(FIXTURES / "slurm" / "xdmod__accounting-logs.log"),
            ]
        )
        == 0
    )
    argv = [
        "--home",
        str(wh.home),
        "build",
        "--ckpt-interval",
        "3h",
        "--ckpt-cost",
        "90s",
        "--restart",
        "5m",
    ]
    assert main(argv) == 2
    assert (seen["ckpt_interval_s"], seen["ckpt_cost_s"], seen["restart_s"]) == (
        10800.0,
        90.0,
        300.0,
    )
    assert main(["--home", str(wh.home), "build", "--ckpt-interval", "0s"]) == 2
