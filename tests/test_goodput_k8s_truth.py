"""Measured goodput of Kubernetes training chains against the simulator's truth: every attempt
seen with its true start and end (restarts exist only as events and pod states), chain-hours
exact, goodput within the bound the unknown restart time allows."""

import json
from datetime import datetime

import polars as pl
import pytest

from analysis.assumptions import RESTART_S
from analysis.attribution import candidate_attempts
from analysis.goodput_measured import measure
from analysis.headline import gpu_hours
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulate
from tests.conftest import SAMPLE_FLEET
from warehouse.store import Warehouse


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """(truth, job_attempts of the fleet's Kubernetes files ingested into a warehouse)."""
    root = SAMPLE_FLEET
    if not (root / "ground_truth.json").exists():
        root = tmp_path_factory.mktemp("fleet")
        simulate(root, llama3_cause_mix(), nodes=16, gpus_per_node=8, days=30, seed=3,
                 fault_scale=60.0, scrape_interval_s=0, k8s_nodes=4)  # fmt: skip
    wh = Warehouse(tmp_path_factory.mktemp("home"))
    reports = ingest_paths(wh, [root / "k8s"])
    assert all(r.rows_quarantined == 0 for r in reports)
    truth = json.loads((root / "ground_truth.json").read_text())
    chains = [c for c in truth["chains"] if c["scheduler"] == "k8s"]
    assert sum(len(c["attempts"]) > 1 for c in chains) >= 3  # restarts to find
    return chains, wh.read("job_attempts")


def _t(s):
    return datetime.fromisoformat(s) if s else None


def test_every_kubernetes_attempt_is_seen_with_its_true_start_and_end(fleet):
    chains, attempts = fleet
    assert attempts.height == sum(len(c["attempts"]) for c in chains)
    for c in chains:
        rows = attempts.filter(pl.col("job_id") == c["job_id"]).sort("attempt")
        # the files carry whole seconds, rounded as the truth is: equal to the second
        assert rows["start_time"].to_list() == [_t(a["start"]) for a in c["attempts"]], c["job_id"]
        assert rows["end_time"].to_list() == [_t(a["end"]) for a in c["attempts"]], c["job_id"]
        interrupted = [a["state"] not in ("COMPLETED", "RUNNING") for a in c["attempts"]]
        assert [s not in ("COMPLETED", "RUNNING") for s in rows["state"]] == interrupted


def test_chain_hours_and_goodput_equal_the_truth(fleet):
    """Given the chain's true checkpoint interval and free saves (the simulator's), what is left
    unknown is how long each restore took (the simulator draws 2-5 min for a first start, 5-15
    min for a restart; measured goodput assumes 0 and ``RESTART_S``): each attempt's split can
    be off by that difference, plus at most one interval of work kept or lost when it moves a
    checkpoint across the attempt's end. That is the per-chain bound; summed over the fleet the
    differences cancel to within 0.5 points. Only the Kubernetes files are read (no telemetry or
    step log shows a GPU running slow), so the truth's slow seconds count as productive here."""
    chains, attempts = fleet
    num = den = true_num = 0.0
    for c in chains:
        if not c["wall_s"]:
            continue  # still in its first attempt: nothing ended to measure
        rows = attempts.filter(pl.col("job_id") == c["job_id"])
        g = measure(rows, c["ckpt_interval_s"], 0.0, RESTART_S).row(0, named=True)
        assert g["wall_hours"] * 3600 == pytest.approx(c["wall_s"], abs=len(c["attempts"]))
        ended = [a for a in c["attempts"] if a["end"]]
        off = sum(abs(a["overhead_s"] - (RESTART_S if i else 0)) for i, a in enumerate(ended))
        off += c["ckpt_interval_s"] * sum(a["state"] != "COMPLETED" for a in ended)
        kept = c["productive_s"] + c["slow_s"]
        assert abs(g["goodput"] - kept / c["wall_s"]) <= off / c["wall_s"] + 1e-6, c["job_id"]
        num += g["n_gpus"] * g["productive_hours"]
        den += g["n_gpus"] * g["wall_hours"]
        true_num += g["n_gpus"] * kept / 3600
    assert abs(num / den - true_num / den) < 0.005


def test_restarts_known_only_from_events_carry_their_gangs_gpus(fleet):
    """A restart seen only in events has no GPU count; interruptions and GPU-hours take its
    chain's, so every restart's lost work and the fleet's GPU-hours are counted whole."""
    chains, attempts = fleet
    assert attempts.filter(pl.col("state") != "COMPLETED")["n_gpus"].null_count() > 0  # as read
    interrupted = candidate_attempts(attempts)
    want = {(c["job_id"], i + 1): a["n_gpus"] for c in chains for i, a in enumerate(c["attempts"])
            if a["state"] not in ("COMPLETED", "RUNNING")}  # fmt: skip
    assert dict(zip(zip(interrupted["job_id"], interrupted["attempt"], strict=True),
                    interrupted["n_gpus"], strict=True)) == want  # fmt: skip
    true_gpu_h = sum(
        a["n_gpus"] * (_t(a["end"]) - _t(a["start"])).total_seconds() / 3600
        for c in chains for a in c["attempts"] if a["end"]
    )  # fmt: skip
    assert gpu_hours(attempts) == pytest.approx(true_gpu_h, rel=1e-12)
