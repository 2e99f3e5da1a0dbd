"""Fleet simulator against closed forms (analysis/fleetsim/closed_forms.py) and the single-job
projections, plus the scenario's one-line errors. Each case is small: seconds in all."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis import lifetime_models
from analysis.class_rates import ClassRates
from analysis.fleetsim import closed_forms
from analysis.fleetsim import engine
from analysis.fleetsim.run import Inputs
from analysis.fleetsim.run import estimates
from analysis.fleetsim.run import simulate
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import validate
from analysis.fleetsim.scenario import with_knob
from analysis.job import Job
from analysis.montecarlo import simulate as mc_simulate
from analysis.projection import useful_fraction


def node_rates(per_node_hour: float) -> ClassRates:
    """One hardware class failing at ``per_node_hour`` per node, exponential."""
    return ClassRates(("psu",), np.array([per_node_hour]), counts={"psu": ("node", 1)})


def exp_law(mean_hours: float):
    return lifetime_models.get("exponential")(scale_hours=mean_hours)


def spec_of(**over) -> dict:
    raw = {
        "horizon_days": 200,
        "idle_failure_factor": 0.0,
        "fleet": {"nodes": 16, "hot_spares": 8},
        "triage": {"hours": 0.0, "detect_prob": 1.0},
        "repair": {"model": "exponential", "params": {"scale_hours": 1.0}},
        "jobs": [
            {
                "gpus": 64,
                "checkpoint_interval_hours": 1.0,
                "checkpoint_cost_s": 120,
                "restart_s": 900,
            }
        ],
        "replications": {"min": 8, "max": 8},
    }
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) else v
    return validate(raw)


def replicate(spec, rates, law, n):
    return estimates([engine.run(spec, rates, law, spec["jobs"], s) for s in range(n)])


def within(est, key, truth, slack=0.0):
    lo, hi = est.ci_low[key], est.ci_high[key]
    half = (hi - lo) / 2
    assert abs(est.mean[key] - truth) <= 1.5 * half + slack, (key, est.mean[key], lo, hi, truth)


def test_one_job_with_instant_repair_matches_daly_and_the_monte_carlo():
    r = 1 / 80.0  # per node-hour: 8 nodes, MTTI 10 h
    spec = spec_of()
    est = replicate(spec, node_rates(r), exp_law(1.0), 8)
    m = 1 / (8 * r)
    daly = float(useful_fraction(1.0, 120 / 3600, 900 / 3600, m))
    within(est, "goodput:64", daly, slack=0.002)
    per_job = replicate(spec, ClassRates.from_mtti(m), exp_law(1.0), 8)  # a job-scope class
    within(per_job, "goodput:64", daly, slack=0.002)
    mc = mc_simulate(
        ClassRates.from_mtti(m),
        Job(64, interval_hours=1.0, ckpt_cost_s=120, restart_s=900, wall_hours=4800),
        replicas=200,
    ).summary()
    assert (
        abs(est.mean["goodput:64"] - mc["mean"])
        < 3 * mc["se"] + est.ci_high["goodput:64"] - est.mean["goodput:64"]
    )


def test_repair_line_alone_matches_mmc_erlang_c():
    lam_node, n, c, mean_repair = 2.4 / 5_000, 5_000, 3, 1.0
    spec = spec_of(
        horizon_days=400, idle_failure_factor=1.0, fleet={"nodes": n, "hot_spares": 0},
        triage={"hours": 0.0, "detect_prob": 0.0},
        repair={"technicians": c, "params": {"scale_hours": mean_repair}},
        jobs=[{"gpus": 8}],
    )  # fmt: skip
    est = replicate(spec, node_rates(lam_node), exp_law(mean_repair), 5)
    lam = lam_node * (n - 3.0)  # arrivals come from the nodes not in repair (about 3 of them)
    wq, lq = closed_forms.mmc_wait(lam, 1 / mean_repair, c)
    within(est, "repair_queue_mean", lq, slack=0.03 * lq)
    # the wait of the repairs that started service: all arrivals, the ones served at once at 0
    served_wait = wq / closed_forms.erlang_c(c, lam * mean_repair)
    within(est, "repair_wait_hours", served_wait, slack=0.03 * served_wait)


def test_spare_pool_matches_erlang_b_for_a_lognormal_repair():
    k, busy, r = 3, 100, 0.01  # 100 nodes in jobs fail at 1/h; repairs average 3 h
    law = lifetime_models.get("lognormal")(mu_log_hours=math.log(3.0) - 0.5, sigma=1.0)
    spec = spec_of(
        horizon_days=600, fleet={"nodes": busy + k + 60, "hot_spares": k},
        triage={"hours": 0.0, "detect_prob": 0.0}, jobs=[{"gpus": 8, "count": busy}],
    )  # fmt: skip
    est = replicate(spec, node_rates(r), law, 5)
    a = busy * r * law.mean()
    within(est, "spare_blocking", float(closed_forms.erlang_b(k, a)), slack=0.01)
    carried = a * (1 - float(closed_forms.erlang_b(k, a))) / k
    within(est, "spare_utilisation", carried, slack=0.01)


def test_ettr_matches_metas_first_order_model_in_its_assumptions():
    n_nodes, r, dt, u0 = 8, 0.05 / 8, 1.5, 0.25  # free checkpoints, Poisson failures
    spec = spec_of(
        horizon_days=300,
        jobs=[{"gpus": 64, "checkpoint_interval_hours": dt, "checkpoint_cost_s": 0,
               "restart_s": u0 * 3600}],
    )  # fmt: skip
    est = replicate(spec, node_rates(r), exp_law(1.0), 8)
    meta = float(closed_forms.meta_ettr(n_nodes, r, dt, u0))
    first_order_error = (n_nodes * r * (u0 + dt / 2)) ** 2
    within(est, "ettr:64", meta, slack=first_order_error)


def test_maintenance_alone_takes_its_share_of_node_hours():
    spec = spec_of(maintenance={"every_days": 10, "hours": 12, "group_nodes": 4},
                   horizon_days=100)  # fmt: skip
    m = engine.run(spec, node_rates(0.0), exp_law(1.0), spec["jobs"], 0)
    assert m["node_availability"] == pytest.approx(1 - 12 / 240, abs=1e-9)
    assert m["failures"] == 0
    assert m["lost_gpu_hours:maintenance"] > 0


def test_retirement_false_blame_and_seeds():
    spec = spec_of(
        fleet={"nodes": 40, "hot_spares": 4}, retirement={"failures": 2, "window_days": 30},
        triage={"hours": 0.1, "detect_prob": 0.5, "false_blame_prob": 0.5, "refail_hours": 2},
        repair={"technicians": 2}, jobs=[{"gpus": 64, "count": 4}], horizon_days=120,
    )  # fmt: skip
    a = engine.run(spec, node_rates(1 / 500), exp_law(4.0), spec["jobs"], 3)
    b = engine.run(spec, node_rates(1 / 500), exp_law(4.0), spec["jobs"], 3)
    assert a == b
    assert a["retired_nodes"] > 0
    keep = with_knob(spec, "retirement.failures", None)
    honest = with_knob(keep, "triage.false_blame_prob", 0.0)
    blamed, right = (engine.run(s, node_rates(1 / 500), exp_law(4.0), s["jobs"], 3)
                     for s in (keep, honest))  # fmt: skip
    assert blamed["interruptions"] > 1.2 * right["interruptions"]  # the faulty node fails again
    assert right["retired_nodes"] == 0


def test_adaptive_stopping_reaches_the_target_or_the_cap():
    spec = spec_of(replications={"min": 3, "max": 12, "rel_halfwidth": 0.01})
    inputs = Inputs(node_rates(1 / 80), exp_law(1.0), spec["jobs"])
    est = simulate(spec, inputs)
    half = (est.ci_high["goodput:64"] - est.ci_low["goodput:64"]) / 2
    assert est.converged and 3 <= est.replications <= 12 and half <= 0.01 * est.mean["goodput:64"]
    tight = with_knob(spec, "replications.rel_halfwidth", 0.0)
    assert simulate(tight, inputs).replications == 12


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"fleet": {"nodes": 4, "sparez": 1}}, "fleet.sparez: unknown key"),
        ({"fleet": {"nodes": -1}}, "fleet.nodes: -1 is below 1"),
        (
            {"fleet": {"nodes": 4}, "triage": {"detect_prob": 2}},
            "triage.detect_prob: 2.0 is above 1",
        ),
        ({"fleet": {"nodes": 4}, "color": 1}, "color: unknown key"),
        ({"fleet": {"nodes": 4}, "repair": {"model": "nope"}}, "repair: unknown lifetime model"),
        ({"fleet": {"nodes": 4}, "jobs": [{"gpus": 64}]}, "the mix needs 8 nodes but 4 are"),
        ({"fleet": {"nodes": "x"}}, "fleet.nodes: want a number"),
        (
            {"fleet": {"nodes": 4}, "sweeps": [{"knob": "repair.technicians", "values": [0]}]},
            "sweeps[0]: repair.technicians: 0 is below 1",
        ),
        (
            {"fleet": {"nodes": 4}, "sweeps": [{"knob": "rates", "values": ["x.csv"]}]},
            "sweeps[0]: knob 'rates': use section.key",
        ),
    ],
)
def test_bad_scenarios_are_one_line(raw, message):
    with pytest.raises(ScenarioError) as e:
        validate(raw)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_sweeps_rank_knobs_and_draw_the_spare_curve():
    from analysis.fleetsim.sweep import ranking
    from analysis.fleetsim.sweep import result_rows
    from analysis.fleetsim.sweep import study

    spec = validate({
        "horizon_days": 60, "idle_failure_factor": 0.0,
        "fleet": {"nodes": 16, "hot_spares": 0},
        "triage": {"hours": 0.0, "detect_prob": 0.0},
        "repair": {"technicians": 1, "model": "exponential", "params": {"scale_hours": 12.0}},
        "jobs": [{"gpus": 128, "count": 1}],
        "replications": {"min": 3, "max": 3},
        "sweeps": [{"knob": "repair.technicians", "values": [4]},
                   {"knob": "rate:psu", "values": [2.0]}],
        "spare_curve": [0, 4],
    })  # fmt: skip
    res = study(spec, Inputs(node_rates(1 / 200), exp_law(12.0), spec["jobs"]), workers=1)
    rank = ranking(res)
    assert rank["item"].to_list() == ["repair.technicians", "rate:psu"]  # more techs help
    assert rank["gain"][0] > 0 > rank["gain"][1]
    techs, base = res["sweeps"][0][2], res["baseline"]
    gain = techs.mean["fleet_goodput"] - base.mean["fleet_goodput"]
    assert rank["gain"][0] == pytest.approx(gain)  # same seeds: paired mean = difference
    conservative = (techs.ci_high["fleet_goodput"] - techs.ci_low["fleet_goodput"]) / 2
    assert 0 < rank["gain_ci_low"][0] and rank["gain_ci_high"][0] - gain < conservative
    k0, k4 = (e.mean["goodput:128"] for _, e in res["spare_curve"])
    assert k4 > k0 + 0.05  # bought spares cut the job's wait for a repaired node
    with pytest.raises(ScenarioError, match="rate:nope: no such class"):
        Inputs(node_rates(1 / 200), exp_law(12.0), spec["jobs"]).for_spec(
            with_knob(spec, "rate:nope", 2.0)
        )
    rows = result_rows("t", res)
    assert set(rows["study"]) == {"baseline", "sweep", "spare_curve"}
    assert rows.filter(rows["metric"] == "fleet_goodput").height == 5


def small_example(folder: Path) -> Path:
    """The committed example scenario (rates: the Llama 3 rates file), made small: 300 nodes,
    30 days, two replications."""
    import yaml

    from pipelines.cli.sample import SAMPLE_FLEET

    example = SAMPLE_FLEET.parent / "fleetsim" / "example.yaml"
    raw = yaml.safe_load(example.read_text())
    raw["rates"] = str((example.parent / raw["rates"]).resolve())
    raw["fleet"] = {**raw["fleet"], "nodes": 300, "hot_spares": 4, "warm_standbys": 2}
    raw["jobs"] = [{"gpus": 512, "count": 2}, {"gpus": 8, "count": 100}]
    raw["horizon_days"], raw["replications"] = 30, {"min": 2, "max": 2}
    small = folder / "small.yaml"
    small.write_text(yaml.safe_dump(raw))
    return small


def test_cli_runs_the_committed_example_shape_and_bad_scenarios_are_one_line(tmp_path, capsys):
    import json

    from pipelines.cli import main

    small = small_example(tmp_path)
    assert main(["fleetsim", "--scenario", str(small), "--json", "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"]["replications"] == 2
    assert 0 < out["baseline"]["metrics"]["ettr:512"]["mean"] < 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet: {nodes: 10, hot_spare: 2}\n")
    assert main(["fleetsim", "--scenario", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "fleet.hot_spare: unknown key" in err
    bad.write_text("fleet: [\n")
    assert main(["fleetsim", "--scenario", str(bad)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_asset_runs_the_home_scenarios_and_the_report_section_shows_them(tmp_path):
    import dagster as dg
    import yaml

    from dashboards.section import ReportContext
    from dashboards.sections import operations_whatif
    from pipelines.assets.fleetsim import fleetsim_results
    from pipelines.cli.sample import SAMPLE_FLEET
    from pipelines.resources import Settings
    from warehouse.store import Warehouse

    rates = (SAMPLE_FLEET.parents[1] / "analysis" / "data" / "llama3_rates.csv").resolve()
    (tmp_path / "scenarios").mkdir()
    good = {
        "rates": str(rates), "horizon_days": 20, "fleet": {"nodes": 40, "hot_spares": 2},
        "repair": {"technicians": 2, "model": "exponential", "params": {"scale_hours": 24}},
        "jobs": [{"gpus": 256, "count": 1}, {"gpus": 8, "count": 4}],
        "replications": {"min": 2, "max": 2},
        "sweeps": [{"knob": "repair.technicians", "values": [8]}], "spare_curve": [0, 4],
    }  # fmt: skip
    (tmp_path / "scenarios" / "good.yaml").write_text(yaml.safe_dump(good))
    (tmp_path / "scenarios" / "bad.yaml").write_text("fleet: {nodes: 0}\n")
    result = dg.materialize(
        [fleetsim_results], resources={"settings": Settings(home=str(tmp_path))}
    )
    meta = result.asset_materializations_for_node("fleetsim_results")[0].metadata
    assert meta["scenarios"].value == 1
    assert "fleet.nodes: 0 is below 1" in meta["errors"].value[0]
    wh = Warehouse(tmp_path)
    res = wh.read("fleetsim_results")
    assert set(res["scenario"]) == {"good"} and res["replications"].min() == 2
    ctx = ReportContext(wh, {"fleetsim_results": res}, 16_384)
    section = operations_whatif.build(ctx)
    assert section.chart is not None and "repair.technicians = 8" in section.reading
    empty = ReportContext(wh, {"fleetsim_results": res.clear()}, 16_384)
    assert operations_whatif.build(empty) is None
    assert pl.Series(operations_whatif.spare_frame(res)["knob_value"]).unique().len() == 2


def test_the_docs_describe_every_scenario_key():
    from pathlib import Path

    from analysis.fleetsim.scenario import JOB
    from analysis.fleetsim.scenario import LISTS
    from analysis.fleetsim.scenario import SCHEMA

    text = (Path(__file__).parents[1] / "docs" / "fleetsim.md").read_text()
    keys = [k for k, v in SCHEMA.items() if not isinstance(v, dict)] + list(LISTS)
    keys += [f"{s}.{k}" for s, sub in SCHEMA.items() if isinstance(sub, dict) for k in sub]
    keys = [k for k in keys if k not in ("replications.max", "replications.rel_halfwidth")]
    missing = [k for k in keys if f"`{k}`" not in text]
    missing += ["replications.rel_halfwidth"] if "`replications.rel_halfwidth`" not in text else []
    jobs_row = next(line for line in text.splitlines() if line.startswith("| `jobs` |"))
    missing += [k for k in JOB if k not in jobs_row]
    assert not missing


def test_measured_mix_follows_the_gpu_hours_of_job_attempts():
    from datetime import datetime
    from datetime import timedelta

    from analysis.fleetsim.run import MEASURED_LOAD
    from analysis.fleetsim.run import measured_jobs

    t0 = datetime(2026, 1, 1)
    attempts = pl.DataFrame({
        "start_time": [t0] * 4,
        "end_time": [t0 + timedelta(hours=h) for h in (10, 10, 10, 5)],
        "n_gpus": [8, 8, 1024, 1024],  # GPU-hours: 160 of 8-GPU jobs, 15,360 of 1024-GPU jobs
    })  # fmt: skip
    spec = spec_of(fleet={"nodes": 1000, "hot_spares": 0})
    jobs = measured_jobs(attempts, spec)
    assert [j["gpus"] for j in jobs] == [8, 1024]
    room = 1000 * MEASURED_LOAD
    assert jobs[0]["count"] == round(160 / 15_520 * room)
    assert jobs[1]["count"] == round(15_360 / 15_520 * room / 128)
    with pytest.raises(ScenarioError, match="no finished job"):
        measured_jobs(attempts.clear(), spec)


def test_a_scenario_runs_on_the_warehouses_fits_repair_law_and_job_mix(demo):
    """Driven by the demo's fitted laws (``failure_rates``), repair-time fit (``repair_fits``
    from node events) and measured job mix (``job_attempts``). Uses the session's demo."""
    from analysis.fleetsim.run import resolve

    wh, _ = demo
    spec = validate(
        {
            "horizon_days": 30,
            "fleet": {"nodes": 64, "hot_spares": 2},
            "repair": {"technicians": 2},
            "replications": {"min": 2, "max": 2},
        }
    )
    inputs = resolve(spec, wh)
    assert (
        inputs.repair_law.name
        == wh.read("repair_fits").filter((pl.col("quantity") == "repair") & pl.col("selected"))[
            "model"
        ][0]
    )
    sizes = [j["gpus"] for j in inputs.jobs]
    assert sizes == sorted(sizes) and max(sizes) <= 64 * 8
    assert "gpu" in inputs.rates.classes
    est = simulate(spec, inputs, workers=1)
    for g in sizes:
        assert 0.5 < est.mean[f"ettr:{g}"] <= 1.0
    assert est.mean["failures"] > 0
    with pytest.raises(ScenarioError, match="rate_multipliers.nope: no such class"):
        resolve(validate({**spec, "rate_multipliers": {"nope": 2.0}}), wh)


