"""Survival fits: exact small cases, recovery of known Weibull laws, agreement with lifelines."""

from __future__ import annotations

import json
import warnings
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from analysis import lifetime_models as lm
from analysis import survival as sv
from analysis.lifetime_models.base import Sample
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.survival.common import clean_lifetimes
from analysis.survival.common import holm
from analysis.survival.common import lifetime_sample
from analysis.survival.competing import aalen_johansen_ci
from analysis.survival.competing import competing_risks
from analysis.survival.competing import node_first_failures
from analysis.survival.cox import MIN_EVENTS_COX
from analysis.survival.cox import ph_test
from analysis.survival.rates import MIN_EVENTS_WINDOW_FIT
from analysis.survival.rates import rate_change_test
from analysis.survival.shape import CANNOT_TELL
from analysis.survival.shape import shape_reading
from analysis.survival.windows import monthly_exposure
from pipelines.cli.fit_table import format_fit_table
from sample_data.lifetimes import simulate_lifetimes
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES

SAMPLE_LIFETIMES = FIXTURES / "survival" / "sample_fleet_lifetimes.parquet"


def _lifetimes(rows) -> pl.DataFrame:
    cols = ["component_class", "unit_id", "entry", "duration", "event"]
    return pl.DataFrame([dict(zip(cols, r)) for r in rows])


# ----------------------------------------------------------------------------- hand-computed KM
def test_kaplan_meier_with_left_truncation_matches_hand_computation():
    # unit (entry, duration, event); D enters late (left truncation) at age 3.5.
    #   A (0, 2, fail)  B (0, 4, cens)  C (1, 3, fail)  D (3.5, 5, fail)  E (0, 6, cens)
    # risk set R(t) = {entry < t <= duration}:
    #   t=2: A B C E      -> 4 at risk, 1 death: S = 3/4          H = 1/4
    #   t=3: B C E        -> 3 at risk (D not yet in): S = 3/4*2/3 = 1/2  H = 1/4+1/3
    #   t=5: D E          -> 2 at risk: S = 1/2*1/2 = 1/4          H = 1/4+1/3+1/2 = 13/12
    lt = _lifetimes(
        [
            ("psu", u, e, d, ev)
            for u, e, d, ev in [
                ("A", 0, 2, True),
                ("B", 0, 4, False),
                ("C", 1, 3, True),
                ("D", 3.5, 5, True),
                ("E", 0, 6, False),
            ]
        ]
    )
    curves = sv.survival_curves(lt)
    km = curves.filter(pl.col("estimator") == "kaplan_meier")
    at = {t: (s, r) for t, s, r in km.select("t", "survival", "at_risk").iter_rows()}
    assert at[2.0][0] == pytest.approx(3 / 4, abs=1e-12)
    assert at[3.0][0] == pytest.approx(1 / 2, abs=1e-12)
    assert at[5.0][0] == pytest.approx(1 / 4, abs=1e-12)
    assert at[6.0][0] == pytest.approx(1 / 4, abs=1e-12)
    assert (at[2.0][1], at[3.0][1], at[5.0][1]) == (4, 3, 2)
    na = curves.filter(pl.col("estimator") == "nelson_aalen")
    h = dict(na.select("t", "cumulative_hazard").iter_rows())
    assert h[5.0] == pytest.approx(13 / 12, abs=1e-12)
    # without the delayed entry D would be at risk at t=2 and 3: S(3) would be 4/5*3/4 = 0.6
    assert at[3.0][0] != pytest.approx(0.6)


