"""Lifetime models as objects: the registry, every model against lifelines on the same
left-truncated, censored data, sampling and residual life against the model's own survival
function, and failure_rates unchanged by the move to the registry."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis import lifetime_models as lm
from analysis import survival as sv
from analysis.lifetime_models.base import Sample
from analysis.survival.rates import _RATE_COLUMNS
from analysis.survival.windows import MIN_WINDOW_HOURS
from sample_data.lifetimes import simulate_lifetimes
from tests.conftest import FIXTURES

FIX = FIXTURES / "survival"

# a law per model with hazards on the scale of fleet components (hours)
TRUTH = {
    "exponential": {"scale_hours": 6000.0},
    "weibull": {"shape": 0.7, "scale_hours": 8000.0},
    "lognormal": {"mu_log_hours": 8.5, "sigma": 1.3},
    "loglogistic": {"shape": 2.5, "scale_hours": 5000.0},
    "gompertz": {"initial_rate_per_hour": 5e-5, "growth_per_hour": 4e-4},
}


def _observed(model, n: int, seed: int) -> Sample:
    """Units of the given law installed uniformly over the 2 years before a 1-year window:
    those alive at its start enter at their age (left truncation), the rest are censored at
    its end or by random removal."""
    rng = np.random.default_rng(seed)
    install = rng.uniform(-17520.0, 8760.0, n)
    life = model.sample(n, rng)
    entry = np.maximum(0.0, -install)
    end = np.minimum(8760.0 - install, rng.exponential(30000.0, n))
    seen = (life > entry) & (end > entry)
    entry, life, end = entry[seen], life[seen], end[seen]
    event = life <= end
    upper = np.where(event, life, end)
    return Sample(entry, upper, upper, event, np.zeros(len(upper), dtype=bool))


def test_registry_finds_every_model_module_without_a_list():
    mods = sorted(p.stem for p in Path(lm.__file__).parent.glob("*.py"))
    assert set(lm.names()) == set(TRUTH)
    assert lm.names()[0] == "exponential"  # the closed-form, all-units model first
    assert {"gompertz", "weibull"} <= set(mods)
    with pytest.raises(ValueError, match="unknown lifetime model 'gamma'"):
        lm.get("gamma")


@pytest.mark.parametrize("name", list(TRUTH))
def test_fit_agrees_with_lifelines_on_truncated_censored_data(name):
    m = lm.get(name)
    s = _observed(m(**TRUTH[name]), 3000, seed=len(name))
    assert s.entry.max() > 0 and 50 < s.n_events < s.n  # truncated, censored, informative
    ours, ref = m.fit(s), m.fit_lifelines(s)
    assert ours["converged"]
    assert ours["loglik"] == pytest.approx(ref["loglik"], abs=2e-3)
    for p in m.params:
        v, lo, hi = ours["params"][p]
        rv, rlo, rhi = ref["params"][p]
        assert v == pytest.approx(rv, rel=5e-3)
        assert lo < TRUTH[name][p] < hi or abs(math.log(v / TRUTH[name][p])) < 0.3
        assert hi - lo == pytest.approx(rhi - rlo, rel=0.15)  # log- vs natural-scale Wald
    assert m.aic(ours) == pytest.approx(2 * len(m.params) - 2 * ref["loglik"], abs=5e-3)


def test_exponential_closed_form_equals_lifelines_and_numeric_fit():
    m = lm.get("exponential")
    s = _observed(m(scale_hours=5000.0), 2000, seed=1)
    exact, numeric, ref = m.exact_fit(s), m.fit(s), m.fit_lifelines(s)
    assert exact["params"]["scale_hours"][0] == pytest.approx(s.exposure / s.n_events, rel=1e-12)
    assert exact["params"]["scale_hours"][0] == pytest.approx(
        ref["params"]["scale_hours"][0], rel=1e-5
    )
    assert numeric["loglik"] == pytest.approx(exact["loglik"], abs=1e-6)


@pytest.mark.parametrize("name", list(TRUTH))
def test_sample_and_residual_life_follow_the_survival_function(name):
    d = lm.get(name)(**TRUTH[name])
    rng = np.random.default_rng(7)
    x = d.sample(200_000, rng)
    qs = np.quantile(x, [0.1, 0.25, 0.5, 0.75, 0.9])
    # empirical survival at its own quantiles vs the model's S(t)
    assert d.sf(qs) == pytest.approx([0.9, 0.75, 0.5, 0.25, 0.1], abs=4e-3)
    age = float(np.quantile(x, 0.4))
    r = d.residual_sample(age, rng, n=200_000)
    for q in (0.2, 0.5, 0.8):
        t = float(np.quantile(r, q))
        assert d.sf(age + t) / d.sf(age) == pytest.approx(1 - q, abs=4e-3)
    ages = np.array([0.0, age, 3 * age])  # one draw per age, all non-negative
    assert d.residual_sample(ages, rng).shape == (3,)
    # mean in closed form vs the sample mean (all five laws here have a finite variance)
    assert d.mean() == pytest.approx(x.mean(), rel=0.02)
    assert float(d.cumulative_hazard(age)) == pytest.approx(-math.log(float(d.sf(age))), rel=1e-9)


def test_from_params_reads_a_failure_rates_row():
    rng = np.random.default_rng(2)
    lt = simulate_lifetimes({"gpu": (0.7, 9000.0)}, 3000, rng)
    fr = sv.failure_rates(lt, window=None)
    for row in fr.filter(pl.col("converged")).iter_rows(named=True):
        d = lm.get(row["model"]).from_params(row["params"])
        params = json.loads(row["params"])
        for p in d.params:
            assert getattr(d, p) == params[p]["value"]
        assert d.mean() > 0
    wb = fr.filter(pl.col("model") == "weibull").row(0, named=True)
    d = lm.get("weibull").from_params(wb["params"])
    assert d.shape == pytest.approx(wb["shape"])
    # zero failures: the exposure-table exponential has an infinite scale, not a crash
    zero = lm.get("exponential").from_params({"rate_per_hour": {"value": 0.0}})
    assert zero.mean() == math.inf and zero.sf(1e6) == 1.0


def test_gompertz_wear_out_is_selected_and_recovered():
    truth = TRUTH["gompertz"]
    g = lm.get("gompertz")(**truth)
    s = _observed(g, 6000, seed=3)
    lt = pl.DataFrame(
        {
            "component_class": "fan",
            "unit_id": [f"f{i}" for i in range(s.n)],
            "entry": s.entry,
            "duration": s.upper,
            "event": s.event,
        }
    )
    fr = sv.failure_rates(lt, window=None)
    sel = fr.filter(pl.col("selected")).row(0, named=True)
    assert sel["model"] == "gompertz"
    p = json.loads(sel["params"])
    for k, v in truth.items():
        assert p[k]["ci_low"] < v < p[k]["ci_high"]
    # the Weibull can only approximate it: its AIC is worse by more than 2
    wb = fr.filter(pl.col("model") == "weibull")["aic"][0]
    assert wb - sel["aic"] > 2


@pytest.mark.parametrize("name", ["sample_fleet", "simulated"])
def test_failure_rates_unchanged_for_the_four_original_models(name):
    """Committed before/after: the refactor keeps every number of the four original models
    (within 1e-6); ``simulated`` exercises per-unit, interval-censored and
    monthly-window fits, ``sample_fleet`` is the committed fleet's lifetimes."""
    lt = pl.read_parquet(FIX / f"{name}_lifetimes.parquet")
    before = pl.read_parquet(FIX / f"{name}_failure_rates_before.parquet")
    after = sv.failure_rates(lt)
    keys = ["component_class", "stratum", "window", "model"]
    # the old code's zero-length windows (an observation ending at 00:00 on the 1st; upper CI
    # ~1e17) are gone since windows shorter than a day are not made
    gone = before.filter(pl.col("exposure_hours") < MIN_WINDOW_HOURS)
    assert set(gone["window"]) == ({"2026-01"} if name == "simulated" else set())
    assert after.join(gone, on=keys).height == 0
    before = before.join(gone.select(keys), on=keys, how="anti")

    # failures detected at a midnight health check on the 1st (hbm) were counted in two months
    # by the old split; now once: those windows' data changed, every other row must not
    def monthly(fr):
        return fr.filter((pl.col("window") != "all") & (pl.col("model") == "exponential"))

    events = lt.group_by("component_class").agg(pl.col("event").sum().cast(pl.Int64).alias("d"))
    for fr, double in ((before, name == "simulated"), (after, False)):
        per = (
            monthly(fr)
            .group_by("component_class")
            .agg(pl.col("n_events").sum())
            .join(events, on="component_class")
        )
        assert (per["n_events"] > per["d"]).any() == double
        assert (per["n_events"] >= per["d"]).all()
    moved = (
        monthly(before).join(after, on=keys).filter(pl.col("n_events") != pl.col("n_events_right"))
    )
    assert set(moved["component_class"]) == ({"hbm"} if name == "simulated" else set())
    before = before.join(moved.select(keys[:3]), on=keys[:3], how="anti")
    j = before.join(after, on=keys, how="left", suffix="_after")
    assert j.height == before.height and j["n_units_after"].null_count() == 0
    # since the selection rule (analysis.survival.rates._own_rates), a row's rate and MTBF are its
    # own model's long-run values: the observed rate stays on the exponential rows, compared here
    own = list(_RATE_COLUMNS)
    exp_rows = j.filter(pl.col("model") == "exponential")
    for c in own:
        np.testing.assert_allclose(
            exp_rows[f"{c}_after"].to_numpy(), exp_rows[c].to_numpy(), rtol=1e-6
        )
    for c in before.columns:
        if c in own:
            continue
        if before[c].dtype == pl.Float64:
            a, b = j[c].to_numpy(), j[f"{c}_after"].to_numpy()
            assert np.array_equal(np.isfinite(a), np.isfinite(b)), c
            f = np.isfinite(a)
            np.testing.assert_allclose(b[f], a[f], rtol=1e-6, err_msg=c)
        elif c not in keys and c not in ("params", "selected", "shape_reading"):  # reworded
            assert j[c].to_list() == j[f"{c}_after"].to_list(), c
    for pa, pb in zip(j["params"], j["params_after"]):
        a, b = json.loads(pa), json.loads(pb)
        assert a.keys() == b.keys()
        for k, v in a.items():
            if isinstance(v, dict):
                for kk, x in v.items():
                    assert (x is None) == (b[k][kk] is None)
                    if x is not None:
                        assert b[k][kk] == pytest.approx(x, rel=1e-6)

    # the lowest AIC changes only where the new model (Gompertz) is the better fit (``selected``
    # was the lowest AIC then; now it is the rule of analysis.survival.rates._own_rates)
    def lowest(fr):
        return fr.filter(pl.col("aic") == pl.col("aic").min().over(keys[:3]))

    changed = lowest(before).join(lowest(after), on=keys, how="anti")
    winners = lowest(after).join(changed.select(keys[:3]).unique(), on=keys[:3])
    assert set(winners["model"]) <= {"gompertz"}


