"""Measured goodput: hand-built job chains with hand-computed badput splits (minutes)."""

import json
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from analysis.goodput_measured import BADPUT
from analysis.goodput_measured import measure
from analysis.goodput_measured import refresh_goodput_jobs
from analysis.goodput_measured import summarize
from tests.conftest import SAMPLE_FLEET
from warehouse.schemas import conform

T0 = datetime(2026, 1, 5, 0, 0)
CATS = ("productive_hours", *BADPUT)  # every part a job's wall time splits into


def att(job, n, start_min, end_min, state, gpus=8, scheduler="slurm"):
    return {
        "cluster": "c1",
        "scheduler": scheduler,
        "job_id": job,
        "attempt": n,
        "name": f"train-{job}",
        "user": "alice",
        "state": state,
        "n_gpus": gpus,
        "start_time": None if start_min is None else T0 + timedelta(minutes=start_min),
        "end_time": None if end_min is None else T0 + timedelta(minutes=end_min),
    }


def frame(rows):
    return conform("job_attempts", pl.DataFrame(rows, infer_schema_length=None))


def minutes(row):
    return {c: round(row[c] * 60, 9) for c in ("wall_hours", *CATS)}


CHAINS = frame(
    [
        # A: node failure after 2 h (3 checkpoints of 30+1 min, 27 min lost), 20 min in queue,
        #    restart (5) then 155 min of compute with 5 checkpoints -> completes.
        att("A", 1, 0, 120, "NODE_FAIL"),
        att("A", 2, 140, 300, "COMPLETED"),
        # B: fails at 60 min (1 ckpt, 29 lost); a 3-minute attempt spent wholly restarting;
        #    7 min queue; final attempt fails: its 24-minute tail is "other".
        att("B", 1, 0, 60, "FAILED", gpus=16),
        att("B", 2, 60, 63, "NODE_FAIL", gpus=16),
        att("B", 3, 70, 130, "FAILED", gpus=16),
        # C (k8s): a duplicated attempt and an overlapping restart (trimmed to start at 60).
        att("ns/C", 1, 0, 60, "FAILED", scheduler="k8s"),
        att("ns/C", 1, 0, 60, "FAILED", scheduler="k8s"),
        att("ns/C", 2, 50, 120, "COMPLETED", scheduler="k8s"),
        # D: a completed attempt followed by another run: the gap is "other", not queue.
        att("D", 1, 0, 31, "COMPLETED"),
        att("D", 2, 41, 51, "COMPLETED"),
        # never started: ignored
        att("E", 1, None, None, "PENDING"),
    ]
)

EXPECTED = {
    "A": {
        "wall_hours": 300,
        "productive_hours": 240,
        "slow_hours": 0,
        "lost_work_hours": 27,
        "restart_hours": 5,
        "checkpoint_hours": 8,
        "queue_after_failure_hours": 20,
        "other_hours": 0,
    },
    "B": {
        "wall_hours": 130,
        "productive_hours": 60,
        "slow_hours": 0,
        "lost_work_hours": 29,
        "restart_hours": 8,
        "checkpoint_hours": 2,
        "queue_after_failure_hours": 7,
        "other_hours": 24,
    },
    "ns/C": {
        "wall_hours": 120,
        "productive_hours": 84,
        "slow_hours": 0,
        "lost_work_hours": 29,
        "restart_hours": 5,
        "checkpoint_hours": 2,
        "queue_after_failure_hours": 0,
        "other_hours": 0,
    },
    # D: 30 + 5 productive (second attempt: 5 restart, 5 compute), 1 ckpt, 10 gap -> other
    "D": {
        "wall_hours": 51,
        "productive_hours": 35,
        "slow_hours": 0,
        "lost_work_hours": 0,
        "restart_hours": 5,
        "checkpoint_hours": 1,
        "queue_after_failure_hours": 0,
        "other_hours": 10,
    },
}


