"""The change tests of analysis/changes.py against closed forms and scipy, their calibration on
counts with no change (Poisson and clustered), their power on a real one, and their words."""

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from analysis.changes import NOISE
from analysis.changes import Change
from analysis.changes import dispersion
from analysis.changes import effective_units
from analysis.changes import rate_ratio
from analysis.changes import ratio_difference
from analysis.changes import share_difference


@pytest.mark.parametrize(("k1", "h1", "k0", "h0"), [(7, 100, 13, 100), (30, 168, 12, 96)])
def test_rate_ratio_is_the_exact_conditional_binomial_test(k1, h1, k0, h0):
    c = rate_ratio(k1, h1, k0, h0)
    test = binomtest(k1, k1 + k0, h1 / (h1 + h0))
    ci = test.proportion_ci(0.95, method="exact")
    assert c.estimate == pytest.approx((k1 / h1) / (k0 / h0))
    assert c.ci_low == pytest.approx(ci.low / (1 - ci.low) * h0 / h1)
    assert c.ci_high == pytest.approx(ci.high / (1 - ci.high) * h0 / h1)
    # two-sided as twice the smaller tail: the test the Clopper-Pearson interval inverts
    lower = binomtest(k1, k1 + k0, h1 / (h1 + h0), alternative="less").pvalue
    upper = binomtest(k1, k1 + k0, h1 / (h1 + h0), alternative="greater").pvalue
    assert c.p == pytest.approx(min(1.0, 2 * min(lower, upper)))
    assert (c.ci_low <= 1 <= c.ci_high) == (c.p >= 0.05)


def test_rate_ratio_edges():
    assert rate_ratio(0, 100, 0, 100) == Change("ratio", None, None, None, 1.0)
    assert rate_ratio(3, 0, 1, 100).p is None and rate_ratio(3, 0, 1, 100).words() == "n/a"
    none_before = rate_ratio(5, 100, 0, 100)
    assert math.isinf(none_before.estimate) and math.isinf(none_before.ci_high)
    assert none_before.words() == f"{NOISE} (95% CI -8% to +inf)"  # p = 1/16: not a change
    none_now = rate_ratio(0, 100, 12, 100)
    assert none_now.estimate == 0 and none_now.ci_low == 0 and none_now.real
    assert none_now.words() == "-100% (95% CI -100% to -64%)"


def test_a_dispersion_divides_the_counts():
    assert rate_ratio(20, 100, 10, 100, scale=2.0) == rate_ratio(10, 100, 5, 100)
    assert dispersion([10, 10, 10, 10], [1, 1, 1, 1]) == 1.0  # under-dispersed: floored at 1
    k = np.array([5, 30, 8, 27, 6, 24])
    assert dispersion(k, [1] * 6) == pytest.approx(((k - k.mean()) ** 2 / k.mean()).sum() / 5)
    assert dispersion([3, 9], [1, 1]) == 1.0  # fewer than three periods: nothing to estimate


def test_poisson_counts_without_a_change_are_called_one_at_most_5_percent():
    rng = np.random.default_rng(7)
    k = rng.poisson(40.0, size=(2000, 2))
    called = np.mean([rate_ratio(a, 168, b, 168).real for a, b in k])
    assert 0.01 < called <= 0.05


def test_clustered_counts_are_called_at_most_5_percent_with_their_dispersion():
    """Weekly counts of bursts (a negative binomial, variance three times the mean): the plain
    exact test calls far more than 5% of steady pairs a change; divided by the dispersion of the
    eight weeks before them, no more than about 5%."""
    rng = np.random.default_rng(11)
    mean, var = 40.0, 120.0
    weeks = rng.negative_binomial(mean**2 / (var - mean), mean / var, size=(600, 8))
    plain = np.mean([rate_ratio(w[-1], 168, w[-2], 168).real for w in weeks])
    scaled = np.mean(
        [rate_ratio(w[-1], 168, w[-2], 168, dispersion(w, [168] * 8)).real for w in weeks]
    )
    assert plain > 0.15 and scaled <= 0.06


