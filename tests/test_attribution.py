"""Attribution rules on hand-built frames: precedence, window edges, Xid chains, workload vs
infrastructure, planned interruptions, lost work."""

from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.attribution import build_interruptions
from analysis.attribution import interruption_mix
from analysis.attribution import refresh_interruptions
from analysis.hw_evidence import read_hw_evidence
from analysis.lifetime_failures import failure_events
from analysis.repairable import failure_evidence
from warehouse.schemas import TABLES
from warehouse.schemas import conform

T0 = datetime(2026, 1, 10, 12, 0, 0)


def attempts(*rows) -> pl.DataFrame:
    base = {
        "cluster": "c",
        "scheduler": "slurm",
        "attempt": 1,
        "n_gpus": 8,
        "exit_code": 0,
        "signal": 0,
    }
    return conform(
        "job_attempts", pl.DataFrame([{**base, **r} for r in rows], infer_schema_length=None)
    )


def job(job_id="1", state="NODE_FAIL", nodes=("n1",), start=-3600 * 2, end=0, **kw) -> dict:
    return {
        "job_id": job_id,
        "state": state,
        "nodes": list(nodes),
        "start_time": T0 + timedelta(seconds=start),
        "end_time": T0 + timedelta(seconds=end),
        **kw,
    }


def hw(*rows) -> pl.DataFrame:
    out = []
    for i, r in enumerate(rows):
        r = dict(r)
        r["time"] = T0 + timedelta(seconds=r.pop("t"))
        out.append(
            {"event_id": f"e{i}", "host": "n1", "source": "kernel", "event_type": "xid", **r}
        )
    if not out:
        return TABLES["hw_events"].empty()
    return conform("hw_events", pl.DataFrame(out, infer_schema_length=None))


def nodes(*rows) -> pl.DataFrame:
    out = []
    for r in rows:
        r = dict(r)
        r["time"] = T0 + timedelta(seconds=r.pop("t"))
        out.append({"host": "n1", "source": "slurmctld", **r})
    if not out:
        return TABLES["node_events"].empty()
    return conform("node_events", pl.DataFrame(out, infer_schema_length=None))


def one(att, ne=None, he=None, **kw) -> dict:
    df = build_interruptions(
        att, ne if ne is not None else nodes(), he if he is not None else hw(), **kw
    )
    assert df.height == 1
    return df.row(0, named=True)


def test_normal_attempts_are_not_interruptions():
    df = build_interruptions(
        attempts(
            job("1", "COMPLETED"), job("2", "RUNNING") | {"end_time": None}, job("3", "NODE_FAIL")
        ),
        nodes(),
        hw(),
    )
    assert df["job_id"].to_list() == ["3"]
    assert df.columns == list(TABLES["interruptions"].columns)


def test_precedence_fatal_gpu_beats_link_sel_and_node_down():
    he = hw(
        {
            "t": -400,
            "component_class": "ib_link",
            "severity": "critical",
            "event_type": "link_down",
        },
        {
            "t": -300,
            "component_class": "psu",
            "severity": "critical",
            "source": "ipmi",
            "event_type": "sel",
        },
        {"t": -100, "component_class": "gpu_memory", "severity": "fatal", "code": "48"},
    )
    ne = nodes({"t": -500, "event": "down", "reason": "Not responding"})
    r = one(attempts(job()), ne, he)
    assert (r["cause_class"], r["cause_event"], r["failure_domain"]) == (
        "gpu_memory",
        "e2",
        "infrastructure",
    )
    assert r["method"] == "hw_event_window" and r["confidence"] == pytest.approx(0.95)
    # without the fatal XID the IB link wins over the PSU SEL entry, which wins over node down
    r = one(attempts(job()), ne, he.filter(pl.col("event_id") != "e2"))
    assert (r["cause_class"], r["cause_event"]) == ("ib_link", "e0")
    r = one(attempts(job()), ne, he.filter(pl.col("event_id") == "e1"))
    assert (r["cause_class"], r["cause_event"], r["cause_host"]) == ("psu", "e1", "n1")


def test_tie_goes_to_the_earliest_event():
    he = hw(
        {"t": -60, "component_class": "gpu", "severity": "fatal"},
        {"t": -200, "component_class": "gpu_memory", "severity": "fatal"},
    )
    assert one(attempts(job()), he=he)["cause_event"] == "e1"


