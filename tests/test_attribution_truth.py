"""Attribution, lifetimes and node failures against the committed fleet's ground_truth.json.

The fleet is ingested once (module fixture) with the real parsers. DCGM scrapes are left out to
keep the test fast: attribution does not need them (counter increments only corroborate kernel
XIDs) and covariates are pinned by the hand-built cases in test_lifetimes.py; the other two
seeds and the full ingest are in ``python -m benchmarks.validate_attribution``.
"""

import json
from datetime import datetime

import polars as pl
import pytest

from analysis.attribution import build_interruptions
from analysis.attribution import interruption_mix
from analysis.lifetimes import build_component_lifetimes
from analysis.repairable import build_node_failures
from analysis.repairable import observation_windows
from benchmarks.validate_attribution import score
from benchmarks.validate_attribution import score_lifetimes
from benchmarks.validate_attribution import truth_interruptions
from tests.conftest import SAMPLE_FLEET
from warehouse.store import Warehouse

pytestmark = pytest.mark.skipif(
    not (SAMPLE_FLEET / "ground_truth.json").exists(), reason="no committed sample fleet"
)
SOURCES = ("slurm", "k8s", "kernel", "ipmi", "redfish", "components")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    from ingest.base import ParseContext
    from ingest.runner import ingest_paths

    truth = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    wh = Warehouse(tmp_path_factory.mktemp("fleet") / "home")
    ingest_paths(
        wh,
        [SAMPLE_FLEET / s for s in SOURCES if (SAMPLE_FLEET / s).exists()],
        ctx=ParseContext(cluster=truth["cluster"]),
    )
    tables = {
        t: wh.read(t)
        for t in ("job_attempts", "node_events", "hw_events", "component_history", "gpu_hourly")
    }
    return truth, tables


@pytest.fixture(scope="module")
def interruptions(fleet):
    _, t = fleet
    return build_interruptions(t["job_attempts"], t["node_events"], t["hw_events"])


def test_attribution_precision_recall_and_mix(fleet, interruptions):
    truth, _ = fleet
    r = score(interruptions, truth_interruptions(truth))
    assert r["n_true_unexpected"] > 50
    assert r["precision"] >= 0.95 and r["recall"] >= 0.95, r
    assert r["infra_precision"] >= 0.95 and r["infra_recall"] >= 0.95, r
    assert r["mix_error"] <= 0.02, r["mix"]
    assert r["planned_found"] >= 0.95 * r["planned_true"]
    mix = interruption_mix(interruptions)
    assert mix["share"].sum() == pytest.approx(1.0)
    assert set(mix["cause_class"]) >= {"gpu", "software"}


def test_every_killed_attempt_is_attributed_to_its_fault(fleet, interruptions):
    truth, _ = fleet
    killed = [
        (a["scheduler"], a["job_id"], a["end_time"], f["component_class"], f["host"])
        for f in truth["faults"]
        for a in f["killed_attempts"]
        if a["end_time"]
    ]
    got = interruptions.filter(pl.col("failure_domain") == "infrastructure").select(
        "scheduler",
        "job_id",
        end=pl.col("end_time").dt.strftime("%Y-%m-%dT%H:%M:%S"),
        cls="cause_class",
        host="cause_host",
    )
    got = {(r[0], r[1], r[2]): (r[3], r[4]) for r in got.iter_rows()}
    slurm = [k for k in killed if k[0] == "slurm"]
    hits = sum(got.get(k[:3]) == (k[3], k[4]) for k in slurm)
    assert hits >= 0.95 * len(slurm)


def test_lifetimes_match_faults_and_censoring(fleet):
    truth, t = fleet
    start, end = datetime.fromisoformat(truth["start"]), datetime.fromisoformat(truth["end"])
    lt = build_component_lifetimes(
        t["component_history"],
        t["gpu_hourly"],
        t["hw_events"],
        as_of=end,
        data_start=start,
        nodes_per_rack=4,
    )
    ch = t["component_history"]
    assert (
        lt.height
        == ch.filter(pl.col("removed_at").is_null() | (pl.col("removed_at") > start)).height
    )
    got = score_lifetimes(lt, truth)  # failed units are exactly the faulted ones
    assert got["missed"] == got["extra"] == 0
    assert got["exact"] >= 0.95 * got["true_failures"]
    # still in service at the end: censored at `end`, left-truncated at `start` when older
    live = lt.join(
        ch.select(unit_id="serial", installed_at="installed_at", removed_at="removed_at"),
        on="unit_id",
    )
    live = live.filter(pl.col("removed_at").is_null())
    assert live.height > 0 and not live["event"].any()
    assert (live["observed_to"] == end).all()

    def hours(a, b):
        return (b - a).dt.total_seconds() / 3600

    assert (
        live["duration"] - hours(live["installed_at"], pl.Series([end] * live.height))
    ).abs().max() < 1e-6
    old = live.filter(pl.col("installed_at") < start)
    assert old.height > 0
    assert (
        old["entry"] - hours(old["installed_at"], pl.Series([start] * old.height))
    ).abs().max() < 1e-6
    assert (lt.filter(pl.col("rack").is_null()).height, lt["rack"].n_unique()) == (
        0,
        truth["nodes"] // 4,
    )


def test_node_failures_cover_fatal_faults(fleet, interruptions):
    truth, t = fleet
    start, end = datetime.fromisoformat(truth["start"]), datetime.fromisoformat(truth["end"])
    hosts = [f"gpu-node-{i + 1:03d}" for i in range(truth["nodes"])]
    nf = build_node_failures(
        interruptions, t["hw_events"], t["node_events"], observation_windows(hosts, start, end)
    )
    fatal = [f for f in truth["faults"] if f["fatal"] and not f["during_repair"]]
    times = {(r["host"], r["time"].strftime("%Y-%m-%dT%H:%M:%S")) for r in nf.iter_rows(named=True)}
    assert sum((f["host"], f["time"]) in times for f in fatal) >= 0.95 * len(fatal)
    assert nf.height <= len([f for f in truth["faults"] if not f["during_repair"]])
