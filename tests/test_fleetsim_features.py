"""The fleet simulator's round-2 features, each against a closed form or a limiting case
(analysis/fleetsim/closed_forms.py): the compute clock, aged laws across downtime, bad nodes,
silent repairs, fixed-work jobs, standbys, backfill, placement, scored retirement, the fits'
share of the CI, and the warehouse estimators."""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import lifetime_models
from analysis.class_rates import ClassRates
from analysis.fleetsim import closed_forms
from analysis.fleetsim import engine
from analysis.fleetsim.run import Inputs
from analysis.fleetsim.run import estimates
from analysis.fleetsim.run import simulate
from analysis.fleetsim.run import split_variance
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import validate
from analysis.fleetsim.scenario import with_knob
from tests.test_fleetsim import exp_law
from tests.test_fleetsim import node_rates
from tests.test_fleetsim import replicate
from tests.test_fleetsim import spec_of
from tests.test_fleetsim import within


def idle_fleet(nodes: int, **over) -> dict:
    """``nodes`` nodes that all age at rate 1 (one one-node job holds a node; the rest idle
    at factor 1), repaired at once unless told."""
    raw = {
        "horizon_days": 100,
        "idle_failure_factor": 1.0,
        "fleet": {"nodes": nodes},
        "triage": {"hours": 0.0, "detect_prob": 1.0},
        "repair": {"model": "exponential", "params": {"scale_hours": 1.0}},
        "jobs": [{"gpus": 8}],
    }
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) else v
    return validate(raw)


def test_compute_clock_matches_its_closed_form_and_wall_clock_matches_daly():
    r, tau, d, u0 = 1 / 80.0, 1.0, 120 / 3600, 2.0  # 8 nodes: MTTI 10 h; a long restart
    m = 1 / (8 * r)
    compute = spec_of(
        failure_clock="compute",
        horizon_days=400,
        jobs=[
            {
                "gpus": 64,
                "checkpoint_interval_hours": tau,
                "checkpoint_cost_s": d * 3600,
                "restart_s": u0 * 3600,
            }
        ],
    )
    est = replicate(compute, node_rates(r), exp_law(1.0), 8)
    closed = float(closed_forms.compute_clock_fraction(tau, d, u0, m))
    daly = float(
        closed_forms.np.asarray(
            __import__("analysis.projection").projection.useful_fraction(tau, d, u0, m)
        )
    )
    within(est, "goodput:64", closed, slack=0.002)
    assert closed - daly > 0.003  # the two semantics differ by more than the test's slack
    wall = replicate(with_knob(compute, "failure_clock", "wall"), node_rates(r), exp_law(1.0), 8)
    within(wall, "goodput:64", daly, slack=0.002)
    durable = with_knob(
        with_knob(compute, "jobs.checkpoint_cost_s", 0), "jobs.checkpoint_interval_hours", 0
    )
    est = replicate(durable, node_rates(r), exp_law(1.0), 8)
    within(est, "goodput:64", m / (m + u0), slack=0.002)
    assert est.mean["lost_gpu_hours:psu"] == pytest.approx(
        est.mean["interruptions"] * u0 * 64 / 1, rel=0.02
    )  # only restarts are lost when every step is durable


def test_an_aged_law_across_downtime_is_an_alternating_renewal_process():
    """Weibull shape 0.5 lifetimes (mean 100 h) and 50 h repairs: the unit's age stops while
    its node is down, so each node alternates lifetimes and repairs."""
    law = lifetime_models.get("weibull")(shape=0.5, scale_hours=50.0)
    rates = ClassRates(
        ("psu",),
        np.array([1 / law.mean()]),
        laws=(law,),
        law_rate=np.array([1 / law.mean()]),
        counts={"psu": ("node", 1)},
    )
    down = 50.0
    spec = idle_fleet(200, horizon_days=1000, triage={"hours": down})
    est = replicate(spec, rates, exp_law(1.0), 3)
    rate, avail = closed_forms.alternating_renewal(law.mean(), down)
    per_node_hour = est.mean["failures"] / (200 * 24_000)
    assert per_node_hour == pytest.approx(rate, rel=0.02)
    assert est.mean["node_availability"] == pytest.approx(avail, abs=0.005)


