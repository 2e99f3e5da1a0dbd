"""What the analyses' checks share: how many offending rows a failed check names, the tolerance of
two float sums of the same numbers, and the result built from the offending rows."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

EXAMPLES = 3  # offending rows named in a failed check's metadata (and the report's banner)


REL = 1e-9  # two sums of the same floats in another order agree to this (relative)


def violations(
    rows: pl.DataFrame,
    example: Callable[[dict], str],
    alike: tuple[str, ...] = (),
    **measured,
) -> tuple[bool, dict]:
    """(passed, metadata) of a check whose offending rows are ``rows``: how many, the first
    ``EXAMPLES`` in words (``example(row)``), and what else it ``measured``. Rows equal in the
    columns ``alike`` make one example (one job's attempts, the hosts of one instant), whose
    other columns are lists."""
    grouped = rows.group_by(alike, maintain_order=True).agg(pl.all()) if alike else rows
    shown = [example(r) for r in grouped.head(EXAMPLES).iter_rows(named=True)]
    return rows.height == 0, {"violations": rows.height, "examples": shown, **measured}


def some(values: list, most: int = 3) -> str:
    """A few of ``values``, then how many more."""
    more = len(values) - most
    return ", ".join(map(str, values[:most])) + (f" and {more:,} more" if more > 0 else "")
