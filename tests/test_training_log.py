"""Training jobs' own logs (ingest/formats/training_log/): step lines of Megatron-LM, NeMo and
torchtitan, Megatron's timers, straggler reports, checkpoint saves; real captures in
tests/fixtures/training_logs/ (provenance in tests/fixtures/README.md)."""

from datetime import datetime

import polars as pl
import pytest

from ingest import chunks
from ingest.base import STAND_IN_HOST
from ingest.base import ParseContext
from ingest.formats.training_log import FORMAT
from ingest.formats.training_log import parse
from ingest.parsing import parse_file
from ingest.registry import detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES

LOGS = FIXTURES / "training_logs"


def _parse(name: str, **ctx) -> dict:
    path = LOGS / name
    res = parse(path.read_bytes(), ParseContext(path=str(path), **ctx))
    assert res.records == res.tables.get("training_steps", pl.DataFrame()).height + (
        res.quarantine.height
    )
    return {**res.tables, "quarantine": res.quarantine, "result": res}


def test_megatron_timestamped_iterations_give_seconds_per_step_and_the_interval():
    t = _parse("megatron-lm-issue756__timestamped_iterations-81001.out")["training_steps"]
    assert t["job_id"].unique().to_list() == ["81001"]  # from the Slurm output name
    assert t["iteration"].to_list() == [43, 44, 45, 57, 58, 59]
    # the interval since the previous step line: unknown on the first, 12 over the excerpt gap
    assert t["steps"].to_list() == [None, 1, 1, 12, 1, 1]
    assert t["step_s"].to_list() == pytest.approx([5.4449, 5.5338, 5.7186, 5.4505, 5.5389, 5.4109])
    assert t["tflops_per_gpu"][0] == 239.8
    assert t["time"][0] == datetime(2024, 4, 6, 2, 59, 36)
    assert set(t["framework"]) == {"megatron"}


def test_old_megatron_timer_lines_belong_to_the_untimed_iteration_before_them():
    got = _parse("megatron-lm-issue5__old_layout_timers-81002.out")
    steps, timers = got["training_steps"], got["step_timers"]
    assert steps["time"].null_count() == steps.height  # untimed lines are kept, not guessed
    assert steps["steps"].to_list() == [None, 100, 100, 100]
    assert steps["step_s"].to_list() == pytest.approx([0.3349, 0.3131, 0.3105, 0.3199])
    first = timers.filter(pl.col("iteration") == 100).sort("source_line")
    names = ["forward", "backward", "optimizer", "batch generator", "data loader"]
    assert first["timer"].to_list() == names
    assert first["value_ms"].to_list() == [132.49, 182.57, 18.18, 45.29, 43.98]
    assert timers["rank"].null_count() == timers.height
    assert sorted(timers["iteration"].unique().to_list()) == [100, 200, 300, 400]


def test_setup_timers_before_training_have_no_iteration():
    timers = _parse("nccl-issue743__setup_timers_and_untimed_iterations-81003.out")["step_timers"]
    setup = timers.filter(pl.col("iteration").is_null())
    assert setup["timer"].to_list() == [
        "model-and-optimizer-setup",
        "train/valid/test-data-iterators-setup",
    ]
    assert timers.filter(pl.col("iteration") == 10).height == 10


def test_nemo2_progress_lines_are_steps_by_global_step():
    t = _parse("bionemo-recipes-pr740__nemo2_progress_steps-81004.out")["training_steps"]
    assert t["iteration"].to_list() == [120, 121, 122, 123, 124, 125]
    assert t["step_s"].to_list() == pytest.approx(
        [0.03146, 0.03163, 0.03215, 0.03157, 0.0317, 0.03147]
    )
    assert set(t["framework"]) == {"nemo"}


def test_torchtitan_step_time_is_the_time_between_step_lines_over_the_steps():
    got = _parse("torchtitan-pr1287__every_tenth_step_with_gc_lines-81005.out")
    t = got["training_steps"]
    assert t["iteration"].to_list() == [200, 210, 220, 230, 240, 250]
    assert t["steps"].to_list() == [None, 10, 10, 10, 10, 10]
    # 22:30:50,322 -> 22:31:04,970 over 10 steps
    assert t["step_s"][1] == pytest.approx(1.4648)
    assert t["step_s"][0] is None
    assert t["tokens_per_s"][0] == 5856.0
    assert got["quarantine"].height == 0  # the GC and profiler lines are no records


def test_torchtitan_rank_prefix_is_read():
    t = _parse("torchtitan-pr3393__rank_prefix_every_step-81006.out")["training_steps"]
    assert t["steps"].to_list() == [None, 1, 1, 1, 1, 1, 1, 1]
    assert t["step_s"][1] == pytest.approx(1.118)


def test_straggler_report_scores_every_listed_rank_with_its_node():
    got = _parse("megatron-bridge-docs__nvrx_straggler_report-81007.out")
    scores = got["rank_scores"]
    assert "training_steps" not in got
    assert scores.group_by("kind").len().sort("kind").rows() == [
        ("individual", 10),
        ("relative", 10),
    ]
    worst = scores.filter(pl.col("kind") == "relative").sort("score").row(0, named=True)
    assert (worst["rank"], worst["node"], worst["score"]) == (76, "h100-001-253-012", 0.94)
    assert scores["time"].null_count() == scores.height  # the report carries no time here


