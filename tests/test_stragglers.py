"""What-if analysis of per-operation traces (analysis/slowness/): the slowdown S against the
published results of ByteDance's traces (OSDI '25, arXiv 2505.05713) on committed extracts
(tests/fixtures/stragglers/, provenance in tests/fixtures/README.md), the worker-vs-stage
verdict, the dependency model's own checks, and the command that prints them."""

import json

import numpy as np
import polars as pl
import pytest

from analysis.slowness.pipeline_model import TraceError
from analysis.slowness.pipeline_model import build
from analysis.slowness.whatif import analyse
from analysis.slowness.whatif import read_trace
from tests.conftest import FIXTURES

TRACES = FIXTURES / "stragglers"
# the paper's per-trace slowdown and verdict (the whole traces)
PUBLISHED = {"AR": (1.973, "worker"), "SE": (1.537, "stage"), "ST": (1.179, "stage")}
EXTRACTS = {
    "AR": "trace-AR-2steps.parquet",
    "SE": "trace-SE-2steps.parquet",
    "ST": "trace-ST-8steps.parquet",
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_extract_slowdown_within_5_percent_of_the_published_trace_and_same_verdict(name):
    res = analyse(read_trace(TRACES / EXTRACTS[name]))
    published, verdict = PUBLISHED[name]
    assert res.slowdown == pytest.approx(published, rel=0.05)
    assert res.verdict == verdict
    assert res.dependency_violations == 0.0  # the recorded order never breaks the model


def test_the_slow_worker_of_trace_ar_is_named():
    res = analyse(read_trace(TRACES / EXTRACTS["AR"]))
    assert [(d, p) for d, p, _ in res.top_workers] == [(0, 0)]
    assert res.worker_share == pytest.approx(1.0, abs=0.05)
    assert abs(res.stage_share) < 0.05
    assert res.by_dp_rank[0] > 1.9 and max(res.by_dp_rank[d] for d in (1, 2, 3)) < 1.05


def test_replaying_recorded_times_reproduces_the_step_times_a_replay_with_gaps_would_not_shorten():
    """T_actual leaves out launch gaps only: it is at most the measured step time, and close
    to it (the traces' gaps are small)."""
    res = analyse(read_trace(TRACES / EXTRACTS["ST"]))
    assert res.actual_step_s <= res.measured_step_s + 1e-9
    assert res.actual_step_s == pytest.approx(res.measured_step_s, rel=0.05)


def test_a_trace_whose_ops_all_take_their_typical_time_has_no_slowdown():
    """Without communication (whose time depends on the peers' starts) and with every compute
    at its type's mean, the ideal replay is the actual one."""
    local = read_trace(TRACES / EXTRACTS["ST"]).filter(
        ~pl.col("optype").cast(pl.Utf8).str.contains("send|recv|all|clip|scatter")
    )
    typical = local.with_columns(pl.col("duration").cast(pl.Float64).mean().over("optype"))
    res = analyse(typical)
    assert res.slowdown == pytest.approx(1.0, abs=1e-9)
    assert res.verdict == "none"


def test_level_replay_equals_the_fixed_point_of_the_definition():
    """The replay computed level by level over arrays equals the plain definition, found by
    relaxing every operation until nothing changes (no levels used): an op starts when its
    dependencies have ended; a synchronising op ends at its group's latest start plus its own
    time, a local one at its start plus its own time."""
    trace = read_trace(TRACES / EXTRACTS["ST"]).filter(pl.col("step").is_in([23, 25]))
    model = build(trace)
    own = np.random.default_rng(1).uniform(0.01, 0.2, (model.replicas, model.n_ops))
    end = np.zeros((model.replicas, model.n_ops))
    while True:
        start = np.zeros_like(end)
        for op in range(model.n_ops):
            deps = [d for d in model.deps[op] if d < model.n_ops]
            if deps:
                start[:, op] = end[:, deps].max(axis=1)
        new = start + own
        for g in range(len(model.group_dp_sync)):
            members = np.flatnonzero(model.group == g)
            latest = start[:, members].max(axis=1)
            if model.group_dp_sync[g]:
                latest = np.repeat(latest.reshape(-1, model.dp).max(axis=1), model.dp)
            new[:, members] = latest[:, None] + own[:, members]
        if np.array_equal(new, end):
            break
        end = new
    assert model.replay(own) == pytest.approx(end.max(axis=1).reshape(-1, model.dp).max(axis=1))


def test_a_trace_missing_columns_or_operations_is_one_clear_error():
    trace = read_trace(TRACES / EXTRACTS["ST"])
    with pytest.raises(TraceError, match="lacks columns: seq_id"):
        analyse(trace.drop("seq_id"))
    gappy = trace.filter(~((pl.col("step") == 25) & (pl.col("optype") == "optimizer")))
    with pytest.raises(TraceError, match="every step and rank must record the same operations"):
        analyse(gappy)
    unknown = trace.with_columns(
        pl.when(pl.col("optype").cast(pl.Utf8) == "gc")
        .then(pl.lit("mystery"))
        .otherwise(pl.col("optype").cast(pl.Utf8))
        .alias("optype")
    )
    with pytest.raises(TraceError, match="not modelled: mystery"):
        analyse(unknown)


def test_goodput_stragglers_prints_s_mw_ms_and_the_verdict(capsys):
    from pipelines.cli import main

    assert main(["stragglers", str(TRACES / EXTRACTS["SE"]), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["S"] == pytest.approx(1.537, rel=0.05)
    assert out["verdict"] == "stage"
    assert main(["stragglers", str(TRACES / EXTRACTS["AR"])]) == 0
    text = capsys.readouterr().out
    assert "S = 1.97" in text and "worker" in text


def test_goodput_stragglers_on_a_file_that_is_no_trace_is_one_line_exit_2(tmp_path, capsys):
    from pipelines.cli import main

    bad = tmp_path / "x.parquet"
    bad.write_text("not parquet")
    assert main(["stragglers", str(bad)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "not a readable" in err
