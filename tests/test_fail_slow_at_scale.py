"""What fail-slow GPUs cost a synchronous job at scale (analysis/slowness/at_scale.py): the
closed forms against episodes simulated on the job's GPUs, and the fleet's process read from
the warehouse's tables."""

import json
import math

import numpy as np
import polars as pl
import pytest

from analysis.lifetime_models.exponential import Exponential
from analysis.lifetime_models.lognormal import LogNormal
from analysis.projection import useful_fraction
from analysis.slowness import at_scale
from analysis.slowness.at_scale import FailSlow
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from warehouse.schemas import FAIL_SLOW
from warehouse.schemas import conform

RATE = 2.0 / HOURS_PER_1K_UNIT_DAYS  # 2 episodes per 1,000 GPU-days, per GPU-hour
LAW = LogNormal(mu_log_hours=math.log(1.5), sigma=1.0)  # median 1.5 h


def simulated(n_gpus: int, fs: FailSlow, detect: float | None, hours: float, seed: int):
    """(share of [0, hours) with a GPU of the job slow, replacements) from episodes drawn on
    the job's GPUs: Poisson starts from well before 0 (the process in its steady state),
    each lasting its law's draw cut at ``detect``."""
    rng = np.random.default_rng(seed)
    lead = 200.0  # hours: no episode outlasts it at this law (P < 1e-6 per episode)
    n = rng.poisson(n_gpus * fs.rate * (hours + lead))
    start = rng.uniform(-lead, hours, n)
    d = fs.duration.sample(n, rng)
    replaced = int(((d > detect) & (start >= 0)).sum()) if detect is not None else 0
    end = start + (np.minimum(d, detect) if detect is not None else d)
    order = np.argsort(start)
    s, e = np.clip(start[order], 0, hours), np.clip(end[order], 0, hours)
    reach = np.maximum.accumulate(e)
    covered = np.sum(np.maximum(0.0, e - np.maximum(s, np.concatenate([[0.0], reach[:-1]]))))
    return covered / hours, replaced


@pytest.mark.parametrize(("n_gpus", "detect"), [(16_384, 5 / 60), (16_384, 1.0), (16_384, None),
                                                (100_000, 5 / 60), (100_000, 1.0)])  # fmt: skip
def test_slow_share_and_replacements_match_simulated_episodes(n_gpus, detect):
    fs = FailSlow(RATE, LAW, factor=1.34)
    hours = 4000.0
    share, replaced = simulated(n_gpus, fs, detect, hours, seed=n_gpus + int(100 * (detect or 0)))
    want = float(at_scale.slow_share(n_gpus, fs, detect))
    # episodes overlap for hours: the covered share's error is that of a mean over
    # roughly hours / (mean slow stretch) independent stretches
    assert share == pytest.approx(want, abs=0.02)
    expect = float(at_scale.replacements_per_hour(n_gpus, fs, detect)) * hours
    assert abs(replaced - expect) <= 4 * math.sqrt(max(expect, 1.0))
    if detect is None:
        assert replaced == expect == 0


def test_slowed_hours_is_the_laws_mean_cut_at_the_detection_time():
    m = 2.0
    exp = Exponential(scale_hours=m)
    for t in (0.1, 1.0, 5.0):
        assert at_scale.slowed_hours(exp, t) == pytest.approx(m * (1 - math.exp(-t / m)), 1e-6)
    assert at_scale.slowed_hours(exp, None) == pytest.approx(m)
    assert at_scale.slowed_hours(LAW, None) == pytest.approx(1.5 * math.exp(0.5), 1e-9)
    assert at_scale.slowed_hours(LAW, 0.0) == 0.0


