"""Availability and repair: per system and per node, failures, MTBF, MTTR and availability with
their CIs; repair-time and time-between-failure distributions fitted by lifelines; root causes by
count and by downtime. Tables ``availability``, ``repair_fits`` and ``root_causes``.

Input: outage records (``outages``), each one failure with its repair where known, from
``failures`` (failure logs: LANL, tickets, RMA logs, Titan's events; health-event streams'
pairs) and from ``node_events`` (a node going down / drained / not ready until it resumes:
source ``node_events``, cause = the state's reason). A node still out, or a failure still
``open`` at the end of its stream, is repaired at the end of observation, since its downtime
inside the window is known.

Per (source, system), over its observation span [first start, last end] (or the window given):
- ``nodes``: the system's size where the source gives it (``system_nodes``), else the hosts
  seen. Node-hours = span x nodes.
- MTBF of the system = span / failures, with the exact Poisson CI (``poisson_rate_ci``);
  per-node normalised rate = failures per node-year (and per processor-year where the source
  gives processors), same CI: systems of different sizes compare on these.
- MTTR = mean known downtime, with its median and 90th percentile (linear interpolation between
  order statistics, numpy's default). Availability = 1 - node-hours down / node-hours: the
  fraction of node-hours up, in "nines" too (-log10 of the unavailability); a node down for two
  faults at once is down once (``down_hours``), while each fault keeps its repair time. Both
  only when every failure's repair is known (else null: a repair time is never invented). 95%
  CIs by a compound-Poisson bootstrap (each failure resampled with a Poisson(1) weight,
  ``BOOTSTRAP`` times), which carries both the number of failures and the spread of repair
  times.
- Per node the same numbers (span x 1 node), without fits.
- ``repair_fits``: lognormal, Weibull and exponential fitted to the positive repair times
  (quantity 'repair') and to the positive gaps between consecutive failure starts of the system
  (quantity 'tbf') by maximum likelihood (``fit_durations``: the project's lifetime models,
  which agree with lifelines' fitters and are much faster over many systems; ``engine=
  'lifelines'`` uses lifelines itself), parameters with 95% CIs, AIC, ``selected`` = lowest AIC;
  zero durations (a repair logged in the minute it began, simultaneous failures) are left out
  of the fits and counted. The Weibull shape of the TBF is also on the system's
  ``availability`` row: < 1 (its CI entirely below 1) is a decreasing hazard, failures that
  cluster in time.
- ``root_causes``: failures and downtime per cause per system and over all systems of a
  source (``system`` null), with their shares; a record without a cause counts as cause null.
"""

from __future__ import annotations

import json
import warnings
from datetime import datetime

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.lifetime_models.base import Sample
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.status import MissingInputs
from analysis.survival import fit_model
from warehouse.schemas import TABLES
from warehouse.schemas import conform

BOOTSTRAP = 400
SEED = 29
HOURS_PER_YEAR = 8760.0
DOWN = ("down", "drain", "not_ready")
UP = ("resume", "ready")
FITTED = ("lognormal", "weibull", "exponential")
MIN_FIT = 5  # positive durations needed to fit
OUTAGE_COLUMNS = {
    "source": pl.Utf8,
    "system": pl.Utf8,
    "host": pl.Utf8,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "downtime_hours": pl.Float64,
    "cause": pl.Utf8,
    "system_nodes": pl.Int32,
    "system_processors": pl.Int32,
}


