"""Per-component failure rates from ``component_lifetimes``: the product's core number.

What is computed, per component class (stratum 'all', plus one stratum per model / SKU when a
class has several), and why each number is defined the way it is:

* Observed rate per 1,000 unit-days (the exponential row):
  ``events / exposure * 24_000`` where exposure = total at-risk unit-hours
  ``sum(duration - entry)`` (left truncation: a unit is at risk only from ``entry``).  It is
  model-free, it is the exact MLE of the exponential model, and its 95% CI is the exact Poisson
  (Garwood, chi-square) interval.  MTBF = exposure / events, CI = reciprocal of the rate CI.
* Parametric candidates: every model registered in ``analysis/lifetime_models/`` (exponential,
  Weibull, lognormal, log-logistic, Gompertz; one module each, the likelihood written once in
  its ``base``), fitted with left truncation and right censoring, and with interval censoring
  when ``duration_low`` is set.  ``params`` (JSON) holds every parameter with its 95% CI.
  Each row's rate and MTBF are its own model's long-run (stationary fleet) values, 1 / mean
  and the mean, with the observed rate's relative CI; ``rate_extrapolated`` marks a mean
  beyond the oldest unit age observed; ``aic_weight`` is the Akaike weight.
* ``selected`` (what every summary, the fit table and the projection quote): the exponential,
  i.e. the observed rate, unless another model is clearly better: AIC lower by more than
  ``CLEAR_AIC`` (10) *and* a mean lifetime within the observed ages. With months of data on
  units years old, a model's mean is an extrapolation and a narrow AIC win by a lognormal
  would project a rate the data do not show (``_own_rates``).
* The ``shape`` columns on every candidate row hold the *Weibull* shape of that
  class/stratum/window (the age trend) and ``shape_p_adjusted`` the test of shape = 1,
  Holm-adjusted across the window's classes. ``shape_reading`` is on the Weibull row only (no
  reading on models without that shape): infant mortality (shape < 1) or wear-out (> 1) only
  where the adjusted p < ``SHAPE_ALPHA``, else "the data cannot tell". Unmodelled
  heterogeneity between units biases a pooled shape down, so a "cannot tell" is no evidence of
  a constant hazard.
* Fitting path (``method`` column):
  - 'exposure-table': a model's closed-form MLE (the exponential from sufficient statistics,
    events and exposure) when no row is interval-censored.
  - 'per-unit': the left-truncated, right- / interval-censored log-likelihood maximised over
    every unit with NumPy/SciPy (analytic gradient, O(n) vectorized); tested to agree with
    lifelines' fitters (lifelines costs ~15 us per unit per model plus ~0.1 s per fit, too slow
    for hundreds of class/stratum/window fits).
  - 'per-unit-lifelines': lifelines' ``fit(..., entry=)`` / ``fit_interval_censoring`` itself
    (``engine='lifelines'``, or ``'auto'`` up to ``LIFELINES_MAX_UNITS`` units).
  - 'subsample-N': the candidates without sufficient statistics on a uniform random N units when the stratum
    is larger (``PARAMETRIC_MAX_UNITS``, ``WINDOW_MAX_UNITS`` for monthly windows); the rate stays
    on all units and AIC compares all candidates on that same subsample.
* Monthly windows: each unit's observation [observed_from, observed_to) is split at month
  boundaries; exposure and events per month give the rate with a Poisson CI, and parametric fits
  are run only in windows with at least ``MIN_EVENTS_WINDOW_FIT`` events (ages inside the window
  are left-truncated at the window start and censored at its end). No window is shorter than a
  day (a month observed less is folded into its neighbour); ``period_start`` / ``period_end``
  give the span a row covers, ``partial`` marks a month observed only in part, ``low_exposure``
  one with under ``LOW_EXPOSURE_FRACTION`` of the class's median monthly exposure. A change
  between two windows is judged by ``rate_change_test`` (exact), never by CI overlap.
* Kaplan-Meier and Nelson-Aalen (lifelines, with ``entry``) and Aalen-Johansen cumulative
  incidence of the first failure on a node by cause go to ``survival_curves``, each point
  flagged ``small_risk_set`` under ``MIN_AT_RISK`` (10) units at risk, with null CI bounds where
  the interval is undefined (never a zero-width CI); Cox PH with
  ``entry_col`` (unpenalized unless stated), the Schoenfeld-residual PH test, covariate units
  and Holm-adjusted p-values go to ``hazard_ratios``.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.headline import MONTHLY
from analysis.headline import selected_rates as selected
from analysis.lifetime_models.base import Z95, Sample
from analysis.lifetime_models.exponential import poisson_rate_ci
from warehouse.schemas import TABLES, conform

__all__ = ["Sample", "poisson_rate_ci"]  # re-exported: callers import them from here

HOURS_PER_1K_DAYS = 24_000.0
MODELS = lifetime_models.names()  # every registered model (analysis/lifetime_models/)
SHAPE_MODEL = "weibull"  # the ``shape`` columns of every row: this model's shape (age trend)
LIFELINES_MAX_UNITS = 20_000  # engine='auto': lifelines up to here (~15 us/unit/model)
PARAMETRIC_MAX_UNITS = 25_000  # larger strata: Weibull/LogNormal/LogLogistic on a random subsample
WINDOW_MAX_UNITS = 5_000  # the (many) monthly-window fits; the window rate itself uses every unit
MIN_EVENTS_PARAMETRIC = 5  # fewer events: exposure-table exponential only
MIN_EVENTS_WINDOW_FIT = 20  # per-month parametric fits only with this many events
MIN_EVENTS_COX = 10
COX_MAX_UNITS = 5_000  # Cox / PH test on a uniform random subsample above this (lifelines'
# left-truncated Cox costs ~ units x event times)
AJ_MAX_NODES = 250_000  # Aalen-Johansen on a random node subsample above this
CURVE_MAX_POINTS = 1_000  # KM / NA / AJ points kept per curve (evenly spaced in event order)
MIN_AT_RISK = 10  # curve points with fewer units at risk are flagged ``small_risk_set``
PH_ALPHA = 0.05
SHAPE_ALPHA = 0.05  # family-wise error of the shape directions across classes (Holm)
CLEAR_AIC = 10.0  # a model other than the exponential is selected only with an AIC this much lower
# (and a mean lifetime within the observed ages): see ``_own_rates``
_RATE_COLUMNS = (
    "rate_per_1k_unit_days", "rate_ci_low", "rate_ci_high",
    "mtbf_hours", "mtbf_ci_low", "mtbf_ci_high",
)  # fmt: skip


@cache
def _fit_errors() -> tuple[type[BaseException], ...]:
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


# ----------------------------------------------------------------------------- plain readings
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


def _shape_tests(rows: pl.DataFrame) -> pl.DataFrame:
    """``shape_p_adjusted`` on every row: the Wald test of Weibull shape = 1 on the log scale
    (its CI is exp(log k ± 1.96 se)), Holm-adjusted across the classes and strata of a window;
    ``shape_reading`` on the Weibull rows only, a direction only where that p < SHAPE_ALPHA."""
    groups = ["component_class", "stratum", "window"]
    g = rows.filter(pl.col("shape_ci_low") > 0).group_by(groups, maintain_order=True).agg(
        pl.col("shape").first(), pl.col("shape_ci_low").first(), pl.col("shape_ci_high").first()
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
    reading = [
        shape_reading(lo, hi, pa) if m == SHAPE_MODEL else None
        for m, lo, hi, pa in cols.iter_rows()
    ]
    return out.with_columns(shape_reading=pl.Series(reading, dtype=pl.Utf8))


def _rate_columns(events, exposure) -> dict[str, np.ndarray]:
    rate, low, high = poisson_rate_ci(events, exposure)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = lambda x: np.where(x > 0, 1.0 / x, np.nan)
        return {
            "rate_per_1k_unit_days": rate * HOURS_PER_1K_DAYS,
            "rate_ci_low": low * HOURS_PER_1K_DAYS,
            "rate_ci_high": high * HOURS_PER_1K_DAYS,
            "mtbf_hours": inv(rate),
            "mtbf_ci_low": inv(high),
            "mtbf_ci_high": inv(low),
        }


# ----------------------------------------------------------------------------- data prep
def _sample(df: pl.DataFrame) -> Sample:
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


# ----------------------------------------------------------------------------- fitting
def fit_model(
    model: str, s: Sample, engine: str = "numpy", start: np.ndarray | None = None
) -> tuple[dict, str]:
    """One parametric candidate (any registered model) on one sample; returns (fit, method).

    A closed-form MLE (the exponential without interval censoring) comes from the exposure
    table. Otherwise ``engine='numpy'`` maximises the model's vectorized likelihood
    ('per-unit'); ``engine='lifelines'`` uses lifelines' fitter ('per-unit-lifelines'); 'auto'
    picks lifelines up to ``LIFELINES_MAX_UNITS`` units.
    """
    m = lifetime_models.get(model)
    exact = m.exact_fit(s)
    if exact is not None:
        return exact, "exposure-table"
    if engine == "auto":
        engine = "lifelines" if s.n <= LIFELINES_MAX_UNITS else "numpy"
    method = "per-unit-lifelines" if engine == "lifelines" else "per-unit"
    try:
        fit = m.fit_lifelines(s) if engine == "lifelines" else m.fit(s, start)
    except _fit_errors() as exc:  # lifelines ConvergenceError, singular Hessian, ...
        fit = {
            "loglik": float("nan"),
            "k": 0,
            "converged": False,
            "params": {},
            "error": str(exc)[:200],
        }
    return fit, method


# ----------------------------------------------------------------------------- failure_rates
def _fit_rows(
    s: Sample,
    min_events: int,
    keys: dict,
    engine: str = "numpy",
    max_units: int = PARAMETRIC_MAX_UNITS,
    starts: dict[str, np.ndarray] | None = None,
) -> list[dict]:
    """Candidate rows for one (class, stratum, window). ``starts``: warm starts per model,
    filled with this call's estimates when empty (the whole-period fit seeds the windows)."""
    rate_cols = {k: float(v) for k, v in _rate_columns(s.n_events, s.exposure).items()}
    reg = lifetime_models.models()
    models = [m for m in MODELS if s.n_events >= min_events or reg[m].full_data]
    sub = s
    if s.n > max_units:  # uniform random units: the likelihood stays unbiased
        rng = np.random.default_rng(max_units + s.n)
        sub = s.take(np.sort(rng.choice(s.n, max_units, replace=False)))
    rows = []
    for model in models:
        full = reg[model].full_data  # sufficient statistics: every unit, even when subsampling
        start = starts.get(model) if starts else None
        fit, method = fit_model(model, s if full else sub, engine, start)
        if (
            starts is not None
            and start is None
            and fit.get("theta") is not None
            and fit["converged"]
        ):
            starts[model] = fit["theta"]
        if sub is not s and not full:
            method = f"subsample-{max_units}"
        aic = reg[model].aic(fit)
        if full and sub is not s and len(models) > 1:
            # AIC must compare the candidates on the same units: the subsample's fit
            aic = reg[model].aic(fit_model(model, sub, engine)[0])
        fin = lambda x: float(x) if np.isfinite(x) else None
        params = {
            name: {"value": fin(v[0]), "ci_low": fin(v[1]), "ci_high": fin(v[2])}
            for name, v in fit["params"].items()
        }
        if "error" in fit:
            params["error"] = fit["error"]
        if sub is not s and len(models) > 1:
            params["aic_on"] = f"subsample-{max_units}"
        rows.append(
            {
                **keys,
                "model": model,
                "params": json.dumps(params),
                "aic": aic,
                "n_units": s.n,
                "n_events": s.n_events,
                "exposure_hours": s.exposure,
                **rate_cols,
                "method": method,
                "converged": fit["converged"],
                "_shape": fit["params"].get("shape") if model == SHAPE_MODEL else None,
            }
        )
    wb = next((r for r in rows if r["model"] == SHAPE_MODEL and r["converged"]), None)
    shape = wb["_shape"] if wb is not None else None
    for r in rows:
        r.pop("_shape")
        if shape is not None:
            r["shape"], r["shape_ci_low"], r["shape_ci_high"] = shape
    _own_rates(rows, s, reg)
    return rows


