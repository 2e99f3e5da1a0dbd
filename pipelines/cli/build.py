"""``goodput build`` and ``goodput report``: the analyses, and the report, from the warehouse."""

from __future__ import annotations

import sys
from pathlib import Path

from pipelines.cli.errors import EXIT_CHECKS_FAILED
from pipelines.cli.errors import CliError
from pipelines.cli.home import checked_scope
from pipelines.cli.home import holds_data
from pipelines.cli.home import open_warehouse
from pipelines.cli.home import rebuilt_scope
from pipelines.cli.home import scope_settings
from pipelines.cli.home import window_config
from pipelines.cli.home import window_fields
from pipelines.cli.options import ckpt_cost
from pipelines.cli.options import command
from pipelines.cli.options import gpu_hour_cost
from pipelines.cli.options import gpus
from pipelines.cli.options import gpus_per_node
from pipelines.cli.options import option
from pipelines.cli.options import restart
from pipelines.cli.output import print_where
from pipelines.cli.values import parse_duration


def site_and_cost(args, wh):
    """The home's settings (``HOME/goodput.toml``) and the $ per GPU-hour the report prices
    lost GPU-hours at: ``--gpu-hour-cost``, else the file's, else none (0)."""
    from analysis.assumptions import GPU_HOUR_COST
    from analysis.site import load

    try:
        site = load(wh.home)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    cost = args.gpu_hour_cost
    if cost is None:
        cost = site.gpu_hour_cost if site.gpu_hour_cost is not None else GPU_HOUR_COST
    if cost < 0:
        raise CliError("--gpu-hour-cost must be >= 0 (0: no cost shown)")
    return site, cost


def cmd_build(args) -> int:
    wh = open_warehouse(args, existing=True)
    assumed = {
        "ckpt_interval_s": parse_duration(args.ckpt_interval),
        "ckpt_cost_s": parse_duration(args.ckpt_cost),
        "restart_s": parse_duration(args.restart),
    }
    if assumed["ckpt_interval_s"] <= 0:
        raise CliError("--ckpt-interval must be a positive duration")
    _, cost = site_and_cost(args, wh)
    config = window_config(args, **assumed, gpu_hour_cost=cost)
    scope = scope_settings(args)
    if not holds_data(wh):
        raise CliError(
            f"nothing to build in {wh.home}: no record ingested or pulled yet "
            "(goodput ingest PATH..., goodput pull, or goodput demo)"
        )
    if any(scope.values()):
        checked_scope(wh, args)  # an unknown cluster is said before the build, not after
    from pipelines.cli.run_summary import checks_line
    from pipelines.cli.run_summary import failure_lines
    from pipelines.cli.run_summary import invariant_failure_lines
    from pipelines.cli.run_summary import status_lines
    from pipelines.cli.run_summary import summary_lines
    from pipelines.run import PipelineError
    from pipelines.run import build

    with wh.writer():
        wh.refresh_catalog()
        try:
            result = build(config)
        except PipelineError as exc:
            raise CliError(str(exc)) from None
        finally:
            wh.refresh_catalog()  # what did build stays queryable, even after a failed step
    for line in status_lines(wh) + summary_lines(wh):
        print(line)
    evaluations = result.get_asset_check_evaluations()
    print(checks_line(evaluations))
    print_where(wh)
    failures = failure_lines(evaluations)
    if any(scope.values()):  # then the scope's aggregates, from the fleet's rows just built
        from analysis.checks import evaluate

        part = rebuilt_scope(args, "all", **window_fields(args), **assumed)
        for line in [
            f"scope: {part.scope.describe()} ({part.home})",
            *status_lines(part),
            *summary_lines(part),
        ]:
            print(line)
        # the scope's tables are checked as the fleet's are, whether recomputed or reused
        failures += invariant_failure_lines(
            evaluate(part, gpus_per_node=config.gpus_per_node), part.scope.describe()
        )
    for line in failures:
        print(line, file=sys.stderr)
    if failures and not args.allow_failed_checks:
        print(
            f"goodput build: {len(failures)} invariant check(s) failed: the tables and the report "
            "are written, but their numbers break a limit they must keep (the report's first "
            "screen names them); --allow-failed-checks exits 0 anyway",
            file=sys.stderr,
        )
        return EXIT_CHECKS_FAILED
    return 0


def cmd_report(args) -> int:
    from analysis.scope import scope_of
    from dashboards.report import build_report

    if args.gpus < 1:
        raise CliError("--gpus must be >= 1")
    wh = open_warehouse(args, existing=True)
    site, cost = site_and_cost(args, wh)
    if args.gpus_per_node < 1:
        raise CliError("--gpus-per-node must be >= 1")
    if any(scope_settings(args).values()):
        wh = rebuilt_scope(args, "all", target_gpus=args.gpus)
    scope = scope_of(wh)
    with wh.writer():
        wh.refresh_catalog()
        path = build_report(
            wh,
            Path(args.out) if args.out else None,
            target_gpus=args.gpus,
            scope=scope.header(),
            gpu_hour_cost=cost,
            gpus_per_node=args.gpus_per_node,
            site=site,
        )
    print(f"report: {path}")
    return 0


def add_build(sub) -> None:
    from analysis.assumptions import CKPT_INTERVAL_S

    command(
        sub,
        cmd_build,
        option(
            "--ckpt-interval",
            default=f"{CKPT_INTERVAL_S:g}s",
            help="assumed checkpoint interval for measured goodput of jobs without checkpoint "
            "evidence",
        ),
        ckpt_cost("assumed cost of one checkpoint, e.g. 60s"),
        restart("assumed restart time after a failure, e.g. 10m"),
        gpu_hour_cost(),
        option(
            "--allow-failed-checks",
            action="store_true",
            help="exit 0 even when an invariant check fails (the failures are still printed "
            "and shown on the report's first screen)",
        ),
        window=True,
        scope=True,
        examples=(
            "goodput build",
            "goodput build --as-of 2026-03-01 --ckpt-interval 1h --restart 15m",
            "goodput build --cluster prod --from 2026-01-01",
        ),
        help="everything downstream of ingest (rollups, attribution, fits, goodput, report)",
    )


def add_report(sub) -> None:
    command(
        sub,
        cmd_report,
        option("--out", help="HTML file to write (default DIR/reports/goodput_report.html)"),
        gpus("job scale for the projected-goodput headline"),
        gpu_hour_cost(),
        gpus_per_node(
            "GPUs per host where the data does not show them, for the invariant checks (default {})"
        ),
        scope=True,
        examples=("goodput report", "goodput report --out /tmp/report.html --gpu-hour-cost 2.5"),
        help="write the leadership report (HTML + PNG/SVG per chart)",
    )
