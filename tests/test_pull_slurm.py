"""The Slurm source against a real cluster (tests/servers/slurm.py): a scripted job mix (COMPLETED,
FAILED with exit 3, TIMEOUT, a two-node GPU job ended by setting gpu004 down as NODE_FAIL and
requeued) pulled through sources.pull, compared with what sacct itself prints; the node event and
its attribution; pulling twice; a failing command, an answer cut short and a stopped slurmdbd;
job names that hold a line break, a whole forged record and '|'.

Every test of the live cluster is in this one file (one cluster per test module and xdist worker).
The TIMEOUT job needs a minute past its start plus up to 30 s (Slurm time limits are whole
minutes, checked every 30 s): the mix is submitted first, and the tests that do not need it ended
run while it ticks.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.attribution import build_interruptions
from analysis.hw_evidence import read_hw_evidence
from ingest.hostlist import expand
from sources import base
from sources import kinds
from sources import slurm
from sources.base import SourceError
from sources.base import Window
from sources.base import fetched
from sources.base import source_config
from sources.pull import pull
from tests.servers.slurm import SlurmCluster
from tests.servers.slurm import free_ports
from tests.servers.slurm import poll
from tests.servers.slurm import slurm_cluster  # noqa: F401 (fixture)
from warehouse.checks import pull_conservation
from warehouse.store import Warehouse

XID_REASON = "Xid 79 GPU has fallen off the bus"
MIX_DEADLINE_S = 240.0


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def _second_over() -> datetime:
    """The next whole second, returned once it has come. A pull stops at its clock (sacct's
    -E is the last whole second before it): a job that ended in this second is in a pull up to
    the next one only when this one is over, which a quick test can beat."""
    end = _now() + timedelta(seconds=1)
    while _now() < end:
        time.sleep(0.1)
    return end


@dataclass
class JobMix:
    cluster: SlurmCluster
    since: datetime  # before every submit
    ids: dict[str, str]  # name -> job id

    def ended(self) -> datetime:
        """Wait until slurmdbd holds every attempt as ended; a time after the last end."""
        want = len(self.ids) + 1  # the requeued job has two attempts

        def done():
            out = self.cluster.run(*_sacct_text(self.ids.values()), check=False)
            rows = out.stdout.splitlines()[1:]
            return len(rows) == want and all(r.split("|")[8] not in ("", "Unknown") for r in rows)

        poll("job mix ended in slurmdbd", done, deadline_s=MIX_DEADLINE_S, every=1.0)
        return _second_over()


def _sacct_text(ids) -> list[str]:
    return ["env", "TZ=UTC", "sacct", "--parsable2", "--allocations", "--duplicates",
            f"--format={','.join(slurm.SACCT_FIELDS)}", f"--jobs={','.join(ids)}"]  # fmt: skip


@pytest.fixture(scope="module")
def mix(slurm_cluster: SlurmCluster) -> JobMix:  # noqa: F811
    c = slurm_cluster
    since = _now() - timedelta(seconds=1)
    ids = {
        "hang": c.sbatch(
            "-J", "hang", "-t", "1", "--gres=gpu:1", "-w", "gpu001", "--wrap", "sleep 300"
        ),
        "ok": c.sbatch("-J", "ok", "--gres=gpu:2", "--wrap", "true"),
        "bad": c.sbatch("-J", "bad", "--gres=gpu:1", "--wrap", "exit 3"),
        # first run: sleeps on gpu[003-004] until gpu004 goes down; the requeued run ends at once
        "big": c.sbatch(
            "-J",
            "big",
            "-N",
            "2",
            "-w",
            "gpu003,gpu004",
            "--gres=gpu:8",
            "--requeue",
            "--wrap",
            'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 300; fi',
        ),
    }
    poll("big job running", lambda: c.job_state(ids["big"]) == "RUNNING", deadline_s=60)
    c.run("scontrol", "update", "nodename=gpu004", "state=down", f"reason={XID_REASON}")
    c.run(
        "scontrol", "update", f"jobid={ids['big']}", "nodelist="
    )  # the requeued run may go elsewhere
    return JobMix(c, since, ids)


def _names(doc) -> set[str]:
    """The job names of a sacct text document, whose delimiter (a random one) its header says."""
    head = doc.data.split(b"\n", 1)[0].decode()
    delim = head.removeprefix("JobID").split("Cluster")[0]
    assert len(delim) == slurm.DELIMITER_LEN and set(delim) <= set(slurm.DELIMITER_CHARS)
    return {
        r.split(delim)[slurm.SACCT_FIELDS.index("JobName")]
        for r in doc.data.decode().splitlines()[1:]
    }


def _wrong_slurmdbd(c: SlurmCluster, tmp_path) -> list[str]:
    """A command prefix whose slurm.conf names a port no slurmdbd listens on."""
    conf = tmp_path / "slurm.conf"
    port = c.ports["slurmdbd"]
    conf.write_text(
        c.conf.read_text().replace(
            f"AccountingStoragePort={port}", f"AccountingStoragePort={free_ports(1)[0]}"
        )
    )
    return ["env", f"SLURM_CONF={conf}"]


def _source(c: SlurmCluster, **options):
    entry = {"name": "lab", "kind": "slurm", "cluster": "lab", "timeout_s": 60, "retries": 1,
             "command_prefix": ["env", f"SLURM_CONF={c.conf}"], **options}  # fmt: skip
    return source_config(entry, kinds())


# -- while the mix runs ---------------------------------------------------------------------


def test_plan_is_the_commands_fetch_runs(mix):
    src = _source(mix.cluster, mode="parsable", clusters=["lab", "other"])
    lines = slurm.plan(src, Window(datetime(2026, 1, 1), datetime(2026, 1, 1, 12)))
    assert len(lines) == 8  # two 6 h chunks: the cluster check, two sacct and one sacctmgr each
    conf = f"env SLURM_CONF={mix.cluster.conf} "
    states = (
        "BOOT_FAIL,CANCELLED,COMPLETED,DEADLINE,FAILED,NODE_FAIL,OUT_OF_MEMORY,PREEMPTED,"
        "REQUEUED,REVOKED,TIMEOUT"
    )
    assert lines[:4] == [
        conf + "sacctmgr --noheader --parsable2 show cluster format=Cluster",
        conf + "env TZ=UTC sacct --parsable2 --noheader --allocations --format=JobID --duplicates "
        "-M lab,other "
        f"--state={states} --starttime=2026-01-01T00:00:00 --endtime=2026-01-01T05:59:59",
        conf
        + "env TZ=UTC sacct --parsable2 '--delimiter=<random per pull>' --allocations --format="
        + ",".join(slurm.SACCT_FIELDS)
        + f" --duplicates -M lab,other --state={states} --endtime=2026-01-01T05:59:59 "
        "'--jobs=<JobIDs it prints>'",
        conf + "env TZ=UTC sacctmgr --parsable2 show event event=node clusters=lab,other "
        "start=2026-01-01T00:00:00 end=2026-01-01T05:59:59 "
        "format=Cluster,NodeName,Start,End,State,User,Reason",
    ]
    assert lines[4] == lines[0] and "--starttime=2026-01-01T06:00:00" in lines[5]
    auto = slurm.plan(_source(mix.cluster), Window(datetime(2026, 1, 1), datetime(2026, 1, 1, 1)))
    assert auto[1].endswith("sacct --version") and auto[2].startswith("[Slurm >= 23.02] ")
    assert "--json" in auto[2] and "--allocations --format=JobID," in auto[3]
    assert "--allclusters" in auto[0] and "all_clusters" in auto[4]


def test_missing_command_and_failing_command_are_one_line_errors(mix, tmp_path):
    w = Window(mix.since, mix.since + timedelta(minutes=1))
    src = _source(mix.cluster, command_prefix=["/nonexistent/ssh", "login1"])
    with pytest.raises(SourceError, match=r"^lab: /nonexistent/ssh: command not found$"):
        list(fetched(slurm, src, w))
    prefix = _wrong_slurmdbd(mix.cluster, tmp_path)
    src = _source(mix.cluster, command_prefix=prefix, mode="parsable")
    t0 = time.monotonic()
    with pytest.raises(SourceError) as err:
        list(fetched(slurm, src, w))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(
        f"lab: {prefix[0]} {prefix[1]} env TZ=UTC sacct ... exited 1: sacct: error:"
    )
    assert "Connection refused" in msg
    assert time.monotonic() - t0 >= base.BACKOFF_S  # retried once, after the backoff
    src = _source(mix.cluster, command_prefix=["env", "PATH=/nonexistent"])
    with pytest.raises(
        SourceError,
        match=(
            r"^lab: env PATH=/nonexistent env TZ=UTC sacct \.\.\. exited 127: env: "
            r".*No such file"
        ),
    ):
        list(fetched(slurm, src, w))


def test_clusters_slurmdbd_does_not_know_are_an_error_not_an_empty_pull(mix):
    w = Window(mix.since - timedelta(hours=1), mix.since)
    with pytest.raises(
        SourceError, match=r"^lab: slurmdbd knows no cluster typo \(it knows t\w+\)$"
    ):
        list(fetched(slurm, _source(mix.cluster, clusters=[mix.cluster.name, "typo"]), w))
    ok_ended = ["sacct", "-n", "-X", "-s", "CD", "-E", "now", "-j", mix.ids["ok"]]
    poll("ok job in slurmdbd", lambda: mix.cluster.run(*ok_ended).stdout.strip(), deadline_s=60)
    w = Window(mix.since, _now() + timedelta(seconds=1))
    docs = list(fetched(slurm, _source(mix.cluster, clusters=[mix.cluster.name]), w))
    assert [d.format for d in docs] == ["sacct", "sacctmgr-events"] and "ok" in _names(docs[0])


def test_a_command_that_hangs_is_cut_at_the_timeout(mix):
    w = Window(mix.since, mix.since + timedelta(minutes=1))
    hang = _source(
        mix.cluster, command_prefix=["sh", "-c", "sleep 30", "sh"], timeout_s=0.5, retries=0
    )
    t0 = time.monotonic()
    with pytest.raises(
        SourceError,
        match=r"^lab: sh -c 'sleep 30' sh env TZ=UTC sacct \.\.\. gave no answer within 0\.5 s$",
    ):
        list(fetched(slurm, hang, w))
    assert time.monotonic() - t0 < 10


def test_release_of_sacct_version():
    assert (
        slurm.release("slurm-wlm 22.05.8\n")
        == (22, 5)
        < slurm.JSON_FROM
        <= slurm.release("slurm 23.02.7")
    )
    with pytest.raises(ValueError, match="printed no release"):
        slurm.release("sacct: error: no config")


def test_a_json_answer_is_taken_whole_without_error_or_not_at_all():
    src = source_config({"name": "lab", "kind": "slurm"}, kinds())
    assert slurm.whole_json(src, b'{"jobs": [], "errors": []}') == b'{"jobs": [], "errors": []}'
    for answer, why in (
        (b'{"jobs": [{"job_id": 1', "not a whole sacct JSON document (invalid JSON at line 1"),
        (b'{"meta": {}}', "not a whole sacct JSON document (sacct JSON without a 'jobs' list)"),
        (b'{"jobs": [], "errors": [{"description": "Unable to connect"}]}',
         "with an error: Unable to connect"),
    ):  # fmt: skip
        with pytest.raises(
            SourceError, match=rf"^lab: sacct --json answered \d+ bytes.? {re.escape(why)}"
        ):
            slurm.whole_json(src, answer)


def test_a_bad_command_prefix_fails_its_window_and_the_fixed_source_catches_up(mix, tmp_path):
    wh = Warehouse(tmp_path / "home")
    since = mix.since - timedelta(hours=1)
    bad = _source(mix.cluster, command_prefix=_wrong_slurmdbd(mix.cluster, tmp_path), retries=0)
    [r] = pull(wh, [bad], since=since, until=since + timedelta(minutes=30))
    assert (r.status, r.target) == ("failed", None) and "exited 1: sacct:" in r.error
    [r] = pull(wh, [_source(mix.cluster)], until=since + timedelta(minutes=30))  # from the cursor
    assert (r.status, r.window.start, r.records) == ("ok", since, 0)


# -- the ended mix --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pulled(mix, tmp_path_factory):
    """The mix pulled once in parsable mode (what auto picks on 22.05) into a fresh warehouse."""
    until = mix.ended()
    wh = Warehouse(tmp_path_factory.mktemp("pull") / "home")
    reports = pull(wh, [_source(mix.cluster)], since=mix.since, until=until)
    return wh, reports, until


def _sacct_rows(mix: JobMix) -> list[dict]:
    out = mix.cluster.run(*_sacct_text(mix.ids.values()))
    lines = out.stdout.splitlines()
    fields = lines[0].split("|")
    return [dict(zip(fields, ln.split("|"), strict=True)) for ln in lines[1:]]


def _gpus(tres: str) -> int:
    return sum(int(kv.split("=")[1]) for kv in tres.split(",") if kv.startswith("gres/gpu="))


def test_pulled_attempts_are_what_sacct_shows(mix, pulled):
    wh, reports, _ = pulled
    assert [r.status for r in reports] == ["ok"]
    got = wh.read("job_attempts").sort("job_id", "attempt")

    def t(s):
        return datetime.fromisoformat(s)

    want = sorted(
        (
            r["JobID"],
            r["State"],
            r["ExitCode"],
            expand(r["NodeList"]),
            _gpus(r["AllocTRES"]),
            int(r["NNodes"]),
            t(r["Start"]),
            t(r["End"]),
        )
        for r in _sacct_rows(mix)
    )
    have = sorted(
        (
            r["job_id"],
            r["state"],
            f"{r['exit_code']}:{r['signal']}",
            r["nodes"],
            r["n_gpus"],
            r["n_nodes"],
            r["start_time"],
            r["end_time"],
        )
        for r in got.iter_rows(named=True)
    )
    assert have == want
    by_name = {r["name"]: r for r in got.filter(pl.col("attempt") == 1).iter_rows(named=True)}
    assert {n: r["state"] for n, r in by_name.items()} == {
        "hang": "TIMEOUT", "ok": "COMPLETED", "bad": "FAILED", "big": "NODE_FAIL"
    }  # fmt: skip
    assert by_name["bad"]["exit_code"] == 3 and by_name["ok"]["n_gpus"] == 2
    big = got.filter(pl.col("job_id") == mix.ids["big"]).sort("attempt")
    assert big["state"].to_list() == ["NODE_FAIL", "COMPLETED"] and big["attempt"].to_list() == [
        1,
        2,
    ]
    assert big["nodes"][0].to_list() == ["gpu003", "gpu004"] and big["n_gpus"].to_list() == [16, 16]
    assert "gpu004" not in big["nodes"][1].to_list()
    # the source's cluster is every job's; the name sacct gave is kept beside it
    assert set(got["cluster"]) == {"lab"} and set(got["reported_cluster"]) == {mix.cluster.name}


def test_node_event_is_stored_and_the_node_fail_is_attributed_to_it(mix, pulled):
    wh, _, _ = pulled
    ne = wh.read("node_events")
    down = ne.filter((pl.col("host") == "gpu004") & (pl.col("event") == "down"))
    assert down["reason"].to_list() == [XID_REASON] and down["source"].to_list() == ["sacctmgr"]
    attempts = wh.read("job_attempts")
    inter = build_interruptions(attempts, ne, read_hw_evidence(wh))
    node_fail = inter.filter(pl.col("job_id") == mix.ids["big"]).row(0, named=True)
    assert node_fail["cause_event"] == f"node_events:gpu004@{down['time'][0]:%Y-%m-%dT%H:%M:%S}"
    assert (node_fail["cause_class"], node_fail["failure_domain"], node_fail["method"]) == (
        "gpu", "infrastructure", "node_event"
    )  # fmt: skip
    bad = inter.filter(pl.col("job_id") == mix.ids["bad"]).row(0, named=True)
    assert (bad["failure_domain"], bad["method"]) == ("workload", "exit_code")


def test_pulling_the_same_window_again_adds_nothing(mix, pulled):
    wh, first, until = pulled
    before = {t: wh.read(t).height for t in ("job_attempts", "node_events")}
    [again] = pull(wh, [_source(mix.cluster)], since=mix.since, until=until)
    assert again.status == "ok" and again.records == first[0].records > 0
    assert (again.rows_ok, again.rows_duplicate) == (0, again.records)
    assert {t: wh.read(t).height for t in before} == before
    assert wh.read("job_attempts")["source_file"].str.starts_with("pull://lab/sacct/").all()
    check = pull_conservation(wh)
    assert check.passed, check.metadata


def test_a_requeued_job_split_across_windows_keeps_its_attempt_numbers(mix, pulled, tmp_path):
    _, _, until = pulled
    node_fail = next(
        r for r in _sacct_rows(mix) if r["JobName"] == "big" and r["State"] == "NODE_FAIL"
    )
    cut = datetime.fromisoformat(node_fail["End"]) + timedelta(seconds=1)  # the rerun ends later
    wh, src = Warehouse(tmp_path / "home"), _source(mix.cluster)
    [a] = pull(wh, [src], since=mix.since, until=cut)
    [b] = pull(wh, [src], since=cut, until=until)
    assert a.status == b.status == "ok" and b.rows_duplicate >= 1  # b re-reads the first run
    big = wh.read("job_attempts").filter(pl.col("job_id") == mix.ids["big"]).sort("attempt")
    assert big.select("attempt", "state").rows() == [(1, "NODE_FAIL"), (2, "COMPLETED")]
    [whole] = pull(wh, [src], since=mix.since, until=until)  # every run has its number already
    assert (whole.rows_ok, whole.rows_duplicate) == (0, whole.records)
    check = pull_conservation(wh)
    assert check.passed, check.metadata


def test_json_mode_gives_the_same_attempts_except_the_lost_exit_code(mix, pulled, tmp_path):
    text_wh, _, until = pulled
    wh = Warehouse(tmp_path / "home")
    [r] = pull(wh, [_source(mix.cluster, mode="json")], since=mix.since, until=until)
    assert r.status == "ok"
    cols = ["job_id", "attempt", "state", "nodes", "n_gpus", "n_nodes", "start_time", "end_time"]
    assert (
        wh.read("job_attempts")
        .select(cols)
        .sort(cols[:2])
        .equals(text_wh.read("job_attempts").select(cols).sort(cols[:2]))
    )
    bad = wh.read("job_attempts").filter(pl.col("job_id") == mix.ids["bad"])
    assert bad["exit_code"].to_list() == [None]  # 22.05's JSON prints 0 for it


def test_a_cut_json_answer_fails_its_window_and_the_next_pull_reads_it(mix, pulled, tmp_path):
    """sacct --json cut after 300 bytes, exit status 0 (a pipe through head): the window fails
    with the reason and nothing is stored or quarantined; the next pull reads it whole."""
    _, _, until = pulled
    wh, conf = Warehouse(tmp_path / "home"), ["env", f"SLURM_CONF={mix.cluster.conf}"]
    prefix = ["sh", "-c", '"$@" | head -c 300', "sh", *conf]
    cut = _source(mix.cluster, mode="json", events=False, retries=0, command_prefix=prefix)
    [r] = pull(wh, [cut], since=mix.since, until=until)
    assert r.status == "failed" and "\n" not in r.error
    assert r.error.startswith(
        "sacct --json answered 300 bytes, not a whole sacct JSON document (invalid JSON at line "
    )
    assert r.error.endswith("): cut short?")
    assert wh.read("job_attempts").height == wh.read("quarantine").height == 0
    [r] = pull(wh, [_source(mix.cluster, mode="json", events=False)], until=until)
    assert (r.status, r.window.start) == ("ok", mix.since)  # the failed window, again
    assert wh.read("job_attempts").height == len(mix.ids) + 1


def test_window_selects_attempts_by_their_end(mix, pulled):
    _, _, until = pulled
    src = _source(mix.cluster)
    hang_end = next(r for r in _sacct_rows(mix) if r["JobName"] == "hang")["End"]
    end = datetime.fromisoformat(hang_end)
    before, after = (
        _names(docs[0])
        for docs in (
            list(fetched(slurm, src, w)) for w in (Window(mix.since, end), Window(end, until))
        )
    )
    assert "hang" not in before and "hang" in after  # -E is the window's end less a second
    assert "ok" in before and "ok" not in after


def test_a_job_name_cannot_forge_a_record_or_lose_its_job(mix, pulled, tmp_path):
    """A name holding a line break and a whole record in sacct's default layout (another user's
    32-GPU NODE_FAIL), and a name holding '|': pulled, the warehouse holds the two real jobs,
    with their names, and nothing else. (Before the slurmdbd restart of the next test: jobs
    submitted after it were seen in slurmdbd without their names, as ``allocation``.)"""
    c, until = mix.cluster, pulled[2]
    since = max(until, _now()) + timedelta(seconds=1)
    t = since.strftime("%Y-%m-%dT%H:%M:%S")
    fields = {"JobID": "999", "Cluster": c.name, "Partition": "gpu", "Account": "root",
              "User": "mallory", "JobName": "forged", "Submit": t, "Start": t, "End": t,
              "Elapsed": "00:00:00", "Timelimit": "UNLIMITED", "State": "NODE_FAIL",
              "ExitCode": "0:0", "NNodes": "4", "AllocCPUS": "4",
              "AllocTRES": "billing=4,cpu=4,gres/gpu=32,node=4",
              "ReqTRES": "billing=4,cpu=4,gres/gpu=32,node=4", "Reason": "None",
              "NodeList": "gpu[001-004]"}  # fmt: skip
    forged = "|".join(fields[f] for f in slurm.SACCT_FIELDS)
    names = {"x\n" + forged + "\ny", "a|b"}
    while _now() < since:
        time.sleep(0.2)
    # held until slurmdbd holds their names: a job that ends before slurmdbd stored its start
    # (seen on this loaded machine) is recorded from its end, named "allocation"
    ids = {c.sbatch("-H", "-J", name, "--gres=gpu:1", "--wrap", "true"): name for name in names}

    def sacct_json(*args) -> dict:
        out = json.loads(c.run("sacct", "--json", "-j", ",".join(ids), *args).stdout)
        return {str(j["job_id"]): j for j in out["jobs"]}

    poll("named jobs in slurmdbd", lambda: {i: j["name"] for i, j in sacct_json().items()} == ids,
         deadline_s=60)  # fmt: skip
    c.run("scontrol", "release", ",".join(ids))
    ended = ("-s", "CD", "-E", "now")
    poll("named jobs ended", lambda: len(sacct_json(*ended)) == 2, deadline_s=60)
    end = _second_over()
    for mode in ("parsable", "json"):
        wh = Warehouse(tmp_path / mode)
        [r] = pull(wh, [_source(c, mode=mode, events=False)], since=since, until=end)
        got = wh.read("job_attempts")
        assert r.status == "ok" and (r.records, r.rows_quarantined) == (2, 0), mode
        assert dict(zip(got["job_id"], got["name"])) == ids, mode
        assert got["n_gpus"].to_list() == [1, 1] and set(got["user"]) == {"root"}, mode


def test_stopped_slurmdbd_is_a_failed_row_and_the_next_pull_completes(mix, pulled, tmp_path):
    _, _, until = pulled
    wh = Warehouse(tmp_path / "home")
    src = _source(mix.cluster, retries=0)
    mix.cluster.stop("slurmdbd")
    try:
        [r] = pull(wh, [src], since=mix.since, until=until)
    finally:
        mix.cluster.start_slurmdbd()
    assert r.status == "failed" and "\n" not in r.error
    assert "sacct ... exited 1: sacct: error:" in r.error and "Connection refused" in r.error
    [r] = pull(wh, [src], until=until)
    assert r.status == "ok" and r.window.start == mix.since and r.rows_ok > 0
    assert wh.read("job_attempts").height == len(mix.ids) + 1
