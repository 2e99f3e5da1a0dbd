"""One function per report chart: Polars frames in the warehouse schemas in, an Altair chart out.

Charts carry aggregates, never raw samples, so the report stays small. Every tooltip is plain
text (Vega-Embed's default handler escapes it); nothing here builds HTML. The ``*_frame``
helpers shape the data a chart and its reading line share, so the sentence under a chart is
computed from exactly what the chart shows.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.taxonomy import LLAMA3_TABLE

WIDTH = 620
HEIGHT = 300
FONT = "Helvetica, Arial, sans-serif"

# Llama 3's published interruptions with their one folding into our classes (analysis.taxonomy).
LLAMA3_MIX = LLAMA3_TABLE

BADPUT_PARTS = (
    ("productive_hours", "productive"),
    ("lost_work_hours", "lost work since last checkpoint"),
    ("restart_hours", "restart / recovery"),
    ("checkpoint_hours", "checkpoint overhead"),
    ("queue_after_failure_hours", "queue wait after failure"),
    ("other_hours", "other (unfinished, idle gaps)"),
)


def configure(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Slide-friendly defaults: white background, readable fonts, no chart border."""
    return (
        chart.configure(background="white", font=FONT)
        .configure_view(stroke=None)
        .configure_axis(labelFontSize=12, titleFontSize=13, gridColor="#e6e6e6")
        .configure_legend(labelFontSize=12, titleFontSize=12)
        .configure_title(fontSize=15, anchor="start")
    )


def _legend_select(field: str):
    return alt.selection_point(fields=[field], bind="legend")


