"""``goodput simulate`` and ``goodput demo``: the synthetic fleet and the committed sample."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from pipelines.cli.errors import CliError
from pipelines.cli.home import open_warehouse
from pipelines.cli.options import command
from pipelines.cli.options import gpus_per_node
from pipelines.cli.options import option
from pipelines.cli.output import print_where
from pipelines.cli.values import parse_duration

SAMPLE_FLEET = Path(__file__).resolve().parents[2] / "sample_data" / "fleet"


def llama3_cause_mix():
    """The simulator's fault mix: the published Llama 3 interruption table and its folding
    (``analysis.taxonomy``), injected because sample_data does not import analysis."""
    from analysis.taxonomy import LLAMA3_GPUS_PER_NODE
    from analysis.taxonomy import LLAMA3_HOURS
    from analysis.taxonomy import LLAMA3_NODES
    from analysis.taxonomy import LLAMA3_TABLE
    from sample_data.model import CauseMix

    return CauseMix(LLAMA3_TABLE, LLAMA3_NODES, LLAMA3_HOURS, LLAMA3_GPUS_PER_NODE)


def cmd_simulate(args) -> int:
    from sample_data.simulation import simulate
    from sample_data.simulation import source_folders

    if args.nodes < 1 or args.gpus_per_node < 1 or args.days <= 0 or args.fault_scale <= 0:
        raise CliError("--nodes, --gpus-per-node, --days and --fault-scale must be positive")
    if parse_duration(args.scrape_interval) < 1:
        raise CliError("--scrape-interval must be at least 1s")
    if args.fail_slow_rate < 0:
        raise CliError("--fail-slow-rate must be >= 0 (0: no GPU runs slow)")
    summary = simulate(
        Path(args.out),
        llama3_cause_mix(),
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        days=args.days,
        seed=args.seed,
        fault_scale=args.fault_scale,
        scrape_interval_s=int(parse_duration(args.scrape_interval)),
        fail_slow_rate=args.fail_slow_rate,
    )
    out = Path(args.out).resolve()
    print(f"wrote synthetic fleet to {out}")
    for k, v in summary.items():
        print(f"  {k}: {v}")
    folders = " ".join(shlex.quote(str(p)) for p in source_folders(out))
    print(f"next: goodput ingest {folders} --cluster {summary.get('cluster', 'simfleet')}")
    return 0


def cmd_demo(args) -> int:
    from pipelines.cli.run_summary import checks_line
    from pipelines.cli.run_summary import failure_lines
    from pipelines.cli.run_summary import summary_lines
    from pipelines.run import PipelineError
    from pipelines.run import run_pipeline
    from sample_data.simulation import source_folders

    if not SAMPLE_FLEET.exists():
        raise CliError(f"sample fleet not found at {SAMPLE_FLEET}")
    wh = open_warehouse(args)
    with wh.writer():
        other = _other_data(wh)
    if other:
        raise CliError(
            f"{wh.home} holds other data ({other}): the demo would mix the sample fleet into it; "
            "run it in a home of its own: goodput demo --home DIR"
        )
    sources = source_folders(SAMPLE_FLEET)
    print(f"running the pipeline on the sample fleet ({SAMPLE_FLEET}) ...", file=sys.stderr)
    try:
        with wh.writer():
            checks = run_pipeline(
                wh, sources, cluster="simfleet", nodes_per_rack=4
            )  # sample fleet: racks of 4
    except PipelineError as exc:
        raise CliError(str(exc)) from None
    for line in summary_lines(wh):
        print(line)
    print(checks_line(checks))
    print_where(wh)
    for line in failure_lines(checks):  # shown, and on the report's first screen; exit 0: a demo
        print(line, file=sys.stderr)
    return 0


def _other_data(wh) -> str:
    """What ``wh`` holds besides the sample fleet (files ingested from elsewhere, pulled
    sources), in a few words; empty when nothing."""
    import polars as pl

    files = wh.read("ingest_manifest").filter(
        ~pl.col("path").str.contains(
            f"/{SAMPLE_FLEET.parent.name}/{SAMPLE_FLEET.name}/", literal=True
        )
    )
    pulls = wh.read("pull_log")["source"].unique()
    return ", ".join(
        ([f"{files.height} file(s) ingested, e.g. {files['path'][0]}"] if files.height else [])
        + ([f"pulled from {', '.join(sorted(pulls))}"] if len(pulls) else [])
    )


def add_demo(sub) -> None:
    command(
        sub,
        cmd_demo,
        examples=("goodput demo", "goodput demo --home /tmp/goodput-demo"),
        help="whole pipeline on the committed sample fleet",
    )


def add_simulate(sub) -> None:
    from sample_data import defaults as fleet

    command(
        sub,
        cmd_simulate,
        option(
            "--out",
            required=True,
            help="directory to write the fleet's source files and ground_truth.json to",
        ),
        option(
            "--nodes", type=int, default=fleet.NODES, help="number of nodes (default %(default)s)"
        ),
        gpus_per_node(),
        option(
            "--days",
            type=float,
            default=fleet.DAYS,
            help="length of the simulated period in days (default %(default)g)",
        ),
        option(
            "--seed",
            type=int,
            default=fleet.SEED,
            help="random seed: the same seed writes the same fleet (default %(default)s)",
        ),
        option(
            "--fault-scale",
            type=float,
            default=fleet.FAULT_SCALE,
            help="multiply the Llama-3-derived fault rates",
        ),
        option(
            "--scrape-interval",
            default=f"{fleet.SCRAPE_INTERVAL_S}s",
            help="DCGM scrape interval (e.g. 15m, 1h)",
        ),
        option(
            "--fail-slow-rate",
            type=float,
            default=fleet.FAIL_SLOW_RATE,
            help=(
                "fail-slow episodes (a GPU throttled or on a downtrained PCIe link) per 1,000 "
                "GPU-days (default %(default)g; 0: none)"
            ),
        ),
        examples=("goodput simulate --out /tmp/fleet --nodes 64 --days 30 --seed 1",),
        help="write a synthetic fleet with ground truth",
    )