def test_detecting_sooner_trades_slow_time_for_restarts_and_goodput_folds_in_both():
    fs = FailSlow(RATE, LAW, factor=1.34)
    base = {"mtti_hours": 3.0, "interval_hours": 0.5, "ckpt_cost_s": 60.0, "restart_s": 600.0}
    g = {}
    for t in (5 / 60, 1.0, None):
        g[t] = float(at_scale.goodput(16_384, fs, t, 3.0, 0.5, 60 / 3600, 600 / 3600))
        lam = 1 / 3.0 + float(at_scale.replacements_per_hour(16_384, fs, t))
        lost = float(at_scale.lost_share(16_384, fs, t))
        assert g[t] == pytest.approx(
            useful_fraction(0.5, 60 / 3600, 600 / 3600, 1 / lam) * (1 - lost)
        )
    # each replacement is a restart: 16,384 GPUs see 33 episodes a day
    lost = [float(at_scale.lost_share(16_384, fs, t)) for t in (5 / 60, 1.0, None)]
    swaps = [float(at_scale.replacements_per_hour(16_384, fs, t)) for t in (5 / 60, 1.0, None)]
    assert lost == sorted(lost) and swaps == sorted(swaps, reverse=True)
    assert swaps[0] * 24 == pytest.approx(16_384 * 2 / 1000 * float(LAW.sf(np.array([5 / 60]))[0]))
    rows = at_scale.detection_rows(16_384, fs, [5 / 60, None], {**base, "goodput": 0.9})
    assert [r["goodput"] for r in rows] == pytest.approx([g[5 / 60], g[None]])
    # never detected: 16,384 GPUs x 2 per 1,000 GPU-days x 2.47 h per episode = 2.8 slow at once
    assert rows[1]["slow_gpus"] == pytest.approx(16_384 * RATE * 1.5 * math.exp(0.5))
    assert rows[1]["lost_share"] == pytest.approx(
        -math.expm1(-rows[1]["slow_gpus"]) * (1 - 1 / 1.34)
    )


def test_the_fleets_process_comes_from_its_fail_slow_row_and_gpu_pinned_periods():
    rates = conform(
        "failure_rates",
        pl.DataFrame(
            {
                "component_class": [FAIL_SLOW, FAIL_SLOW, "gpu"],
                "model": ["lognormal", "exponential", "weibull"],
                "selected": [True, False, True],
                "rate_per_1k_unit_days": [2.0, 2.0, 9.0],
                "rate_ci_low": [1.0, 1.0, 8.0],
                "rate_ci_high": [4.0, 4.0, 10.0],
                "params": [
                    json.dumps(
                        {
                            "of": "duration_hours",
                            "mu_log_hours": {"value": 0.405},
                            "sigma": {"value": 1.0},
                        }
                    ),
                    "{}",
                    "{}",
                ],
            }
        ),
    )
    periods = conform(
        "slow_periods",
        pl.DataFrame(
            {
                "duration_hours": [2.0, 1.0, 5.0],
                "extra_hours": [0.5, 0.25, 4.0],
                "culprit_gpu": [3, 1, None],  # the last: workload imbalance, no GPU
            }
        ),
    )
    fs = at_scale.from_warehouse(rates, periods)
    assert fs.rate == pytest.approx(RATE)
    assert fs.rate_ci == pytest.approx((RATE / 2, 2 * RATE))
    assert (fs.duration.mu_log_hours, fs.duration.sigma) == (0.405, 1.0)
    assert fs.factor == pytest.approx(3.0 / 2.25)
    fs = at_scale.from_warehouse(rates, periods.filter(pl.col("culprit_gpu").is_null()))
    assert fs.factor == at_scale.FALCON_SLOWDOWN
    assert (
        at_scale.from_warehouse(rates.filter(pl.col("component_class") == "gpu"), periods) is None
    )


def _rates(fs: FailSlow | None = None):
    from dataclasses import replace

    from analysis.class_rates import ClassRates

    # the Llama 3 mix's fail-stop interruptions (one every 3.1 h at 16,384 GPUs), per GPU-hour
    per_gpu = ClassRates(("gpu",), np.array([419 / (54 * 24) / 16_384]))
    return replace(per_gpu, fail_slow=fs)


