"""The monthly-rate and hazard-ratio charts draw what their titles claim (CIs, zero-failure and
partial months, units, adjusted significance), and the trend reading states an exact test."""

from __future__ import annotations

import polars as pl
import pytest
from scipy.stats import binomtest

from analysis import survival as sv
from analysis.headline import MONTHLY
from analysis.headline import selected_rates
from dashboards.section import ReportContext
from dashboards.sections import hazard_ratios
from dashboards.sections import rate_trend
from warehouse.schemas import conform


def _layers(chart) -> tuple[dict, list[tuple[dict, list[dict]]]]:
    """(spec, [(layer spec, its data rows)]) of a layer chart."""
    spec = chart.to_dict()
    layers = spec.get("layer", [spec])
    out = []
    for layer in layers:
        for sub in layer.get("layer", [layer]):
            name = sub.get("data", layer.get("data", spec.get("data", {}))).get("name")
            out.append((sub, spec["datasets"].get(name, []) if name else []))
    return spec, out


def _rates(rows: list[dict]) -> pl.DataFrame:
    base = {"stratum": "all", "model": "exponential", "selected": True}
    return conform("failure_rates", pl.DataFrame([{**base, **r} for r in rows]))


MONTHS = [
    # class, window, events, exposure hours, rate, CI low, CI high, partial, low exposure
    ("gpu", "2026-01", 30, 144_000.0, 5.0, 3.37, 7.14, True, False),
    ("gpu", "2026-02", 50, 144_000.0, 8.33, 6.18, 11.0, False, False),
    ("psu", "2026-01", 0, 144_000.0, 0.0, 0.0, 0.615, True, False),
    ("psu", "2026-02", 2, 144_000.0, 0.333, 0.04, 1.2, False, False),
    ("gpu", "2026-03", 1, 10_000.0, 2.4, 0.06, 13.4, True, True),
]


def _trend_rates() -> pl.DataFrame:
    keys = ("component_class", "window", "n_events", "exposure_hours", "rate_per_1k_unit_days")
    keys += ("rate_ci_low", "rate_ci_high", "partial", "low_exposure")
    return _rates([dict(zip(keys, m)) for m in MONTHS])


def test_trend_frame_is_the_selected_monthly_rows_of_stratum_all():
    """The rate trend reads the one accessor of the selected rates (analysis.headline): a
    candidate that lost on AIC, another stratum's row and the whole-window row stay out."""
    extra = _rates(
        [
            {
                "component_class": "gpu",
                "window": "2026-02",
                "model": "weibull",
                "selected": False,
                "rate_per_1k_unit_days": 9.0,
            },
            {
                "component_class": "gpu",
                "window": "2026-02",
                "stratum": "sku=H100",
                "rate_per_1k_unit_days": 7.0,
            },
            {"component_class": "gpu", "window": "all", "rate_per_1k_unit_days": 6.0},
        ]
    )
    fr = pl.concat([_trend_rates(), extra])
    trend = rate_trend.trend_frame(fr)
    assert sorted(
        trend.select("component_class", "window", "rate_per_1k_unit_days").rows()
    ) == sorted((m[0], m[1], m[4]) for m in MONTHS)
    assert selected_rates(fr, MONTHLY).height == len(MONTHS)
    assert selected_rates(fr, "2026-02")["rate_per_1k_unit_days"].sort().to_list() == [0.333, 8.33]
    assert selected_rates(fr)["rate_per_1k_unit_days"].to_list() == [6.0]


def test_monthly_chart_draws_cis_and_zero_failure_months_on_a_band_axis():
    chart = rate_trend.rate_trend_chart(rate_trend.trend_frame(_trend_rates()))
    spec, layers = _layers(chart)
    assert "95% CI" in spec["title"]["text"]
    rules = [(lay, rows) for lay, rows in layers if lay["mark"]["type"] == "rule"]
    assert len(rules) == 1
    rule, rows = rules[0]
    # every month, the zero-failure psu January included, has a whisker lo..hi
    assert {(r["component_class"], r["window"]) for r in rows} == {(m[0], m[1]) for m in MONTHS}
    assert rule["encoding"]["y"]["field"] == "lo" and rule["encoding"]["y2"]["field"] == "hi"
    # xOffset only on a band (ordinal) axis: on a time axis it made these marks vanish
    for lay, _ in layers:
        assert lay["encoding"]["x"]["type"] == "ordinal" and "xOffset" in lay["encoding"]
    zero = next(rows for lay, rows in layers if lay["mark"].get("shape") == "triangle-down")
    assert [(r["component_class"], r["window"]) for r in zero] == [("psu", "2026-01")]
    labels = {r["window"]: r["label"] for r in rows}
    assert labels == {
        "2026-01": "2026-01 (partial)",
        "2026-02": "2026-02",
        "2026-03": "2026-03 (partial)",
    }
    low = {r["window"] for r in rows if r["low_exposure"]}
    assert low == {"2026-03"} and rule["encoding"]["strokeDash"]["condition"]["test"] == (
        "datum.low_exposure"
    )