def model_mean(model: str, params) -> float | None:
    """Mean lifetime in hours of a registered ``model`` with ``params`` (a ``failure_rates``
    params JSON or dict); None when the parameters are unusable or the mean is not finite."""
    try:
        mean = lifetime_models.get(model).from_params(params or "{}").mean()
    except (ValueError, TypeError, OverflowError, KeyError):
        return None
    return float(mean) if np.isfinite(mean) and mean > 0 else None


def _own_rates(rows: list[dict], s: Sample, reg: dict) -> None:
    """Each candidate's own long-run rate, its Akaike weight and ``selected`` (in place).

    A model's long-run rate is that of a stationary fleet, 1 / its mean lifetime; the
    exponential's is the observed rate, events / exposure, with the exact Poisson CI. Another
    model's rate carries the observed rate's relative CI (the events are the same), and
    ``rate_extrapolated`` says whether its mean lies beyond the oldest unit age observed (then
    the rate is a model's extrapolation, not something the data show). ``selected``, the row
    every summary and projection quotes: the exponential, unless another model is clearly
    better, i.e. its AIC is lower by more than ``CLEAR_AIC`` and its rate is not extrapolated
    (then the best such model by AIC)."""
    oldest = float(s.upper.max()) if s.n else 0.0
    exp_row = next(r for r in rows if reg[r["model"]].full_data)
    observed = exp_row["rate_per_1k_unit_days"]
    aics = np.array([r["aic"] for r in rows], float)
    ok = np.isfinite(aics)
    weights = np.zeros(len(rows))
    if ok.any():
        weights[ok] = np.exp(-(aics[ok] - aics[ok].min()) / 2)
        weights /= weights.sum()
    for r, w in zip(rows, weights, strict=True):
        r["aic_weight"] = float(w)
        if r is exp_row:
            r["rate_extrapolated"] = False
            continue
        mean = model_mean(r["model"], r["params"]) if r["converged"] else None
        if mean is None or not observed:
            r.update(dict.fromkeys(_RATE_COLUMNS))
            r["rate_extrapolated"] = None
            continue
        f = HOURS_PER_1K_DAYS / mean / observed  # own rate / observed rate
        for k in ("rate_per_1k_unit_days", "rate_ci_low", "rate_ci_high"):
            r[k] = exp_row[k] * f
        for k in ("mtbf_hours", "mtbf_ci_low", "mtbf_ci_high"):
            r[k] = exp_row[k] / f if exp_row[k] is not None else None
        r["rate_extrapolated"] = mean > oldest
    clear = [
        r
        for r in rows
        if r is not exp_row
        and r["rate_extrapolated"] is False
        and np.isfinite(r["aic"])
        and r["aic"] < exp_row["aic"] - CLEAR_AIC
    ]
    chosen = min(clear, key=lambda r: r["aic"]) if clear else exp_row
    for r in rows:
        r["selected"] = r is chosen