def test_warm_standbys_replace_a_node_after_their_activation_time():
    spec = spec_of(
        fleet={"nodes": 12, "hot_spares": 0, "warm_standbys": 4, "warm_activation_hours": 3.0},
        triage={"hours": 0.0, "detect_prob": 0.0},
        repair={"params": {"scale_hours": 2.0}},
    )  # fmt: skip
    instant = with_knob(spec, "fleet.warm_activation_hours", 0.0)
    hot = with_knob(with_knob(spec, "fleet.warm_standbys", 0), "fleet.hot_spares", 4)
    slow, fast, h = (
        engine.run(s, node_rates(1 / 800), exp_law(2.0), s["jobs"], 5) for s in (spec, instant, hot)
    )
    jobs = ("fleet_goodput", "goodput:64", "ettr:64", "interruptions")
    assert [fast[k] for k in jobs] == [h[k] for k in jobs]  # an instant standby is a hot spare
    # a replacement by a standby restarts after 3 h instead of 0.25 h: 2.75 h lost each time
    # (a little less: a failure during the longer wait costs no rework)
    lost = (fast["goodput:64"] - slow["goodput:64"]) * spec["horizon_days"] * 24
    served = slow["interruptions"] * (1 - h["spare_blocking"])
    assert 0.8 * 2.75 * served < lost <= 2.75 * served