# ----------------------------------------------------------------------------- rates
def test_poisson_rate_and_mtbf_from_exposure_table():
    # 3 units: exposure (10-0)+(30-10)+(50-20) = 60 h, 2 failures -> 1/30 per hour
    lt = _lifetimes(
        [("gpu", "a", 0, 10, True), ("gpu", "b", 10, 30, True), ("gpu", "c", 20, 50, False)]
    )
    notes: list[str] = []
    bad = _lifetimes([("gpu", "z", 5, 4, True), ("gpu", "y", 0, 0, False)])
    fr = sv.failure_rates(pl.concat([lt, bad]), window=None, notes=notes)
    assert notes and notes[0].startswith("2 lifetime rows unusable")
    row = fr.filter(pl.col("model") == "exponential").row(0, named=True)
    assert row["exposure_hours"] == 60 and row["n_events"] == 2 and row["n_units"] == 3
    assert row["rate_per_1k_unit_days"] == pytest.approx(2 / 60 * 24_000)
    # Garwood 95% for 2 events: [0.2422, 7.2247] events
    assert row["rate_ci_low"] == pytest.approx(0.242209 / 60 * 24_000, rel=1e-4)
    assert row["rate_ci_high"] == pytest.approx(7.224687 / 60 * 24_000, rel=1e-4)
    assert row["mtbf_hours"] == pytest.approx(30.0)
    assert row["mtbf_ci_low"] == pytest.approx(60 / 7.224687, rel=1e-4)
    assert row["method"] == "exposure-table" and row["selected"]
    # too few events for the other candidates: the exposure row is the only one
    assert fr.height == 1


def test_exposure_table_exponential_equals_lifelines_mle_and_aic():
    from lifelines import ExponentialFitter

    rng = np.random.default_rng(3)
    lt = simulate_lifetimes({"nic": (1.0, 5000.0)}, 800, rng)
    s = lifetime_sample(clean_lifetimes(lt))
    fit, method = sv.fit_model(lm.get("exponential"), s)
    ef = ExponentialFitter().fit(s.upper, s.event, entry=s.entry)
    assert method == "exposure-table"
    assert fit["params"]["scale_hours"][0] == pytest.approx(ef.lambda_, rel=1e-5)
    assert 2 - 2 * fit["loglik"] == pytest.approx(ef.AIC_, rel=1e-8)


@pytest.mark.parametrize("model", ["weibull", "lognormal", "loglogistic"])
def test_vectorized_mle_agrees_with_lifelines(model):
    rng = np.random.default_rng(11)
    lt = simulate_lifetimes({"gpu": (0.8, 10000.0)}, 1500, rng, removal_rate_per_hour=1 / 30000)
    s = lifetime_sample(clean_lifetimes(lt))
    ours, m1 = sv.fit_model(lm.get(model), s, engine="numpy")
    ref, m2 = sv.fit_model(lm.get(model), s, engine="lifelines")
    assert (m1, m2) == ("per-unit", "per-unit-lifelines")
    assert ours["loglik"] == pytest.approx(ref["loglik"], abs=1e-3)
    for name, (v, lo, hi) in ref["params"].items():
        ov, olo, ohi = ours["params"][name]
        assert ov == pytest.approx(v, rel=2e-3)
        # CI widths agree up to the log- vs natural-scale Wald difference
        assert (ohi - olo) == pytest.approx(hi - lo, rel=0.1)


# ----------------------------------------------------------------------------- recovery of truth
def test_weibull_truth_recovered_over_seeds_and_aic_prefers_weibull():
    """Smaller version of benchmarks/validate_survival_coverage.py: 5 seeds, 2 classes."""
    laws = {"gpu": (0.6, 20000.0), "psu": (2.0, 6000.0)}
    covered = {c: 0 for c in laws}
    for seed in range(5):
        lt = simulate_lifetimes(
            laws, 1500, np.random.default_rng(100 + seed), removal_rate_per_hour=1 / 40000
        )
        assert (lt["entry"] > 0).mean() > 0.3 and (
            ~lt["event"]
        ).mean() > 0.3  # truncated + censored
        fr = sv.failure_rates(lt, window=None)
        for cls, (shape, scale) in laws.items():
            rows = fr.filter(pl.col("component_class") == cls, pl.col("stratum") == "all")
            aic = dict(rows.select("model", "aic").iter_rows())
            assert aic["weibull"] < aic["exponential"] - 10
            p = json.loads(rows.filter(pl.col("model") == "weibull")["params"][0])
            ok = (
                p["shape"]["ci_low"] <= shape <= p["shape"]["ci_high"]
                and p["scale_hours"]["ci_low"] <= scale <= p["scale_hours"]["ci_high"]
            )
            covered[cls] += ok
            reading = rows.filter(pl.col("model") == "weibull")["shape_reading"][0]
            assert reading == (
                "decreasing hazard: infant mortality"
                if shape < 1
                else "increasing hazard: wear-out"
            )
    assert all(v >= 4 for v in covered.values()), covered