def test_a_tie_in_one_second_names_the_class_whatever_ids_the_paths_give():
    """Two fatal events of other classes in the same second: the cause class is the same
    whichever ids the events carry (ids hash the file's path)."""

    def cause(ids: tuple[str, str]) -> str:
        he = hw(
            {"t": -60, "component_class": "psu", "severity": "fatal", "event_id": ids[0]},
            {"t": -60, "component_class": "cpu", "severity": "fatal", "event_id": ids[1]},
        )
        return one(attempts(job()), he=he)["cause_class"]

    assert cause(("a", "b")) == cause(("b", "a")) == "cpu"


def test_window_edges_inclusive_and_configurable():
    inside = hw(
        {"t": -900, "component_class": "gpu", "severity": "fatal"},
        {"t": 300, "component_class": "nvlink", "severity": "fatal"},
    )
    r = one(attempts(job()), he=inside)
    assert r["cause_class"] == "gpu"  # at exactly end - 15 min: still in the window
    r = one(attempts(job()), he=inside.filter(pl.col("event_id") == "e1"))
    assert r["cause_class"] == "nvlink"  # at exactly end + 5 min
    outside = hw(
        {"t": -901, "component_class": "gpu", "severity": "fatal"},
        {"t": 301, "component_class": "nvlink", "severity": "fatal"},
    )
    r = one(attempts(job()), he=outside)
    assert (r["cause_class"], r["method"], r["failure_domain"]) == (
        "unknown",
        "state",
        "infrastructure",
    )
    r = one(attempts(job()), he=outside, window_before_s=1000)
    assert r["cause_class"] == "gpu"
    r = one(attempts(job()), he=outside, window_after_s=400)
    assert r["cause_class"] == "nvlink"


def test_events_on_other_hosts_do_not_count():
    he = hw({"t": -10, "component_class": "gpu", "severity": "fatal", "host": "n9"})
    assert one(attempts(job(nodes=("n1", "n2"))), he=he)["cause_class"] == "unknown"
    assert one(attempts(job(nodes=("n2", "n9"))), he=he)["cause_host"] == "n9"


def test_xid_chain_follows_caused_by_to_the_initiating_event():
    he = hw(
        {"t": -120, "component_class": "nvlink", "severity": "fatal", "code": "74"},
        {
            "t": -60,
            "component_class": "gpu",
            "severity": "critical",
            "code": "45",
            "caused_by": "e0",
        },
        {
            "t": -59,
            "component_class": "gpu",
            "severity": "critical",
            "code": "45",
            "caused_by": "e1",
        },
    )
    # the initiating event is outside the window; its follow-ups inside point at it
    r = one(attempts(job(end=-120 + 900 + 30)), he=he)
    assert (r["cause_class"], r["cause_event"]) == ("nvlink", "e0")
    # a chain whose root was never ingested stops at the last known event
    r = one(attempts(job()), he=he.filter(pl.col("event_id") != "e0"))
    assert (r["cause_class"], r["cause_event"]) == ("gpu", "e1")


def test_workload_vs_infrastructure():
    oom = attempts(job(state="OUT_OF_MEMORY", exit_code=0, signal=125))
    r = one(oom)
    assert (r["failure_domain"], r["cause_class"], r["method"], r["planned"]) == (
        "workload",
        "software",
        "exit_code",
        False,
    )
    failed = attempts(job(state="FAILED", exit_code=1))
    # a hardware warning or a node event does not override workload evidence ...
    warn = hw({"t": -30, "component_class": "cooling", "severity": "warning", "source": "ipmi"})
    assert one(failed, nodes({"t": -20, "event": "down"}), warn)["failure_domain"] == "workload"
    # ... a fatal XID before the exit does
    fatal = hw({"t": -30, "component_class": "gpu", "severity": "fatal", "code": "79"})
    r = one(failed, he=fatal)
    assert (r["failure_domain"], r["cause_class"]) == ("infrastructure", "gpu")
    # but not one logged after the application had already exited
    late = hw({"t": 200, "component_class": "gpu", "severity": "fatal", "code": "79"})
    assert one(failed, he=late)["failure_domain"] == "workload"
    # an application XID (software class) is workload evidence too
    app = hw({"t": -5, "component_class": "software", "severity": "warning", "code": "13"})
    r = one(attempts(job(state="NODE_FAIL")), he=app)
    assert (r["failure_domain"], r["method"], r["cause_event"]) == (
        "workload",
        "hw_event_window",
        "e0",
    )
    # a FAILED attempt with no exit code (Kubernetes restart) and no evidence is workload
    r = one(attempts(job(state="FAILED", exit_code=None, scheduler="k8s")))
    assert (r["failure_domain"], r["method"]) == ("workload", "state")
    # ... but a node that went NotReady explains it
    r = one(
        attempts(job(state="FAILED", exit_code=None)),
        nodes({"t": 20, "event": "not_ready", "reason": ""}),
    )
    assert (r["failure_domain"], r["cause_class"], r["method"]) == (
        "infrastructure",
        "unknown",
        "node_event",
    )


