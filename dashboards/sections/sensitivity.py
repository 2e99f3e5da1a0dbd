"""What-if sensitivity: the goodput gain of each single improvement at the target scale."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.whatif import sensitivity_frame
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import pct

KEY = "sensitivity"
TITLE = "What-if: which single improvement buys the most goodput"
TABLES = ("goodput_projections",)


def tornado_chart(sens: pl.DataFrame) -> alt.LayerChart:
    """Goodput gain (percentage points) from each single improvement (``sensitivity_frame``),
    largest first."""
    df = sens.select("change", "knob", "gain_pp", "goodput", "goodput_base", "n_gpus", "method")
    bars, y = charts.gain_bars(
        df,
        "goodput gain (percentage points)",
        [
            "change:N",
            alt.Tooltip("gain_pp:Q", format="+.2f", title="gain (pp)"),
            alt.Tooltip("goodput_base:Q", format=".2%", title="baseline goodput"),
            alt.Tooltip("goodput:Q", format=".2%", title="goodput after change"),
            alt.Tooltip("n_gpus:Q", format=","),
            "method:N",
        ],
    )
    text = (
        alt.Chart(df)
        .mark_text(align="left", dx=4, fontSize=11)
        .encode(y=y, x="gain_pp:Q", text=alt.Text("gain_pp:Q", format="+.2f"))
    )
    return (bars + text).properties(width=charts.WIDTH - 60, height=max(100, 26 * df.height))


def build(ctx: ReportContext) -> Section:
    sens = sensitivity_frame(ctx.t["goodput_projections"])
    if sens.height == 0:
        return Section(KEY, TITLE, note=NO_DATA)
    s = Section(KEY, TITLE, chart=tornado_chart(sens))
    a = sens.row(0, named=True)
    text = (
        f"At {a['n_gpus']:,} GPUs, the biggest lever is {a['change']}: {a['gain_pp']:+.2f} "
        "percentage points"
    )
    if a["goodput_base"] is not None:
        text += f" ({pct(a['goodput_base'])} to {pct(a['goodput'])})"
    if sens.height > 1:
        b = sens.row(1, named=True)
        text += f"; next is {b['change']} ({b['gain_pp']:+.2f} pp)"
    s.reading = text + "."
    return s
