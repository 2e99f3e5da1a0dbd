"""What-if sensitivity: the goodput gain of each single improvement at the target scale."""

from __future__ import annotations

import altair as alt
import polars as pl

from dashboards import charts
from dashboards.section import NO_DATA, ReportContext, Section, pct

KEY = "sensitivity"
TITLE = "What-if: which single improvement buys the most goodput"
ORDER = 80
TABLES = ("goodput_projections",)


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
    return (bars + text).properties(width=charts.WIDTH - 60, height=max(100, 26 * len(order)))


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    sens = sensitivity_frame(t["goodput_projections"])
    if sens.height == 0:
        s.note = NO_DATA
        return s
    s.chart = tornado_chart(sens)
    a = sens.row(0, named=True)
    text = f"At {a['n_gpus']:,} GPUs, the biggest lever is {a['change']}: {a['gain_pp']:+.2f} percentage points"
    if a["goodput_base"] is not None:
        text += f" ({pct(a['goodput_base'])} to {pct(a['goodput'])})"
    if sens.height > 1:
        b = sens.row(1, named=True)
        text += f"; next is {b['change']} ({b['gain_pp']:+.2f} pp)"
    s.reading = text + "."
    return s
