"""Pulling live sources (sources/pull.py): windows, cursor, overlap, failures as data, the same
path as files. Run with the ``command`` kind: real processes whose output is a format we read
(the Slurm, Prometheus and Redfish kinds have their own files, against real servers)."""

import contextlib
import io
import json
import shlex
import sys
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest
from conftest import FIXTURES

from ingest.base import ParseContext
from ingest.runner import ingest_paths
from pipelines.cli import main
from sources import kinds
from sources.base import SourceConfigError
from sources.base import Window
from sources.base import load_sources
from sources.base import source_config
from sources.pull import cursors
from sources.pull import plan
from sources.pull import pull
from warehouse.checks import pull_conservation

SACCT = FIXTURES / "slurm" / "sacct_parsable2_with_header_examples.txt"
K8S = FIXTURES / "kubernetes" / "kuard__kubectl_get_pods_list.json"
T0 = datetime(2026, 1, 1)


def command(name: str, argv: list[str], **options) -> object:
    return source_config(
        {
            "name": name,
            "kind": "command",
            "cluster": "c1",
            "command": argv,
            "retries": 0,
            **options,
        },
        kinds(),
    )


def write_sources(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "sources.toml").write_text(text)


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(map(str, argv)))
    return code, out.getvalue(), err.getvalue()


def test_window_chunks_cover_the_range_once():
    w = Window(T0, T0 + timedelta(hours=50))
    chunks = w.chunks(timedelta(days=1))
    assert [(c.start, c.end) for c in chunks] == [
        (T0, T0 + timedelta(days=1)),
        (T0 + timedelta(days=1), T0 + timedelta(days=2)),
        (T0 + timedelta(days=2), T0 + timedelta(hours=50)),
    ]


def test_pull_stores_what_ingesting_the_file_stores_and_a_second_pull_adds_nothing(wh, tmp_path):
    src = command("dump", ["cat", str(SACCT)])
    first = pull(wh, [src], T0, T0 + timedelta(hours=6))
    assert [(r.status, r.records) for r in first] == [
        ("ok", first[0].rows_ok + first[0].rows_quarantined)
    ]
    pulled = (
        wh.read("job_attempts")
        .drop("source_file", "ingested_at", "batch", strict=False)
        .sort("job_id", "attempt")
    )
    assert pulled.height == first[0].rows_ok > 0
    assert (pulled["cluster"] == "c1").all()

    again = pull(wh, [src], T0, T0 + timedelta(hours=6))
    assert again[0].rows_ok == 0 and again[0].rows_duplicate == first[0].rows_ok
    assert wh.read("job_attempts").height == pulled.height

    # the same records from a file: stored once
    other = wh.__class__(tmp_path / "other")
    ingest_paths(other, [SACCT], ctx=ParseContext(cluster="c1"))
    from_file = (
        other.read("job_attempts")
        .drop("source_file", "ingested_at", "batch", strict=False)
        .sort("job_id", "attempt")
    )
    assert from_file.equals(pulled)
    ingest_paths(wh, [SACCT], ctx=ParseContext(cluster="c1"))
    assert wh.read("job_attempts").height == pulled.height
    assert pull_conservation(wh).passed


def test_cursor_overlap_and_windows(wh):
    src = command("dump", ["cat", str(SACCT)])
    overlap = kinds()["command"].OVERLAP
    pull(wh, [src], T0, T0 + timedelta(days=2, hours=3))
    log = wh.read("pull_log").sort("window_start")
    assert log["window_start"].to_list() == [T0, T0 + timedelta(days=1), T0 + timedelta(days=2)]
    assert cursors(wh) == {"dump": (T0 + timedelta(days=2, hours=3), True)}
    # without --since: from the cursor less the overlap, to --until
    nxt = plan(wh, [src], until=T0 + timedelta(days=2, hours=5))
    assert [(w.start, w.end) for _, w, _ in nxt] == [
        (T0 + timedelta(days=2, hours=3) - overlap, T0 + timedelta(days=2, hours=5))
    ]


def test_window_bounds_reach_the_command():
    src = command("dump", ["echo", "{start}", "{end}"])
    assert kinds()["command"].plan(src, Window(T0, T0 + timedelta(hours=1))) == [
        "echo 2026-01-01T00:00:00 2026-01-01T01:00:00"
    ]