def test_no_bad_nodes_is_the_homogeneous_fleet_and_all_bad_uncured_is_a_rate_multiplier():
    base = spec_of(
        fleet={"nodes": 40, "hot_spares": 4},
        jobs=[{"gpus": 64, "count": 4}],
        triage={"hours": 0.5, "detect_prob": 0.5},
        repair={"technicians": 2},
    )
    none = with_knob(base, "bad_nodes.share", 0.0)
    gentle = with_knob(with_knob(base, "bad_nodes.share", 0.4), "bad_nodes.multiplier", 1.0)
    a, b, c = (
        engine.run(s, node_rates(1 / 500), exp_law(4.0), s["jobs"], 7) for s in (base, none, gentle)
    )
    assert a == b == c  # no bad node: the same replication, draw for draw
    all_bad = with_knob(
        with_knob(with_knob(base, "bad_nodes.share", 1.0), "bad_nodes.multiplier", 3.0),
        "bad_nodes.cure_prob",
        0.0,
    )
    scaled = replicate(with_knob(base, "rate:psu", 3.0), node_rates(1 / 500), exp_law(4.0), 6)
    bad = replicate(all_bad, node_rates(1 / 500), exp_law(4.0), 6)
    for k in ("failures", "fleet_goodput"):
        lo = min(bad.ci_low[k], scaled.ci_low[k])
        assert abs(bad.mean[k] - scaled.mean[k]) < 2 * (max(bad.ci_high[k], scaled.ci_high[k]) - lo)
    assert bad.mean["systematic_failures"] == pytest.approx(bad.mean["failures"] * 2 / 3, rel=0.05)


def test_cure_probability_one_makes_a_bad_node_good_after_its_first_repair():
    r, m, n, hours = 1 / 500.0, 5.0, 2000, 2000.0
    spec = idle_fleet(n, horizon_days=hours / 24, bad_nodes={"share": 0.5, "multiplier": m})
    runs = [engine.run(spec, node_rates(r), exp_law(1.0), spec["jobs"], s) for s in range(3)]
    failures = np.mean([x["failures"] for x in runs])
    truth = n / 2 * closed_forms.cured_bad_node_failures(r, m, hours) + n / 2 * r * hours
    assert failures == pytest.approx(truth, rel=0.02)
    excess = n / 2 * -math.expm1(-m * r * hours) * (m - 1) / m  # the first failure, if excess
    assert np.mean([x["systematic_failures"] for x in runs]) == pytest.approx(excess, rel=0.05)
    assert all(x["bad_nodes"] == 0 for x in runs)  # every bad node failed once and was cured
    kept = engine.run(
        with_knob(spec, "bad_nodes.cure_prob", 0.0), node_rates(r), exp_law(1.0), spec["jobs"], 0
    )
    assert kept["failures"] == pytest.approx(n / 2 * r * hours * (1 + m), rel=0.03)
    grown = engine.run(
        with_knob(spec, "bad_nodes.appear_per_day", 2.0),
        node_rates(r),
        exp_law(1.0),
        spec["jobs"],
        0,
    )
    assert grown["cures"] > runs[0]["cures"] + 0.8 * 2.0 * hours / 24 * 0.5


def test_silent_repairs_and_undiagnosed_failures_leave_the_fault_to_fail_again():
    r, refail = 1 / 400.0, 5.0
    spec = idle_fleet(400, horizon_days=200, triage={"refail_hours": refail})
    base = engine.run(spec, node_rates(r), exp_law(1.0), spec["jobs"], 1)
    p = 0.3
    silent = engine.run(
        with_knob(spec, "repair.silent_fail_prob", p), node_rates(r), exp_law(1.0), spec["jobs"], 1
    )
    # each failure is followed by a silent repair with p: a geometric run of re-failures
    assert silent["failures"] == pytest.approx(base["failures"] / (1 - p), rel=0.04)
    assert silent["silent_repairs"] == pytest.approx(p * silent["failures"], rel=0.06)
    never = with_knob(
        with_knob(spec, "repair.silent_fail_prob", p), "triage.refail_hours", math.inf
    )
    quiet = engine.run(never, node_rates(r), exp_law(1.0), spec["jobs"], 1)
    assert quiet["failures"] == pytest.approx(base["failures"], rel=0.04)  # AIReSim's semantics
    blind = with_knob(spec, "triage.diagnosis_prob", 0.0)
    b = engine.run(blind, node_rates(r), exp_law(1.0), spec["jobs"], 1)
    assert b["node_availability"] == 1.0  # nothing is ever pulled
    assert b["failures"] > 1.5 * base["failures"]  # and every fault stays to strike again


