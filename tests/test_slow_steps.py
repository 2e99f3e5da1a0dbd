"""Slow periods of jobs from their step logs (analysis/slowness/steps.py), on logs written with
planted slow episodes of known start, end and factor (sample_data/slow_steps.py) and read back
through the training-log format."""

from datetime import datetime
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from analysis.slowness.steps import SLOW_RATIO
from analysis.slowness.steps import refresh_slow_periods
from analysis.slowness.steps import slow_periods
from ingest.base import ParseContext
from ingest.formats.training_log import parse
from ingest.runner import ingest_paths
from sample_data.slow_steps import Episode
from sample_data.slow_steps import StepJob
from sample_data.slow_steps import log_lines
from sample_data.slow_steps import random_jobs
from sample_data.slow_steps import truth
from sample_data.writers.training_log import megatron
from sample_data.writers.training_log import torchtitan
from sample_data.writers.training_log import write


def _job(**kw) -> StepJob:
    base = {
        "job_id": "4711",
        "n_gpus": 512,
        "start": datetime(2026, 1, 5, 8),
        "n_steps": 30_000,
        "base_step_s": 2.0,
        "noise": 0.02,
        "log_interval": 10,
        "ckpt_every": 1000,
        "ckpt_s": 30.0,
        "stall_share": 0.002,
        "seed": 3,
    }
    return StepJob(**{**base, **kw})


def _steps(job: StepJob, text: str | None = None) -> pl.DataFrame:
    data = (text or megatron(job, log_lines(job))).encode()
    return parse(data, ParseContext(path=f"train-{job.job_id}.out")).tables["training_steps"]


def _gpus(*jobs: StepJob) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "cluster": ["default"] * len(jobs),
            "job_id": [j.job_id for j in jobs],
            "n_gpus": [j.n_gpus for j in jobs],
        },
        schema={"cluster": pl.Utf8, "job_id": pl.Utf8, "n_gpus": pl.Int32},
    )


def test_planted_episode_gives_its_slow_gpu_hours_start_end_and_factor():
    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    periods, jobs = slow_periods(_steps(job), _gpus(job))
    true = truth(job).row(0, named=True)
    assert periods.height == 1
    got = periods.row(0, named=True)
    assert got["slow_gpu_hours"] == pytest.approx(true["slow_gpu_hours"], rel=0.05)
    assert got["slowdown"] == pytest.approx(1.4, rel=0.02)
    # within the interval each side it began or ended in (a save in it may join it to the run)
    interval = timedelta(seconds=2 * job.log_interval * job.base_step_s * 1.4 + job.ckpt_s)
    assert abs(got["start_time"] - true["start_time"]) <= interval
    assert abs(got["end_time"] - true["end_time"]) <= interval
    assert got["kind"] == "transient" and got["n_gpus"] == 512
    assert got["baseline_step_s"] == pytest.approx(2.0, rel=0.01)
    row = jobs.row(0, named=True)
    assert (row["slow_periods"], row["slow_hours"]) == (1, pytest.approx(got["extra_hours"]))
    assert row["slow_share"] == pytest.approx(row["slow_hours"] / row["logged_hours"])


def test_a_job_without_slowness_gets_no_period_despite_stalls_and_saves():
    job = _job(stall_share=0.01, ckpt_every=300, ckpt_s=60.0)
    periods, jobs = slow_periods(_steps(job), _gpus(job))
    assert periods.height == 0
    assert jobs["slow_hours"].to_list() == [0.0]


def test_a_slowdown_shorter_than_three_intervals_is_no_period():
    job = _job(episodes=(Episode(8000, 20, 2.0),))  # two logged intervals
    periods, _ = slow_periods(_steps(job), _gpus(job))
    assert periods.height == 0


def test_an_episode_the_log_ends_in_is_persistent():
    job = _job(episodes=(Episode(5000, 3000, 1.3), Episode(26_000, 4000, 1.2)))
    periods, _ = slow_periods(_steps(job), _gpus(job))
    assert periods["kind"].to_list() == ["transient", "persistent"]
    assert periods["period"].to_list() == [1, 2]
    assert periods["slow_gpu_hours"].sum() == pytest.approx(
        truth(job)["slow_gpu_hours"].sum(), rel=0.05
    )


