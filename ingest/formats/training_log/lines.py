"""One chunk's lines that matter, classified and with their fields read: the per-chunk stage
(``FormatSpec.extract``) that runs on every core. Cross-line work (which block a line belongs
to across a chunk boundary, times and iterations carried forward, DST) is ``finish``'s."""

from __future__ import annotations

import polars as pl

from ingest.base import ParseContext
from ingest.base import numbered_lines
from ingest.training_logs import TIME
from ingest.training_logs import ZONE
from ingest.training_logs import read_stamp

# One token per line says what the line is (its leftmost match; first in the line wins).
_TOKEN = (
    r"(elapsed time per iteration|train_step_timing in s|\bstep:\s*\d+(?:/\d+)?\s+loss:|"
    r"time \(ms\) \||\(min, max\) time across ranks \(ms\):|max time across ranks \(ms\):|"
    r"times across ranks \(ms\):|GPU relative performance:|GPU individual performance:|"
    r"SLURM_JOB_ID[=: ]|[Cc]heckpoint|saving model to)"
)
# token prefix -> kind
KINDS = {
    "elapsed": "megatron",
    "train_step": "nemo",
    "step": "torchtitan",
    "time (ms)": "timers",
    "(min, max)": "minmax",
    "max time": "max",
    "times across": "all_ranks",
    "GPU relative": "relative",
    "GPU individual": "individual",
    "SLURM_JOB_ID": "env",
    "Checkpoint": "checkpoint",
    "checkpoint": "checkpoint",
    "saving model": "checkpoint",
}
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_MEGATRON_MS = rf"elapsed time per iteration \(ms\): ({_NUMBER})"
_MEGATRON_TFLOPS = rf"throughput per GPU \(TFLOP/s/GPU\): ({_NUMBER})"
_NEMO_STEP = r"global_step: (\d+)"
_NEMO_ITERATION = r"iteration (\d+)/"
_NEMO_S = rf"train_step_timing in s: ({_NUMBER})"
_TITAN_STEP = r"\bstep:\s*(\d+)"
_TITAN_TPS = r"\btps: ([\d,]+)"
_TITAN_TFLOPS = rf"\btflops: ({_NUMBER})"
BLOCK_KINDS = ("minmax", "max", "all_ranks", "relative", "individual")
# torchrun --tee / --local-ranks-filter prefixes every line of a rank's output
_RANK_PREFIX = r"^(?:\[(?:rank|default)\d+\]:)?"
# the lines inside a block, whatever its kind (each block kind accepts some of these shapes)
ENTRY = (
    _RANK_PREFIX + r"\s+(?:"
    r"Rank=(?P<score_rank>\d+) Node=(?P<node>\S+) Score=(?P<score>[-\d.]+)|"
    r"(?:Worst|Best) performing \d+/\d+ ranks:|"
    r"rank\s+(?P<rank>\d+): (?P<value>\S+)|"
    r"(?P<name>[^\s:][^:]*?) ?\.*: (?:\((?P<min>\S+), (?P<max>\S+)\)|(?P<one>\S+))|"
    r"(?P<timer>[^\s:][^:]*):"
    r")\s*$"
)
ENTRY_FIELDS = (
    "score_rank",
    "node",
    "score",
    "rank",
    "value",
    "name",
    "min",
    "max",
    "one",
    "timer",
)