def _strata(df: pl.DataFrame):
    """('all', frame) and, when a class has several models / SKUs, one stratum per model."""
    yield "all", df
    models = df["model"].drop_nulls().unique().sort().to_list()
    if len(models) > 1:
        for m in models:
            yield m, df.filter(pl.col("model") == m)


US_PER_HOUR = 3.6e9
MIN_WINDOW_HOURS = 24.0  # a month observed for less than this is folded into its neighbour
LOW_EXPOSURE_FRACTION = 0.25  # window exposure below this share of the class's median: flagged


def _month_pieces(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Observation split at calendar-month boundaries (vectorized: int ranges exploded, month
    starts looked up from a small table, no per-row strings).

    Returns (pieces, periods, notes): one piece per (unit, window) with integer month ``m``,
    ages ``age_from`` / ``age_to`` and ``in_event``; per (class, m) the window's ``window``
    label, the calendar span it covers (``period_start`` / ``period_end``) and ``partial``
    (covers less than its calendar month). An observation ending exactly on a month boundary
    opens no piece in the next month, and a month a class was observed for less than
    ``MIN_WINDOW_HOURS`` is folded into the neighbouring month (its pieces merged per unit),
    so no window has zero or sub-day length; ``notes`` says which were folded."""
    df = df.filter(pl.col("observed_from").is_not_null() & pl.col("observed_to").is_not_null())
    pieces_schema = {
        "component_class": pl.Utf8,
        "m": pl.Int64,
        "age_from": pl.Float64,
        "age_to": pl.Float64,
        "in_event": pl.Boolean,
    }
    if df.height == 0:
        return (
            pl.DataFrame(schema=pieces_schema),
            pl.DataFrame(
                schema={
                    "component_class": pl.Utf8,
                    "m": pl.Int64,
                    "window": pl.Utf8,
                    "period_start": pl.Datetime("us"),
                    "period_end": pl.Datetime("us"),
                    "partial": pl.Boolean,
                }
            ),
            [],
        )
    mi = lambda e: e.dt.year().cast(pl.Int64) * 12 + e.dt.month().cast(pl.Int64) - 1
    frm = pl.col("observed_from").cast(pl.Datetime("us"))
    to = pl.col("observed_to").cast(pl.Datetime("us"))
    df = df.with_row_index("u").select(
        "component_class",
        "u",
        "entry",
        "duration",
        "event",
        f=frm.cast(pl.Int64),
        t=to.cast(pl.Int64),
        m0=mi(frm),
        # the last instant observed is just before observed_to: ending at 00:00 on the 1st
        # closes the previous month and opens no empty piece in the next
        m1=mi(pl.when(to > frm).then(to - pl.duration(microseconds=1)).otherwise(to)),
    )
    lo, hi = int(df["m0"].min()), int(df["m1"].max())
    epoch = np.datetime64("1970-01-01", "us")
    starts = {
        m: int((np.datetime64(f"{m // 12:04d}-{m % 12 + 1:02d}-01", "us") - epoch).astype(np.int64))
        for m in range(lo - 1, hi + 3)
    }
    month_start = lambda e: e.replace_strict(starts, return_dtype=pl.Int64)
    out = df.with_columns(m=pl.int_ranges("m0", pl.col("m1") + 1)).explode("m")
    out = (
        out.with_columns(
            p0=pl.max_horizontal(month_start(pl.col("m")), pl.col("f")),
            p1=pl.min_horizontal(month_start(pl.col("m") + 1), pl.col("t")),
        )
        .with_columns(
            age_from=pl.col("entry") + (pl.col("p0") - pl.col("f")) / US_PER_HOUR,
            last=pl.col("m") == pl.col("m1"),
            age_to=pl.col("entry") + (pl.col("p1") - pl.col("f")) / US_PER_HOUR,
        )
        .with_columns(
            age_to=pl.when(pl.col("last")).then(pl.col("duration")).otherwise(pl.col("age_to")),
            in_event=pl.col("event") & pl.col("last"),
        )
    )
    out = out.filter(pl.col("age_to") >= pl.col("age_from"))
    # fold sub-day windows into the previous month (else the next) of the same class
    span = out.group_by("component_class", "m").agg(pl.col("p0").min(), pl.col("p1").max())
    short = span.filter((pl.col("p1") - pl.col("p0")) < MIN_WINDOW_HOURS * US_PER_HOUR)
    notes: list[str] = []
    if short.height:
        full = set(
            span.join(short, on=["component_class", "m"], how="anti")
            .select("component_class", "m")
            .iter_rows()
        )
        moves = []
        for cls, m, p0, p1 in short.select("component_class", "m", "p0", "p1").iter_rows():
            to_m = m - 1 if (cls, m - 1) in full else m + 1 if (cls, m + 1) in full else m
            if to_m != m:
                moves.append((cls, m, to_m))
                notes.append(
                    f"{cls}: {m // 12:04d}-{m % 12 + 1:02d} observed only "
                    f"{(p1 - p0) / US_PER_HOUR:.1f} h, folded into "
                    f"{to_m // 12:04d}-{to_m % 12 + 1:02d}"
                )
        if moves:
            fold = pl.DataFrame(moves, schema=["component_class", "m", "to_m"], orient="row")
            out = (
                out.join(fold, on=["component_class", "m"], how="left")
                .with_columns(m=pl.coalesce("to_m", "m"))
                .group_by("component_class", "u", "m", maintain_order=True)
                .agg(
                    pl.col("age_from").min(),
                    pl.col("age_to").max(),
                    pl.col("in_event").any(),
                    pl.col("p0").min(),
                    pl.col("p1").max(),
                )
            )
    labels = {m: f"{m // 12:04d}-{m % 12 + 1:02d}" for m in starts}
    periods = (
        out.group_by("component_class", "m")
        .agg(pl.col("p0").min(), pl.col("p1").max())
        .with_columns(
            window=pl.col("m").replace_strict(labels, return_dtype=pl.Utf8),
            partial=(pl.col("p0") > month_start(pl.col("m")))
            | (pl.col("p1") < month_start(pl.col("m") + 1)),
            period_start=pl.col("p0").cast(pl.Datetime("us")),
            period_end=pl.col("p1").cast(pl.Datetime("us")),
        )
        .select("component_class", "m", "window", "period_start", "period_end", "partial")
        .sort("component_class", "m")
    )
    return (
        out.select(*pieces_schema).sort("component_class", "m", maintain_order=True),
        periods,
        notes,
    )


def monthly_exposure(df: pl.DataFrame) -> pl.DataFrame:
    """Split each unit's observation at calendar-month boundaries (vectorized).

    Returns one row per (unit, month) with window 'YYYY-MM', the ages at the piece's start and
    end (``age_from`` / ``age_to``; their difference is the exposure) and whether the failure
    falls in it (see ``_month_pieces`` for boundaries and sub-day months).
    """
    pieces, periods, _ = _month_pieces(df)
    return pieces.join(
        periods.select("component_class", "m", "window"), on=["component_class", "m"]
    ).select("component_class", "window", "age_from", "age_to", "in_event")


TREND_ALPHA = 0.05  # family-wise error of the trend claims across classes (Holm)
TREND_DRAWS = 20_000  # multinomial draws of a trend test's exact null distribution


def _trend_fit(d: np.ndarray, e: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(p, slope per unit of ``t``) of log rate = a + b·t with exposure ``e``, conditional on
    the total D = sum(d) (a's nuisance gone: counts are multinomial with p_i ∝ e_i·exp(b·t_i)).
    The test of b = 0 uses the score statistic, the Laplace test with exposure,
    U = sum d_i (t_i - t̄) (t̄ the exposure-weighted mean time), with its exact null
    distribution given D: two-sided p = P(|U*| >= |U|) over ``TREND_DRAWS`` multinomial(D, e / E)
    draws (fixed seed; valid for the few failures a month of a small class, where the normal
    approximation is not). The slope is the conditional MLE (Newton; ±inf when every event
    falls at one end)."""
    D = int(d.sum())
    w = e / e.sum()
    tc = t - (w * t).sum()
    if D == 0 or (w * tc**2).sum() <= 0:
        return 1.0, 0.0
    u = float((d * tc).sum())
    null = np.random.default_rng(TREND_DRAWS).multinomial(D, w, size=TREND_DRAWS) @ tc
    extreme = np.count_nonzero(np.abs(null) >= abs(u) - 1e-9 * (1 + abs(u)))
    p = float((extreme + 1) / (TREND_DRAWS + 1))
    z = u
    if d[t == t.max()].sum() == D or d[t == t.min()].sum() == D:  # no finite MLE
        return p, math.copysign(math.inf, z)
    b = 0.0
    for _ in range(50):
        q = w * np.exp(b * tc - np.max(b * tc))
        q /= q.sum()
        m = (q * tc).sum()
        info = D * (q * (tc - m) ** 2).sum()
        step = ((d * tc).sum() - D * m) / info if info > 0 else 0.0
        if not np.isfinite(step) or info < 1e-12:
            return p, math.copysign(math.inf, z)
        b += step
        if abs(step) < 1e-10:
            break
    return p, float(b)


def rate_trends(failure_rates_df: pl.DataFrame, stratum: str = "all") -> pl.DataFrame:
    """One trend test per class over its monthly windows, Holm-adjusted across classes.

    Per class with at least two monthly windows and one failure: a Poisson regression of the
    monthly failures on time (log rate linear in the window's mid-time, log exposure as
    offset), tested by its score test (``_trend_fit``: the Laplace test weighted by
    exposure, exact given the class's failures, so partial and low-exposure months count by
    their exposure). ``ratio_per_30d``:
    the fitted rate ratio over 30 days; ``trend``: 'rising' / 'falling' where the Holm-adjusted
    p is under ``TREND_ALPHA``, else null: the only trend claims the report makes. Measured
    with tests/test_trend_shape.py's fleet (ten classes over six months, gpu 3,000 units at 0.5
    failures per 1,000 unit-days, nine classes of 500 units at 0.3): the gpu rate doubling
    after three months is claimed (rising) in 30 of 30 fleets (seeds 0-29; with 1,000 gpu
    units 20 of 30); stable fleets draw a claim on some class in 8 of 130 (seeds 0-129: 6.2%,
    95% CI 2.7-11.8%, consistent with the family-wise 5%)."""
    schema = {"component_class": pl.Utf8, "windows": pl.Int64, "events": pl.Int64,
              "ratio_per_30d": pl.Float64, "p": pl.Float64}  # fmt: skip
    monthly = selected(failure_rates_df, MONTHLY, stratum)
    # a window's mid-time in days: its observed span, else the middle of its calendar month
    month = (pl.col("window") + "-01").str.to_datetime("%Y-%m-%d", time_unit="us")
    mid = pl.coalesce(
        (pl.col("period_start").dt.epoch("us") + pl.col("period_end").dt.epoch("us")) / 2 / 8.64e10,
        (month.dt.epoch("us") + month.dt.offset_by("1mo").dt.epoch("us")) / 2 / 8.64e10,
    )
    rows = []
    if monthly.height == 0 or "period_start" not in monthly.columns:
        monthly = pl.DataFrame(
            schema={"component_class": pl.Utf8, "window": pl.Utf8, "n_events": pl.Int64,
                    "period_start": pl.Datetime("us"), "period_end": pl.Datetime("us"),
                    "exposure_hours": pl.Float64}
        )  # fmt: skip
    for (cls,), g in monthly.with_columns(mid.alias("_day")).sort("_day").partition_by(
        "component_class", as_dict=True, maintain_order=True
    ).items():
        g = g.filter((pl.col("exposure_hours") > 0) & pl.col("_day").is_not_null())
        d = g["n_events"].fill_null(0).to_numpy().astype(float)
        if g.height < 2 or d.sum() == 0:
            continue
        p, b = _trend_fit(d, g["exposure_hours"].to_numpy(), g["_day"].to_numpy())
        ratio = math.exp(b * 30) if abs(b * 30) < 700 else (math.inf if b > 0 else 0.0)
        rows.append((cls, g.height, int(d.sum()), ratio, p))
    out = pl.DataFrame(rows, schema=schema, orient="row")
    out = out.with_columns(p_adjusted=pl.Series(holm(out["p"].to_numpy()), dtype=pl.Float64))
    return out.with_columns(
        trend=pl.when(pl.col("p_adjusted") < TREND_ALPHA)
        .then(
            pl.when(pl.col("ratio_per_30d") > 1).then(pl.lit("rising")).otherwise(pl.lit("falling"))
        )
        .otherwise(None)
    )


def rate_change_test(events_a, exposure_a, events_b, exposure_b) -> float:
    """Two-sided exact p-value that two Poisson rates are equal: conditional on the total
    d_a + d_b, d_b is Binomial(d_a + d_b, E_b / (E_a + E_b)) under equal rates (scipy's
    ``binomtest``). 30 vs 50 events on equal exposure: p = 0.033, though their 95% CIs overlap."""
    from scipy import stats  # scipy.stats loads where a test runs (`goodput fit` prints without it)

    n = int(events_a) + int(events_b)
    if n == 0 or exposure_a <= 0 or exposure_b <= 0:
        return 1.0
    return float(stats.binomtest(int(events_b), n, exposure_b / (exposure_a + exposure_b)).pvalue)


def failure_rates(
    lifetimes: pl.DataFrame,
    window: str | None = "month",
    notes: list[str] | None = None,
    engine: str = "numpy",
) -> pl.DataFrame:
    """Every candidate model per (class, stratum, window 'all' and monthly), AIC winner flagged."""
    notes = notes if notes is not None else []
    df = clean_lifetimes(lifetimes)
    if df.height < lifetimes.height:
        notes.append(
            f"{lifetimes.height - df.height:,} lifetime rows unusable (no class or duration, "
            "duration <= 0 or < entry) and left out"
        )
    rows: list[dict] = []
    warm: dict[str, dict[str, np.ndarray]] = {}  # whole-period estimates seed the window fits
    population = _populations(df)
    for (cls,), cdf in df.partition_by(
        "component_class", as_dict=True, maintain_order=True
    ).items():
        for stratum, sdf in _strata(cdf):
            rows += _fit_rows(
                _sample(sdf),
                MIN_EVENTS_PARAMETRIC,
                {"component_class": cls, "stratum": stratum, "window": "all", "population": population.get(cls)},
                engine,
                starts=warm.setdefault(cls, {}) if stratum == "all" else None,
            )
    periods = None
    if window == "month" and df.height:
        pieces, periods, fold_notes = _month_pieces(df)
        notes.extend(fold_notes)
        if pieces.height == 0:
            notes.append("monthly windows skipped: no observed_from / observed_to")
        labels = dict(periods.select("m", "window").unique().iter_rows())
        jobs = []
        for (cls, m), wdf in pieces.partition_by(["component_class", "m"], as_dict=True).items():
            s = Sample(
                wdf["age_from"].to_numpy(),
                wdf["age_to"].to_numpy(),
                wdf["age_to"].to_numpy(),
                wdf["in_event"].to_numpy(),
                np.zeros(wdf.height, dtype=bool),
            )
            meta = {"component_class": cls, "stratum": "all", "window": labels[m], "population": population.get(cls)}
            jobs.append((s.take(s.upper > 0), meta, dict(warm.get(cls, {})) or None))
        # window fits are independent and spend their time in NumPy/SciPy ufuncs, which release
        # the GIL: threads use every core; results keep the input order (deterministic)
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            for part in pool.map(
                lambda j: _fit_rows(
                    j[0], MIN_EVENTS_WINDOW_FIT, j[1], engine, WINDOW_MAX_UNITS, starts=j[2]
                ),
                jobs,
            ):
                rows += part
    elif window not in (None, "month"):
        raise ValueError(f"window must be 'month' or None, got {window!r}")
    if not rows:
        return TABLES["failure_rates"].empty()
    return _mark_periods(_shape_tests(_with_shape_columns(pl.DataFrame(rows))), df, periods).sort(
        "component_class", "stratum", "window", "model"
    )


def _with_shape_columns(rows: pl.DataFrame) -> pl.DataFrame:
    """The shape columns even where no Weibull was fitted (too few events everywhere)."""
    missing = [c for c in ("shape", "shape_ci_low", "shape_ci_high") if c not in rows.columns]
    return rows.with_columns(pl.lit(None, pl.Float64).alias(c) for c in missing)


def _mark_periods(
    rows: pl.DataFrame, df: pl.DataFrame, periods: pl.DataFrame | None
) -> pl.DataFrame:
    """The calendar span of every row, ``partial`` months and ``low_exposure`` windows (less
    than ``LOW_EXPOSURE_FRACTION`` of the class's median monthly exposure)."""
    whole = (
        df.group_by("component_class")
        .agg(
            period_start=pl.col("observed_from").min().cast(pl.Datetime("us")),
            period_end=pl.col("observed_to").max().cast(pl.Datetime("us")),
        )
        .with_columns(window=pl.lit("all"), partial=pl.lit(False))
    )
    spans = whole.select("component_class", "window", "period_start", "period_end", "partial")
    if periods is not None and periods.height:
        spans = pl.concat([spans, periods.drop("m")])
    rows = rows.join(spans, on=["component_class", "window"], how="left")
    monthly = pl.col("window") != "all"
    median = pl.col("exposure_hours").filter(monthly).median().over("component_class", "stratum")
    rows = rows.with_columns(
        partial=pl.col("partial").fill_null(False),
        low_exposure=monthly & (pl.col("exposure_hours") < LOW_EXPOSURE_FRACTION * median),
    )
    return conform("failure_rates", rows)


def _populations(df: pl.DataFrame) -> dict[str, str]:
    """Per class, where its units came from (component_lifetimes.population), '+'-joined."""
    pops = df.group_by("component_class").agg(pl.col("population").drop_nulls().unique().sort().str.join("+"))
    return {c: p or None for c, p in pops.rows()}


# ----------------------------------------------------------------------------- survival_curves
def _thin(n: int) -> np.ndarray:
    if n <= CURVE_MAX_POINTS:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, CURVE_MAX_POINTS).round().astype(int))