def node_outages(node_events: pl.DataFrame, observed_to: datetime | None = None) -> pl.DataFrame:
    """A node's outages from its state changes: the first down / drain / not_ready while up
    starts one, the next resume / ready ends it (still out at the end: ends at ``observed_to``,
    else at the latest event of the data)."""
    ev = node_events.filter(
        pl.col("event").is_in(DOWN + UP)
        & pl.col("host").is_not_null()
        & pl.col("time").is_not_null()
    )
    if ev.height == 0:
        return pl.DataFrame(schema=OUTAGE_COLUMNS)
    end_of_data = observed_to or ev["time"].max()
    ev = ev.sort("cluster", "host", "time").with_columns(out=pl.col("event").is_in(DOWN))
    prev_out = pl.col("out").shift(1).over("cluster", "host").fill_null(False)
    ev = ev.with_columns(starts=pl.col("out") & ~prev_out, ends=~pl.col("out") & prev_out)
    ev = ev.with_columns(k=pl.col("starts").cast(pl.Int32).cum_sum().over("cluster", "host"))
    out = (
        ev.filter(pl.col("k") > 0)
        .group_by("cluster", "host", "k")
        .agg(
            start=pl.col("time").filter("starts").first(),
            end=pl.col("time").filter("ends").first(),
            cause=pl.col("reason").filter("starts").first(),
        )
        .with_columns(end=pl.coalesce("end", pl.lit(end_of_data)))
        .filter(pl.col("end") >= pl.col("start"))
    )
    return out.select(
        source=pl.lit("node_events"),
        system="cluster",
        host="host",
        start="start",
        end="end",
        downtime_hours=(pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9,
        cause="cause",
        system_nodes=pl.lit(None, pl.Int32),
        system_processors=pl.lit(None, pl.Int32),
    ).cast(OUTAGE_COLUMNS)


def outages(
    failures: pl.DataFrame, node_events: pl.DataFrame, observed_to: datetime | None = None
) -> pl.DataFrame:
    """Every failure with its repair (downtime null where unknown), from both inputs. A failure
    still ``open`` at the end of its event stream ends, as a node still out does, at
    ``observed_to``, else at the latest time of its system's failure records: its downtime
    inside the window is known."""
    data_end = pl.coalesce(
        pl.lit(observed_to, pl.Datetime("us")),
        pl.max_horizontal("start_time", "end_time").max().over("system"),
    )
    still_out = pl.col("open").fill_null(False)
    end = pl.when(still_out).then(data_end).otherwise("end_time")
    logged = failures.select(
        source=pl.lit("failures"),
        system="system",
        host="host",
        start="start_time",
        end=end,
        downtime_hours=pl.when(still_out)
        .then((end - pl.col("start_time")).dt.total_microseconds() / 3.6e9)
        .otherwise("downtime_hours"),
        cause="cause",
        system_nodes="system_nodes",
        system_processors="system_processors",
    ).cast(OUTAGE_COLUMNS)
    return pl.concat([logged, node_outages(node_events, observed_to)]).filter(
        pl.col("start").is_not_null()
        & (pl.col("end").is_null() | (pl.col("end") >= pl.col("start")))
    )


def tbf_reading(ci_low: float | None, ci_high: float | None) -> str | None:
    """Plain reading of the Weibull shape CI of a system's times between failures."""
    if ci_low is None or ci_high is None or not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return None
    if ci_high < 1.0:
        return "decreasing hazard: failures cluster in time"
    if ci_low > 1.0:
        return "increasing hazard: failures more regular than random"
    return "about constant: failures arrive at random (Poisson)"


# ----------------------------------------------------------------------------- bootstrap
def _bootstrap(
    group: np.ndarray,
    values: np.ndarray,
    n_groups: int,
    rng: np.random.Generator,
    chunk: int = 20_000,
):
    """Per group (0..n_groups-1; ``group`` ascending), BOOTSTRAP replicates of (the sums of each
    column of ``values`` (rows x columns), sum of weights) with one Poisson(1) weight per row and
    replicate; returns a (n_groups, columns, BOOTSTRAP) and a (n_groups, BOOTSTRAP) array."""
    v_sum = np.zeros((n_groups, values.shape[1], BOOTSTRAP))
    w_sum = np.zeros((n_groups, BOOTSTRAP))
    for i in range(0, group.size, chunk):
        g, v = group[i : i + chunk], values[i : i + chunk]
        w = rng.poisson(1.0, size=(g.size, BOOTSTRAP)).astype(np.float64)
        first = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])  # each group's first row in the chunk
        for j in range(v.shape[1]):
            v_sum[g[first], j] += np.add.reduceat(w * v[:, j, None], first, axis=0)
        w_sum[g[first]] += np.add.reduceat(w, first, axis=0)
    return v_sum, w_sum