def test_a_failing_source_is_a_status_row_the_others_still_run_and_the_next_pull_catches_up(
    wh, tmp_path
):
    flag = tmp_path / "down"
    flag.write_text("")
    # fails while the flag file exists, like a login node that is down
    script = (
        f"test -e {shlex.quote(str(flag))} && "
        "{ echo 'ssh: connect to host login1 port 22: No route to host' >&2; exit 255; }; "
        f"cat {shlex.quote(str(K8S))}"
    )
    flaky = command("k8s", ["sh", "-c", script], format="k8s")
    good = command("dump", ["cat", str(SACCT)])
    reports = pull(wh, [flaky, good], T0, T0 + timedelta(days=2))
    by = {(r.source, r.window.start): r for r in reports}
    failed = by[("k8s", T0)]
    assert failed.status == "failed"
    assert failed.error.endswith(
        "exited 255: ssh: connect to host login1 port 22: No route to host"
    )
    assert (
        "k8s",
        T0 + timedelta(days=1),
    ) not in by  # no window past the gap is tried, let alone marked done
    assert [r.status for r in reports if r.source == "dump"] == ["ok", "ok"]
    assert cursors(wh)["k8s"] == (
        T0,
        False,
    )  # never pulled whole: its failed window is where it resumes
    log = wh.read("pull_log").filter(pl.col("source") == "k8s")
    assert log.select("status", "error").rows() == [("failed", failed.error)]
    assert wh.read("job_attempts").height > 0

    flag.unlink()
    caught_up = pull(wh, [flaky], until=T0 + timedelta(days=2))
    # never pulled whole: it starts again where its first pull failed
    assert [r.window.start for r in caught_up] == [T0, T0 + timedelta(days=1)]
    assert all(r.status == "ok" for r in caught_up)
    assert wh.read("job_attempts").filter(pl.col("scheduler") == "k8s").height == 1


def test_the_cursor_stops_at_the_earliest_gap_whatever_was_pulled_past_it(wh, tmp_path):
    """A pull fails, then a backfill (a Dagster daily partition) pulls a later day, and another
    an older one: the next pull starts at the failed window, not past the backfill."""
    flag = tmp_path / "down"
    script = f"test -e {shlex.quote(str(flag))} && exit 255; cat {shlex.quote(str(SACCT))}"
    src = command("dump", ["sh", "-c", script])
    day = timedelta(days=1)
    overlap = kinds()["command"].OVERLAP
    assert [r.status for r in pull(wh, [src], T0, T0 + day)] == ["ok"]
    flag.write_text("")
    [failed] = pull(wh, [src], until=T0 + 2 * day)
    assert failed.status == "failed" and failed.window.start == T0 + day - overlap
    flag.unlink()
    assert [r.status for r in pull(wh, [src], T0 + 3 * day, T0 + 4 * day)] == ["ok"]
    assert [r.status for r in pull(wh, [src], T0 - 5 * day, T0 - 4 * day)] == ["ok"]
    assert cursors(wh) == {"dump": (T0 + day, True)}
    caught_up = pull(wh, [src], until=T0 + 5 * day)
    assert [(r.status, r.window.start) for r in caught_up][:2] == [
        ("ok", T0 + day - overlap),
        ("ok", T0 + 2 * day - overlap),
    ]
    assert cursors(wh) == {"dump": (T0 + 5 * day, True)}
    # a backfill past the cursor with no failure before it: the time between is a gap too
    assert [r.status for r in pull(wh, [src], T0 + 7 * day, T0 + 8 * day)] == ["ok"]
    assert cursors(wh) == {"dump": (T0 + 5 * day, True)}


def test_until_in_the_future_marks_nothing_past_now(wh):
    from sources.pull import now

    src = command("dump", ["cat", str(SACCT)])
    reports = pull(wh, [src], now() - timedelta(hours=2), now() + timedelta(days=3))
    assert reports and all(r.status == "ok" for r in reports)
    assert max(r.window.end for r in reports) <= now()
    assert cursors(wh)["dump"][0] <= now()


