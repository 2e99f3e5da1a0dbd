"""``goodput stragglers``: the what-if slowdown of a per-operation trace and whether single
workers or stage imbalance made it (analysis/slowness/whatif.py)."""

from __future__ import annotations

from pipelines.cli.errors import CliError
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.output import output_format
from pipelines.cli.output import print_data


def cmd_stragglers(args) -> int:
    import polars as pl

    from analysis.slowness.pipeline_model import TraceError
    from analysis.slowness.whatif import analyse
    from analysis.slowness.whatif import read_trace

    try:
        result = analyse(read_trace(args.trace))
    except TraceError as exc:
        raise CliError(f"{args.trace}: {exc}" if str(args.trace) not in str(exc) else str(exc))
    value = result.as_dict()
    workers = pl.DataFrame(
        [{"dp_rank": d, "stage": p, "score": s} for d, p, s in result.top_workers],
        schema={"dp_rank": pl.Int64, "stage": pl.Int64, "score": pl.Float64},
    )
    if print_data(output_format(args), value, workers):
        return 0
    print(
        f"trace: {result.steps} steps, {result.dp} data-parallel x {result.pp} pipeline stages "
        f"({result.workers} workers)"
    )
    print(
        f"step time: {result.actual_step_s:.3f} s replayed ({result.measured_step_s:.3f} s "
        f"measured), {result.ideal_step_s:.3f} s without stragglers"
    )
    shares = f"M_W = {result.worker_share:.3f}   M_S = {result.stage_share:.3f}"
    print(f"S = {result.slowdown:.3f}   {shares}")
    print(f"verdict: {result.verdict} ({_READING[result.verdict]})")
    worst = ", ".join(f"dp {d} stage {p} ({s:.3f})" for d, p, s in result.top_workers)
    print(f"slowest workers: {worst}")
    if result.dependency_violations > 0:
        print(
            f"note: {result.dependency_violations:.1%} of operations start before a dependency "
            "ends: the trace's order departs from the dependency model"
        )
    return 0


_READING = {
    "none": "the job runs within 10% of its ideal",
    "worker": "individual slow workers explain most of the slowdown",
    "stage": "an uneven last pipeline stage explains most of the slowdown",
    "mixed": "neither single workers nor the last stage explain half of it",
}


def add_stragglers(sub) -> None:
    command(
        sub,
        cmd_stragglers,
        option(
            "trace",
            help=(
                "per-operation trace (Parquet or CSV): dp_rank, stage, step, optype, seq_id, "
                "start_ts, duration per recorded operation"
            ),
        ),
        home=False,
        formats=True,
        examples=(
            "goodput stragglers trace-AR.parquet",
            "goodput stragglers trace-SE.parquet --format json",
        ),
        help=(
            "what-if slowdown S of a per-operation training trace without stragglers, and its "
            "split between single workers (M_W) and stage imbalance (M_S)"
        ),
    )