def test_a_doubled_rate_is_found():
    rng = np.random.default_rng(3)
    found = np.mean(
        [
            rate_ratio(a, 168, b, 168).real
            for a, b in zip(rng.poisson(80, 200), rng.poisson(40, 200))
        ]
    )
    assert found > 0.9


def test_ratio_difference_uses_the_jackknife_and_the_chains_effective_number():
    y0, w0 = np.array([9.0, 18.0, 27.0, 40.0]), np.array([10.0, 20.0, 30.0, 40.0])
    y1, w1 = np.array([8.0, 16.0, 24.0, 30.0]), np.array([10.0, 20.0, 30.0, 40.0])

    def jack(y, w):
        loo = (y.sum() - y) / (w.sum() - w)
        return (len(w) - 1) / len(w) * ((loo - loo.mean()) ** 2).sum()

    c = ratio_difference(y1, w1, y0, w0)
    d = y1.sum() / w1.sum() - y0.sum() / w0.sum()
    v1, v0 = jack(y1, w1), jack(y0, w0)
    n = effective_units(w1)
    assert n == pytest.approx(100**2 / 3000)  # (sum w)^2 / sum w^2
    df = (v1 + v0) ** 2 / (v1**2 / (n - 1) + v0**2 / (n - 1))
    from scipy.stats import t

    half = t.ppf(0.975, df) * math.sqrt(v1 + v0)
    assert (c.estimate, c.ci_low, c.ci_high) == pytest.approx((d, d - half, d + half))
    assert c.p == pytest.approx(2 * t.sf(abs(d) / math.sqrt(v1 + v0), df))
    assert ratio_difference([1.0], [1.0], y0, w0).p is None  # one chain: nothing to vary


def test_a_week_of_one_dominant_chain_cannot_call_a_goodput_change():
    """Most GPU-hours in one chain per week: its goodput moving 3 points is within what one
    chain's luck gives, where many equal chains moving 3 points is a change."""
    w = np.array([1000.0, 10, 10, 10, 10])
    few = ratio_difference(0.90 * w, w, np.array([0.93 * w[0], *(0.90 * w[1:])]), w)
    assert not few.real and few.words().startswith(NOISE)
    rng = np.random.default_rng(5)
    many = np.full(200, 10.0)
    g1, g0 = 0.90 + rng.normal(0, 0.01, 200), 0.93 + rng.normal(0, 0.01, 200)
    assert ratio_difference(g1 * many, many, g0 * many, many).real


def test_share_difference_is_compound_poisson():
    a, b = np.array([10.0, 20.0, 5.0]), np.array([4.0, 4.0])
    c = share_difference(a, 1000.0, b, 800.0)
    assert c.estimate == pytest.approx(35 / 1000 - 8 / 800)
    wider = share_difference(a, 1000.0, b, 800.0, scale=2.0)
    assert wider.ci_high - wider.ci_low > c.ci_high - c.ci_low and wider.p > c.p
    assert share_difference(a, 0.0, b, 800.0).p is None
    assert share_difference([], 100.0, [], 100.0) == Change("difference", 0.0, 0.0, 0.0, 1.0)


def test_words_call_a_change_only_beyond_noise():
    real = Change("difference", 0.015, 0.002, 0.028, 0.02)
    assert real.words() == "+1.5 points (95% CI +0.2 to +2.8 points)"
    noise = Change("difference", 0.015, -0.003, 0.033, 0.11)
    assert noise.words() == f"{NOISE} (95% CI -0.3 to +3.3 points)"
    ratio = Change("ratio", 1.34, 1.05, 1.71, 0.01)
    assert ratio.words() == "+34% (95% CI +5% to +71%)"
    mtbf = ratio.inverse()
    assert (mtbf.estimate, mtbf.ci_low, mtbf.ci_high, mtbf.p) == pytest.approx(
        (1 / 1.34, 1 / 1.71, 1 / 1.05, 0.01)
    )