@pytest.mark.parametrize("name", [n for n in TRUTH if n != "exponential"])
def test_interval_censored_fit_agrees_with_lifelines(name):
    """Failures seen only at weekly health checks: the shared likelihood's interval term
    log(S(l) - S(t)) against lifelines' fit_interval_censoring on the same rows (in days:
    lifelines' interval-censored lognormal does not converge on ages of ~1e4 hours)."""
    m = lm.get(name)
    s = _observed(m(**TRUTH[name]), 1500, seed=5)
    check = 168.0
    hi = np.where(s.event, np.ceil(s.upper / check) * check, s.upper)
    # last healthy age > 0: lifelines' lognormal takes log of it
    lo = np.where(s.event, np.maximum(hi - check, np.maximum(s.entry, 1.0)), s.upper)
    s = Sample(s.entry / 24, hi / 24, lo / 24, s.event, s.event & (lo < hi))
    assert s.interval.sum() > 50
    ours, ref = m.fit(s), m.fit_lifelines(s)
    assert ours["converged"]
    assert ours["loglik"] == pytest.approx(ref["loglik"], abs=5e-3)
    for p in m.params:
        assert ours["params"][p][0] == pytest.approx(ref["params"][p][0], rel=5e-3)


def test_rate_over_the_window_and_its_ci_cover_the_truth_where_one_over_mean_does_not():
    """Weibull(0.8) units of mixed ages (installs spread over the two years before the
    window): the rate they show over the window is the law's expected failures over their
    spans / exposure, a quarter above the law's long-run 1 / mean here (young units fail more
    often). Each fit's rate over the window (``window_rate``) sits on the observed rate
    (the scale score makes them equal), its delta-method CI agrees with parametric draws
    from the fit and covers the truth in 20 of 20 samples (>= 17 expected at 95%); the
    fitted 1 / mean with the observed rate's relative width covers it in 3."""
    m = lm.get("weibull")
    law = m(shape=0.8, scale_hours=20_000.0)
    covered = long_run_covered = 0
    for seed in range(20):
        s = _observed(law, 1200, seed)
        truth = law.expected_failures(s) / s.exposure
        if seed == 0:
            assert 1.15 < truth * law.mean() < 1.35  # the two quantities differ
        fit = m.fit(s)
        rate, lo, hi = m.window_rate(fit, s)
        assert rate == pytest.approx(s.n_events / s.exposure, rel=1e-5)
        covered += lo <= truth <= hi
        fitted = m.from_theta(fit["theta"])
        rel = np.array([lo, hi]) / rate  # about the observed rate's relative width
        long_run_covered += bool(rel[0] <= truth * fitted.mean() <= rel[1])
        if seed == 0:  # the delta method against draws of the fit's parameters
            draws = np.random.default_rng(1).multivariate_normal(fit["theta"], fit["cov"], 2000)
            spread = [m.from_theta(th).expected_failures(s) / s.exposure for th in draws]
            q_lo, q_hi = np.quantile(spread, [0.025, 0.975])
            assert lo == pytest.approx(q_lo, rel=0.03) and hi == pytest.approx(q_hi, rel=0.03)
    assert covered >= 17
    assert long_run_covered <= 10