# ----------------------------------------------------------------------------- headline
def headline_chart(figures: pl.DataFrame) -> alt.Chart:
    """Headline tiles: ``figures`` has label, value (formatted text), detail."""
    df = figures.with_row_index("i").with_columns(
        (pl.col("i") % 3).alias("col"), (pl.col("i") // 3).alias("row")
    )
    base = alt.Chart(df).encode(
        x=alt.X("col:O", axis=None),
        y=alt.Y("row:O", axis=None),
        tooltip=[alt.Tooltip("label:N"), alt.Tooltip("value:N"), alt.Tooltip("detail:N")],
    )
    value = base.mark_text(fontSize=30, fontWeight="bold", dy=-12, color="#1f3b73").encode(
        text="value:N"
    )
    label = base.mark_text(fontSize=13, dy=14, color="#333").encode(text="label:N")
    detail = base.mark_text(fontSize=11, dy=32, color="#777").encode(text="detail:N")
    return (value + label + detail).properties(width=WIDTH, height=110 * int(df["row"].max() + 1))


# ----------------------------------------------------------------------------- causes
def cause_mix_frame(interruptions: pl.DataFrame) -> pl.DataFrame:
    """Unexpected (unplanned) interruptions by cause class: count, share, cumulative share."""
    df = interruptions.filter(~pl.col("planned").fill_null(False))
    mix = (
        df.group_by(pl.col("cause_class").fill_null("unknown"))
        .agg(pl.len().alias("count"), pl.col("lost_gpu_hours").sum().alias("lost_gpu_hours"))
        .sort(["count", "cause_class"], descending=[True, False])
    )
    total = mix["count"].sum()
    return mix.with_columns(
        (pl.col("count") / total).alias("share"),
        (pl.col("count").cum_sum() / total).alias("cum_share"),
    )


def llama3_frame() -> pl.DataFrame:
    """The Llama 3 reference mix per class of our taxonomy (count and share of 419)."""
    raw = pl.DataFrame(
        {
            "published": [r[0] for r in LLAMA3_MIX],
            "count": [r[1] for r in LLAMA3_MIX],
            "cause_class": [r[2] for r in LLAMA3_MIX],
        }
    )
    agg = raw.group_by("cause_class").agg(pl.col("count").sum(), pl.col("published").str.join(", "))
    return agg.with_columns((pl.col("count") / pl.col("count").sum()).alias("share")).sort(
        "count", descending=True
    )


SOURCES = ["this fleet", "Llama 3 (published)"]


def causes_chart(mix: pl.DataFrame, ref: pl.DataFrame) -> alt.HConcatChart:
    """Pareto of unexpected interruptions by class (``cause_mix_frame``), beside this fleet's vs
    Llama 3's mix (``llama3_frame``)."""
    order = mix["cause_class"].to_list()
    bars = (
        alt.Chart(mix)
        .mark_bar(color="#4c78a8")
        .encode(
            x=alt.X("cause_class:N", sort=order, title="cause class"),
            y=alt.Y("count:Q", title="unexpected interruptions"),
            tooltip=[
                "cause_class:N",
                "count:Q",
                alt.Tooltip("share:Q", format=".1%"),
                alt.Tooltip("lost_gpu_hours:Q", format=",.0f", title="lost GPU-hours"),
            ],
        )
    )
    line = (
        alt.Chart(mix)
        .mark_line(point=True, color="#e45756")
        .encode(
            x=alt.X("cause_class:N", sort=order),
            y=alt.Y(
                "cum_share:Q",
                title="cumulative share",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=["cause_class:N", alt.Tooltip("cum_share:Q", format=".1%", title="cumulative")],
        )
    )
    pareto = (
        alt.layer(bars, line)
        .resolve_scale(y="independent")
        .properties(width=WIDTH // 2, height=HEIGHT, title="This fleet: Pareto by class")
    )
    both = pl.concat(
        [
            mix.select("cause_class", "share", "count").with_columns(
                pl.lit("this fleet").alias("source")
            ),
            ref.select("cause_class", "share", "count").with_columns(
                pl.lit("Llama 3 (published)").alias("source")
            ),
        ],
        how="vertical_relaxed",
    )
    classes = both.group_by("cause_class").agg(pl.col("share").max()).sort("share", descending=True)
    compare = (
        alt.Chart(both)
        .mark_bar()
        .encode(
            y=alt.Y("cause_class:N", sort=classes["cause_class"].to_list(), title=None),
            x=alt.X(
                "share:Q", title="share of unexpected interruptions", axis=alt.Axis(format="%")
            ),
            yOffset=alt.YOffset("source:N", sort=SOURCES),
            color=alt.Color(
                "source:N",
                scale=alt.Scale(domain=SOURCES, range=["#4c78a8", "#bab0ac"]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=["source:N", "cause_class:N", "count:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(width=WIDTH // 2 - 40, height=HEIGHT, title="Share vs Llama 3 reference")
    )
    return alt.hconcat(pareto, compare, spacing=40)


# ----------------------------------------------------------------------------- fits
def rates_frame(failure_rates: pl.DataFrame, window: str = "all") -> pl.DataFrame:
    """Selected model per class (stratum 'all') for one window, positive rates only."""
    return failure_rates.filter(
        pl.col("selected").fill_null(False)
        & (pl.col("window") == window)
        & (pl.col("stratum").fill_null("all") == "all")
    ).sort("rate_per_1k_unit_days", descending=True, nulls_last=True)


def _forest(df, y, est: str, lo: str, hi: str, title: str, tooltip, color) -> alt.LayerChart:
    """A CI whisker (``lo``..``hi``) and the estimate per row on a log x axis: the forest layer
    shared by failure rates, Weibull shapes and hazard ratios. ``color`` is a (whisker, point)
    pair of fixed colours, or an Altair Color encoding for both."""
    xs = alt.Scale(type="log")
    fixed = isinstance(color, tuple)
    enc = {} if fixed else {"color": color}
    rule = (
        alt.Chart(df)
        .mark_rule(strokeWidth=2, **({"color": color[0]} if fixed else {}))
        .encode(
            y=y, x=alt.X(f"{lo}:Q", scale=xs, title=title), x2=f"{hi}:Q", tooltip=tooltip, **enc
        )
    )
    pt = (
        alt.Chart(df)
        .mark_point(filled=True, size=80, **({"color": color[1]} if fixed else {}))
        .encode(y=y, x=alt.X(f"{est}:Q", scale=xs), tooltip=tooltip, **enc)
    )
    return rule + pt


def _unit_line(color: str) -> alt.Chart:
    """Dashed reference line at x = 1 (constant hazard, no effect)."""
    return (
        alt.Chart(pl.DataFrame({"x": [1.0]}))
        .mark_rule(strokeDash=[4, 4], color=color)
        .encode(x="x:Q")
    )


def failure_rate_chart(rates: pl.DataFrame) -> alt.HConcatChart:
    """Forest plot of rate per 1,000 unit-days (log x, 95% CI) and the Weibull shape per class,
    from ``rates_frame``."""
    df = rates.filter(pl.col("rate_per_1k_unit_days") > 0).with_columns(
        pl.when(pl.col("rate_ci_low") > 0)
        .then(pl.col("rate_ci_low"))
        .otherwise(pl.col("rate_per_1k_unit_days"))
        .alias("lo"),
        pl.col("rate_ci_high").fill_null(pl.col("rate_per_1k_unit_days")).alias("hi"),
    )
    order = df["component_class"].to_list()
    y = alt.Y("component_class:N", sort=order, scale=alt.Scale(domain=order), title=None)
    tip = [
        "component_class:N",
        "model:N",
        "n_units:Q",
        "n_events:Q",
        alt.Tooltip("rate_per_1k_unit_days:Q", format=".3g", title="rate / 1k unit-days"),
        alt.Tooltip("rate_ci_low:Q", format=".3g", title="CI low"),
        alt.Tooltip("rate_ci_high:Q", format=".3g", title="CI high"),
        alt.Tooltip("mtbf_hours:Q", format=",.0f", title="MTBF (h)"),
        "shape_reading:N",
    ]
    rates = _forest(
        df, y, "rate_per_1k_unit_days", "lo", "hi",
        "failures per 1,000 unit-days (log, 95% CI)", tip, ("#4c78a8", "#1f3b73"),
    )  # fmt: skip
    forest = rates.properties(
        width=WIDTH // 2 + 40, height=max(120, 28 * len(order)), title="Failure rate per class"
    )
    sh = df.filter(pl.col("shape").is_not_null())
    if sh.height == 0:
        return alt.hconcat(forest)
    sh = sh.with_columns(
        pl.col("shape_ci_low").fill_null(pl.col("shape")).alias("slo"),
        pl.col("shape_ci_high").fill_null(pl.col("shape")).alias("shi"),
    )
    stip = [
        "component_class:N",
        alt.Tooltip("shape:Q", format=".2f"),
        alt.Tooltip("shape_ci_low:Q", format=".2f", title="CI low"),
        alt.Tooltip("shape_ci_high:Q", format=".2f", title="CI high"),
        "shape_reading:N",
    ]
    ys = alt.Y(
        "component_class:N",
        sort=order,
        scale=alt.Scale(domain=order),
        title=None,
        axis=alt.Axis(labels=False, ticks=False),
    )
    shapes = _forest(
        sh, ys, "shape", "slo", "shi", "Weibull shape k (1 = constant hazard)", stip,
        ("#72b7b2", "#2a7f7a"),
    )  # fmt: skip
    shape = (_unit_line("#888") + shapes).properties(
        width=WIDTH // 2 - 80,
        height=max(120, 28 * len(order)),
        title="Weibull shape (>1 wear-out, <1 infant mortality)",
    )
    return alt.hconcat(forest, shape, spacing=20)


def survival_frame(survival_curves: pl.DataFrame, max_points: int = 120) -> pl.DataFrame:
    """Kaplan-Meier points per class, thinned to at most ``max_points`` per class by keeping
    the last estimate in each of ``max_points`` equal age bins (a step curve keeps its shape)."""
    km = (
        survival_curves.filter(pl.col("estimator") == "kaplan_meier")
        .select("component_class", "t", "survival", "ci_low", "ci_high", "at_risk")
        .drop_nulls(["t", "survival"])
        .sort("component_class", "t")
    )
    if km.height == 0:
        return km.with_columns(pl.lit(0.0).alias("days"))
    span = pl.col("t").max().over("component_class")
    km = km.with_columns(
        pl.when(span > 0).then((pl.col("t") / span * max_points).floor()).otherwise(0).alias("_bin")
    )
    first = km.group_by("component_class").agg(pl.all().first())
    thinned = km.group_by("component_class", "_bin").agg(pl.all().last())
    out = pl.concat([first.select(km.columns), thinned.select(km.columns)]).unique(
        ["component_class", "t"]
    )
    return (
        out.sort("component_class", "t").drop("_bin").with_columns((pl.col("t") / 24).alias("days"))
    )


def survival_chart(km: pl.DataFrame) -> alt.LayerChart:
    """Kaplan-Meier survival per class (``survival_frame``) with 95% CI bands; click the legend
    to isolate a class."""
    df = km.with_columns(
        pl.col("ci_low").fill_null(pl.col("survival")),
        pl.col("ci_high").fill_null(pl.col("survival")),
    )
    sel = _legend_select("component_class")
    color = alt.Color(
        "component_class:N",
        title="class",
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1),
    )
    x = alt.X("days:Q", title="unit age (days)")
    band = (
        alt.Chart(df)
        .mark_area(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("ci_low:Q"),
            y2="ci_high:Q",
            color=color,
            opacity=alt.condition(sel, alt.value(0.1), alt.value(0.02)),
        )
    )
    tip = [
        "component_class:N",
        alt.Tooltip("days:Q", format=".1f"),
        alt.Tooltip("survival:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f"),
        alt.Tooltip("ci_high:Q", format=".3f"),
        "at_risk:Q",
    ]
    line = (
        alt.Chart(df)
        .mark_line(interpolate="step-after", strokeWidth=2)
        .encode(
            x=x,
            y=alt.Y(
                "survival:Q",
                title="fraction still in service (Kaplan-Meier)",
                scale=alt.Scale(zero=False),
            ),
            color=color,
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.12)),
            tooltip=tip,
        )
        .add_params(sel)
    )
    return (band + line).properties(
        width=WIDTH,
        height=HEIGHT,
        title=alt.TitleParams(
            "Kaplan-Meier survival", subtitle="click the legend to isolate a class"
        ),
    )


def trend_frame(failure_rates: pl.DataFrame) -> pl.DataFrame:
    """Selected monthly-window rates per class (window 'YYYY-MM'); ``label`` is the axis label
    ('2026-03 (partial)' for a month observed only in part)."""
    return (
        failure_rates.filter(
            pl.col("selected").fill_null(False)
            & pl.col("window").str.contains(r"^\d{4}-\d{2}$")
            & (pl.col("stratum").fill_null("all") == "all")
        )
        .with_columns(
            (pl.col("window") + "-01").str.to_date().alias("month"),
            pl.when(pl.col("partial").fill_null(False))
            .then(pl.col("window") + " (partial)")
            .otherwise(pl.col("window"))
            .alias("label"),
            pl.col("low_exposure").fill_null(False),
        )
        .sort("component_class", "month")
    )


def rate_trend_chart(trend: pl.DataFrame) -> alt.LayerChart:
    """Monthly failure rate per class (``trend_frame``) with its 95% CI whisker, classes side
    by side within a month (an ordinal month axis: ``xOffset`` works on bands, not on a time
    axis). A month with no failure is an open triangle on a floor value (a log axis has no zero)
    with its CI's upper bound; a partial month says so in its label; a low-exposure month is
    a dashed whisker."""
    df = trend.filter(pl.col("rate_per_1k_unit_days").is_not_null())
    pos = df.filter(pl.col("rate_per_1k_unit_days") > 0)["rate_per_1k_unit_days"]
    floor = float(pos.min()) / 4 if pos.len() else 1e-3
    df = df.with_columns(
        pl.max_horizontal(pl.col("rate_per_1k_unit_days"), pl.lit(floor)).alias("rate"),
        pl.max_horizontal(pl.col("rate_ci_low").fill_null(floor), pl.lit(floor)).alias("lo"),
        pl.max_horizontal(pl.col("rate_ci_high").fill_null(floor), pl.lit(floor)).alias("hi"),
        pl.when(pl.col("low_exposure"))
        .then(pl.lit("low exposure"))
        .otherwise(pl.lit("enough exposure"))
        .alias("exposure"),
    )
    sel = _legend_select("component_class")
    order = df.sort("month")["label"].unique(maintain_order=True).to_list()
    x = alt.X("label:O", sort=order, title="month", axis=alt.Axis(labelAngle=0))
    ys = alt.Scale(type="log")
    color = alt.Color("component_class:N", title="class")
    op = alt.condition(sel, alt.value(1.0), alt.value(0.1))
    dash = alt.condition("datum.low_exposure", alt.value([3, 3]), alt.value([1, 0]))
    off = alt.XOffset("component_class:N")
    tip = [
        "component_class:N",
        "window:N",
        "n_events:Q",
        alt.Tooltip("exposure_hours:Q", format=",.0f", title="unit-hours"),
        alt.Tooltip("rate_per_1k_unit_days:Q", format=".3g", title="rate / 1k unit-days"),
        alt.Tooltip("rate_ci_low:Q", format=".3g", title="CI low"),
        alt.Tooltip("rate_ci_high:Q", format=".3g", title="CI high"),
        alt.Tooltip("partial:N", title="partial month"),
        alt.Tooltip("exposure:N", title="exposure"),
    ]
    title = "failures per 1,000 unit-days (log, 95% CI)"
    err = (
        alt.Chart(df)
        .mark_rule(strokeWidth=2)
        .encode(
            x=x,
            xOffset=off,
            y=alt.Y("lo:Q", scale=ys, title=title),
            y2="hi:Q",
            color=color,
            opacity=op,
            strokeDash=dash,
            tooltip=tip,
        )
        .add_params(sel)
    )
    dots = (
        alt.Chart(df.filter(pl.col("rate_per_1k_unit_days") > 0))
        .mark_point(filled=True, size=60)
        .encode(x=x, xOffset=off, y=alt.Y("rate:Q", scale=ys), color=color, opacity=op, tooltip=tip)
    )
    zero = (
        alt.Chart(df.filter(pl.col("rate_per_1k_unit_days") <= 0))
        .mark_point(shape="triangle-down", filled=False, size=70, strokeWidth=2)
        .encode(x=x, xOffset=off, y=alt.Y("rate:Q", scale=ys), color=color, opacity=op, tooltip=tip)
    )
    return (err + dots + zero).properties(
        width=WIDTH,
        height=HEIGHT,
        title=alt.TitleParams(
            "Monthly failure rate per class (95% CI)",
            subtitle=(
                "open triangles on the floor: months with no failure (whisker: CI upper bound); "
                "dashed: under a quarter of a median month's exposure; click the legend to "
                "isolate a class"
            ),
        ),
    )


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
    ratios = _forest(
        df, y, "hr", "lo", "hi", "hazard ratio per stated unit (log, 95% CI)", tip, color
    )
    note = (
        f"{n_left_out} row(s) with an uninformative CI (no failures in a level) left out; "
        if n_left_out
        else ""
    )
    return (_unit_line("#555") + ratios).properties(
        width=WIDTH,
        height=max(100, 28 * len(order)),
        title=alt.TitleParams(
            "Cox hazard ratios, 95% CI",
            subtitle=f"{note}significance after {_adjustment(hazard_ratios)} correction over all rows",
        ),
    )


def _adjustment(hazard_ratios: pl.DataFrame) -> str:
    m = hazard_ratios["p_adjust_method"].drop_nulls()
    return m[0] if m.len() else "multiple-testing"


# ----------------------------------------------------------------------------- goodput
def scale_frame(projections: pl.DataFrame) -> pl.DataFrame:
    """The n_gpus sweep (scenario 'scale_sweep' when present), analytic rows first."""
    df = projections.filter(pl.col("knob") == "n_gpus")
    if "scale_sweep" in df["scenario"].to_list():
        df = df.filter(pl.col("scenario") == "scale_sweep")
    if df.height and "analytic" in df["method"].to_list():
        df = df.filter(pl.col("method") == "analytic")
    return df.unique("n_gpus", keep="first").sort("n_gpus")


def scale_chart(scale: pl.DataFrame, target_gpus: int | None = None) -> alt.VConcatChart:
    """Projected goodput vs job size (``scale_frame``) with its CI band, and Daly's checkpoint
    interval below."""
    df = scale.with_columns(
        pl.col("goodput_ci_low").fill_null(pl.col("goodput")),
        pl.col("goodput_ci_high").fill_null(pl.col("goodput")),
        (pl.col("young_interval_hours") * 60).alias("interval_min"),
        (pl.col("optimal_interval_hours") * 60).alias("daly_min"),
    )
    x = alt.X("n_gpus:Q", scale=alt.Scale(type="log", nice=False), title="GPUs in the job (log)")
    tip = [
        alt.Tooltip("n_gpus:Q", format=","),
        alt.Tooltip("goodput:Q", format=".1%"),
        alt.Tooltip("goodput_ci_low:Q", format=".1%", title="CI low"),
        alt.Tooltip("goodput_ci_high:Q", format=".1%", title="CI high"),
        alt.Tooltip("mtti_hours:Q", format=".2f", title="MTTI (h)"),
        alt.Tooltip("interval_min:Q", format=".1f", title="Young interval (min)"),
        alt.Tooltip("daly_min:Q", format=".1f", title="Daly interval (min)"),
    ]
    band = (
        alt.Chart(df)
        .mark_area(opacity=0.25, color="#4c78a8")
        .encode(x=x, y=alt.Y("goodput_ci_low:Q"), y2="goodput_ci_high:Q")
    )
    line = (
        alt.Chart(df)
        .mark_line(point=True, color="#1f3b73")
        .encode(
            x=x,
            y=alt.Y("goodput:Q", title="projected goodput (95% band)", axis=alt.Axis(format="%")),
            tooltip=tip,
        )
    )
    layers = [band, line]
    if target_gpus:
        layers.append(
            alt.Chart(pl.DataFrame({"n_gpus": [target_gpus]}))
            .mark_rule(strokeDash=[4, 4], color="#e45756")
            .encode(x="n_gpus:Q")
        )
    top = alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT - 40, title="Goodput vs job scale"
    )
    long = df.unpivot(
        index=["n_gpus"],
        on=["interval_min", "daly_min"],
        variable_name="rule",
        value_name="minutes",
    )
    long = (
        long.with_columns(pl.col("rule").replace({"interval_min": "Young", "daly_min": "Daly"}))
        .drop_nulls("minutes")
        .filter(pl.col("minutes") > 0)
    )
    bottom = (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y(
                "minutes:Q",
                scale=alt.Scale(type="log"),
                title="optimal checkpoint interval (min, log)",
            ),
            color=alt.Color("rule:N", title="interval rule"),
            tooltip=[
                alt.Tooltip("n_gpus:Q", format=","),
                "rule:N",
                alt.Tooltip("minutes:Q", format=".1f"),
            ],
        )
        .properties(width=WIDTH, height=170, title="Optimal checkpoint interval at each scale")
    )
    return alt.vconcat(top, bottom, spacing=20)


def _change_label(knob: str, factor: float | None) -> str:
    f = "" if factor is None else f" x{factor:g}"
    if knob.startswith("rate:"):
        return f"{knob.split(':', 1)[1]} failure rate{f}"
    return {
        "ckpt_cost_s": f"checkpoint cost{f}",
        "ckpt_blocking_s": f"blocking checkpoint time{f}",
        "restart_s": f"restart time{f}",
    }.get(knob, knob)


def sensitivity_frame(projections: pl.DataFrame) -> pl.DataFrame:
    """Sensitivity rows (scenario 'sensitivity', analysis/whatif.py): knob = item, knob_value =
    goodput gain over the 'baseline' row. The improvement factor is read back from the
    checkpoint-cost or restart row against the baseline (all items share one factor)."""
    sens = projections.filter(pl.col("scenario") == "sensitivity")
    base = sens.filter(pl.col("knob") == "baseline")
    items = sens.filter((pl.col("knob") != "baseline") & pl.col("knob_value").is_not_null())
    factor = None
    if base.height:
        b = base.row(0, named=True)
        for knob, col in (("ckpt_cost_s", "ckpt_cost_s"), ("restart_s", "restart_s")):
            r = items.filter(pl.col("knob") == knob)
            if r.height and b[col]:
                factor = round(r[col][0] / b[col], 6)
                break
    spares_step = None
    if base.height and base["spares"][0] is not None:
        r = items.filter(pl.col("knob") == "spares")
        if r.height and r["spares"][0] is not None:
            spares_step = int(r["spares"][0] - base["spares"][0])
    labels = [
        (f"+{spares_step} spare nodes" if spares_step is not None else "more spare nodes")
        if k == "spares"
        else _change_label(k, factor)
        for k in items["knob"].to_list()
    ]
    base_goodput = base["goodput"][0] if base.height else None
    return items.with_columns(
        pl.Series("change", labels, dtype=pl.Utf8),
        (pl.col("knob_value") * 100).alias("gain_pp"),
        pl.lit(base_goodput, dtype=pl.Float64).alias("goodput_base"),
    ).sort("knob_value", descending=True)


def tornado_chart(sens: pl.DataFrame) -> alt.LayerChart:
    """Goodput gain (percentage points) from each single improvement (``sensitivity_frame``),
    largest first."""
    df = sens.select("change", "knob", "gain_pp", "goodput", "goodput_base", "n_gpus", "method")
    order = df["change"].to_list()
    y = alt.Y("change:N", sort=order, title=None)
    bars = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X("gain_pp:Q", title="goodput gain (percentage points)"),
            color=alt.condition(alt.datum.gain_pp >= 0, alt.value("#54a24b"), alt.value("#e45756")),
            tooltip=[
                "change:N",
                alt.Tooltip("gain_pp:Q", format="+.2f", title="gain (pp)"),
                alt.Tooltip("goodput_base:Q", format=".2%", title="baseline goodput"),
                alt.Tooltip("goodput:Q", format=".2%", title="goodput after change"),
                alt.Tooltip("n_gpus:Q", format=","),
                "method:N",
            ],
        )
    )
    text = (
        alt.Chart(df)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=y, x="gain_pp:Q", text=alt.Text("gain_pp:Q", format="+.2f"))
    )
    return (bars + text).properties(width=WIDTH - 60, height=max(100, 26 * len(order)))


