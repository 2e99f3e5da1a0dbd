"""Cox proportional hazards per class (``hazard_ratios``): left-truncated via ``entry_col``
(unpenalized unless stated), the Schoenfeld-residual PH test with delayed entry, covariate
units and reference levels, and Holm-adjusted p-values over every row of the table.

Covariates that do not invent effects:

* Telemetry covariates are exposure-matched: ``component_lifetimes`` measures them over the
  same fixed window of every unit, its first ``COVARIATE_DAYS`` days observed
  (``analysis.lifetime_covariates``), and the Cox model starts each unit at the end of that
  window (a landmark: entry moved to it; units not observed that long, and failures inside
  the window, are left out and counted in the notes). A covariate summarised over each unit's own
  follow-up (its maximum temperature, say) grows with the follow-up, which a failure cuts
  short, and would read as an effect the units do not have; measured before the unit is at
  risk, it cannot see the failure coming either.
* Reference levels are chosen before looking at the outcome: the first level by name (the
  oldest batch, ``rack-01``), never the level with the most rows or failures.
* ``kind``: 'effect' for a covariate that can act on the unit (temperature, location, batch,
  model); 'association' for the consequences of load (``ASSOCIATIONS``: power, utilisation),
  which go with the hazard through the work a unit does and are never read as a cause.
* ``clear_effect``: Holm-adjusted p (over every row of the table) < ``ALPHA`` *and* the
  proportional-hazards test passed (``ph_ok``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.survival.common import _fit_errors
from analysis.survival.common import clean_lifetimes
from analysis.survival.common import holm
from warehouse.schemas import TABLES
from warehouse.schemas import conform

MIN_EVENTS_COX = 10
COX_MAX_UNITS = 5_000  # Cox / PH test on a uniform random subsample above this (lifelines'
# left-truncated Cox costs ~ units x event times)
PH_ALPHA = 0.05
COVARIATE_DAYS = 7  # telemetry covariates: each unit's first days observed; the Cox landmark
CONTINUOUS = {  # telemetry covariate (over COVARIATE_DAYS) -> the unit its hazard ratio is per
    "temp_mean": "per degC",
    "power_mean": "per W",
    "util_mean": "per percentage point",
}
ASSOCIATIONS = ("power_mean", "util_mean")  # consequences of load: associations, not causes
CATEGORICAL = ("model", "rack", "batch", "cage", "node_position")  # component_lifetimes columns
MAX_LEVELS = 12  # levels kept: the reference (first by name) and the most frequent others;
# the rest pooled as 'other'
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
    categoricals as dummies against their first level by name (chosen a priori)."""
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
        first = counts[c].sort()[0]
        ref = str(first)
        levels = [first, *(lv for lv in counts[c].to_list() if lv != first)]
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


def _landmark(cdf: pl.DataFrame, cls: str, notes: list[str]) -> pl.DataFrame:
    """With a telemetry covariate in the data, the units still at risk at the end of their
    covariate window (``COVARIATE_DAYS`` after the start of their observation), entering there;
    without one, ``cdf`` unchanged."""
    if not any(cdf[c].null_count() < cdf.height for c in CONTINUOUS if c in cdf.columns):
        return cdf
    start = pl.col("entry") + COVARIATE_DAYS * 24.0
    kept = cdf.filter(pl.col("duration") > start).with_columns(entry=start)
    gone = cdf.height - kept.height
    if gone:
        lost = int(cdf["event"].sum()) - int(kept["event"].sum())
        notes.append(
            f"cox {cls}: {gone:,} units observed under {COVARIATE_DAYS} days (the telemetry "
            f"covariate window) left out, {lost:,} of them failed in it"
        )
    return kept


def _fit_cox(d: Design, cls: str, notes: list[str]):
    """(fitted CoxPHFitter, its design frame, penalizer). Unpenalized; when that does not
    converge (a level with no failure, or a batch that is only an age band on the age time
    scale), the categorical covariates are left out one family at a time (the last of
    ``CATEGORICAL`` first) until it does, each named in the notes; only when none converges,
    the ridge ``COX_FALLBACK_PENALIZER`` on the full design."""
    from lifelines import CoxPHFitter

    families = [c for c in reversed(CATEGORICAL) if any(n.startswith(f"{c}=") for n in d.names)]
    frame, left_out = d.frame, []
    while True:
        try:
            fit = CoxPHFitter(penalizer=COX_PENALIZER).fit(
                frame.to_pandas(), "duration", "event", entry_col="entry"
            )
        except _fit_errors():
            if not families:
                break
            left_out.append(families.pop(0))
            frame = d.frame.drop(n for n in d.names if n.split("=")[0] in left_out)
            if frame.width <= 3:
                break
            continue
        if left_out:
            notes.append(
                f"cox {cls}: unpenalized fit did not converge with {', '.join(left_out)}; "
                "fitted without"
            )
        return fit, frame, COX_PENALIZER
    notes.append(f"cox {cls}: unpenalized fit did not converge; penalizer {COX_FALLBACK_PENALIZER}")
    fit = CoxPHFitter(penalizer=COX_FALLBACK_PENALIZER).fit(
        d.frame.to_pandas(), "duration", "event", entry_col="entry"
    )
    return fit, d.frame, COX_FALLBACK_PENALIZER


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
    """Cox PH per class (left-truncated via ``entry_col``, landmarked at the end of the
    telemetry covariate window, unpenalized unless the ``penalizer`` column says otherwise)
    with, per covariate: its unit (per degC, per W, a level vs the named reference level), its
    ``kind`` (effect | association), the PH test, and ``p_adjusted`` (Holm over every row of the
    table, named in ``p_adjust_method``). ``clear_effect``: adjusted p < 0.05 and the PH test
    passed."""
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
        cdf = _landmark(cdf, cls, notes)
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
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cph, frame, penalizer = _fit_cox(d, cls, notes)
                ph_p = ph_test(cph, frame)
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
                    "kind": ["association" if c in ASSOCIATIONS else "effect" for c in names],
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