def test_interval_censored_fit_recovers_known_law_and_beats_ignoring_it():
    rng = np.random.default_rng(5)
    shape, scale = 2.5, 2000.0
    lt = simulate_lifetimes(
        {"hbm": (shape, scale)},
        3000,
        rng,
        horizon_hours=4000,
        installed_before_hours=2000,
        check_every_hours=500.0,
    )
    assert lt["duration_low"].is_not_null().sum() > 300
    s = lifetime_sample(clean_lifetimes(lt))
    assert s.interval.sum() == s.n_events
    for engine in ("numpy", "lifelines"):
        fit, _ = sv.fit_model(lm.get("weibull"), s, engine=engine)
        _, klo, khi = fit["params"]["shape"]
        _, llo, lhi = fit["params"]["scale_hours"]
        assert klo <= shape <= khi and llo <= scale <= lhi, (engine, fit["params"])
    # treating the check time as the failure time biases the scale upward, past the truth's CI
    naive = Sample(s.entry, s.upper, s.upper, s.event, np.zeros(s.n, bool))
    nfit, _ = sv.fit_model(lm.get("weibull"), naive)
    assert nfit["params"]["scale_hours"][1] > scale


# ----------------------------------------------------------------------------- windows
def test_monthly_windows_conserve_exposure_and_events():
    rng = np.random.default_rng(9)
    lt = simulate_lifetimes({"gpu": (1.0, 3000.0)}, 600, rng, horizon_hours=2000)
    pieces = monthly_exposure(clean_lifetimes(lt))
    total = (lt["duration"] - lt["entry"]).sum()
    assert (pieces["age_to"] - pieces["age_from"]).sum() == pytest.approx(total, rel=1e-9)
    assert pieces["in_event"].sum() == lt["event"].sum()
    fr = sv.failure_rates(lt, window="month")
    months = fr.filter(pl.col("window") != "all")
    assert set(months["window"]) == {"2025-01", "2025-02", "2025-03"}
    per_month = months.filter(pl.col("model") == "exponential")
    assert per_month["n_events"].sum() == lt["event"].sum()
    assert per_month["exposure_hours"].sum() == pytest.approx(total, rel=1e-9)
    # parametric fits only in windows with enough events
    fitted = months.group_by("window").agg(pl.len().alias("k"), pl.col("n_events").first())
    for k, d in fitted.select("k", "n_events").iter_rows():
        assert k == (len(lm.names()) if d >= MIN_EVENTS_WINDOW_FIT else 1)


def test_single_unit_split_at_month_boundary():
    lt = pl.DataFrame(
        {
            "component_class": ["gpu"],
            "unit_id": ["u"],
            "entry": [100.0],
            "duration": [100.0 + 48],
            "event": [True],
            "observed_from": [datetime(2025, 1, 31)],
            "observed_to": [datetime(2025, 2, 2)],
        }
    )
    p = monthly_exposure(clean_lifetimes(lt)).sort("window")
    assert p["window"].to_list() == ["2025-01", "2025-02"]
    assert p["age_from"].to_list() == pytest.approx([100.0, 124.0])
    assert p["age_to"].to_list() == pytest.approx([124.0, 148.0])
    assert p["in_event"].to_list() == [False, True]


