"""A sacct block's values normalized: states, counts, exit codes, elapsed times and local times
read, and the values no job can have named per line (the reason its line is quarantined)."""

from __future__ import annotations

import polars as pl

from ingest.base import ParseContext
from ingest.base import record_cluster
from ingest.hostlist import expand_column
from ingest.job_checks import STATE_CODES
from ingest.job_checks import STATES
from ingest.job_checks import job_gpus
from ingest.job_checks import job_value_errors
from ingest.times import NULL_TIMES
from ingest.times import local_candidates
from ingest.times import local_span
from ingest.times import naive_times
from ingest.times import slurm_duration_s

from .layout import FORMAT_TIME

_TIMES = {"submit": "Submit", "start": "Start", "end": "End"}  # field -> its name in messages


def _col(df: pl.DataFrame, *names: str) -> pl.Expr:
    for n in names:
        if n in df.columns:
            return pl.col(n)
    return pl.lit(None, dtype=pl.Utf8)


def normalize(jobs: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
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
            c(f), tz, FORMAT_TIME
        )
    # Elapsed in seconds once, as a column: the span's DST evidence reads it several times
    jobs = jobs.with_columns(_elapsed_s=slurm_duration_s(c("elapsed")))
    start, end, why = local_span(
        naive_times(c("start"), FORMAT_TIME),
        naive_times(c("end"), FORMAT_TIME),
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
