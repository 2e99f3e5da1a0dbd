"""Per-component failure rates from ``component_lifetimes`` (the ``failure_rates`` table): the
product's core number, and the one model per class every summary and projection quotes.

What is computed, per component class (stratum 'all', plus one stratum per model / SKU when a
class has several), window 'all' and monthly windows (``analysis.survival.windows``):

* Observed rate per 1,000 unit-days (the exponential row):
  ``events / exposure * 24_000`` where exposure = total at-risk unit-hours
  ``sum(duration - entry)`` (left truncation: a unit is at risk only from ``entry``).  It is
  model-free, it is the exact MLE of the exponential model, and its 95% CI is the exact Poisson
  (Garwood, chi-square) interval.  MTBF = exposure / events, CI = reciprocal of the rate CI.
* Parametric candidates: every model registered in ``analysis/lifetime_models/`` (exponential,
  Weibull, lognormal, log-logistic, Gompertz; one module each, the likelihood written once in
  its ``base``), fitted with left truncation and right censoring, and with interval censoring
  when ``duration_low`` is set.  ``params`` (JSON) holds every parameter with its 95% CI.
  Each row's rate is its own model's rate over the window (the failures it expects over the
  units' at-risk spans / their exposure, ``_own_rates``) with a delta-method CI from the fit's
  covariance; MTBF = 1 / rate; ``mean_extrapolated`` marks a mean lifetime beyond the oldest
  unit age observed; ``aic_weight`` is the Akaike weight.
* ``selected`` (what every summary, the fit table and the projection quote): the exponential,
  i.e. the observed rate, unless another model is clearly better: AIC lower by more than
  ``CLEAR_AIC`` (10) *and* a mean lifetime within the observed ages (a law whose tail is a
  guess would carry that guess into the fleet-age projections and the Monte Carlo).
* The ``shape`` columns and the age reading: ``analysis.survival.shape``.
* Fitting path (``method`` column):
  - 'exposure-table': a model's closed-form MLE (the exponential from sufficient statistics,
    events and exposure) when no row is interval-censored.
  - 'per-unit': the left-truncated, right- / interval-censored log-likelihood maximised over
    every unit with NumPy/SciPy (analytic gradient, O(n) vectorized); tested to agree with
    lifelines' fitters (lifelines costs ~15 us per unit per model plus ~0.1 s per fit, too slow
    for hundreds of class/stratum/window fits).
  - 'per-unit-lifelines': lifelines' ``fit(..., entry=)`` / ``fit_interval_censoring`` itself
    (``engine='lifelines'``, or ``'auto'`` up to ``LIFELINES_MAX_UNITS`` units).
  - 'subsample-N': the candidates without sufficient statistics on a uniform random N units
    when the stratum is larger (``PARAMETRIC_MAX_UNITS``, ``WINDOW_MAX_UNITS`` for monthly
    windows); the rate stays on all units and AIC compares all candidates on that same subsample.
* A change between two windows is judged by ``rate_change_test`` (exact), never by CI overlap.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.headline import selected_rates as selected
from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.base import Sample
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.survival.common import clean_lifetimes
from analysis.survival.common import fit_errors
from analysis.survival.common import lifetime_sample
from analysis.survival.shape import shape_tests
from analysis.survival.windows import mark_periods
from analysis.survival.windows import month_pieces
from warehouse.schemas import TABLES

HOURS_PER_1K_UNIT_DAYS = 24_000.0  # rate per 1k unit-days -> per unit-hour: divide by this
LIFELINES_MAX_UNITS = 20_000  # engine='auto': lifelines up to here (~15 us/unit/model)
PARAMETRIC_MAX_UNITS = 25_000  # larger strata: Weibull/LogNormal/LogLogistic on a random subsample
WINDOW_MAX_UNITS = 5_000  # the (many) monthly-window fits; the window rate itself uses every unit
MIN_EVENTS_PARAMETRIC = 5  # fewer events: exposure-table exponential only
MIN_EVENTS_WINDOW_FIT = 20  # per-month parametric fits only with this many events
CLEAR_AIC = 10.0  # a model other than the exponential is selected only with an AIC this much lower
# (and a mean lifetime within the observed ages): see ``_own_rates``
_RATE_COLUMNS = (
    "rate_per_1k_unit_days", "rate_ci_low", "rate_ci_high",
    "mtbf_hours", "mtbf_ci_low", "mtbf_ci_high",
)  # fmt: skip


def _rate_columns(events, exposure) -> dict[str, np.ndarray]:
    rate, low, high = poisson_rate_ci(events, exposure)
    with np.errstate(divide="ignore", invalid="ignore"):

        def inv(x):
            return np.where(x > 0, 1.0 / x, np.nan)

        return {
            "rate_per_1k_unit_days": rate * HOURS_PER_1K_UNIT_DAYS,
            "rate_ci_low": low * HOURS_PER_1K_UNIT_DAYS,
            "rate_ci_high": high * HOURS_PER_1K_UNIT_DAYS,
            "mtbf_hours": inv(rate),
            "mtbf_ci_low": inv(high),
            "mtbf_ci_high": inv(low),
        }


# ----------------------------------------------------------------------------- fitting
def fit_model(
    model: type[LifetimeModel],
    s: Sample,
    engine: str = "numpy",
    start: np.ndarray | None = None,
) -> tuple[dict, str]:
    """One parametric candidate (a registered model class, ``lifetime_models.models()``) on one
    sample; returns (fit, method).

    A closed-form MLE (the exponential without interval censoring) comes from the exposure
    table. Otherwise ``engine='numpy'`` maximises the model's vectorized likelihood
    ('per-unit'); ``engine='lifelines'`` uses lifelines' fitter ('per-unit-lifelines'); 'auto'
    picks lifelines up to ``LIFELINES_MAX_UNITS`` units.
    """
    exact = model.exact_fit(s)
    if exact is not None:
        return exact, "exposure-table"
    if engine == "auto":
        engine = "lifelines" if s.n <= LIFELINES_MAX_UNITS else "numpy"
    method = "per-unit-lifelines" if engine == "lifelines" else "per-unit"
    try:
        fit = model.fit_lifelines(s) if engine == "lifelines" else model.fit(s, start)
    except fit_errors() as exc:  # lifelines ConvergenceError, singular Hessian, ...
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
    models = [m for m in reg.values() if s.n_events >= min_events or m.full_data]
    sub = s
    if s.n > max_units:  # uniform random units: the likelihood stays unbiased
        rng = np.random.default_rng(max_units + s.n)
        sub = s.take(np.sort(rng.choice(s.n, max_units, replace=False)))
    rows = []
    for law in models:
        model = law.name
        full = law.full_data  # sufficient statistics: every unit, even when subsampling
        start = starts.get(model) if starts else None
        fit, method = fit_model(law, s if full else sub, engine, start)
        if (
            starts is not None
            and start is None
            and fit.get("theta") is not None
            and fit["converged"]
        ):
            starts[model] = fit["theta"]
        if sub is not s and not full:
            method = f"subsample-{max_units}"
        aic = law.aic(fit)
        if full and sub is not s and len(models) > 1:
            # AIC must compare the candidates on the same units: the subsample's fit
            aic = law.aic(fit_model(law, sub, engine)[0])

        def fin(x):
            return float(x) if np.isfinite(x) else None

        params = {
            name: {"value": fin(v[0]), "ci_low": fin(v[1]), "ci_high": fin(v[2])}
            for name, v in fit["params"].items()
        }
        if "error" in fit:
            params["error"] = fit["error"]
        window = None if full else law.window_rate(fit, s)
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
                "_shape": _age_trend(law, fit),
                "_window_rate": window,
            }
        )
    trend = next((r for r in rows if r["_shape"] is not None and r["converged"]), None)
    shape = trend["_shape"] if trend is not None else None
    for r in rows:
        r.pop("_shape")
        if shape is not None:
            r["shape"], r["shape_ci_low"], r["shape_ci_high"] = shape
    _own_rates(rows, s, reg)
    return rows


def _age_trend(model: type[lifetime_models.LifetimeModel], fit: dict):
    """(value, ci_low, ci_high) of the model's age-trend parameter, None for a model without one
    (or a fit that did not estimate it): the ``shape`` columns of the class's rows."""
    param = model.age_trend_parameter
    return fit["params"].get(param) if param else None


