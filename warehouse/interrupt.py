"""Ctrl-C, however it surfaces. A SIGINT during a DuckDB query comes back as DuckDB's own
exception (``InterruptException``, or a ``RuntimeError("Query interrupted")``), which an
``except Exception`` that quarantines a parser's failure would take for a bug in the file; and
inside a Dagster run the SIGINT handler is Dagster's. So the signal itself is recorded below
every handler, through ``signal.set_wakeup_fd``: ``pressed()`` says whether one came, no batch
commits after it, and the command ends as interrupted whatever exception carried it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

_WAKEUP = [-1]  # the read end of the pipe the interpreter writes each signal's number to
_PRESSED = [False]


@contextmanager
def watched() -> Iterator[None]:
    """Within it, every SIGINT is recorded for ``pressed()``, whichever Python handler runs. In
    a thread other than the main one (where no wakeup fd can be set) it records nothing."""
    _PRESSED[0] = False
    read, write = os.pipe()
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    try:
        previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read)
        os.close(write)
        yield
        return
    _WAKEUP[0] = read
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        _WAKEUP[0], _PRESSED[0] = -1, False  # outside it, nothing is interrupted
        os.close(read)
        os.close(write)


def pressed() -> bool:
    """Whether Ctrl-C came within the ``watched`` block running now, though what it interrupted
    swallowed it; outside one, False."""
    if not _PRESSED[0] and _WAKEUP[0] >= 0:
        try:
            while got := os.read(_WAKEUP[0], 512):
                _PRESSED[0] = _PRESSED[0] or signal.SIGINT in got
        except BlockingIOError:
            pass
    return _PRESSED[0]


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` stands for Ctrl-C: a KeyboardInterrupt, DuckDB's InterruptException, or
    any exception raised once Ctrl-C was pressed."""
    return (
        isinstance(exc, KeyboardInterrupt)
        or type(exc).__name__ == "InterruptException"
        or pressed()
    )


def stop_if_pressed() -> None:
    """KeyboardInterrupt if Ctrl-C was pressed, though what it interrupted swallowed it."""
    if pressed():
        raise KeyboardInterrupt
