"""Whether a file is a sacct dump: a header naming JobID, or headerless lines whose first field is a
job or step id followed by one delimiter."""

from __future__ import annotations

import re

import polars as pl

from .layout import JOBID
from .layout import XDMOD_FIELDS
from .layout import delimiter_after_jobid
from .layout import delimiter_from_header


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines()[:50]:
        if delimiter_from_header(line):
            return 90
    lines = [
        ln
        for ln in text.splitlines()[:-1] or text.splitlines()
        if ln.strip() and not ln.startswith("#")
    ][:20]
    delim = delimiter_after_jobid(pl.Series(lines, dtype=pl.Utf8)) if lines else None
    parts = lines[0].split(delim) if delim else []
    if len(parts) >= 7 and re.match(JOBID, parts[0].strip()):
        return 60 if len(parts) in (len(XDMOD_FIELDS), len(XDMOD_FIELDS) + 1) else 30
    return 30 if lines and _jobid_column(lines) else 0


_STEP_ID = re.compile(r"^\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?\.(?:batch|extern)$")


def _jobid_column(lines: list[str]) -> bool:
    """Headerless ``|`` lines whose JobID is not the first field (``--format User,JobID,...``):
    every line has the same 7+ fields and one column holds a job id on every line and a
    ``.batch`` / ``.extern`` step id on at least one."""
    rows = [ln.split("|") for ln in lines]
    if len(rows[0]) < 7 or any(len(r) != len(rows[0]) for r in rows):
        return False
    columns = [[r[i].strip() for r in rows] for i in range(len(rows[0]))]
    return any(
        all(re.match(JOBID, c) for c in col) and any(_STEP_ID.match(c) for c in col)
        for col in columns
    )
