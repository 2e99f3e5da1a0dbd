"""Checkpoint evidence of training jobs to ``checkpoints``: when each save started or became
durable, so measured goodput can use real checkpoint times instead of an assumed interval.

Inputs (one record per checkpoint line or CSV row):
- a CSV with a header naming ``job_id``, ``time`` and ``event`` (optional ``iteration``,
  ``duration_s``, ``cluster``); event ``save_start`` / ``save_end`` (also start/begin and
  end/saved/done/complete). Times are ISO-8601; zone-less ones are read in ``ctx.tz``.
- Megatron-LM's ``progress.txt`` (``--log-progress``): ``<local time>\\tJob ID: <SLURM_JOB_ID>\\t
  # GPUs: N\\tSaved [async [local ]]checkpoint\\tIteration: I...`` -> save_end.
- Training logs whose lines carry a timestamp (Python logging, NeMo's ``[NeMo I <time> ...]``,
  torchtitan's ``[rank0]:<time> - root - INFO - ...``, a bracketed ``[<time>]`` prefix):
  Megatron-LM/NeMo ``saving checkpoint at iteration I`` -> save_start and ``successfully saved
  checkpoint from|at iteration I`` -> save_end; PyTorch Lightning's ModelCheckpoint ``Epoch E,
  global step S: ... saving model to ...`` -> save_start (logged before the write);
  torchtitan (torch.distributed.checkpoint) ``Saving the checkpoint`` / ``Saving a full
  checkpoint at step S`` -> save_start and ``Finished saving the checkpoint ... in X seconds``
  -> save_end with its duration. The job is the ``Job ID`` of the line, else the file's
  ``SLURM_JOB_ID=`` line, else its Slurm output name (``slurm-<job>.out``,
  ``<name>-<job>.out``, array ``<job>_<task>``).

A checkpoint line without a readable time or without a job is quarantined with that reason;
every other line is not a record.
"""

from __future__ import annotations

import io
import re

import polars as pl

from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import numbered_lines
from ingest.base import split_rejected
from ingest.training_logs import NO_JOB
from ingest.training_logs import TIME
from ingest.training_logs import ZONE
from ingest.training_logs import checkpoint_fields
from ingest.training_logs import file_job_id
from ingest.training_logs import to_utc
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

_JOB_LINE = r"Job ID: *([^\t ]*)"
EVENTS = {
    "save_start": "save_start", "start": "save_start", "begin": "save_start",
    "save_end": "save_end", "end": "save_end", "saved": "save_end", "done": "save_end",
    "complete": "save_end",
}  # fmt: skip
COLUMNS = ("time", "cluster", "job_id", "event", "iteration", "duration_s", "framework",
           "source", "source_file", "source_line")  # fmt: skip


def _parse_csv(data: bytes, ctx: ParseContext) -> ParseResult:
    try:
        raw = pl.read_csv(io.BytesIO(data), infer_schema=False, truncate_ragged_lines=False)
    except pl.exceptions.PolarsError as exc:
        q = quarantine_frame(
            [1],
            [data[:500].decode("utf-8", "replace")],
            [f"unreadable CSV: {str(exc).splitlines()[0]}"],
        )
        return ParseResult({}, q, 1)
    raw = raw.rename({c: c.strip().lower() for c in raw.columns})
    for c in ("iteration", "duration_s", "cluster"):
        if c not in raw.columns:
            raw = raw.with_columns(pl.lit(None, pl.Utf8).alias(c))
    text = pl.col("time").str.strip_chars()
    parts = text.str.extract_groups(rf"^{TIME}{ZONE}$")
    # a CSV's rows need not be in time order: a repeated DST hour is not guessed
    time, dst = to_utc(parts.struct.field("1"), parts.struct.field("2"), ctx.tz, None)
    df = raw.with_row_index("source_line", offset=2 + ctx.line_offset).with_columns(
        pl.col("source_line").cast(pl.Int64),
        pl.concat_str([pl.col(c).fill_null("") for c in raw.columns], separator=",").alias("raw"),
        text.alias("_time_text"),
        time.alias("time"),
        dst.alias("_dst"),
        pl.col("event")
        .str.strip_chars()
        .str.to_lowercase()
        .replace_strict(EVENTS, default=None)
        .alias("_event"),
        pl.col("job_id").str.strip_chars().alias("job_id"),
        pl.col("iteration").str.strip_chars().cast(pl.Int64, strict=False).alias("iteration"),
        pl.col("duration_s").str.strip_chars().cast(pl.Float64, strict=False).alias("duration_s"),
    )
    err = (
        pl.when(pl.col("job_id").is_null() | (pl.col("job_id") == ""))
        .then(pl.lit("no job_id"))
        .when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("time").is_null())
        .then(pl.format("unreadable time '{}' (want ISO-8601)", pl.col("_time_text").fill_null("")))
        .when(pl.col("_event").is_null())
        .then(
            pl.format(
                "unknown event '{}' (want save_start or save_end)", pl.col("event").fill_null("")
            )
        )
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    df = df.with_columns(err.alias("_err"), pl.col("_event").alias("event"))
    good, q = split_rejected(df, "_err", "source_line")
    good = good.with_columns(
        cluster=pl.coalesce(
            pl.col("cluster").str.strip_chars().replace("", None), pl.lit(ctx.cluster)
        ),
        framework=pl.lit("csv"),
    )
    return _result(good, q, ctx)


