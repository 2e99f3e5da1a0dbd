"""The ``goodput`` argument parser: one-line errors with did-you-mean, ``--version``, and the
commands' sub-parsers assembled in the order ``goodput --help`` lists them."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pipelines.cli import breakdowns
from pipelines.cli import build
from pipelines.cli import completion
from pipelines.cli import fit
from pipelines.cli import fleetsim
from pipelines.cli import intake
from pipelines.cli import nodes
from pipelines.cli import project
from pipelines.cli import pull
from pipelines.cli import references
from pipelines.cli import reliability
from pipelines.cli import sample
from pipelines.cli import sql
from pipelines.cli import stragglers
from pipelines.cli.completion import COMPLETERS
from pipelines.cli.options import add_home_options
from pipelines.cli.values import parse_count

# every command's sub-parser, in the order `goodput --help` lists them
COMMANDS = (
    sample.add_demo,
    build.add_build,
    sample.add_simulate,
    intake.add_ingest,
    pull.add_pull,
    intake.add_forget,
    fit.add_fit,
    reliability.add_mtbf,
    reliability.add_availability,
    sql.add_sql,
    project.add_project,
    fleetsim.add_fleetsim,
    nodes.add_nodes,
    breakdowns.add_losses,
    breakdowns.add_trend,
    project.add_whatif,
    breakdowns.add_compare,
    references.add_references,
    stragglers.add_stragglers,
    build.add_report,
    completion.add_completion,
)


class _Parser(argparse.ArgumentParser):
    """argparse with every error one line (no usage block: ``--help`` shows it) and, for a
    mistyped command or choice, the closest one."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{_closest_choice(message)}\n")


def _closest_choice(message: str) -> str:
    import difflib

    m = re.search(r"invalid choice: (.+?) \(choose from (.*)\)", message)
    if not m:
        return ""
    close = difflib.get_close_matches(
        m[1].strip("'"), [c.strip(" '") for c in m[2].split(",")], n=1
    )
    return f"; did you mean {close[0]!r}?" if close else ""


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions; keeps text written in lines (the examples) as it is."""

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Version(argparse.Action):
    """``--version``: the package version and, run from a git checkout, its commit."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


REPO = Path(__file__).resolve().parents[2]


def version_line() -> str:
    """``goodput 0.1.0``, with ``(commit abc123def456)`` (``+ changes`` when files differ from
    it) when the code runs from a git checkout and git is installed."""
    import subprocess
    from importlib.metadata import version

    line = f"goodput {version('fleet-goodput')}"
    if not (REPO / ".git").exists():
        return line
    try:
        git = ["git", "-C", str(REPO)]
        sha, dirty = (
            subprocess.run([*git, *cmd], capture_output=True, text=True, timeout=10, check=False)
            for cmd in (
                ["rev-parse", "--short=12", "HEAD"],
                ["status", "--porcelain", "--untracked-files=no"],
            )
        )
    except (OSError, subprocess.TimeoutExpired):
        return line
    if sha.returncode != 0:
        return line
    return f"{line} (commit {sha.stdout.strip()}{' + changes' if dirty.stdout.strip() else ''})"


def _finish(parser: argparse.ArgumentParser) -> None:
    """What every command gets alike: integer options read counts (``parse_count``), help
    wrapped by ``_HelpFormatter`` (its examples kept in lines), and completion of formats,
    clusters, partitions and accounts (``COMPLETERS``)."""
    for action in parser._actions:
        if action.type is int:
            action.type = parse_count
        if action.dest in COMPLETERS and action.choices is None:
            action.completer = COMPLETERS[action.dest]
        for sub in _subcommands_of(action).values():
            sub.formatter_class = _HelpFormatter
            _finish(sub)


def _subcommands_of(action: argparse.Action) -> dict[str, argparse.ArgumentParser]:
    return dict(action.choices) if isinstance(action, argparse._SubParsersAction) else {}


def unrecognized(parser: argparse.ArgumentParser, args, extra: list[str]) -> str:
    """The error for arguments no option takes, with the closest option of the command."""
    import difflib

    command = _subcommands(parser).get(getattr(args, "command", None))
    known = [o for p in (parser, command) if p for a in p._actions for o in a.option_strings]
    hints = []
    for word in (w.split("=")[0] for w in extra if w.startswith("--")):
        # the options that begin with the same word first (--gpu-count: --gpus, not --account)
        first = word[2:].split("-")[0]
        alike = [
            o for o in known if difflib.get_close_matches(first, [o[2:].split("-")[0]], cutoff=0.75)
        ]
        close = difflib.get_close_matches(word, alike, n=1, cutoff=0) or difflib.get_close_matches(
            word, known, n=1
        )
        if close:
            hints.append(f"{word}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (
        f" ({'; '.join(hints)})" if hints else ""
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for a in parser._actions for name, sub in _subcommands_of(a).items()}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="goodput",
        formatter_class=_HelpFormatter,
        description=(
            "GPU-fleet reliability and goodput: ingest scheduler logs and hardware "
            "telemetry into a Parquet + DuckDB warehouse, fit failure rates, measure and "
            "project goodput."
        ),
    )
    p.add_argument(
        "--version",
        action=_Version,
        help="print the version (and the commit, run from a git checkout)",
    )
    add_home_options(p)
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of the commands below; `goodput COMMAND --help` for its options",
    )
    for add in COMMANDS:
        add(sub)
    _finish(p)
    return p