def test_trend_reading_names_a_trend_only_where_the_adjusted_test_rejects():
    """gpu 30 -> 50 failures on equal exposure: the CIs overlap, but the trend test (exact
    score test of a Poisson regression on time; with two months it is the conditional binomial
    test, p = 0.033) rejects: a clear rise.
    With the low-exposure March (1 failure) and psu in the family, gpu's test no longer rejects
    after Holm across the two classes, and the reading says no class shows a clear trend
    (before, it named "the largest change" whatever its evidence)."""
    two = _trend_rates().filter(pl.col("component_class") == "gpu", pl.col("window") != "2026-03")
    trend = sv.rate_trends(two).row(0, named=True)
    assert trend["p"] == pytest.approx(binomtest(50, 80, 0.5).pvalue, abs=0.004)
    assert trend["ratio_per_30d"] == pytest.approx((50 / 30) ** (30 / 29.5), rel=0.02)
    reading = rate_trend.build(ReportContext(None, {"failure_rates": two}, 0)).reading
    assert "a clear trend: gpu rising" in reading and f"adjusted p = {trend['p']:.2g}" in reading
    assert "noise" not in reading and "overlap" not in reading
    every = rate_trend.build(ReportContext(None, {"failure_rates": _trend_rates()}, 0)).reading
    assert "no class shows a clear trend" in every and "across 2 classes" in every
    assert "largest change" not in every


def _hazards() -> pl.DataFrame:
    rows = [
        ("gpu", "temp_mean", "per degC", None, 1.32, 1.13, 1.53, 3e-4, 0.009, True, True),
        (
            "gpu",
            "rack=rack-03",
            "rack-03 vs rack-02",
            "rack-02",
            0.08,
            0.01,
            0.6,
            0.015,
            0.39,
            True,
            False,
        ),
        ("gpu", "temp_max", "per degC", None, 0.95, 0.92, 0.99, 0.001, 0.03, False, False),
        (
            "ib_link",
            "rack=rack-03",
            "rack-03 vs rack-01",
            "rack-01",
            1e-8,
            0.0,
            1e30,
            0.99,
            1.0,
            True,
            False,
        ),
    ]
    keys = ("component_class", "covariate", "unit", "reference", "hr", "ci_low", "ci_high", "p")
    keys += ("p_adjusted", "ph_ok", "clear_effect")
    return conform(
        "hazard_ratios",
        pl.DataFrame(
            [dict(zip(keys, r)) for r in rows], schema_overrides={"reference": pl.Utf8}
        ).with_columns(p_adjust_method=pl.lit("holm"), penalizer=0.0, n=100),
    )


def test_hazard_ratio_chart_shows_units_and_adjusted_significance():
    spec, layers = _layers(hazard_ratios.hazard_ratio_chart(_hazards()))
    rows = next(rows for lay, rows in layers if lay["mark"]["type"] == "point" and rows)
    got = {r["term"]: r["evidence"] for r in rows}
    assert got == {
        "gpu · temp_mean per degC": hazard_ratios.EVIDENCE["clear"],
        "gpu · rack-03 vs rack-02": hazard_ratios.EVIDENCE[
            "none"
        ],  # unadjusted p 0.015: not enough
        "gpu · temp_max per degC": hazard_ratios.EVIDENCE["ph"],  # significant, PH rejected
    }
    assert "1 row(s) with an uninformative CI" in spec["title"]["subtitle"]
    assert "holm correction" in spec["title"]["subtitle"]
    tips = {
        t.get("title", t["field"]) for lay, _ in layers for t in lay["encoding"].get("tooltip", [])
    }
    assert {"p adjusted", "PH test p", "Cox penalizer", "unit"} <= tips
