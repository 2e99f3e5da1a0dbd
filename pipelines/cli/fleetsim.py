"""``goodput fleetsim``: a fleet's operations simulated under the fitted failure laws."""

from __future__ import annotations

import json
import sys

from pipelines.cli.errors import CliError
from pipelines.cli.home import open_warehouse
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.project import detect_hours
from pipelines.cli.project import slow_detect


def cmd_fleetsim(args) -> int:
    from analysis.fleetsim.run import needs_warehouse
    from analysis.fleetsim.run import resolve
    from analysis.fleetsim.scenario import ScenarioError
    from analysis.fleetsim.scenario import load
    from analysis.fleetsim.sweep import format_study
    from analysis.fleetsim.sweep import study
    from analysis.fleetsim.sweep import to_json

    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be >= 1")
    try:
        spec = load(args.scenario)
        if args.slow_detect:  # one more what-if sweep, ranked with the scenario's own
            from analysis.fleetsim.scenario import validate

            hours = [detect_hours(d) for d in args.slow_detect]
            sweep = {"knob": "fail_slow.detect_hours", "values": hours}
            spec = validate({**spec, "sweeps": [*spec["sweeps"], sweep]})
        wh = open_warehouse(args, existing=True, read_only=True) if needs_warehouse(spec) else None
        inputs = resolve(spec, wh)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None

    def progress(n):
        print(f"\rfleetsim: {spec['name']}: replication {n}", end="", file=sys.stderr, flush=True)

    try:
        res = study(spec, inputs, progress if sys.stderr.isatty() else None, args.workers)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(spec["name"], res), default=str))
    else:
        print("\n".join(format_study(spec["name"], res)))
    return 0


def add_fleetsim(sub) -> None:
    command(
        sub,
        cmd_fleetsim,
        option(
            "--scenario",
            required=True,
            metavar="FILE.yaml",
            help="the scenario (schema: docs/fleetsim.md)",
        ),
        option(
            "--workers", type=int, help="processes running replications (default: one per core)"
        ),
        slow_detect("", many=True),
        option("--json", action="store_true", help="print one JSON object"),
        help=(
            "simulate a fleet's operations (spares, triage, repair line, retirement, "
            "maintenance) under the fitted failure laws: ETTR, goodput, what-if sweeps "
            "(docs/fleetsim.md)"
        ),
    )