def test_an_untimed_log_still_counts_its_extra_time():
    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    text = megatron(job, log_lines(job))
    untimed = "\n".join(
        line.split("] ", 1)[1] if line.startswith(" [") else line for line in text.splitlines()
    )
    periods, _ = slow_periods(_steps(job, untimed), _gpus(job))
    assert periods["start_time"].to_list() == [None]
    assert periods["slow_gpu_hours"][0] == pytest.approx(truth(job)["slow_gpu_hours"][0], rel=0.05)


def test_per_rank_compute_timers_name_the_slow_rank():
    job = _job(episodes=(Episode(8000, 4000, 1.5),), ranks=8, slow_rank=5)
    res = parse(megatron(job, log_lines(job)).encode(), ParseContext(path="train-4711.out"))
    periods, _ = slow_periods(
        res.tables["training_steps"], _gpus(job), timers=res.tables["step_timers"]
    )
    got = periods.row(0, named=True)
    assert (got["slow_rank"], got["rank_evidence"]) == (5, "timers")
    assert got["rank_ratio"] == pytest.approx(1.5, rel=0.02)


def test_straggler_scores_in_the_period_name_the_rank_and_its_node():
    job = _job(episodes=(Episode(8000, 4000, 1.5),))
    steps = _steps(job)
    inside = truth(job)["start_time"][0] + timedelta(minutes=30)
    outside = job.start + timedelta(hours=1)
    scores = pl.DataFrame(
        {
            "cluster": "default",
            "job_id": "4711",
            "time": [inside, inside, outside],
            "iteration": [None, None, None],
            "kind": ["relative", "relative", "relative"],
            "rank": [12, 3, 7],
            "node": ["gpu-node-002", "gpu-node-001", "gpu-node-001"],
            "score": [0.66, 0.97, 0.5],
        },
        schema_overrides={"iteration": pl.Int64, "rank": pl.Int32},
    )
    periods, _ = slow_periods(steps, _gpus(job), scores=scores)
    got = periods.row(0, named=True)
    assert (got["slow_rank"], got["slow_node"], got["rank_evidence"]) == (
        12,
        "gpu-node-002",
        "scores",
    )
    assert got["rank_ratio"] == pytest.approx(1 / 0.66)


def test_the_same_log_from_two_ranks_counts_once():
    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    steps = _steps(job)
    twice = pl.concat([steps, steps.with_columns(source_file=pl.lit("rank1.out"))])
    once, _ = slow_periods(steps, _gpus(job))
    again, _ = slow_periods(twice, _gpus(job))
    assert again["slow_gpu_hours"].to_list() == once["slow_gpu_hours"].to_list()


def test_a_job_unknown_to_the_scheduler_keeps_its_hours_without_gpu_hours():
    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    periods, jobs = slow_periods(_steps(job), _gpus(job).clear())
    assert periods["extra_hours"][0] > 0
    assert periods["slow_gpu_hours"].to_list() == [None]
    assert jobs["n_gpus"].to_list() == [None]


def test_lost_time_stays_within_its_physical_limits():
    """Over random jobs with and without episodes: no period's extra time is negative or longer
    than the period, no job loses more than it logged, every period is slower than the bar."""
    jobs = random_jobs(3, 5, slow=True) + random_jobs(3, 6, slow=False, first_id=800_000)
    steps = pl.concat([_steps(j, _text(j)) for j in jobs])
    periods, per_job = slow_periods(steps, _gpus(*jobs))
    assert periods.height > 0
    assert (periods["extra_hours"] >= 0).all()
    assert (periods["extra_hours"] <= periods["duration_hours"] * 1.01).all()
    assert (periods["slowdown"] > 1 + SLOW_RATIO).all()
    assert (per_job["slow_hours"] <= per_job["logged_hours"]).all()
    assert (per_job["slow_share"].is_between(0, 1)).all()


