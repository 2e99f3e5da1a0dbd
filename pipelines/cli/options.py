"""How a command is declared, and the options several commands share, each declared once.

``command`` registers a command: its sub-parser with the warehouse options (and, where asked, the
observation window and the output format), its own options in their order, the scope flags last,
its examples and the handler that runs it. An ``Option`` is one argument as data; the shared
ones (the job shape, ``--format``, ``--gpu-hour-cost``) are built here, their defaults read from
``analysis.assumptions``."""

from __future__ import annotations

import argparse
import os
from typing import NamedTuple

SETTLE = os.environ.get("GOODPUT_SETTLE", "2s")  # ingest --settle and the landing sensor


class Option(NamedTuple):
    """One argument of a command: the flags (or the positional's name) and the keywords
    ``ArgumentParser.add_argument`` takes."""

    flags: tuple[str, ...]
    settings: dict

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.flags, **self.settings)


def option(*flags: str, **settings) -> Option:
    return Option(flags, settings)


def choice(flag: str, values, default: str, help: str) -> Option:
    """An option that takes one of ``values``, ``default`` when not given; its help ends with
    the default."""
    return option(flag, choices=list(values), default=default, help=f"{help} (default %(default)s)")


def command(
    sub,
    func,
    *options: Option,
    examples: tuple[str, ...] = (),
    home: bool = True,
    window: bool = False,
    formats: bool = False,
    scope: bool = False,
    **kwargs,
) -> None:
    """Register the command that ``func(args)`` runs, named by it (``cmd_losses``: ``losses``).
    Its options, in the order its help
    lists them: the warehouse's (``home``), the observation window's (``window``), the output
    format's (``formats``), ``options``, then the scope flags (``scope``). Its help ends with
    ``examples`` (each one parsed by tests/test_cli_habits.py); ``kwargs`` (``help``,
    ``description``) go to ``add_parser``."""
    if examples:
        kwargs["epilog"] = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    parents = [
        parent()
        for parent, wanted in ((_home, home), (_window, window), (_formats, formats))
        if wanted
    ]
    parser = sub.add_parser(func.__name__.removeprefix("cmd_"), parents=parents, **kwargs)
    for o in options:
        o.add_to(parser)
    if scope:
        _add_scope_options(parser)
    parser.set_defaults(func=func)


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
    "$ per GPU-hour: the report's first screen prices the lost GPU-hours (default: "
    "gpu_hour_cost of HOME/goodput.toml, else no cost shown)"
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


def _home() -> argparse.ArgumentParser:
    """The parent of every command that opens the warehouse."""
    parent = argparse.ArgumentParser(add_help=False)
    add_home_options(parent, default=argparse.SUPPRESS)
    return parent


def _window() -> argparse.ArgumentParser:
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
    gpus_per_node("GPUs per host where the data does not show them (default {})").add_to(parent)
    return parent


OUTPUT_FORMATS = ("table", "csv", "json")


def output_format(help: str) -> Option:
    """``--format table|csv|json``, table by default."""
    return option("--format", choices=OUTPUT_FORMATS, default="table", help=help)


def _formats() -> argparse.ArgumentParser:
    """The parent of the reading commands: ``--format table|csv|json`` and ``--json``."""
    parent = argparse.ArgumentParser(add_help=False)
    for o in (
        output_format("table (default), csv (raw values) or json (one object with its rows)"),
        option("--json", action="store_true", help="the same as --format json"),
    ):
        o.add_to(parent)
    return parent


def gpus(help: str = "GPUs the job spans (default {:,})") -> Option:
    from analysis.assumptions import TARGET_GPUS

    return option("--gpus", type=int, default=TARGET_GPUS, help=help.format(TARGET_GPUS))


def rates_file() -> Option:
    """``--rates FILE.csv``: published or a site's own class rates in place of the warehouse's
    (no warehouse is needed then)."""
    return option(
        "--rates",
        metavar="FILE.csv",
        help="project from a rates CSV (component_class,events,exposure_hours,unit with unit "
        "gpu|node|job) instead of the warehouse, which then need not exist",
    )


def gpus_per_node(help: str = "GPUs per node (default {})") -> Option:
    from analysis.assumptions import GPUS_PER_NODE

    return option(
        "--gpus-per-node", type=int, default=GPUS_PER_NODE, help=help.format(GPUS_PER_NODE)
    )


def ckpt_cost(help: str) -> Option:
    from analysis.assumptions import CKPT_COST_S

    return option("--ckpt-cost", default=f"{CKPT_COST_S:g}s", help=help)


def restart(help: str = "restart time after a failure, e.g. 10m") -> Option:
    from analysis.assumptions import RESTART_S

    return option("--restart", default=f"{RESTART_S:g}s", help=help)


def gpu_hour_cost() -> Option:
    return option("--gpu-hour-cost", type=float, default=None, metavar="USD", help=_COST_HELP)


def _add_scope_options(parser: argparse.ArgumentParser) -> None:
    """The scope flags (analysis/scope.py), the same on every command that takes them."""
    g = parser.add_argument_group(
        "scope",
        "answer for a slice of the fleet (default: the whole fleet): its rows of the stored "
        "tables; fits, MTBF, availability and node health are recomputed for it and kept in "
        "HOME/scopes/<slug>/ while the data is unchanged",
    )
    g.add_argument(
        "--from",
        dest="scope_from",
        metavar="ISO",
        help=(
            "start (inclusive, ISO-8601 UTC): job attempts overlapping [from, to), "
            "interruptions and job chains ending in it; events and hours cut to it"
        ),
    )
    g.add_argument("--to", dest="scope_to", metavar="ISO", help="end (exclusive, ISO-8601 UTC)")
    g.add_argument(
        "--last",
        dest="scope_last",
        metavar="SPAN",
        help=(
            "a period back from now instead of --from/--to: a duration (30d, 12h) or the last "
            "whole day, week, month, quarter or year"
        ),
    )
    g.add_argument(
        "--cluster",
        dest="scope_cluster",
        metavar="NAME",
        help="jobs of this cluster, hardware of its hosts",
    )
    for dim in ("partition", "account", "user"):
        g.add_argument(
            f"--{dim}",
            dest=f"scope_{dim}",
            metavar="NAME",
            help=f"jobs of this {dim}, hardware of the hosts that ran them in the window",
        )