def model_mean(model: str, params) -> float | None:
    """Mean lifetime in hours of a registered ``model`` with ``params`` (a ``failure_rates``
    params JSON or dict); None when the parameters are unusable or the mean is not finite."""
    try:
        mean = lifetime_models.get(model).from_params(params or "{}").mean()
    except (ValueError, TypeError, OverflowError, KeyError):
        return None
    return float(mean) if np.isfinite(mean) and mean > 0 else None


def _own_rates(rows: list[dict], s: Sample, reg: dict) -> None:
    """Each candidate's rate over the window, its Akaike weight and ``selected`` (in place).

    A class's rate is the rate its units showed over the window at the ages they had: the
    failures a model expects over the units' at-risk spans / their exposure (what a job on
    this fleet meets; not a model's long-run 1 / mean, the rate of a fleet renewed for ever,
    whose age mix this fleet does not have). The exponential's is the observed rate, events /
    exposure, with the exact Poisson CI; another model's is its own
    (``LifetimeModel.window_rate``), with a delta-method CI from its fit's covariance, so
    the uncertainty of its shape is in it. ``mean_extrapolated`` says whether the model's mean
    lifetime lies beyond the oldest unit age observed (its law's tail is then a guess the data
    do not support). ``selected``, the row every summary and projection quotes: the
    exponential, unless another model is clearly better, i.e. its AIC is lower by more than
    ``CLEAR_AIC`` and its mean is not extrapolated (then the best such model by AIC)."""
    oldest = float(s.upper.max()) if s.n else 0.0
    exp_row = next(r for r in rows if reg[r["model"]].full_data)
    aics = np.array([r["aic"] for r in rows], float)
    ok = np.isfinite(aics)
    weights = np.zeros(len(rows))
    if ok.any():
        weights[ok] = np.exp(-(aics[ok] - aics[ok].min()) / 2)
        weights /= weights.sum()
    for r, w in zip(rows, weights, strict=True):
        r["aic_weight"] = float(w)
        window = r.pop("_window_rate")
        if r is exp_row:
            r["mean_extrapolated"] = False
            continue
        if window is None:
            r.update(dict.fromkeys(_RATE_COLUMNS))
            r["mean_extrapolated"] = None
            continue
        rate, low, high = (v * HOURS_PER_1K_UNIT_DAYS for v in window)
        r.update(
            rate_per_1k_unit_days=rate, rate_ci_low=low, rate_ci_high=high,
            mtbf_hours=HOURS_PER_1K_UNIT_DAYS / rate, mtbf_ci_low=HOURS_PER_1K_UNIT_DAYS / high,
            mtbf_ci_high=HOURS_PER_1K_UNIT_DAYS / low,
        )  # fmt: skip
        mean = model_mean(r["model"], r["params"])
        r["mean_extrapolated"] = mean is None or mean > oldest
    clear = [
        r
        for r in rows
        if r is not exp_row
        and r["mean_extrapolated"] is False
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
                lifetime_sample(sdf),
                MIN_EVENTS_PARAMETRIC,
                {
                    "component_class": cls,
                    "stratum": stratum,
                    "window": "all",
                    "population": population.get(cls),
                },
                engine,
                starts=warm.setdefault(cls, {}) if stratum == "all" else None,
            )
    periods = None
    if window == "month" and df.height:
        pieces, periods, fold_notes = month_pieces(df)
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
            meta = {"component_class": cls, "stratum": "all", "window": labels[m],
                    "population": population.get(cls)}  # fmt: skip
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
    return mark_periods(shape_tests(_with_shape_columns(pl.DataFrame(rows))), df, periods).sort(
        "component_class", "stratum", "window", "model"
    )


