"""Cox proportional hazards per class (``hazard_ratios``): left-truncated via ``entry_col``
(unpenalized unless stated), the Schoenfeld-residual PH test with delayed entry, covariate
units and reference levels, and Holm-adjusted p-values over the covariates of the table.

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
  model: the exposures, declared before looking at the data); 'association' for the
  consequences of load (``ASSOCIATIONS``: power, utilisation), which go with the hazard
  through the work a unit does and are never read as a cause.
* What each row estimates: an exposure is adjusted for every other covariate, the load
  included (load drives temperature: unadjusted, a temperature effect would be diluted by the
  load's share of it). An association is never adjusted for the covariates it is collinear
  with (``COLLINEAR_CORR``): given the temperature, which load raises, more power means a
  cooler slot, so power's adjusted coefficient is the temperature effect again with its sign
  turned (on simulated fleets where power follows utilisation alone it read as protective,
  adjusted p down to 4e-6): a coefficient of an adjustment variable is not a finding. Its row
  comes from the class's model without those covariates (named in ``left_out``): the
  association a reader can use, "units drawing more power fail more often".
* Tests: one per covariate, the family a claim is about: a continuous covariate's Wald test, a
  categorical's likelihood-ratio test of all its levels at once against the model without it
  (``family_p``). Holm runs over those, every class of the table together; a level of a
  categorical is then tested within its covariate (Holm over its levels) and its
  ``p_adjusted`` is the larger of the two, so a rack is claimed only where the racks differ
  at all. Testing each level in the table-wide family instead would spend the error budget on
  eleven rack contrasts and leave the temperature effect unfound.
* ``clear_effect``: ``p_adjusted`` < ``ALPHA`` *and* the proportional-hazards test passed
  (``ph_ok``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import polars as pl

from analysis.survival.common import clean_lifetimes
from analysis.survival.common import fit_errors
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
EVENTS_PER_LEVEL = 10  # a categorical is tested only with this many of the class's failures per
# level it adds (Peduzzi et al. 1995's ten events per variable): with fewer, its
# likelihood-ratio test rejects a true null far more often than it says (16 racks against
# ib_link's ~17 failures on simulated 64-node fleets: p < 0.01 in 7% of null fleets)
DUPLICATE_CORR = 0.99  # a covariate this correlated with one kept before it measures the same
# thing (GPU power and utilisation): both in one Cox model make neither estimable
COLLINEAR_CORR = 0.5  # an association this correlated (|r| over the class's units) with another
# covariate is measured without it
COX_PENALIZER = 0.0  # the Cox fit is unpenalized ...
COX_FALLBACK_PENALIZER = 0.1  # ... unless it fails to converge; the table says which
P_ADJUST_METHOD = "holm"  # over the covariates of hazard_ratios (all classes), then the levels
# of a categorical within it
ALPHA = 0.05


@dataclass
class Design:
    """Cox design of one class: the frame, covariate names, per name its unit and reference
    level (categoricals), the near-duplicate covariates left out and the categoricals left out
    for too few failures per level."""

    frame: pl.DataFrame
    names: list[str]
    units: dict[str, str]
    reference: dict[str, str | None]
    dropped: list[str]
    sparse: list[str]


def _design(cdf: pl.DataFrame) -> Design:
    """Covariate columns present and non-constant (a near-duplicate of an earlier one left out);
    categoricals as dummies against their first level by name (chosen a priori)."""
    cols: list[pl.Expr] = []
    names: list[str] = []
    units: dict[str, str] = {}
    reference: dict[str, str | None] = {}
    dropped: list[str] = []
    kept: list[np.ndarray] = []
    sparse: list[str] = []
    events = int(cdf["event"].sum())
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
        if events < EVENTS_PER_LEVEL * min(len(levels) - 1, MAX_LEVELS):
            sparse.append(c)
            continue
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
    return Design(frame, names, units, reference, dropped, sparse)


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
        except fit_errors():
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


def _refit(frame: pl.DataFrame, penalizer: float):
    """The Cox model of ``frame`` (duration, event, entry and covariate columns)."""
    from lifelines import CoxPHFitter

    return CoxPHFitter(penalizer=penalizer).fit(
        frame.to_pandas(), "duration", "event", entry_col="entry"
    )


def _family(name: str) -> str:
    """The covariate a design column belongs to (``rack=rack-03`` -> ``rack``)."""
    return name.split("=")[0]


def _family_p(cph, frame: pl.DataFrame, penalizer: float) -> dict[str, float]:
    """Per covariate of the fitted model, the p-value of it as a whole: a single column's Wald
    p, a categorical's likelihood-ratio test (its levels left out, refitted on the same units)."""
    from scipy import stats

    names = list(cph.params_.index)
    out = {}
    for fam in dict.fromkeys(_family(n) for n in names):
        cols = [n for n in names if _family(n) == fam]
        if len(cols) == 1 and fam not in CATEGORICAL:
            out[fam] = float(cph.summary.loc[cols[0], "p"])
            continue
        rest = frame.drop(cols)
        null_ll = _refit(rest, penalizer).log_likelihood_ if rest.width > 3 else _null_ll(rest)
        lr = max(2.0 * (cph.log_likelihood_ - null_ll), 0.0)
        out[fam] = float(stats.chi2.sf(lr, len(cols)))
    return out


