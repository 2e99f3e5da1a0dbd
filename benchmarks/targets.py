"""The verdict lines every benchmark prints: ``TARGET PASS|FAIL: <what> (<measured>)``, and
the exit status that says whether all its targets were met (``run_all`` collects both)."""

from __future__ import annotations

import sys
from collections.abc import Callable

_missed: list[str] = []


def target(name: str, met: bool, measured: str) -> None:
    print(f"TARGET {'PASS' if met else 'FAIL'}: {name} ({measured})", flush=True)
    if not met:
        _missed.append(name)


def status() -> int:
    return 1 if _missed else 0


def run_benchmark(main: Callable[[], int | None]) -> None:
    """A benchmark's ``__main__``: run it, then exit with the code it returned (one that could
    not run at all), else non-zero when a target was missed."""
    code = main()
    sys.exit(status() if code is None else code)
