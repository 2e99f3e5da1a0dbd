"""One header block's lines to job attempts: records a line break cut joined whole again, exact
repeats counted as duplicates, lines that do not fit the block's layout quarantined, and steps
folded into their job (a step without its job quarantined)."""

from __future__ import annotations

import numpy as np
import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import drop_repeats
from ingest.base import settle_repeats
from warehouse.schemas import quarantine_frame

from .layout import JOBID
from .values import normalize


def _wrong_layout(counts: pl.Series, n: int, delim: str, layout: str) -> str:
    """One reason for every line of a block none of whose lines fits the given layout."""
    found = sorted(set(counts.to_list()))
    found_txt = " or ".join(map(str, found[:5])) + (" or more" if len(found) > 5 else "")
    if found == [1]:
        return (f"no line contains the delimiter {delim!r}: every record rejected; "
                f"pass the dump's delimiter with --delimiter")  # fmt: skip
    return (f"every line has {found_txt} fields separated by {delim!r} but the field list "
            f"({layout}) has {n}: every record rejected; pass the dump's field list with "
            f"--fields f1,f2,... (and its --delimiter)")  # fmt: skip


def parse_block(
    lines: pl.Series, offset: int, fields: list[str], delim: str, layout: str, ctx: ParseContext
):
    """(job rows, quarantine rows, exact repeats dropped) of one header block."""
    df = pl.DataFrame({"raw": lines}).with_columns(
        line=pl.int_range(1, pl.len() + 1, dtype=pl.Int64) + offset + ctx.line_offset
    )
    if fields:
        df = _rejoined(df, delim, len(fields) - (fields[-1] == ""))
    # Not records: blank lines and '#' comment lines.
    df = df.filter((pl.col("raw").str.strip_chars() != "") & ~pl.col("raw").str.starts_with("#"))
    empty = pl.DataFrame()
    if df.height == 0:
        return empty, ParseResult.empty_quarantine(), 0
    if not fields:
        return (
            empty,
            quarantine_frame(
                df["line"], df["raw"], ["record before any sacct header line"] * df.height
            ),
            0,
        )
    if fields[-1] == "":  # a --parsable header ends with the delimiter
        fields = fields[:-1]
    # An exact repeat of a line (a dump concatenated twice, a collector's retry) is the same
    # record again, not a new attempt: dropped, and counted as a duplicate when its first
    # occurrence made a job row (a rejected line is rejected again; a folded step is nothing).
    df, repeats = drop_repeats(df, ["raw"])
    ok, bad = _parse_unique(df, fields, delim, layout, ctx)
    dups, bad = settle_repeats(
        repeats, ok["source_line"] if ok.height else pl.Series([], dtype=pl.Int64), bad
    )
    return ok, bad, dups


def _rejoined(df: pl.DataFrame, delim: str, n: int) -> pl.DataFrame:
    """``df``'s lines, with ``delims`` (how many delimiters each holds), and each record that a
    line break inside a field (a job name may hold one) cut into several lines joined whole
    again, under its first line's number: a run of
    lines, each with fewer delimiters than a record of ``n`` fields has, whose delimiters add up
    to a record's (``--parsable``'s trailing one too). The first line of a record is neither
    blank nor a comment. Where a user cannot know the delimiter (a random one, as the slurm
    source asks for), the text of a field can neither end a record nor start one."""
    counts = df["raw"].str.count_matches(delim, literal=True).cast(pl.Int64)
    df = df.with_columns(delims=counts)  # read again by _counted
    short = (counts < n - 1).arg_true().to_numpy()
    if len(short) < 2 or not counts.is_in([n - 1, n]).any():  # nothing cut, or not this layout
        return df
    raw, cnt = df["raw"], counts.to_numpy()
    group = np.arange(df.height)
    runs = np.split(short, np.flatnonzero(np.diff(short) != 1) + 1)
    for run in (r for r in runs if len(r) > 1):
        total = np.concatenate(([0], np.cumsum(cnt[run])))
        i = 0
        while i < len(run) - 1:
            first = raw[int(run[i])]
            j = int(np.searchsorted(total, total[i] + n - 1, side="left"))  # total[j]: lines i..j-1
            whole = j <= len(run) and total[j] == total[i] + n - 1
            if not whole and j <= len(run) and total[j] == total[i] + n:
                whole = raw[int(run[j - 1])].endswith(delim)  # --parsable's trailing delimiter
            if whole and j - i > 1 and first.strip() and not first.startswith("#"):
                group[run[i:j]] = run[i]
                i = j
            else:
                i += 1
    if (group == np.arange(df.height)).all():
        return df
    return (
        df.with_columns(_group=pl.Series(group))
        .group_by("_group", maintain_order=True)
        .agg(pl.col("raw").str.join("\n"), pl.col("line").first(), pl.col("delims").sum())
        .drop("_group")
    )


