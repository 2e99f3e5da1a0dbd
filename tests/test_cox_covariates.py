"""Cox covariates that do not invent effects: telemetry over the same first days of every unit
(a landmark), references chosen a priori, power read as an association; on simulated fleets
with known truth (``benchmarks.validate_claims.cox_fleet``)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

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
    racks = hr.filter(pl.col("covariate").str.starts_with("rack="))
    assert set(racks["reference"]) == {"rack-01"}  # the first by name, not the largest rack


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
