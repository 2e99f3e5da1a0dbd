"""Failure hazard by trait: Cox hazard ratios (95% CI) coloured by what the table supports: a
clear effect, a clear association (consequences of load), a significant ratio whose
proportional-hazards test fails, or nothing after the multiple-testing correction."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section

KEY = "hazard_ratios"
TITLE = "Failure hazard by trait (Cox hazard ratios, 95% CI)"
TABLES = ("hazard_ratios",)


MAX_CI_SPAN = 1e4  # a hazard-ratio CI wider than this factor is drawn as not estimable
EVIDENCE = {  # hazard-ratio row -> how strongly the table supports it (colour of the chart)
    "clear": "clear effect (Holm-adjusted p < 0.05, PH holds)",
    "association": "clear association, not a cause (power, utilisation follow the load)",
    "ph": "adjusted p < 0.05 but proportional hazards rejected",
    "none": "not significant after correction",
}
ASSOCIATION = pl.col("kind").fill_null("effect") == "association"


FINITE = (pl.col("hr") > 0) & pl.col("hr").is_finite()
INFORMATIVE = (
    FINITE
    & (pl.col("ci_low") > 0)
    & pl.col("ci_high").is_finite()
    & (pl.col("ci_high") < MAX_CI_SPAN * pl.col("ci_low"))
)


def ratio_frame(hazard_ratios: pl.DataFrame) -> pl.DataFrame:
    """The informative rows (``INFORMATIVE``), largest ratio first, with what the chart draws:
    ``term`` (class · covariate and its unit), ``evidence`` (an ``EVIDENCE`` label) and the
    whisker ``lo`` / ``hi`` (the ratio itself where a CI bound is missing)."""
    term = (
        pl.col("component_class")
        + " · "
        + pl.when(pl.col("reference").is_not_null())
        .then(pl.col("unit"))
        .otherwise(pl.col("covariate") + " " + pl.col("unit").fill_null("per unit"))
    ).fill_null(pl.col("component_class") + " · " + pl.col("covariate"))
    evidence = (
        pl.when(pl.col("clear_effect").fill_null(False) & ASSOCIATION)
        .then(pl.lit(EVIDENCE["association"]))
        .when(pl.col("clear_effect").fill_null(False))
        .then(pl.lit(EVIDENCE["clear"]))
        .when(pl.col("p_adjusted") < 0.05)
        .then(pl.lit(EVIDENCE["ph"]))
        .otherwise(pl.lit(EVIDENCE["none"]))
    )
    return (
        hazard_ratios.filter(INFORMATIVE)
        .with_columns(
            term.alias("term"),
            evidence.alias("evidence"),
            pl.when(pl.col("ci_low") > 0)
            .then(pl.col("ci_low"))
            .otherwise(pl.col("hr"))
            .alias("lo"),
            pl.col("ci_high").fill_null(pl.col("hr")).alias("hi"),
        )
        .sort("hr", descending=True)
    )


def hazard_ratio_chart(hazard_ratios: pl.DataFrame) -> alt.LayerChart:
    """Cox hazard ratios with 95% CI on a log axis, reference line at 1; each row names its
    unit (per degC, a rack vs the reference rack) and is coloured by adjusted significance.
    Rows whose CI spans more than ``MAX_CI_SPAN`` (e.g. a rack with no failure: the Cox
    estimate runs to 0) carry no information and would crush the axis: left out, counted in
    the subtitle."""
    df = ratio_frame(hazard_ratios)
    n_left_out = hazard_ratios.height - df.height
    order = df["term"].to_list()
    y = alt.Y("term:N", sort=order, title=None, axis=alt.Axis(labelLimit=400))
    color = alt.Color(
        "evidence:N",
        scale=alt.Scale(
            domain=list(EVIDENCE.values()), range=["#d62728", "#9467bd", "#ff7f0e", "#9e9e9e"]
        ),
        legend=alt.Legend(orient="bottom", title=None, columns=1, labelLimit=0),
    )
    tip = [
        "component_class:N",
        "covariate:N",
        alt.Tooltip("unit:N"),
        alt.Tooltip("kind:N", title="effect or association"),
        *charts.ci_tooltips("hr", ".3f", "hazard ratio", stem=""),
        alt.Tooltip("p:Q", format=".3g", title="p (unadjusted)"),
        alt.Tooltip("p_adjusted:Q", format=".3g", title="p adjusted"),
        alt.Tooltip("p_adjust_method:N", title="adjustment"),
        alt.Tooltip("ph_test_p:Q", format=".3g", title="PH test p"),
        alt.Tooltip("penalizer:Q", title="Cox penalizer"),
        "n:Q",
    ]
    ratios = charts.forest(
        df, y, "hr", "lo", "hi", "hazard ratio per stated unit (log, 95% CI)", tip, color
    )
    note = (
        f"{n_left_out} row(s) with an uninformative CI (no failures in a level) left out; "
        if n_left_out
        else ""
    )
    return charts.framed(
        charts.unit_line("#555") + ratios,
        "Cox hazard ratios, 95% CI",
        f"{note}significance after {_adjustment(hazard_ratios)} correction over the traits "
        "(a categorical's levels by one likelihood-ratio test)",
        height=max(100, 28 * len(order)),
    )


def _adjustment(hazard_ratios: pl.DataFrame) -> str:
    m = hazard_ratios["p_adjust_method"].drop_nulls()
    return m[0] if m.len() else "multiple-testing"


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    hr = t["hazard_ratios"].filter(FINITE)
    if hr.height == 0:
        s.note = NO_DATA
        return s
    s.chart = hazard_ratio_chart(t["hazard_ratios"])
    # only rows that survive the multiple-testing correction and pass the PH test are claims;
    # the consequences of load are associations, never what raises the hazard
    clear = hr.filter(pl.col("clear_effect").fill_null(False)).sort("p_adjusted")
    effects, assoc = clear.filter(~ASSOCIATION), clear.filter(ASSOCIATION)
    failed_ph = hr.filter((pl.col("p_adjusted") < 0.05) & ~pl.col("ph_ok").fill_null(False)).sort(
        "p_adjusted"
    )
    method = hr["p_adjust_method"].drop_nulls().first() or "multiple-testing"
    tests = hr.select("component_class", pl.col("covariate").str.split("=").list.first()).n_unique()
    rule = (
        f"adjusted p < 0.05 after {method} correction for {tests} tests, one per trait and "
        "class, proportional hazards not rejected"
    )
    parts = []
    if effects.height:
        parts.append(
            f"Clear effects ({effects.height} of {hr.height}: {rule}): "
            + "; ".join(
                f"{_ratio(r)} on {r['component_class']}" for r in effects.iter_rows(named=True)
            )
            + "."
        )
    else:
        parts.append(
            f"No clear effect: none of the {hr.height} hazard ratios is a cause with {rule}."
        )
    if assoc.height:
        parts.append(
            "Associations, not causes (they follow the load a unit carries; each measured "
            "without the traits it moves with): "
            + "; ".join(
                f"{_ratio(r)} on {r['component_class']}"
                + (f" (without {r['left_out']})" if r["left_out"] else "")
                for r in assoc.iter_rows(named=True)
            )
            + "."
        )
    if failed_ph.height:
        parts.append(
            "Significant but not claimed, the proportional-hazards test fails (the ratio "
            "changes with age): "
            + ", ".join(
                f"{r['covariate']} on {r['component_class']} (PH test p={r['ph_test_p']:.2g})"
                for r in failed_ph.iter_rows(named=True)
            )
            + "."
        )
    s.reading = " ".join(parts)
    return s


def _ratio(r: dict) -> str:
    return (
        f"{r['covariate']} hazard ratio {r['hr']:.2f} {r['unit'] or 'per unit'} "
        f"(95% CI {r['ci_low']:.2f}–{r['ci_high']:.2f}, adjusted p={r['p_adjusted']:.2g})"
    )
