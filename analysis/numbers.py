"""How numbers are written for people, one way everywhere (the report, every command's table):
a fraction as a percent, a count or GPU-hours with sensible digits, a time between events in
hours, money, a timestamp to the minute, and a change against an earlier value. Plain
functions of floats: no import beyond the standard library, so the quick commands
(``project``, ``nodes``) use them too."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

MINUTE = "%Y-%m-%d %H:%M"  # a timestamp for people: strftime here, d3-time-format in a chart


def _missing_as_na(fmt: Callable[..., str]) -> Callable[..., str]:
    """``fmt`` for a figure that may be missing: None or a non-finite value prints ``n/a``, the
    one rule every formatter here shares."""

    @functools.wraps(fmt)
    def formatted(x: float | None, *args, **kwargs) -> str:
        return "n/a" if x is None or not math.isfinite(x) else fmt(x, *args, **kwargs)

    return formatted


@_missing_as_na
def pct(x: float, digits: int = 1) -> str:
    return f"{100 * x:.{digits}f}%"


@_missing_as_na
def num(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


@_missing_as_na
def hours(h: float) -> str:
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"


@_missing_as_na
def in_hours(h: float) -> str:
    """A time between events (MTBF, MTTI) in hours, always: ``0.42 h``, ``12.3 h``, ``1,234 h``."""
    if h < 10:
        return f"{h:.2g} h" if h < 1 else f"{h:.1f} h"
    return f"{h:,.0f} h" if h >= 100 else f"{h:.1f} h"


@_missing_as_na
def mean_time(h: float) -> str:
    """A mean time for people (the first screen): minutes below 2 h (``8.4 min``, ``45 min``),
    hours below 3 days (``3.1 h``), days above (``12.5 days``)."""
    if h < 2:
        m = 60 * h
        return f"{m:.2g} min" if m < 10 else f"{m:.0f} min"
    return f"{h:.1f} h" if h < 72 else f"{h / 24:,.1f} days"


@_missing_as_na
def money(x: float) -> str:
    return f"${x:,.0f}"


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