def goodput_hist_frame(goodput_jobs: pl.DataFrame, bins: int = 20) -> pl.DataFrame:
    """GPU-hours and job counts per goodput bin (0..1)."""
    j = goodput_jobs.filter(pl.col("goodput").is_not_null())
    return (
        j.with_columns((pl.col("goodput").clip(0, 1) * bins).floor().clip(0, bins - 1).alias("b"))
        .group_by("b")
        .agg(pl.col("gpu_hours").sum(), pl.len().alias("jobs"))
        .with_columns((pl.col("b") / bins).alias("lo"), ((pl.col("b") + 1) / bins).alias("hi"))
        .sort("b")
    )


def badput_frame(goodput_jobs: pl.DataFrame) -> pl.DataFrame:
    """Share of GPU-hours per part (productive and each badput kind), n_gpus × hours weighted."""
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    j = goodput_jobs.filter(pl.col("wall_hours") > 0)
    total = j.select((w * pl.col("wall_hours")).sum()).item() or 0.0
    rows = []
    for col, label in BADPUT_PARTS:
        gh = j.select((w * pl.col(col).fill_null(0)).sum()).item() or 0.0
        rows.append({"part": label, "gpu_hours": gh, "share": gh / total if total else 0.0})
    return pl.DataFrame(rows)


