"""Kaplan-Meier curves say where they rest on a handful of units: points with fewer than
``MIN_AT_RISK`` units at risk are flagged (and the report's curves stop there), and no CI has
zero width (the report once read "0.0% still in service (95% CI 0.0%-0.0%)")."""

import numpy as np
import polars as pl

from analysis import survival as sv
from dashboards.section import ReportContext
from dashboards.sections import survival as section


def _lifetimes() -> pl.DataFrame:
    """psu: 40 new units, every one fails (the last failure empties the risk set: KM = 0);
    gpu: 400 units, censored at 3,000 h."""
    rng = np.random.default_rng(4)
    psu = rng.weibull(2.0, 40) * 2000.0
    gpu = rng.exponential(20_000.0, 400)
    return pl.DataFrame({
        "component_class": ["psu"] * 40 + ["gpu"] * 400,
        "unit_id": [f"u{i}" for i in range(440)],
        "entry": 0.0,
        "duration": np.concatenate([psu, np.minimum(gpu, 3000.0)]),
        "event": np.concatenate([np.ones(40, bool), gpu < 3000.0]),
    })  # fmt: skip


def test_small_risk_sets_are_flagged_and_no_ci_has_zero_width():
    curves = sv.survival_curves(_lifetimes())
    km = curves.filter(pl.col("estimator") == "kaplan_meier")
    psu = km.filter(pl.col("component_class") == "psu").sort("t")
    assert psu["survival"][-1] == 0.0 and psu["at_risk"][-1] == 1
    assert psu["ci_low"][-1] is None and psu["ci_high"][-1] is None
    assert (km["small_risk_set"] == (km["at_risk"] < sv.MIN_AT_RISK)).all()
    assert psu.filter("small_risk_set").height == sv.MIN_AT_RISK - 1  # at risk 9, 8, ..., 1
    both = curves.drop_nulls(["ci_low", "ci_high"])
    assert (both["ci_high"] > both["ci_low"]).all()
    assert curves["small_risk_set"].null_count() == 0


def test_report_reads_survival_only_where_enough_units_are_at_risk():
    curves = sv.survival_curves(_lifetimes())
    reading = section.build(ReportContext(None, {"survival_curves": curves}, 16_384)).reading
    assert f"curves stop where fewer than {sv.MIN_AT_RISK} units remain at risk" in reading
    assert "0.0%–0.0%" not in reading and "0.0% still in service" not in reading
    frame = section.survival_frame(curves)
    psu = curves.filter(pl.col("estimator") == "kaplan_meier", pl.col("component_class") == "psu")
    last_ok = psu.filter(~pl.col("small_risk_set"))["t"].max()
    assert frame.filter(pl.col("component_class") == "psu")["t"].max() == last_ok