def _observed(spans, cls="gpu"):
    """component_lifetimes rows from (observed_from, observed_to, event) with entry 0."""
    return pl.DataFrame(
        {
            "component_class": cls,
            "unit_id": [f"u{i}" for i in range(len(spans))],
            "entry": 0.0,
            "duration": [(b - a).total_seconds() / 3600 for a, b, _ in spans],
            "event": [e for *_, e in spans],
            "observed_from": [a for a, _, _ in spans],
            "observed_to": [b for _, b, _ in spans],
        }
    )


def test_observation_ending_at_midnight_on_the_first_opens_no_window():
    """Before: a failure at 2025-07-01 00:00 made a '2025-07' window of 0 h (upper CI ~1e17)
    and was counted in both June and July."""
    lt = _observed(
        [
            (datetime(2025, 6, 1), datetime(2025, 7, 1), True),
            (datetime(2025, 6, 1), datetime(2025, 7, 1), False),
        ]
    )
    fr = sv.failure_rates(lt).filter(pl.col("model") == "exponential")
    assert fr["window"].to_list() == ["2025-06", "all"]
    june = fr.row(0, named=True)
    assert june["n_events"] == 1 and june["exposure_hours"] == pytest.approx(2 * 720.0)
    assert not june["partial"] and june["period_end"] == datetime(2025, 7, 1)


def test_sub_day_month_is_folded_into_its_neighbour_conserving_exposure_and_events():
    end = datetime(2025, 7, 1, 5)  # the fleet's data end 5 h into July
    lt = _observed(
        [(datetime(2025, 5, 20), end, True), (datetime(2025, 6, 3), end, False)]
        + [(datetime(2025, 5, 20), datetime(2025, 6, 10), True)]
    )
    notes: list[str] = []
    fr = sv.failure_rates(lt, notes=notes).filter(pl.col("model") == "exponential")
    months = fr.filter(pl.col("window") != "all")
    assert months["window"].to_list() == ["2025-05", "2025-06"]
    assert months["n_events"].sum() == 2
    assert months["exposure_hours"].sum() == pytest.approx(lt["duration"].sum())
    june = months.row(1, named=True)
    assert june["period_end"] == end and june["n_units"] == 3  # pieces merged per unit
    # June 10, and 05:00 on July 1 (in the folded June)
    assert months["n_events"].to_list() == [0, 2]
    assert months["partial"].to_list() == [True, False]  # May starts on the 20th
    assert notes == ["gpu: 2025-07 observed only 5.0 h, folded into 2025-06"]


def test_sample_fleet_windows_flag_partial_and_low_exposure_months():
    fr = sv.failure_rates(pl.read_parquet(SAMPLE_LIFETIMES)).filter(
        (pl.col("component_class") == "gpu") & (pl.col("model") == "exponential")
    )
    got = {r["window"]: (r["partial"], r["low_exposure"]) for r in fr.iter_rows(named=True)}
    # observed 2026-01-05 .. 2026-03-05 23:43: January and March are partial, March has under
    # a quarter of a median month's exposure
    assert got == {
        "2026-01": (True, False),
        "2026-02": (False, False),
        "2026-03": (True, True),
        "all": (False, False),
    }


def test_fit_table_for_a_month_says_partial_and_low_exposure():
    fr = sv.failure_rates(pl.read_parquet(SAMPLE_LIFETIMES))
    text = format_fit_table(fr, window="2026-03")
    assert "2026-03 is a partial month: observed 2026-03-01 00:00 to 2026-03-05 23:43" in text
    assert "low exposure (< 25% of the class's median month, rates uncertain): cooling, cpu" in text
    full = format_fit_table(fr, window="2026-02")
    assert "partial" not in full and "low exposure" not in full