def test_a_command_that_hangs_is_cut_at_its_timeout(wh):
    src = source_config(
        {
            "name": "slow",
            "kind": "command",
            "command": [sys.executable, "-c", "import time; time.sleep(30)"],
            "timeout_s": 0.5,
            "retries": 0,
        },
        kinds(),
    )
    [r] = pull(wh, [src], T0, T0 + timedelta(hours=1))
    assert r.status == "failed" and r.error.endswith("no answer within 0.5 s")


def _running(argv: list[str]) -> list[int]:
    """The pids of processes whose command line is ``argv``."""
    want, pids = "\0".join(argv).encode() + b"\0", []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == want:
                pids.append(int(proc.name))
    return pids


def test_a_timeout_through_a_shell_prefix_leaves_no_process_behind(wh):
    """sacct through a shell that hangs in a child of its own (a grandchild of the pull), tried
    twice: each try's whole process group is killed at the timeout, the grandchild with it."""
    sleep = ["sleep", "317.25"]  # a duration nothing else here sleeps
    src = source_config(
        {"name": "slurm", "kind": "slurm", "timeout_s": 0.5, "retries": 1,
         "command_prefix": ["sh", "-c", f"{shlex.join(sleep)} & wait", "sh"]},
        kinds(),
    )  # fmt: skip
    [r] = pull(wh, [src], T0, T0 + timedelta(hours=1))
    assert r.status == "failed" and r.error.endswith("no answer within 0.5 s")
    assert _running(sleep) == []


def test_command_output_cut_mid_line_is_held_back_then_read_whole(wh, tmp_path):
    """A kernel log whose last line ends inside an XID code (79 of 119 written): the first pull
    stores the whole lines only, says what it held back, and the next pull, the line complete,
    stores XID 119, never an XID 11."""
    from tests.test_attack_inputs import XID_CUT
    from tests.test_attack_inputs import XID_OK
    from tests.test_attack_inputs import XID_REST

    log = tmp_path / "kern.log"
    log.write_text(XID_OK + XID_CUT)
    src = command("kern", ["cat", str(log)], format="kernel", host="node-a")
    [r] = pull(wh, [src], T0, T0 + timedelta(hours=1))
    assert wh.read("hw_events")["code"].to_list() == ["79"]
    assert (r.status, r.records, r.held_back) == ("ok", 1, len(XID_CUT))
    log.write_text(XID_OK + XID_CUT + XID_REST)
    [r] = pull(wh, [src], T0, T0 + timedelta(hours=1))
    assert (r.rows_ok, r.rows_duplicate, r.held_back) == (1, 1, 0)
    assert sorted(wh.read("hw_events")["code"].to_list()) == ["119", "79"]


def test_bad_records_are_quarantined_per_record_and_counted(wh, tmp_path):
    bad = tmp_path / "sacct.txt"
    lines = SACCT.read_text().splitlines()
    bad.write_text(
        "\n".join([*lines, lines[-1].replace("|", "|not-a-time|", 1).replace("|", "||", 3)]) + "\n"
    )
    [r] = pull(wh, [command("dump", ["cat", str(bad)])], T0, T0 + timedelta(hours=1))
    assert r.status == "ok"
    assert r.records == r.rows_ok + r.rows_quarantined + r.rows_duplicate
    q = wh.read("quarantine")
    assert q.height == r.rows_quarantined >= 1
    assert q["source_file"].str.starts_with("pull://dump/").all()
    assert pull_conservation(wh).passed


def test_sources_file_mistakes_are_one_line(tmp_path):
    home = tmp_path / "home"
    write_sources(home, '[[source]]\nname = "x"\nkind = "nope"\n')
    with pytest.raises(SourceConfigError, match="kind 'nope' is not one of"):
        load_sources(home, kinds())
    write_sources(
        home, '[[source]]\nname = "x"\nkind = "command"\ncommand = ["true"]\ncolour = "red"\n'
    )
    with pytest.raises(SourceConfigError, match="unknown option"):
        load_sources(home, kinds())
    write_sources(home, '[[source]]\nname = "x"\nkind = "command"\n')
    with pytest.raises(SourceConfigError, match="needs command"):
        load_sources(home, kinds())
    write_sources(home, "[[source\n")
    code, _, err = run_cli("--home", home, "pull")
    assert code == 2 and err.count("\n") == 1 and "sources.toml" in err


