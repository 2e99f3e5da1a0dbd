"""What-if sweeps, sensitivity ranking, joint best (interval, spares), and `goodput project`."""

import json

import numpy as np
import polars as pl
import pytest

from analysis.class_rates import ClassRates
from analysis.job import Job
from analysis.projection import daly_interval
from analysis.projection import project
from analysis.rate_sources import llama3_rates
from analysis.scenario import evaluate
from analysis.whatif import joint_best
from analysis.whatif import refresh_projections
from analysis.whatif import sensitivity
from analysis.whatif import sweep
from pipelines.cli import main
from tests.conftest import llama3_fits

LLAMA = llama3_rates()


def test_scale_sweep_is_vectorized_and_matches_single_scenarios():
    df = sweep(LLAMA, Job(), "n_gpus", [8, 1024, 16_384, 200_000])
    assert df["knob_value"].to_list() == [8.0, 1024.0, 16_384.0, 200_000.0]
    g = df["goodput"].to_numpy()
    assert np.all(np.diff(g) < 0)
    assert np.all(df["goodput_ci_low"].to_numpy() <= g) and np.all(
        g <= df["goodput_ci_high"].to_numpy()
    )
    one = evaluate(LLAMA, Job(n_gpus=16_384))
    assert g[2] == pytest.approx(one["goodput"]) and df["mtti_hours"][2] == pytest.approx(
        54 * 24 / 419
    )
    assert df["optimal_interval_hours"][2] == pytest.approx(one["optimal_interval_hours"])


def test_sweeps_over_other_knobs():
    cost = sweep(LLAMA, Job(), "ckpt_cost_s", [10, 60, 300])["goodput"].to_numpy()
    assert np.all(np.diff(cost) < 0)
    gpu = sweep(LLAMA, Job(), "rate:gpu", [0.5, 1.0, 2.0])
    assert np.all(np.diff(gpu["goodput"].to_numpy()) < 0)
    assert gpu["mtti_hours"][1] == pytest.approx(54 * 24 / 419)
    every = sweep(LLAMA, Job(), "rate:all", [0.5])
    assert every["mtti_hours"][0] == pytest.approx(2 * 54 * 24 / 419)
    fixed = sweep(LLAMA, Job(), "interval_hours", [0.1, 0.31, 1.0])["goodput"].to_numpy()
    assert fixed[1] > fixed[0] and fixed[1] > fixed[2]  # near Daly's 0.31 h beats both sides
    with pytest.raises(ValueError):
        sweep(LLAMA, Job(), "colour", [1])


def test_sensitivity_ranks_gpu_first_among_classes_and_spares_by_mc():
    t = sensitivity(LLAMA, Job(n_gpus=16_384, spares=4, repair_hours=12), replicas=80)
    gains = t["gain"].to_numpy()
    assert np.all(np.diff(gains) <= 0)  # sorted for the tornado chart
    classes = t.filter(pl.col("kind") == "class")
    assert classes["item"][0] == "rate:gpu"  # 171 of 419 interruptions
    half = LLAMA.scaled({"gpu": 0.5})
    direct = project(half, Job(16_384)).goodput[0] - project(LLAMA, Job(16_384)).goodput[0]
    assert classes["gain"][0] == pytest.approx(direct)
    assert set(t["item"]) >= {"ckpt_cost_s", "restart_s", "spares"}
    assert t.filter(pl.col("item") == "spares")["gain"][0] > 0.01  # 4 spares wait often


def test_joint_best_interval_and_spares():
    rates = ClassRates.from_mtti(1.0)
    base = Job(n_gpus=512, ckpt_cost_s=60.0, repair_hours=6.0, wall_hours=400)
    grid = joint_best(
        rates, base, intervals_hours=[0.05, 0.15, 0.6], spares=(0, 2, 8, 32), replicas=40
    )
    assert grid.height == 12 and grid["best"].sum() == 1
    best = grid.filter(pl.col("best")).row(0, named=True)
    assert best["fleet_goodput"] == pytest.approx(grid["fleet_goodput"].max())
    assert best["interval_hours"] == 0.15  # Daly: ~0.13 h for 60 s at MTTI 1 h
    assert 0 < best["spares"] < 32  # spares help, but idle spares cost GPUs
    no_spares = grid.filter((pl.col("spares") == 0) & (pl.col("interval_hours") == 0.15))[
        "goodput"
    ][0]
    assert best["goodput"] > no_spares + 0.1


