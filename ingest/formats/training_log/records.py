"""One file's classified lines (``lines.extract`` of each chunk, in order) finished as records:
blocks joined to their headers across chunk boundaries, times read (DST decided by the log's
order) and carried to the lines that have none, iterations carried to the timers and reports
that follow a step line, the job and host of the file, and each record stored or quarantined."""

from __future__ import annotations

import polars as pl

from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import split_rejected
from ingest.base import stand_ins
from ingest.training_logs import NO_JOB
from ingest.training_logs import SLURM_ENV
from ingest.training_logs import checkpoint_fields
from ingest.training_logs import settle_stamp
from ingest.training_logs import slurm_output_host
from ingest.training_logs import slurm_output_job
from warehouse.schemas import TABLES
from warehouse.schemas import conform

from .lines import BLOCK_KINDS
from .lines import STEP_KINDS

# which entry shapes each block kind holds
_SHAPES = {
    "minmax": pl.col("name").is_not_null() & pl.col("min").is_not_null(),
    "max": pl.col("name").is_not_null() & pl.col("one").is_not_null(),
    "all_ranks": pl.col("timer").is_not_null() | pl.col("rank").is_not_null(),
    "relative": pl.col("entry_ok") & pl.col("rank").is_null() & pl.col("name").is_null(),
    "individual": pl.col("entry_ok") & pl.col("rank").is_null() & pl.col("name").is_null(),
}


def finish(parts: list[pl.DataFrame], ctx: ParseContext) -> ParseResult:
    frames = [p.with_columns(chunk=pl.lit(i, pl.Int64)) for i, p in enumerate(parts) if p.height]
    if not frames:
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    # the chunks' rows, in line order (each chunk's are, and the chunks come in file order)
    df = pl.concat(frames, how="diagonal_relaxed")
    time, dst = settle_stamp(pl.col("local"), pl.col("zoned"), ctx.tz, [])
    df = df.with_columns(time=time, _dst=dst).drop("local", "zoned")
    env = df.filter(pl.col("kind") == "env")["raw"]
    found = next((m.group(1) for m in map(SLURM_ENV.search, env) if m), None)
    job = found or slurm_output_job(ctx.path)
    host = ctx.host or slurm_output_host(ctx.path)
    ident = {
        "cluster": pl.lit(ctx.cluster),
        "job_id": pl.lit(job, pl.Utf8),
        "host": pl.lit(host, pl.Utf8),
        "source_file": pl.lit(ctx.path),
    }
    no_job = job is None
    steps, q_steps = _steps(df, ctx, ident, no_job)
    carry, blocks = _carried(df), _blocks(df)
    timers, q_timers = _timers(df, blocks, carry, ident, no_job)
    scores, q_scores = _scores(blocks, carry, ident, no_job)
    checkpoints, q_ckpt = _checkpoints(df, ctx, ident, no_job)
    quarantine = pl.concat([q_steps, q_timers, q_scores, q_ckpt]).sort("line", maintain_order=True)
    tables = {
        name: conform(name, frame)
        for name, frame in (
            ("training_steps", steps),
            ("step_timers", timers),
            ("rank_scores", scores),
            ("checkpoints", checkpoints),
        )
        if frame.height
    }
    return ParseResult(
        tables,
        quarantine,
        steps.height + quarantine.height,
        stand_ins=stand_ins(ctx, steps, host is not None and ctx.host is None and bool(tables)),
    )


def _carried(df: pl.DataFrame):
    """``carry(rows, at)``: ``rows`` with the latest time (``t_carried``) and step line's
    iteration (``it_carried``) at or before the line ``at`` names (as-of joins: ``df`` is in
    line order)."""
    times = df.filter(pl.col("time").is_not_null()).select("line", t_carried="time")
    iterations = df.filter(pl.col("kind").is_in(STEP_KINDS)).select("line", it_carried="iteration")

    def carry(rows: pl.DataFrame, at: str) -> pl.DataFrame:
        rows = rows.sort(at).with_columns(pl.col(at).alias("_at"))
        rows = rows.join_asof(times.rename({"line": "_at"}), on="_at", strategy="backward")
        return rows.join_asof(
            iterations.rename({"line": "_at"}), on="_at", strategy="backward"
        ).drop("_at")

    return carry


