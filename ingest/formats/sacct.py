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
and a line in a field is no header (``_rejoined``: with a delimiter a user cannot know, as the
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

import re

import numpy as np
import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import drop_repeats
from ingest.base import numbered_lines
from ingest.base import record_cluster
from ingest.base import settle_repeats
from ingest.hostlist import expand_column
from ingest.job_checks import STATE_CODES
from ingest.job_checks import STATES
from ingest.job_checks import job_gpus
from ingest.job_checks import job_value_errors
from ingest.job_checks import number_attempts
from ingest.times import NULL_TIMES
from ingest.times import local_candidates
from ingest.times import local_span
from ingest.times import naive_times
from ingest.times import slurm_duration_s
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

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


_JOBID = (
    r"^(?P<job>(?P<base>\d+)(?:_(?P<task>\d+|\[[^\]]*\]))?(?:\+(?P<het>\d+))?)"
    r"(?:\.(?P<step>[^.\s]+))?$"
)
_FORMAT_TIME = "%Y-%m-%dT%H:%M:%S"


_HEADER = r"^\s*(?i:JobID)([^A-Za-z0-9_\s]+|\s+)"


# A headerless line starts with a JobID; what follows it up to the next name character is the
# delimiter (``|``, ``☃``, ``¦``...).
_LEAD = re.compile(
    r"^\s*\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.[A-Za-z0-9_-]+)?([^\w\s\[\].:,=/+-]+)"
)


def _delimiter_after_jobid(lines: pl.Series) -> str | None:
    """The delimiter of headerless lines, when every non-blank one of ``lines`` agrees."""
    found = {
        m.group(1) if m else None
        for ln in lines.to_list()
        if ln and ln.strip() and not ln.startswith("#")
        for m in [_LEAD.match(ln)]
    }
    return found.pop() if len(found) == 1 and None not in found else None


def _delimiter_from_header(line: str) -> str | None:
    m = re.match(_HEADER, line)
    return m.group(1) if m else None


def _segments(lines: pl.Series, ctx: ParseContext) -> list[tuple[list[str], str, int, int, str]]:
    """Split the file into (fields, delimiter, first data line index, end index, where the field
    list came from) blocks."""
    explicit = ctx.fields
    if explicit and len(explicit) == 1 and explicit[0].lower() in FIELD_PRESETS:
        explicit = tuple(FIELD_PRESETS[explicit[0].lower()])
    header_idx = [] if explicit else lines.str.contains(_HEADER).arg_true().to_list()
    if header_idx:  # a field that holds a line break and "JobID|..." is no header of this dump
        first = _delimiter_from_header(lines[header_idx[0]])
        header_idx = [i for i in header_idx if _delimiter_from_header(lines[i]) == first]
    if not header_idx:
        fields = [f.strip().lower() for f in explicit] if explicit else XDMOD_FIELDS
        delim = ctx.delimiter or _delimiter_after_jobid(lines.head(50)) or "|"
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
        delim = ctx.delimiter or _delimiter_from_header(lines[i])
        fields = [f.strip().lower() for f in lines[i].rstrip("\r").split(delim)]
        end = header_idx[n + 1] if n + 1 < len(header_idx) else len(lines)
        segs.append((fields, delim, i + 1, end, "header"))
    if header_idx[0] > 0:  # lines before the first header have no known layout
        segs.insert(0, ([], ctx.delimiter or "|", 0, header_idx[0], ""))
    return segs


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    lines = numbered_lines(data, ParseContext())["raw"]  # numbers are added per block below
    frames, quarantines, dups = [], [], 0
    for fields, delim, lo, hi, layout in _segments(lines, ctx):
        ok, bad, repeats = _parse_block(lines.slice(lo, hi - lo), lo, fields, delim, layout, ctx)
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


def _parse_block(
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
    out = _normalize(jobs, ctx)
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
    ids = jobs["jobid"].str.extract_groups(_JOBID)
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


_TIMES = {"submit": "Submit", "start": "Start", "end": "End"}  # field -> its name in messages


def _col(df: pl.DataFrame, *names: str) -> pl.Expr:
    for n in names:
        if n in df.columns:
            return pl.col(n)
    return pl.lit(None, dtype=pl.Utf8)


def _normalize(jobs: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    def c(*n):
        return _col(jobs, *n)

    state_tok = c("state").str.strip_chars().str.extract(r"^([A-Za-z_]+)").str.to_uppercase()
    state_tok = state_tok.replace(STATE_CODES)
    exit_parts = c("exitcode").str.extract_groups(r"^\s*(-?\d+)(?::(\d+))?\s*$")
    alloc = c("alloctres")
    tres_gpus, gpus_err = job_gpus(alloc, c("reqtres"))
    tres_nodes = alloc.str.extract(r"(?:^|,)node=(\d+)").cast(pl.Int64, strict=False)
    # each time is parsed once: the row and the unreadable-value check both read it
    jobs = _local_times(jobs, c, ctx.tz)
    cluster, reported, cluster_err = record_cluster(c("cluster"), ctx)
    out = jobs.select(
        cluster=cluster,
        scheduler=pl.lit("slurm"),
        job_id=pl.col("job"),
        array_job_id=pl.when(pl.col("task").is_not_null()).then(pl.col("base")),
        array_task_id=pl.col("task"),
        name=c("jobname"),
        user=c("user"),
        account=c("account"),
        partition=c("partition"),
        submit_time="_submit_t",
        start_time="_start_t",
        end_time="_end_t",
        state=pl.when(state_tok.is_in(list(STATES))).then(state_tok).otherwise(pl.lit("UNKNOWN")),
        raw_state=c("state"),
        reason=c("reason"),
        exit_code=exit_parts.struct.field("1").cast(pl.Int64, strict=False),
        signal=exit_parts.struct.field("2").cast(pl.Int64, strict=False),
        n_nodes=pl.coalesce(c("nnodes").str.strip_chars().cast(pl.Int64, strict=False), tres_nodes),
        n_cpus=pl.coalesce(c("alloccpus", "ncpus").str.strip_chars().cast(pl.Int64, strict=False)),
        n_gpus=tres_gpus,
        nodelist=c("nodelist"),
        elapsed_s="_elapsed_s",
        timelimit_s=slurm_duration_s(c("timelimit")),
        reported_cluster=reported,
        source=pl.lit("sacct"),
        source_file=pl.lit(ctx.path),
        source_line=pl.col("line"),
        _raw=pl.col("raw"),
        _value_err=pl.coalesce(cluster_err, _unreadable(c, exit_parts, gpus_err, tres_nodes, ctx)),
    )
    hosts, err = expand_column(out["nodelist"], out["n_nodes"])
    out = out.with_columns(
        nodes=hosts, _node_err=pl.coalesce("_value_err", job_value_errors(ctx), err)
    )
    return out.drop("nodelist", "_value_err")


def _local_times(jobs: pl.DataFrame, c, tz: str) -> pl.DataFrame:
    """``jobs`` with ``_elapsed_s``, ``_submit_t`` / ``_start_t`` / ``_end_t`` (naive UTC) read
    from the local times, and ``_gap_<field>`` / ``_span_why`` / ``_submit_undecided`` for the
    reasons. A wall-clock time in the hour a DST fall-back repeats is two instants: the job's own
    Elapsed decides Start and End (the one pair of readings an Elapsed apart), and the readings of
    Submit not after the Start decide it; a time no evidence decides is left null, and the job is
    quarantined."""
    cols = {}
    for f in _TIMES:
        cols[f"_{f}_e"], cols[f"_{f}_l"], cols[f"_gap_{f}"] = local_candidates(
            c(f), tz, _FORMAT_TIME
        )
    # Elapsed in seconds once, as a column: the span's DST evidence reads it several times
    jobs = jobs.with_columns(_elapsed_s=slurm_duration_s(c("elapsed")))
    start, end, why = local_span(
        naive_times(c("start"), _FORMAT_TIME),
        naive_times(c("end"), _FORMAT_TIME),
        tz,
        seconds=pl.col("_elapsed_s"),
        names=("Start", "End"),
        evidence=pl.format("Elapsed '{}'", c("elapsed").fill_null("(none)")),
    )
    jobs = jobs.with_columns(**cols, _start_t=start, _end_t=end, _span_why=why)
    be, bl = pl.col("_submit_e"), pl.col("_submit_l")
    two_b = (be != bl).fill_null(False)
    start = pl.col("_start_t")
    jobs = jobs.with_columns(
        _submit_t=pl.when(~two_b).then(be).when((be <= start) & ~(bl <= start)).then(be),
    )
    return jobs.with_columns(_submit_undecided=two_b & pl.col("_submit_t").is_null())


def _unreadable(
    c, exit_parts: pl.Expr, gpus_err: pl.Expr, tres_nodes: pl.Expr, ctx: ParseContext
) -> pl.Expr:
    """Why a job line's text values cannot be read (an unparseable time, count or exit code,
    a TRES count too large to hold), else null. Ranges are checked on the typed row after."""
    checks: list[tuple[pl.Expr, pl.Expr]] = []
    for field, name in _TIMES.items():
        raw = c(field).str.strip_chars()
        checks.append(
            (
                pl.col(f"_gap_{field}"),
                pl.format(
                    f"{name} '{{}}' does not exist in {ctx.tz} (the hour skipped when DST starts)",
                    raw,
                ),
            )
        )
        unreadable = raw.is_not_null() & ~raw.is_in(NULL_TIMES) & pl.col(f"_{field}_e").is_null()
        checks.append(
            (
                unreadable,
                pl.format(f"unreadable {name} '{{}}' (want YYYY-MM-DDTHH:MM:SS in {ctx.tz})", raw),
            )
        )
    for field, name in (("nnodes", "NNodes"), ("alloccpus", "AllocCPUS"), ("ncpus", "NCPUS")):
        raw = c(field).str.strip_chars()
        checks.append(
            (
                raw.is_not_null() & ~raw.str.contains(r"^\d{1,18}$"),
                pl.format(f"{name} '{{}}' is not a count", raw),
            )
        )
    checks.append((pl.col("_span_why").is_not_null(), pl.col("_span_why")))
    checks.append(
        (
            pl.col("_submit_undecided"),
            pl.format(
                (
                    f"Submit '{{}}' falls in the hour repeated when DST ends in {ctx.tz}, and the "
                    "Start does not tell which"
                ),
                c("submit"),
            ),
        )
    )
    checks.append((gpus_err.is_not_null(), gpus_err))
    checks.append(
        (
            tres_nodes.is_null() & c("alloctres").str.contains(r"(?:^|,)node=\d"),
            pl.format("TRES '{}' holds a count too large to be one", c("alloctres")),
        )
    )
    raw_exit = c("exitcode").str.strip_chars()
    checks.append(
        (
            raw_exit.is_not_null()
            & exit_parts.struct.field("1").cast(pl.Int64, strict=False).is_null(),
            pl.format("ExitCode '{}' is not code:signal", raw_exit),
        )
    )
    reason = pl.lit(None, pl.Utf8)
    for cond, text in reversed(checks):
        reason = pl.when(cond.fill_null(False)).then(text).otherwise(reason)
    return reason


def detect(head: bytes, name: str) -> int:
    text = head.decode("utf-8", errors="replace")
    for line in text.splitlines()[:50]:
        if _delimiter_from_header(line):
            return 90
    lines = [
        ln
        for ln in text.splitlines()[:-1] or text.splitlines()
        if ln.strip() and not ln.startswith("#")
    ][:20]
    delim = _delimiter_after_jobid(pl.Series(lines, dtype=pl.Utf8)) if lines else None
    parts = lines[0].split(delim) if delim else []
    if len(parts) >= 7 and re.match(_JOBID, parts[0].strip()):
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
        all(re.match(_JOBID, c) for c in col) and any(_STEP_ID.match(c) for c in col)
        for col in columns
    )


FORMAT = FormatSpec.declare(
    globals(),
    primary="job_attempts",
    description="sacct --parsable2 / --parsable text, with header or --fields",
)
