"""Operations what-if: the fleet simulator's spare-sizing curve and its knobs ranked by
fleet-goodput gain (``fleetsim_results``, analysis/fleetsim). Shown only when the table has
rows (scenarios in HOME/scenarios, the ``fleetsim`` job)."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.fleetsim.sweep import GAIN
from analysis.fleetsim.sweep import GOODPUT
from analysis.fleetsim.sweep import SPARES_KNOB
from dashboards import charts
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import pct

KEY = "operations_whatif"
TITLE = "Operations what-if: spares, repair line and triage on the whole fleet (simulated)"
TABLES = ("fleetsim_results",)


def ranked_frame(res: pl.DataFrame) -> pl.DataFrame:
    """Per scenario and sweep point: the paired fleet-goodput gain over the scenario's baseline
    (metric ``fleet_goodput_gain``) in percentage points with its 95% CI, largest first."""
    return (
        res.filter((pl.col("study") == "sweep") & (pl.col("metric") == GAIN))
        .with_columns(
            pl.format("{}: {} = {}", "scenario", "knob", "knob_value").alias("change"),
            (pl.col("mean") * 100).alias("gain_pp"),
            (pl.col("ci_low") * 100).alias("lo"),
            (pl.col("ci_high") * 100).alias("hi"),
        )
        .sort("gain_pp", descending=True)
    )


def spare_frame(res: pl.DataFrame) -> pl.DataFrame:
    """Spare-curve points: fleet goodput and the largest job size's ETTR per spare count."""
    curve = res.filter((pl.col("study") == "spare_curve") & (pl.col("knob") == SPARES_KNOB))
    ettr = curve.filter(pl.col("metric").str.starts_with("ettr:")).with_columns(
        pl.col("metric").str.split(":").list.get(1).cast(pl.Int64).alias("gpus")
    )
    biggest = ettr.group_by("scenario").agg(pl.col("gpus").max().alias("top"))
    ettr = ettr.join(biggest, on="scenario").filter(pl.col("gpus") == pl.col("top"))
    ettr = ettr.with_columns(
        ("ETTR of " + pl.col("gpus").cast(pl.Utf8) + "-GPU jobs").alias("series")
    )
    fleet = curve.filter(pl.col("metric") == GOODPUT).with_columns(
        pl.lit("fleet goodput").alias("series")
    )
    cols = ["scenario", "series", "knob_value", "mean", "ci_low", "ci_high"]
    return pl.concat([fleet.select(cols), ettr.select(cols)]).sort(
        "scenario", "series", "knob_value"
    )


def spare_chart(df: pl.DataFrame) -> alt.LayerChart:
    base = alt.Chart(df).encode(
        x=alt.X(
            "knob_value:Q",
            title="hot spare nodes (bought on top of the fleet)",
            axis=alt.Axis(format="d", tickMinStep=1),
        ),
        color=alt.Color("series:N", title=None),
        strokeDash=alt.StrokeDash("scenario:N", title="scenario"),
    )
    band = base.mark_area(opacity=0.2).encode(
        y=alt.Y("ci_low:Q", title="share", axis=alt.Axis(format="%"), scale=alt.Scale(zero=False)),
        y2="ci_high:Q",
    )
    line = base.mark_line(point=True).encode(
        y="mean:Q",
        tooltip=[
            "scenario:N",
            "series:N",
            alt.Tooltip("knob_value:Q", title="hot spares"),
            *charts.ci_tooltips("mean", ".2%", stem=""),
        ],
    )
    return (band + line).properties(
        width=charts.WIDTH, height=charts.HEIGHT - 60, title="Spare sizing"
    )


def ranked_chart(df: pl.DataFrame) -> alt.LayerChart:
    bars, y = charts.gain_bars(
        df,
        "fleet goodput gain (percentage points, 95% CI)",
        [
            "change:N",
            alt.Tooltip("gain_pp:Q", format="+.2f"),
            alt.Tooltip("lo:Q", format="+.2f"),
            alt.Tooltip("hi:Q", format="+.2f"),
        ],
    )
    whisk = alt.Chart(df).mark_rule().encode(y=y, x="lo:Q", x2="hi:Q")
    return (bars + whisk).properties(
        width=charts.WIDTH - 60, height=max(80, 26 * df.height), title="Knobs ranked"
    )


def build(ctx: ReportContext) -> Section | None:
    res = ctx.t["fleetsim_results"]
    if res.height == 0:
        return None
    s = Section(KEY, TITLE)
    ranked, spares = ranked_frame(res), spare_frame(res)
    parts = ([spare_chart(spares)] if spares.height else []) + (
        [ranked_chart(ranked)] if ranked.height else []
    )
    base = res.filter((pl.col("study") == "baseline") & (pl.col("metric") == GOODPUT)).sort(
        "scenario"
    )
    b = base.row(0, named=True)
    text = (
        f"Scenario {b['scenario']}: simulated fleet goodput {pct(b['mean'])} "
        f"(95% CI {pct(b['ci_low'])} to {pct(b['ci_high'])}, {b['replications']} replications)"
    )
    if ranked.height:
        top = ranked.row(0, named=True)
        text += (
            f"; the biggest lever is {top['change']} ({top['gain_pp']:+.2f} pp, "
            f"CI {top['lo']:+.2f} to {top['hi']:+.2f})"
        )
    s.reading = text + "."
    if parts:
        s.chart = alt.vconcat(*parts)
    else:
        s.note = (
            "the scenarios have no sweeps or spare curve: add sweeps / spare_curve to a scenario"
        )
    return s
