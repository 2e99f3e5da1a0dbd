"""``goodput project`` and ``goodput whatif``: goodput projected for a job size, and the
improvements that buy the most of it."""

from __future__ import annotations

import json
import math
import sys

from pipelines.cli.errors import CliError
from pipelines.cli.home import has_warehouse
from pipelines.cli.home import open_warehouse
from pipelines.cli.home import rebuilt_scope
from pipelines.cli.home import scope_asked
from pipelines.cli.options import ckpt_cost
from pipelines.cli.options import command
from pipelines.cli.options import gpus
from pipelines.cli.options import gpus_per_node
from pipelines.cli.options import option
from pipelines.cli.options import rates_file
from pipelines.cli.options import restart
from pipelines.cli.output import output_format
from pipelines.cli.output import print_frame
from pipelines.cli.output import print_scope
from pipelines.cli.values import parse_duration


def cmd_project(args) -> int:
    from analysis.job import Job
    from analysis.rate_sources import read_rates_csv
    from analysis.scenario import append_projection
    from analysis.scenario import project_one
    from analysis.scope import scope_of
    from pipelines.cli.projection_text import format_projection
    from warehouse.store import WarehouseBusy

    if args.gpus < 1 or args.gpus_per_node < 1 or (args.spares is not None and args.spares < 0):
        raise CliError("--gpus and --gpus-per-node must be >= 1 and --spares >= 0")
    if args.rates and args.mtti:
        raise CliError("give --rates FILE or --mtti DUR, not both")
    mtti = None if args.mtti is None else parse_duration(args.mtti) / 3600
    interval = None if args.interval == "auto" else parse_duration(args.interval) / 3600
    if mtti == 0 or interval == 0:
        raise CliError("--mtti and --interval must be positive durations")
    try:
        rates = read_rates_csv(args.rates) if args.rates else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    # given rates or an MTTI read no warehouse: one that is not there is not needed
    given = (rates is not None or mtti is not None) and not scope_asked(args)
    wh = None if given and not has_warehouse(args) else rebuilt_scope(args, "fits")
    horizon = None if args.horizon is None else parse_duration(args.horizon) / 3600
    if horizon == 0:
        raise CliError("--horizon must be a positive duration")
    detect = detect_hours(args.slow_detect)
    try:
        job = Job(
            args.gpus,
            args.gpus_per_node,
            parse_duration(args.ckpt_cost),
            restart_s=parse_duration(args.restart),
            interval_hours=interval,
            spares=args.spares,
            wall_hours=Job.wall_hours if horizon is None else horizon,
            slow_detect_hours=detect,
        )
        res = project_one(
            wh, job, mtti, args.method, scope=args.scope, rates=rates, fleet_age=args.fleet_age
        )
    except ValueError as exc:
        raise CliError(
            f"no rates to project from ({exc}); run `goodput demo` or `goodput build` first, "
            "or pass --rates FILE.csv or --mtti DUR"
        ) from None
    if wh is None:
        pass  # nowhere to keep it
    elif wh.writable():  # kept in goodput_projections: a brief write that never waits for a writer
        saver = open_warehouse(args) if wh.read_only else wh
        try:
            with saver.writer(wait=0):
                append_projection(saver, res)
        except WarehouseBusy:
            print(
                f"goodput: note: {wh.home} is being written by {saver.lock_owner()}: this "
                "projection is printed, not saved",
                file=sys.stderr,
            )
    else:
        print(
            f"goodput: note: {wh.home} is read-only: this projection is printed, not saved",
            file=sys.stderr,
        )
    if output_format(args) == "json":  # its "scope" is the interruption scope (--scope)
        print(json.dumps({**res, "fleet_scope": scope_of(wh).meta()}, default=str))
    elif output_format(args) == "csv":  # the scalar figures as one row (the classes: --json)
        import polars as pl

        print_frame(
            pl.DataFrame([{k: v for k, v in res.items() if not isinstance(v, dict | list)}]),
            "csv",
            wh=wh,
        )
    else:
        print_scope(wh)
        print("\n".join(format_projection(res)))
    return 0