def goodput_chart(hist: pl.DataFrame, badput: pl.DataFrame) -> alt.HConcatChart:
    """Measured goodput per job chain (``goodput_hist_frame``, weighted by GPU-hours) and the
    badput split (``badput_frame``)."""
    h = (
        alt.Chart(hist)
        .mark_bar(color="#4c78a8")
        .encode(
            x=alt.X(
                "lo:Q",
                bin="binned",
                title="measured goodput of the job chain",
                axis=alt.Axis(format="%"),
            ),
            x2="hi:Q",
            y=alt.Y("gpu_hours:Q", title="GPU-hours"),
            tooltip=[
                alt.Tooltip("lo:Q", format=".0%", title="from"),
                alt.Tooltip("hi:Q", format=".0%", title="to"),
                alt.Tooltip("gpu_hours:Q", format=",.0f", title="GPU-hours"),
                "jobs:Q",
            ],
        )
        .properties(width=WIDTH // 2, height=HEIGHT, title="Distribution (weighted by GPU-hours)")
    )
    parts = badput.with_columns(pl.lit("GPU-hours").alias("all"))
    order = [p[1] for p in BADPUT_PARTS]
    b = (
        alt.Chart(parts)
        .mark_bar()
        .encode(
            y=alt.Y("part:N", sort=order, title=None),
            x=alt.X("share:Q", title="share of job GPU-hours", axis=alt.Axis(format="%")),
            color=alt.Color(
                "part:N",
                sort=order,
                legend=None,
                scale=alt.Scale(
                    domain=order,
                    range=["#54a24b", "#e45756", "#f58518", "#eeca3b", "#b279a2", "#bab0ac"],
                ),
            ),
            tooltip=[
                "part:N",
                alt.Tooltip("share:Q", format=".2%"),
                alt.Tooltip("gpu_hours:Q", format=",.0f", title="GPU-hours"),
            ],
        )
    )
    t = (
        alt.Chart(parts)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=alt.Y("part:N", sort=order), x="share:Q", text=alt.Text("share:Q", format=".1%"))
    )
    return alt.hconcat(
        h,
        (b + t).properties(width=WIDTH // 2 - 60, height=HEIGHT, title="Where the GPU-hours went"),
        spacing=30,
    )


# ----------------------------------------------------------------------------- data quality
def ingest_frame(manifest: pl.DataFrame) -> pl.DataFrame:
    """Files, rows kept and records quarantined per source format."""
    return (
        manifest.group_by(pl.col("format").fill_null("unknown"))
        .agg(
            pl.len().alias("files"),
            pl.col("rows_ok").sum(),
            pl.col("rows_quarantined").sum(),
            pl.col("bytes").sum(),
        )
        .with_columns(
            (pl.col("rows_quarantined") / (pl.col("rows_ok") + pl.col("rows_quarantined")))
            .fill_nan(0.0)
            .alias("quarantined_share")
        )
        .sort("rows_ok", descending=True)
    )


def data_quality_chart(df: pl.DataFrame) -> alt.HConcatChart:
    """Rows kept and records quarantined per source format (``ingest_frame``; symlog x: volumes
    differ by 10^5 and a log scale has no zero for bars to start from)."""
    long = (
        df.unpivot(
            index=["format", "files", "quarantined_share"],
            on=["rows_ok", "rows_quarantined"],
            variable_name="kind",
            value_name="records",
        )
        .with_columns(
            pl.col("kind").replace({"rows_ok": "rows kept", "rows_quarantined": "quarantined"})
        )
        .filter(pl.col("records") > 0)
    )
    order = df["format"].to_list()
    top = max(1, int(long["records"].max() or 1))
    ticks = [0] + [10**k for k in range(len(str(top)) + 1)]
    return alt.hconcat(
        alt.Chart(long)
        .mark_bar()
        .encode(
            y=alt.Y("format:N", sort=order, title="source format"),
            x=alt.X(
                "records:Q",
                scale=alt.Scale(type="symlog"),
                title="records (symmetric log scale)",
                axis=alt.Axis(values=ticks, format=",d"),
            ),
            yOffset="kind:N",
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["rows kept", "quarantined"], range=["#4c78a8", "#e45756"]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=[
                "format:N",
                "kind:N",
                alt.Tooltip("records:Q", format=","),
                "files:Q",
                alt.Tooltip("quarantined_share:Q", format=".2%", title="quarantined share"),
            ],
        )
        .properties(width=WIDTH - 80, height=max(120, 34 * len(order)))
    )


def coverage_chart(coverage: pl.DataFrame) -> alt.Chart:
    """Time covered per host and source table: columns source, host, first, last, rows."""
    hosts = sorted(coverage["host"].unique().to_list())
    sel = _legend_select("source")
    return (
        alt.Chart(coverage)
        .mark_bar(height=5)
        .encode(
            y=alt.Y("host:N", sort=hosts, title=None, axis=alt.Axis(labelFontSize=9)),
            x=alt.X("first:T", title="time covered (UTC)"),
            x2="last:T",
            yOffset="source:N",
            color=alt.Color("source:N", title="source table"),
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.1)),
            tooltip=[
                "source:N",
                "host:N",
                alt.Tooltip("first:T", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("last:T", format="%Y-%m-%d %H:%M"),
                alt.Tooltip("rows:Q", format=","),
            ],
        )
        .add_params(sel)
        .properties(width=WIDTH, height=max(120, 16 * len(hosts)))
    )
