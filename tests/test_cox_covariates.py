"""Cox covariates that do not invent effects: telemetry over the same first days of every unit
(a landmark), references chosen a priori, power read as an association; on simulated fleets
with known truth (``benchmarks.validate_claims.cox_fleet``)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from analysis.survival import hazard_ratios
from analysis.survival.cox import ASSOCIATIONS
from analysis.survival.cox import COVARIATE_DAYS
from benchmarks.validate_claims import cox_fleet
from sample_data.model import GPU_TEMP_BETA
from sample_data.model import TEMP_SD_C


def test_planted_temperature_effect_is_found_within_its_ci():
    hr = cox_fleet(0, GPU_TEMP_BETA)
    t = hr.filter(pl.col("component_class") == "gpu", pl.col("covariate") == "temp_mean")
    row = t.row(0, named=True)
    truth = math.exp(GPU_TEMP_BETA / TEMP_SD_C)  # 1.284 per degC
    assert row["ci_low"] <= truth <= row["ci_high"]
    assert row["kind"] == "effect" and row["unit"] == "per degC"
    assert (hr.filter(pl.col("covariate").is_in(ASSOCIATIONS))["kind"] == "association").all()


def test_null_fleet_claims_nothing():
    hr = cox_fleet(0, 0.0)
    assert hr.height and not hr["clear_effect"].any()


def test_covariate_window_landmark_leaves_out_units_observed_less():
    rng = np.random.default_rng(3)
    n = 600
    entry = rng.uniform(0, 5000, n)
    span = rng.uniform(0, 60 * 24, n)
    lt = pl.DataFrame(
        {
            "component_class": "gpu",
            "unit_id": [str(i) for i in range(n)],
            "entry": entry,
            "duration": entry + span,
            "event": rng.random(n) < 0.3,
            "temp_mean": rng.normal(60, 3, n),
        }
    )
    notes: list[str] = []
    hr = hazard_ratios(lt, notes)
    short = int((span <= COVARIATE_DAYS * 24).sum())
    assert hr["n"][0] == n - short
    assert any(f"{short:,} units observed under {COVARIATE_DAYS} days" in x for x in notes)
    # categorical covariates alone need no telemetry window: no landmark
    cats = lt.drop("temp_mean").with_columns(rack=pl.Series(rng.choice(["r2", "r1"], n)))
    out = hazard_ratios(cats)
    assert out["n"][0] == n and out["reference"][0] == "r1"


def _load_fleet(n: int, seed: int, rack_hr: float = 1.0, beta: float = 0.25) -> pl.DataFrame:
    """Units whose hazard depends only on their slot's temperature offset (``beta`` per degC)
    and, for rack r5 of eight, a factor ``rack_hr``; load drives utilisation, power and part of
    the measured temperature, as in the simulator's telemetry: temperature and power are
    collinear (r ~ 0.98) through the load alone."""
    rng = np.random.default_rng(seed)
    offset = rng.normal(0, 2.0, n)
    util = rng.uniform(0, 93, n)
    rack = rng.choice([f"r{i}" for i in range(1, 9)], n)
    hazard = 1 / 4000 * np.exp(beta * offset) * np.where(rack == "r5", rack_hr, 1.0)
    entry = rng.uniform(0, 2000, n) + COVARIATE_DAYS * 24
    life = entry + rng.exponential(1 / hazard)  # memoryless: left truncation is exact
    cens = entry + rng.uniform(0, 3000, n)
    return pl.DataFrame(
        {
            "component_class": "gpu",
            "unit_id": [str(i) for i in range(n)],
            "entry": entry - COVARIATE_DAYS * 24,
            "duration": np.minimum(life, cens),
            "event": life <= cens,
            "temp_mean": 33 + 0.33 * util + offset + rng.normal(0, 0.1, n),
            "power_mean": 68 + 5.9 * util + rng.normal(0, 0.5, n),
            "rack": rack,
        }
    )


def test_power_is_not_a_finding_adjusted_into_existence():
    """Power follows utilisation alone and does nothing to the hazard; given the measured
    temperature (load + the slot's offset), more power means a cooler slot, so in the model
    with temperature power reads as strongly protective. Its row comes from the model without
    the temperature it is collinear with: no effect, not claimed; the temperature effect,
    adjusted for the load, is found and its CI covers the truth."""
    lt = _load_fleet(3000, 1)
    hr = hazard_ratios(lt)
    rows = {r["covariate"]: r for r in hr.iter_rows(named=True)}
    power, temp = rows["power_mean"], rows["temp_mean"]
    assert power["left_out"] == "temp_mean" and power["kind"] == "association"
    assert not power["clear_effect"] and power["ci_low"] <= 1.0 <= power["ci_high"]
    assert temp["clear_effect"] and temp["ci_low"] <= math.exp(0.25) <= temp["ci_high"]
    assert temp["left_out"] is None
    # what the full model says of power: a confident, false protective effect
    from lifelines import CoxPHFitter

    full = lt.with_columns(pl.col("event").cast(pl.Int8)).select(
        "entry", "duration", "event", "temp_mean", "power_mean"
    )
    adjusted = CoxPHFitter().fit(full.to_pandas(), "duration", "event", entry_col="entry")
    assert adjusted.summary.loc["power_mean", "p"] < 1e-6
    assert adjusted.summary.loc["power_mean", "exp(coef)"] < 1.0


def test_a_categorical_is_one_likelihood_ratio_test_and_its_levels_follow_it():
    """Eight racks, r5 with twice the hazard: the rack is tested once, by the likelihood-ratio
    test of its seven levels against the model without them (here computed with lifelines
    directly); a level is claimed only if the rack is, and r5 is the level claimed. Without a
    rack effect no level is claimed."""
    from lifelines import CoxPHFitter
    from scipy import stats

    lt = _load_fleet(4000, 2, rack_hr=2.0)
    hr = hazard_ratios(lt)
    racks = hr.filter(pl.col("covariate").str.starts_with("rack="))
    assert racks.height == 7 and racks["family_p"].n_unique() == 1
    assert set(racks["reference"]) == {"r1"}  # the first by name, not the largest rack
    frame = lt.with_columns(
        pl.col("event").cast(pl.Int8),
        *((pl.col("rack") == f"r{i}").cast(pl.Float64).alias(f"rack=r{i}") for i in range(2, 9)),
    ).with_columns(entry=pl.col("entry") + COVARIATE_DAYS * 24)
    frame = frame.filter(pl.col("duration") > pl.col("entry"))

    def ll(cols):
        data = frame.select("entry", "duration", "event", *cols).to_pandas()
        return CoxPHFitter().fit(data, "duration", "event", entry_col="entry").log_likelihood_

    rack_cols = [f"rack=r{i}" for i in range(2, 9)]
    lr = 2 * (ll(["temp_mean", "power_mean", *rack_cols]) - ll(["temp_mean", "power_mean"]))
    assert racks["family_p"][0] == pytest.approx(stats.chi2.sf(lr, 7), rel=1e-3)
    claimed = racks.filter("clear_effect")["covariate"].to_list()
    assert claimed == ["rack=r5"]
    assert (racks["p_adjusted"] >= racks["family_p"]).all()

    null = hazard_ratios(_load_fleet(4000, 3))
    null_racks = null.filter(pl.col("covariate").str.starts_with("rack="))
    assert not null_racks["clear_effect"].any()


def test_a_categorical_alone_is_tested_against_the_model_without_covariates():
    """With the rack the only covariate, its likelihood-ratio test is against the partial
    likelihood with none (Breslow, delayed entry), which lifelines' own test of a fitted model
    against the null gives too."""
    from lifelines import CoxPHFitter

    lt = _load_fleet(3000, 4, rack_hr=1.5).drop("temp_mean", "power_mean")
    racks = hazard_ratios(lt).filter(pl.col("covariate").str.starts_with("rack="))
    frame = lt.with_columns(
        pl.col("event").cast(pl.Int8),
        *((pl.col("rack") == f"r{i}").cast(pl.Float64).alias(f"r{i}") for i in range(2, 9)),
    ).drop("component_class", "unit_id", "rack")
    cph = CoxPHFitter().fit(frame.to_pandas(), "duration", "event", entry_col="entry")
    assert racks["family_p"][0] == pytest.approx(cph.log_likelihood_ratio_test().p_value, rel=1e-4)


def test_the_same_units_in_another_row_order_give_the_same_table():
    """Row order is how two builds of one warehouse differ (DuckDB reads in parallel): failures
    at the same hour are ranked by that order in the PH test, so it must not depend on it."""
    rng = np.random.default_rng(5)
    n = 800
    entry = rng.uniform(0, 2000, n).round()
    lt = pl.DataFrame(
        {
            "component_class": "gpu",
            "unit_id": [f"u{i:04d}" for i in range(n)],
            "entry": entry,
            # whole days: failures tie, as failures in one hour of a build's records do
            "duration": entry + COVARIATE_DAYS * 24 + 24 * rng.integers(1, 40, n),
            "event": rng.random(n) < 0.4,
            "temp_mean": rng.normal(60, 3, n),
            "power_mean": rng.normal(400, 30, n),
        }
    )
    one = hazard_ratios(lt)
    for seed in range(3):
        other = hazard_ratios(lt.sample(fraction=1.0, shuffle=True, seed=seed))
        assert other.equals(one)
