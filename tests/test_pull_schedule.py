"""The hourly pull runs by itself: a real Dagster daemon on a home with a source pulls it on
schedule (the cron set to every minute through GOODPUT_PULL_CRON, as a site may set it)."""

import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import FIXTURES
from conftest import REPO

from pipelines.run import instance_for
from warehouse.store import Warehouse

SACCT = FIXTURES / "slurm" / "sacct_parsable2_with_header_examples.txt"


def test_the_daemon_pulls_on_schedule(tmp_path):
    import dagster as dg

    home = tmp_path / "home"
    home.mkdir()
    (home / "sources.toml").write_text(
        f'[[source]]\nname = "dump"\nkind = "command"\ncommand = ["cat", "{SACCT}"]\n'
    )
    instance_for(
        home
    ).dispose()  # writes HOME/.dagster/dagster.yaml (queued runs, polled every second)
    env = {
        **os.environ,
        "GOODPUT_HOME": str(home),
        "DAGSTER_HOME": str(home / ".dagster"),
        "GOODPUT_PULL_CRON": "* * * * *",
    }
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-m", "pipelines.definitions"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = (
            time.monotonic() + 240
        )  # the next minute's tick, then a launched run (slow under load)
        while time.monotonic() < deadline and not Warehouse(home).files("pull_log"):
            time.sleep(2)
    finally:
        daemon.terminate()
        daemon.wait(30)
    log = Warehouse(home).read("pull_log")
    assert log.select("source", "status").rows() == [("dump", "ok")]
    assert Warehouse(home).read("job_attempts").height == log["rows_ok"][0] > 0
    with instance_for(home) as instance:
        [run] = instance.get_runs()
        assert run.job_name == "pull" and run.tags.get("dagster/schedule_name") == "hourly_pull"
        assert run.tags.get("goodput/launched_by") == "schedule"
        assert instance.get_latest_materialization_event(dg.AssetKey("pulled_sources")) is not None