def survival_curves(lifetimes: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """KM and NA per class with left truncation, plus Aalen-Johansen by cause for nodes."""
    from lifelines import KaplanMeierFitter, NelsonAalenFitter
    from lifelines.exceptions import StatError

    notes = notes if notes is not None else []

    df = clean_lifetimes(lifetimes)
    frames = []
    for (cls,), cdf in df.partition_by(
        "component_class", as_dict=True, maintain_order=True
    ).items():
        s = _sample(cdf)
        km = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # smoothing off: lifelines' tie smoothing adds jumps at pure entry times (wrong
            # with delayed entry); plain Nelson-Aalen is sum d/n over the truncated risk sets
            na = NelsonAalenFitter(nelson_aalen_smoothing=False).fit(
                s.upper, s.event, entry=s.entry
            )
            try:
                km = KaplanMeierFitter().fit(s.upper, s.event, entry=s.entry)
            except StatError:
                # delayed entry emptied the risk set at an event (KM would stay 0 for later
                # entrants); exp(-Nelson-Aalen) (Breslow-Fleming-Harrington) stays meaningful
                notes.append(
                    f"{cls}: Kaplan-Meier undefined after the risk set emptied (few early "
                    "entries); survival curve is Breslow-Fleming-Harrington exp(-NA) instead"
                )
        if km is not None:
            estimator, curve = "kaplan_meier", km.survival_function_
            at_risk = km.event_table["at_risk"].to_numpy()
            ci = km.confidence_interval_.to_numpy()
        else:
            estimator, curve = "breslow_fleming_harrington", np.exp(-na.cumulative_hazard_)
            at_risk = na.event_table["at_risk"].to_numpy()
            ci = np.exp(-na.confidence_interval_.to_numpy()[:, ::-1])
        t = curve.index.to_numpy()
        idx = _thin(len(t))
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "estimator": estimator,
                    "t": t[idx],
                    "survival": curve.to_numpy()[idx, 0],
                    "ci_low": ci[idx, 0],
                    "ci_high": ci[idx, 1],
                    "at_risk": at_risk[idx].astype(np.int64),
                }
            )
        )
        nci = na.confidence_interval_.to_numpy()
        idx = _thin(len(na.cumulative_hazard_))
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "estimator": "nelson_aalen",
                    "t": na.cumulative_hazard_.index.to_numpy()[idx],
                    "cumulative_hazard": na.cumulative_hazard_.to_numpy()[idx, 0],
                    "ci_low": nci[idx, 0],
                    "ci_high": nci[idx, 1],
                    "at_risk": na.event_table["at_risk"].to_numpy()[idx].astype(np.int64),
                }
            )
        )
    frames.append(competing_risks(df, notes))
    frames = [conform("survival_curves", _flag_small(f)) for f in frames if f.height]
    return pl.concat(frames) if frames else TABLES["survival_curves"].empty()


