"""Slurm ``sacct`` text dumps (``--parsable2`` / ``--parsable``) to ``job_attempts``.

Handles: a header line or a caller-given field list (``--fields``; the preset ``xdmod`` is Open
XDMoD's headerless order, also assumed for headerless 26-field lines), any delimiter including
multi-byte ones (a headerless dump's is read off the characters after its JobIDs), ``--parsable``'s
trailing delimiter, several header blocks in one file, steps (``123.batch``, ``123.0``) folded into
their job, arrays (``123_4``, ``123_[1-3]``), heterogeneous components (``1853+0``),
``--duplicates`` (one attempt per requeue), hostlists, normalized states with the raw state kept,
``Unknown``/``None`` times, every elapsed format, GPUs from AllocTRES (``job_checks.job_gpus``:
a typed GPU Slurm lists twice counts once), the cluster given else the dump's own
(``ingest.base.record_cluster``).

A record is one job line (with its steps); a record that line breaks inside a field (a job
name may hold them) cut into lines, each short of the record's delimiters, is joined whole again,
and a line in a field is no header (``records``: with a delimiter a user cannot know, as the
slurm source asks for, no name can forge a record). A step line whose job line is absent is
quarantined: it cannot form an attempt on its own. A line that repeats an earlier line of its
header block exactly is the same record again (a dump concatenated twice): dropped here (it would
count as one more ``--duplicates`` attempt) and counted as a duplicate
(``ParseResult.duplicates``); a repeat of a rejected line is quarantined again, with the same
reason. A job line
whose values a job cannot have (an unreadable or out-of-range count, exit code or time, End
before Start, a time outside ``ctx``'s plausible window) is quarantined with the reason; when
no line of a block fits the given ``--fields``/``--delimiter``, every row says so and how to fix it.
"""

from __future__ import annotations

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import numbered_lines
from ingest.job_checks import number_attempts
from warehouse.schemas import conform

from .layout import segments
from .records import parse_block
from .sniff import detect as detect  # FormatSpec.declare finds it by this name


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    lines = numbered_lines(data, ParseContext())["raw"]  # numbers are added per block below
    frames, quarantines, dups = [], [], 0
    for fields, delim, lo, hi, layout in segments(lines, ctx):
        ok, bad, repeats = parse_block(lines.slice(lo, hi - lo), lo, fields, delim, layout, ctx)
        if ok.height:
            frames.append(ok)
        quarantines.append(bad)
        dups += repeats
    quarantine = pl.concat(quarantines) if quarantines else ParseResult.empty_quarantine()
    if not frames:
        return ParseResult({}, quarantine, quarantine.height + dups, duplicates=dups)
    table = conform("job_attempts", number_attempts(pl.concat(frames)))
    return ParseResult(
        {"job_attempts": table},
        quarantine,
        table.height + quarantine.height + dups,
        duplicates=dups,
    )


FORMAT = FormatSpec.declare(
    globals(),
    primary="job_attempts",
    description="sacct --parsable2 / --parsable text, with header or --fields",
)