def test_cli_pull_dry_run_and_exit_status(tmp_path):
    home = tmp_path / "home"
    write_sources(
        home,
        f"""
[[source]]
name = "dump"
kind = "command"
cluster = "c1"
command = ["cat", "{SACCT}"]

[[source]]
name = "down"
kind = "command"
command = ["sh", "-c", "echo unreachable >&2; exit 2"]
retries = 0
""",
    )
    code, out, _ = run_cli(
        "--home", home, "pull", "--dry-run", "--since", "2026-01-01", "--until", "2026-01-01T12:00"
    )
    assert code == 0
    assert f"cat {SACCT}" in out and "2026-01-01T00:00:00..2026-01-01T12:00:00" in out
    assert not list(home.rglob("*.parquet"))  # a dry run stores nothing

    code, out, err = run_cli(
        "--home", home, "pull", "--since", "2026-01-01", "--until", "2026-01-01T12:00"
    )
    assert code == 1
    assert "dump: pulled 2026-01-01 00:00..2026-01-01 12:00 (1 window(s))" in out
    assert (
        "warning: down 2026-01-01T00:00:00..2026-01-01T12:00:00: sh -c" in err
        and "unreachable" in err
    )
    code, out, _ = run_cli(
        "--home", home, "pull", "dump", "--since", "2026-01-01", "--until", "2026-01-01T12:00"
    )
    assert code == 0 and "already stored" in out and " 0 rows" in out
    code, _, err = run_cli("--home", home, "pull", "nosuch")
    assert code == 2 and "no source named nosuch" in err


def test_dagster_pull_job_and_schedule(tmp_path):
    import dagster as dg

    from pipelines.definitions import defs
    from pipelines.resources import Settings

    home = tmp_path / "home"
    schedule = next(s for s in defs.schedules if s.name == "hourly_pull")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    ctx = dg.build_schedule_context(resources={"settings": Settings(home=str(home))})
    assert isinstance(
        schedule.evaluate_tick(ctx).skip_message, str
    )  # no sources.toml: skipped, saying why

    write_sources(
        home, f'[[source]]\nname = "dump"\nkind = "command"\ncommand = ["cat", "{SACCT}"]\n'
    )
    [request] = schedule.evaluate_tick(
        dg.build_schedule_context(resources={"settings": Settings(home=str(home))})
    ).run_requests
    job = defs.resolve_job_def("pull")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(
            instance=instance,
            resources={"settings": Settings(home=str(home))},
            tags=request.tags,
        )
        assert result.success
        [mat] = result.asset_materializations_for_node("pulled_sources")
        assert mat.metadata["rows"].value > 0 and mat.metadata["failures"].value == 0
        [check] = result.get_asset_check_evaluations()
        assert (check.check_name, check.passed) == ("pull_conservation_check", True)
    from warehouse.store import Warehouse

    log = Warehouse(home).read("pull_log")
    assert log.height == 1 and log["status"][0] == "ok"
    assert json.loads(json.dumps(mat.metadata["by_source"].value))["dump"]["windows_ok"] == 1


def test_pull_conservation_catches_a_window_that_does_not_add_up(wh):
    pull(wh, [command("dump", ["cat", str(SACCT)])], T0, T0 + timedelta(hours=1))
    assert pull_conservation(wh).passed
    bad = wh.read("pull_log").with_columns(
        records_read=pl.col("records_read") + 1, started_at=pl.lit(T0)
    )
    with wh.batch("bad") as batch:
        batch.add({"pull_log": bad})
    result = pull_conservation(wh)
    # the bad row does not add up, and it claims rows the warehouse does not hold twice
    assert not result.passed and result.metadata["violations"] == 2
    assert (
        "read 5, stored 4" in result.metadata["first"]
        and "8 rows pulled, 4 stored" in result.metadata["first"]
    )


@pytest.mark.parametrize("verify", [False, "/etc/goodput/bmc-ca.pem"])
def test_verify_tls_is_not_undone_by_requests_ca_bundle(monkeypatch, verify):
    from sources.http_client import session as http_session

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    session = http_session(command("x", ["true"]), verify=verify)
    assert (
        session.merge_environment_settings("https://bmc", {}, None, None, None)["verify"] == verify
    )
    default = http_session(command("x", ["true"]))
    assert (
        default.merge_environment_settings("https://bmc", {}, None, None, None)["verify"]
        == "/etc/ssl/certs/ca-certificates.crt"
    )
