"""Availability and repair: per system and per node, failures, MTBF, MTTR and availability with
their CIs; repair-time and time-between-failure distributions fitted by every registered lifetime
model; root causes by count and by downtime. Tables ``availability``, ``repair_fits`` and
``root_causes``.

Input: outage records (``analysis.outages``), each one failure with its repair where known, from
``failures`` (failure logs: LANL, tickets, RMA logs, Titan's events; health-event streams'
pairs) and from ``node_events`` (a node going down / drained / not ready until it resumes:
source ``node_events``, cause = the state's reason). A node still out, or a failure still
``open`` at the end of its stream, is down until the end of the span (its downtime inside the
window is known) and its repair is right-censored there: ``repairs_open`` counts them.

Per (source, system), over its observation span: the window given, else the records' first
start to last end widened to the data's observation window (``analysis.observation``: the
scheduler, telemetry and node events' span), since a stream that reports only failures was
watching before its first one and after its last repair:
- ``nodes``: the system's size where the source gives it (``system_nodes``), else the hosts the
  source names (for node events, every host the warehouse saw in the cluster; for failure
  records, the hosts in the system's failure records and health events). Node-hours = span x
  nodes.
- MTBF of the system = span / failures, with the exact Poisson CI (``poisson_rate_ci``);
  per-node normalised rate = failures per node-year (and per processor-year where the source
  gives processors), same CI: systems of different sizes compare on these.
- MTTR = repair hours / repairs completed (an open repair's hours up to the span's end: the
  mean under right-censoring, the exponential's MLE), its median and 90th percentile from the
  Kaplan-Meier estimate of the repair times (null where the open repairs keep it from being
  reached). Availability = hours up / hours observed over the nodes' time lines: the fraction
  of node-hours up, in "nines" too (-log10 of the unavailability); a node down for two faults at
  once is down once (``_pieces``), while each fault keeps its repair time. Both only when every
  failure's repair is known or still open (else null: a repair time is never invented).
- 95% CIs by a bootstrap of the time lines' pieces (``_pieces``: per outage the node's hours up
  before it and its hours down, per node its hours up after its last outage, the nodes without
  an outage), each resampled with a Poisson(1) weight, ``BOOTSTRAP`` times
  (``analysis.availability_summary``): every replicate's availability is weighted hours up /
  weighted hours observed, in [0, 1] by construction, and carries both the number of outages
  and the spread of their lengths.
- Per node the same numbers (span x 1 node), without fits.
- ``repair_fits``: every model registered in ``analysis/lifetime_models/`` fitted to the
  positive repair times (quantity 'repair', open repairs right-censored) and to the positive
  gaps between consecutive failure starts of the system (quantity 'tbf', the time from the last
  start to the span's end censored) by maximum likelihood (``analysis.repair_fits``: the
  project's lifetime models, which agree with lifelines' fitters and are much faster over many
  systems; ``engine='lifelines'`` uses lifelines itself), parameters with 95% CIs, AIC,
  ``selected`` = lowest AIC; zero durations (a repair logged in the minute it began,
  simultaneous failures) are left out of the fits and counted. The age-trend parameter of the
  TBF (the Weibull shape, ``lifetime_models.age_trend_model``) is also on the system's
  ``availability`` row: < 1 (its CI entirely below 1) is a decreasing hazard, failures that
  cluster in time.
- ``root_causes``: failures and downtime per cause per system and over all systems of a
  source (``system`` null), with their shares; a record without a cause counts as cause null.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.availability_summary import availability_summary
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.observation import infer_window
from analysis.observation import source_spans
from analysis.outages import outages
from analysis.repair_fits import repair_fits
from analysis.status import MissingInputs
from warehouse.schemas import TABLES
from warehouse.schemas import conform

SEED = 29
HOURS_PER_YEAR = 8760.0


def tbf_reading(ci_low: float | None, ci_high: float | None) -> str | None:
    """Plain reading of the Weibull shape CI of a system's times between failures."""
    if ci_low is None or ci_high is None or not (np.isfinite(ci_low) and np.isfinite(ci_high)):
        return None
    if ci_high < 1.0:
        return "decreasing hazard: failures cluster in time"
    if ci_low > 1.0:
        return "increasing hazard: failures more regular than random"
    return "about constant: failures arrive at random (Poisson)"


