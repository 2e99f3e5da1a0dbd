"""Monte Carlo: convergence to the analytic model where its assumptions hold, and the effects
the analytic model cannot show (Weibull ages, spares, async checkpoints, requeues)."""

import pytest

from analysis.class_rates import ClassRates
from analysis.job import Job
from analysis.lifetime_models.weibull import Weibull
from analysis.montecarlo import simulate
from analysis.projection import daly_interval
from analysis.projection import interruption_rate
from analysis.projection import useful_fraction
from analysis.rate_sources import llama3_rates

LLAMA = llama3_rates()
M = 1.0 / float(interruption_rate(LLAMA, 16_384, 8)[0])
D, R = 60 / 3600, 600 / 3600
TAU = float(daly_interval(D, M))


def test_agrees_with_analytic_within_1_percent_fixed_work():
    analytic = float(useful_fraction(TAU, D, R, M))
    res = simulate(
        LLAMA, Job(16_384, work_hours=400 * TAU, interval_hours=TAU), replicas=400, seed=3
    )
    s = res.summary()
    assert s["se"] < 0.002  # noise well under the 1% tolerance
    assert s["mean"] == pytest.approx(analytic, rel=0.01)
    assert s["unfinished"] == 0


def test_agrees_with_analytic_fixed_wall_and_off_optimum_interval():
    rates = ClassRates.from_mtti(1.0)
    for tau in (0.1, 0.5):
        analytic = float(useful_fraction(tau, 5 / 60, 10 / 60, 1.0))
        res = simulate(
            rates,
            Job(64, wall_hours=1000, interval_hours=tau, ckpt_cost_s=300, restart_s=600),
            replicas=200,
            seed=1,
        )
        assert res.summary()["mean"] == pytest.approx(analytic, rel=0.01)


def test_stationary_weibull_ages_keep_the_long_run_rate_new_units_do_not():
    shaped = ClassRates(
        LLAMA.classes,
        LLAMA.rate,
        laws=tuple(Weibull.unit(0.6 if c == "gpu" else 1.5) for c in LLAMA.classes),
    )
    cfg = Job(16_384, wall_hours=1296, interval_hours=TAU)
    stat = simulate(shaped, cfg, replicas=300, seed=2)
    # an equilibrium renewal process fails at exactly 1/mean lifetime: 419 expected
    assert stat.failures.mean() == pytest.approx(419, rel=0.03)
    new = simulate(
        shaped,
        Job(16_384, wall_hours=1296, interval_hours=TAU, initial_age="new"),
        replicas=300,
        seed=2,
    )
    assert new.failures.mean() > 1.5 * 419  # infant mortality of a fresh GPU fleet (shape 0.6)
    assert new.summary()["mean"] < stat.summary()["mean"] - 0.05


def test_spares_pool_and_repair_times():
    base = {"n_gpus": 16_384, "wall_hours": 1296, "interval_hours": TAU, "repair_hours": 24.0}
    none = simulate(LLAMA, Job(**base, spares=0), replicas=100, seed=4).summary()
    few = simulate(LLAMA, Job(**base, spares=4), replicas=100, seed=4).summary()
    many = simulate(LLAMA, Job(**base, spares=64), replicas=100, seed=4).summary()
    unlimited = simulate(LLAMA, Job(**base), replicas=100, seed=4).summary()
    assert none["mean"] < few["mean"] < many["mean"]
    assert none["mean_wait_hours"] > few["mean_wait_hours"] > many["mean_wait_hours"] >= 0
    assert unlimited["mean_wait_hours"] == 0
    assert many["mean"] == pytest.approx(unlimited["mean"], abs=0.003)  # enough spares: no waiting


def test_async_checkpoint_and_requeue_costs():
    rates = ClassRates.from_mtti(2.0)
    common = {
        "n_gpus": 512,
        "wall_hours": 1200,
        "interval_hours": 0.5,
        "ckpt_cost_s": 300,
        "restart_s": 120,
    }
    sync = simulate(rates, Job(**common), replicas=100, seed=5).summary()["mean"]
    asyn = simulate(rates, Job(**common, ckpt_blocking_s=10), replicas=100, seed=5).summary()[
        "mean"
    ]
    assert asyn > sync + 0.05
    # every failure requeues with a fixed 1 h queue wait: analytic with R = 2 min + 1 h
    rq = simulate(rates, Job(**common, requeue_prob=1.0, queue_wait_s=3600), replicas=200, seed=6)
    assert rq.summary()["mean"] == pytest.approx(
        float(useful_fraction(0.5, 300 / 3600, 62 / 60, 2.0)), rel=0.01
    )
    # restart-time spread: a lognormal restart with the same median costs more on average
    spread = simulate(rates, Job(**common, restart_sigma=1.0), replicas=200, seed=5).summary()[
        "mean"
    ]
    assert spread < sync