def test_node_failure_without_hardware_evidence():
    r = one(attempts(job()), nodes({"t": 20, "event": "down", "reason": "NVMe controller down"}))
    assert (r["failure_domain"], r["cause_class"], r["method"]) == (
        "infrastructure",
        "storage",
        "node_event",
    )
    assert r["cause_event"] == "node_events:n1@2026-01-10T12:00:20"
    r = one(attempts(job()), nodes({"t": 20, "event": "not_responding", "reason": None}))
    assert (r["cause_class"], r["confidence"]) == ("unknown", 0.5)
    r = one(attempts(job(state="REQUEUED")))
    assert (r["failure_domain"], r["cause_class"]) == ("unknown", "unknown")


def test_info_events_and_warnings_rank_below_everything_hard():
    he = hw({"t": -10, "component_class": "psu", "severity": "info", "source": "ipmi"})
    assert one(attempts(job()), he=he)["cause_class"] == "unknown"
    he = hw(
        {"t": -10, "component_class": "ib_link", "severity": "warning"},
        {
            "t": -5,
            "component_class": "nvlink",
            "severity": "critical",
            "source": "dcgm_counter",
            "event_type": "counter",
        },
    )
    r = one(attempts(job()), he=he)
    assert (r["cause_class"], r["confidence"]) == ("nvlink", 0.8)
    # a warning still beats a bare node-down event
    r = one(
        attempts(job()),
        nodes({"t": -1, "event": "down", "reason": "GPU health check failed"}),
        he.head(1),
    )
    assert (r["cause_class"], r["method"]) == ("ib_link", "hw_event_window")


def test_planned_interruptions_are_flagged_and_kept():
    att = attempts(
        job("1", "CANCELLED", raw_state="CANCELLED by 1001"),
        job("2", "PREEMPTED"),
        job("3", "TIMEOUT"),
        job("4", "REQUEUED"),
    )
    ne = nodes({"t": -5, "event": "drain", "reason": "maintenance"})
    df = build_interruptions(att, ne, hw()).sort("job_id")
    assert df["planned"].to_list() == [True, True, True, True]
    assert df["failure_domain"].to_list() == ["workload", "workload", "workload", "infrastructure"]
    assert df.row(3, named=True)["cause_class"] == "host_os"
    assert df.row(3, named=True)["cause_event"] == "node_events:n1@2026-01-10T11:59:55"
    # a Kubernetes cordon is an administrative drain as well
    r = one(
        attempts(job(state="FAILED", exit_code=None)),
        nodes({"t": -3, "event": "drain", "reason": "Node n1 status is now: NodeNotSchedulable"}),
    )
    assert (r["planned"], r["method"]) == (True, "node_event")
    # a hang: TIMEOUT with a fatal XID long before the end is unplanned
    he = hw({"t": -5000, "component_class": "gpu", "severity": "fatal"})
    r = one(attempts(job(state="TIMEOUT")), he=he)
    assert (r["planned"], r["cause_class"]) == (False, "gpu")
    # ... but a link flap (critical, not fatal) hours before the time limit is no hang
    flap = hw({"t": -5000, "component_class": "ib_link", "severity": "critical"})
    r = one(attempts(job(state="TIMEOUT")), he=flap)
    assert (r["planned"], r["method"]) == (True, "state")
    # near the end, the ordinary window applies to every severity
    flap = hw({"t": -600, "component_class": "ib_link", "severity": "critical"})
    assert one(attempts(job(state="TIMEOUT")), he=flap)["cause_class"] == "ib_link"
    # a fatal XID during maintenance-requeue wins over the drain
    r = one(
        attempts(job(state="REQUEUED")),
        ne,
        hw({"t": -100, "component_class": "gpu_memory", "severity": "fatal"}),
    )
    assert (r["planned"], r["cause_class"]) == (False, "gpu_memory")