def _text(job: StepJob) -> str:
    lines = log_lines(job)
    return torchtitan(job, lines) if job.framework == "torchtitan" else megatron(job, lines)


def _sacct(folder: Path, *jobs: str) -> Path:
    """A sacct --parsable2 dump of 512-GPU jobs given as ``job|partition``."""
    head = "JobID|JobName|User|Account|Partition|Submit|Start|End|State|ExitCode|NNodes|AllocTRES"
    rows = [
        f"{job}|pretrain|ana|llm|{partition}|2026-01-05T07:50:00|2026-01-05T08:00:00|"
        "2026-01-06T02:00:00|COMPLETED|0:0|64|gres/gpu=512"
        for job, partition in (j.split("|") for j in jobs)
    ]
    path = folder / "sacct.txt"
    path.write_text("\n".join([head, *rows]) + "\n")
    return path


def test_refresh_reads_the_ingested_logs_and_the_jobs_gpus(wh, tmp_path):
    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    write(job, tmp_path / "logs")
    ingest_paths(wh, [tmp_path / "logs", _sacct(tmp_path, "4711|gpu")], "auto", ParseContext())
    refresh_slow_periods(wh)
    stored = wh.read("slow_periods")
    assert stored["n_gpus"].to_list() == [512]
    assert stored["slow_gpu_hours"][0] == pytest.approx(truth(job)["slow_gpu_hours"][0], rel=0.05)
    assert wh.read("job_step_times")["slow_periods"].to_list() == [1]


def test_a_scope_keeps_the_slow_periods_of_its_own_jobs(wh, tmp_path):
    """Step logs name no cluster or partition: a scope keeps the logs and slow periods of its
    own jobs, by job id, as the whole fleet's analysis found them."""
    from analysis.scope import Scope
    from analysis.scope import filtered

    for job_id in ("4711", "4712"):
        write(_job(job_id=job_id, episodes=(Episode(8000, 4000, 1.4),)), tmp_path / "logs")
    sacct = _sacct(tmp_path, "4711|gpu", "4712|big")
    ingest_paths(wh, [tmp_path / "logs", sacct], "auto", ParseContext())
    periods, jobs = refresh_slow_periods(wh)
    assert sorted(periods["job_id"]) == sorted(jobs["job_id"]) == ["4711", "4712"]
    big = filtered(wh, Scope(partition="big"))
    assert big.read("slow_periods")["job_id"].to_list() == ["4712"]
    assert big.read("job_step_times")["job_id"].to_list() == ["4712"]
    assert set(big.read("training_steps")["job_id"]) == {"4712"}


def test_generated_logs_read_back_as_the_steps_they_were_written_from(tmp_path):
    """The validation's input is what it claims: the writer's lines parse back to the
    generator's step times (the 0.1 ms the log rounds to)."""
    job = _job(framework="torchtitan", log_interval=5)
    path = write(job, Path(tmp_path))
    steps = parse(path.read_bytes(), ParseContext(path=str(path))).tables["training_steps"]
    lines = log_lines(job)
    assert steps["iteration"].to_list() == lines["iteration"].to_list()
    assert steps["step_s"][1:].to_numpy() == pytest.approx(lines["step_s"][1:].to_numpy(), abs=1e-3)


def test_goodput_build_fills_slow_periods_from_ingested_logs(tmp_path, capsys):
    from pipelines.cli import main

    job = _job(episodes=(Episode(8000, 4000, 1.4),))
    write(job, tmp_path / "logs")
    home = str(tmp_path / "home")
    assert main(["--home", home, "ingest", str(tmp_path / "logs")]) == 0
    assert main(["--home", home, "build"]) == 0
    capsys.readouterr()
    assert (
        main(["--home", home, "sql", "select job_id, kind from slow_periods", "--format", "csv"])
        == 0
    )
    assert capsys.readouterr().out.splitlines() == ["job_id,kind", "4711,transient"]


