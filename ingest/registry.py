"""Finds every format module in ``ingest/`` and picks one for a file by its content."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

import ingest
from ingest.base import FormatSpec

SNIFF_BYTES = 65536


@cache
def formats() -> dict[str, FormatSpec]:
    found: dict[str, FormatSpec] = {}
    for mod in sorted(pkgutil.iter_modules(ingest.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"ingest.{mod.name}")
        spec = getattr(module, "FORMAT", None)
        if isinstance(spec, FormatSpec):
            found[spec.name] = spec
    return found


def detect(head: bytes, name: str) -> FormatSpec | None:
    """The format whose sniffer is most confident about this content, or None."""
    best, score = None, 0
    for spec in formats().values():
        s = spec.detect(head, name)
        if s > score:
            best, score = spec, s
    return best
