"""What the scheduler parsers (sacct text, sacct JSON) share about a job attempt: the bounds of its
values and the reasons, Slurm's state names, the GPUs of its TRES, and attempt numbering. Not a
format (no ``FORMAT``)."""

from __future__ import annotations

import polars as pl

from ingest.base import ParseContext
from ingest.base import implausible_time
from ingest.hostlist import MAX_HOSTS

STATE_CODES = {
    "BF": "BOOT_FAIL", "CA": "CANCELLED", "CD": "COMPLETED", "DL": "DEADLINE", "F": "FAILED",
    "NF": "NODE_FAIL", "OOM": "OUT_OF_MEMORY", "PD": "PENDING", "PR": "PREEMPTED",
    "R": "RUNNING", "RQ": "REQUEUED", "RS": "RESIZING", "RV": "REVOKED", "S": "SUSPENDED",
    "TO": "TIMEOUT",
}  # fmt: skip
STATES = set(STATE_CODES.values())

# Beyond these a value is a corrupt field, not a job.
MAX_NODES = MAX_HOSTS  # a job's nodes are a hostlist
MAX_GPUS = 10_000_000
MAX_CPUS = 100_000_000
MAX_EXIT = 255  # a process exit status and a signal number are 0..255


# Slurm counts a typed GPU twice where accounting tracks its type (``AccountingStorageTRES=
# gres/gpu,gres/gpu:h100``, as on nearly every GPU cluster): the untyped total and once per type.
# AllocTRES ``gres/gpu:h100=16,gres/gpu=16`` and --json's ``{"name": "gpu"}`` with ``{"name":
# "gpu:h100"}`` are 16 GPUs (Slurm 22.05.8: tests/fixtures/slurm/*_typed_gpus.*). A site that
# tracks types only lists typed counts: their sum.
_GPU_UNTYPED = r"(?:^|,)gres/gpu=(\d+)(?:,|$)"
_GPU_TYPED = r"(?:^|,)gres/gpu:[^=,]+=\d+"
_GPU_ANY = r"(?:^|,)gres/gpu[:=]"


def tres_gpus(tres: pl.Expr) -> pl.Expr:
    """The GPUs of a TRES string (``billing=8,cpu=8,gres/gpu=8,gres/gpu:h100=8,node=1``): the
    untyped ``gres/gpu=N`` when present, else the sum of the typed ``gres/gpu:<type>=N``; null
    when it names no GPU, or a count too large to be one."""
    untyped = tres.str.extract(_GPU_UNTYPED).cast(pl.Int64, strict=False)
    counts = tres.str.extract_all(_GPU_TYPED).list.eval(
        pl.element().str.extract(r"=(\d+)$").cast(pl.Int64, strict=False)
    )
    typed = pl.when(~counts.list.eval(pl.element().is_null()).list.any()).then(counts.list.sum())
    return (
        pl.when(tres.str.contains(_GPU_UNTYPED))
        .then(untyped)
        .otherwise(pl.when(tres.str.contains(_GPU_TYPED)).then(typed))
    )


def job_gpus(alloc: pl.Expr, req: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(GPUs, why they cannot be read) of a job from its allocated and requested TRES strings:
    the allocation's (0 when something but no GPU was allocated), else the request's (a job that
    never ran); the reason, else null, when a GPU count is not one (a count too large)."""
    tres = pl.coalesce(alloc, req)
    gpus = tres_gpus(tres)
    error = pl.when(gpus.is_null() & tres.str.contains(_GPU_ANY)).then(
        pl.format("TRES '{}' holds a count too large to be one", tres)
    )
    return pl.coalesce(gpus, pl.when(alloc.is_not_null()).then(pl.lit(0, pl.Int64))), error


def _ts(col: str) -> pl.Expr:
    return pl.col(col).dt.to_string("%Y-%m-%dT%H:%M:%S")


def job_value_errors(ctx: ParseContext) -> pl.Expr:
    """The first thing wrong with a typed ``job_attempts``-shaped row (Int64 counts, naive UTC
    times), as a readable reason, else null: a count, exit code or signal out of range, an end
    before the start, a time outside the plausible window."""
    checks: list[tuple[pl.Expr, pl.Expr]] = []
    for col in ("submit_time", "start_time", "end_time"):
        why = implausible_time(pl.col(col), ctx)
        checks.append((why.is_not_null(), pl.format(f"{col}: {{}}", why)))
    checks.append(
        (
            pl.col("end_time") < pl.col("start_time"),
            pl.format("end_time {} is before start_time {}", _ts("end_time"), _ts("start_time")),
        )
    )
    for col, hi in (
        ("n_nodes", MAX_NODES),
        ("n_cpus", MAX_CPUS),
        ("n_gpus", MAX_GPUS),
        ("exit_code", MAX_EXIT),
        ("signal", MAX_EXIT),
    ):
        checks.append(
            (
                (pl.col(col) < 0) | (pl.col(col) > hi),
                pl.format(f"{col} {{}} is not in 0..{hi:,}", pl.col(col)),
            )
        )
    reason = pl.lit(None, pl.Utf8)
    for cond, text in reversed(checks):
        reason = pl.when(cond.fill_null(False)).then(text).otherwise(reason)
    return reason


def number_attempts(df: pl.DataFrame) -> pl.DataFrame:
    """Attempts of one JobID in time order (``--duplicates`` lists a requeued job per run)."""
    keys = ["cluster", "job_id"]
    dup = df.select(pl.struct(keys).is_duplicated()).to_series()
    once = df.filter(~dup).with_columns(attempt=pl.lit(1, pl.Int32))
    many = (
        df.filter(dup)
        .sort(
            [
                *keys,
                pl.col("start_time").fill_null(pl.col("end_time")).fill_null(pl.col("submit_time")),
                "source_line",
            ],
            nulls_last=True,
        )
        .with_columns(attempt=(pl.int_range(pl.len()).over(keys) + 1).cast(pl.Int32))
    )
    return pl.concat([once, many]).sort("source_line")