def _parse_log(data: bytes, ctx: ParseContext) -> ParseResult:
    lines = numbered_lines(data, ctx)
    event, framework, it, took = checkpoint_fields(pl.col("raw"))
    rec = lines.with_columns(event=event, framework=framework, _it=it, _took=took).filter(
        pl.col("event").is_not_null()
    )
    whole_file_job = file_job_id(data, ctx.path)
    stamp = pl.col("raw").str.extract_groups(rf"{TIME}{ZONE}")
    # a training log is written in time order: that order places a repeated DST hour
    time, dst = to_utc(stamp.struct.field("1"), stamp.struct.field("2"), ctx.tz, [])
    rec = rec.with_columns(
        time=time,
        _dst=dst,
        job_id=pl.coalesce(
            pl.col("raw").str.extract(_JOB_LINE, 1).replace("", None),
            pl.lit(whole_file_job, pl.Utf8),
        ),
        iteration=pl.col("_it").cast(pl.Int64, strict=False),
        duration_s=pl.col("_took").cast(pl.Float64, strict=False),
        source_line=pl.col("line"),
        cluster=pl.lit(ctx.cluster),
    )
    err = (
        pl.when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("time").is_null())
        .then(
            pl.lit(
                "checkpoint line has no timestamp (log with a time format, or use the "
                "job_id,time,event CSV)"
            )
        )
        .when(pl.col("job_id").is_null())
        .then(pl.lit(NO_JOB))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    rec = rec.with_columns(_err=err)
    return _result(*split_rejected(rec, "_err", "source_line"), ctx)


def _result(good: pl.DataFrame, q: pl.DataFrame, ctx: ParseContext) -> ParseResult:
    good = good.with_columns(source=pl.lit("checkpoints"), source_file=pl.lit(ctx.path))
    tables = {"checkpoints": conform("checkpoints", good.select(COLUMNS))} if good.height else {}
    return ParseResult(tables, q, good.height + q.height)


def _is_csv(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().lower()
    cols = {c.strip() for c in first.split(",")}
    return {"job_id", "time", "event"} <= cols


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    return _parse_csv(data, ctx) if _is_csv(data[:4096]) else _parse_log(data, ctx)


_LOG_HINT = re.compile(
    rb"\tJob ID: .*\t# GPUs: |successfully saved checkpoint (?:from|at) iteration|saving "
    rb"checkpoint at iteration|global step \d+:.*saving model to|Finished saving the checkpoint"
)


def detect(head: bytes, name: str) -> int:
    if _is_csv(head):
        return CERTAIN
    return 70 if _LOG_HINT.search(head) else 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="checkpoints",
    description=(
        "checkpoint saves: job_id,time,event CSV; Megatron-LM progress.txt; "
        "Megatron/NeMo, Lightning and torchtitan logs"
    ),
)