def test_refresh_projections_writes_the_standard_set(wh):
    out = refresh_projections(
        wh,
        Job(n_gpus=512),
        rates=LLAMA.scaled({c: 20.0 for c in LLAMA.classes}),
        samples=100,
        replicas=20,
        spares_grid=(0, 4),
    )
    back = wh.read("goodput_projections")
    assert back.height == out.height
    counts = dict(back.group_by("scenario").len().iter_rows())
    assert counts["scale_sweep"] == 34 and counts["joint_grid"] == 14 and counts["joint_best"] == 1
    assert (
        counts["sensitivity"] == len(LLAMA.classes) + 4
    )  # baseline + classes + ckpt, restart, spares
    sweep_rows = back.filter(pl.col("scenario") == "scale_sweep")
    assert sweep_rows["n_gpus"].min() == 8 and sweep_rows["n_gpus"].max() == 200_000
    assert (sweep_rows["goodput_ci_low"] < sweep_rows["goodput_ci_high"]).all()


def test_cli_project_json_with_mtti(wh, capsys):
    rc = main(
        [
            "--home",
            str(wh.home),
            "project",
            "--gpus",
            "16384",
            "--ckpt-cost",
            "5m",
            "--restart",
            "10m",
            "--mtti",
            "24h",
            "--json",
        ]
    )
    assert rc == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["mtti_hours"] == 24.0
    assert obj["optimal_interval_hours"] * 60 == pytest.approx(117, abs=1)  # Daly's example
    assert obj["goodput_ci_low"] == obj["goodput"] == obj["goodput_ci_high"]
    assert 0.9 < obj["goodput"] < 1
    rows = wh.read("goodput_projections")
    assert rows.height == 1 and rows["rates_source"][0] == "mtti override"


def test_cli_project_table_mc_and_errors(wh, capsys):
    assert (
        main(
            [
                "--home",
                str(wh.home),
                "project",
                "--gpus",
                "64",
                "--mtti",
                "2h",
                "--interval",
                "30m",
                "--method",
                "mc",
                "--spares",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert (
        "MTTI" in out
        and "2.0 h" in out
        and "30.0 min (given)" in out
        and "Monte Carlo noise" in out
    )
    assert wh.read("goodput_projections")["method"].to_list() == ["mc"]
    assert main(["--home", str(wh.home), "project"]) == 2  # no fitted rates, no --mtti
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "goodput demo" in err and "--mtti" in err
    assert main(["--home", str(wh.home), "project", "--mtti", "soon"]) == 2


def test_cli_project_reads_fitted_rates_with_bands(wh, capsys):
    wh.replace_table("failure_rates", llama3_fits())
    assert main(["--home", str(wh.home), "project", "--json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["mtti_hours"] == pytest.approx(54 * 24 / 419)
    assert obj["rates_source"] == "fitted"
    assert obj["goodput_ci_low"] < obj["goodput"] < obj["goodput_ci_high"]
    assert main(["--home", str(wh.home), "project", "--gpus", "32768"]) == 0
    out = capsys.readouterr().out
    assert "fitted (13 classes" in out and "93 min  (95%" in out  # MTTI 1.55 h, in minutes
    assert wh.read("goodput_projections").height == 2


def test_bands_are_named_for_what_they_are():
    """goodput_ci_*: the expected goodput's uncertainty from the rates; goodput_spread_*: the
    spread of single simulated jobs (Monte Carlo only). optimal_interval_hours is Daly's."""
    sc = Job(n_gpus=16_384, wall_hours=200.0)
    a = evaluate(LLAMA, sc, "analytic", samples=400, seed=1)
    assert a["goodput_spread_low"] is None and a["goodput_spread_high"] is None
    m = a["mtti_hours"]
    cost_h = sc.ckpt_cost_s / 3600  # the default checkpoint cost
    assert a["optimal_interval_hours"] == pytest.approx(float(daly_interval(cost_h, m)))
    assert a["young_interval_hours"] == pytest.approx((2 * cost_h * m) ** 0.5)
    mc = evaluate(LLAMA, sc, "mc", samples=400, replicas=400, seed=1)
    assert (
        mc["goodput_spread_low"]
        < mc["goodput_ci_low"]
        < mc["goodput"]
        < mc["goodput_ci_high"]
        < mc["goodput_spread_high"]
    )
    # the rate band of the expected goodput is the analytic band's size, not the job spread's
    width = mc["goodput_ci_high"] - mc["goodput_ci_low"]
    assert width == pytest.approx(a["goodput_ci_high"] - a["goodput_ci_low"], rel=0.35)
    assert width < 0.8 * (mc["goodput_spread_high"] - mc["goodput_spread_low"])
    fixed = evaluate(ClassRates.from_mtti(m), sc, "mc", replicas=400, seed=1)
    se = (fixed["goodput_ci_high"] - fixed["goodput_ci_low"]) / (2 * 1.96)
    assert se == pytest.approx(fixed["mc"]["se"]) and "noise of the mean only" in fixed["band"]
    rows = sweep(LLAMA, sc, "ckpt_cost_s", [60], method="mc", replicas=100)
    assert rows["goodput_spread_low"][0] < rows["goodput"][0] < rows["goodput_spread_high"][0]
