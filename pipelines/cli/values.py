"""The values options take: counts, durations, times, column maps, time zones."""

from __future__ import annotations

import argparse
import re
from datetime import UTC
from datetime import datetime
from fractions import Fraction

from pipelines.cli.errors import CliError

_SIZE = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(k|K|Ki|M|Mi|G|Gi)?")
_SIZE_UNITS = {
    None: 1,
    "k": 10**3,
    "K": 10**3,
    "Ki": 2**10,
    "M": 10**6,
    "Mi": 2**20,
    "G": 10**9,
    "Gi": 2**30,
}
COUNT_FORMS = "a whole number like 32768, or with a suffix: 32k = 32,000, 32Ki = 32,768, 1M, 1Mi"


def parse_count(text: str) -> int:
    """A count of GPUs, nodes, rows ...: ``32768``, ``32k`` (32,000), ``32Ki`` (32,768), ``1.5M``.
    The type of every integer option (``build_parser``)."""
    m = _SIZE.fullmatch((text or "").strip().replace(",", "").replace("_", ""))
    value = Fraction(m.group(1)) * _SIZE_UNITS[m.group(2)] if m else None
    if value is None or value.denominator != 1:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a count; write {COUNT_FORMS}")
    return int(value)


_UNIT_S = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "day": 86400,
    "w": 604800,
}
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_COMPOUND = re.compile(rf"(?:({_NUM})(d|day|h|hr|min|m|sec|s|w))+")
_ISO = re.compile(rf"P(?:({_NUM})W)?(?:({_NUM})D)?(?:T(?:({_NUM})H)?(?:({_NUM})M)?(?:({_NUM})S)?)?")


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h30m``, ``1.5h``, ``2d`` or ISO-8601 ``PT1H30M`` to seconds. A bare
    number is an error: ``--mtti 1.5`` would be 1.5 seconds or 1.5 hours depending on who reads
    it."""
    t = (text or "").strip().replace(" ", "")
    if t == "0":  # zero needs no unit (--wait 0, --no-wait)
        return 0.0
    if _COMPOUND.fullmatch(t):
        return sum(
            float(n) * _UNIT_S[u] for n, u in re.findall(rf"({_NUM})(day|d|hr|h|min|m|sec|s|w)", t)
        )
    iso = _ISO.fullmatch(t.upper())
    if iso and t.upper() not in ("P", "PT") and any(iso.groups()):
        weeks, days, hours, minutes, seconds = (float(g or 0) for g in iso.groups())
        return weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + seconds
    hint = "add a unit: s, m, h, d (e.g. 90s, 10m, 1h30m, 1.5h, 2d) or ISO-8601 like PT1H30M"
    if re.fullmatch(_NUM, t):
        raise CliError(f"duration {text!r} has no unit; {hint}")
    raise CliError(f"cannot read duration {text!r}; {hint}")


def parse_time(text: str | None) -> datetime | None:
    """ISO-8601; a zone is converted to UTC, a zone-less time is taken as UTC."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"cannot read time {text!r}; use ISO-8601 like 2026-01-05T10:00:00Z"
        ) from None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def parse_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        canonical, sep, theirs = item.partition("=")
        if not sep or not canonical.strip() or not theirs.strip():
            raise CliError(f"--map wants canonical=theirs pairs, got {item!r}")
        out[canonical.strip()] = theirs.strip()
    return out


def check_tz(tz: str) -> str:
    from zoneinfo import ZoneInfo
    from zoneinfo import ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise CliError(
            f"unknown time zone {tz!r}; use an IANA name like UTC or America/Chicago"
        ) from None
    return tz
