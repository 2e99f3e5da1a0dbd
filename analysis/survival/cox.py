"""Cox proportional hazards per class (``hazard_ratios``): left-truncated via ``entry_col``
(unpenalized unless stated), the Schoenfeld-residual PH test with delayed entry, covariate
units and reference levels, and Holm-adjusted p-values over every row of the table."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.survival.common import _fit_errors, clean_lifetimes, holm
from warehouse.schemas import TABLES, conform

MIN_EVENTS_COX = 10
COX_MAX_UNITS = 5_000  # Cox / PH test on a uniform random subsample above this (lifelines'
# left-truncated Cox costs ~ units x event times)
PH_ALPHA = 0.05
CONTINUOUS = {  # covariate -> the unit its hazard ratio is per
    "temp_mean": "per degC",
    "temp_max": "per degC",
    "power_mean": "per W",
    "util_mean": "per percentage point",
}
CATEGORICAL = ("model", "rack", "batch", "cage", "node_position")  # component_lifetimes columns
MAX_LEVELS = 12  # categorical levels kept (most frequent); the rest pooled as 'other'
DUPLICATE_CORR = 0.99  # a covariate this correlated with one kept before it measures the same
# thing (GPU power and utilisation): both in one Cox model make neither estimable
COX_PENALIZER = 0.0  # the Cox fit is unpenalized ...
COX_FALLBACK_PENALIZER = 0.1  # ... unless it fails to converge; the table says which
P_ADJUST_METHOD = "holm"  # family: every row of hazard_ratios (all classes and covariates)
ALPHA = 0.05


@dataclass
class Design:
    """Cox design of one class: the frame, covariate names, per name its unit and reference
    level (categoricals), and the near-duplicate covariates left out."""

    frame: pl.DataFrame
    names: list[str]
    units: dict[str, str]
    reference: dict[str, str | None]
    dropped: list[str]


def _design(cdf: pl.DataFrame) -> Design:
    """Covariate columns present and non-constant (a near-duplicate of an earlier one left out);
    categoricals as dummies against their most frequent level (ties: the first by name)."""
    cols: list[pl.Expr] = []
    names: list[str] = []
    units: dict[str, str] = {}
    reference: dict[str, str | None] = {}
    dropped: list[str] = []
    kept: list[np.ndarray] = []
    for c, unit in CONTINUOUS.items():
        v = cdf[c]
        if v.null_count() < cdf.height and (v.drop_nulls().std() or 0) > 0:
            x = v.fill_null(v.mean()).to_numpy().astype(float)
            if any(abs(np.corrcoef(x, k)[0, 1]) > DUPLICATE_CORR for k in kept):
                dropped.append(c)
                continue
            kept.append(x)
            cols.append(pl.col(c).fill_null(v.mean()))
            names.append(c)
            units[c], reference[c] = unit, None
    for c in CATEGORICAL:
        counts = cdf[c].drop_nulls().value_counts().sort(["count", c], descending=[True, False])
        if counts.height < 2:
            continue
        levels = counts[c].to_list()
        ref = str(levels[0])
        for lv in levels[1:MAX_LEVELS]:
            name = f"{c}={lv}"
            cols.append((pl.col(c) == lv).fill_null(False).cast(pl.Float64).alias(name))
            names.append(name)
            units[name], reference[name] = f"{lv} vs {ref}", ref
        if len(levels) > MAX_LEVELS:
            name = f"{c}=other"
            cols.append(
                (~pl.col(c).is_in(levels[:MAX_LEVELS]) & pl.col(c).is_not_null())
                .cast(pl.Float64)
                .alias(name)
            )
            names.append(name)
            units[name], reference[name] = f"other {c}s vs {ref}", ref
    frame = cdf.select(pl.col("entry"), pl.col("duration"), pl.col("event").cast(pl.Int8), *cols)
    return Design(frame, names, units, reference, dropped)


def ph_test(cph, design: pl.DataFrame) -> dict[str, float]:
    """Grambsch-Therneau test of proportional hazards per covariate, with delayed entry.

    lifelines' ``proportional_hazard_test`` refuses models fitted with ``entry_col``
    (its Schoenfeld residuals ignore entries), so the residuals are computed here over the
    left-truncated risk sets R(t) = {entry < t <= duration} (Breslow), vectorized with sorted
    cumulative sums, then scaled and tested exactly as lifelines does (rank time transform,
    chi-square 1 df). Agrees with lifelines when every entry is 0 (tested).
    """
    names = list(cph.params_.index)
    X = design.select(names).to_numpy().astype(float)
    X = X - X.mean(axis=0)
    beta = cph.params_.to_numpy()
    w = np.exp(X @ beta)
    dur = design["duration"].to_numpy().astype(float)
    ent = design["entry"].to_numpy().astype(float)
    ev = design["event"].to_numpy().astype(bool)
    wx = np.column_stack([w, w[:, None] * X])

    def tail_sums(key: np.ndarray, t: np.ndarray, strict: bool) -> np.ndarray:
        """Sum of wx over rows with key >= t (or key > t when strict)."""
        order = np.argsort(key)
        cum = np.vstack([np.cumsum(wx[order][::-1], axis=0)[::-1], np.zeros((1, wx.shape[1]))])
        pos = np.searchsorted(key[order], t, side="right" if strict else "left")
        return cum[pos]

    t_ev = dur[ev]
    order = np.argsort(t_ev, kind="stable")
    t_ev = t_ev[order]
    risk = tail_sums(dur, t_ev, strict=False) - tail_sums(ent, t_ev, strict=False)
    xbar = risk[:, 1:] / risk[:, :1]
    resid = X[ev][order] - xbar
    d = len(t_ev)
    scaled = d * resid @ cph.variance_matrix_.to_numpy()
    g = np.arange(1, d + 1, dtype=float)
    g -= g.mean()
    se2 = cph.standard_errors_.to_numpy() ** 2
    T = (g[:, None] * scaled).sum(0) ** 2 / (d * se2 * (g**2).sum())
    from scipy import stats

    return {n: float(stats.chi2.sf(t, 1)) for n, t in zip(names, T)}


def hazard_ratios(
    lifetimes: pl.DataFrame, notes: list[str] | None = None, seed: int = 0
) -> pl.DataFrame:
    """Cox PH per class (left-truncated via ``entry_col``, unpenalized unless the ``penalizer``
    column says otherwise) with, per covariate: its unit (per degC, per W, a level vs the named
    reference level), the PH test, and ``p_adjusted`` (Holm over every row of the table, named
    in ``p_adjust_method``). ``clear_effect``: adjusted p < 0.05 and the PH test passed."""
    from lifelines import CoxPHFitter

    notes = notes if notes is not None else []
    df = clean_lifetimes(lifetimes)
    rng = np.random.default_rng(seed)
    frames = []
    for (cls,), cdf in df.partition_by(
        "component_class", as_dict=True, maintain_order=True
    ).items():
        if cdf.height > COX_MAX_UNITS:
            notes.append(
                f"cox {cls}: fitted on a random subsample of {COX_MAX_UNITS:,} of "
                f"{cdf.height:,} units"
            )
            cdf = cdf[np.sort(rng.choice(cdf.height, COX_MAX_UNITS, replace=False))]
        events = int(cdf["event"].sum())
        if events < MIN_EVENTS_COX:
            notes.append(f"cox {cls}: skipped, {events} events (< {MIN_EVENTS_COX})")
            continue
        d = _design(cdf)
        if d.dropped:
            notes.append(
                f"cox {cls}: left out {', '.join(d.dropped)} (correlation > {DUPLICATE_CORR} "
                "with a covariate kept: the same measurement twice)"
            )
        if not d.names:
            notes.append(f"cox {cls}: skipped, no non-constant covariate")
            continue
        pdf = d.frame.to_pandas()
        penalizer = COX_PENALIZER
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    cph = CoxPHFitter(penalizer=penalizer).fit(
                        pdf, "duration", "event", entry_col="entry"
                    )
                except _fit_errors():  # separation / no convergence: a stated ridge penalty
                    penalizer = COX_FALLBACK_PENALIZER
                    notes.append(
                        f"cox {cls}: unpenalized fit did not converge; penalizer {penalizer}"
                    )
                    cph = CoxPHFitter(penalizer=penalizer).fit(
                        pdf, "duration", "event", entry_col="entry"
                    )
                ph_p = ph_test(cph, d.frame)
        except _fit_errors() as exc:  # convergence / singular matrix: reported, not raised
            notes.append(
                f"cox {cls}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
            )
            continue
        summ = cph.summary
        names = list(summ.index)
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "covariate": names,
                    "unit": [d.units[c] for c in names],
                    "reference": [d.reference[c] for c in names],
                    "hr": summ["exp(coef)"].to_numpy(),
                    "ci_low": summ["exp(coef) lower 95%"].to_numpy(),
                    "ci_high": summ["exp(coef) upper 95%"].to_numpy(),
                    "p": summ["p"].to_numpy(),
                    "n": cdf.height,
                    "ph_test_p": [ph_p[c] for c in names],
                    "penalizer": float(penalizer),
                },
                schema_overrides={"reference": pl.Utf8},
            ).with_columns(ph_ok=pl.col("ph_test_p") >= PH_ALPHA)
        )
    if not frames:
        return TABLES["hazard_ratios"].empty()
    out = pl.concat(frames)
    out = out.with_columns(
        p_adjusted=pl.Series(holm(out["p"].fill_null(1.0).to_numpy())),
        p_adjust_method=pl.lit(P_ADJUST_METHOD),
    ).with_columns(clear_effect=(pl.col("p_adjusted") < ALPHA) & pl.col("ph_ok"))
    return conform("hazard_ratios", out)
