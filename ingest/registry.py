"""Finds every format module in ``ingest/formats/`` and picks one for a file by its content."""

from __future__ import annotations

from functools import cache
from types import ModuleType

from ingest.base import CERTAIN
from ingest.base import FormatSpec
from warehouse.plugins import discover

SNIFF_BYTES = 65536


@cache
def format_modules() -> dict[str, ModuleType]:
    """Every format's module (or package, for a large format), by format name."""
    return discover(
        "ingest.formats",
        "FORMAT",
        lambda spec: isinstance(spec, FormatSpec),
        lambda spec: spec.name,
        required=("FORMAT",),
    )


@cache
def formats() -> dict[str, FormatSpec]:
    """Every format module's ``FORMAT``, by format name."""
    return {name: module.FORMAT for name, module in format_modules().items()}


def detect(head: bytes, name: str) -> FormatSpec | None:
    """The format whose sniffer is most confident about this content (the first one, in name
    order, on a tie), or None. A format that is ``CERTAIN`` ends the search: no later one can
    beat it, and the other sniffers' regexes over 64 KiB cost ~8 ms a file (a fleet is tens of
    thousands of small files)."""
    best, score = None, 0
    for spec in formats().values():
        s = spec.detect(head, name)
        if s > score:
            best, score = spec, s
            if s >= CERTAIN:
                break
    return best
