"""Analytic projection: Daly's worked examples, the Llama 3 MTTI through Λ(N), bands, adapter."""

import json
import math

import numpy as np
import polars as pl
import pytest

from analysis.class_rates import ClassRates
from analysis.class_rates import rate_rows
from analysis.job import Job
from analysis.projection import daly_interval
from analysis.projection import interruption_rate
from analysis.projection import project
from analysis.projection import scale_points
from analysis.projection import unit_counts
from analysis.projection import useful_fraction
from analysis.projection import young_interval
from analysis.rate_sources import llama3_rates
from analysis.rate_sources import rates_from_failure_rates
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from analysis.taxonomy import llama3_mix
from tests.conftest import table
from warehouse.schemas import conform


@pytest.mark.parametrize("mtbf_h,expected_min", [(24, 117), (6, 57)])
def test_daly_worked_examples(mtbf_h, expected_min):
    tau_min = float(daly_interval(5 / 60, mtbf_h)) * 60
    assert tau_min == pytest.approx(expected_min, abs=1.0)
    # Young's first-order interval is the bare sqrt(2δM): 120 and 60 min
    assert float(young_interval(5 / 60, mtbf_h)) * 60 == pytest.approx(
        math.sqrt(2 * 5 * mtbf_h * 60)
    )


def test_daly_interval_caps_at_mtti_when_checkpoint_is_long():
    assert float(daly_interval(10.0, 4.0)) == 4.0


def test_llama3_mix_gives_mtti_of_3_1_hours_through_unit_counts():
    r = llama3_rates()
    assert sum(llama3_mix().values()) == 419
    mtti = 1.0 / float(interruption_rate(r, 16_384, 8)[0])
    assert mtti == pytest.approx(54 * 24 / 419, rel=1e-9)
    assert round(mtti, 1) == 3.1
    # Λ scales with the units: per-GPU classes with N, per-node ones with ceil(N/G)
    u = unit_counts(["gpu", "psu", "host_memory", "all"], [16_384, 12], 8)
    assert u.tolist() == [[16_384, 12], [4096, 4], [32_768, 32], [1, 1]]
    assert 1.0 / float(interruption_rate(r, 32_768, 8)[0]) == pytest.approx(mtti / 2)


def test_useful_fraction_matches_daly_expected_wall_time():
    m, d, r, tau = 3.0, 60 / 3600, 600 / 3600, 0.3
    wall_per_work = m * math.exp(r / m) * (math.exp((tau + d) / m) - 1) / tau
    assert float(useful_fraction(tau, d, r, m)) == pytest.approx(1 / wall_per_work)
    # Daly's interval is (near) optimal for that model
    taus = np.linspace(0.05, 1.5, 2000)
    best = taus[np.argmax(useful_fraction(taus, d, r, m))]
    assert float(daly_interval(d, m)) == pytest.approx(best, rel=0.02)
    # an asynchronous checkpoint (only 5 s blocking) does better than a 60 s stall
    p_sync = project(ClassRates.from_mtti(m), Job(8, ckpt_cost_s=60, restart_s=600))
    p_async = project(
        ClassRates.from_mtti(m), Job(8, ckpt_cost_s=60, restart_s=600, ckpt_blocking_s=5)
    )
    assert p_async.goodput[0] > p_sync.goodput[0] + 0.02


def test_bands_from_fit_uncertainty_and_none_for_mtti_override():
    p = project(
        llama3_rates(),
        Job(gpus_per_node=8, ckpt_cost_s=60, restart_s=600),
        [1024, 16_384, 131_072],
        samples=500,
    )
    assert np.all(p.goodput_ci_low < p.goodput) and np.all(p.goodput < p.goodput_ci_high)
    assert np.all(p.mtti_ci_low < p.mtti_hours) and np.all(p.mtti_hours < p.mtti_ci_high)
    assert np.all(np.diff(p.goodput) < 0)  # bigger jobs, lower goodput
    q = project(ClassRates.from_mtti(3.0), Job(16_384), samples=500)
    assert q.goodput_ci_low[0] == q.goodput[0] == q.goodput_ci_high[0]
    assert "no fit uncertainty" in q.notes["band"]


def test_lognormal_sampling_reads_ci_as_1_96_sigma():
    r = ClassRates(("gpu",), [1e-5], [0.5e-5], [2e-5])
    s = r.sample(200_000, 1)[:, 0]
    assert np.median(s) == pytest.approx(1e-5, rel=0.01)
    assert np.percentile(s, 2.5) == pytest.approx(0.5e-5, rel=0.02)
    assert np.percentile(s, 97.5) == pytest.approx(2e-5, rel=0.02)
    unseen = ClassRates(("cpu",), [0.0], [0.0], [3e-6]).sample(100_000, 2)[:, 0]
    assert unseen.min() >= 0 and np.percentile(unseen, 97.5) == pytest.approx(3e-6, rel=0.03)
    given = ClassRates(("gpu",), [1e-5], samples=np.array([[1e-5, 3e-5]]))
    assert set(np.unique(given.sample(100, 0))) == {1e-5, 3e-5}