def _parse_unique(df: pl.DataFrame, fields: list[str], delim: str, layout: str, ctx: ParseContext):
    """(job rows, quarantine rows) of a block's lines, repeats already dropped."""
    n = len(fields)
    df = _counted(df, delim, n)
    qs = [_wrong_count(df.filter(pl.col("nf") != n), df.height, n, delim, layout, ctx)]
    df = df.filter(pl.col("nf") == n)
    if "jobid" not in fields:
        shown = ", ".join(fields[:6]) + (", ..." if len(fields) > 6 else "")
        why = (
            f"no JobID field in the field list ({layout}: {shown}) split at {delim!r}: every "
            "record rejected; "
            "pass --fields with JobID, or the dump's --delimiter"
        )
        qs.append(quarantine_frame(df["line"], df["raw"], [why] * df.height))
        return pl.DataFrame(), pl.concat(qs)
    jobs, steps = _jobs_and_steps(df, fields, delim)
    bad_id = jobs.filter(pl.col("job").is_null())
    jobs = jobs.filter(pl.col("job").is_not_null())
    orphans = steps.filter(~pl.col("step_of").is_in(jobs["job"].implode()))
    out = normalize(jobs, ctx)
    bad_nodes = out.filter(pl.col("_node_err").is_not_null())
    qs += [
        quarantine_frame(
            bad_id["line"],
            bad_id["raw"],
            bad_id.select(
                pl.format("unrecognised JobID {}", pl.col("jobid").replace("", "(empty)"))
            ).to_series(),
        ),
        quarantine_frame(
            orphans["line"],
            orphans["raw"],
            orphans.select(
                pl.format("step {} has no job line for {} in this file", "jobid", "step_of")
            ).to_series(),
        ),
        quarantine_frame(bad_nodes["source_line"], bad_nodes["_raw"], bad_nodes["_node_err"]),
    ]
    return out.filter(pl.col("_node_err").is_null()).drop("_node_err", "_raw"), pl.concat(qs)


def _counted(df: pl.DataFrame, delim: str, n: int) -> pl.DataFrame:
    """The lines (with ``delims``: ``_rejoined``) with ``body`` (no ``--parsable`` trailing
    delimiter) and ``nf``, its fields."""
    raw = pl.col("raw").str.strip_suffix("\r")
    nf = pl.col("delims") + 1
    # --parsable ends every line (headerless ones too) with the delimiter: one field too many,
    # and the last one empty.
    trailing = (nf == n + 1) & raw.str.ends_with(delim)
    return df.with_columns(
        body=pl.when(trailing).then(raw.str.strip_suffix(delim)).otherwise(raw),
        nf=nf - trailing.cast(pl.Int64),  # counted once: the stripped delimiter is the one less
    )


def _wrong_count(
    bad: pl.DataFrame, lines: int, n: int, delim: str, layout: str, ctx: ParseContext
) -> pl.DataFrame:
    """Quarantine rows of the ``bad`` lines (of ``lines``) that have not ``n`` fields."""
    if bad.height and bad.height == lines and (layout != "header" or ctx.delimiter):
        # Every line disagrees with the layout: the options, not the records, are wrong. One
        # reason, the same on every row, that says how to fix it.
        bare = bad.select(
            pl.col("body").str.strip_suffix(delim).str.count_matches(delim, literal=True) + 1
        ).to_series()
        errors = [_wrong_layout(bare, n, delim, layout)] * bad.height
    else:
        errors = bad.select(
            pl.format(f"expected {n} fields separated by {delim!r}, found {{}}", "nf")
        ).to_series()
    return quarantine_frame(bad["line"], bad["raw"], errors)


def _jobs_and_steps(
    df: pl.DataFrame, fields: list[str], delim: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Job lines with their used fields and JobID parts; step lines with ``step_of``."""
    # Steps (123.batch, 123.0) fold into their job: split only the JobID off step lines (most
    # lines of a real dump), and the full field list off job lines.
    n, k = len(fields), fields.index("jobid")
    df = df.with_columns(
        jobid=pl.col("body").str.splitn(delim, k + 2).struct.field(f"field_{k}").str.strip_chars()
    ).with_columns(step_of=pl.col("jobid").str.extract(r"^([^.]+)\."))
    steps, jobs = df.filter(pl.col("step_of").is_not_null()), df.filter(pl.col("step_of").is_null())
    wanted = {f: i for i, f in enumerate(fields) if f in _USED and f != "jobid"}
    split = pl.col("body").str.split_exact(delim, n - 1)
    jobs = jobs.select(
        "line",
        "raw",
        "jobid",
        *[split.struct.field(f"field_{i}").replace("", None).alias(f) for f, i in wanted.items()],
    )
    ids = jobs["jobid"].str.extract_groups(JOBID)
    jobs = jobs.with_columns(
        job=ids.struct.field("job"),
        base=ids.struct.field("base"),
        task=ids.struct.field("task"),
        step=ids.struct.field("step"),
    )
    return jobs, steps


_USED = {
    "jobid",
    "cluster",
    "jobname",
    "user",
    "account",
    "partition",
    "submit",
    "start",
    "end",
    "state",
    "exitcode",
    "alloctres",
    "reqtres",
    "nnodes",
    "alloccpus",
    "ncpus",
    "nodelist",
    "elapsed",
    "timelimit",
    "reason",
}