def _blocks(df: pl.DataFrame) -> pl.DataFrame:
    """The lines of every block with its kind (``block``) and header line (``_hline``), a block
    that runs over a chunk boundary joined to its header; lines past a block's first line of
    another shape are not its lines."""
    tails = dict(df.filter(pl.col("kind") == "_tail").select("chunk", "run").iter_rows())
    open_run: dict[int, tuple[int, int] | None] = {}
    previous = None
    for chunk in sorted(tails):
        open_run[chunk] = previous
        previous = previous if tails[chunk] == 0 else (chunk, tails[chunk])
    cont = pl.DataFrame(
        {
            "chunk": list(open_run),
            "_oc": [v[0] if v else None for v in open_run.values()],
            "_or": [v[1] if v else None for v in open_run.values()],
        },
        schema={"chunk": pl.Int64, "_oc": pl.Int64, "_or": pl.Int64},
    )
    heads = df.filter(pl.col("kind").is_in(BLOCK_KINDS)).select(
        _bc="chunk", _br="run", block="kind", _hline="line", _htime="time"
    )
    body = df.filter(pl.col("kind").is_null()).join(cont, on="chunk", how="left")
    start = pl.col("run") == 0
    body = body.with_columns(
        _bc=pl.when(start).then("_oc").otherwise("chunk"),
        _br=pl.when(start).then("_or").otherwise("run"),
    ).join(heads, on=["_bc", "_br"], how="inner")
    shape = pl.lit(False)
    for kind, ok in _SHAPES.items():
        shape = pl.when(pl.col("block") == kind).then(ok).otherwise(shape)
    inside = (pl.col("entry_ok") & shape).fill_null(False).cast(pl.Int8)
    body = body.sort("line").with_columns(_ok=inside.cum_min().over("_hline"))
    return body.filter(pl.col("_ok") == 1).drop("_bc", "_br", "_oc", "_or", "_ok", "entry_ok")


