"""``main``: parse the command line, run the command, turn its failures into one line and an
exit status, and remove a home it created if it failed."""

from __future__ import annotations

import os
import sys

from pipelines.cli.errors import EXIT_ENV_NOTHING_COMMITTED
from pipelines.cli.errors import EXIT_ENV_PARTLY_COMMITTED
from pipelines.cli.errors import committed_so_far
from pipelines.cli.errors import environment_error
from pipelines.cli.errors import interrupted
from pipelines.cli.errors import is_interrupt
from pipelines.cli.errors import user_errors
from pipelines.cli.home import fresh_dirs
from pipelines.cli.home import remove_fresh
from pipelines.cli.parser import build_parser
from pipelines.cli.parser import unrecognized
from warehouse.interrupt import pressed
from warehouse.interrupt import watched


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # while starting, or removing what a failed command created
        return interrupted()


def _main(argv: list[str] | None) -> int:
    import warnings

    import argcomplete

    warnings.filterwarnings("ignore", message=r".*is currently in (beta|preview)")
    parser = build_parser()
    argcomplete.autocomplete(
        parser
    )  # answers a shell's completion request (and exits); else nothing
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(unrecognized(parser, args, extra))
    from warehouse.store import COMMITS

    COMMITS[0] = 0  # the batches this command commits (main may run several in one process)
    fresh = fresh_dirs(args)
    code = 1
    try:
        with watched():
            code = _run(args)
            if code == 0 and pressed():  # what Ctrl-C interrupted swallowed it: not finished
                code = interrupted()
    finally:
        if code != 0 and fresh:  # a failed command leaves no home behind that it created
            remove_fresh(args, fresh)
    return code


def _run(args) -> int:
    """The command's exit status; a user's mistake, an environment error or an interrupt as one
    line on stderr."""
    from warehouse.store import COMMITS

    try:
        return args.func(args) or 0
    except BrokenPipeError:  # `goodput sql ... | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would raise again
        return 0
    except Exception as exc:
        if is_interrupt(exc):  # DuckDB's forms of Ctrl-C during a query, or any after it
            return interrupted()
        if isinstance(exc, user_errors()):
            print(f"goodput: error: {exc}", file=sys.stderr)
            return 2
        reason = environment_error(exc)
        if reason is None:
            raise
        print(f"goodput: error: {reason}; {committed_so_far()}", file=sys.stderr)
        return EXIT_ENV_PARTLY_COMMITTED if COMMITS[0] else EXIT_ENV_NOTHING_COMMITTED
    except BaseException as exc:  # Ctrl-C, also as Dagster raises it inside a run
        if not is_interrupt(exc):
            raise
        return interrupted()