def test_fixed_work_job_wall_time_ettr_and_standbys():
    r, u0, work, sel = 1 / 800.0, 0.25, 500.0, 1.0  # 8 nodes: MTTI 100 h
    spec = spec_of(
        failure_clock="compute",
        horizon_days=100,
        fleet={"nodes": 12, "hot_spares": 0},
        triage={"hours": 0.0, "detect_prob": 0.0},
        scheduler={"host_selection_hours": sel},
        repair={"params": {"scale_hours": 50.0}},
        jobs=[
            {
                "gpus": 64,
                "work_hours": work,
                "standbys": 4,
                "checkpoint_interval_hours": 0,
                "checkpoint_cost_s": 0,
                "restart_s": u0 * 3600,
            }
        ],
    )
    est = replicate(spec, node_rates(r), exp_law(50.0), 12)
    m = 1 / (8 * r)
    # placed once (host selection), then every failure costs a restart: a standby steps in
    truth = sel + work * (m + u0) / m
    within(est, "wall_hours:64", truth, slack=0.002 * truth)
    within(est, "ettr:64", work / truth, slack=0.001)
    assert est.mean["unfinished_jobs"] == 0
    bare = replicate(with_knob(spec, "jobs.standbys", 0), node_rates(r), exp_law(50.0), 12)
    # without standbys each replacement is a free node, placed by a host selection
    within(bare, "wall_hours:64", sel + work * (m + u0 + sel) / m, slack=0.002 * truth)


def test_backfill_starts_a_short_job_without_delaying_the_head():
    # 10 nodes: a 6-node job runs 100 h; an 8-node head waits for it; a 4-node 50 h job behind
    # fits the 4 free nodes and ends before the head's reservation at 100 h: backfill starts it
    jobs = [
        {"gpus": 48, "work_hours": 100.0, "checkpoint_interval_hours": 0, "checkpoint_cost_s": 0},
        {
            "gpus": 64,
            "work_hours": 100.0,
            "checkpoint_interval_hours": 0,
            "checkpoint_cost_s": 0,
            "submit_hours": 1.0,
        },
        {
            "gpus": 32,
            "work_hours": 50.0,
            "checkpoint_interval_hours": 0,
            "checkpoint_cost_s": 0,
            "submit_hours": 2.0,
        },
    ]
    spec = spec_of(fleet={"nodes": 10, "hot_spares": 0}, jobs=jobs, horizon_days=30)
    fifo = engine.run(spec, node_rates(0.0), exp_law(1.0), spec["jobs"], 0)
    bf = engine.run(
        with_knob(spec, "scheduler.policy", "backfill"),
        node_rates(0.0),
        exp_law(1.0),
        spec["jobs"],
        0,
    )
    assert fifo["queue_wait_hours:32"] == pytest.approx(198.0)  # after the head, at 200 h
    assert bf["queue_wait_hours:32"] == 0.0
    assert bf["queue_wait_hours:64"] == fifo["queue_wait_hours:64"] == pytest.approx(99.0)
    long = [dict(j) for j in jobs]
    long[2]["work_hours"] = 150.0  # would end after the reservation, on nodes the head needs
    later = with_knob(validate({**spec, "jobs": long}), "scheduler.policy", "backfill")
    late = engine.run(later, node_rates(0.0), exp_law(1.0), later["jobs"], 0)
    assert late["queue_wait_hours:32"] == pytest.approx(198.0)


