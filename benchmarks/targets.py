"""The verdict lines every benchmark prints: ``TARGET PASS|FAIL: <what> (<measured>)``, and
the exit status that says whether all its targets were met (``run_all`` collects both); and
the two readings of a share measured over simulated fleets the statistical targets use."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

_missed: list[str] = []
LEVEL = 0.05  # the error rate a claim may have on fleets where it is false


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


def options(**defaults) -> argparse.Namespace:
    """A benchmark's command line: one ``--name`` option per keyword (``no_windows`` is
    ``--no-windows``), of its default's type; a False default makes it a flag."""
    ap = argparse.ArgumentParser()
    for name, default in defaults.items():
        flag = "--" + name.replace("_", "-")
        if default is False:
            ap.add_argument(flag, action="store_true")
        else:
            ap.add_argument(flag, type=type(default), default=default, help=f"default {default}")
    return ap.parse_args()


def share_interval(k: int, n: int) -> tuple[float, float]:
    """Exact (Clopper-Pearson) 95% interval of a share k / n."""
    from scipy.stats import beta

    lo = float(beta.ppf(0.025, k, n - k + 1)) if k else 0.0
    hi = float(beta.ppf(0.975, k + 1, n - k)) if k < n else 1.0
    return lo, hi


def at_most_level(k: int, n: int, level: float = LEVEL) -> tuple[bool, str]:
    """Whether ``k`` events in ``n`` fleets are consistent with a rate <= ``level`` (the
    one-sided exact 95% lower bound of the rate is at most the level: a count this high is not
    evidence against it), and the measured share with that bound."""
    from scipy.stats import beta

    lower = float(beta.ppf(0.05, k, n - k + 1)) if k else 0.0
    return lower <= level, f"{k}/{n} = {k / n:.1%}, one-sided 95% lower bound {lower:.1%}"
