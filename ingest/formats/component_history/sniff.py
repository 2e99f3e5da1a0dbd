"""Sniffing: which layout a file's first line shows, and how sure that makes the format."""

import re

from ingest.base import CERTAIN

from .normalize import header_key

# the first line that is not blank, a comment or a table border tells the layout apart
_HWHIST_HEADER = re.compile(
    r"^\s*\|(?=.*\bxname\b)(?=.*\bfruid\b)(?=.*\btimestamp\b)(?=.*\beventtype\b).*\|\s*$",
    re.IGNORECASE,
)
_INTERVAL_ROW = re.compile(r"^[^|,]*\|[^|]*\S[^|]*\|\s*\d[^|]*\|\s*\d[^|]*$")
BORDER = r"^\+[-+=]*\+$"  # a table border line: not a record
_INSERT_REMOVE = {"sn", "location", "insert", "remove", "event"}


def layout(head: bytes) -> str:
    """``csv``, ``intervals`` (serial | location | first seen | last seen), ``hwhist`` or
    ``insert-remove``."""
    for line in head.decode("utf-8-sig", errors="replace").split("\n"):
        line = line.strip()
        if line and not line.startswith("#") and not re.match(BORDER, line):
            if _HWHIST_HEADER.match(line):
                return "hwhist"
            if _INSERT_REMOVE <= {header_key(c) for c in line.split(",")}:
                return "insert-remove"
            return "intervals" if _INTERVAL_ROW.match(line) else "csv"
    return "csv"


def detect(head: bytes, name: str) -> int:
    kind = layout(head)
    if kind == "insert-remove":
        return CERTAIN
    if kind != "csv":
        return 90 if kind == "hwhist" else 60
    first = head.decode("utf-8-sig", errors="replace").lstrip().split("\n", 1)[0]
    cols = {header_key(c) for c in first.split(",")}
    if {"componentclass", "serial", "installedat"} <= cols:
        return CERTAIN
    if any("serial" in c or c == "sn" for c in cols) and any("install" in c for c in cols):
        return 50
    return 0
