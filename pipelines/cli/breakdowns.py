"""``goodput losses``, ``goodput trend`` and ``goodput compare``: the interruptions' lost
GPU-hours by group, by period, and clusters side by side."""

from __future__ import annotations

from pipelines.cli.home import reading_warehouse
from pipelines.cli.options import choice
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.output import output_format
from pipelines.cli.output import print_frame
from pipelines.cli.output import print_scope


def cmd_losses(args) -> int:
    from analysis.numbers import mean_time
    from analysis.numbers import num
    from analysis.numbers import pct
    from analysis.scope import job_window
    from analysis.trend import losses_frame

    wh = reading_warehouse(args)
    df = losses_frame(
        wh.read("job_attempts"), wh.read("interruptions"), args.by, args.period, job_window(wh)
    )
    if df.height == 0 and output_format(args) == "table":
        print_scope(wh)
        print(
            "no unexpected interruptions in the warehouse (run `goodput build` after ingesting "
            "job records)"
        )
        return 0
    header = ([args.period] if args.period else []) + [
        args.by,
        "lost GPU-hours",
        "share",
        "interruptions",
        "MTBF",
    ]
    rows = [
        ([f"{r['period_start']:%Y-%m-%d}"] if args.period else [])
        + [
            r[args.by],
            num(r["lost_gpu_hours"]),
            pct(r["share"]),
            f"{r['interruptions']:,}",
            mean_time(r["mtbf_hours"]),
        ]
        for r in df.iter_rows(named=True)
    ]
    print_frame(df, output_format(args), rows, header, {"by": args.by, "period": args.period}, wh)
    return 0


def _job_tables(wh) -> tuple:
    """What trend and compare read: the job attempts, their interruptions and their goodput."""
    return tuple(wh.read(t) for t in ("job_attempts", "interruptions", "goodput_jobs"))


def cmd_trend(args) -> int:
    from analysis.scope import job_window
    from analysis.trend import TREND_HEADER
    from analysis.trend import trend_cells
    from analysis.trend import trend_frame

    wh = reading_warehouse(args)
    df = trend_frame(*_job_tables(wh), args.period, job_window(wh))
    if df.height == 0 and output_format(args) == "table":
        print_scope(wh)
        print("no job attempts with start and end times in the warehouse")
        return 0
    header = [args.period, *TREND_HEADER]
    rows = [[f"{r['period_start']:%Y-%m-%d}", *trend_cells(r)] for r in df.iter_rows(named=True)]
    print_frame(df, output_format(args), rows, header, {"period": args.period}, wh)
    if output_format(args) == "table":
        print(
            f"change: against the {args.period} before, per hour of data (a partial "
            f"{args.period} compares as its hours), with its 95% CI; a change only where its "
            "test tells it from noise (p < 0.05): goodput and lost share (of the GPU-hours "
            "used) in points, unexpected interruptions per hour as a rate (MTBF: its inverse); "
            "docs/statistics.md"
        )
    return 0


def cmd_compare(args) -> int:
    """Clusters (partitions, accounts) side by side: measured goodput, infrastructure
    interruption rate and MTBF with exact 95% CIs (``analysis.breakdown.compare_frame``)."""
    from analysis.breakdown import compare_frame
    from analysis.numbers import mean_time
    from analysis.numbers import num
    from analysis.numbers import pct
    from analysis.scope import job_window
    from analysis.scope import scope_of

    wh = reading_warehouse(args)
    df = compare_frame(*_job_tables(wh), args.by, job_window(wh) if scope_of(wh).timed else None)
    if df.height == 0 and output_format(args) == "table":
        print_scope(wh)
        print("no job attempts in the warehouse (ingest job records, then `goodput build`)")
        return 0

    def ci(r, value, key, shown):
        lo, hi = r[f"{key}_ci_low"], r[f"{key}_ci_high"]
        return f"{shown(r[value])} ({shown(lo)} - {shown(hi)})"

    keys = args.by.split(",")
    text = [
        [
            *(r[k] for k in keys),
            f"{r['jobs']:,}",
            num(r["gpu_hours"]),
            pct(r["goodput"]),
            f"{r['infrastructure']:,} of {r['interruptions']:,}",
            ci(r, "rate_per_1k_gpu_days", "rate", num),
            ci(r, "mtbf_hours", "mtbf", mean_time),
            num(r["lost_gpu_hours"]),
        ]
        for r in df.iter_rows(named=True)
    ]
    header = [
        *keys,
        "jobs",
        "GPU-hours",
        "goodput",
        "infra. interruptions",
        "per 1,000 GPU-days (95% CI)",
        "MTBF (95% CI)",
        "lost GPU-hours",
    ]
    print_frame(df, output_format(args), text, header, {"by": args.by}, wh)
    if output_format(args) == "table":
        print(
            "infrastructure interruptions: unexpected, not the jobs' own failures; MTBF: the "
            f"hours the {' x '.join(keys)}'s jobs span / those interruptions; CIs exact Poisson"
        )
    return 0


def add_losses(sub) -> None:
    from analysis.scope import LOSS_KEYS
    from analysis.scope import PERIODS

    command(
        sub,
        cmd_losses,
        choice("--by", LOSS_KEYS, "cause", "what to group by"),
        option(
            "--period",
            choices=list(PERIODS),
            help="one group per calendar week or month (default: the whole span)",
        ),
        formats=True,
        scope=True,
        examples=(
            "goodput losses",
            "goodput losses --by partition --period month",
            "goodput losses --by node --format csv > losses.csv",
        ),
        help=(
            "lost GPU-hours of unexpected interruptions by cause, cluster, partition, account or "
            "node"
        ),
    )


def add_trend(sub) -> None:
    from analysis.scope import PERIODS

    command(
        sub,
        cmd_trend,
        choice("--period", PERIODS, "week", "calendar week or month"),
        formats=True,
        scope=True,
        examples=("goodput trend", "goodput trend --period month --json"),
        help=(
            "goodput, lost GPU-hours, interruptions and MTBF per week or month, against the "
            "period before with a test of each change"
        ),
    )


def add_compare(sub) -> None:
    from analysis.scope import COMPARE_BY

    command(
        sub,
        cmd_compare,
        choice(
            "--by",
            COMPARE_BY,
            "cluster",
            "what to set side by side (cluster,partition: each partition of each cluster)",
        ),
        formats=True,
        scope=True,
        examples=(
            "goodput compare",
            "goodput compare --by partition --cluster prod --json",
            "goodput compare --by cluster,partition",
            "goodput compare --by user --last 30d",
        ),
        help=(
            "clusters (or partitions, accounts, users, each cluster's partitions) side by side: "
            "goodput, interruption rate and MTBF with 95%% CIs"
        ),
    )