def _with_shape_columns(rows: pl.DataFrame) -> pl.DataFrame:
    """The shape columns even where no Weibull was fitted (too few events everywhere)."""
    missing = [c for c in ("shape", "shape_ci_low", "shape_ci_high") if c not in rows.columns]
    return rows.with_columns(pl.lit(None, pl.Float64).alias(c) for c in missing)


def _populations(df: pl.DataFrame) -> dict[str, str]:
    """Per class, where its units came from (component_lifetimes.population), '+'-joined."""
    pops = df.group_by("component_class").agg(
        pl.col("population").drop_nulls().unique().sort().str.join("+")
    )
    return {c: p or None for c, p in pops.rows()}


def rate_samples(
    failure_rates_df: pl.DataFrame,
    n: int,
    rng: np.random.Generator,
    stratum: str = "all",
    window: str = "all",
) -> dict[str, np.ndarray]:
    """``n`` plausible per-unit-hour failure rates per class, for propagating fit uncertainty.

    Rate: the Gamma(events + 1 / (2 C), exposure) posterior of each of the C classes drawn.
    A projection adds the classes up, and this puts one Jeffreys half event on their total
    (Gamma(total events + 1/2) where the classes weigh an event alike, as unit classes watched
    over one window do for a job: its units of the class / the class's unit-hours), whose two
    tails each hold about 2.5%. Half an event per class would add C / 2 events to the total and
    raise its lower bound: on simulated fleets a job truly better off than its band would fall
    above the band three to six times as often as below it (``benchmarks/validate_fleets.py``).
    Defined for zero events; needs only the two sufficient statistics stored in
    ``failure_rates``. Family: each draw then takes one candidate model's rate over the window
    relative to the observed rate, the model drawn with its Akaike weight (``aic_weight``; a
    table without weights: the selected row only). Candidates fitted to the same failures over
    the same spans differ little there (a Weibull's or a Gompertz's rate over the window is the
    observed rate exactly where no failure is interval-censored: the score of their scale
    parameter says so), so the family moves the band little. Multiply by units per job for a
    job rate.
    """
    sel = selected(failure_rates_df, window, stratum)
    df = failure_rates_df
    cands = (
        df.filter(
            (pl.col("window") == window)
            & (pl.col("stratum").fill_null("all") == stratum)
            & pl.col("rate_per_1k_unit_days").is_not_null()
            & (pl.col("selected").fill_null(False) | (pl.col("aic_weight") > 0))
        )
        if "aic_weight" in df.columns
        else sel
    )
    out = {}
    drawn = sel.filter(pl.col("exposure_hours") > 0)
    prior = 0.5 / max(drawn.height, 1)
    for cls, d, e in drawn.select("component_class", "n_events", "exposure_hours").iter_rows():
        draws = rng.gamma(d + prior, 1.0 / e, size=n)
        c = cands.filter(pl.col("component_class") == cls)
        observed = d / e * HOURS_PER_1K_UNIT_DAYS
        if c.height > 1 and observed > 0:
            w = c["aic_weight"].fill_null(0.0).to_numpy()
            ratio = c["rate_per_1k_unit_days"].to_numpy() / observed
            if w.sum() > 0:
                draws *= ratio[rng.choice(len(w), size=n, p=w / w.sum())]
        elif c.height == 1 and observed > 0:
            draws *= c["rate_per_1k_unit_days"][0] / observed
        out[cls] = draws
    return out