@pytest.mark.parametrize(
    ("n_gpus", "detect"), [(16_384, 5 / 60), (16_384, 1.0), (100_000, 5 / 60), (100_000, math.inf)]
)
def test_projections_fold_in_running_slow_as_the_closed_form_says(n_gpus, detect):
    """The analytic projection is at_scale.goodput at its own interval, split into its
    fail-stop part and the share lost running slow; the Monte Carlo's jobs, each meeting its
    own slow GPUs (replaced at detection as interruptions), average to it within their CI."""
    from analysis.job import Job
    from analysis.montecarlo import simulate
    from analysis.projection import project

    fs = FailSlow(RATE, LAW, factor=1.34)
    rates = _rates(fs)
    job = Job(n_gpus=n_gpus, slow_detect_hours=detect, wall_hours=400.0)
    p = project(rates, job)
    mtti = 1.0 / float(rates.rate[0] * n_gpus)
    t = None if math.isinf(detect) else detect
    want = at_scale.goodput(n_gpus, fs, t, mtti, p.interval_hours[0], 60 / 3600, 600 / 3600)
    assert p.goodput[0] == pytest.approx(float(want), rel=1e-12)
    lost = float(at_scale.lost_share(n_gpus, fs, t))
    assert p.slow_lost_share[0] == pytest.approx(lost) and p.slow_detect_hours == detect
    assert p.goodput[0] == pytest.approx(p.goodput_fail_stop[0] * (1 - lost))
    assert 1 / p.mtti_hours[0] == pytest.approx(
        1 / mtti + float(at_scale.replacements_per_hour(n_gpus, fs, t))
    )
    mc = simulate(rates, job, replicas=300, seed=7)
    se = mc.goodput.std(ddof=1) / math.sqrt(mc.goodput.size)
    assert abs(mc.goodput.mean() - p.goodput[0]) < 3 * se
    # (at 100,000 GPUs never detected some GPU is always slow: no spread at all)
    assert abs(mc.slow_lost.mean() - lost) <= 4 * mc.slow_lost.std() / math.sqrt(300) + 1e-6
    # without a fail-slow process: the fail-stop projection, and nothing said to be included
    plain = project(_rates(), job)
    assert plain.slow_lost_share is None and plain.goodput_fail_stop is None
    assert plain.goodput[0] == pytest.approx(
        float(useful_fraction(plain.interval_hours[0], 60 / 3600, 600 / 3600, mtti))
    )


def test_slow_fraction_of_simulated_jobs_averages_to_the_slow_share():
    fs = FailSlow(RATE, LAW)
    rng = np.random.default_rng(3)
    for n_gpus, detect in ((16_384, 5 / 60), (16_384, 1.0), (1_024, None)):
        f = at_scale.slow_fraction(n_gpus, fs, detect, np.full(400, 300.0), rng)
        se = f.std(ddof=1) / math.sqrt(f.size)
        assert abs(f.mean() - float(at_scale.slow_share(n_gpus, fs, detect))) < 3.5 * se


def test_a_projection_row_says_what_it_includes_of_running_slow():
    from analysis.job import Job
    from analysis.scenario import evaluate

    fs = FailSlow(RATE, LAW, factor=1.34)
    row = evaluate(_rates(fs), Job(n_gpus=16_384))
    points = 100 * (row["goodput"] - row["goodput_fail_stop"])
    assert points < 0
    assert at_scale.running_slow_note(row) == (
        f"includes running slow: {points:+.1f} points at detection in 60 min"
    )
    plain = evaluate(_rates(), Job(n_gpus=16_384))
    assert plain["slow_lost_share"] is None and plain["goodput_fail_stop"] == plain["goodput"]
    assert at_scale.running_slow_note(plain) == (
        "fail-slow not included (no fail_slow rate in failure_rates)"
    )