def test_fit_table_prints_a_class_with_a_rate_and_no_fitted_model():
    """A class with too few events for a lifetime model (a scope's one fail-slow episode) has a
    selected rate row without a model: the table prints it with "-" for the model."""
    fr = sv.failure_rates(pl.read_parquet(SAMPLE_LIFETIMES)).filter(pl.col("window") == "all")
    row = fr.filter(pl.col("selected")).head(1)
    rate_only = row.with_columns(component_class=pl.lit("fail_slow"), model=pl.lit(None, pl.Utf8))
    text = format_fit_table(pl.concat([fr, rate_only]), width=200)
    line = next(ln for ln in text.splitlines() if ln.startswith("fail_slow"))
    assert line.split()[1] == "-"


def test_rate_change_uses_the_exact_conditional_binomial_test():
    # 30 vs 50 failures on equal exposure: the 95% CIs overlap, yet the rates differ
    _, _, hi30 = poisson_rate_ci(30, 1000.0)
    _, lo50, _ = poisson_rate_ci(50, 1000.0)
    assert lo50 < hi30  # overlapping CIs
    assert rate_change_test(30, 1000.0, 50, 1000.0) == pytest.approx(0.0326, abs=5e-4)
    assert rate_change_test(30, 1000.0, 30, 1000.0) == pytest.approx(1.0)
    # same counts on unequal exposure: the rate halved
    assert rate_change_test(40, 1000.0, 40, 2000.0) == pytest.approx(0.00275, abs=5e-5)
    assert rate_change_test(0, 10.0, 0, 10.0) == 1.0


# ----------------------------------------------------------------------------- Cox / PH
def test_cox_recovers_temperature_effect_and_reports_ph_check():
    rng = np.random.default_rng(2)
    n = 3000
    temp = rng.normal(60, 8, n)
    rack = rng.choice(["r1", "r2", "r3"], n)
    beta = 0.05  # hazard x exp(0.05) per degree
    hazard = 1 / 5000 * np.exp(beta * (temp - 60)) * np.where(rack == "r3", 2.0, 1.0)
    entry = rng.uniform(0, 2000, n)
    life = entry + rng.exponential(1 / hazard)  # memoryless: left truncation is exact
    cens = entry + rng.uniform(0, 4000, n)
    lt = pl.DataFrame(
        {
            "component_class": "gpu",
            "unit_id": [str(i) for i in range(n)],
            "entry": entry,
            "duration": np.minimum(life, cens),
            "event": life <= cens,
            "temp_mean": temp,
            "power_mean": 300.0,
            "rack": rack,
        }
    )
    notes: list[str] = []
    hr = sv.hazard_ratios(lt, notes)
    rows = {r["covariate"]: r for r in hr.iter_rows(named=True)}
    assert "power_mean" not in rows  # constant: dropped, no crash
    assert rows["temp_mean"]["ci_low"] <= np.exp(beta) <= rows["temp_mean"]["ci_high"]
    assert rows["temp_mean"]["p"] < 1e-6
    assert rows["rack=r3"]["ci_low"] <= 2.0 <= rows["rack=r3"]["ci_high"]
    assert all(0 <= r["ph_test_p"] <= 1 for r in rows.values())
    assert hr["ph_ok"].dtype == pl.Boolean and hr["ph_ok"].null_count() == 0
    # memoryless: starting units at the end of the telemetry window (landmark) changes nothing
    assert len(notes) == 1 and "units observed under" in notes[0]


def test_holm_adjustment_matches_hand_computation():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    adj = holm(np.array([0.01, 0.04, 0.03, 0.005]))
    assert adj == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm(np.array([0.5, 0.9])) == pytest.approx([1.0, 1.0])  # monotone, capped at 1


