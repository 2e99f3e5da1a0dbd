"""The three fit tables (``failure_rates``, ``survival_curves``, ``hazard_ratios``) from
``component_lifetimes`` in one call, and their refresh in a warehouse."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import polars as pl

from analysis.survival.cox import hazard_ratios
from analysis.survival.curves import survival_curves
from analysis.survival.rates import failure_rates
from warehouse.schemas import TABLES


def fit_all(
    lifetimes: pl.DataFrame,
    window: str | None = "month",
    *,
    curves: bool = True,
    cox: bool = True,
    notes: list[str] | None = None,
    seed: int = 0,
    engine: str = "numpy",
) -> dict[str, pl.DataFrame]:
    """``failure_rates``, ``survival_curves``, ``hazard_ratios`` from ``component_lifetimes``.

    ``window='month'`` adds monthly trend rows, ``None`` only the whole-period ones. Skipped
    steps (too few events, no covariates, ...) append a reason to ``notes``.
    """
    # the three parts are independent: run them side by side (their NumPy/SciPy work releases
    # the GIL); each gets its own notes list, joined in a fixed order so output is deterministic.
    # What they import lazily is imported here first: lifelines' autograd walks numpy's
    # namespace while it loads, and a thread's first scipy import changes that namespace
    # (RuntimeError: dictionary changed size during iteration).
    import lifelines  # noqa: F401  (also loads scipy.optimize, which the rates fit with)

    part_notes: list[list[str]] = [[], [], []]
    with ThreadPoolExecutor(max_workers=3) as pool:
        rates = pool.submit(failure_rates, lifetimes, window, part_notes[0], engine)
        curve = pool.submit(survival_curves, lifetimes, part_notes[1]) if curves else None
        haz = pool.submit(hazard_ratios, lifetimes, part_notes[2], seed) if cox else None
        out = {
            "failure_rates": rates.result(),
            "survival_curves": curve.result() if curve else TABLES["survival_curves"].empty(),
            "hazard_ratios": haz.result() if haz else TABLES["hazard_ratios"].empty(),
        }
    if notes is not None:
        notes.extend(n for part in part_notes for n in part)
    return out


def refresh_fits(wh, window: str | None = "month") -> dict:
    """Read ``component_lifetimes``, write the three fit tables; returns a summary dict."""
    notes: list[str] = []
    lifetimes = wh.read("component_lifetimes")
    tables = fit_all(lifetimes, window, notes=notes)
    for name, df in tables.items():
        wh.replace_table(name, df)
    fr = tables["failure_rates"]
    return {
        "units": lifetimes.height,
        "classes": fr["component_class"].n_unique(),
        "failure_rates_rows": fr.height,
        "survival_curve_points": tables["survival_curves"].height,
        "hazard_ratio_rows": tables["hazard_ratios"].height,
        "notes": notes,
    }