# ----------------------------------------------------------------------------- pieces
def _hours(delta: pl.Expr) -> pl.Expr:
    return delta.dt.total_microseconds() / 3.6e9


def _pieces(o: pl.DataFrame) -> pl.DataFrame:
    """Each node's time line over its span as pieces of (hours up, hours down) a bootstrap can
    resample: an outage row is the time up since its node's last outage (or the span's start)
    and its own hours down not already down for an earlier outage of the node (two faults at
    once keep their repair times, but the node is down once), clipped at the span's end; one
    more row per node holds its time up after its last outage. The outages that name no host
    make one time line of their system; one that began before the span (``_outage`` false: not
    one of its failures) is down from the span's start."""
    node = ["source", "system", "host"]  # a null host: the system's line
    end = pl.when(pl.col("end").is_not_null()).then(pl.min_horizontal("end", "span_to"))
    covered = pl.coalesce(
        end.cum_max().shift(1).over(node, order_by=["start", "end"]), pl.col("span_from")
    )
    start = pl.max_horizontal("start", "span_from")
    rows = o.with_columns(
        up_hours=_hours(start - covered).clip(0),
        down_hours=_hours(end - pl.max_horizontal(start, covered)).clip(0).fill_null(0.0),
    )
    tails = (
        rows.group_by(node)
        .agg(
            *(pl.col(c).first() for c in ("span_from", "span_to", "span_hours", "nodes")),
            _last=end.max(),
        )
        .with_columns(
            up_hours=_hours(pl.col("span_to") - pl.max_horizontal("_last", "span_from")).clip(0),
            down_hours=pl.lit(0.0),
            _outage=pl.lit(False),
        )
        .drop("_last")
    )
    return pl.concat([rows, tails], how="diagonal_relaxed")


# ----------------------------------------------------------------------------- tables
def _spans(
    o: pl.DataFrame, observed_from, observed_to, window=(None, None), hosts=None
) -> pl.DataFrame:
    """Per (source, system): the span observed and its nodes. The span: the window given, else
    the records' first start to last end widened to the data's observation window (``window``:
    a failure stream that reports only failures observed the whole fleet window, not only from
    its first failure to its last repair). Nodes: the system's size where the source gives it,
    else the hosts its records and ``hosts`` (source, system, host: the hosts the source is
    known to watch) name."""
    seen = o.select("source", "system", "host")
    if hosts is not None and hosts.height:
        seen = pl.concat([seen, hosts.select(seen.columns).cast(seen.schema)])
    counted = (  # the records that name no host: one line of the system (``_pieces``)
        seen.group_by("source", "system").agg(hosts=pl.col("host").n_unique())
    )
    spans = (
        o.group_by("source", "system")
        .agg(
            span_from=pl.col("start").min(),
            span_to=pl.max_horizontal(pl.col("end").max(), pl.col("start").max()),
            system_nodes=pl.col("system_nodes").max(),
            system_processors=pl.col("system_processors").max(),
        )
        .join(counted, on=["source", "system"], how="left")
    )
    lo, hi = window
    if lo is not None:
        spans = spans.with_columns(
            span_from=pl.min_horizontal("span_from", pl.lit(lo, pl.Datetime("us")))
        )
    if hi is not None:
        spans = spans.with_columns(
            span_to=pl.max_horizontal("span_to", pl.lit(hi, pl.Datetime("us")))
        )
    if observed_from is not None:
        spans = spans.with_columns(span_from=pl.lit(observed_from, pl.Datetime("us")))
    if observed_to is not None:
        spans = spans.with_columns(span_to=pl.lit(observed_to, pl.Datetime("us")))
    return spans.with_columns(
        span_hours=_hours(pl.col("span_to") - pl.col("span_from")),
        nodes=pl.coalesce(
            pl.col("system_nodes").cast(pl.Int64), pl.col("hosts").cast(pl.Int64).fill_null(0)
        ),
    ).filter(pl.col("span_hours") > 0)