def down_hours() -> pl.Expr:
    """Each outage's node-hours down not already counted by an earlier outage of its node: two
    faults of one node at once (a GPU and its NVLink, two conditions of a node) keep their own
    repair times, but the node is down once. The overlap with the node's outages that started
    before (their latest end so far) comes off the outage's downtime; an outage without a host
    or an end keeps its downtime."""
    node = ["source", "system", "host"]
    covered = pl.col("end").cum_max().shift(1).over(node, order_by=["start", "end"])
    overlap = (pl.min_horizontal("end", covered) - pl.col("start")).dt.total_microseconds() / 3.6e9
    return (
        pl.when(pl.col("host").is_not_null() & pl.col("end").is_not_null() & covered.is_not_null())
        .then((pl.col("downtime_hours") - overlap.clip(lower_bound=0)).clip(lower_bound=0))
        .otherwise("downtime_hours")
    )


def _summary(df: pl.DataFrame, keys: list[str], rng: np.random.Generator) -> pl.DataFrame:
    """Per ``keys`` group: failures, repairs known, downtime, MTTR and availability with CIs.
    ``df`` carries ``unit_hours`` (the group's node-hours) and ``span_hours``."""
    # Bootstrap weights go to rows by position: the rows are put in one total order (the group,
    # then every column) so that the same outages give the same CIs whatever order they came in.
    order = [*keys, *(c for c in df.columns if c not in keys)]
    df = df.sort(order, nulls_last=True).with_columns(
        _g=pl.struct(keys).rank("dense").cast(pl.Int64) - 1, _down=down_hours()
    )
    known = df.filter(pl.col("downtime_hours").is_not_null())
    down = known.select("downtime_hours", "_down").to_numpy()
    agg = (
        df.group_by(*keys, "_g")
        .agg(
            failures=pl.len(),
            repairs_known=pl.col("downtime_hours").is_not_null().sum().cast(pl.Int64),
            downtime_hours=pl.col("downtime_hours").sum(),
            _down=pl.col("_down").sum(),
            mttr_hours=pl.col("downtime_hours").mean(),
            repair_median_hours=pl.col("downtime_hours").median(),
            repair_p90_hours=pl.col("downtime_hours").quantile(0.9, "linear"),
            unit_hours=pl.col("unit_hours").first(),
            span_hours=pl.col("span_hours").first(),
        )
        .sort("_g")
    )
    sums, w_sum = _bootstrap(known["_g"].to_numpy(), down, agg.height, rng)
    d_sum, node_down = sums[:, 0], sums[:, 1]
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", RuntimeWarning
        )  # a group without a known repair: all-NaN, kept null
        unavail = node_down / agg["unit_hours"].to_numpy()[:, None]
        mttr = np.where(w_sum > 0, d_sum / w_sum, np.nan)
        u_lo, u_hi = np.nanpercentile(unavail, [2.5, 97.5], axis=1)
        m_lo, m_hi = np.nanpercentile(mttr, [2.5, 97.5], axis=1)
    complete = (agg["repairs_known"] == agg["failures"]).to_numpy()
    unavailability = (agg["_down"] / agg["unit_hours"]).to_numpy()

    def nan(a):
        return pl.Series(np.where(complete, a, np.nan)).fill_nan(None)

    def nines(u):
        return np.where(u > 0, -np.log10(np.where(u > 0, u, 1.0)), np.nan)  # none down: unbounded

    rate, low, high = poisson_rate_ci(agg["failures"].to_numpy(), agg["span_hours"].to_numpy())

    def inv(x):
        return pl.Series(np.where(x > 0, 1 / np.where(x > 0, x, 1), np.nan)).fill_nan(None)

    return agg.with_columns(
        mtbf_hours=inv(rate),
        mtbf_ci_low=inv(high),
        mtbf_ci_high=inv(low),
        mttr_ci_low=pl.Series(m_lo).fill_nan(None),
        mttr_ci_high=pl.Series(m_hi).fill_nan(None),
        availability=nan(1 - unavailability),
        availability_ci_low=nan(1 - u_hi),
        availability_ci_high=nan(1 - u_lo),
        nines=nan(nines(unavailability)),
        nines_ci_low=nan(nines(u_hi)),
        nines_ci_high=nan(nines(u_lo)),
    ).drop("_g", "_down")