def _flag_small(curve: pl.DataFrame) -> pl.DataFrame:
    """``small_risk_set`` where fewer than ``MIN_AT_RISK`` units are at risk (the estimate
    rests on a handful of units: the report stops its curves there), and no zero-width CI: at a
    survival of 0 or 1 (or an incidence of 0) the log-log interval is undefined, so its bounds
    are null rather than a certainty the data do not give."""
    width = pl.col("ci_high") - pl.col("ci_low")
    return curve.with_columns(
        small_risk_set=pl.col("at_risk") < MIN_AT_RISK,
        ci_low=pl.when(width > 0).then(pl.col("ci_low")),
        ci_high=pl.when(width > 0).then(pl.col("ci_high")),
    )


def node_first_failures(df: pl.DataFrame) -> pl.DataFrame:
    """One row per host: hours from the node's first observation to its first component
    failure (any class; the class is the cause) or to the end of its observation."""
    df = df.filter(
        pl.col("host").is_not_null()
        & pl.col("observed_from").is_not_null()
        & pl.col("observed_to").is_not_null()
    )
    fails = (
        df.filter(pl.col("event"))
        .sort("observed_to")
        .group_by("host")
        .agg(
            pl.col("observed_to").first().alias("fail_at"),
            pl.col("component_class").first().alias("cause"),
        )
    )
    span = df.group_by("host").agg(
        pl.col("observed_from").min().alias("start"), pl.col("observed_to").max().alias("end")
    )
    nodes = span.join(fails, on="host", how="left").with_columns(
        event=pl.col("fail_at").is_not_null(),
        t=((pl.coalesce("fail_at", "end") - pl.col("start")).dt.total_microseconds() / 3.6e9),
    )
    return nodes.filter(pl.col("t") > 0).select("host", "t", "event", "cause").sort("host")