def test_hand_built_chains_match_exactly():
    out = measure(CHAINS, ckpt_interval_s=1800, ckpt_cost_s=60, restart_s=300)
    got = {r["job_id"]: r for r in out.iter_rows(named=True)}
    assert set(got) == set(EXPECTED)
    for job, exp in EXPECTED.items():
        assert minutes(got[job]) == {k: float(v) for k, v in exp.items()}, job
    a = got["A"]
    assert (
        a["attempts"] == 2
        and a["final_state"] == "COMPLETED"
        and a["goodput"] == pytest.approx(0.8)
    )
    assert got["ns/C"]["attempts"] == 2  # the duplicate is counted once
    assert got["B"]["final_state"] == "FAILED" and got["B"]["n_gpus"] == 16
    assert got["B"]["gpu_hours"] == pytest.approx(16 * 130 / 60)


def _slow(job: str, start_min, end_min, extra_min: float) -> dict:
    timed = start_min is not None
    return {
        "cluster": "c1",
        "job_id": job,
        "start_time": T0 + timedelta(minutes=start_min) if timed else None,
        "end_time": T0 + timedelta(minutes=end_min) if timed else None,
        "extra_hours": extra_min / 60,
    }


def test_time_lost_running_slow_comes_out_of_the_work_kept():
    """A's first attempt keeps its work up to its third checkpoint (93 min): a slow period over
    80-110 min costs the kept share of its extra time (13 of 30 min), the rest lies in work
    that was lost anyway. D's period without times is spread over its kept work; B cannot lose
    more than it kept."""
    periods = conform(
        "slow_periods",
        pl.DataFrame(
            [
                _slow("A", 10, 40, 6.0),
                _slow("A", 80, 110, 10.0),
                _slow("A", 200, 260, 20.0),
                _slow("D", None, None, 12.0),
                _slow("B", 0, 130, 1000.0),
            ]
        ),
    )
    out = measure(CHAINS, 1800, 60, 300, slow_periods=periods)
    got = {r["job_id"]: minutes(r) for r in out.iter_rows(named=True)}
    assert got["A"]["slow_hours"] == pytest.approx(6 + 10 * 13 / 30 + 20, abs=1e-6)
    assert got["A"]["productive_hours"] == pytest.approx(240 - got["A"]["slow_hours"], abs=1e-6)
    assert got["D"]["slow_hours"] == pytest.approx(12, abs=1e-6)
    assert (got["B"]["slow_hours"], got["B"]["productive_hours"]) == (60, 0)
    assert got["ns/C"]["slow_hours"] == 0
    for job, parts in got.items():
        rest = {k: v for k, v in parts.items() if k not in ("productive_hours", "slow_hours")}
        assert rest == {k: float(v) for k, v in EXPECTED[job].items() if k in rest}, job
        assert sum(parts[c] for c in CATS) == pytest.approx(parts["wall_hours"], abs=1e-6)
    a = out.filter(pl.col("job_id") == "A").row(0, named=True)
    assert a["goodput"] == pytest.approx((240 - got["A"]["slow_hours"]) / 300)


def test_exact_checkpoint_times_replace_the_interval():
    attempts = frame(
        [
            att("X", 1, 0, 100, "FAILED"),
            att("X", 2, 120, 180, "COMPLETED"),
            att("Y", 1, 0, 120, "NODE_FAIL"),
            att("Y", 2, 140, 300, "COMPLETED"),
        ]
    )
    ck = pl.DataFrame(
        {
            "cluster": "c1",
            "scheduler": "slurm",
            "job_id": "X",
            "time": [T0 + timedelta(minutes=m) for m in (25, 50, 80, 160)],
        }
    )
    out = measure(attempts, 1800, 60, 300, checkpoints=ck)
    got = {r["job_id"]: minutes(r) for r in out.iter_rows(named=True)}
    # X: attempt 1 keeps 80 - 3 = 77 min, loses 20; attempt 2: 5 restart, 1 ckpt, 54 productive.
    assert got["X"] == {
        "wall_hours": 180.0,
        "productive_hours": 131.0,
        "slow_hours": 0.0,
        "lost_work_hours": 20.0,
        "restart_hours": 5.0,
        "checkpoint_hours": 4.0,
        "queue_after_failure_hours": 20.0,
        "other_hours": 0.0,
    }
    # Y has no checkpoint rows: the interval rule applies (same as chain A)
    assert got["Y"] == {k: float(v) for k, v in EXPECTED["A"].items()}
    # X's first attempt keeps its work up to its last save (80 min): half of a period over
    # 60-100 min lies in it
    slow = conform("slow_periods", pl.DataFrame([_slow("X", 60, 100, 8.0)]))
    again = measure(attempts, 1800, 60, 300, checkpoints=ck, slow_periods=slow)
    x = minutes(again.filter(pl.col("job_id") == "X").row(0, named=True))
    assert (x["slow_hours"], x["productive_hours"]) == (4.0, 127.0)


