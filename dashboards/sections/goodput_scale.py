"""Projected goodput vs job scale (95% band) and the optimal checkpoint interval at each scale."""

from __future__ import annotations

import math

import altair as alt
import polars as pl

from analysis.headline import BAND_COVERS
from analysis.slowness.at_scale import running_slow_note
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import SCOPE_WORDS
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours
from dashboards.section import interruption_scope
from dashboards.section import pct
from dashboards.section import projection_at
from dashboards.section import scale_frame

KEY = "goodput_scale"
TITLE = "Projected goodput vs job scale, and the checkpoint interval to use"
TABLES = ("goodput_projections",)


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
        *charts.ci_tooltips("goodput", ".1%"),
        charts.hours_tip("mtti_hours", "MTTI"),
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
        width=charts.WIDTH, height=charts.HEIGHT - 40, title="Goodput vs job scale"
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
        .properties(
            width=charts.WIDTH, height=170, title="Optimal checkpoint interval at each scale"
        )
    )
    return alt.vconcat(top, bottom, spacing=20)


def build(ctx: ReportContext) -> Section:
    t, target = ctx.t, ctx.target_gpus
    s = Section(KEY, TITLE)
    sc = scale_frame(t["goodput_projections"])
    if sc.height == 0:
        s.note = NO_DATA
        return s
    s.chart = scale_chart(sc, target)
    exact = projection_at(t["goodput_projections"], target)
    near = (
        exact
        if exact is not None
        else sc.with_columns(
            (pl.col("n_gpus").cast(pl.Float64).log() - math.log(target)).abs().alias("_d")
        )
        .sort("_d")
        .row(0, named=True)
    )
    big = sc.row(-1, named=True)
    scope_words = SCOPE_WORDS.get(
        interruption_scope(t["goodput_projections"]), interruption_scope(t["goodput_projections"])
    )
    text = (
        f"At {near['n_gpus']:,} GPUs the projected goodput is {pct(near['goodput'])} "
        f"(95% band {pct(near['goodput_ci_low'])}–{pct(near['goodput_ci_high'])}) with a "
        "checkpoint every "
        f"{hours(near['optimal_interval_hours'])} (Daly's optimum; Young's "
        f"{hours(near['young_interval_hours'])}). Interruption scope: "
        f"{scope_words}; {running_slow_note(near)}"
    )
    if big["n_gpus"] != near["n_gpus"]:
        text += f"; at {big['n_gpus']:,} GPUs it is {pct(big['goodput'])}"
    s.reading = f"{text}. The 95% band {BAND_COVERS} (the what-if section varies those)."
    return s
