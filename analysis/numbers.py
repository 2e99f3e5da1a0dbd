"""How numbers are written for people, one way everywhere (the report, every command's table):
a fraction as a percent, a count or GPU-hours with sensible digits, a time between events in
hours, money, and a change against an earlier value. Plain functions of floats: no import
beyond the standard library, so the quick commands (``project``, ``nodes``) use them too."""

from __future__ import annotations

import math


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f}%"


def num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def hours(h: float | None) -> str:
    if h is None or not math.isfinite(h):
        return "n/a"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"


def in_hours(h: float | None) -> str:
    """A time between events (MTBF, MTTI) in hours, always: ``0.42 h``, ``12.3 h``, ``1,234 h``."""
    if h is None or not math.isfinite(h):
        return "n/a"
    if h < 10:
        return f"{h:.2g} h" if h < 1 else f"{h:.1f} h"
    return f"{h:,.0f} h" if h >= 100 else f"{h:.1f} h"


def money(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"${x:,.0f}"


def change(now: float | None, before: float | None, unit: str = "") -> str:
    """``now`` against ``before``: a fraction's change in points (``+1.2 points``), any other
    figure's signed difference in its unit with the relative change (``+120 GPU-hours, +8%``;
    unit ``$``: ``+$1,877, +116%``)."""
    if now is None or before is None or not (math.isfinite(now) and math.isfinite(before)):
        return "n/a"
    d = now - before
    if unit == "points":
        return f"{100 * d:+.1f} points"
    if unit == "$":
        text = f"{'-' if d < 0 else '+'}${abs(d):,.0f}"
    else:
        text = f"{d:+,.0f}" if abs(d) >= 100 or d == int(d) else f"{d:+.3g}"
        text += f" {unit}" if unit else ""
    return text + (f", {d / before:+.0%}" if before else "")