def test_sample_fleet_hazard_ratios_find_the_planted_temperature_effect():
    """The committed fleet's lifetimes: the simulated truth is a GPU hazard ratio of 1.284 per
    degC of temperature offset and no rack effect. Holm runs over the covariates, one test
    each (a categorical by its likelihood-ratio test, a level's adjusted p at least its
    covariate's): the temperature estimate's CI covers the truth and it is a clear effect on
    this small fleet; power is read without the temperature it is collinear with."""
    from dashboards.section import ReportContext
    from dashboards.sections import hazard_ratios

    lt = pl.read_parquet(SAMPLE_LIFETIMES)
    notes: list[str] = []
    hr = sv.hazard_ratios(lt, notes)
    fam = hr.with_columns(f=pl.col("covariate").str.split("=").list.first())
    tests = fam.unique(["component_class", "f"], keep="first", maintain_order=True)
    adjusted = dict(zip(zip(tests["component_class"], tests["f"]), holm(tests["family_p"])))
    for r in fam.iter_rows(named=True):
        assert r["p_adjusted"] >= adjusted[(r["component_class"], r["f"])] - 1e-12
        if "=" not in r["covariate"]:
            assert r["p_adjusted"] == pytest.approx(adjusted[(r["component_class"], r["f"])])
    assert set(hr["p_adjust_method"]) == {"holm"} and set(hr["penalizer"]) == {0.0}
    t = hr.filter((pl.col("component_class") == "gpu") & (pl.col("covariate") == "temp_mean"))
    assert t.height == 1 and t["unit"][0] == "per degC" and t["kind"][0] == "effect"
    assert t["ci_low"][0] <= 1.284025 <= t["ci_high"][0] and t["ph_ok"][0]
    assert t["clear_effect"][0]
    power = hr.filter((pl.col("component_class") == "gpu") & (pl.col("covariate") == "power_mean"))
    assert power["kind"][0] == "association" and power["left_out"][0] == "temp_mean"
    assert not power["clear_effect"][0]
    # eight racks need 70 failures: the gpu class's 56 are too few to test them
    assert "cox gpu: left out rack (56 failures, fewer than 10 per level: too few to test)" in notes
    assert not hr["covariate"].str.starts_with("rack=").any()
    assert any("left out util_mean" in n for n in notes)  # power and utilisation: one measurement
    reading = hazard_ratios.build(ReportContext(None, {"hazard_ratios": hr}, 0)).reading
    assert reading.startswith("Clear effects") and "temp_mean hazard ratio 1.28" in reading
    assert f"holm correction for {tests.height} tests, one per trait and class" in reading


def test_ph_test_matches_lifelines_without_entries_and_flags_non_ph():
    from lifelines import CoxPHFitter
    from lifelines.statistics import proportional_hazard_test

    rng = np.random.default_rng(4)
    n = 1500
    x = rng.normal(size=n)
    g = rng.integers(0, 2, n).astype(float)
    # g has a hazard that rises with time (non-proportional): Weibull shape 2.5 vs 1
    t = np.where(g == 1, 1000 * rng.weibull(2.5, n), 1000 * rng.weibull(1.0, n)) * np.exp(-0.3 * x)
    c = rng.uniform(0, 2500, n)
    df = pl.DataFrame(
        {
            "entry": np.zeros(n),
            "duration": np.minimum(t, c),
            "event": (t <= c).astype(np.int8),
            "x": x,
            "g": g,
        }
    )
    pdf = df.to_pandas()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cph = CoxPHFitter(penalizer=0.01).fit(pdf, "duration", "event", entry_col="entry")
        ref = CoxPHFitter(penalizer=0.01).fit(pdf.drop(columns="entry"), "duration", "event")
        lp = proportional_hazard_test(
            ref, pdf.drop(columns="entry"), time_transform="rank"
        ).summary["p"]
    ref_p = {(k[0] if isinstance(k, tuple) else k): float(v) for k, v in lp.items()}
    ours = ph_test(cph, df)
    assert ours["x"] == pytest.approx(ref_p["x"], rel=1e-3)
    assert ours["g"] == pytest.approx(ref_p["g"], rel=1e-3)
    assert ours["g"] < 1e-4 and ours["x"] > 0.001