def test_placement_fewest_failures_steers_jobs_away_from_bad_nodes():
    spec = spec_of(
        horizon_days=200,
        fleet={"nodes": 60, "hot_spares": 0},
        triage={"hours": 1.0, "detect_prob": 1.0},
        bad_nodes={"share": 0.3, "multiplier": 8.0, "cure_prob": 0.0},
        jobs=[
            {
                "gpus": 8,
                "work_hours": 20.0,
                "count": 400,
                "interarrival_hours": 10.0,
                "checkpoint_interval_hours": 0,
                "checkpoint_cost_s": 0,
            }
        ],
    )
    runs = {
        p: np.mean(
            [
                engine.run(
                    with_knob(spec, "scheduler.placement", p),
                    node_rates(1 / 300),
                    exp_law(1.0),
                    spec["jobs"],
                    s,
                )["interruptions"]
                for s in range(3)
            ]
        )
        for p in ("first_free", "fewest_failures", "avoid_recent")
    }
    assert runs["fewest_failures"] < 0.8 * runs["first_free"]
    idle = with_knob(with_knob(spec, "scheduler.placement", "fewest_failures"),
                     "idle_failure_factor", 1.0)  # fmt: skip
    assert engine.run(idle, node_rates(1 / 300), exp_law(1.0), spec["jobs"], 0)["failures"] > 0


def test_score_retirement_retires_the_bad_nodes_first():
    spec = idle_fleet(
        300,
        horizon_days=300,
        bad_nodes={"share": 0.1, "multiplier": 20.0, "cure_prob": 0.0},
        retirement={
            "policy": "score",
            "score_penalty": 40,
            "score_credit": 1,
            "score_period_days": 1,
            "score_threshold": 0,
        },
    )
    m = engine.run(spec, node_rates(1 / 4000), exp_law(1.0), spec["jobs"], 2)
    # a bad node loses ~32 a failure (every ~8 days), a good one gains ~127 (every ~167 days)
    assert 28 <= m["retired_nodes"] <= 32  # the 30 bad nodes, hardly a good one
    assert m["bad_nodes"] <= 5


def test_fit_uncertainty_widens_the_ci_and_is_split_from_the_simulation():
    rng = np.random.default_rng(0)
    theta = np.repeat(rng.normal(0, 2.0, 400), 2)  # pairs share a draw: fit sd 2
    x = theta + rng.normal(0, 1.0, 800)  # simulation sd 1
    fit, sim = split_variance(x)
    assert fit == pytest.approx(4.0, rel=0.15) and sim == pytest.approx(1.0, rel=0.1)
    uncertain = ClassRates(
        ("psu",),
        np.array([1 / 500]),
        ci_low=np.array([1 / 800]),
        ci_high=np.array([1 / 300]),
        counts={"psu": ("node", 1)},
    )
    spec = spec_of(
        fleet={"nodes": 40, "hot_spares": 4},
        jobs=[{"gpus": 64, "count": 4}],
        replications={"min": 12, "max": 12},
    )
    drawn = simulate(spec, Inputs(uncertain, exp_law(1.0), spec["jobs"]), workers=1)
    point = simulate(
        with_knob(spec, "replications.fit_uncertainty", False),
        Inputs(uncertain, exp_law(1.0), spec["jobs"]),
        workers=1,
    )
    k = "fleet_goodput"
    assert point.fit_half[k] == 0 and drawn.fit_half[k] > 2 * drawn.sim_half[k]
    assert drawn.ci_high[k] - drawn.ci_low[k] > 2 * (point.ci_high[k] - point.ci_low[k])
    half = (drawn.ci_high[k] - drawn.ci_low[k]) / 2
    assert half == pytest.approx(math.hypot(drawn.fit_half[k], drawn.sim_half[k]))
    est = estimates([{"a": 1.0}, {"a": 3.0}])
    assert est.fit_half["a"] == 0 and est.sim_half["a"] > 0
    # a replication whose fixed-work job did not finish has no wall time: left out, not 0
    est = estimates([{"wall_hours:8": 10.0, "lost_gpu_hours:psu": 4.0}, {}, {"wall_hours:8": 12.0}])
    assert est.mean["wall_hours:8"] == 11.0 and est.mean["lost_gpu_hours:psu"] == 4.0 / 3