def test_restart_cost_and_interval_are_parameters():
    out = measure(
        frame([att("A", 1, 0, 120, "NODE_FAIL"), att("A", 2, 140, 300, "COMPLETED")]),
        ckpt_interval_s=3600,
        ckpt_cost_s=0,
        restart_s=600,
    )
    m = minutes(out.row(0, named=True))
    # attempt 1: 2 checkpoints at 60 and 120 -> nothing lost; attempt 2: 10 restart, 150 work
    assert m["lost_work_hours"] == 0 and m["restart_hours"] == 10 and m["productive_hours"] == 270


def test_chain_with_a_running_attempt_counts_the_failed_tail_as_lost():
    rows = [att("R", 1, 0, 60, "NODE_FAIL"), att("R", 2, 70, None, "RUNNING")]
    got = measure(frame(rows), 1800, 60, 300).row(0, named=True)
    assert got["final_state"] == "RUNNING" and got["attempts"] == 1
    assert minutes(got)["lost_work_hours"] == 29 and minutes(got)["other_hours"] == 0


def test_summary_weights_by_jobs_and_gpu_hours():
    out = measure(CHAINS.filter(pl.col("job_id").is_in(["A", "B"])), 1800, 60, 300)
    s = {r["weighting"]: r for r in summarize(out).iter_rows(named=True)}
    assert s["jobs"]["goodput"] == pytest.approx((0.8 + 60 / 130) / 2)
    assert s["gpu_hours"]["goodput"] == pytest.approx((8 * 240 + 16 * 60) / (8 * 300 + 16 * 130))
    assert s["gpu_hours"]["lost_work"] == pytest.approx((8 * 27 + 16 * 29) / (8 * 300 + 16 * 130))
    assert s["jobs"]["jobs"] == 2


def test_refresh_goodput_jobs_roundtrip(wh):
    with wh.batch("t1") as b:
        b.add({"job_attempts": CHAINS})
    written = refresh_goodput_jobs(wh)
    back = wh.read("goodput_jobs")
    assert back.height == written.height == 4
    assert sorted(back["job_id"].to_list()) == ["A", "B", "D", "ns/C"]


states = st.sampled_from(["COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED", "TIMEOUT"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-30, 120), st.integers(0, 400), states), min_size=1, max_size=6),
    st.integers(0, 7200),
    st.integers(0, 600),
    st.integers(0, 900),
)
def test_books_close_exactly(spans, interval_s, cost_s, restart_s):
    rows, t = [], 0
    for i, (gap, length, state) in enumerate(spans):
        start = t + gap  # negative gaps make overlapping attempts
        rows.append(att("J", i + 1, start, start + length, state))
        t = start + length
    out = measure(frame(rows), interval_s, cost_s, restart_s).row(0, named=True)
    parts = [out[c] for c in CATS]
    assert all(p >= -1e-12 for p in parts)
    assert sum(parts) == pytest.approx(out["wall_hours"], abs=1e-9)
    assert out["wall_hours"] == pytest.approx(
        (max(r["end_time"] for r in rows) - min(r["start_time"] for r in rows)).total_seconds()
        / 3600
    )