def test_cox_skips_cleanly_with_few_events():
    lt = _lifetimes([("psu", str(i), 0, 1000 + i, i < 3) for i in range(30)]).with_columns(
        temp_mean=pl.Series(np.arange(30.0))
    )
    notes: list[str] = []
    hr = sv.hazard_ratios(lt, notes)
    assert hr.height == 0 and hr.schema == TABLES["hazard_ratios"].schema
    assert notes == [f"cox psu: skipped, 3 events (< {MIN_EVENTS_COX})"]


# ----------------------------------------------------------------------------- competing risks
def test_aalen_johansen_first_failure_per_node():
    t0 = datetime(2025, 1, 1)
    rows = []
    # node n0: gpu fails at 10 h, then psu at 20 h -> cause gpu at 10
    rows += [("gpu", "n0g", "n0", 10, True), ("psu", "n0p", "n0", 20, True)]
    rows += [("psu", "n1p", "n1", 30, True), ("gpu", "n1g", "n1", 50, False)]  # cause psu at 30
    rows += [("gpu", "n2g", "n2", 40, False), ("psu", "n2p", "n2", 40, False)]  # censored at 40
    rows += [("gpu", "n3g", "n3", 60, True)]  # cause gpu at 60
    lt = pl.DataFrame(
        [
            {
                "component_class": c,
                "unit_id": u,
                "host": hst,
                "entry": 0.0,
                "duration": float(d),
                "event": e,
                "observed_from": t0,
                "observed_to": t0 + timedelta(hours=d),
            }
            for c, u, hst, d, e in rows
        ]
    )
    nodes = node_first_failures(lt)
    assert nodes.select("host", "t", "event", "cause").rows() == [
        ("n0", 10.0, True, "gpu"),
        ("n1", 30.0, True, "psu"),
        ("n2", 40.0, False, None),
        ("n3", 60.0, True, "gpu"),
    ]
    cif = competing_risks(lt)
    last = cif.group_by("cause").agg(pl.col("cumulative_incidence").sort_by("t").last())
    got = dict(last.iter_rows())
    # AJ by hand: t=10 4 at risk, S=3/4, F_gpu=1/4; t=30 3 at risk: F_psu=3/4*1/3=1/4, S=1/2;
    # t=40 censored; t=60 1 at risk: F_gpu += 1/2*1 -> 3/4
    assert got["gpu"] == pytest.approx(0.75, abs=1e-3)
    assert got["psu"] == pytest.approx(0.25, abs=1e-3)


# ----------------------------------------------------------------------------- public API
def test_fit_all_shapes_and_selection_flags_and_rate_samples():
    rng = np.random.default_rng(7)
    lt = simulate_lifetimes(
        {"gpu": (0.7, 20000.0), "psu": (1.8, 5000.0)}, 600, rng, horizon_hours=1500
    )
    out = sv.fit_all(lt, window=None, cox=False)
    for name, df in out.items():
        assert df.schema == TABLES[name].schema
    fr = out["failure_rates"]
    sel = fr.group_by("component_class", "stratum", "window").agg(pl.col("selected").sum())
    assert (sel["selected"] == 1).all()
    assert set(fr["stratum"]) == {"all", "A", "B"}
    samples = sv.rate_samples(fr, 20000, np.random.default_rng(0))
    for cls, rates in samples.items():
        r = fr.filter(
            pl.col("component_class") == cls, pl.col("stratum") == "all", pl.col("selected")
        ).row(0, named=True)
        lo, hi = np.quantile(rates * 24_000, [0.025, 0.975])
        assert lo == pytest.approx(r["rate_ci_low"], rel=0.08)
        assert hi == pytest.approx(r["rate_ci_high"], rel=0.08)


