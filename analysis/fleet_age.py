"""How old a job's units are when it starts, and what that does to its failure count.

A job of horizon T hours carries n_c units of class c. Each failed unit is replaced at once by
a new one (age 0), so every unit *position* is a renewal process of the class's fitted
lifetime model; the first interval is the residual life of the unit that is there at job
start. Expected failures per position over T, with F the model's CDF and M(t) the ordinary
renewal function ``M(t) = F(t) + int_0^t M(t - x) dF(x)``:

* ``stationary`` (default): the class's rate as the fit table gives it, the rate its units
  showed over the observation window at the ages they had, held over the job. For a law run
  at that rate, the unit's age is drawn from the equilibrium age law S(a)/mean and time is
  scaled so the law's long-run rate 1 / mean (the expected count T / mean of an equilibrium
  renewal process) equals it: how the Monte Carlo draws it.
* ``new``: every unit is age 0 at job start: M(T) (a shape < 1 Weibull class fails more
  often early on, a shape > 1 one less).
* ``observed`` / a given age a: the delayed renewal count
  ``M_a(T) = int_0^T (1 + M(T - x)) dF_a(x)`` with ``F_a(x) = 1 - S(a + x) / S(a)``, averaged
  over age groups (``AgeGroups``: the quantiles of the ages observed at the window end).

The analytic projection uses count / T as the class's per-unit-hour rate; the Monte Carlo
(``analysis.montecarlo``) draws the same process unit by unit, so the two agree in
expectation. M is computed on a grid of ``GRID`` steps (second order in the step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.assumptions import DEFAULT_FLEET_AGE
from analysis.assumptions import FLEET_AGES

if TYPE_CHECKING:  # annotations only: the CLI's parser reads FLEET_AGES without loading scipy
    from analysis.lifetime_models import LifetimeModel

GRID = 2000  # steps of the renewal-function grid over the horizon
AGE_GROUPS = 50  # observed ages are summarised by this many quantiles per class


@dataclass(frozen=True)
class AgeGroups:
    """Unit ages (hours) at job start with their shares of the class's units (sum 1)."""

    ages: np.ndarray
    weights: np.ndarray

    @classmethod
    def at(cls, age: float) -> AgeGroups:
        return cls(np.array([float(age)]), np.array([1.0]))

    @classmethod
    def from_ages(cls, ages, groups: int = AGE_GROUPS) -> AgeGroups:
        """Equal-weight quantile midpoints of observed ages (memory does not grow with them)."""
        a = np.asarray(ages, dtype=float)
        a = a[np.isfinite(a) & (a >= 0)]
        if a.size == 0:
            raise ValueError("no ages")
        k = min(groups, a.size)
        q = np.quantile(a, (np.arange(k) + 0.5) / k, method="inverted_cdf")
        return cls(q, np.full(k, 1.0 / k))


def start_groups(start: str | AgeGroups) -> AgeGroups:
    """'new' as one group of age 0; AgeGroups as they are ('stationary' has no groups)."""
    if isinstance(start, AgeGroups):
        return start
    if start == "new":
        return AgeGroups.at(0.0)
    raise ValueError(f"unknown fleet age {start!r}; use one of {', '.join(FLEET_AGES)}")


def _delta_cdf(model: LifetimeModel, age: float, horizon: float) -> np.ndarray:
    """Probability of a first failure in each grid step of [0, T] for a unit of ``age``."""
    x = np.linspace(0.0, horizon, GRID + 1)
    h0 = float(model.cumulative_hazard(np.array([age]))[0])
    with np.errstate(over="ignore", invalid="ignore"):
        cdf = -np.expm1(h0 - model.cumulative_hazard(age + x))
    return np.diff(np.nan_to_num(cdf, nan=1.0))


def renewal_function(model: LifetimeModel, horizon: float) -> np.ndarray:
    """M on the grid 0, T/GRID, ..., T (expected renewals of a unit new at 0)."""
    dF = _delta_cdf(model, 0.0, horizon)
    m = np.zeros(GRID + 1)
    for i in range(1, GRID + 1):
        # sum_j dF_j (1 + (M[i-j] + M[i-j+1]) / 2), the j = 1 term holding M[i] itself
        j = np.arange(2, i + 1)
        rest = np.dot(dF[j - 1], 1.0 + 0.5 * (m[i - j] + m[i - j + 1])) if i > 1 else 0.0
        m[i] = (dF[0] * (1.0 + 0.5 * m[i - 1]) + rest) / (1.0 - 0.5 * dF[0])
    return m


def expected_failures(
    model: LifetimeModel, horizon: float, start: str | AgeGroups = DEFAULT_FLEET_AGE
) -> float:
    """Expected failures of one unit position over ``horizon`` hours (see module doc)."""
    if isinstance(start, str) and start == "stationary":
        return horizon / model.mean()
    groups = start_groups(start)
    m = renewal_function(model, horizon)
    after = 1.0 + 0.5 * (m[::-1][:-1] + m[::-1][1:])  # 1 + M(T - x) at each step's midpoint
    return float(
        sum(w * np.dot(_delta_cdf(model, a, horizon), after)
            for a, w in zip(groups.ages, groups.weights, strict=True))
    )  # fmt: skip


def stationary_residual_cdf(model: LifetimeModel, upto: float, points: int = 20_001):
    """(x, G(x)) with G(x) = int_0^x S / mean: the residual-life CDF of a unit of equilibrium
    age, on a grid of [0, ``upto``] (trapezoid rule; the Monte Carlo inverts it)."""
    x = np.linspace(0.0, upto, points)
    s = model.sf(x)
    g = np.concatenate([[0.0], np.cumsum(0.5 * (s[1:] + s[:-1]) * np.diff(x))]) / model.mean()
    return x, np.minimum(g, 1.0)