def _null_ll(frame: pl.DataFrame) -> float:
    """The Cox partial log-likelihood with no covariate (Breslow ties, delayed entry)."""
    dur = frame["duration"].to_numpy().astype(float)
    ent = frame["entry"].to_numpy().astype(float)
    ev = frame["event"].to_numpy().astype(bool)
    t = np.sort(dur[ev])
    at_risk = np.searchsorted(np.sort(dur), t, side="left")
    entered = np.searchsorted(np.sort(ent), t, side="left")
    n_risk = (len(dur) - at_risk) - (len(ent) - entered)
    return float(-np.sum(np.log(n_risk)))


def _collinear(frame: pl.DataFrame, name: str, names: list[str]) -> list[str]:
    """The other covariates (a categorical as a whole) with a column whose correlation with
    ``name`` over the units exceeds ``COLLINEAR_CORR`` in absolute value."""
    x = frame[name].to_numpy().astype(float)
    out: list[str] = []
    for other in names:
        fam = _family(other)
        if other == name or fam in out:
            continue
        y = frame[other].to_numpy().astype(float)
        if np.std(y) > 0 and abs(np.corrcoef(x, y)[0, 1]) > COLLINEAR_CORR:
            out.append(fam)
    return out


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
    ``kind`` (effect | association), the covariates left out of an association's model, the PH
    test, the covariate's own test (``family_p``) and ``p_adjusted`` (Holm over the covariates,
    then within a categorical's levels: module doc). ``clear_effect``: adjusted p < 0.05 and
    the PH test passed."""
    notes = notes if notes is not None else []
    # in key order: the fits and the PH test's ranks of tied failure times follow the rows'
    # order, which differs between two reads of the same table (DuckDB reads in parallel)
    df = clean_lifetimes(lifetimes).sort(
        "component_class", "unit_id", "host", "slot", "observed_from", "entry", "duration"
    )
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
        if d.sparse:
            notes.append(
                f"cox {cls}: left out {', '.join(d.sparse)} ({int(cdf['event'].sum())} failures, "
                f"fewer than {EVENTS_PER_LEVEL} per level: too few to test)"
            )
        if not d.names:
            notes.append(f"cox {cls}: skipped, no non-constant covariate")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                frames.append(_class_rows(d, cls, cdf.height, notes))
        except fit_errors() as exc:  # convergence / singular matrix: reported, not raised
            notes.append(
                f"cox {cls}: failed ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
            )
            continue
    if not frames:
        return TABLES["hazard_ratios"].empty()
    return conform("hazard_ratios", _adjust(pl.concat(frames)))


def _class_rows(d: Design, cls: str, units: int, notes: list[str]) -> pl.DataFrame:
    """One class's rows: the exposures from the full model, each association from the model
    without the covariates it is collinear with, and every covariate's ``family_p``."""
    cph, frame, penalizer = _fit_cox(d, cls, notes)
    names = list(cph.params_.index)
    family_p = _family_p(cph, frame, penalizer)
    full = (cph, ph_test(cph, frame), ())
    rows = []
    for c in names:
        fit, ph, left_out = full
        if c in ASSOCIATIONS and (left_out := _collinear(frame, c, names)):
            reduced = frame.drop(n for n in names if _family(n) in left_out)
            fit = _refit(reduced, penalizer)
            ph = ph_test(fit, reduced)
        r = fit.summary.loc[c]
        rows.append({
            "component_class": cls, "covariate": c, "unit": d.units[c],
            "reference": d.reference[c], "hr": float(r["exp(coef)"]),
            "ci_low": float(r["exp(coef) lower 95%"]), "ci_high": float(r["exp(coef) upper 95%"]),
            "p": float(r["p"]), "n": units, "ph_test_p": ph[c], "penalizer": float(penalizer),
            "kind": "association" if c in ASSOCIATIONS else "effect",
            "family_p": float(r["p"]) if left_out else family_p[_family(c)],
            "left_out": ", ".join(left_out) or None,
        })  # fmt: skip
    return pl.DataFrame(rows, schema_overrides={"reference": pl.Utf8, "left_out": pl.Utf8})


def _adjust(rows: pl.DataFrame) -> pl.DataFrame:
    """``p_adjusted`` and ``clear_effect`` over the table: Holm over the covariates (one
    ``family_p`` per class and covariate), and for a categorical's levels the larger of its
    covariate's adjusted p and the level's Holm-adjusted p within the covariate."""
    rows = rows.with_columns(
        _family=pl.col("covariate").str.split("=").list.first(),
        _level=pl.col("covariate").str.contains("="),
    )
    fam = rows.unique(["component_class", "_family"], keep="first", maintain_order=True)
    fam = fam.select(
        "component_class", "_family",
        _family_adj=pl.Series(holm(fam["family_p"].fill_null(1.0).to_numpy())),
    )  # fmt: skip
    within = []
    for _, g in rows.with_row_index("_i").group_by(["component_class", "_family"]):
        within.append(g.select("_i", _within=pl.Series(holm(g["p"].fill_null(1.0).to_numpy()))))
    out = (
        rows.with_row_index("_i")
        .join(fam, on=["component_class", "_family"], how="left")
        .join(pl.concat(within), on="_i", how="left")
        .sort("_i")
        .with_columns(
            p_adjusted=pl.when(pl.col("_level"))
            .then(pl.max_horizontal("_family_adj", "_within"))
            .otherwise(pl.col("_family_adj")),
            p_adjust_method=pl.lit(P_ADJUST_METHOD),
            ph_ok=pl.col("ph_test_p") >= PH_ALPHA,
        )
        .with_columns(clear_effect=(pl.col("p_adjusted") < ALPHA) & pl.col("ph_ok"))
    )
    return out.drop("_i", "_family", "_level", "_family_adj", "_within")
