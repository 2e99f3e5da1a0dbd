"""What raises the failure hazard: Cox hazard ratios (95% CI) coloured by adjusted significance."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import NO_DATA, ReportContext, Section

KEY = "hazard_ratios"
TITLE = "What raises the failure hazard (Cox hazard ratios, 95% CI)"
ORDER = 60
TABLES = ("hazard_ratios",)


MAX_CI_SPAN = 1e4  # a hazard-ratio CI wider than this factor is drawn as not estimable
EVIDENCE = {  # hazard-ratio row -> how strongly the table supports it (colour of the chart)
    "clear": "clear effect (Holm-adjusted p < 0.05, PH holds)",
    "ph": "adjusted p < 0.05 but proportional hazards rejected",
    "none": "not significant after correction",
}


def hazard_ratio_chart(hazard_ratios: pl.DataFrame) -> alt.LayerChart:
    """Cox hazard ratios with 95% CI on a log axis, reference line at 1; each row names its
    unit (per degC, a rack vs the reference rack) and is coloured by adjusted significance.
    Rows whose CI spans more than ``MAX_CI_SPAN`` (e.g. a rack with no failure: the Cox
    estimate runs to 0) carry no information and would crush the axis: left out, counted in
    the subtitle."""
    finite = (pl.col("hr") > 0) & pl.col("hr").is_finite()
    informative = (
        finite
        & (pl.col("ci_low") > 0)
        & pl.col("ci_high").is_finite()
        & (pl.col("ci_high") < MAX_CI_SPAN * pl.col("ci_low"))
    )
    n_left_out = hazard_ratios.height - hazard_ratios.filter(informative).height
    df = (
        hazard_ratios.filter(informative)
        .with_columns(
            (
                pl.col("component_class")
                + " · "
                + pl.when(pl.col("reference").is_not_null())
                .then(pl.col("unit"))
                .otherwise(pl.col("covariate") + " " + pl.col("unit").fill_null("per unit"))
            )
            .fill_null(pl.col("component_class") + " · " + pl.col("covariate"))
            .alias("term"),
            pl.when(pl.col("clear_effect").fill_null(False))
            .then(pl.lit(EVIDENCE["clear"]))
            .when(pl.col("p_adjusted") < 0.05)
            .then(pl.lit(EVIDENCE["ph"]))
            .otherwise(pl.lit(EVIDENCE["none"]))
            .alias("evidence"),
            pl.when(pl.col("ci_low") > 0)
            .then(pl.col("ci_low"))
            .otherwise(pl.col("hr"))
            .alias("lo"),
            pl.col("ci_high").fill_null(pl.col("hr")).alias("hi"),
        )
        .sort("hr", descending=True)
    )
    order = df["term"].to_list()
    y = alt.Y("term:N", sort=order, title=None, axis=alt.Axis(labelLimit=400))
    color = alt.Color(
        "evidence:N",
        scale=alt.Scale(domain=list(EVIDENCE.values()), range=["#d62728", "#ff7f0e", "#9e9e9e"]),
        legend=alt.Legend(orient="bottom", title=None, columns=1, labelLimit=0),
    )
    tip = [
        "component_class:N",
        "covariate:N",
        alt.Tooltip("unit:N"),
        alt.Tooltip("hr:Q", format=".3f", title="hazard ratio"),
        alt.Tooltip("ci_low:Q", format=".3f"),
        alt.Tooltip("ci_high:Q", format=".3f"),
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
    return (charts.unit_line("#555") + ratios).properties(
        width=charts.WIDTH,
        height=max(100, 28 * len(order)),
        title=alt.TitleParams(
            "Cox hazard ratios, 95% CI",
            subtitle=f"{note}significance after {_adjustment(hazard_ratios)} correction over all rows",
        ),
    )


def _adjustment(hazard_ratios: pl.DataFrame) -> str:
    m = hazard_ratios["p_adjust_method"].drop_nulls()
    return m[0] if m.len() else "multiple-testing"


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    hr = t["hazard_ratios"].filter((pl.col("hr") > 0) & pl.col("hr").is_finite())
    if hr.height == 0:
        s.note = NO_DATA
        return s
    s.chart = hazard_ratio_chart(t["hazard_ratios"])
    # only effects that survive the multiple-testing correction and pass the PH test
    clear = hr.filter(pl.col("clear_effect").fill_null(False)).sort("p_adjusted")
    method = hr["p_adjust_method"].drop_nulls().first() or "multiple-testing"
    if clear.height == 0:
        s.reading = (
            f"None of the {hr.height} covariate effects survives {method} correction for "
            f"{hr.height} tests (adjusted p < 0.05) with a passing proportional-hazards test: "
            "no clear driver yet."
        )
        return s
    effects = "; ".join(
        f"{r['covariate']} on {r['component_class']} multiplies the hazard by {r['hr']:.2f} "
        f"{r['unit'] or 'per unit'} (95% CI {r['ci_low']:.2f}–{r['ci_high']:.2f}, "
        f"adjusted p={r['p_adjusted']:.2g})"
        for r in clear.iter_rows(named=True)
    )
    s.reading = (
        f"Clear effects ({clear.height} of {hr.height}: adjusted p < 0.05 after {method} "
        f"correction for {hr.height} tests, proportional hazards not rejected): {effects}."
    )
    return s