def availability(
    o: pl.DataFrame,
    observed_from: datetime | None = None,
    observed_to: datetime | None = None,
    engine: str = "numpy",
    window: tuple[datetime | None, datetime | None] = (None, None),
    hosts: pl.DataFrame | None = None,
    fit_laws: bool = True,
):
    """(availability, repair_fits, root_causes) of outage records (pure); ``engine`` of the fits
    (``fit_laws`` false: none); ``window`` and ``hosts``: the data's observation window and the
    hosts each source watches (``_spans``). An outage still open is down until the span's end."""
    spans = _spans(o, observed_from, observed_to, window, hosts)
    o = (
        o.drop("system_nodes", "system_processors")
        .join(
            spans.select("source", "system", "span_from", "span_to", "span_hours", "nodes"),
            on=["source", "system"],
        )
        .filter(
            (pl.col("start") <= pl.col("span_to"))
            & (
                (pl.col("start") >= pl.col("span_from"))
                | (pl.col("end") >= pl.col("span_from"))
                | pl.col("open").fill_null(False)
            )
        )
        .with_columns(_outage=pl.col("start") >= pl.col("span_from"))
    )
    still_out = pl.col("open").fill_null(False)
    o = o.with_columns(end=pl.when(still_out).then("span_to").otherwise("end")).with_columns(
        downtime_hours=pl.when(still_out)
        .then(_hours(pl.col("end") - pl.col("start")))
        .otherwise("downtime_hours")
    )
    pieces = _pieces(o)
    o = o.filter("_outage")  # the failures of the span; one carried into it is only down in it
    rng = np.random.default_rng(SEED)
    hosted = pieces.filter(pl.col("host").is_not_null())
    seen = pieces.group_by("source", "system").agg(_seen=pl.col("host").n_unique())  # lines
    silent = (  # per system, its nodes without an outage: up over the whole span
        spans.join(seen, on=["source", "system"], how="left")
        .select(
            "source",
            "system",
            _lam=(pl.col("nodes") - pl.col("_seen").fill_null(0)).clip(0).cast(pl.Float64),
            up_hours="span_hours",
            down_hours=pl.lit(0.0),
            _outage=pl.lit(False),
        )
        .filter(pl.col("_lam") > 0)
    )
    system = availability_summary(
        pieces.with_columns(unit_hours=pl.col("span_hours") * pl.col("nodes")),
        ["source", "system"],
        rng,
        silent,
    )
    node = availability_summary(
        hosted.with_columns(unit_hours="span_hours"), ["source", "system", "host"], rng
    )
    fits = repair_fits(o, engine) if fit_laws else TABLES["repair_fits"].empty()
    trend = lifetime_models.age_trend_model().name
    shape = fits.filter((pl.col("quantity") == "tbf") & (pl.col("model") == trend)).select(
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


# the hosts each outage source watches (``_spans``): for node events, every host the warehouse
# saw in the cluster; for failure records, the hosts the system's records and health events name
_WATCHED_SQL = """
SELECT DISTINCT source, system, host FROM (
    SELECT 'node_events' AS source, cluster AS system, unnest(nodes) AS host
        FROM ({job_attempts})
    UNION ALL SELECT 'node_events', cluster, host FROM ({node_events})
    UNION ALL SELECT 'node_events', cluster, host FROM ({hw_events})
    UNION ALL SELECT 'node_events', cluster, host FROM ({gpu_daily})
    UNION ALL SELECT 'failures', system, host FROM ({failures})
    UNION ALL SELECT 'failures', system, host FROM ({health_events})
) WHERE host IS NOT NULL AND system IS NOT NULL
"""


def watched_hosts(wh) -> pl.DataFrame:
    """(source, system, host): the hosts each outage source of the warehouse watches."""
    tables = ("job_attempts", "node_events", "hw_events", "gpu_daily", "failures", "health_events")
    with wh.connect() as con:
        return con.sql(_WATCHED_SQL.format(**{t: wh.view_sql(t) for t in tables})).pl()


def refresh_availability(
    wh, observed_from: datetime | None = None, observed_to: datetime | None = None
):
    o = outages(wh.read("failures"), wh.read("node_events"), observed_to)
    if o.height == 0:
        raise MissingInputs("availability: no failure records and no node down/drain events")
    window = infer_window(source_spans(wh))
    avail, fits, causes = availability(
        o,
        observed_from,
        observed_to,
        window=(window.observed_from, window.observed_to),
        hosts=watched_hosts(wh),
    )
    wh.replace_table("availability", avail)
    wh.replace_table("repair_fits", fits)
    wh.replace_table("root_causes", causes)
    return avail, fits, causes
