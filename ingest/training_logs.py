"""What the formats reading training jobs' own logs share (``checkpoints``, ``training-log``):
the job and host a log belongs to (its ``SLURM_JOB_ID=`` line, its Slurm output name), its
timestamps, and the checkpoint-save lines of the frameworks.

A job's log names its job in one of two ways, tried in this order: a ``SLURM_JOB_ID=`` line
(``env`` dumped by the batch script), else the Slurm output file's name (``slurm-<job>.out``,
``<name>-<job>.out``, an array task ``<job>_<task>``; ``%j-%N`` / ``%j.%N`` names carry the host
after the job: ``train-81234-gpu-node-007.out``).
"""

from __future__ import annotations

import re

import polars as pl

from ingest.times import wall_clock

TIME = r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
ZONE = r"(Z|[+-]\d\d:?\d\d)?"
SLURM_ENV = re.compile(r"SLURM_JOB_ID[=: ]\s*(\d+)")
_OUT_NAME = re.compile(r"(?:^|[-_.])(\d+(?:_\d+)?)\.(?:out|err|log|txt)$")
_OUT_NAME_HOST = re.compile(
    r"(?:^|[-_.])(\d+(?:_\d+)?)[-.]([A-Za-z][A-Za-z0-9-]*[A-Za-z0-9])\.(?:out|err|log|txt)$"
)
NO_JOB = (
    "cannot tell the job: no 'Job ID:', no SLURM_JOB_ID= line and the file is not named "
    "slurm-<job>.out"
)

# Checkpoint saves as the frameworks log them: (event, framework, regex with named groups it,
# took); the first match wins.
CHECKPOINT_LINES: tuple[tuple[str, str, str], ...] = (
    ("save_end", "megatron", r"Saved (?:async )?(?:local )?checkpoint\tIteration:\s*(?P<it>\d+)"),
    ("save_end", "megatron", r"successfully saved checkpoint (?:from|at) iteration\s+(?P<it>\d+)"),
    ("save_start", "megatron", r"saving checkpoint at iteration\s+(?P<it>\d+)"),
    ("save_start", "lightning", r"global step (?P<it>\d+):.*saving model to"),
    (
        "save_end",
        "torchtitan",
        r"Finished saving the checkpoint.*?in (?P<took>\d+(?:\.\d+)?) ?seconds",
    ),
    (
        "save_start",
        "torchtitan",
        (
            r"Saving (?:the checkpoint|a (?:full|model only) checkpoint.*?at (?:last )?step,? "
            r"(?:step )?(?P<it>\d+))"
        ),
    ),
)


def _output_name(path: str) -> str:
    """A Slurm output file's name as Slurm wrote it: without its folder, nor the ``.gz`` /
    ``.zst`` of an archived copy (the runner reads either by its magic bytes)."""
    return re.sub(r"\.(gz|zst)$", "", path.replace("\\", "/").rsplit("/", 1)[-1])


def slurm_output_job(path: str) -> str | None:
    """The job a Slurm output file's name carries (``slurm-4242.out``, ``train-4242_3.log``,
    ``train-4242-node7.out``, ``slurm-4242.out.gz``), else None."""
    name = _output_name(path)
    m = _OUT_NAME_HOST.search(name) or _OUT_NAME.search(name)
    return m.group(1) if m else None


def slurm_output_host(path: str) -> str | None:
    """The host a ``%j-%N`` / ``%j.%N`` output name carries after the job, else None."""
    m = _OUT_NAME_HOST.search(_output_name(path))
    return m.group(2) if m else None


def file_job_id(data: bytes, path: str) -> str | None:
    """The job a whole log belongs to: its ``SLURM_JOB_ID=`` line, else its Slurm output name."""
    m = SLURM_ENV.search(data[: 1 << 20].decode("utf-8", "replace"))
    if m:
        return m.group(1)
    return slurm_output_job(path)


def checkpoint_fields(raw: pl.Expr) -> tuple[pl.Expr, pl.Expr, pl.Expr, pl.Expr]:
    """(event, framework, iteration text, seconds-it-took text) of the checkpoint line in
    ``raw``; event null for any other line."""
    event = framework = it = took = pl.lit(None, pl.Utf8)
    for ev, fw, rx in reversed(CHECKPOINT_LINES):  # the first pattern wins: apply it last
        hit = raw.str.contains(rx)
        g = raw.str.extract_groups(rx)
        event = pl.when(hit).then(pl.lit(ev)).otherwise(event)
        framework = pl.when(hit).then(pl.lit(fw)).otherwise(framework)
        named = pl.lit(None, pl.Utf8)
        it = pl.when(hit).then(g.struct.field("it") if "?P<it>" in rx else named).otherwise(it)
        took = (
            pl.when(hit).then(g.struct.field("took") if "?P<took>" in rx else named).otherwise(took)
        )
    return event, framework, it, took


def read_stamp(text: pl.Expr, zone: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``YYYY-MM-DD[ T]HH:MM:SS[.,fff]`` and its optional zone suffix as (the wall-clock time of a
    zone-less stamp, the UTC instant of a zoned one): the per-line half of ``to_utc``."""
    clean = text.str.replace("T", " ").str.replace(",", ".")
    local = clean.str.strip_chars().str.to_datetime(
        "%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"
    )
    zoned = (
        pl.concat_str(clean, zone.str.replace("Z", "+00:00"))
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", strict=False, time_unit="us")
        .dt.convert_time_zone("UTC")
        .dt.replace_time_zone(None)
    )
    return pl.when(zone.is_null()).then(local), pl.when(zone.is_not_null()).then(zoned)


def settle_stamp(
    local: pl.Expr, zoned: pl.Expr, tz: str, order: list[pl.Expr] | None
) -> tuple[pl.Expr, pl.Expr]:
    """(naive UTC, the DST reason of a wall-clock time that is no single instant) from
    ``read_stamp``'s halves (``order``: as ``ingest.times.wall_clock``)."""
    utc, why = wall_clock(local, tz, order)
    return pl.coalesce(zoned, utc), pl.when(zoned.is_null()).then(why)


def to_utc(
    text: pl.Expr, zone: pl.Expr, tz: str, order: list[pl.Expr] | None
) -> tuple[pl.Expr, pl.Expr]:
    """``YYYY-MM-DD[ T]HH:MM:SS[.,fff]`` with an optional zone suffix to naive UTC, and the DST
    reason of a zone-less one (``order``: as ``ingest.times.wall_clock``)."""
    local, zoned = read_stamp(text, zone)
    return settle_stamp(local, zoned, tz, order)