def aalen_johansen_ci(aj) -> np.ndarray:
    """95% CI of a fitted AalenJohansenFitter's CIF, columns (low, high).

    Same estimator as lifelines' ``calculate_variance=True`` (Collett's Greenwood-type
    variance, log(-log) transform) but with the running sums Σa(F_j - F_i)² and Σe(F_j - F_i)
    expanded into cumulative sums: O(T) instead of lifelines' per-row pandas loop, which takes
    minutes on 100k nodes. Tested against lifelines.
    """
    et = aj.event_table
    F = aj.cumulative_density_.iloc[:, 0].to_numpy()
    n = et["at_risk"].to_numpy().astype(float)
    d = et["observed"].to_numpy().astype(float)
    dk = et[aj.label_cmprisk].to_numpy().astype(float)
    surv = np.cumprod(np.where(n > 0, 1 - d / np.where(n > 0, n, 1), 1.0))
    lag_s = np.concatenate([[1.0], surv[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        a = d / n / (n - d)
        c = lag_s**2 * dk * (n - dk) / n**3
        e = lag_s * dk / n**2
        var = (
            F**2 * np.cumsum(a)
            - 2 * F * np.cumsum(a * F)
            + np.cumsum(a * F**2)
            + np.cumsum(c)
            - 2 * (F * np.cumsum(e) - np.cumsum(e * F))
        )
        var = np.clip(var, 0.0, None)
        ft = np.log(-np.log(F))
        se = np.sqrt(var) / (F * np.abs(np.log(F)))
        low = np.exp(-np.exp(ft + Z95 * se))
        high = np.exp(-np.exp(ft - Z95 * se))
    return np.column_stack([low, high])


def competing_risks(df: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """Aalen-Johansen cumulative incidence of a node's first failure, one curve per cause."""
    from lifelines import AalenJohansenFitter

    notes = notes if notes is not None else []
    nodes = node_first_failures(df)
    if nodes.height == 0 or not nodes["event"].any():
        notes.append("competing risks skipped: no node with host, observation times and a failure")
        return pl.DataFrame()
    if nodes.height > AJ_MAX_NODES:
        notes.append(
            f"aalen-johansen on a random subsample of {AJ_MAX_NODES:,} of {nodes.height:,} nodes"
        )
        rng = np.random.default_rng(AJ_MAX_NODES)
        nodes = nodes[np.sort(rng.choice(nodes.height, AJ_MAX_NODES, replace=False))]
    causes = nodes["cause"].drop_nulls().unique().sort().to_list()
    code = {c: i + 1 for i, c in enumerate(causes)}
    t = nodes["t"].to_numpy()
    ev = (
        nodes.select(
            pl.when(pl.col("event"))
            .then(pl.col("cause").replace_strict(code, default=0))
            .otherwise(0)
        )
        .to_series()
        .to_numpy()
    )
    frames = []
    for cause in causes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aj = AalenJohansenFitter(seed=0, calculate_variance=False).fit(
                t, ev, event_of_interest=code[cause]
            )
        cif = aj.cumulative_density_
        tt = cif.index.to_numpy()
        idx = _thin(len(tt))
        ci = aalen_johansen_ci(aj)
        at_risk = aj.event_table["at_risk"].reindex(cif.index).to_numpy()
        frames.append(
            pl.DataFrame(
                {
                    "component_class": "node",
                    "estimator": "aalen_johansen",
                    "cause": cause,
                    "t": tt[idx],
                    "cumulative_incidence": cif.to_numpy()[idx, 0],
                    "ci_low": ci[idx, 0],
                    "ci_high": ci[idx, 1],
                    "at_risk": np.nan_to_num(at_risk[idx]).astype(np.int64),
                }
            )
        )
    return pl.concat(frames)


# ----------------------------------------------------------------------------- hazard_ratios
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


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over all of ``p``)."""
    p = np.asarray(p, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
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
                f"cox {cls}: fitted on a random subsample of {COX_MAX_UNITS:,} of {cdf.height:,} units"
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


# ----------------------------------------------------------------------------- public API
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
    # the GIL); each gets its own notes list, joined in a fixed order so output is deterministic
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


def rate_samples(
    failure_rates_df: pl.DataFrame,
    n: int,
    rng: np.random.Generator,
    stratum: str = "all",
    window: str = "all",
) -> dict[str, np.ndarray]:
    """``n`` plausible per-unit-hour failure rates per class, for propagating fit uncertainty.

    Rate: the Gamma(events + 1/2, exposure) distribution (the Jeffreys posterior of a Poisson
    rate): its 2.5/97.5% quantiles sit at the Garwood CI of ``rate_ci_low/high`` (within a
    fraction of an event), it is defined for zero events, and it needs only the two sufficient
    statistics stored in ``failure_rates``. Family: each draw then takes one candidate model's
    long-run rate relative to the observed rate, the model drawn with its Akaike weight among
    the candidates whose rate is not extrapolated (``aic_weight``, ``rate_extrapolated``;
    the exponential always counts; a table without weights: the selected row only). Multiply
    by units per job for a job rate.
    """
    sel = selected(failure_rates_df, window, stratum)
    df = failure_rates_df
    cands = df.filter(
        (pl.col("window") == window)
        & (pl.col("stratum").fill_null("all") == stratum)
        & pl.col("rate_per_1k_unit_days").is_not_null()
        & (
            pl.col("selected").fill_null(False)
            | (~pl.col("rate_extrapolated").fill_null(True) & (pl.col("aic_weight") > 0))
        )
    ) if {"aic_weight", "rate_extrapolated"} <= set(df.columns) else sel
    out = {}
    for cls, d, e in sel.select("component_class", "n_events", "exposure_hours").iter_rows():
        if e is None or e <= 0:
            continue
        draws = rng.gamma(d + 0.5, 1.0 / e, size=n)
        c = cands.filter(pl.col("component_class") == cls)
        observed = d / e * HOURS_PER_1K_DAYS
        if c.height > 1 and observed > 0:
            w = c["aic_weight"].fill_null(0.0).to_numpy()
            ratio = c["rate_per_1k_unit_days"].to_numpy() / observed
            if w.sum() > 0:
                draws *= ratio[rng.choice(len(w), size=n, p=w / w.sum())]
        elif c.height == 1 and observed > 0:
            draws *= c["rate_per_1k_unit_days"][0] / observed
        out[cls] = draws
    return out


def rate_ci_covers_truth(failure_rates_df: pl.DataFrame, ground_truth: dict) -> dict[str, dict]:
    """Per class of ``ground_truth['laws']``: the fitted rate CI and whether it covers
    ``true_rate_per_1k_unit_days`` (stratum 'all', window 'all', selected row)."""
    sel = {r["component_class"]: r for r in selected(failure_rates_df).iter_rows(named=True)}
    out = {}
    for cls, law in ground_truth.get("laws", {}).items():
        true = law.get("true_rate_per_1k_unit_days")
        row = sel.get(cls)
        if row is None or true is None:
            out[cls] = {"true": true, "fitted": None, "covered": False}
            continue
        out[cls] = {
            "true": true,
            "fitted": row["rate_per_1k_unit_days"],
            "ci_low": row["rate_ci_low"],
            "ci_high": row["rate_ci_high"],
            "n_events": row["n_events"],
            "covered": row["rate_ci_low"] <= true <= row["rate_ci_high"],
        }
    return out


# ----------------------------------------------------------------------------- simulation
def simulate_lifetimes(
    laws: dict[str, tuple[float, float]],
    n_units: int,
    rng: np.random.Generator,
    *,
    horizon_hours: float = 8760.0,
    installed_before_hours: float = 17520.0,
    removal_rate_per_hour: float = 0.0,
    check_every_hours: float | None = None,
    start: str = "2025-01-01",
) -> pl.DataFrame:
    """Lifetimes with known Weibull laws {class: (shape, scale_hours)}, as component_lifetimes.

    Units are installed uniformly over [-installed_before_hours, horizon_hours] relative to the
    start of observation (age 0 at install) and observed during [0, horizon_hours]: units
    installed earlier enter at their current age (left truncation) and those that failed before
    observation began are never seen. Censoring: end of observation and random removals.
    ``check_every_hours`` makes failures interval-censored between periodic health checks.
    """
    t0 = np.datetime64(start, "us")
    frames = []
    for cls, (shape, scale) in laws.items():
        install = rng.uniform(-installed_before_hours, horizon_hours, n_units)
        life = scale * rng.weibull(shape, n_units)
        removal = (
            rng.exponential(1 / removal_rate_per_hour, n_units)
            if removal_rate_per_hour > 0
            else np.full(n_units, np.inf)
        )
        entry = np.maximum(0.0, -install)
        end_age = np.minimum(horizon_hours - install, removal)
        seen = (life > entry) & (end_age > entry)
        install, life, entry, end_age = install[seen], life[seen], entry[seen], end_age[seen]
        event = life <= end_age
        duration = np.where(event, life, end_age)
        low = np.full(len(duration), np.nan)
        if check_every_hours:
            # health checks at calendar times k * check_every; failure seen at the next check
            fail_cal = install + duration
            next_check = np.ceil(fail_cal / check_every_hours) * check_every_hours
            prev_check = next_check - check_every_hours
            low = np.where(event, np.maximum(prev_check - install, entry), np.nan)
            duration = np.where(event, next_check - install, duration)
        n = len(duration)
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "unit_id": [f"{cls}-{i}" for i in range(n)],
                    "host": [f"node{i // 8:05d}" for i in rng.permutation(n)],
                    "model": np.where(rng.random(n) < 0.5, "A", "B"),
                    "observed_from": t0 + ((install + entry) * 3.6e9).astype("timedelta64[us]"),
                    "observed_to": t0 + ((install + duration) * 3.6e9).astype("timedelta64[us]"),
                    "entry": entry,
                    "duration": duration,
                    "duration_low": low,
                    "event": event,
                    "temp_mean": 60 + 5 * rng.standard_normal(n),
                }
            )
        )
    return conform("component_lifetimes", pl.concat(frames))


def simulate_calendar_rates(
    classes: dict[str, tuple[int, float]],
    rng: np.random.Generator,
    *,
    days: float = 181.0,
    start: str = "2026-01-01",
    change_day: float | None = None,
    factors: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Lifetimes with constant hazards in age that change on a calendar date, as
    component_lifetimes: per class (units, failures per 1,000 unit-days), every unit watched
    from ``start`` for ``days`` (ages at the start uniform over three years: memoryless, any
    will do), a failed unit leaving; from ``change_day`` on, a class's rate is multiplied by
    its ``factors`` entry (a planted trend)."""
    t0 = np.datetime64(start, "us")
    factors = factors or {}
    frames = []
    for cls, (n, per_1k) in classes.items():
        lam = per_1k / 1000.0  # per unit-day
        after = lam * factors.get(cls, 1.0)
        cut = days if change_day is None else change_day
        e = rng.exponential(1.0, n)  # each unit's cumulative hazard at its failure
        t = np.where(e < lam * cut, e / lam, cut + (e - lam * cut) / after)
        end = np.minimum(t, days)
        age0 = rng.uniform(0, 3 * 365.0, n)
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "unit_id": [f"{cls}-{i}" for i in range(n)],
                    "observed_from": np.full(n, t0),
                    "observed_to": t0 + (end * 8.64e10).astype("timedelta64[us]"),
                    "entry": age0 * 24,
                    "duration": (age0 + end) * 24,
                    "event": t < days,
                }
            )
        )
    return conform("component_lifetimes", pl.concat(frames))