def test_refresh_fits_writes_tables(tmp_path):
    from warehouse.store import Warehouse

    wh = Warehouse(tmp_path)
    lt = simulate_lifetimes(
        {"gpu": (1.0, 3000.0)}, 300, np.random.default_rng(1), horizon_hours=1000
    )
    wh.replace_table("component_lifetimes", lt)
    summary = sv.refresh_fits(wh, window=None)
    assert summary["units"] == lt.height and summary["classes"] == 1
    assert (
        wh.read("failure_rates").height == summary["failure_rates_rows"] == 3 * len(lm.names())
    )  # every model x strata all, A, B
    assert wh.read("survival_curves").height == summary["survival_curve_points"]


def test_shape_reading():
    assert shape_reading(0.5, 0.9) == "decreasing hazard: infant mortality"
    assert (
        shape_reading(0.9, 1.2) == CANNOT_TELL
    )  # a CI covering 1 is no evidence of a constant hazard
    assert shape_reading(1.1, 2.0) == "increasing hazard: wear-out"
    assert shape_reading(None, 2.0) is None


def test_cli_fit_prints_table_and_errors_when_empty(tmp_path, capsys, monkeypatch):
    from pipelines.cli import main
    from warehouse.store import Warehouse

    monkeypatch.setenv("COLUMNS", "100")  # the default width, whatever the test's terminal

    wh = Warehouse(tmp_path)
    assert main(["--home", str(tmp_path), "fit"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "goodput build" in err
    lt = simulate_lifetimes(
        {"psu": (2.0, 3000.0)}, 400, np.random.default_rng(1), horizon_hours=2000
    )
    wh.replace_table("component_lifetimes", lt)
    sv.refresh_fits(wh, window=None)
    assert main(["--home", str(tmp_path), "fit"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("psu")]
    assert len(lines) == 3 and all("wear-out" in ln for ln in lines)  # strata all, A, B
    assert "weibull" in lines[0].split()[2] and lines[0].split()[1] == "all"
    assert main(["--home", str(tmp_path), "fit", "--all-models"]) == 0
    assert len(
        [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("psu")]
    ) == 3 * len(lm.names())


def test_aalen_johansen_ci_matches_lifelines_variance():
    from lifelines import AalenJohansenFitter

    rng = np.random.default_rng(8)
    n = 400
    t = rng.exponential(100, n)
    cause = rng.choice([1, 2, 3], n, p=[0.5, 0.3, 0.2])
    cens = rng.uniform(0, 200, n)
    ev = np.where(t <= cens, cause, 0)
    dur = np.minimum(t, cens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = AalenJohansenFitter(seed=0, calculate_variance=True).fit(dur, ev, event_of_interest=2)
        fast = AalenJohansenFitter(seed=0, calculate_variance=False).fit(
            dur, ev, event_of_interest=2
        )
    ours = aalen_johansen_ci(fast)
    theirs = ref.confidence_interval_.to_numpy()
    ok = np.isfinite(theirs[:, 0])
    assert ok.sum() > 100
    np.testing.assert_allclose(ours[ok, 0], theirs[ok, 0], rtol=1e-6)
    np.testing.assert_allclose(ours[ok, 1], theirs[ok, 1], rtol=1e-6)


def test_survival_curve_falls_back_when_delayed_entry_empties_the_risk_set():
    # A is alone at risk when it fails at t=1 (S_KM = 0); B and C enter later: lifelines'
    # KM refuses, the curve becomes exp(-NA) with a note, and nothing raises.
    lt = _lifetimes([("psu", "A", 0, 1, True), ("psu", "B", 2, 5, True), ("psu", "C", 2, 8, False)])
    notes: list[str] = []
    curves = sv.survival_curves(lt, notes)
    bfh = curves.filter(pl.col("estimator") == "breslow_fleming_harrington")
    # NA: H(1) = 1/1, H(5) = 1 + 1/2 -> S = exp(-1.5)
    assert dict(bfh.select("t", "survival").iter_rows())[5.0] == pytest.approx(np.exp(-1.5))
    assert any("Breslow-Fleming-Harrington" in n for n in notes)
