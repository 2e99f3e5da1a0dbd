"""Analytic goodput projection for a job on N GPUs from per-class failure rates.

Model (DESIGN.md, goodput model):
- Job interruption rate Λ(N) = Σ_c n_c(N)·λ_c, where n_c counts the units of class c that a
  job on N GPUs carries (``UNIT_COUNTS``: per GPU, per node, or per job) and λ_c is the
  per-unit-hour rate. MTTI M = 1/Λ.
- Young's interval τ = √(2δM); Daly's higher-order interval
  τ = √(2δM)·[1 + ⅓√(δ/2M) + (1/9)(δ/2M)] − δ for δ < 2M, else M.
- Useful-time fraction from Daly's exact expected wall time for exponential failures
  (failures also strike during restarts): T_wall = M·e^{R/M}·(e^{(τ+δ)/M} − 1)·T_s/τ, so the
  fraction is T_s/T_wall. Asynchronous checkpoints enter through the blocking part of δ only
  (the part that stalls training); the risk window of the background write is ignored here
  and simulated in ``analysis.montecarlo``.

Everything broadcasts over NumPy arrays so a sweep of 10^5 scenarios is one vector pass.

Point and band (the same definitions in the analytic model and the Monte Carlo): the point
is the plug-in projection at each class's rate (a class with no failure has rate 0); the band
is the 2.5/97.5 percentiles over rate draws, so a zero-failure class's upper bound enters the
band only. Each class carries either CI bounds or an array of samples. Rates read from
``failure_rates`` carry samples from the fit itself (``analysis.survival.rate_samples``: the
Gamma(events + 1/2, exposure) posterior of each class's rate, times the long-run rate of a
candidate family drawn by Akaike weight). Without samples the rate is
drawn lognormal with the point estimate as median and σ = ln(hi/lo)/(2·1.96), i.e.
the CI read as ±1.96σ on the log scale (how a Poisson/likelihood CI of a positive rate is
usually built); a class with no events (point 0) draws a half-normal whose 97.5% quantile is
its upper bound. Goodput bands are the 2.5/97.5 percentiles over those draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.assumptions import CKPT_COST_S, GPUS_PER_NODE, RESTART_S, TARGET_GPUS
from analysis.fleet_age import (
    DEFAULT_FLEET_AGE,
    FLEET_AGES,
    AgeGroups,
    expected_failures,
)
from analysis.headline import selected_rates
from analysis.lifetime_models.base import Z95, LifetimeModel
from analysis.lifetime_models.exponential import Exponential, poisson_rate_ci
from analysis.survival import age_shape, model_mean, rate_samples
from analysis.taxonomy import (
    DEFAULT_SCOPE,
    DEFAULT_UNIT,
    SCOPES,
    UNIT_SCOPES,
    UNITS,
    WORKLOAD,
    WORKLOAD_DOMAIN,
    llama3_rates_frame,
)

FIT_DRAWS = 2000  # posterior rate draws kept per class (resampled for each band)
HOURS_PER_1K_UNIT_DAYS = 24_000.0  # rate per 1k unit-days -> per unit-hour: divide by this
HALF_NORMAL_Q975 = 2.241402727604947  # 97.5% quantile of |N(0, 1)|

# Units per class (``analysis.taxonomy.UNITS``) plus the pseudo-class of an --mtti override.
UNIT_COUNTS: dict[str, tuple[str, int]] = {**UNITS, "all": ("job", 1)}
RATES_CSV_COLUMNS = ("component_class", "events", "exposure_hours", "unit")


@dataclass(frozen=True)
class ClassRates:
    """Per-class failure rates per unit-hour, with their uncertainty and lifetime laws.

    ``ci_low``/``ci_high`` are 95% bounds (NaN = unknown); ``samples`` (classes × S) wins over
    the CI when given. ``counts`` overrides ``UNIT_COUNTS`` for some classes (a rate per
    node-hour counts once per node); ``events`` and ``origins`` (per class: fit | interruptions
    | file) say where each rate came from, for the CLI's JSON and the report.

    Every class has a lifetime law, a ``lifetime_models`` instance (``laws``), that the analytic
    model needs only for a fleet age other than stationary and the Monte Carlo draws from:
    lifetimes in hours are the law's lifetimes divided by rate / ``law_rate``, the rate the law
    runs at as stated (a fitted law: 1 / its mean; a class known only by its rate: the mean-1
    exponential, ``Exponential.unit``, at law_rate 1, the default). ``law_names`` is what the
    JSON and the report call each law. ``age_laws``: per class, the (law, law_rate) a new or
    observed fleet age is projected with instead (an exponential class whose Weibull fit shows
    an age trend: that Weibull at the class's observed rate); None = ``laws``. ``starts``: the
    unit ages at job start (``analysis.fleet_age``: 'stationary', 'new' or AgeGroups) and
    ``fleet_age`` their labels, over the job horizon ``horizon_hours``
    (``with_fleet_age``; stationary by default).
    """

    classes: tuple[str, ...]
    rate: np.ndarray
    ci_low: np.ndarray | None = None
    ci_high: np.ndarray | None = None
    samples: np.ndarray | None = None
    source: str = "given"
    counts: dict[str, tuple[str, int]] | None = None
    events: np.ndarray | None = None
    origins: tuple[str, ...] | None = None
    laws: tuple[LifetimeModel, ...] | None = None
    law_rate: np.ndarray | None = None
    law_names: tuple[str, ...] | None = None
    age_laws: tuple[tuple[LifetimeModel, float] | None, ...] | None = None
    starts: tuple | None = None
    fleet_age: tuple[str, ...] | None = None
    horizon_hours: float | None = None

    def __post_init__(self):
        n = len(self.classes)
        fill = lambda name, value: object.__setattr__(self, name, value)
        fill("rate", np.asarray(self.rate, dtype=float).reshape(n))
        for name in ("ci_low", "ci_high", "events"):
            v = getattr(self, name)
            if v is not None:
                fill(name, np.asarray(v, dtype=float).reshape(n))
        if self.samples is not None:
            fill("samples", np.asarray(self.samples, dtype=float).reshape(n, -1))
        if self.laws is None:
            fill("laws", (Exponential.unit(),) * n)
        fill("law_rate", np.ones(n) if self.law_rate is None else np.asarray(self.law_rate, float))
        if self.law_names is None:
            fill("law_names", tuple(law.name for law in self.laws))
        if self.age_laws is None:
            fill("age_laws", (None,) * n)
        if self.starts is None:
            fill("starts", ("stationary",) * n)
        if self.fleet_age is None:
            fill("fleet_age", ("stationary",) * n)

    @classmethod
    def from_mtti(cls, mtti_hours: float) -> ClassRates:
        """One per-job pseudo-class with rate 1/M: no fit uncertainty."""
        return cls(("all",), np.array([1.0 / mtti_hours]), source="mtti override")

    def has_uncertainty(self) -> bool:
        if self.samples is not None:
            return True
        if self.ci_low is None or self.ci_high is None:
            return False
        return bool(
            np.any(
                np.isfinite(self.ci_low) & np.isfinite(self.ci_high) & (self.ci_high > self.ci_low)
            )
        )

    def sample(self, n: int, rng: np.random.Generator | int | None = 0) -> np.ndarray:
        """(n, classes) rate draws: resampled ``samples``, else lognormal from the CI."""
        rng = np.random.default_rng(rng)
        if self.samples is not None:
            idx = rng.integers(0, self.samples.shape[1], size=n)
            return self.samples[:, idx].T.copy()
        sigma = np.zeros(len(self.classes))
        none_seen = np.zeros(len(self.classes), dtype=bool)
        if self.ci_low is not None and self.ci_high is not None:
            lo, hi = self.ci_low, self.ci_high
            ok = np.isfinite(lo) & np.isfinite(hi) & (lo > 0) & (hi > lo)
            sigma[ok] = np.log(hi[ok] / lo[ok]) / (2 * Z95)
            # A zero lower bound with a positive point: take the upper bound as +1.96σ.
            zero = np.isfinite(hi) & (hi > 0) & ~ok & (self.rate > 0) & (hi > self.rate)
            sigma[zero] = np.log(hi[zero] / self.rate[zero]) / Z95
            # No events at all (point 0, upper bound > 0): a lognormal has no scale there, so
            # draw a half-normal whose 97.5% quantile is the upper bound.
            none_seen = np.isfinite(hi) & (hi > 0) & (self.rate <= 0)
        z = rng.standard_normal((n, len(self.classes)))
        out = self.rate[None, :] * np.exp(sigma[None, :] * z)
        if none_seen.any():
            out[:, none_seen] = np.abs(z[:, none_seen]) * (hi[none_seen] / HALF_NORMAL_Q975)
        return out

    def scaled(self, multipliers: dict[str, float]) -> ClassRates:
        """Rates (and their uncertainty) with some classes multiplied (what-if)."""
        m = np.array([multipliers.get(c, 1.0) for c in self.classes])
        return replace(
            self,
            rate=self.rate * m,
            ci_low=None if self.ci_low is None else self.ci_low * m,
            ci_high=None if self.ci_high is None else self.ci_high * m,
            samples=None if self.samples is None else self.samples * m[:, None],
        )


def llama3_rates() -> ClassRates:
    """Per-unit-hour rates that reproduce the Llama 3 mix on its own job (16,384 GPUs): the
    published table (``taxonomy.llama3_rates_frame``) spread over each class's units
    (``taxonomy.UNITS``: a node's 16 DIMMs share its host_memory rate), as a fit would be."""
    per_scope = rates_from_table(llama3_rates_frame(), source="llama3 mix")
    k = np.array([UNIT_COUNTS.get(c, DEFAULT_UNIT)[1] for c in per_scope.classes], float)
    return replace(
        per_scope.scaled(dict(zip(per_scope.classes, 1.0 / k, strict=True))), counts=None
    )


def rates_from_table(df: pl.DataFrame, source: str = "file", origin: str = "file") -> ClassRates:
    """ClassRates from a rates table (``RATES_CSV_COLUMNS``): one row per class, ``events`` in
    ``exposure_hours`` unit-hours of its ``unit`` (gpu | node | job), so the rate is per GPU-,
    node- or job-hour and the class counts once per GPU, node or job. 95% CIs are Garwood's.
    Raises ValueError (one line) on a missing column or a bad value."""
    missing = [c for c in RATES_CSV_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(
            f"rates table lacks column(s) {', '.join(missing)}; want {', '.join(RATES_CSV_COLUMNS)}"
        )
    try:
        t = df.select(
            pl.col("component_class").cast(pl.Utf8).str.strip_chars(),
            pl.col("events").cast(pl.Float64, strict=True),
            pl.col("exposure_hours").cast(pl.Float64, strict=True),
            pl.col("unit").cast(pl.Utf8).str.strip_chars().str.to_lowercase(),
        )
    except pl.exceptions.PolarsError:
        raise ValueError("rates table: events and exposure_hours must be numbers") from None
    bad = t.filter(
        pl.col("component_class").is_null()
        | (pl.col("component_class") == "")
        | ~pl.col("unit").is_in(UNIT_SCOPES)
        | pl.col("events").is_null()
        | (pl.col("events") < 0)
        | pl.col("exposure_hours").is_null()
        | (pl.col("exposure_hours") <= 0)
    )
    if bad.height:
        raise ValueError(
            f"rates table row {bad.row(0)} is invalid: want a class, events >= 0, "
            f"exposure_hours > 0 and unit one of {'|'.join(UNIT_SCOPES)}"
        )
    if t.height == 0:
        raise ValueError("rates table has no rows")
    dup = t.filter(pl.col("component_class").is_duplicated())
    if dup.height:
        raise ValueError(f"rates table lists class {dup['component_class'][0]!r} twice")
    events, exposure = t["events"].to_numpy(), t["exposure_hours"].to_numpy()
    rate, lo, hi = poisson_rate_ci(events, exposure)
    names = tuple(t["component_class"].to_list())
    return ClassRates(
        names,
        rate,
        lo,
        hi,
        source=source,
        counts={c: (u, 1) for c, u in zip(names, t["unit"].to_list(), strict=True)},
        events=events,
        origins=(origin,) * len(names),
    )


def selected_law(row: dict) -> tuple[LifetimeModel, float, str]:
    """(law, law_rate, name) of a selected ``failure_rates`` row: the registered model with
    its fitted ``params`` (``analysis.lifetime_models``) at its own rate 1 / mean, or the
    mean-1 exponential at law_rate 1 where the row's rate is the answer (a memoryless law, no
    usable parameters, or a law without a finite mean, e.g. a log-logistic of shape <= 1)."""
    name = (row.get("model") or Exponential.name).lower()
    if model_mean(name, row.get("params")) is not None:
        law = lifetime_models.get(name).from_params(row.get("params") or "{}")
        if not law.memoryless:
            return law, law.rate(), name
    return Exponential.unit(), 1.0, Exponential.name


def rates_from_failure_rates(
    df: pl.DataFrame,
    stratum: str = "all",
    window: str = "all",
    samples: dict[str, np.ndarray] | None = None,
    seed: int = 0,
) -> ClassRates:
    """Adapter from the ``failure_rates`` table: the ``selected`` row of each class.

    The point is the selected row's own rate with its CI, the number the fit table and the
    report print (``analysis.survival``: the observed rate, events / exposure, unless another
    model is clearly better). Its law goes to ``laws`` for the Monte Carlo and the fleet-age
    rates (``selected_law``); an exponential class whose Weibull shape shows an age trend
    (``age_shape``) keeps its fitted Weibull in ``age_laws``, run at the class's observed
    rate, so a new or observed fleet age moves its rate while a stationary one keeps it.
    Draws: ``samples`` (class -> per-unit-hour draws of equal length, taken as given) when
    given, else the fit's own draws (``analysis.survival.rate_samples``: rate posterior, and
    the family by Akaike weight) when the table has events and exposure; lognormal from the CI
    only for classes with neither.
    """
    if df.height == 0:
        raise ValueError("failure_rates has no rows")
    sel = (
        selected_rates(df, window, stratum)
        .filter(pl.col("rate_per_1k_unit_days").is_not_null())
        .unique("component_class", keep="first", maintain_order=True)
    )
    if sel.height == 0:
        raise ValueError("failure_rates has no selected rows with a rate")
    age_model = lifetime_models.age_trend_model()
    age_rows = dict(
        df.filter(
            (pl.col("window") == window) & (pl.col("stratum").fill_null("all") == stratum)
            & (pl.col("model") == age_model.name) & pl.col("converged").fill_null(True)
        ).select("component_class", "params").iter_rows()
    )  # fmt: skip
    laws, law_rates, law_names, age_laws = [], [], [], []
    for row in sel.iter_rows(named=True):  # one row per class
        law, law_rate, name = selected_law(row)
        age = None
        if law.memoryless and age_shape(row) != 1.0:
            params = age_rows.get(row["component_class"])
            if params:
                trend = age_model.from_params(params)
                k = getattr(trend, age_model.age_trend_parameter)
                name = (
                    f"{name}; age trend: {age_model.name} {age_model.age_trend_parameter} {k:.2f}"
                )
                age = (trend, row["rate_per_1k_unit_days"] / HOURS_PER_1K_UNIT_DAYS)
        laws.append(law)
        law_rates.append(law_rate)
        law_names.append(name)
        age_laws.append(age)
    names = tuple(sel["component_class"].to_list())
    per_hour = lambda c: sel[c].cast(pl.Float64).to_numpy() / HOURS_PER_1K_UNIT_DAYS
    events = sel["n_events"].cast(pl.Float64).to_numpy() if "n_events" in sel.columns else None
    out = ClassRates(
        names, per_hour("rate_per_1k_unit_days"), per_hour("rate_ci_low"),
        per_hour("rate_ci_high"), source="fitted", events=events,
        origins=("fit",) * len(names), laws=tuple(laws), law_rate=law_rates,
        law_names=tuple(law_names), age_laws=tuple(age_laws),
    )  # fmt: skip
    if samples is None and {"n_events", "exposure_hours"} <= set(df.columns):
        samples = rate_samples(df, FIT_DRAWS, np.random.default_rng(seed), stratum, window) or None
    if samples:
        # Fit-based draws (e.g. analysis.survival.rate_samples) where given; lognormal from
        # the CI for the other classes, so every class has the same number of draws.
        n = len(next(iter(samples.values())))
        fill = out.sample(n, seed).T
        rows = [
            np.asarray(samples[c], float) if c in samples else fill[i] for i, c in enumerate(names)
        ]
        out = replace(out, samples=np.vstack(rows))
    return out


def exposure_hours(attempts: pl.DataFrame, gpus_per_node: int = GPUS_PER_NODE) -> dict[str, float]:
    """Unit-hours of exposure in ``job_attempts`` per unit scope: GPU-hours, node-hours (nodes
    from n_nodes, else the node list, else ceil(n_gpus / gpus_per_node)) and job-hours."""
    ran = attempts.filter(
        pl.col("start_time").is_not_null()
        & pl.col("end_time").is_not_null()
        & (pl.col("end_time") > pl.col("start_time"))
    )
    hours = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 3.6e9
    nodes = pl.coalesce(
        pl.col("n_nodes").cast(pl.Float64),
        pl.col("nodes").list.len().cast(pl.Float64).replace(0, None),
        (pl.col("n_gpus").cast(pl.Float64) / gpus_per_node).ceil(),
    )
    row = ran.select(
        (pl.col("n_gpus").cast(pl.Float64).fill_null(0) * hours).sum().alias("gpu"),
        (nodes.fill_null(0) * hours).sum().alias("node"),
        hours.sum().alias("job"),
    ).row(0, named=True)
    return {k: float(v or 0.0) for k, v in row.items()}


JOB_SIZE_EDGES = (8, 64, 512, 4096)  # GPUs: the job-size classes 1-8, 9-64, ..., 4097+


def job_size_labels() -> list[str]:
    lo = (0, *JOB_SIZE_EDGES)
    return [f"{a + 1}-{b}" for a, b in zip(lo, JOB_SIZE_EDGES, strict=False)] + [
        f"{JOB_SIZE_EDGES[-1] + 1}+"
    ]


def _size_class(col: str = "n_gpus") -> pl.Expr:
    """Index of a job's size class (``JOB_SIZE_EDGES``); null without a GPU count."""
    n = pl.col(col).cast(pl.Float64)
    return pl.sum_horizontal(*(n > e for e in JOB_SIZE_EDGES)).cast(pl.Int64).alias("_size")


def workload_row(
    unplanned: pl.DataFrame, attempts: pl.DataFrame, n_gpus: int
) -> tuple[dict, str] | None:
    """The jobs' own failures (workload domain) as a rate per job-hour, measured on the jobs of
    the projected job's size class (``JOB_SIZE_EDGES``; the nearest class that ran, the larger
    on a tie, when none of that size did): a job's own bug or OOM ends it once whatever its
    GPU count, so pooling per GPU-hour would multiply small jobs' failures by a large job's
    GPUs. Returns (rates-table row, where it was measured) or None when no job ran."""
    hours = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 3.6e9
    ran = attempts.filter(pl.col("end_time") > pl.col("start_time")).with_columns(_size_class())
    expo = dict(ran.group_by("_size").agg(hours.sum()).drop_nulls().iter_rows())
    expo = {k: v for k, v in expo.items() if v > 0}
    if not expo:
        return None
    target = int(np.searchsorted(JOB_SIZE_EDGES, n_gpus, side="left"))
    k = min(expo, key=lambda j: (abs(j - target), -j))
    sized = unplanned.with_columns(_size_class())
    events = sized.filter(pl.col("_size") == k).height
    unsized = sized.filter(pl.col("_size").is_null()).height
    where = f"interruptions, jobs of {job_size_labels()[k]} GPUs"
    if unsized:
        where += f" ({unsized} without a GPU count not counted)"
    row = {"component_class": WORKLOAD, "events": events, "exposure_hours": expo[k], "unit": "job"}
    return row, where


def interruption_class_rates(
    interruptions: pl.DataFrame,
    attempts: pl.DataFrame,
    scope: str = DEFAULT_SCOPE,
    exclude=(),
    gpus_per_node: int = GPUS_PER_NODE,
    n_gpus: int = TARGET_GPUS,
) -> ClassRates | None:
    """Per-class rates measured from unplanned ``interruptions`` over the exposure of
    ``job_attempts``, for the classes not in ``exclude`` (those with a hardware fit).

    Each class is a rate per unit-hour of its scope in ``taxonomy.UNITS`` (software per
    GPU-hour, host_os / unknown per node-hour, ...). ``infrastructure`` counts every event
    outside the workload domain; ``all`` adds the workload domain (exit codes, OOM) as the
    pseudo-class ``workload``, per job-hour of jobs the size of an ``n_gpus`` job
    (``workload_row``); ``hardware`` measures nothing here (returns None, as when no event
    qualifies or nothing ran)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
    if scope == "hardware" or interruptions.height == 0:
        return None
    expo = exposure_hours(attempts, gpus_per_node)
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False))
    workload = pl.col("failure_domain").fill_null("unknown") == WORKLOAD_DOMAIN
    cls = (
        pl.when(workload)
        .then(pl.lit(WORKLOAD))
        .otherwise(pl.col("cause_class").fill_null("unknown"))
    )
    counted = unplanned.with_columns(cls.alias("_class"))
    own = workload_row(counted.filter(pl.col("_class") == WORKLOAD), attempts, n_gpus)
    counted = counted.filter(pl.col("_class") != WORKLOAD)
    per = (
        counted.filter(~pl.col("_class").is_in(list(exclude)))
        .group_by("_class")
        .agg(pl.len().alias("events"))
        .sort(["events", "_class"], descending=[True, False])
    )
    unit = [UNITS.get(c, DEFAULT_UNIT)[0] for c in per["_class"].to_list()]
    table = per.select(
        pl.col("_class").alias("component_class"),
        pl.col("events").cast(pl.Int64),
        pl.Series("exposure_hours", [expo[u] for u in unit], dtype=pl.Float64),
        pl.Series("unit", unit, dtype=pl.Utf8),
    )
    if scope == "all" and own is not None and own[0]["events"] > 0:
        table = pl.concat([table, pl.DataFrame([own[0]], schema=table.schema)])
    if table.height == 0 or (table["exposure_hours"] <= 0).any():
        return None  # nothing measured, or interruptions without job time to measure them by
    out = rates_from_table(table, source="interruptions", origin="interruptions")
    origins = tuple(
        own[1] if c == WORKLOAD else o for c, o in zip(out.classes, out.origins, strict=True)
    )
    return replace(out, origins=origins)


def combine(*parts: ClassRates | None) -> ClassRates:
    """One ClassRates from several (fits + measured interruptions); classes must not repeat.
    Rate uncertainty: each part's draws (or its CI, as lognormal draws) joined per class."""
    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    names = sum((p.classes for p in parts), ())
    if len(set(names)) != len(names):
        raise ValueError("combined rates repeat a class")

    def cat(attr, fill):
        vals = [getattr(p, attr) for p in parts]
        return np.concatenate(
            [
                np.full(len(p.classes), fill) if v is None else v
                for p, v in zip(parts, vals, strict=True)
            ]
        )

    samples = None
    if any(p.samples is not None for p in parts):
        n = max(p.samples.shape[1] for p in parts if p.samples is not None)
        samples = np.vstack([p.sample(n, i).T for i, p in enumerate(parts)])
    counts = {}
    for p in parts:
        counts.update(p.counts or {})
    joined = lambda attr: sum((getattr(p, attr) for p in parts), ())
    return ClassRates(
        names,
        cat("rate", np.nan),
        cat("ci_low", np.nan),
        cat("ci_high", np.nan),
        samples=samples,
        source=" + ".join(dict.fromkeys(p.source for p in parts)),
        counts=counts or None,
        events=cat("events", np.nan),
        origins=sum((p.origins or (p.source,) * len(p.classes) for p in parts), ()),
        laws=joined("laws"),
        law_rate=cat("law_rate", np.nan),
        law_names=joined("law_names"),
        age_laws=joined("age_laws"),
    )


def scoped_rates(
    wh, scope: str = DEFAULT_SCOPE, gpus_per_node: int = GPUS_PER_NODE, n_gpus: int = TARGET_GPUS
) -> ClassRates:
    """The rates a projection of ``scope`` uses: the hardware fits (``failure_rates``) plus,
    for infrastructure / all, the classes measured in ``interruptions`` (the jobs' own failures
    of scope all from jobs the size of ``n_gpus``). Raises ValueError when there is nothing to
    project from."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
    fr = wh.read("failure_rates")
    fits = None
    if fr.height or scope == "hardware":
        try:
            fits = rates_from_failure_rates(fr)
        except ValueError:
            if scope == "hardware":
                raise
    measured = interruption_class_rates(
        wh.read("interruptions"), wh.read("job_attempts"), scope,
        exclude=() if fits is None else fits.classes, gpus_per_node=gpus_per_node, n_gpus=n_gpus,
    )  # fmt: skip
    if fits is None and measured is None:
        raise ValueError("failure_rates has no rows and no interruptions were measured")
    return combine(fits, measured)


def observed_ages(wh, classes=None) -> dict[str, AgeGroups]:
    """Per class, the ages (hours) of the units in service at the end of the observation
    window, from ``component_lifetimes``: units without a failure whose observation reaches
    the window end (``observation.stored_window``, else the class's latest ``observed_to``)
    within a day, aged on to that end; summarised as ``fleet_age.AgeGroups`` (quantiles).
    Classes with no such unit are absent (projected stationary)."""
    from analysis.observation import stored_window

    lt = wh.read("component_lifetimes")
    if lt.height == 0:
        return {}
    win = stored_window(wh)
    if win is not None and win.observed_to is not None:
        t = win.observed_to
        tz = lt.schema["observed_to"].time_zone  # naive timestamps are UTC
        if tz is None and t.tzinfo is not None:
            t = t.astimezone(UTC).replace(tzinfo=None)
        elif tz is not None and t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        end = pl.lit(t).cast(lt.schema["observed_to"])
    else:
        end = pl.col("observed_to").max().over("component_class")
    alive = lt.filter(
        ~pl.col("event").fill_null(False)
        & pl.col("observed_to").is_not_null()
        & pl.col("duration").is_not_null()
        & (pl.col("observed_to") >= end - pl.duration(days=1))
    ).select(
        "component_class",
        (pl.col("duration") + (end - pl.col("observed_to")).dt.total_microseconds() / 3.6e9).alias(
            "age"
        ),
    )
    if classes is not None:
        alive = alive.filter(pl.col("component_class").is_in(list(classes)))
    return {
        c: AgeGroups.from_ages(g["age"].to_numpy())
        for (c,), g in alive.group_by("component_class")
        if g.height
    }


def with_fleet_age(
    rates: ClassRates,
    fleet_age: str = DEFAULT_FLEET_AGE,
    horizon_hours: float | None = None,
    ages: dict[str, AgeGroups] | None = None,
) -> ClassRates:
    """Rates of a job of ``horizon_hours`` whose units start at ``fleet_age``
    (``fleet_age.FLEET_AGES``): per class, expected failures per unit position over the
    horizon (renewal with replacement by new units, ``fleet_age.expected_failures``) / horizon.
    'stationary' keeps 1 / mean; 'new' starts every unit at age 0; 'observed' takes each
    class's ``ages`` (``observed_ages``), and a class without ages stays stationary (said in
    ``fleet_age``). Exponential classes have no age effect. The CI and draws move with the
    rate (same relative uncertainty); the Monte Carlo then draws the same process."""
    if fleet_age not in FLEET_AGES:
        raise ValueError(f"unknown fleet age {fleet_age!r}; use one of {', '.join(FLEET_AGES)}")
    ages = ages or {}
    n = len(rates.classes)
    if fleet_age != "stationary" and not (horizon_hours and horizon_hours > 0):
        raise ValueError("a fleet age other than stationary needs a positive job horizon")
    laws, law_rate = list(rates.laws), rates.law_rate.copy()
    ratio, starts, labels = np.ones(n), [], []
    for i, c in enumerate(rates.classes):
        r = float(rates.rate[i])
        if fleet_age != "stationary" and rates.age_laws[i] is not None:
            laws[i], law_rate[i] = rates.age_laws[i]
        start = fleet_age
        if fleet_age == "observed":
            start = ages.get(c, "stationary")
        label = start if isinstance(start, str) else "observed"
        if fleet_age == "observed" and not isinstance(start, AgeGroups):
            label = "stationary (no observed ages)"
        if start != "stationary" and not laws[i].memoryless and r > 0:
            f = r / law_rate[i]  # speed-up of the law by what-ifs: time runs f times faster
            if isinstance(start, AgeGroups):
                start = AgeGroups(start.ages * f, start.weights)
            eff = expected_failures(laws[i], horizon_hours * f, start) / horizon_hours
            ratio[i] = eff / r
            law_rate[i] = eff / f
        starts.append(start if not isinstance(start, AgeGroups) else ages[c])
        labels.append(label)
    return replace(
        rates.scaled(dict(zip(rates.classes, ratio, strict=True))),
        laws=tuple(laws),
        law_rate=law_rate,
        starts=tuple(starts),
        fleet_age=tuple(labels),
        horizon_hours=horizon_hours,
    )


def rate_rows(rates: ClassRates) -> list[dict]:
    """Per class: rate per unit-hour with its 95% CI, unit scope and count, source, events,
    the lifetime model and the fleet age its rate is for."""
    table = {**UNIT_COUNTS, **(rates.counts or {})}
    out = []
    for i, c in enumerate(rates.classes):
        scope, k = table.get(c, DEFAULT_UNIT)
        out.append(
            {
                "component_class": c,
                "rate_per_unit_hour": float(rates.rate[i]),
                "rate_ci_low": None
                if rates.ci_low is None or not np.isfinite(rates.ci_low[i])
                else float(rates.ci_low[i]),
                "rate_ci_high": None
                if rates.ci_high is None or not np.isfinite(rates.ci_high[i])
                else float(rates.ci_high[i]),
                "unit": scope,
                "units_per_scope": int(k),
                "source": (rates.origins or (rates.source,) * len(rates.classes))[i],
                "events": None
                if rates.events is None or not np.isfinite(rates.events[i])
                else int(rates.events[i]),
                "model": rates.law_names[i],
                "fleet_age": rates.fleet_age[i],
            }
        )
    return out


# ----------------------------------------------------------------------------- Λ(N)
def unit_counts(
    classes, n_gpus, gpus_per_node=8, counts: dict[str, tuple[str, int]] | None = None
) -> np.ndarray:
    """(classes, scenarios) unit counts n_c(N). Unknown classes count once per node."""
    table = {**UNIT_COUNTS, **(counts or {})}
    n = np.atleast_1d(np.asarray(n_gpus, dtype=float))
    g = np.broadcast_to(np.asarray(gpus_per_node, dtype=float), n.shape)
    nodes = np.ceil(n / g)
    out = np.empty((len(classes), n.size))
    for i, c in enumerate(classes):
        scope, k = table.get(c, DEFAULT_UNIT)
        out[i] = k * {"gpu": n, "node": nodes, "job": np.ones_like(n)}[scope]
    return out


def interruption_rate(
    rates: ClassRates | np.ndarray,
    n_gpus,
    gpus_per_node=8,
    classes=None,
    counts: dict[str, tuple[str, int]] | None = None,
) -> np.ndarray:
    """Λ(N) per hour. ``rates`` is a ClassRates or a (..., classes) array of per-unit rates."""
    if isinstance(rates, ClassRates):
        classes, r = rates.classes, rates.rate
        counts = {**(rates.counts or {}), **(counts or {})}
    else:
        r = np.asarray(rates, dtype=float)
    u = unit_counts(classes, n_gpus, gpus_per_node, counts)  # (C, K)
    return r @ u


def young_interval(ckpt_hours, mtti_hours):
    return np.sqrt(2.0 * np.asarray(ckpt_hours) * np.asarray(mtti_hours))


def daly_interval(ckpt_hours, mtti_hours):
    """Daly (2006) higher-order optimum; M itself when δ >= 2M."""
    d, m = np.broadcast_arrays(np.asarray(ckpt_hours, float), np.asarray(mtti_hours, float))
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def useful_fraction(interval_hours, ckpt_hours, restart_hours, mtti_hours):
    """T_s / T_wall with Daly's exact expected wall time (exponential failures)."""
    tau, d, r, m = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (interval_hours, ckpt_hours, restart_hours, mtti_hours))
    )
    with np.errstate(over="ignore", invalid="ignore"):
        wall_per_work = m * np.exp(r / m) * np.expm1((tau + d) / m) / tau
        return np.where(np.isfinite(wall_per_work), 1.0 / wall_per_work, 0.0)


# ----------------------------------------------------------------------------- projections
@dataclass
class Projection:
    """Arrays over scenarios (same length as ``n_gpus``)."""

    n_gpus: np.ndarray
    mtti_hours: np.ndarray
    young_hours: np.ndarray
    daly_hours: np.ndarray
    interval_hours: np.ndarray
    goodput: np.ndarray
    goodput_ci_low: np.ndarray
    goodput_ci_high: np.ndarray
    mtti_ci_low: np.ndarray
    mtti_ci_high: np.ndarray
    notes: dict = field(default_factory=dict)


def project(
    rates: ClassRates,
    n_gpus,
    gpus_per_node=GPUS_PER_NODE,
    ckpt_cost_s=CKPT_COST_S,
    restart_s=RESTART_S,
    interval_hours=None,
    ckpt_blocking_s=None,
    samples: int = 400,
    seed: int = 0,
    counts: dict[str, tuple[str, int]] | None = None,
) -> Projection:
    """Analytic goodput for each scenario, with bands from rate uncertainty.

    ``interval_hours`` None = Daly's interval of the point estimate (δ = blocking part); the
    band keeps that chosen interval fixed, so it shows what the uncertain MTTI does to a job
    that has committed to an interval. ``ckpt_blocking_s`` < ``ckpt_cost_s`` models an
    asynchronous checkpoint (only the blocking part stalls training).
    """
    n = np.atleast_1d(np.asarray(n_gpus, dtype=float))
    d_h = np.asarray(ckpt_cost_s if ckpt_blocking_s is None else ckpt_blocking_s, float) / 3600.0
    r_h = np.asarray(restart_s, float) / 3600.0
    u = unit_counts(rates.classes, n, gpus_per_node, {**(rates.counts or {}), **(counts or {})})
    lam = rates.rate @ u
    m = 1.0 / lam
    young = young_interval(d_h, m) * np.ones_like(n)
    daly = daly_interval(d_h, m) * np.ones_like(n)
    tau = daly if interval_hours is None else np.asarray(interval_hours, float) * np.ones_like(n)
    g = useful_fraction(tau, d_h, r_h, m)
    if rates.has_uncertainty() and samples > 0:
        draws = rates.sample(samples, seed)  # (S, C)
        ms = 1.0 / (draws @ u)  # (S, K)
        gs = useful_fraction(tau[None, :], d_h, r_h, ms)
        # the point is the plug-in (a class with no failure at rate 0, its draws all above 0):
        # a band whose draws all lie on one side of it reaches to the point
        glo, ghi = np.percentile(gs, [2.5, 97.5], axis=0)
        glo, ghi = np.minimum(glo, g), np.maximum(ghi, g)
        mlo, mhi = np.percentile(ms, [2.5, 97.5], axis=0)
        mlo, mhi = np.minimum(mlo, m), np.maximum(mhi, m)
        how = (
            "the fits' rate posteriors" if rates.samples is not None else "the fit CIs (lognormal)"
        )
        note = f"band: 2.5-97.5% over {samples} rate draws from {how}"
    else:
        glo, ghi, mlo, mhi = g, g, m, m
        note = "no fit uncertainty (rates given without CI): band = point"
    return Projection(n, m, young, daly, tau, g, glo, ghi, mlo, mhi, {"band": note})


def scale_points(
    lo: int = 8, hi: int = 200_000, per_decade: int = 8, gpus_per_node: int = 8
) -> np.ndarray:
    """Log-spaced job sizes from ``lo`` to ``hi`` GPUs, rounded to whole nodes."""
    pts = np.logspace(np.log10(lo), np.log10(hi), round(per_decade * np.log10(hi / lo)) + 1)
    pts = np.unique(np.maximum(gpus_per_node, np.round(pts / gpus_per_node) * gpus_per_node))
    return pts.astype(np.int64)


def projection_rows(
    p: Projection,
    scenario: str,
    method: str,
    rates_source: str,
    gpus_per_node: int,
    ckpt_cost_s: float,
    restart_s: float,
    spares: int | None = None,
    knob: str | None = None,
    knob_value=None,
    scope: str | None = None,
) -> pl.DataFrame:
    """``goodput_projections`` rows for a Projection (one per scenario)."""
    k = p.n_gpus.size
    kv = [None] * k if knob_value is None else np.broadcast_to(np.asarray(knob_value, float), (k,))
    return pl.DataFrame(
        {
            "scenario": [scenario] * k,
            "scope": [scope] * k,
            "method": [method] * k,
            "rates_source": [rates_source] * k,
            "n_gpus": p.n_gpus.astype(np.int64),
            "gpus_per_node": [int(gpus_per_node)] * k,
            "ckpt_cost_s": np.broadcast_to(np.asarray(ckpt_cost_s, float), (k,)),
            "restart_s": np.broadcast_to(np.asarray(restart_s, float), (k,)),
            "interval_hours": p.interval_hours,
            "spares": [spares] * k,
            "knob": [knob] * k,
            "knob_value": kv,
            "mtti_hours": p.mtti_hours,
            "mtti_ci_low": p.mtti_ci_low,
            "mtti_ci_high": p.mtti_ci_high,
            "optimal_interval_hours": p.daly_hours,
            "young_interval_hours": p.young_hours,
            "goodput": p.goodput,
            "goodput_ci_low": p.goodput_ci_low,
            "goodput_ci_high": p.goodput_ci_high,
        },
        schema_overrides={
            "spares": pl.Int32,
            "knob": pl.Utf8,
            "knob_value": pl.Float64,
            "scope": pl.Utf8,
        },
    )
