"""A command's failures: the user's mistakes (one line, exit 2), the machine's (disk full, I/O
error: exit 3 or 4), numbers that break an invariant (exit 6), Ctrl-C (exit 130), and the exit
statuses themselves."""

from __future__ import annotations

import sys

from warehouse import interrupt


class CliError(Exception):
    """A user's mistake a command found: one line on stderr, exit status 2."""


def user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that are a user's mistake (one line, exit 2). Imported when an error is
    being handled, so a command that needs neither the ingest runner nor the store starts
    without them."""
    from ingest.files import UserError
    from sources.base import SourceConfigError
    from warehouse.store import WarehouseError

    return CliError, UserError, WarehouseError, SourceConfigError


# exit statuses of an environment error (disk full, I/O error, permission): whether it struck
# before anything was committed, or after some batches were
EXIT_ENV_NOTHING_COMMITTED = 3
EXIT_ENV_PARTLY_COMMITTED = 4
EXIT_REJECTED = 5  # ingest: some file's every record was rejected (the others are stored)
# build: every table and the report written, but an ERROR-severity invariant check failed
EXIT_CHECKS_FAILED = 6
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
_ENV_WORDS = (
    "disk",
    "space",
    "i/o error",
    "file too large",
    "read-only",
    "permission denied",
    "quota",
)


def environment_error(exc: BaseException) -> str | None:
    """One line for an error of the machine, not of the user or the code (disk full, file too
    large, I/O error, permissions), found anywhere in ``exc``'s chain (Dagster and SQLAlchemy
    wrap it); None for anything else."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno is not None:
            where = f": {exc.filename}" if exc.filename else ""
            return f"{exc.strerror or exc}{where}"
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if type(exc).__name__ in ("OperationalError", "IOException") and any(
            w in text.lower() for w in _ENV_WORDS
        ):
            return text
        exc = exc.__cause__ or exc.__context__
    return None


def interrupted() -> int:
    """Ctrl-C: one line, exit status 130. Every batch and table is whole: each commits at once
    or not at all."""
    from warehouse.store import COMMITS

    done = f" ({COMMITS[0]} batch(es) were committed, each whole)" if COMMITS[0] else ""
    print(
        f"goodput: interrupted; nothing is half-written{done}: run the command again to finish",
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED


def committed_so_far() -> str:
    from warehouse.store import COMMITS

    if COMMITS[0]:
        return (
            f"{COMMITS[0]} batch(es) were committed before it, each whole (run the command "
            "again to finish)"
        )
    return "nothing was committed"


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C (``warehouse.interrupt.is_interrupt``), or Dagster's own for a
    run it interrupted."""
    if interrupt.is_interrupt(exc):
        return True
    errors = sys.modules.get("dagster._core.errors")
    return errors is not None and isinstance(exc, errors.DagsterExecutionInterruptedError)