def test_megatron_timer_blocks_give_min_max_and_per_rank_rows():
    timers = _parse("megatron-timers__minmax_max_and_per_rank_blocks-81008.out")["step_timers"]
    minmax = timers.filter(pl.col("iteration") == 100).sort("source_line")
    names = ["forward-backward", "forward-compute", "backward-compute", "optimizer"]
    assert minmax["timer"].to_list() == names
    assert minmax.row(1, named=True)["min_ms"] == 1130.86
    assert minmax.row(1, named=True)["max_ms"] == 1291.41
    assert timers.filter(pl.col("iteration") == 200)["max_ms"].to_list() == [3563.02, 12.35]
    ranks = timers.filter(pl.col("rank").is_not_null())
    assert ranks.height == 8
    slow = ranks.filter(pl.col("timer") == "forward-compute").sort("value_ms").row(-1, named=True)
    assert (slow["rank"], slow["value_ms"], slow["iteration"]) == (2, 1290.55, 300)
    assert ranks["time"].unique().to_list() == [datetime(2025, 3, 5, 11, 32, 41)]


BAD = b"""SLURM_JOB_ID=5150
 [2025-03-05 11:20:41] iteration      100/  100000 | elapsed time per iteration (ms): 3580.2 |
 [2025-03-05 11:26:39] iteration      2x0/  100000 | elapsed time per iteration (ms): 3581.5 |
 [2025-03-05 11:32:41] iteration      300/  100000 | elapsed time per iteration (ms): 0.0 |
time (ms) | forward-compute: 58.16 | backward-compute: n/a
(min, max) time across ranks (ms):
    forward-backward ...............................: (3561.68, 3562.21)
    optimizer ......................................: (12.01, twelve)
GPU relative performance:
  Rank=7 Node=gpu-node-001 Score=0.42
saving checkpoint at iteration     300 to /ckpt
[2025-03-05 11:40:00] successfully saved checkpoint from iteration     300 to /ckpt
"""


def test_each_bad_record_is_quarantined_for_its_own_reason():
    res = parse(BAD, ParseContext(path="train.log"))
    errors = dict(zip(res.quarantine["line"], res.quarantine["error"], strict=True))
    assert errors[3].startswith("unreadable megatron step line")
    assert errors[4] == "step time 0.0 s is not positive"
    assert "backward-compute: n/a" in errors[5]
    assert "twelve" in errors[8]
    assert errors[11] == "checkpoint line has no timestamp"
    assert res.tables["training_steps"]["iteration"].to_list() == [100]
    assert res.tables["step_timers"]["timer"].to_list() == ["forward-compute", "forward-backward"]
    assert res.tables["rank_scores"]["score"].to_list() == [0.42]
    assert res.tables["checkpoints"]["event"].to_list() == ["save_end"]
    assert res.tables["checkpoints"]["job_id"].to_list() == ["5150"]
    assert res.records == 1 + res.quarantine.height


def test_a_log_that_names_no_job_is_quarantined_per_record():
    res = parse(BAD.replace(b"SLURM_JOB_ID=5150\n", b""), ParseContext(path="train.log"))
    assert "training_steps" not in res.tables and "rank_scores" not in res.tables
    assert res.quarantine.filter(pl.col("error").str.starts_with("cannot tell the job")).height == 5


def test_the_host_an_output_name_carries_is_announced_as_taken_from_the_name():
    data = (LOGS / "megatron-lm-issue756__timestamped_iterations-81001.out").read_bytes()
    res = parse(data, ParseContext(path="/logs/train-81001-gpu-node-007.out"))
    steps = res.tables["training_steps"]
    assert steps["host"].unique().to_list() == ["gpu-node-007"]
    assert steps["job_id"].unique().to_list() == ["81001"]
    assert res.stand_ins == frozenset({STAND_IN_HOST})
    named = parse(data, ParseContext(path="/logs/train-81001-gpu-node-007.out", host="n1"))
    assert named.stand_ins == frozenset()
    report = (LOGS / "megatron-bridge-docs__nvrx_straggler_report-81007.out").read_bytes()
    scores_only = parse(report, ParseContext(path="/logs/train-81007-gpu-node-007.out"))
    assert scores_only.tables["rank_scores"]["host"].unique().to_list() == ["gpu-node-007"]
    assert scores_only.stand_ins == frozenset({STAND_IN_HOST})


def test_a_block_cut_by_a_chunk_boundary_gives_the_rows_of_the_whole_file(monkeypatch):
    path = LOGS / "megatron-timers__minmax_max_and_per_rank_blocks-81008.out"
    ctx = ParseContext(path=str(path))
    whole = parse(path.read_bytes(), ctx)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 300)  # every block split somewhere
    with open(path, "rb") as fh:
        results = [res for _, res in parse_file(fh, path.name, FORMAT, ctx)]
    assert len(results) == 1  # chunks extracted, then merged once
    for table, rows in whole.tables.items():
        assert results[0].tables[table].equals(rows), table


def test_a_log_with_steps_and_saves_is_a_training_log_and_keeps_its_saves():
    data = BAD.replace(b"2x0", b"200") + BAD.split(b"\n", 1)[1]
    assert detect(data, "train.log").name == "training-log"
    res = parse(data, ParseContext(path="train.log"))
    assert res.tables["checkpoints"].height == 2


def test_ingest_fills_the_tables_and_a_second_ingest_adds_nothing(wh):
    reports = ingest_paths(wh, [LOGS], "auto", ParseContext())
    assert {r.format for r in reports} == {"training-log"}
    counts = {t: wh.read(t).height for t in ("training_steps", "step_timers", "rank_scores")}
    assert counts == {"training_steps": 34, "step_timers": 46, "rank_scores": 20}
    ingest_paths(wh, [LOGS], "auto", ParseContext(), replace_existing=True)
    again = {t: wh.read(t).height for t in counts}
    assert again == counts