def test_estimated_keys_are_one_line_errors_without_their_data():
    from analysis.fleetsim.estimate import bad_nodes
    from analysis.fleetsim.estimate import silent_repairs

    with pytest.raises(ScenarioError, match="share and multiplier are estimated together"):
        validate({"fleet": {"nodes": 4}, "bad_nodes": {"share": "estimated"}})
    import polars as pl

    with pytest.raises(ScenarioError, match="needs node_health with failures"):
        bad_nodes(pl.DataFrame({"failures": [0], "node_hours": [1.0]}))
    with pytest.raises(ScenarioError, match="at least 5 repairs"):
        silent_repairs(np.array([10.0, 20.0]), np.array([True, False]))


def test_bad_node_mixture_recovers_a_planted_share_and_multiplier():
    from analysis.fleetsim.estimate import mixture_phi
    from analysis.fleetsim.estimate import poisson_mixture
    from analysis.node_health import dispersion

    rng = np.random.default_rng(3)
    n, hours, r = 2000, 8760.0, 1 / 2000
    bad = rng.random(n) < 0.1
    k = rng.poisson(hours * r * np.where(bad, 6.0, 1.0))
    fit = poisson_mixture(k, np.full(n, hours))
    assert fit["kept"]
    assert fit["share"] == pytest.approx(0.1, abs=0.02)
    assert fit["multiplier"] == pytest.approx(6.0, rel=0.1)
    phi = dispersion(k, np.full(n, k.mean()))  # the lemon model's overdispersion
    assert mixture_phi(fit["share"], fit["multiplier"]) == pytest.approx(phi, rel=0.15)
    same = poisson_mixture(rng.poisson(hours * r, n), np.full(n, hours))
    assert not same["kept"] and same["share"] == 0 and same["multiplier"] == 1


def test_silent_repair_mixture_recovers_a_planted_probability_and_refail_time():
    from analysis.fleetsim.estimate import silent_repairs

    rng = np.random.default_rng(5)
    n, r, p, mu, window = 3000, 1 / 1000.0, 0.2, 10.0, 4000.0
    left = rng.random(n) < p
    t = rng.exponential(np.where(left, 1 / (r + 1 / mu), 1 / r))
    fit = silent_repairs(np.minimum(t, window), t < window)
    assert fit["silent_fail_prob"] == pytest.approx(p, abs=0.03)
    assert fit["refail_hours"] == pytest.approx(mu, rel=0.15)
    assert fit["rate"] == pytest.approx(r, rel=0.1)


def test_estimated_keys_are_filled_from_the_demo_warehouse(demo):
    """``estimated`` keys read node_health (bad nodes) and the repairs of failures /
    node_events (silent repairs); the scenario then runs on them."""
    from analysis.fleetsim.run import resolve

    wh, _ = demo
    spec = validate({
        "horizon_days": 20, "fleet": {"nodes": 64, "hot_spares": 2},
        "bad_nodes": {"share": "estimated", "multiplier": "estimated"},
        "repair": {"technicians": 2, "silent_fail_prob": "estimated"},
        "triage": {"refail_hours": "estimated"},
        "replications": {"min": 2, "max": 2},
    })  # fmt: skip
    inputs = resolve(spec, wh)
    f = inputs.filled
    assert 0 <= f["bad_share"] <= 1 and f["bad_multiplier"] >= 1
    assert 0 < f["silent_fail_prob"] < 1 and f["refail_hours"] > 0
    full = inputs.apply(spec)
    assert full["repair"]["silent_fail_prob"] == f["silent_fail_prob"]
    assert full["triage"]["refail_hours"] == f["refail_hours"]
    est = simulate(spec, inputs, workers=1)
    assert est.mean["failures"] > 0
    with pytest.raises(ScenarioError, match="reads the warehouse"):
        resolve(validate({"fleet": {"nodes": 4}, "repair": {"model": "exponential",
                          "params": {"scale_hours": 1.0}, "silent_fail_prob": "estimated"},
                          "jobs": [{"gpus": 8}], "rates": "x.csv"}))  # fmt: skip