# ----------------------------------------------------------------------------- text table
def _num(v: float | None, digits: int = 3) -> str:
    if v is None or not np.isfinite(v):
        return "-"
    return f"{v:.{digits}g}" if abs(v) < 1e3 else f"{v:,.0f}"


def format_fit_table(
    failure_rates_df: pl.DataFrame, all_models: bool = False, window: str = "all"
) -> str:
    """Readable table of ``failure_rates`` (what ``goodput fit`` prints): the selected row of
    each class unless ``all_models``; each row's own rate per 1,000 unit-days and MTBF in hours
    with its 95% CI (the selected row's is the number projections use), AIC difference to the
    best candidate and Akaike weight."""
    df = failure_rates_df.filter(pl.col("window") == window)
    df = df.with_columns(
        daic=pl.col("aic") - pl.col("aic").min().over("component_class", "stratum")
    )
    if not all_models:
        df = df.filter(pl.col("selected"))
    df = df.sort("component_class", pl.col("stratum") != "all", "stratum", "aic", nulls_last=True)
    header = [
        "class",
        "stratum",
        "model",
        "sel",
        "n",
        "events",
        "rate/1k unit-days [95% CI]",
        "MTBF h [95% CI]",
        "dAIC",
        "weight",
        "Weibull shape [95% CI]",
        "Weibull age reading",
        "method",
    ]
    lines = []
    for r in df.iter_rows(named=True):
        shape = (
            f"{_num(r['shape'])} [{_num(r['shape_ci_low'])}, {_num(r['shape_ci_high'])}]"
            if r["shape"] is not None
            else "-"
        )
        rate = (
            f"{_num(r['rate_per_1k_unit_days'])} [{_num(r['rate_ci_low'])}, {_num(r['rate_ci_high'])}]"
            if r["rate_per_1k_unit_days"] is not None
            else "- (no finite mean)"
        )
        if r["rate_extrapolated"]:
            rate += " ^"
        lines.append(
            [
                r["component_class"],
                r["stratum"],
                r["model"],
                "*" if r["selected"] else "",
                f"{r['n_units']:,}",
                f"{r['n_events']:,}",
                rate,
                f"{_num(r['mtbf_hours'])} [{_num(r['mtbf_ci_low'])}, {_num(r['mtbf_ci_high'])}]",
                _num(r["daic"]),
                "-" if r["aic_weight"] is None else f"{r['aic_weight']:.2f}",
                shape,
                age_reading(r) or "-",
                r["method"],
            ]
        )
    widths = [
        max(len(h), *(len(x[i]) for x in lines)) if lines else len(h) for i, h in enumerate(header)
    ]
    fmt = lambda row: "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
    out = [fmt(header), fmt(["-" * w for w in widths])] + [fmt(x) for x in lines]
    out.append(
        "rate = the model's long-run failures per unit-time (exponential: failures / at-risk "
        "unit-time, exact Poisson CI); MTBF = 1/rate; shape and age reading from the class's "
        f"Weibull fit, a direction only where shape = 1 is rejected after Holm across classes "
        f"(alpha {SHAPE_ALPHA:g})"
    )
    out.append(
        f"* = selected, the rate summaries and projections use: the exponential unless a model's "
        f"AIC is lower by more than {CLEAR_AIC:g} and its mean lifetime lies within the observed "
        "ages"
    )
    if df["rate_extrapolated"].fill_null(False).any():
        out.append("^ = mean lifetime beyond the oldest observed unit age: the rate is extrapolated")
    if window != "all" and df.height:
        partial = df.filter(pl.col("partial").fill_null(False))
        if partial.height:
            a, b = partial["period_start"].min(), partial["period_end"].max()
            out.append(
                f"{window} is a partial month: observed {a:%Y-%m-%d %H:%M} to {b:%Y-%m-%d %H:%M}"
            )
        low = df.filter(pl.col("low_exposure").fill_null(False))["component_class"].unique().sort()
        if low.len():
            out.append(
                f"low exposure (< {LOW_EXPOSURE_FRACTION:.0%} of the class's median month, "
                f"rates uncertain): {', '.join(low)}"
            )
    return "\n".join(out)
