"""A PNG and an SVG per report chart, for slides: each titled with its section, the period and
the scope, so an exported image says what it shows."""

from __future__ import annotations

from pathlib import Path

import vl_convert as vlc

from dashboards.printable import printable
from dashboards.section import WHOLE_FLEET
from dashboards.section import Section
from dashboards.vendor import vegalite_version

TOP_LEVEL_ONLY = ("$schema", "config", "datasets", "params", "background", "padding", "autosize")


def titled(spec: dict, title: str, period: str, scope: str) -> dict:
    """The spec for a slide: the chart (its own title kept) under the section's title, with the
    period and the scope as subtitle lines, so an exported image says what it shows."""
    inner = {k: v for k, v in spec.items() if k not in TOP_LEVEL_ONLY}
    outer = {k: v for k, v in spec.items() if k in TOP_LEVEL_ONLY}
    head = {
        "text": title,
        "subtitle": [f"Period: {period}", f"Scope: {scope}"],
        "fontSize": 17,
        "subtitleFontSize": 12,
        "subtitleColor": "#555",
        "anchor": "start",
        "offset": 12,
    }
    return {**outer, "title": head, "vconcat": [inner]}


def write_images(
    sections: list[Section], folder: Path, period: str, scope: str = WHOLE_FLEET
) -> list[Path]:
    """PNG (2x) and SVG per chart, each titled with its section, period and scope (``titled``);
    stale images of sections without a chart are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    vl = vegalite_version()
    written = []
    for s in sections:
        png, svg = folder / f"{s.key}.png", folder / f"{s.key}.svg"
        if s.spec is None:
            png.unlink(missing_ok=True)
            svg.unlink(missing_ok=True)
            continue
        # Vega runs once per chart: the PNG is the SVG rasterized (the same bytes
        # vegalite_to_png gives, in half the time)
        spec = printable(titled(s.spec, s.title, period, scope))
        text = vlc.vegalite_to_svg(spec, vl_version=vl)
        svg.write_text(text, encoding="utf-8")
        png.write_bytes(vlc.svg_to_png(text, scale=2))
        written += [png, svg]
    return written
