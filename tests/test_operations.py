"""Operations that must neither lose nor double data (issue #32, part B): the landing sensor,
forget, home paths with glob characters, ``ingest --replace``, conflicting records,
environment errors and readers on a read-only home."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import FIXTURES
from warehouse.lock import WriterLock
from warehouse.store import Warehouse

SACCT = FIXTURES / "slurm" / "xdmod__accounting-logs.log"  # 4 job attempts


@pytest.mark.parametrize("name", ["hb[1]", "h*"])
def test_home_paths_with_glob_characters_are_literal(tmp_path, capsys, name):
    """A sibling that the name would match as a glob holds other data: neither is read for the
    other, and ingest / sql work without a traceback."""
    sibling = Warehouse(tmp_path / "hb1" if name == "hb[1]" else tmp_path / "hx")
    shutil.copy(
        FIXTURES / "kernel" / "nvsentinel__syslog_monitor_xid_burst.log", tmp_path / "xid.log"
    )
    ingest_paths(sibling, [tmp_path / "xid.log"], jobs=1)
    home = str(tmp_path / name)
    assert main(["--home", home, "ingest", str(SACCT)]) == 0
    assert "ingested 1 file(s), 4 rows" in capsys.readouterr().out
    assert (
        main(
            [
                "--home",
                home,
                "sql",
                "select count(*) n, min(path) p from ingest_manifest",
                "--format",
                "csv",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[1] == f"1,{SACCT}"
    wh = Warehouse(home)
    assert wh.read("job_attempts").height == 4
    assert wh.read("hw_events").height == 0
    assert wh.committed_stages() == []


def test_every_command_works_in_a_home_named_with_glob_and_url_characters(tmp_path, capsys):
    """``[ ] ? *`` and spaces: DuckDB reads a '?' in a database path as its options and Dagster
    puts the folder into SQLite URLs unescaped; the catalog, the Dagster instance of `demo` /
    `build`, and every command must still work. (`demo` runs these same steps on the sample
    fleet: checked by hand, 3.7 min, too long for this suite.)"""
    from pipelines.run import instance_for

    home = str(tmp_path / "h [1]?* x")

    def run(*argv):
        return main(["--home", home, *argv])

    assert run("ingest", str(SACCT)) == 0
    assert run("sql", "select count(*) n from job_attempts", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "4"
    Path(home, "sources.toml").write_text(
        f'[[source]]\nname = "dump"\nkind = "command"\ncommand = ["cat", "{SACCT}"]\n'
    )
    assert run("pull", "--dry-run", "--since", "2026-01-01", "--until", "2026-01-02") == 0
    assert f"cat {SACCT}" in capsys.readouterr().out
    assert run("forget", str(SACCT)) == 0
    assert "job_attempts 4" in capsys.readouterr().out
    assert Warehouse(home).read("job_attempts").height == 0
    assert run("pull", "--since", "2026-01-01", "--until", "2026-01-02") == 0
    assert Warehouse(home).read("job_attempts").height == 4
    Warehouse(home).refresh_catalog()  # what build, report and demo end with
    assert run("sql", "select count(*) from ingest_manifest", "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines()[-1] == "0"
    with instance_for(home) as instance:  # the instance demo and build record their runs in
        assert "pull" in {r.job_name for r in instance.get_runs()}
    assert (Path(home) / ".dagster" / "history" / "runs.db").exists()


def fitted_rates() -> pl.DataFrame:
    """One fitted class: what `fit` prints and `project` reads."""
    return pl.DataFrame(
        {
            "component_class": ["gpu"],
            "stratum": ["all"],
            "window": ["all"],
            "model": ["exponential"],
            "selected": [True],
            "params": ["{}"],
            "aic": [10.0],
            "n_units": [8],
            "n_events": [3],
            "exposure_hours": [1000.0],
            "rate_per_1k_unit_days": [72.0],
            "rate_ci_low": [15.0],
            "rate_ci_high": [210.0],
            "mtbf_hours": [333.0],
            "mtbf_ci_low": [114.0],
            "mtbf_ci_high": [1600.0],
            "shape": [1.0],
            "shape_ci_low": [0.5],
            "shape_ci_high": [2.0],
            "shape_reading": ["constant"],
            "method": ["mle"],
            "converged": [True],
            "population": ["fleet"],
        }
    )


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "--window", "banana"], "--window 'banana': use 'all' or a month YYYY-MM"),
        (["fit", "--window", "2026-13"], "--window '2026-13': use 'all' or a month YYYY-MM"),
        (["fit", "--window", "2031-01"], "no fits for --window 2031-01; fitted: all"),
        (["fit", "--observed-from", "0001-01-01"], "--observed-from 0001-01-01 is outside"),
        (["build", "--observed-to", "9999-01-01"], "--observed-to 9999-01-01 is outside"),
    ],
)
def test_fit_window_and_observation_bounds_are_checked(tmp_path, capsys, argv, message):
    wh = Warehouse(tmp_path / "home")
    wh.replace_table("failure_rates", fitted_rates())
    before = wh.read("failure_rates")
    assert main(["--home", str(wh.home), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert wh.read("failure_rates").equals(before)  # nothing refitted or saved


@pytest.fixture
def shared_home(tmp_path_factory):
    """A home with 4 job attempts and fitted rates, on a path another user can read."""
    root = Path(tempfile.mkdtemp(prefix="goodput-ro-"))
    root.chmod(0o755)
    wh = Warehouse(root / "home")
    ingest_paths(wh, [SACCT], jobs=1)
    wh.replace_table("failure_rates", fitted_rates())
    wh.refresh_catalog()
    for p in [root, *root.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    yield wh
    shutil.rmtree(root)


READERS = [
    (["sql", "select count(*) from job_attempts", "--format", "csv"], 0, "4"),
    (["fit"], 0, "gpu"),
    (["nodes"], 2, "node_health is empty"),
    (["project", "--mtti", "3h", "--json"], 0, "mtti_hours"),
]


@pytest.mark.parametrize("argv, status, shown", READERS)
def test_readers_work_on_a_read_only_home(shared_home, argv, status, shown):
    """Run as another user (nobody), to whom the home is read-only."""
    proc = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            sys.executable,
            "-m",
            "pipelines.cli",
            "--home",
            str(shared_home.home),
            *argv,
        ],
        capture_output=True,
        text=True,
        cwd="/tmp",
        timeout=300,
        check=False,
        env={**os.environ, "HOME": "/tmp"},
    )
    assert proc.returncode == status, proc.stderr
    assert shown in (proc.stdout if status == 0 else proc.stderr)
    assert "Traceback" not in proc.stderr and "not writable" not in proc.stderr


READ_ONLY = [argv for argv, _, _ in READERS[:3]] + [
    ["mtbf"],
    ["availability"],
    ["losses"],
    ["trend"],
    ["pull", "--dry-run"],
]


def test_readers_never_take_the_writer_lock(shared_home, monkeypatch, capsys):
    """So a --no-wait writer is never refused because of them (project: the next test)."""
    taken, take = [], WriterLock.take
    monkeypatch.setattr(
        WriterLock, "take", lambda self, wait: taken.append(wait) or take(self, wait)
    )
    for argv in READ_ONLY:
        main(["--home", str(shared_home.home), "--no-wait", *argv])
        assert (argv[0], taken) == (argv[0], [])
    assert "Traceback" not in capsys.readouterr().err


def test_project_saves_only_without_waiting_for_a_writer(shared_home, capsys):
    """Saving a projection is the one write of `project`: it takes the lock only for its own
    append, never waits for it, and prints the result unsaved while a writer is at work."""
    import fcntl

    home = str(shared_home.home)
    argv = ["--home", home, "--wait", "20s", "project", "--mtti", "3h", "--json"]
    with open(shared_home.lock_path, "a+") as held:  # another process's writer, e.g. a long ingest
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(argv) == 0  # at once: not a busy error after the 20 s wait
        out, err = capsys.readouterr()
        assert "mtti_hours" in out and "this projection is printed, not saved" in err
        fcntl.flock(held, fcntl.LOCK_UN)
    assert shared_home.read("goodput_projections").height == 0
    assert main(argv) == 0
    assert shared_home.read("goodput_projections").height == 1


def _requests(sensor, instance, cfg, cursor):
    import dagster as dg

    ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"settings": cfg})
    return [r for r in sensor(ctx) if isinstance(r, dg.RunRequest)], ctx.cursor


def _paths(requests) -> list[str]:
    return [p for r in requests for p in r.run_config["ops"]["ingested_sources"]["config"]["paths"]]


def _settled(path: Path) -> None:
    """Written a minute ago: stable for any settle time the sensor is given."""
    t = time.time() - 60
    os.utime(path, (t, t))


def test_sensor_requests_new_content_whatever_its_mtime_and_a_forgotten_file_again(tmp_path):
    import dagster as dg

    from pipelines.definitions import ingest_job
    from pipelines.resources import Settings
    from pipelines.sensors import build_sensor

    cfg = Settings(home=str(tmp_path / "home"))
    wh = cfg.warehouse()
    sensor = build_sensor(ingest_job)
    new = wh.landing / "new.txt"
    new.write_text("JobID|State\n1|COMPLETED\n")
    _settled(new)
    with dg.instance_for_test() as instance:
        first, cursor = _requests(sensor, instance, cfg, None)
        assert _paths(first) == [str(new)]
        ingest_paths(wh, [new], jobs=1)
        old = wh.landing / "moved-in.txt"  # mv / rsync -a / tar x keep an old mtime
        old.write_text("JobID|State\n2|FAILED\n")
        os.utime(old, (946684800, 946684800))
        again, cursor = _requests(sensor, instance, cfg, cursor)
        assert _paths(again) == [str(old)]
        ingest_paths(wh, [old], jobs=1)
        assert _requests(sensor, instance, cfg, cursor)[0] == []
        wh.forget([str(new)])  # forgotten, then dropped in again: new content once more
        dropped, cursor = _requests(sensor, instance, cfg, cursor)
        assert _paths(dropped) == [str(new)]
        assert dropped[0].run_key not in {first[0].run_key, again[0].run_key}


def test_sensor_retries_a_failed_run_with_backoff(tmp_path):
    from pipelines.resources import Settings
    from pipelines.sensors import RETRY_FIRST_S
    from pipelines.sensors import new_landing_files

    cfg = Settings(home=str(tmp_path / "home"))
    f = cfg.warehouse().landing / "sacct.txt"
    f.write_text("JobID|State\n1|COMPLETED\n")
    t0 = 1_800_000_000.0
    found, cursor = new_landing_files(cfg, None, now=t0)
    assert [p for p, _ in found] == [str(f)]
    # its run failed (nothing in the manifest): not before the backoff, nor while a run is active
    assert new_landing_files(cfg, cursor, now=t0 + RETRY_FIRST_S / 2)[0] == []
    assert new_landing_files(cfg, cursor, now=t0 + RETRY_FIRST_S + 1, active=True)[0] == []
    found, cursor = new_landing_files(cfg, cursor, now=t0 + RETRY_FIRST_S + 1)
    assert [p for p, _ in found] == [str(f)]
    # the second failure waits twice as long
    assert new_landing_files(cfg, cursor, now=t0 + 2.5 * RETRY_FIRST_S)[0] == []
    assert new_landing_files(cfg, cursor, now=t0 + 3.5 * RETRY_FIRST_S)[0] != []


def test_sensor_waits_until_a_file_is_stable_for_the_settle_time(tmp_path):
    from pipelines.resources import Settings
    from pipelines.sensors import new_landing_files

    cfg = Settings(home=str(tmp_path / "home"))
    f = cfg.warehouse().landing / "sacct.txt"
    f.write_text("JobID|State\n1|COMPLETED\n")
    settle, t0 = 2.0, time.time()  # the tests run with GOODPUT_SETTLE=0: a real settle time here
    found, cursor = new_landing_files(cfg, None, now=t0, settle_s=settle)
    assert found == []  # just written: it may still be growing
    with f.open("a") as fh:  # it grows: the settle time starts again
        fh.write("2|FAILED\n")
    t1 = os.stat(f).st_mtime
    found, cursor = new_landing_files(cfg, cursor, now=t1 + settle / 2, settle_s=settle)
    assert found == []
    found, cursor = new_landing_files(cfg, cursor, now=t1 + settle + 0.1, settle_s=settle)
    assert [p for p, _ in found] == [str(f)]


def test_sensor_requests_a_file_with_a_held_back_last_line_again_once_it_is_complete(tmp_path):
    import dagster as dg

    from pipelines.definitions import ingest_job
    from pipelines.resources import Settings
    from pipelines.sensors import RETRY_MAX_S
    from pipelines.sensors import build_sensor
    from pipelines.sensors import new_landing_files

    cfg = Settings(home=str(tmp_path / "home"))
    wh = cfg.warehouse()
    sensor = build_sensor(ingest_job)
    log = wh.landing / "kern.log"
    xid = (
        "2026-01-05T1{}:00:00+00:00 node-a kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid={}, "
        "name=x, off bus\n"
    )
    log.write_text(xid.format(0, 1) + xid.format(1, 2)[:60])  # the collector is mid-line
    _settled(log)
    with dg.instance_for_test() as instance:
        first, cursor = _requests(sensor, instance, cfg, None)
        assert _paths(first) == [str(log)]
        ingest_paths(
            wh, [log], jobs=1
        )  # what the run does: the first event, the cut line held back
        assert wh.read("hw_events")["source_line"].to_list() == [1]
        assert _requests(sensor, instance, cfg, cursor)[0] == []
        # done for now, not a failed run: not requested again however long it waits
        assert new_landing_files(cfg, cursor, now=time.time() + 2 * RETRY_MAX_S)[0] == []
        log.write_text(xid.format(0, 1) + xid.format(1, 2))
        _settled(log)
        again, cursor = _requests(sensor, instance, cfg, cursor)
        assert _paths(again) == [str(log)] and again[0].run_key != first[0].run_key
        ingest_paths(wh, [log], jobs=1)
        assert sorted(wh.read("hw_events")["source_line"].to_list()) == [1, 2]  # each once
        assert _requests(sensor, instance, cfg, cursor)[0] == []


def test_ingest_replace_is_one_commit(wh, tmp_path, monkeypatch):
    from warehouse import store

    f = tmp_path / "sacct.txt"
    shutil.copy(SACCT, f)
    ingest_paths(wh, [f], jobs=1)
    before = wh.read("job_attempts").drop("attempt").sort("job_id")
    commits, commit = [], store.Batch.commit
    monkeypatch.setattr(store.Batch, "commit", lambda self: commits.append(self.id) or commit(self))
    ingest_paths(wh, [f], jobs=1, replace_existing=True)
    assert len(commits) == 1
    assert wh.read("job_attempts").drop("attempt").sort("job_id").equals(before)
    assert wh.read("ingest_manifest").height == 1

    def killed(self, frames):  # the process dies after forget's work, before the new rows commit
        raise KeyboardInterrupt

    monkeypatch.setattr(store.Batch, "add", killed)
    with pytest.raises(KeyboardInterrupt):
        ingest_paths(wh, [f], jobs=1, replace_existing=True)
    assert wh.read("job_attempts").drop("attempt").sort("job_id").equals(before)
    assert wh.read("ingest_manifest").height == 1


def test_the_same_relative_path_from_two_clusters_is_two_files(wh, tmp_path, monkeypatch):
    for cluster, text in [("a", "JobID|State\n1|COMPLETED\n"), ("b", "JobID|State\n2|FAILED\n")]:
        (tmp_path / cluster / "slurm").mkdir(parents=True)
        (tmp_path / cluster / "slurm" / "sacct.txt").write_text(text)
    for cluster in ("a", "b"):
        monkeypatch.chdir(tmp_path / cluster)
        ingest_paths(wh, ["slurm/sacct.txt"], jobs=1)
    paths = sorted(wh.read("ingest_manifest")["path"])
    assert paths == [str(tmp_path / c / "slurm" / "sacct.txt") for c in ("a", "b")]
    wh.forget([paths[0]])
    assert wh.read("job_attempts")["job_id"].to_list() == ["2"]
    assert wh.read("ingest_manifest")["path"].to_list() == [paths[1]]


@pytest.mark.parametrize("together", [False, True])
def test_forget_keeps_records_another_stored_file_also_provides(wh, tmp_path, together):
    """Two overlapping sacct dumps and two overlapping kernel logs: forgetting the first of each
    leaves exactly what the second alone holds, and forgetting the second too leaves nothing."""
    sacct = SACCT.read_text().splitlines(keepends=True)
    xids = [
        f"2026-01-05T10:00:0{i}+00:00 gpu-node-1 kernel: {line}"
        for i, line in enumerate(
            (FIXTURES / "kernel" / "nvsentinel__syslog_monitor_xid_burst.log")
            .read_text()
            .splitlines(keepends=True)
        )
    ]
    files = {"a.sacct": sacct[:3], "b.sacct": sacct[1:], "a.log": xids[:4], "b.log": xids[1:]}
    for name, lines in files.items():
        (tmp_path / name).write_text("".join(lines))
    firsts, seconds = (
        [tmp_path / "a.sacct", tmp_path / "a.log"],
        [tmp_path / "b.sacct", tmp_path / "b.log"],
    )
    alone = Warehouse(tmp_path / "alone")
    ingest_paths(alone, seconds, jobs=1)
    if together:
        ingest_paths(wh, firsts + seconds, jobs=1)
    else:
        ingest_paths(wh, firsts, jobs=1)
        ingest_paths(wh, seconds, jobs=1)
    assert wh.read("job_attempts").height == 4 and wh.read("hw_events").height == 5
    wh.forget([str(p) for p in firsts])

    def rows(w, table, drop):
        return sorted(map(str, w.read(table).drop(drop).rows()))

    assert rows(wh, "job_attempts", ["attempt"]) == rows(alone, "job_attempts", ["attempt"])
    assert rows(wh, "hw_events", ["event_id", "caused_by"]) == rows(
        alone, "hw_events", ["event_id", "caused_by"]
    )
    wh.forget([str(p) for p in seconds])
    assert wh.read("job_attempts").height == 0 and wh.read("hw_events").height == 0


def test_a_record_with_the_key_of_a_stored_one_and_other_values_is_a_conflict(wh, tmp_path):
    """The same GPU, time and metric: 50 W in one scrape, 99 W in another. The second is
    quarantined naming both files, never counted as already stored."""

    def scrape(watts):
        return (
            "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
            f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-1",Hostname="n1"}} {watts} 1767607200000\n'
        )

    (tmp_path / "a.prom").write_text(scrape(50))
    (tmp_path / "b.prom").write_text(scrape(99))
    (tmp_path / "c.prom").write_text(
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n" + scrape(50)
    )
    ingest_paths(wh, [tmp_path / "a.prom"], jobs=1)
    reports = {
        r.path: r for r in ingest_paths(wh, [tmp_path / "b.prom", tmp_path / "c.prom"], jobs=1)
    }
    b, c = reports[str(tmp_path / "b.prom")], reports[str(tmp_path / "c.prom")]
    assert (b.rows_ok, b.rows_quarantined, b.rows_duplicate) == (0, 1, 0)
    assert (c.rows_ok, c.rows_quarantined, c.rows_duplicate) == (0, 0, 1)
    assert wh.read("gpu_samples")["value"].to_list() == [50.0]
    q = wh.read("quarantine", f"source_file = '{tmp_path / 'b.prom'}'")
    assert q.height == 1 and q["sha256"][0] == b.sha256
    assert (
        str(tmp_path / "a.prom") in q["error"][0]
        and "99" in q["error"][0]
        and "50" in q["error"][0]
    )
    from pipelines.checks import primary_tables
    from warehouse.checks import conservation

    assert conservation(wh, primary_tables()).passed


def test_sel_entries_with_different_record_ids_are_different_records(wh, tmp_path):
    line = " | 02/06/2020 | 18:30:50 | Power Supply #0xfb | Power Supply AC lost | Asserted\n"
    (tmp_path / "node1_sel.txt").write_text("".join(f"{i:4x}{line}" for i in (0x11, 0x12, 0x13)))
    (report,) = ingest_paths(wh, [tmp_path / "node1_sel.txt"], fmt="ipmi-sel", jobs=1)
    assert (report.records, report.rows_ok, report.rows_duplicate) == (3, 3, 0)
    assert sorted(wh.read("hw_events")["record_id"]) == ["11", "12", "13"]


def test_disk_full_is_one_line_with_an_exit_status_saying_nothing_was_committed(tmp_path):
    """A file-size limit makes every write past a few KB fail (EFBIG), as a full disk does."""
    home = tmp_path / "home"
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from pipelines.cli import main\n"
        f"sys.exit(main(['--home', {str(home)!r}, 'ingest', {str(SACCT)!r}]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("\n") == 1 and "nothing was committed" in proc.stderr, proc.stderr
    assert Warehouse(home).read("job_attempts").height == 0
    assert main(["--home", str(home), "ingest", str(SACCT)]) == 0
    assert Warehouse(home).read("job_attempts").height == 4