@pytest.mark.parametrize(("n_gpus", "detect"), [(16_384, 1.0), (100_000, 5 / 60), (100_000, 1.0)])
def test_the_band_carries_the_fail_slow_rates_uncertainty(n_gpus, detect):
    """Fail-stop rates known exactly and the fail-slow rate known to a factor of 2 (95% CI
    RATE/2 to 2 x RATE): the band is goodput at the rate's own 2.5% and 97.5% quantiles, as
    the closed form gives them (goodput falls as the rate rises, so its quantiles are the
    rate's); with no CI on either, the band is the point. The Monte Carlo's replicas, each at
    its own drawn rate, lose to running slow what the closed form says at their draws, on
    average."""
    from dataclasses import replace

    from scipy.stats import norm

    from analysis.job import Job
    from analysis.montecarlo import simulate
    from analysis.projection import project

    fs = FailSlow(RATE, LAW, factor=1.34, rate_ci=(RATE / 2, 2 * RATE))
    rates, job = _rates(fs), Job(n_gpus=n_gpus, slow_detect_hours=detect, wall_hours=400.0)
    p = project(rates, job)
    sigma = math.log(4.0) / (2 * norm.ppf(0.975))
    lam = float(rates.rate[0] * n_gpus)

    def g(rate_quantile: float) -> float:
        at = replace(fs, rate=RATE * math.exp(sigma * norm.ppf(rate_quantile)))
        return float(at_scale.goodput(n_gpus, at, detect, 1 / lam, p.interval_hours[0],
                                      60 / 3600, 600 / 3600))  # fmt: skip

    # the 2.5% quantile of 400 draws lies between the distribution's 1% and 5% (P > 0.99)
    assert g(0.99) <= p.goodput_ci_low[0] <= g(0.95)
    assert g(0.05) <= p.goodput_ci_high[0] <= g(0.01)
    assert p.goodput_ci_low[0] < p.goodput[0] - 0.002 < p.goodput_ci_high[0] - 0.004
    assert "rate drawn from its CI" in p.notes["band"]
    fixed = project(_rates(replace(fs, rate_ci=None)), job)
    assert fixed.goodput_ci_low[0] == fixed.goodput[0] == fixed.goodput_ci_high[0] == p.goodput[0]
    # the Monte Carlo: each replica at its own draw, and the same draws for the same seed
    mc = simulate(rates, job, replicas=400, seed=11, rate_draws=rates.sample(400, 11))
    drawn = fs.at_rate_draws(400, 11).rate[:, 0]
    assert np.array_equal(drawn, fs.at_rate_draws(400, 11).rate[:, 0])
    want = at_scale.lost_share(n_gpus, replace(fs, rate=drawn), detect)
    se = mc.slow_lost.std(ddof=1) / math.sqrt(400)
    assert abs(mc.slow_lost.mean() - want.mean()) < 3.5 * se
    point = simulate(_rates(replace(fs, rate_ci=None)), job, replicas=400, seed=11,
                     rate_draws=rates.sample(400, 11))  # fmt: skip
    assert mc.slow_lost.std() > 1.5 * point.slow_lost.std()


def test_the_monte_carlos_band_draws_the_fail_slow_rate_as_its_replicas_do():
    """The Monte Carlo's band is the analytic goodput of each rate draw moved by the simulated
    response: with the fail-slow rate known to a factor of 2 and the fail-stop rates exactly,
    it is as wide as the analytic band (which draws the rate the same way), not a point."""
    from analysis.job import Job
    from analysis.projection import project
    from analysis.scenario import evaluate

    fs = FailSlow(RATE, LAW, factor=1.34, rate_ci=(RATE / 2, 2 * RATE))
    job = Job(n_gpus=100_000, slow_detect_hours=1.0, wall_hours=400.0)
    a = project(_rates(fs), job)
    mc = evaluate(_rates(fs), job, method="mc", replicas=200)
    width, analytic = (
        mc["goodput_ci_high"] - mc["goodput_ci_low"],
        a.goodput_ci_high[0] - a.goodput_ci_low[0],
    )
    assert width == pytest.approx(analytic, rel=0.35)
