"""slurmctld.log: node events, job kills and requeues from a real log and hand-built lines,
local times, and property-based fuzzing (never raises, records = rows + quarantine + duplicates)."""

from datetime import datetime
from functools import partial

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.slurmctld import detect
from ingest.formats.slurmctld import parse
from tests.conftest import FIXTURES
from tests.conftest import parse_rows

LOG = FIXTURES / "slurm" / "aws-parallelcluster_issue5670_slurmctld.log"


_parse = partial(parse_rows, parse, "node_events")  # (rows, quarantine)


def test_real_log_requeue_and_down_with_reason():
    ok, q = _parse(LOG.read_bytes(), cluster="pc")
    assert q.height == 0
    host = "a10g-1x-spot-dy-a10g-1x-spot-cr-0-1"
    assert ok["event"].to_list() == ["job_requeue", "down"]
    assert ok["host"].to_list() == [host, host]
    assert ok["job_id"].to_list() == ["10", None]
    assert ok["source_line"].to_list() == [5, 7]
    assert ok["time"][0] == datetime(2023, 8, 28, 16, 55, 46, 905000)
    # the 'reason set to' line before the DOWN line explains it
    assert ok["reason"][1] == "(Code:LimitedInstanceCapacity)Failure when resuming nodes"
    assert ok["cluster"].unique().to_list() == ["pc"] and ok["source"][0] == "slurmctld"


LINES = """\
[2024-03-10T01:30:00.250] error: Nodes gpu[01-03] not responding, setting DOWN
[2024-03-10T01:31:00] error: Nodes gpu04 not responding
[2024-03-10T01:32:00] Killing JobId=123_4(130) on failed node gpu02
[2024-03-10T01:32:00] requeue job JobId=200 due to failure of node gpu02
[2024-03-10T01:32:00] Requeuing JobId=200
[2024-03-10T01:33:00] update_node: node gpu05 reason set to: GPU ECC DBE (Xid 48)
[2024-03-10T01:33:00] update_node: node gpu05 state set to DRAINING
[2024-03-10T03:30:00] Node gpu04 now responding
[2024-03-10T03:31:00] update_node: node gpu05 state set to IDLE
[2024-03-10T03:32:00] Node gpu06 unexpectedly rebooted boot_time=1710000000 last response=1709999000
[2024-03-10T03:33:00] POWER: power_save: waking nodes gpu07
[2024-03-10T03:34:00] sched: Allocate JobId=300 NodeList=gpu[01-02] #CPUs=8 Partition=p
[2024-03-10T03:35:00+02:00] drain_nodes: node gpu08 state set to DRAIN
[2024-02-30T00:00:00] update_node: node gpu09 state set to DOWN
[2024-03-10T03:36:00] error: Nodes gpu[1-x] not responding
[2024-03-10T03:37:00] error: Nodes gpu10,cpu[1-2] not responding
[2024-03-10T03:38:00] node gpu10 returned to service
"""


def test_event_kinds_arrays_hostlists_local_time_and_quarantine():
    ok, q = _parse(LINES, tz="America/Chicago")
    assert ok["event"].to_list() == [
        "down", "down", "down", "not_responding", "job_killed", "job_requeue", "drain", "resume",
        "resume", "reboot", "drain", "not_responding", "not_responding", "not_responding",
        "resume",
    ]  # fmt: skip
    assert ok["host"].to_list()[-4:] == ["gpu10", "cpu1", "cpu2", "gpu10"]
    assert ok["host"].to_list()[:3] == [
        "gpu01",
        "gpu02",
        "gpu03",
    ]  # a hostlist is one record per host
    assert ok["job_id"].to_list()[4:6] == ["123_4", "200"]  # array task named as sacct names it
    assert ok["reason"][6] == "GPU ECC DBE (Xid 48)"
    # Chicago is UTC-6 before the DST switch at 02:00 local on 2024-03-10, UTC-5 after it
    assert ok["time"][0] == datetime(2024, 3, 10, 7, 30, 0, 250000)
    assert ok["time"][7] == datetime(2024, 3, 10, 8, 30)
    assert ok["time"][10] == datetime(2024, 3, 10, 1, 35)  # explicit offset wins over --tz
    assert sorted(q["line"].to_list()) == [14, 15]
    errors = dict(zip(q["line"], q["error"]))
    assert "unreadable timestamp '2024-02-30T00:00:00'" in errors[14]
    assert "bad range" in errors[15]