def _steps(
    df: pl.DataFrame, ctx: ParseContext, ident: dict, no_job: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = df.filter(pl.col("kind").is_in(STEP_KINDS))
    # NumPy divides exactly; a Polars division by a literal may multiply by its inverse, which
    # rounds differently with the chunk's length (a record's value must not depend on chunking)
    ms = rows["reported_ms"].to_numpy() if "reported_ms" in rows.columns else None
    if ms is not None:
        seconds_stated = pl.Series("_ms_s", ms / 1000.0)
        rows = rows.with_columns(reported_s=pl.coalesce("reported_s", seconds_stated))
    kind = pl.col("kind")
    delta = pl.col("iteration") - pl.col("iteration").shift(1)
    seconds = (pl.col("time") - pl.col("time").shift(1)).dt.total_microseconds() / 1e6
    rows = rows.with_columns(steps=pl.when(delta > 0).then(delta)).with_columns(
        step_s=pl.when(kind == "torchtitan")
        .then(pl.when(pl.col("steps").is_not_null()).then(seconds / pl.col("steps")))
        .otherwise("reported_s"),
    )
    unreadable = pl.format("unreadable {} step line: no iteration number or step time", kind)
    err = (
        pl.when(
            pl.col("iteration").is_null()
            | ((kind != "torchtitan") & pl.col("reported_s").is_null())
        )
        .then(unreadable)
        .when(pl.col("reported_s") <= 0)
        .then(pl.format("step time {} s is not positive", pl.col("reported_s")))
        .when(pl.lit(no_job))
        .then(pl.lit(NO_JOB))
        .when(pl.col("_dst").is_not_null())
        .then("_dst")
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    kept = [c for c in TABLES["training_steps"].columns if c in rows.columns]
    return _stored("training_steps", rows, err, ident, *kept, framework=kind)


def _timers(
    df: pl.DataFrame, blocks: pl.DataFrame, carry, ident: dict, no_job: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Timer rows: each ``name: value`` of a ``time (ms) |`` line, and the entries of the
    ``(min, max)``, ``max`` and per-rank blocks."""
    pairs = (
        df.filter(pl.col("kind") == "timers")
        .select("line", "raw")
        .with_columns(_pair=pl.col("raw").str.extract(r"time \(ms\) \|(.*)$", 1).str.split("|"))
        .explode("_pair")
        .with_columns(pl.col("_pair").str.strip_chars())
        .filter(pl.col("_pair") != "")
        .with_columns(_kv=pl.col("_pair").str.extract_groups(r"^(?P<k>.+?):\s*(?P<v>\S+)$"))
    )
    line_rows = carry(pairs, "line").select(
        "line",
        "raw",
        "t_carried",
        "it_carried",
        "_pair",
        timer=pl.col("_kv").struct.field("k"),
        _value=pl.col("_kv").struct.field("v"),
        rank=pl.lit(None, pl.Int32),
        _min=pl.lit(None, pl.Utf8),
        _max=pl.lit(None, pl.Utf8),
    )
    blocks = blocks.filter(pl.col("block").is_in(["minmax", "max", "all_ranks"]))
    blocks = blocks.with_columns(pl.col("timer").forward_fill().over("_hline")).filter(
        (pl.col("block") != "all_ranks") | pl.col("rank").is_not_null()
    )
    block_rows = carry(blocks, "_hline").select(
        "line",
        "raw",
        "t_carried",
        "it_carried",
        _pair=pl.col("raw").str.strip_chars(),
        timer=pl.coalesce("name", "timer"),
        _value=pl.when(pl.col("block") == "all_ranks").then("value"),
        rank=pl.col("rank").cast(pl.Int32, strict=False),
        _min=pl.when(pl.col("block") == "minmax").then("min"),
        _max=pl.when(pl.col("block") == "minmax").then("max").otherwise("one"),
    )
    rows = pl.concat([line_rows, block_rows]).sort("line", maintain_order=True)
    value = pl.col("_value").cast(pl.Float64, strict=False)
    lo = pl.col("_min").cast(pl.Float64, strict=False)
    hi = pl.col("_max").cast(pl.Float64, strict=False)
    bad_number = (
        (pl.col("_value").is_not_null() & value.is_null())
        | (pl.col("_min").is_not_null() & lo.is_null())
        | (pl.col("_max").is_not_null() & hi.is_null())
        | pl.col("timer").is_null()
    )
    reason = pl.format("timer entry '{}' has no readable name and time in ms", pl.col("_pair"))
    return _block_rows(
        "step_timers",
        rows,
        bad_number,
        reason,
        ident,
        no_job,
        timer=pl.col("timer").str.strip_chars(),
        rank="rank",
        value_ms=value,
        min_ms=lo,
        max_ms=hi,
        framework=pl.lit("megatron"),
    )


def _scores(
    blocks: pl.DataFrame, carry, ident: dict, no_job: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = blocks.filter(
        pl.col("block").is_in(["relative", "individual"]) & pl.col("score_rank").is_not_null()
    )
    rows = carry(rows, "_hline").sort("line")
    score = pl.col("score").cast(pl.Float64, strict=False)
    reason = pl.format("straggler score '{}' is not a number >= 0", pl.col("score"))
    return _block_rows(
        "rank_scores",
        rows,
        score.is_null() | (score < 0),
        reason,
        ident,
        no_job,
        kind="block",
        rank=pl.col("score_rank").cast(pl.Int32),
        node="node",
        score=score,
    )


def _checkpoints(
    df: pl.DataFrame, ctx: ParseContext, ident: dict, no_job: bool
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Checkpoint saves, read as the ``checkpoints`` format reads them (ingest.training_logs);
    a line that mentions checkpoints but is no save is not a record."""
    event, framework, it, took = checkpoint_fields(pl.col("raw"))
    rows = (
        df.filter(pl.col("kind") == "checkpoint")
        .with_columns(event=event, framework=framework, _it=it, _took=took)
        .filter(pl.col("event").is_not_null())
    )
    err = (
        pl.when(pl.col("_dst").is_not_null())
        .then("_dst")
        .when(pl.col("time").is_null())
        .then(pl.lit("checkpoint line has no timestamp"))
        .when(pl.lit(no_job))
        .then(pl.lit(NO_JOB))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    return _stored(
        "checkpoints",
        rows,
        err,
        ident,
        "time",
        "event",
        "framework",
        iteration=pl.col("_it").cast(pl.Int64, strict=False),
        duration_s=pl.col("_took").cast(pl.Float64, strict=False),
    )


def _block_rows(
    table: str,
    rows: pl.DataFrame,
    bad: pl.Expr,
    reason: pl.Expr,
    ident: dict,
    no_job: bool,
    **named,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows, quarantine rows) of a timer or score block's entries, timed and numbered by the
    step line before them (``t_carried``, ``it_carried``): ``reason`` where ``bad``, else
    ``NO_JOB`` when the file names no job, quarantines an entry."""
    err = pl.when(bad).then(reason).when(pl.lit(no_job)).then(pl.lit(NO_JOB))
    return _stored(table, rows, err, ident, time="t_carried", iteration="it_carried", **named)


def _stored(
    table: str, rows: pl.DataFrame, err: pl.Expr, ident: dict, *columns, **named
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``table``'s rows, quarantine rows) of ``rows``: those ``err`` (a reason, else null)
    rejects are quarantined; the others keep ``columns`` and ``named`` with the file's job, host
    and provenance."""
    good, bad = split_rejected(rows.with_columns(_err=err), "_err")
    spec = TABLES[table].columns
    given = {k: v for k, v in ident.items() if k in spec and k not in named}
    out = good.select(
        *[c for c in columns if c not in given],
        **named,
        **given,
        source=pl.lit("training-log"),
        source_line="line",
    )
    return out.select(list(spec)), bad
