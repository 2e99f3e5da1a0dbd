"""Projections and the Monte Carlo use each class's selected fitted lifetime model, and the
fleet's age at job start (stationary / new / observed), checked against direct simulations
of the same laws (sample lifetimes, replace failed units, count failures)."""

import json
import math
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from analysis.class_rates import rate_rows
from analysis.fleet_age import AgeGroups
from analysis.fleet_age import expected_failures
from analysis.fleet_age_rates import with_fleet_age
from analysis.job import Job
from analysis.lifetime_models import get
from analysis.montecarlo import simulate
from analysis.projection import project
from analysis.rate_sources import rates_from_failure_rates
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS as PER_1K
from pipelines.cli import main
from warehouse.schemas import conform


def _fr(rows: list[dict]) -> pl.DataFrame:
    base = {"stratum": "all", "window": "all", "selected": True}
    return conform("failure_rates", pl.DataFrame([{**base, **r} for r in rows]))


def _weibull_row(cls, shape, scale, crude_per_1k, events=400):
    """A selected Weibull row whose rate columns are the law's long-run rate (1 / mean), apart
    from ``crude_per_1k`` (events / exposure): the projection takes the row's rate, whatever
    the events and exposure beside it say."""
    own = PER_1K / get("weibull")(shape=shape, scale_hours=scale).mean()
    return {
        "component_class": cls, "model": "weibull",
        "params": json.dumps({"shape": {"value": shape}, "scale_hours": {"value": scale}}),
        "n_events": events, "exposure_hours": events / crude_per_1k * PER_1K,
        "rate_per_1k_unit_days": own, "rate_ci_low": own * 0.9, "rate_ci_high": own * 1.1,
    }  # fmt: skip


def direct_counts(law, n_units, horizon, rng, burn_in=0.0):
    """Failures per unit position over [burn_in, burn_in + horizon]: units new at 0, each
    failure replaced by a new unit (the burn-in brings the renewal process to equilibrium)."""
    t = law.sample(n_units, rng)
    count = np.zeros(n_units)
    live = np.ones(n_units, dtype=bool)
    while live.any():
        count += live & (t >= burn_in) & (t < burn_in + horizon)
        live &= t < burn_in + horizon
        t[live] += law.sample(int(live.sum()), rng)
    return count


def test_mc_and_analytic_use_the_fitted_weibull_scale_not_the_crude_rate():
    """A shape-0.7 class whose row says 0.310 per 1,000 unit-days beside events / exposure of
    0.543: both paths must project the row's 0.310, the Monte Carlo with the law run at it."""
    shape = 0.7
    scale = PER_1K / 0.310 / math.gamma(1 + 1 / shape)
    rates = rates_from_failure_rates(_fr([_weibull_row("gpu", shape, scale, 0.543)]))
    assert rates.rate[0] * PER_1K == pytest.approx(0.310, rel=1e-9)
    assert rates.ci_high[0] * PER_1K == pytest.approx(0.310 * 1.1, rel=1e-9)
    n, horizon = 4096, 2000.0
    res = simulate(rates, Job(n, wall_hours=horizon, interval_hours=1.0), replicas=60, seed=5)
    expected = n * horizon * 0.310 / PER_1K  # 106 failures per job (0.543 would give 185)
    assert res.failures.mean() == pytest.approx(expected, rel=0.04)
    assert float(project(rates, Job(n)).mtti_hours[0]) == pytest.approx(
        horizon / expected, rel=1e-9
    )