def test_every_gpu_hour_of_a_job_is_productive_or_lost_to_a_named_cause():
    spec = spec_of(
        fleet={"nodes": 12, "hot_spares": 2},
        maintenance={"every_days": 7, "hours": 6, "group_nodes": 4},
        triage={"hours": 0.5, "detect_prob": 0.3, "false_blame_prob": 0.3},
        repair={"technicians": 1, "params": {"scale_hours": 30.0}},
    )  # fmt: skip
    m = engine.run(spec, node_rates(1 / 100), exp_law(30.0), spec["jobs"], 1)
    held = 64 * spec["horizon_days"] * 24
    lost = {k: v for k, v in m.items() if k.startswith("lost_gpu_hours:")}
    assert {"lost_gpu_hours:psu", "lost_gpu_hours:maintenance", "lost_gpu_hours:checkpoint"} <= set(
        lost
    )
    assert m["goodput:64"] * held + sum(lost.values()) == pytest.approx(held, rel=1e-9)


def test_a_measured_mix_too_big_for_the_fleet_is_a_one_line_error():
    from datetime import datetime
    from datetime import timedelta

    from analysis.fleetsim.run import measured_jobs

    t0 = datetime(2026, 1, 1)
    attempts = pl.DataFrame(
        {"start_time": [t0] * 2, "end_time": [t0 + timedelta(hours=1)] * 2, "n_gpus": [8, 240]}
    )
    with pytest.raises(ScenarioError, match="needs 31 nodes but 10 lie outside"):
        measured_jobs(attempts, spec_of(fleet={"nodes": 10, "hot_spares": 0}))