def cmd_whatif(args) -> int:
    """The ranked knobs at a job size: the report's what-if section as a table (the same rows:
    ``analysis.whatif.sensitivity_at``, stored by the last build or computed now)."""
    import polars as pl

    from analysis.job import Job
    from analysis.numbers import mean_time
    from analysis.numbers import pct
    from analysis.rate_sources import read_rates_csv
    from analysis.whatif import sensitivity_at
    from analysis.whatif import sensitivity_frame

    if args.gpus < 1:
        raise CliError("--gpus must be >= 1")
    try:
        rates = read_rates_csv(args.rates) if args.rates else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    # a rates file reads no warehouse: one that is not there is not needed
    given = rates is not None and not scope_asked(args)
    wh = None if given and not has_warehouse(args) else rebuilt_scope(args, "fits")
    try:
        rows = sensitivity_at(wh, args.gpus, rates)
    except ValueError as exc:
        raise CliError(
            f"no rates to project from ({exc}); run `goodput demo` or `goodput build` first, "
            "or pass --rates FILE.csv"
        ) from None
    base = rows.filter(pl.col("knob") == "baseline").row(0, named=True)
    ranked = sensitivity_frame(rows).select(
        "change",
        "knob",
        "gain_pp",
        "goodput_base",
        "goodput",
        "goodput_ci_low",
        "goodput_ci_high",
        "mtti_hours",
        "interval_hours",
        "method",
    )
    meta = {
        "n_gpus": args.gpus,
        "baseline": {
            k: base[k]
            for k in (
                "goodput",
                "goodput_ci_low",
                "goodput_ci_high",
                "mtti_hours",
                "interval_hours",
                "spares",
                "scope",
            )
        },
    }
    slow = _fail_slow(wh, args, base)
    if slow is not None:
        meta["fail_slow"] = slow
    fmt = output_format(args)
    if fmt == "table":
        print_scope(wh)
        of = f"rates of {args.rates}" if args.rates else f"{base['scope'] or 'infrastructure'}"
        print(
            f"at {args.gpus:,} GPUs ({of}{'' if args.rates else ' interruptions'}): goodput "
            f"{pct(base['goodput'])} (95% {pct(base['goodput_ci_low'])} - "
            f"{pct(base['goodput_ci_high'])}), MTTI {mean_time(base['mtti_hours'])}; each change "
            "alone:"
        )
    text = [
        [
            r["change"],
            f"{r['gain_pp']:+.1f} points",
            f"{pct(r['goodput_base'])} -> {pct(r['goodput'])}",
            f"{pct(r['goodput_ci_low'])} - {pct(r['goodput_ci_high'])}",
            mean_time(r["mtti_hours"]),
            r["method"],
        ]
        for r in ranked.iter_rows(named=True)
    ]
    header = ["change", "goodput gain", "goodput", "95% band", "MTTI", "method"]
    print_frame(ranked, fmt, text, header, meta, wh)
    if fmt == "table" and "mc" in ranked["method"]:
        print(
            f"mc: Monte Carlo against its own baseline of {base['spares']} spare nodes (repair "
            f"{Job.repair_hours:g} h), where waiting for a repaired node also costs goodput"
        )
    if fmt == "table":
        _print_fail_slow(slow, args.gpus)
    return 0


def detect_hours(text: str) -> float:
    """A ``--slow-detect`` time in hours: a duration, or never (inf)."""
    return math.inf if text == "never" else parse_duration(text) / 3600


def slow_detect(default: str | None = None, many: bool = False):
    """``--slow-detect``: when a fail-slow GPU is found and replaced (one time, or several to
    weigh against each other), as ``goodput project``, ``whatif`` and ``fleetsim`` take it."""
    from analysis.assumptions import SLOW_DETECT_HOURS

    default = f"{SLOW_DETECT_HOURS * 60:g}m" if default is None else default
    what = "times to detect and replace a fail-slow GPU the job is weighed at" if many else (
        "time to detect and replace a fail-slow GPU, where the warehouse measured fail-slow "
        "episodes"
    )  # fmt: skip
    return option(
        "--slow-detect",
        nargs="+" if many else None,
        default=default.split() if many else default,
        metavar="TIME",
        help=f"{what} (durations or never; default: {default or 'none'})",
    )