def test_sample_fleet_training_chains(wh):
    """Integration on the committed sample fleet: sacct ingest -> goodput_jobs."""
    fleet = SAMPLE_FLEET / "slurm" / "sacct.txt"
    if not fleet.exists():
        pytest.skip("sample fleet not generated")
    from ingest.base import ParseContext
    from ingest.runner import ingest_paths

    ingest_paths(wh, [fleet], "auto", ParseContext(cluster="simfleet"))
    truth = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    intervals = {k: v for k, v in truth["checkpoint_interval_s"].items() if "/" not in k}
    attempts = wh.read("job_attempts")
    for job, tau in intervals.items():
        # the generator checkpoints every tau with no cost; its restart overhead is 5-15 min
        rows = attempts.filter(pl.col("job_id") == job)
        out = measure(rows, tau, 0, 600).row(0, named=True)
        assert sum(out[c] for c in CATS) == pytest.approx(out["wall_hours"], abs=1e-9)
        failed = rows.filter(pl.col("state").is_in(["NODE_FAIL", "FAILED", "REQUEUED"])).height
        # each failure loses less than one interval of work
        assert out["lost_work_hours"] <= failed * tau / 3600 + 1e-9
        assert out["goodput"] > 0.85, job
    jobs = refresh_goodput_jobs(wh, 1800, 0, 600)
    assert set(intervals) <= set(jobs["job_id"].to_list())
    s = {r["weighting"]: r for r in summarize(jobs).iter_rows(named=True)}
    # big training chains dominate GPU-hours and have high goodput; small jobs often fail
    assert s["gpu_hours"]["goodput"] > s["jobs"]["goodput"]


def test_report_never_names_an_assumed_part_the_largest_loss():
    """Checkpoint overhead is the largest part here but rests on the assumed cost: the reading
    names the largest measured part (queue wait), lists the assumed ones as such, and the
    chart labels them."""
    from dashboards.section import ReportContext
    from dashboards.sections.goodput_measured import build

    rows = frame([att("A", 1, 0, 600, "NODE_FAIL"), att("A", 2, 610, 1200, "COMPLETED")])
    jobs = measure(rows, ckpt_interval_s=600, ckpt_cost_s=300, restart_s=60)
    row = jobs.row(0, named=True)
    assert row["assumed_parts"] == "lost_work_hours,restart_hours,checkpoint_hours"
    assert row["checkpoint_hours"] > row["queue_after_failure_hours"] > 0
    section = build(ReportContext(wh=None, t={"goodput_jobs": jobs}, target_gpus=16_384))
    assert (
        "the largest measured loss is queue wait after failure at 0.8% of GPU-hours."
        in section.reading
    )
    assert (
        "Sized by assumptions, not records: checkpoint overhead 32.9%, restart / recovery 0.1%."
        in section.reading
    )
    assert "largest loss is checkpoint" not in section.reading
    spec = section.chart.to_dict()
    shown = {r["shown"] for rows in spec["datasets"].values() for r in rows if "shown" in r}
    assert shown >= {"checkpoint overhead (assumed)", "queue wait after failure"}


def test_measured_checkpoint_times_make_lost_work_a_measured_part():
    rows = frame([att("A", 1, 0, 120, "NODE_FAIL"), att("A", 2, 140, 300, "COMPLETED")])
    ck = pl.DataFrame({"cluster": ["c1"], "job_id": ["A"], "time": [T0 + timedelta(minutes=90)]})
    assert measure(rows, checkpoints=ck)["assumed_parts"].to_list() == [
        "restart_hours,checkpoint_hours"
    ]


def test_an_attempt_without_an_end_ends_at_the_next_start_and_the_chain_keeps_its_gang_size():
    rows = frame([
        att("A", 1, 0, None, "RUNNING", gpus=8),  # its pod was replaced: no end recorded
        att("A", 2, 70, 130, "COMPLETED", gpus=16),
    ])  # fmt: skip
    out = measure(rows, 7200, 0, 600).row(0, named=True)
    assert out["final_state"] == "COMPLETED" and out["attempts"] == 2 and out["n_gpus"] == 16
    assert out["wall_hours"] == pytest.approx(130 / 60)
    assert out["lost_work_hours"] == pytest.approx(70 / 60)  # no 2-hour checkpoint in 70 minutes