def test_a_reason_holds_only_until_the_node_resumes():
    log = (
        "[2026-01-05T10:00:00.000] update_node: node gpu07 reason set to: scheduled maintenance\n"
        "[2026-01-05T10:00:00.000] update_node: node gpu07 state set to DRAINED\n"
        "[2026-01-05T14:00:00.000] update_node: node gpu07 state set to IDLE\n"
        "[2026-01-06T03:12:00.000] update_node: node gpu07 state set to DOWN\n"
    )
    ok, q = _parse(log)
    assert q.height == 0
    rows = ok.select("event", "reason").rows()
    assert rows[0] == ("drain", "scheduled maintenance")
    assert rows[1][0] == "resume"
    # the crash the next day must not inherit the maintenance reason
    assert rows[2][0] == "down" and "maintenance" not in (rows[2][1] or "")


def test_line_offset_from_chunked_reading():
    ok, _ = _parse(LOG.read_bytes(), line_offset=1000)
    assert ok["source_line"].to_list() == [1005, 1007]


def test_detect():
    assert detect(LOG.read_bytes(), "slurmctld.log") >= 80
    assert detect(b"[2024-01-01T00:00:00] hello\n", "x") == 20
    assert detect(b"JobID|State\n1|COMPLETED\n", "x") == 0


REAL = LOG.read_bytes() + LINES.encode()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, len(REAL) - 1), st.integers(1, 30), st.binary(max_size=20))
def test_fuzz_mutated_real_lines(pos, cut, insert):
    _parse(REAL[:pos] + insert + REAL[pos + cut :], tz="Europe/Paris")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(REAL.decode().splitlines()), max_size=12), st.text(max_size=12))
def test_fuzz_shuffled_lines_with_noise(lines, noise):
    _parse("\n".join(line.replace("gpu", noise, 1) for line in lines))


def test_exact_duplicate_lines_are_stored_once_and_counted_as_duplicates(wh, tmp_path):
    from ingest.runner import ingest_paths

    down = "[2025-02-01T10:00:00.123] error: Nodes gpu[01-02] not responding, setting DOWN\n"
    resume = "[2025-02-01T11:00:00.000] Node gpu01 now responding\n"
    p = tmp_path / "slurmctld.log"
    p.write_text(down + down + resume + down)
    (rep,) = ingest_paths(wh, [p], fmt="slurmctld")
    # a record is one host's event: each repeat of the two-node line is two duplicates
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (7, 3, 0, 4)
    ne = wh.read("node_events").sort("source_line", "host")
    assert ne.select("host", "event", "source_line").rows() == [
        ("gpu01", "down", 1),
        ("gpu02", "down", 1),
        ("gpu01", "resume", 3),
    ]
    assert wh.read("quarantine").height == 0


def test_times_outside_the_plausible_window_are_quarantined():
    text = (
        "[1999-12-31T23:59:59] error: Nodes gpu01 not responding, setting DOWN\n"
        "[2025-02-01T10:00:00] error: Nodes gpu02 not responding, setting DOWN\n"
        "[2999-01-01T00:00:00] error: Nodes gpu03 not responding, setting DOWN\n"
    )
    res = parse(text.encode(), ParseContext(not_after=datetime(2026, 1, 1)))
    assert res.tables["node_events"]["host"].to_list() == ["gpu02"]
    assert res.quarantine.select("line", "error").rows() == [
        (1, "time 1999-12-31T23:59:59 is before 2000-01-01T00:00:00 (implausible clock)"),
        (3, "time 2999-01-01T00:00:00 is after 2026-01-01T00:00:00 (clock in the future)"),
    ]


def test_real_log_node_now_responding_among_power_save_chatter():
    ok, q = _parse(
        (FIXTURES / "slurm" / "aws-eda-slurm-cluster_issue267_slurmctld.log").read_bytes(), tz="UTC"
    )
    assert q.height == 0
    assert ok.select("time", "host", "event", "source_line").rows() == [
        (datetime(2024, 10, 22, 12, 31, 9, 580000), "sp-r7a-m-dy-sp-8-gb-1-cores-1", "resume", 7)
    ]


def test_real_log_job_lifecycle_lines_are_not_node_records():
    # submit / allocate / _job_complete WTERMSIG 9 and the reporter's "..." elision: no node event
    data = (FIXTURES / "slurm" / "ArjunaUsers_issue137_slurmctld.log").read_bytes()
    assert detect(data, "slurmctld.log") > 0
    res = parse(data, ParseContext())
    assert res.records == 0 and res.tables == {} and res.quarantine.height == 0