def test_rate_draws_widen_the_band():
    wide = ClassRates(("all",), [1 / 3], [1 / 6], [2 / 3])  # MTTI 3 h, CI 1.5-6 h
    cfg = Job(16_384, wall_hours=1296, interval_hours=TAU)
    point = simulate(wide, cfg, replicas=300, seed=7).summary()
    fit = simulate(wide, cfg, replicas=300, seed=7, rate_draws=wide.sample(300, 8)).summary()
    assert (fit["p97_5"] - fit["p2_5"]) > 1.5 * (point["p97_5"] - point["p2_5"])


@pytest.mark.parametrize("spares", [None, 0, 4, 16, 64])
def test_the_whole_timeline_at_once_equals_the_run_failure_by_failure(monkeypatch, spares):
    """A window of fixed wall time with fixed restart and repair times is computed over each
    job's whole failure sequence at once: on the same drawn failures, every job's goodput,
    work, failures met, wait and the time its spare pool first ran dry equal those of the
    failure-by-failure run."""
    import numpy as np

    from analysis import montecarlo

    job = Job(16_384, wall_hours=300.0, interval_hours=TAU, spares=spares, repair_hours=24.0)
    at_once = simulate(LLAMA, job, replicas=60, seed=3)
    monkeypatch.setattr(montecarlo._Run, "whole_timeline", lambda self, work: False)
    stepped = simulate(LLAMA, job, replicas=60, seed=3)
    for name in ("goodput", "work_hours", "failures", "wait_hours", "dry_at"):
        assert np.allclose(getattr(at_once, name), getattr(stepped, name), equal_nan=True), name
    assert at_once.failures.mean() > 50  # the jobs did fail


def test_spares_that_run_out_are_said_with_why(tmp_path):
    """The README's example on a fleet failing 20x as often as Llama 3: 16 spares repaired in
    24 h cannot keep up with ~330 hardware failures per repair time. The projection says the
    pool ran out, when and why, not a bare 0.0%; fewer jobs are simulated (each meets ~18,000
    failures), the band still over every rate draw."""
    from analysis.scenario import project_one
    from analysis.scenario import simulated_replicas
    from pipelines.cli.projection_text import format_projection

    rates = LLAMA.scaled(dict.fromkeys(LLAMA.classes, 20.0))
    job = Job(32_768, spares=16)
    assert 50 <= simulated_replicas(rates, job, 500) < 100
    res = project_one(None, job, method="mc", rates=rates)
    assert res["spares_ran_out"] == 1.0 and res["spares_ran_out_hours"] < 3
    assert res["hardware_failures_per_repair"] == pytest.approx(
        20 * 24 * sum(r * n for r, n, c in zip(LLAMA.rate, _units(32_768), LLAMA.classes,
                                               strict=True) if c not in ("software", "host_os",
                                                                         "unknown")), rel=1e-9
    )  # fmt: skip
    assert res["wait_share"] > 0.95 and 0 < res["goodput"] < 0.001
    text = "\n".join(format_projection(res))
    assert "spare pool            RAN OUT in 100% of simulated jobs" in text
    assert "0.0%  (95%" not in text  # a goodput under 0.1% is written with its digits
    plenty = project_one(None, Job(1_024, spares=16), method="mc", rates=LLAMA)
    assert plenty["spares_ran_out"] == 0.0 and plenty["hardware_failures_per_repair"] < 2
    assert "spare pool            never ran out" in "\n".join(format_projection(plenty))


def _units(n_gpus: int):
    from analysis.projection import unit_counts

    return unit_counts(LLAMA.classes, n_gpus, 8, LLAMA.counts)[:, 0]


def test_the_band_of_a_job_near_zero_goodput_stays_within_zero_and_one():
    # 16,384 GPUs with 16 spares and rates known to a factor of 8: the simulated jobs' linear
    # response to each draw's analytic goodput, read far from the point, went to -0.62
    from analysis.scenario import evaluate

    r = ClassRates(("gpu",), [2e-5], [2.5e-6], [8e-5])
    job = Job(16_384, wall_hours=720, interval_hours=0.5, spares=16, repair_hours=72)
    out = evaluate(r, job, method="mc", replicas=200, seed=1)
    assert 0.0 <= out["goodput_ci_low"] <= out["goodput"] <= out["goodput_ci_high"] <= 1.0
    assert out["goodput_ci_low"] == 0.0 and out["goodput_ci_high"] > 0.2