def test_adapter_reads_selected_rows_and_weibull_shape():
    df = conform(
        "failure_rates",
        pl.DataFrame(
            [
                {
                    "component_class": "gpu",
                    "stratum": "all",
                    "window": "all",
                    "model": "weibull",
                    "selected": True,
                    "params": json.dumps(
                        {
                            "shape": {"value": 0.8, "ci_low": 0.7, "ci_high": 0.9},
                            "scale_hours": {"value": 1e5},
                        }
                    ),
                    # the row's rate, here the law's long-run rate 1 / mean
                    "rate_per_1k_unit_days": 24_000 / (1e5 * math.gamma(1.0 + 1.0 / 0.8)),
                    "rate_ci_low": 12_000 / (1e5 * math.gamma(1.0 + 1.0 / 0.8)),
                    "rate_ci_high": 48_000 / (1e5 * math.gamma(1.0 + 1.0 / 0.8)),
                },
                {
                    "component_class": "gpu",
                    "stratum": "all",
                    "window": "all",
                    "model": "exponential",
                    "selected": False,
                    "params": "{}",
                    "rate_per_1k_unit_days": 9.9,
                },
                {
                    "component_class": "psu",
                    "stratum": "all",
                    "window": "all",
                    "model": "exponential",
                    "selected": True,
                    "params": "{}",
                    "rate_per_1k_unit_days": 0.24,
                    "rate_ci_low": 0.12,
                    "rate_ci_high": 0.48,
                },
                {
                    "component_class": "psu",
                    "stratum": "all",
                    "window": "2026-01",
                    "model": "exponential",
                    "selected": True,
                    "params": "{}",
                    "rate_per_1k_unit_days": 5.0,
                },
            ]
        ),
    )
    r = rates_from_failure_rates(df)
    assert r.classes == ("gpu", "psu") and r.source == "fitted"
    # the selected Weibull row's rate, with the CI the table prints
    fitted = 1.0 / (1e5 * math.gamma(1.0 + 1.0 / 0.8))
    assert r.rate.tolist() == pytest.approx([fitted, 1e-5])
    assert r.ci_high.tolist() == pytest.approx([2 * fitted, 2e-5])
    assert r.laws[0].shape == pytest.approx(0.8) and r.laws[1].memoryless
    assert [row["model"] for row in rate_rows(r)] == ["weibull", "exponential"]
    assert r.has_uncertainty()
    drawn = rates_from_failure_rates(df, samples={"gpu": np.array([1e-4, 2e-4, 3e-4])})
    assert drawn.samples.shape == (2, 3) and drawn.samples[0].tolist() == [1e-4, 2e-4, 3e-4]
    assert np.all(drawn.samples[1] > 0) and len(set(drawn.samples[1])) == 3  # psu: from its CI
    with pytest.raises(ValueError):
        rates_from_failure_rates(df.filter(pl.col("selected").not_()).head(0))


def test_scale_points_cover_8_to_200k_in_whole_nodes():
    pts = scale_points()
    assert pts[0] == 8 and pts[-1] == 200_000 and np.all(pts % 8 == 0) and np.all(np.diff(pts) > 0)


def test_fitted_rates_carry_the_fits_posterior_draws():
    """Rates read from failure_rates take their uncertainty from the fit's events and exposure
    (Gamma(events + 1/2, exposure)), not from a shape assumed around the CI."""
    fr = table(
        "failure_rates",
        component_class=["gpu", "psu"],
        stratum="all",
        window="all",
        model="exponential",
        selected=True,
        params="{}",
        n_events=[40, 0],
        exposure_hours=[1.0e6, 5.0e5],
        rate_per_1k_unit_days=[40 / 1e6 * HOURS_PER_1K_UNIT_DAYS, 0.0],
        rate_ci_low=[0.686, 0.0],
        rate_ci_high=[1.31, 0.177],
    )
    rates = rates_from_failure_rates(fr)
    assert rates.samples is not None and rates.samples.shape[0] == 2
    assert abs(rates.samples[0].mean() - 40.5 / 1e6) / (40.5 / 1e6) < 0.05
    assert rates.samples[1].min() >= 0 and 0 < rates.samples[1].mean() < 3 / 5e5
    # a table without events/exposure falls back to draws around its CI
    ci_only = fr.drop("n_events", "exposure_hours")  # e.g. rates typed in from a vendor sheet
    assert rates_from_failure_rates(ci_only).samples is None
