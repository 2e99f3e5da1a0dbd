"""Where a projection's ``ClassRates`` come from: the ``failure_rates`` fits (the selected row of
each class, with its law and the fit's own rate draws), the classes measured in
``interruptions`` over the exposure of ``job_attempts``, a rates table (``goodput project
--rates``), the published Llama 3 mix, and their combination per interruption scope.

Rates read from ``failure_rates`` carry samples from the fit itself
(``analysis.survival.rate_samples``: the Gamma(events + 1/2, exposure) posterior of each
class's rate, times the rate over the window of a candidate family drawn by Akaike weight,
relative to the observed one); a rates table's classes carry Garwood's exact Poisson CI.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import TARGET_GPUS
from analysis.class_rates import UNIT_COUNTS
from analysis.class_rates import ClassRates
from analysis.headline import selected_rates
from analysis.lifetime_models.base import LifetimeModel
from analysis.lifetime_models.exponential import Exponential
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.slowness.at_scale import from_warehouse
from analysis.survival import age_shape
from analysis.survival import model_mean
from analysis.survival import rate_samples
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.taxonomy import DEFAULT_UNIT
from analysis.taxonomy import SCOPES
from analysis.taxonomy import UNIT_SCOPES
from analysis.taxonomy import UNITS
from analysis.taxonomy import WORKLOAD
from analysis.taxonomy import WORKLOAD_DOMAIN
from analysis.taxonomy import llama3_rates_frame

FIT_DRAWS = 2000  # posterior rate draws kept per class (resampled for each band)
RATES_CSV_COLUMNS = ("component_class", "events", "exposure_hours", "unit")


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
    its fitted ``params`` (``analysis.lifetime_models``) at its long-run rate 1 / mean (a
    stationary fleet runs it faster or slower so that rate is the row's), or the mean-1
    exponential at law_rate 1 where the row's rate is the answer (a memoryless law, no usable
    parameters, or a law without a finite mean, e.g. a log-logistic of shape <= 1)."""
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
    report print (``analysis.survival``: the rate the class showed over the window; the
    observed rate, events / exposure, unless another model is clearly better). Its law goes to
    ``laws`` for the Monte Carlo (``selected_law``). A new or observed fleet age runs a law at
    its own time scale (``age_laws``, with the row's rate as the rate it has there): the
    selected law where it is not memoryless; for an exponential class whose Weibull shape
    shows an age trend (``age_shape``), that fitted Weibull; a stationary fleet keeps the
    row's rate.
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
        if not law.memoryless:
            age = (law, row["rate_per_1k_unit_days"] / HOURS_PER_1K_UNIT_DAYS)
        elif age_shape(row) != 1.0:
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

    def per_hour(c):
        return sel[c].cast(pl.Float64).to_numpy() / HOURS_PER_1K_UNIT_DAYS

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

    def joined(attr):
        return sum((getattr(p, attr) for p in parts), ())

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
    project from. They carry the fleet's fail-slow process where ``failure_rates`` has a
    fitted ``fail_slow`` row (``at_scale.from_warehouse``)."""
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
    return replace(combine(fits, measured), fail_slow=from_warehouse(fr, wh.read("slow_periods")))


def read_rates_csv(path) -> ClassRates:
    """``goodput project --rates FILE.csv``: a rates table (component_class, events,
    exposure_hours, unit). Raises ValueError with one line on a bad file."""
    try:
        df = pl.read_csv(path, infer_schema_length=None)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise ValueError(f"cannot read rates file {path}: {str(exc).splitlines()[0]}") from None
    return rates_from_table(df, source=f"file {path}")