@pytest.mark.parametrize(
    "name, params",
    [
        ("lognormal", {"mu_log_hours": 8.0, "sigma": 1.5}),
        ("gompertz", {"initial_rate_per_hour": 2e-4, "growth_per_hour": 5e-4}),
        ("loglogistic", {"shape": 1.6, "scale_hours": 3000.0}),
    ],
)
def test_any_selected_model_is_projected_with_its_own_law(name, params):
    """A selected lognormal / Gompertz / log-logistic is projected with its own law, not as
    an exponential: the stationary rate is the row's (here 1/mean of the law), the 'new' fleet
    counts its renewals at the law's own time scale, and the Monte Carlo agrees with a direct
    simulation of the law."""
    law = get(name)(**params)
    row = {
        "component_class": "gpu", "model": name, "n_events": 50, "exposure_hours": 1e5,
        "params": json.dumps({k: {"value": v} for k, v in params.items()}),
        "rate_per_1k_unit_days": PER_1K / law.mean(),  # the row's own rate (analysis.survival)
    }  # fmt: skip
    rates = rates_from_failure_rates(_fr([row]))
    assert rates.rate[0] == pytest.approx(1.0 / law.mean(), rel=1e-9)
    assert rate_rows(rates)[0]["model"] == name
    n, horizon = 512, 1500.0
    new = with_fleet_age(rates, "new", horizon)
    analytic = expected_failures(law, horizon, "new")
    assert new.rate[0] * horizon == pytest.approx(analytic, rel=1e-9)
    direct = direct_counts(law, 200_000, horizon, np.random.default_rng(1)).mean()
    assert analytic == pytest.approx(direct, rel=0.02)
    mc = simulate(new, Job(n, wall_hours=horizon, interval_hours=1.0), replicas=60, seed=2)
    assert mc.failures.mean() / n == pytest.approx(analytic, rel=0.03)


def test_new_fleet_mtti_is_shorter_and_both_agree_with_a_direct_simulation():
    """Shape-0.6 Weibull GPUs: a fleet of new units fails about 4x as often over a 54-day job
    as a stationary one; the analytic MTTI of each and the Monte Carlo's failure count agree
    with counting failures of simulated unit positions."""
    law = get("weibull")(shape=0.6, scale_hours=20_000.0)
    rates = rates_from_failure_rates(
        _fr([_weibull_row("gpu", 0.6, 20_000.0, 1.0)])  # crude rate is not used
    )
    n, horizon = 4096, 1296.0
    stat = with_fleet_age(rates, "stationary", horizon)
    new = with_fleet_age(rates, "new", horizon)
    m_stat, m_new = (float(project(r, Job(n)).mtti_hours[0]) for r in (stat, new))
    assert m_new < 0.4 * m_stat  # infant mortality reaches the projection
    rng = np.random.default_rng(7)
    c_new = direct_counts(law, 100_000, horizon, rng).mean()
    c_stat = direct_counts(law, 100_000, horizon, rng, burn_in=30 * law.mean()).mean()
    assert m_new == pytest.approx(horizon / (n * c_new), rel=0.03)
    assert m_stat == pytest.approx(horizon / (n * c_stat), rel=0.04)
    assert m_stat == pytest.approx(law.mean() / n, rel=1e-9)  # renewal rate 1/mean
    cfg = Job(n, wall_hours=horizon, interval_hours=1.0)
    for r, c in ((new, c_new), (stat, c_stat)):
        mc = simulate(r, cfg, replicas=30, seed=3).failures.mean()
        assert mc == pytest.approx(n * c, rel=0.04)


def test_exponential_classes_do_not_depend_on_fleet_age():
    rates = rates_from_failure_rates(_fr([{
        "component_class": "psu", "model": "exponential", "params": "{}",
        "rate_per_1k_unit_days": 0.24, "rate_ci_low": 0.12, "rate_ci_high": 0.48,
    }]))  # fmt: skip
    for age in ("stationary", "new", "observed"):
        r = with_fleet_age(rates, age, 1000.0)
        assert r.rate.tolist() == [0.24 / PER_1K]
        assert r.ci_high.tolist() == [0.48 / PER_1K]


