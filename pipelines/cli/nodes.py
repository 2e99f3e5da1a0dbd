"""``goodput nodes``: the lemon nodes, and the goodput a job gains without them."""

from __future__ import annotations

from pipelines.cli.errors import CliError
from pipelines.cli.home import rebuilt_scope
from pipelines.cli.options import ckpt_cost
from pipelines.cli.options import command
from pipelines.cli.options import gpus
from pipelines.cli.options import gpus_per_node
from pipelines.cli.options import option
from pipelines.cli.options import restart
from pipelines.cli.output import output_format
from pipelines.cli.output import print_data
from pipelines.cli.output import print_rows
from pipelines.cli.values import parse_duration


def cmd_nodes(args) -> int:
    from analysis.node_health import fleet_rates
    from analysis.node_health import lemon_gain
    from analysis.node_health import score
    from analysis.node_health import summary
    from analysis.node_health import worst_first

    if args.top < 1 or args.gpus < 1 or args.gpus_per_node < 1:
        raise CliError("--top, --gpus and --gpus-per-node must be >= 1")
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise CliError("--alpha must be between 0 and 1, e.g. 0.01")
    wh = rebuilt_scope(args, "nodes")
    health = wh.read("node_health")
    if health.height == 0:
        raise CliError("node_health is empty: run `goodput build` (or `goodput demo`) first")
    if args.alpha is not None:  # the stored counts, flagged at another level
        health = worst_first(score(health, args.alpha))
    s = summary(health)
    gain = lemon_gain(
        health,
        args.gpus,
        args.gpus_per_node,
        parse_duration(args.ckpt_cost),
        parse_duration(args.restart),
        rates=fleet_rates(wh, args.gpus_per_node),
    )
    worst = health.head(args.top)
    value = {"summary": s, "gain": gain, "nodes": worst.to_dicts()}
    if print_data(output_format(args), value, worst, wh):
        return 0
    for line in _summary_lines(s):
        print(line)
    print_rows(
        [_HEADS] + [tuple(_cell(r[c]) for c in _COLUMNS) for r in worst.iter_rows(named=True)]
    )
    if gain is not None:
        print(_gain_line(gain))
    return 0


# the node_health columns the table shows, and their headings
_COLUMNS = (
    "host",
    "failures",
    "expected_failures",
    "rate_ratio",
    "interruptions",
    "lost_gpu_hours",
    "hw_events",
    "repairs",
    "node_hours",
    "p_value",
    "p_adjusted",
    "lemon",
    "slow_episodes",
    "slow_gpu_hours",
    "slow_p_adjusted",
    "slow_lemon",
)
_HEADS = (
    "host",
    "failures",
    "expected",
    "ratio",
    "interrupts",
    "lost_gpu_h",
    "hw_events",
    "repairs",
    "node_h",
    "p",
    "p_adj",
    "lemon",
    "slowed",
    "slow_gpu_h",
    "slow_p_adj",
    "slows",
)


def _summary_lines(s: dict) -> list[str]:
    """The lines above the table: nodes, lemons, the test and the fleet's rate."""
    lines = [
        (
            f"nodes: {s['nodes']:,}, tested: {s['tested']:,}, lemons: {s['lemons']:,}, slowing "
            f"jobs more than the fleet: {s['slow_lemons']:,} (adjusted p < {s['alpha']:g})"
        )
    ]
    if s["untested"]:
        lines.append(f"{s['untested']:,} node(s) not tested (no observed node-hours)")
    if s["test"]:
        rate = s["fleet_rate_per_node_hour"] or 0.0
        lines.append(f"test: {s['test']}")
        lines.append(
            f"fleet: {s['failures']:,} failures in {s['node_hours']:,.0f} node-hours "
            f"({rate * 1000:.3g} per 1,000 node-hours)"
        )
    return lines


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return (
        f"{v:,.0f}"
        if isinstance(v, float) and abs(v) >= 100
        else f"{v:.3g}"
        if isinstance(v, float)
        else str(v)
    )


def _gain_line(gain: dict) -> str:
    """The job's MTTI and goodput at the fleet's rate, and without the lemon nodes."""
    from analysis.numbers import change
    from analysis.numbers import mean_time
    from analysis.numbers import pct

    b, w = gain["baseline"], gain["without_lemons"]
    line = (
        f"job on {gain['target_gpus']:,} GPUs at the fleet's {gain['basis']}: MTTI "
        f"{mean_time(b['mtti_hours'])}, goodput {pct(b['goodput'])}"
    )
    if gain["lemons"] and w is None:
        line += "; without the lemon node(s) no failure is left to refit a rate from"
    elif gain["lemons"]:
        line += (
            f"; rate refitted without the {gain['lemons']} lemon node(s): MTTI "
            f"{mean_time(w['mtti_hours'])}, goodput {pct(w['goodput'])} "
            f"({change(w['goodput'], b['goodput'], 'points')})"
        )
    return line + ("" if gain["lemons"] else "; no lemon node to remove")


def add_nodes(sub) -> None:
    from analysis.assumptions import LEMON_ALPHA

    command(
        sub,
        cmd_nodes,
        option(
            "--top",
            type=int,
            default=20,
            help="how many nodes to list, worst first (default %(default)s)",
        ),
        gpus("job size the goodput gain of removing lemons is projected at"),
        gpus_per_node("GPUs per node of that job (default {})"),
        ckpt_cost("checkpoint cost (blocking) of that job, e.g. 60s"),
        restart(),
        option(
            "--alpha",
            type=float,
            help=f"level of the lemon flag on the adjusted p value (default {LEMON_ALPHA:g})",
        ),
        formats=True,
        scope=True,
        examples=("goodput nodes --top 10", "goodput nodes --alpha 0.01 --json"),
        help="lemon nodes: the nodes that fail most, with their numbers and the test",
    )
