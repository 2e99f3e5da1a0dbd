"""Chart pieces every report section shares: the size and theme of a chart, the legend
selection and the forest layer (estimate and CI whisker on a log axis). Each section's own
chart lives in its module under ``dashboards/sections/``.

Charts carry aggregates, never raw samples, so the report stays small. Every tooltip is plain
text (Vega-Embed's default handler escapes it); nothing here builds HTML.
"""

from __future__ import annotations

import altair as alt
import polars as pl

WIDTH = 620
HEIGHT = 300
FONT = "Helvetica, Arial, sans-serif"


def configure(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """Slide-friendly defaults: white background, readable fonts, no chart border."""
    return (
        chart.configure(background="white", font=FONT)
        .configure_view(stroke=None)
        .configure_axis(labelFontSize=12, titleFontSize=13, gridColor="#e6e6e6")
        .configure_legend(labelFontSize=12, titleFontSize=12)
        .configure_title(fontSize=15, anchor="start")
    )


def legend_select(field: str):
    return alt.selection_point(fields=[field], bind="legend")


def forest(df, y, est: str, lo: str, hi: str, title: str, tooltip, color) -> alt.LayerChart:
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


def unit_line(color: str) -> alt.Chart:
    """Dashed reference line at x = 1 (constant hazard, no effect)."""
    return (
        alt.Chart(pl.DataFrame({"x": [1.0]}))
        .mark_rule(strokeDash=[4, 4], color=color)
        .encode(x="x:Q")
    )