def test_project_cli_observed_fleet_age_names_model_and_age_per_class(tmp_path, capsys):
    """`goodput project --fleet-age observed --json`: the GPUs' ages at the window end come
    from component_lifetimes (all 100 h old: young, so more failures than stationary); the
    PSU class has no lifetimes and stays stationary, and the JSON says so."""
    from warehouse.store import Warehouse

    home = tmp_path / "h"
    wh = Warehouse(str(home))
    wh.replace_table("failure_rates", _fr([
        _weibull_row("gpu", 0.6, 20_000.0, 1.0),
        {"component_class": "psu", "model": "exponential", "params": "{}",
         "rate_per_1k_unit_days": 0.24, "n_events": 24, "exposure_hours": 2.4e6},
    ]))  # fmt: skip
    end = datetime(2026, 1, 31, tzinfo=UTC)
    k = 50
    wh.replace_table("component_lifetimes", conform("component_lifetimes", pl.DataFrame({
        "component_class": ["gpu"] * (k + 1),
        "unit_id": [f"g{i}" for i in range(k + 1)],
        "observed_from": [end - timedelta(hours=100)] * (k + 1),
        "observed_to": [end] * k + [end - timedelta(hours=50)],
        "entry": [0.0] * (k + 1),
        "duration": [100.0] * k + [50.0],
        "event": [False] * k + [True],  # the failed unit is not in service at the end
    })))  # fmt: skip
    law = get("weibull")(shape=0.6, scale_hours=20_000.0)
    out = {}
    for age in ("stationary", "observed"):
        argv = ["--home", str(home), "project", "--scope", "hardware", "--gpus", "1024",
                "--fleet-age", age, "--horizon", "1000h", "--json"]  # fmt: skip
        assert main(argv) == 0
        out[age] = json.loads(capsys.readouterr().out)
    obs = {c["component_class"]: c for c in out["observed"]["classes"]}
    assert out["observed"]["fleet_age"] == "observed" and out["observed"]["horizon_hours"] == 1000
    assert (obs["gpu"]["model"], obs["gpu"]["fleet_age"]) == ("weibull", "observed")
    assert (obs["psu"]["model"], obs["psu"]["fleet_age"]) == (
        "exponential",
        "stationary (no observed ages)",
    )
    young = expected_failures(law, 1000.0, AgeGroups.at(100.0)) / 1000.0
    assert obs["gpu"]["rate_per_unit_hour"] == pytest.approx(young, rel=1e-9)
    assert obs["psu"]["rate_per_unit_hour"] == pytest.approx(1e-5, rel=1e-9)
    stat = {c["component_class"]: c for c in out["stationary"]["classes"]}
    assert stat["gpu"]["rate_per_unit_hour"] == pytest.approx(1.0 / law.mean(), rel=1e-9)
    assert out["observed"]["mtti_hours"] < 0.6 * out["stationary"]["mtti_hours"]
    stored = Warehouse(str(home)).read("goodput_projections").sort("fleet_age")
    assert stored["fleet_age"].to_list() == ["observed", "stationary"]
    assert stored["horizon_hours"].to_list() == [1000.0, 1000.0]


def test_observed_ages_are_aged_on_to_the_window_end(tmp_path, monkeypatch):
    """Units still in service within a day of the build's window end, aged on to that end;
    a unit whose observation stopped earlier (removed) and a failed unit are not ages."""
    from analysis import observation
    from analysis.fleet_age_rates import observed_ages
    from warehouse.store import Warehouse

    wh = Warehouse(str(tmp_path / "h"))
    end = datetime(2026, 1, 31, tzinfo=UTC)
    wh.replace_table("component_lifetimes", conform("component_lifetimes", pl.DataFrame({
        "component_class": ["gpu"] * 4, "unit_id": list("abcd"),
        "observed_from": [end - timedelta(hours=200)] * 4,
        "observed_to": [end - timedelta(hours=h) for h in (10, 30, 5, 0)],
        "entry": [0.0] * 4, "duration": [90.0, 70.0, 50.0, 400.0],
        "event": [False, False, True, False],
    })))  # fmt: skip
    monkeypatch.setattr(
        observation, "stored_window", lambda wh: observation.Window(None, end, "explicit")
    )
    ages = observed_ages(wh)
    assert sorted(ages["gpu"].ages.tolist()) == [100.0, 400.0]
    assert ages["gpu"].weights.tolist() == [0.5, 0.5]
