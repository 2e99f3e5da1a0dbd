"""Chart pieces every report section shares: the size and theme of a chart, the legend
selection and the forest layer (estimate and CI whisker on a log axis). Each section's own
chart lives in its module under ``dashboards/sections/``.

Charts carry aggregates, never raw samples, so the report stays small. Every tooltip is plain
text (Vega-Embed's default handler escapes it); nothing here builds HTML.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.numbers import MINUTE
from analysis.taxonomy import CLASSES
from analysis.taxonomy import WORKLOAD

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


# One colour per component / cause class in every chart, whichever classes a chart shows: the
# palette, defined here only. ``class_colors`` puts it on every chart of the report.
CLASS_COLORS: dict[str, str] = dict(
    zip(
        (*CLASSES, WORKLOAD),
        ("#d62728", "#ff7f0e", "#ffbb78", "#9467bd", "#c5b0d5", "#17becf", "#1f77b4", "#8c564b",
         "#aec7e8", "#bcbd22", "#dbdb8d", "#c49c94", "#7f7f7f", "#2ca02c", "#e377c2", "#c7c7c7",
         "#98df8a"),
        strict=True,
    )
)  # fmt: skip
CLASS_FIELDS = ("component_class", "cause_class")
OTHER_CLASS_COLOR = "#bab0ac"


def class_colors(spec: dict) -> dict:
    """``spec`` (a top-level Vega-Lite dict) with every colour encoding of a class field on the
    class palette (``CLASS_COLORS``): the same class, the same colour, in every chart. The
    scale's domain is the classes the chart's data holds (so its legend lists only those), in
    palette order; a class outside the palette is grey (``OTHER_CLASS_COLOR``), after them."""
    seen: dict[str, set] = {f: set() for f in CLASS_FIELDS}
    for rows in (spec.get("datasets") or {}).values():
        for row in rows:
            for f in CLASS_FIELDS:
                if row.get(f) is not None:
                    seen[f].add(row[f])

    def domain(field: str) -> tuple[list, list]:
        known = [c for c in CLASS_COLORS if c in seen[field]]
        other = sorted(map(str, seen[field] - set(CLASS_COLORS)))
        return known + other, [CLASS_COLORS[c] for c in known] + [OTHER_CLASS_COLOR] * len(other)

    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: (v if k == "datasets" else walk(v)) for k, v in node.items()}
        for channel in ("color", "fill", "stroke"):
            enc = out.get(channel)
            if isinstance(enc, dict) and enc.get("field") in CLASS_FIELDS:
                names, colors = domain(enc["field"])
                scale = {
                    k: v
                    for k, v in enc.get("scale", {}).items()
                    if k not in ("scheme", "range", "domain")
                }
                if names:
                    out[channel] = {**enc, "scale": {**scale, "domain": names, "range": colors}}
        return out

    return walk(spec)


def legend_select(field: str):
    return alt.selection_point(fields=[field], bind="legend")


def highlight(sel, dim: float = 0.1) -> dict:
    """Opacity that keeps what the legend selection ``sel`` picked opaque and dims the rest."""
    return alt.condition(sel, alt.value(1.0), alt.value(dim))


def framed(chart, title: str, subtitle: str, height=HEIGHT, width: int = WIDTH):
    """``chart`` at the report's chart size (or ``height`` / ``width``) under a title and the
    subtitle that says how to read or use it."""
    return chart.properties(
        width=width, height=height, title=alt.TitleParams(title, subtitle=subtitle)
    )


def gpu_hours_tip(field: str, title: str | None = None) -> alt.Tooltip:
    """A tooltip of GPU-hours (``field``, an expression such as ``sum(x)`` allowed): whole
    hours with thousands separators, as every section shows them."""
    return alt.Tooltip(f"{field}:Q", format=",.0f", **({"title": title} if title else {}))


# A time between events (MTBF, MTTR, MTTI) in a tooltip: three significant digits, thousands
# separated, never an exponent (0.423, 12.3, 1,230), as ``analysis.numbers.in_hours`` writes it.
HOURS = ",.3r"


def hours_tip(field: str, title: str) -> alt.Tooltip:
    """A tooltip of a time between events in hours (``HOURS``), titled ``{title} (h)``."""
    return alt.Tooltip(f"{field}:Q", format=HOURS, title=f"{title} (h)")


def share_tips(share: str, gpu_hours: str, title: str) -> list[alt.Tooltip]:
    """A share of GPU-hours and the GPU-hours it is: the tooltip of every GPU-hour bar."""
    return [alt.Tooltip(f"{share}:Q", format=".2%"), gpu_hours_tip(gpu_hours, title)]


def ci_tooltips(estimate: str, fmt: str, title: str | None = None, stem: str | None = None):
    """Tooltips of an estimate and its 95% CI bounds in one number format: ``estimate`` and
    the warehouse's ``{stem}_ci_low`` / ``{stem}_ci_high`` (``stem`` defaults to the estimate;
    ``""`` for tables whose bounds are plain ``ci_low`` / ``ci_high``)."""
    named = {"title": title} if title else {}
    stem = estimate if stem is None else stem
    prefix = f"{stem}_" if stem else ""
    return [
        alt.Tooltip(f"{estimate}:Q", format=fmt, **named),
        alt.Tooltip(f"{prefix}ci_low:Q", format=fmt, title="CI low"),
        alt.Tooltip(f"{prefix}ci_high:Q", format=fmt, title="CI high"),
    ]


def time_tips(*fields: str) -> list[alt.Tooltip]:
    """Tooltips of timestamps, to the minute (``MINUTE``)."""
    return [alt.Tooltip(f"{f}:T", format=MINUTE) for f in fields]


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


def gain_bars(df: pl.DataFrame, x_title: str, tooltip: list) -> tuple[alt.Chart, alt.Y]:
    """Bars of each change's goodput gain (``gain_pp``, percentage points), in the frame's order
    (largest first), green for a gain and red for a loss; and the y encoding, for the layers a
    section adds on the same rows (labels, CI whiskers)."""
    y = alt.Y("change:N", sort=df["change"].to_list(), title=None)
    # room past the longest bar for its label, however narrow the chart is drawn
    top, low = df["gain_pp"].max() or 0.0, df["gain_pp"].min() or 0.0
    room = alt.Scale(domainMax=max(top, 0.0) * 1.3, domainMin=min(low, 0.0) * 1.3)
    bars = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=y,
            x=alt.X("gain_pp:Q", title=x_title, scale=room),
            color=alt.condition(alt.datum.gain_pp >= 0, alt.value("#54a24b"), alt.value("#e45756")),
            tooltip=tooltip,
        )
    )
    return bars, y


def unit_line(color: str) -> alt.Chart:
    """Dashed reference line at x = 1 (constant hazard, no effect)."""
    return (
        alt.Chart(pl.DataFrame({"x": [1.0]}))
        .mark_rule(strokeDash=[4, 4], color=color)
        .encode(x="x:Q")
    )
