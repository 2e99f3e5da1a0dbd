"""The options several commands share, declared once: where the warehouse is, the observation
window, ``--format``, the scope flags, the job shape (GPUs, checkpoint cost, restart), and
``command``, which registers a command's sub-parser with its examples."""

from __future__ import annotations

import argparse
import os

SETTLE = os.environ.get("GOODPUT_SETTLE", "2s")  # ingest --settle and the landing sensor

_HOME_HELP = "warehouse directory (default $GOODPUT_HOME or ./goodput_home)"
_URI_HELP = (
    "Parquet root: a directory or s3://bucket/prefix (default $GOODPUT_WAREHOUSE_URI "
    "or HOME/parquet)"
)
_WAIT_HELP = (
    "when another process is writing the warehouse: wait at most this long (e.g. 0, "
    "30s, 10m; default: as long as it takes)"
)
_NO_WAIT_HELP = "fail at once if another process is writing"
_COST_HELP = (
    "$ per GPU-hour: the report's first screen prices the lost GPU-hours (default: no cost shown)"
)


def add_home_options(parser: argparse.ArgumentParser, **default) -> None:
    """``--home``, ``--warehouse-uri``, ``--wait`` and ``--no-wait``: on ``goodput`` itself, and
    (``default=argparse.SUPPRESS``, so they do not override the ones given before the command)
    on every command."""
    parser.add_argument("--home", help=_HOME_HELP, **default)
    parser.add_argument("--warehouse-uri", help=_URI_HELP, **default)
    parser.add_argument("--wait", help=_WAIT_HELP, **default)
    parser.add_argument(
        "--no-wait", dest="wait", action="store_const", const="0", help=_NO_WAIT_HELP, **default
    )


def common() -> argparse.ArgumentParser:
    """The parent of every command that opens the warehouse."""
    parent = argparse.ArgumentParser(add_help=False)
    add_home_options(parent, default=argparse.SUPPRESS)
    return parent


def window() -> argparse.ArgumentParser:
    """The parent of the commands that fit: the observation window, GPUs per host."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--observed-from",
        help="start of the observation window (ISO-8601; default: inferred from the data's span)",
    )
    parent.add_argument(
        "--observed-to",
        "--as-of",
        dest="observed_to",
        help=(
            "end of the observation window: units still in service are censored here (ISO-8601; "
            "default: inferred)"
        ),
    )
    add_gpus_per_node(parent, "GPUs per host where the data does not show them (default {})")
    return parent


OUTPUT_FORMATS = ("table", "csv", "json")


def formats() -> argparse.ArgumentParser:
    """The parent of the reading commands: ``--format table|csv|json`` and ``--json``."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table (default), csv (raw values) or json (one object with its rows)",
    )
    parent.add_argument("--json", action="store_true", help="the same as --format json")
    return parent


def command(sub, name: str, parents=(), examples: tuple[str, ...] = (), **kwargs):
    """A command's sub-parser; its help ends with ``examples`` (each one parsed by
    tests/test_cli_habits.py)."""
    if examples:
        kwargs["epilog"] = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, parents=list(parents), **kwargs)


def add_gpus(parser: argparse.ArgumentParser, help: str = "GPUs the job spans (default {:,})"):
    from analysis.assumptions import TARGET_GPUS

    parser.add_argument("--gpus", type=int, default=TARGET_GPUS, help=help.format(TARGET_GPUS))


def add_gpus_per_node(parser: argparse.ArgumentParser, help: str = "GPUs per node (default {})"):
    from analysis.assumptions import GPUS_PER_NODE

    parser.add_argument(
        "--gpus-per-node", type=int, default=GPUS_PER_NODE, help=help.format(GPUS_PER_NODE)
    )


def add_ckpt_cost(parser: argparse.ArgumentParser, help: str) -> None:
    from analysis.assumptions import CKPT_COST_S

    parser.add_argument("--ckpt-cost", default=f"{CKPT_COST_S:g}s", help=help)


def add_restart(
    parser: argparse.ArgumentParser, help: str = "restart time after a failure, e.g. 10m"
) -> None:
    from analysis.assumptions import RESTART_S

    parser.add_argument("--restart", default=f"{RESTART_S:g}s", help=help)


def add_gpu_hour_cost(parser: argparse.ArgumentParser) -> None:
    from analysis.assumptions import GPU_HOUR_COST

    parser.add_argument(
        "--gpu-hour-cost", type=float, default=GPU_HOUR_COST, metavar="USD", help=_COST_HELP
    )


def add_scope_options(parser: argparse.ArgumentParser) -> None:
    """The scope flags (analysis/scope.py), the same on every command that takes them."""
    g = parser.add_argument_group(
        "scope",
        "analyse a slice of the fleet (default: the whole fleet); the slice's results are kept in "
        "HOME/scopes/<slug>/ and reused while the data is unchanged",
    )
    g.add_argument(
        "--from",
        dest="scope_from",
        metavar="ISO",
        help=(
            "start (inclusive, ISO-8601 UTC): job attempts overlapping [from, to) kept whole; "
            "events, telemetry and the observation window cut to it"
        ),
    )
    g.add_argument("--to", dest="scope_to", metavar="ISO", help="end (exclusive, ISO-8601 UTC)")
    g.add_argument(
        "--cluster",
        dest="scope_cluster",
        metavar="NAME",
        help="jobs of this cluster, hardware of its hosts",
    )
    g.add_argument(
        "--partition",
        dest="scope_partition",
        metavar="NAME",
        help="jobs of this partition, hardware of the hosts that ran them in the window",
    )
    g.add_argument(
        "--account",
        dest="scope_account",
        metavar="NAME",
        help="jobs of this account, hardware of the hosts that ran them in the window",
    )
