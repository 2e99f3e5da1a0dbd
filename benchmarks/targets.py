"""The verdict lines every benchmark prints: ``TARGET PASS|FAIL: <what> (<measured>)``, and
the exit status that says whether all its targets were met (``run_all`` collects both)."""

from __future__ import annotations

_missed: list[str] = []


def target(name: str, met: bool, measured: str) -> None:
    print(f"TARGET {'PASS' if met else 'FAIL'}: {name} ({measured})", flush=True)
    if not met:
        _missed.append(name)


def status() -> int:
    return 1 if _missed else 0
