"""Text and chart specs as the report can show them: every character XML cannot hold shown as
its picture (an escape sequence in a host name), and numbers JSON cannot hold as null. One rule
for the page, the charts and their images."""

from __future__ import annotations

import math

# The characters XML 1.0 forbids (C0 controls but tab, newline and carriage return; U+FFFE and
# U+FFFF), and DEL, as Unicode shows them: ESC as its control picture U+241B. The SVG renderer
# (vl-convert) aborts the process on any of them, and a browser shows nothing for them; data
# holds them only when a record is corrupt or hostile (a host named with an escape sequence).
NOT_XML = {c: 0x2400 + c for c in (*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20))} | {
    0x7F: 0x2421,
    0xFFFE: 0xFFFD,
    0xFFFF: 0xFFFD,
}


def xml_safe(text: str) -> str:
    """``text`` with every character XML cannot hold shown as its picture (``NOT_XML``): the
    one rule for text the report puts in HTML, SVG or a chart."""
    return text.translate(NOT_XML)


def printable(obj):
    """The spec as a chart can show it: NaN / infinity as null (JSON has no such numbers),
    every string ``xml_safe``."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, str):
        return xml_safe(obj)
    if isinstance(obj, dict):
        return {k: printable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable(v) for v in obj]
    return obj