# ----------------------------------------------------------------------------- fits
def fit_durations(x: np.ndarray, engine: str = "numpy") -> list[dict]:
    """Each of ``FITTED`` fitted to positive, uncensored durations (hours) by the project's
    lifetime models (``analysis.survival.fit_model``: engine 'numpy', tested to agree with
    lifelines, or 'lifelines' itself): per model its parameters with 95% CIs (JSON), AIC, the
    fitted median, and the Weibull shape with its CI."""
    s = Sample(np.zeros_like(x), x, x, np.ones(x.size, bool), np.zeros(x.size, bool))
    rows = []
    for model in FITTED:
        m = lifetime_models.get(model)
        fit, _ = fit_model(model, s, engine)
        params = {
            k: {"value": float(v[0]), "ci_low": float(v[1]), "ci_high": float(v[2])}
            for k, v in fit["params"].items()
        }
        ok = bool(fit["converged"]) and bool(params)
        shape = list(params["shape"].values()) if model == "weibull" and ok else None
        rows.append(
            {
                "model": model,
                "converged": ok,
                "params": json.dumps(params),
                "aic": m.aic(fit) if ok else None,
                "median_hours": float(m.from_params(params).inverse_cumulative_hazard(np.log(2.0)))
                if ok
                else None,
                "shape": shape[0] if shape else None,
                "shape_ci_low": shape[1] if shape else None,
                "shape_ci_high": shape[2] if shape else None,
            }
        )
    best = min((r for r in rows if r["converged"]), key=lambda r: r["aic"], default=None)
    for r in rows:
        r["selected"] = r is best
    return rows


def _fits(o: pl.DataFrame, engine: str) -> pl.DataFrame:
    rows = []
    for (source, system), g in o.partition_by(
        "source", "system", as_dict=True, maintain_order=True
    ).items():
        starts = np.sort(g["start"].to_numpy().astype("datetime64[us]").astype(np.int64)) / 3.6e9
        for quantity, x in (
            ("repair", g["downtime_hours"].drop_nulls().to_numpy()),
            ("tbf", np.diff(starts)),
        ):
            pos = x[x > 0]
            base = {
                "source": source,
                "system": system,
                "quantity": quantity,
                "n": int(pos.size),
                "n_zero": int((x <= 0).sum()),
            }
            if pos.size < MIN_FIT:
                continue
            rows += [{**base, **r} for r in fit_durations(pos, engine)]
    if not rows:
        return TABLES["repair_fits"].empty()
    return conform(
        "repair_fits", pl.DataFrame(rows, infer_schema_length=None).drop("note", strict=False)
    )


# ----------------------------------------------------------------------------- tables
def _spans(o: pl.DataFrame, observed_from, observed_to) -> pl.DataFrame:
    spans = o.group_by("source", "system").agg(
        span_from=pl.col("start").min(),
        span_to=pl.coalesce("end", "start").max(),
        hosts=pl.col("host").n_unique(),
        system_nodes=pl.col("system_nodes").max(),
        system_processors=pl.col("system_processors").max(),
    )
    if observed_from is not None:
        spans = spans.with_columns(span_from=pl.lit(observed_from, pl.Datetime("us")))
    if observed_to is not None:
        spans = spans.with_columns(span_to=pl.lit(observed_to, pl.Datetime("us")))
    return spans.with_columns(
        span_hours=(pl.col("span_to") - pl.col("span_from")).dt.total_microseconds() / 3.6e9,
        nodes=pl.coalesce(pl.col("system_nodes").cast(pl.Int64), pl.col("hosts").cast(pl.Int64)),
    ).filter(pl.col("span_hours") > 0)