def _fail_slow(wh, args, base: dict) -> dict | None:
    """The fleet's fail-slow process and, per ``--slow-detect`` time, what it costs a job of
    ``--gpus`` (``analysis.slowness.at_scale``); None when the warehouse has no fail-slow law
    or there is no warehouse (rates from a file carry no fail-slow law)."""
    from analysis.slowness.at_scale import detection_rows
    from analysis.slowness.at_scale import from_warehouse
    from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS

    if wh is None:
        return None
    fs = from_warehouse(wh.read("failure_rates"), wh.read("slow_periods"))
    if fs is None:
        return None
    detects = [detect_hours(d) for d in args.slow_detect]
    return {
        "rate_per_1k_gpu_days": fs.rate * HOURS_PER_1K_UNIT_DAYS,
        "mean_episode_hours": float(fs.duration.mean()),
        "slowdown": fs.factor,
        "slowdown_source": fs.factor_source,
        "detections": [
            {"detect": text, **r}
            for text, r in zip(
                args.slow_detect, detection_rows(args.gpus, fs, detects, base), strict=True
            )
        ],
    }


def _print_fail_slow(slow: dict | None, n_gpus: int) -> None:
    from analysis.numbers import mean_time
    from analysis.numbers import pct

    if slow is None:
        print("fail-slow GPUs: none measured (no fail_slow law in failure_rates)")
        return
    print(
        f"fail-slow GPUs ({slow['rate_per_1k_gpu_days']:.2f} episodes per 1,000 GPU-days, "
        f"{mean_time(slow['mean_episode_hours'])} each on average, the job {slow['slowdown']:.2f}x "
        f"slower meanwhile: {slow['slowdown_source']}); at {n_gpus:,} GPUs, a slow GPU "
        "replaced after:"
    )
    for r in slow["detections"]:
        print(
            f"  {r['detect']:>8}: slow {pct(r['slow_share'])} of its compute time "
            f"({pct(r['lost_share'])} of it lost), {r['replacements_per_day']:.1f} replacements "
            "a day; goodput "
            f"{pct(r['goodput_without_slow'])} -> {pct(r['goodput'])}"
        )


def add_project(sub) -> None:
    from analysis.assumptions import DEFAULT_FLEET_AGE
    from analysis.assumptions import FLEET_AGES
    from analysis.taxonomy import DEFAULT_SCOPE
    from analysis.taxonomy import SCOPES

    command(
        sub,
        cmd_project,
        gpus(),
        gpus_per_node(),
        ckpt_cost("checkpoint cost (blocking), e.g. 60s"),
        restart(),
        option("--interval", default="auto", help="checkpoint interval: auto (Daly) or a duration"),
        option(
            "--spares",
            type=int,
            default=None,
            help="hot spare nodes for --method mc (default: unlimited, never wait for a node)",
        ),
        option("--mtti", help="override the fitted rates with this MTTI (e.g. 3h)"),
        slow_detect(),
        option(
            "--scope",
            choices=list(SCOPES),
            default=DEFAULT_SCOPE,
            help="interruption classes projected: hardware fits only; infrastructure (default: "
            "everything but the job's own failures); all",
        ),
        rates_file(),
        option(
            "--method",
            choices=["analytic", "mc"],
            default="analytic",
            help="analytic (default: Daly's model with CI bands from the fits) or mc (Monte "
            "Carlo simulation of the job, with spares and the fitted lifetime models)",
        ),
        option(
            "--fleet-age",
            choices=list(FLEET_AGES),
            default=DEFAULT_FLEET_AGE,
            help="age of the job's units at its start: stationary (each class's rate over the "
            "observation window, held), new (all age 0: failures over --horizon by renewal), "
            "observed (each unit's age at the window end from the warehouse; classes "
            "without ages stay stationary)",
        ),
        option(
            "--horizon",
            help="job length, e.g. 30d: failures of a non-stationary fleet are counted over it, "
            "and --method mc simulates it (default: 54 days, Llama 3's run)",
        ),
        formats=True,
        scope=True,
        examples=(
            "goodput project --gpus 32Ki",
            "goodput project --gpus 100k --spares 16 --method mc",
            "goodput project --gpus 16384 --mtti 3h --interval 30m --json",
        ),
        help="project goodput for a job size (analytic or Monte Carlo)",
    )


def add_whatif(sub) -> None:
    command(
        sub,
        cmd_whatif,
        gpus(),
        slow_detect("5m 1h never", many=True),
        rates_file(),
        formats=True,
        scope=True,
        examples=(
            "goodput whatif",
            "goodput whatif --gpus 32768 --format csv",
            "goodput whatif --rates analysis/data/llama3_rates.csv",
        ),
        help="which single improvement buys the most goodput at a job size, with 95%% bands",
        description=(
            "The report's what-if ranking: the goodput gained by halving each class's "
            "failure rate, the checkpoint cost or the restart time, or adding spare "
            "nodes, largest first."
        ),
    )
