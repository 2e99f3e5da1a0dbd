"""How a sacct dump is laid out: its header blocks or the fields given (``--fields``, the ``xdmod``
preset), and each block's delimiter, from its header or read off the characters after a
headerless line's JobID."""

from __future__ import annotations

import re

import polars as pl

from ingest.base import ParseContext

XDMOD_FIELDS = [
    "jobid",
    "jobidraw",
    "cluster",
    "partition",
    "qos",
    "account",
    "group",
    "gid",
    "user",
    "uid",
    "submit",
    "eligible",
    "start",
    "end",
    "elapsed",
    "exitcode",
    "state",
    "nnodes",
    "ncpus",
    "reqcpus",
    "reqmem",
    "reqtres",
    "alloctres",
    "timelimit",
    "nodelist",
    "jobname",
]


FIELD_PRESETS = {"xdmod": XDMOD_FIELDS}


JOBID = (
    r"^(?P<job>(?P<base>\d+)(?:_(?P<task>\d+|\[[^\]]*\]))?(?:\+(?P<het>\d+))?)"
    r"(?:\.(?P<step>[^.\s]+))?$"
)


FORMAT_TIME = "%Y-%m-%dT%H:%M:%S"


_HEADER = r"^\s*(?i:JobID)([^A-Za-z0-9_\s]+|\s+)"


# A headerless line starts with a JobID; what follows it up to the next name character is the
# delimiter (``|``, ``☃``, ``¦``...).
_LEAD = re.compile(
    r"^\s*\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_-]+)?([^\w\s\[\].:,=/+-]+)"
)


def delimiter_after_jobid(lines: pl.Series) -> str | None:
    """The delimiter of headerless lines, when every non-blank one of ``lines`` agrees."""
    found = {
        m.group(1) if m else None
        for ln in lines.to_list()
        if ln and ln.strip() and not ln.startswith("#")
        for m in [_LEAD.match(ln)]
    }
    return found.pop() if len(found) == 1 and None not in found else None


def delimiter_from_header(line: str) -> str | None:
    m = re.match(_HEADER, line)
    return m.group(1) if m else None


def segments(lines: pl.Series, ctx: ParseContext) -> list[tuple[list[str], str, int, int, str]]:
    """Split the file into (fields, delimiter, first data line index, end index, where the field
    list came from) blocks."""
    explicit = ctx.fields
    if explicit and len(explicit) == 1 and explicit[0].lower() in FIELD_PRESETS:
        explicit = tuple(FIELD_PRESETS[explicit[0].lower()])
    header_idx = [] if explicit else lines.str.contains(_HEADER).arg_true().to_list()
    if header_idx:  # a field that holds a line break and "JobID|..." is no header of this dump
        first = delimiter_from_header(lines[header_idx[0]])
        header_idx = [i for i in header_idx if delimiter_from_header(lines[i]) == first]
    if not header_idx:
        fields = [f.strip().lower() for f in explicit] if explicit else XDMOD_FIELDS
        delim = ctx.delimiter or delimiter_after_jobid(lines.head(50)) or "|"
        return [
            (
                fields,
                delim,
                0,
                len(lines),
                "--fields" if explicit else "no header: Open XDMoD's 26 fields",
            )
        ]
    segs = []
    for n, i in enumerate(header_idx):
        delim = ctx.delimiter or delimiter_from_header(lines[i])
        fields = [f.strip().lower() for f in lines[i].rstrip("\r").split(delim)]
        end = header_idx[n + 1] if n + 1 < len(header_idx) else len(lines)
        segs.append((fields, delim, i + 1, end, "header"))
    if header_idx[0] > 0:  # lines before the first header have no known layout
        segs.insert(0, ([], ctx.delimiter or "|", 0, header_idx[0], ""))
    return segs
