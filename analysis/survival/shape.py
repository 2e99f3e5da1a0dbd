"""The age reading of a class: its Weibull shape tested against 1 (Holm across the classes of a
window) and read as infant mortality, wear-out or "the data cannot tell".

The ``shape`` columns on every candidate row of ``failure_rates`` hold the *Weibull* shape of
that class/stratum/window (the age trend: the parameter the Weibull declares as its
``age_trend_parameter``, ``lifetime_models.age_trend_model``) and ``shape_p_adjusted`` the
test of shape = 1, Holm-adjusted across the window's classes. ``shape_reading`` is on the
Weibull row only (no reading on models without that shape): infant mortality (shape < 1) or
wear-out (> 1) only where the adjusted p < ``SHAPE_ALPHA``, else "the data cannot tell".
Unmodelled heterogeneity between units biases a pooled shape down, so a "cannot tell" is no
evidence of a constant hazard.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from analysis.lifetime_models import age_trend_model
from analysis.lifetime_models.base import Z95
from analysis.survival.common import holm

SHAPE_ALPHA = 0.05  # family-wise error of the shape directions across classes (Holm)

INFANT_MORTALITY = "decreasing hazard: infant mortality"
WEAR_OUT = "increasing hazard: wear-out"
CANNOT_TELL = "the data cannot tell (shape CI covers 1)"


def shape_reading(
    ci_low: float | None, ci_high: float | None, p_adjusted: float | None = None
) -> str | None:
    """Plain reading of a Weibull shape CI (what leadership reads next to the rate): a
    direction only where the CI excludes 1 and, given ``p_adjusted`` (the test of shape = 1
    Holm-adjusted across classes, ``shape_p_adjusted``), that p is under ``SHAPE_ALPHA``;
    otherwise the data cannot tell."""
    if ci_low is None or ci_high is None or not np.isfinite(ci_low) or not np.isfinite(ci_high):
        return None
    if p_adjusted is not None and not p_adjusted < SHAPE_ALPHA:
        return CANNOT_TELL
    if ci_high < 1.0:
        return INFANT_MORTALITY
    if ci_low > 1.0:
        return WEAR_OUT
    return CANNOT_TELL


def age_reading(row: dict) -> str | None:
    """The class's age reading from any ``failure_rates`` row: its Weibull shape CI and the
    Holm-adjusted test (every row of a class carries them; ``shape_reading`` itself is only on
    the Weibull row, the one model here whose shape it is)."""
    return shape_reading(
        row.get("shape_ci_low"), row.get("shape_ci_high"), row.get("shape_p_adjusted")
    )


def age_shape(row: dict) -> float:
    """The Weibull shape a projection may age a class with: the row's ``shape`` where the
    class's age reading names a direction (infant mortality / wear-out), else 1."""
    k = row.get("shape")
    if age_reading(row) in (INFANT_MORTALITY, WEAR_OUT) and k is not None and k > 0:
        return float(k)
    return 1.0


def shape_tests(rows: pl.DataFrame) -> pl.DataFrame:
    """``shape_p_adjusted`` on every row: the Wald test of Weibull shape = 1 on the log scale
    (its CI is exp(log k ± 1.96 se)), Holm-adjusted across the classes and strata of a window;
    ``shape_reading`` on the Weibull rows only, a direction only where that p < SHAPE_ALPHA."""
    groups = ["component_class", "stratum", "window"]
    g = (
        rows.filter(pl.col("shape_ci_low") > 0)
        .group_by(groups, maintain_order=True)
        .agg(
            pl.col("shape").first(), pl.col("shape_ci_low").first(), pl.col("shape_ci_high").first()
        )
    )
    if g.height == 0:
        return rows.with_columns(
            shape_p_adjusted=pl.lit(None, pl.Float64), shape_reading=pl.lit(None, pl.Utf8)
        )
    se = np.log(g["shape_ci_high"].to_numpy() / g["shape_ci_low"].to_numpy()) / (2 * Z95)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.abs(np.log(g["shape"].to_numpy()) / se)
    p = np.array([math.erfc(x / math.sqrt(2.0)) if np.isfinite(x) else 1.0 for x in z])
    g = g.with_columns(_p=pl.Series(p)).with_columns(
        shape_p_adjusted=pl.col("_p")
        .map_batches(lambda x: pl.Series(holm(x.to_numpy())))
        .over("window")
    )
    out = rows.drop("shape_p_adjusted", strict=False).join(
        g.select(*groups, "shape_p_adjusted"), on=groups, how="left"
    )
    cols = out.select("model", "shape_ci_low", "shape_ci_high", "shape_p_adjusted")
    trend = age_trend_model().name  # the reading goes on the rows of the model whose shape it is
    reading = [
        shape_reading(lo, hi, pa) if m == trend else None for m, lo, hi, pa in cols.iter_rows()
    ]
    return out.with_columns(shape_reading=pl.Series(reading, dtype=pl.Utf8))