def availability(
    o: pl.DataFrame,
    observed_from: datetime | None = None,
    observed_to: datetime | None = None,
    engine: str = "numpy",
):
    """(availability, repair_fits, root_causes) of outage records (pure); ``engine`` of the fits."""
    spans = _spans(o, observed_from, observed_to)
    o = (
        o.drop("system_nodes", "system_processors")
        .join(
            spans.select("source", "system", "span_from", "span_to", "span_hours", "nodes"),
            on=["source", "system"],
        )
        .filter((pl.col("start") >= pl.col("span_from")) & (pl.col("start") <= pl.col("span_to")))
    )
    rng = np.random.default_rng(SEED)
    system = _summary(
        o.with_columns(unit_hours=pl.col("span_hours") * pl.col("nodes")), ["source", "system"], rng
    )
    node = _summary(
        o.filter(pl.col("host").is_not_null()).with_columns(unit_hours="span_hours"),
        ["source", "system", "host"],
        rng,
    )
    fits = _fits(o, engine)
    shape = fits.filter((pl.col("quantity") == "tbf") & (pl.col("model") == "weibull")).select(
        "source",
        "system",
        tbf_shape="shape",
        tbf_shape_ci_low="shape_ci_low",
        tbf_shape_ci_high="shape_ci_high",
    )
    system = system.join(
        spans.select("source", "system", "nodes", processors="system_processors"),
        on=["source", "system"],
    )
    system = system.join(shape, on=["source", "system"], how="left").with_columns(
        level=pl.lit("system")
    )
    node = node.with_columns(level=pl.lit("node"), nodes=pl.lit(1, pl.Int64))
    both = pl.concat([system, node], how="diagonal_relaxed")
    failures = both["failures"].to_numpy()
    per_node = poisson_rate_ci(failures, (both["unit_hours"] / HOURS_PER_YEAR).to_numpy())
    proc_years = (
        both["span_hours"] * both["processors"].cast(pl.Float64) / HOURS_PER_YEAR
    ).fill_null(np.nan)
    per_proc = poisson_rate_ci(failures, proc_years.to_numpy())

    def s(a):
        return pl.Series(a).fill_nan(None)

    reading = [
        tbf_reading(a, b)
        for a, b in zip(both["tbf_shape_ci_low"], both["tbf_shape_ci_high"], strict=True)
    ]
    both = both.with_columns(
        failures_per_node_year=s(per_node[0]),
        failures_per_node_year_ci_low=s(per_node[1]),
        failures_per_node_year_ci_high=s(per_node[2]),
        failures_per_processor_year=s(per_proc[0]),
        failures_per_processor_year_ci_low=s(per_proc[1]),
        failures_per_processor_year_ci_high=s(per_proc[2]),
        tbf_reading=pl.Series(reading, dtype=pl.Utf8),
    ).sort(
        "source",
        "system",
        "level",
        "host",
        descending=[False, False, True, False],
        nulls_last=False,
    )
    return conform("availability", both.drop("unit_hours")), fits, root_causes(o)


def root_causes(o: pl.DataFrame) -> pl.DataFrame:
    per = o.group_by("source", "system", "cause").agg(
        failures=pl.len(), downtime_hours=pl.col("downtime_hours").sum()
    )
    every = (
        o.group_by("source", "cause")
        .agg(failures=pl.len(), downtime_hours=pl.col("downtime_hours").sum())
        .with_columns(system=pl.lit(None, pl.Utf8))
    )
    df = pl.concat([per, every.select(per.columns)])

    def share(c):
        return pl.col(c) / pl.col(c).sum().over("source", "system")

    df = df.with_columns(share=share("failures"), downtime_share=share("downtime_hours"))
    return conform(
        "root_causes",
        df.sort("source", "system", "failures", descending=[False, False, True], nulls_last=False),
    )


def refresh_availability(
    wh, observed_from: datetime | None = None, observed_to: datetime | None = None
):
    o = outages(wh.read("failures"), wh.read("node_events"), observed_to)
    if o.height == 0:
        raise MissingInputs("availability: no failure records and no node down/drain events")
    avail, fits, causes = availability(o, observed_from, observed_to)
    wh.replace_table("availability", avail)
    wh.replace_table("repair_fits", fits)
    wh.replace_table("root_causes", causes)
    return avail, fits, causes