def test_nvlink_evidence_breaks_a_tie_by_host_then_gpu():
    """Two GPUs with as many NVLink errors in a period: the culprit is the first by host, then
    GPU, however the events arrive (a tie picked by hash order named another node per build)."""
    from datetime import datetime

    import polars as pl

    from analysis.slowness.nvlink import nvlink_evidence

    t0 = datetime(2026, 1, 5, 10)
    periods = pl.DataFrame(
        {"cluster": ["c"], "job_id": ["1"], "period": [0], "start_time": [t0],
         "end_time": [datetime(2026, 1, 5, 11)]}
    )  # fmt: skip
    hosts = pl.DataFrame({"cluster": ["c"] * 3, "job_id": ["1"] * 3, "period": [0] * 3,
                          "host": ["n9", "n10", "n2"]})  # fmt: skip
    for order in (["n9", "n2", "n10"], ["n2", "n10", "n9"], ["n10", "n9", "n2"]):
        events = pl.DataFrame(
            {"component_class": ["nvlink"] * 3, "host": order, "gpu": [3, 1, 7],
             "time": [datetime(2026, 1, 5, 10, 30)] * 3}
        )  # fmt: skip
        got = nvlink_evidence(periods, hosts, events).row(0, named=True)
        assert (got["_n_host"], got["_n_events"]) == ("n10", 1), order


def test_nvlink_evidence_counts_each_gpus_errors_in_the_window_as_a_brute_force_count_does():
    """The as-of count of NVLink errors from NVLINK_BEFORE_S before a period to its end equals
    pairing every event with every period of its host, on random periods and events (edges
    included: an event exactly at either bound, events at one instant, a GPU not named)."""
    from datetime import datetime
    from datetime import timedelta

    import numpy as np
    import polars as pl

    from analysis.slowness.keys import KEYS
    from analysis.slowness.nvlink import NVLINK_BEFORE_S
    from analysis.slowness.nvlink import nvlink_evidence

    rng = np.random.default_rng(7)
    t0 = datetime(2026, 1, 5)
    starts = [t0 + timedelta(minutes=int(m)) for m in rng.integers(0, 600, 40)]
    lengths = rng.integers(1, 90, 40)
    periods = pl.DataFrame(
        {"cluster": "c", "job_id": [str(i % 5) for i in range(40)], "period": list(range(40)),
         "start_time": starts,
         "end_time": [s + timedelta(minutes=int(d)) for s, d in zip(starts, lengths)]}
    )  # fmt: skip
    hosts = (
        periods.select(*KEYS)
        .join(pl.DataFrame({"host": [f"n{i}" for i in range(6)]}), how="cross")
        .filter(pl.int_range(pl.len()) % 3 != 0)
    )
    times = [t0 + timedelta(seconds=int(s)) for s in rng.integers(0, 700 * 60, 3000)]
    times[:2] = [starts[0] - timedelta(seconds=NVLINK_BEFORE_S), starts[0]]  # the bounds
    times[2:5] = [starts[1]] * 3  # one instant
    gpu = [None if g == 8 else int(g) for g in rng.integers(0, 9, 3000)]
    events = pl.DataFrame(
        {"component_class": "nvlink", "host": [f"n{i}" for i in rng.integers(0, 6, 3000)],
         "gpu": pl.Series(gpu, dtype=pl.Int32), "time": times}
    )  # fmt: skip
    got = nvlink_evidence(periods, hosts, events).sort(KEYS)
    brute = (
        hosts.join(periods, on=KEYS)
        .join(events, on="host", how="inner", nulls_equal=True)
        .filter(
            (pl.col("time") >= pl.col("start_time") - pl.duration(seconds=NVLINK_BEFORE_S))
            & (pl.col("time") <= pl.col("end_time"))
        )
        .group_by([*KEYS, "host", "gpu"])
        .agg(_n_events=pl.len())
        .sort(["_n_events", "host", "gpu"], descending=[True, False, False])
        .group_by(KEYS, maintain_order=True)
        .first()
        .sort(KEYS)
    )
    assert got.height == brute.height > 30
    assert got["_n_events"].to_list() == brute["_n_events"].to_list()
    assert got["_n_host"].to_list() == brute["host"].to_list()