def test_lost_gpu_hours_interval_exact_checkpoints_and_small_jobs():
    att = attempts(
        job(
            "big", start=-(2 * 3600 + 600), n_gpus=64
        ),  # 2h10m -> 10 min since last 30-min checkpoint
        job("small", start=-(2 * 3600 + 600), n_gpus=4),  # below 16 GPUs: everything since start
        job("exact", start=-(2 * 3600 + 600), n_gpus=32),
    )
    cps = pl.DataFrame(
        {
            "job_id": ["exact", "exact", "exact"],
            "time": [
                T0 - timedelta(hours=5),
                T0 - timedelta(seconds=2 * 3600),
                T0 + timedelta(hours=1),
            ],
        }
    )
    df = build_interruptions(att, nodes(), hw(), checkpoints=cps).sort("job_id")
    lost = dict(zip(df["job_id"], df["lost_gpu_hours"]))
    assert lost["big"] == pytest.approx(64 * 600 / 3600)
    assert lost["small"] == pytest.approx(4 * 2.0 + 4 * 600 / 3600)
    assert lost["exact"] == pytest.approx(32 * 2.0)
    df = build_interruptions(att, nodes(), hw(), ckpt_interval_s=3600, no_ckpt_below_gpus=1)
    assert dict(zip(df["job_id"], df["lost_gpu_hours"]))["small"] == pytest.approx(4 * 600 / 3600)


def test_duplicate_attempt_rows_count_once_and_mix_shares():
    att = attempts(
        job("1"),
        job("1"),
        job("2", "FAILED", nodes=("n2",), exit_code=1),
        job("3", "PREEMPTED", nodes=("n2",)),
    )
    he = hw({"t": -10, "component_class": "gpu", "severity": "fatal"})
    df = build_interruptions(att, nodes(), he)
    assert df.height == 3
    mix = interruption_mix(df)
    assert mix.to_dicts() == [
        {"cause_class": "gpu", "count": 1, "share": 0.5},
        {"cause_class": "software", "count": 1, "share": 0.5},
    ]
    assert interruption_mix(df, include_planned=True)["count"].sum() == 3


def test_refresh_writes_the_table(wh):
    with wh.batch("b1") as b:
        b.add(
            {
                "job_attempts": attempts(job()),
                "hw_events": hw({"t": -1, "component_class": "gpu", "severity": "fatal"}),
            }
        )
    refresh_interruptions(wh)
    got = wh.read("interruptions")
    assert got["cause_class"].to_list() == ["gpu"]


def test_failure_analyses_read_hw_events_without_background_counter_rises(wh, demo):
    """``read_hw_evidence`` leaves out exactly the info/warning counter increments that no event
    names as its cause, and every failure analysis answers the same from it as from the table."""
    counter = {"source": "dcgm_counter", "event_type": "counter", "component_class": "nvlink"}
    he = hw(
        {"t": -300, **counter, "severity": "warning"},  # e0: background, left out
        {"t": -200, **counter, "severity": "warning"},  # e1: the root of e2's chain, kept
        {
            "t": -100,
            "component_class": "gpu",
            "severity": "critical",
            "code": "45",
            "caused_by": "e1",
        },
        {"t": -90, **counter, "severity": "critical"},  # e3: evidence (rank 4)
        {"t": -80, **counter, "severity": "info"},  # e4
        {"t": -70, **counter, "severity": None},  # e5
        {"t": -60, "component_class": "ib_link", "severity": "warning"},  # e6: evidence (rank 6)
        {"t": -50, "component_class": "gpu", "severity": "Warning", "event_type": "counter"},  # e7
    )
    with wh.batch("b1") as b:
        b.add({"hw_events": he})
    got = read_hw_evidence(wh)
    assert sorted(got["event_id"]) == ["e1", "e2", "e3", "e6"]
    # without e1, e2 would be its own root: a critical GPU event (rank 3) instead of the counter
    assert (
        one(attempts(job()), he=got)["cause_event"]
        == one(attempts(job()), he=he)["cause_event"]
        == "e3"
    )
    assert one(attempts(job()), he=got.filter(pl.col("event_id") != "e1"))["cause_event"] == "e2"

    demo_wh, _ = demo
    full, ev = demo_wh.read("hw_events"), read_hw_evidence(demo_wh)
    assert 0 < ev.height < full.height
    att, ne = demo_wh.read("job_attempts"), demo_wh.read("node_events")
    assert build_interruptions(att, ne, ev).equals(build_interruptions(att, ne, full))
    it = demo_wh.read("interruptions")
    assert failure_evidence(it, ev).sort(pl.all()).equals(failure_evidence(it, full).sort(pl.all()))
    assert failure_events(ev).sort(pl.all()).equals(failure_events(full).sort(pl.all()))