def extract(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """The chunk's records, block headers and block lines: ``line``, ``raw``, ``kind``, the
    line's time (``local``: a zone-less stamp's wall-clock time, ``zoned``: a zoned stamp's UTC;
    a header's also from the line before it), a step line's fields, ``run`` (the chunk-local
    run of indented lines a header starts; 0 before the chunk's first unindented line, which
    may continue a block of the chunk before), the entry fields of block lines and whether the
    line has an entry's shape (``entry_ok``); last, a ``_tail`` row naming the run still open
    where the chunk ends."""
    lines = numbered_lines(data, ctx)
    if lines.height == 0:
        return pl.DataFrame()
    token = pl.col("raw").str.extract(_TOKEN, 1)
    kind = pl.lit(None, pl.Utf8)
    for prefix, name in reversed(KINDS.items()):
        kind = pl.when(token.str.starts_with(prefix)).then(pl.lit(name)).otherwise(kind)
    lines = lines.with_columns(kind=kind)
    # a run of indented lines that are no record: a block's body when a header starts it
    indented = pl.col("raw").str.contains(_RANK_PREFIX + r"\s+\S") & pl.col("kind").is_null()
    lines = lines.with_columns(_indented=indented)
    starts = ~pl.col("_indented")
    lines = lines.with_columns(
        run=starts.cum_sum().cast(pl.Int64),
        _block=pl.when(starts).then(pl.col("kind").fill_null("")).forward_fill().fill_null("?"),
        # the line before a header may carry its time (a logger's prefix line)
        _before_head=pl.col("kind").shift(-1).is_in(BLOCK_KINDS),
    )
    body = pl.col("_indented") & pl.col("_block").is_in([*BLOCK_KINDS, "?"])
    out = lines.filter(pl.col("kind").is_not_null() | body | pl.col("_before_head"))
    stamp = pl.col("raw").str.extract_groups(rf"{TIME}{ZONE}")
    out = out.with_columns(_ts=stamp.struct.field("1"), _zone=stamp.struct.field("2"))
    from_before = pl.col("kind").is_in(BLOCK_KINDS) & (
        pl.col("line").shift(1) == pl.col("line") - 1
    )
    local, zoned = read_stamp(
        pl.coalesce("_ts", pl.when(from_before).then(pl.col("_ts").shift(1))),
        pl.coalesce("_zone", pl.when(from_before).then(pl.col("_zone").shift(1))),
    )
    out = out.with_columns(local=local, zoned=zoned).filter(
        pl.col("kind").is_not_null() | pl.col("_indented")
    )
    kept = ["line", "raw", "kind", "local", "zoned", "run"]
    steps = [
        out.filter(pl.col("kind") == name).select(*kept, **fields(pl.col("raw")))
        for name, fields in STEP_FIELDS.items()
    ]
    entry = pl.col("raw").str.extract_groups(ENTRY)
    body = out.filter(pl.col("_indented")).select(
        *kept,
        **{f: entry.struct.field(f) for f in ENTRY_FIELDS},
        entry_ok=pl.col("raw").str.contains(ENTRY),
    )
    other = out.filter(~pl.col("kind").is_in([*STEP_KINDS]) & ~pl.col("_indented")).select(kept)
    found = pl.concat([*steps, body, other], how="diagonal").sort("line")
    tail = pl.DataFrame(
        {"line": [lines["line"][-1]], "kind": ["_tail"], "run": [lines["run"][-1]]},
        schema={"line": pl.Int64, "kind": pl.Utf8, "run": pl.Int64},
    )
    return pl.concat([found, tail], how="diagonal")


def _megatron(raw: pl.Expr) -> dict[str, pl.Expr]:
    return {
        "iteration": raw.str.extract(r"iteration\s+(\d+)\s*/", 1).cast(pl.Int64, strict=False),
        "reported_ms": raw.str.extract(_MEGATRON_MS, 1).cast(pl.Float64, strict=False),
        "tflops_per_gpu": raw.str.extract(_MEGATRON_TFLOPS, 1).cast(pl.Float64, strict=False),
    }


def _nemo(raw: pl.Expr) -> dict[str, pl.Expr]:
    step = pl.coalesce(raw.str.extract(_NEMO_STEP, 1), raw.str.extract(_NEMO_ITERATION, 1))
    return {
        "iteration": step.cast(pl.Int64, strict=False),
        "reported_s": raw.str.extract(_NEMO_S, 1).cast(pl.Float64, strict=False),
    }


def _torchtitan(raw: pl.Expr) -> dict[str, pl.Expr]:
    return {
        "iteration": raw.str.extract(_TITAN_STEP, 1).cast(pl.Int64, strict=False),
        "tflops_per_gpu": raw.str.extract(_TITAN_TFLOPS, 1).cast(pl.Float64, strict=False),
        "tokens_per_s": raw.str.extract(_TITAN_TPS, 1)
        .str.replace_all(",", "")
        .cast(pl.Float64, strict=False),
    }


# A step line's fields as its framework logs them: ``iteration``, ``reported_s`` or
# ``reported_ms`` (the time per iteration the line states), ``tflops_per_gpu``, ``tokens_per_s``.
STEP_FIELDS = {"megatron": _megatron, "nemo": _nemo, "torchtitan": _torchtitan}
STEP_KINDS = tuple(STEP_FIELDS)
