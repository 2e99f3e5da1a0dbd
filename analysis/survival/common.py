"""What the survival fits share: the usable lifetime rows, their ``Sample`` arrays, the errors a
failed fit raises, Holm's adjustment (every family of claims uses it) and curve thinning."""

from __future__ import annotations

from functools import cache

import numpy as np
import polars as pl

from analysis.lifetime_models.base import Sample
from warehouse.schemas import conform

CURVE_MAX_POINTS = 1_000  # KM / NA / AJ points kept per curve (evenly spaced in event order)


@cache
def fit_errors() -> tuple[type[BaseException], ...]:
    """What a failed fit raises. Called in ``except`` clauses, so lifelines (seconds to import)
    loads only when a fit fails, not with this module (``goodput fit`` only prints the table)."""
    from lifelines.exceptions import ConvergenceError

    return (
        ConvergenceError,
        np.linalg.LinAlgError,
        ValueError,
        ZeroDivisionError,
        FloatingPointError,
        OverflowError,
        KeyError,
    )


def lifetime_sample(df: pl.DataFrame) -> Sample:
    """The arrays a lifetime fit reads: entry, upper and lower bound, event, and whether the
    failure time is only known to an interval (``duration_low`` < ``duration``)."""
    entry = df["entry"].fill_null(0.0).to_numpy().astype(float)
    upper = df["duration"].to_numpy().astype(float)
    event = df["event"].fill_null(False).to_numpy().astype(bool)
    low = (
        df["duration_low"].to_numpy().astype(float)
        if "duration_low" in df.columns
        else np.full(len(upper), np.nan)
    )
    interval = event & np.isfinite(low) & (low < upper)
    lower = np.where(interval, np.maximum(low, entry), upper)
    return Sample(entry, upper, lower, event, interval)


def clean_lifetimes(lifetimes: pl.DataFrame) -> pl.DataFrame:
    """Rows usable for survival: a class, a positive duration, and duration >= entry."""
    df = conform("component_lifetimes", lifetimes)
    return df.filter(
        pl.col("component_class").is_not_null()
        & pl.col("duration").is_not_null()
        & (pl.col("duration") > 0)
        & (pl.col("duration") >= pl.col("entry").fill_null(0.0))
    ).with_columns(pl.col("entry").fill_null(0.0), pl.col("event").fill_null(False))


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over all of ``p``)."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def thin(n: int) -> np.ndarray:
    """Indices of at most ``CURVE_MAX_POINTS`` evenly spread points of an n-point curve."""
    if n <= CURVE_MAX_POINTS:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, CURVE_MAX_POINTS).round().astype(int))
