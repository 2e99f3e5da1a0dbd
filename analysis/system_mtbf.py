"""System MTBF by calendar period (``system_mtbf``): failures of a whole system per month and per
quarter, overall and per class, with exact Poisson CIs.

Takes the failure events the warehouse holds, each kind a separate series (``source``):
``failures`` (failure logs, and Titan's DBE/OTB events; classes by ``cause`` and by
``component_class``), ``interruptions`` (unplanned infrastructure-domain job interruptions per
cluster, by ``component_class`` = their cause class) and ``node_failures`` (hardware failure
episodes of nodes, ``analysis.repairable``; the system is the host's cluster in hw_events).
Returns one row per (source, system, period kind, period, grouping, class), zero-failure periods
included.

- A system failure is one failure instant: events of one series at the same time (several GPUs
  of one system failing in the same second) count once (``failures``); ``events`` keeps the rows.
  This is how OLCF counted Titan's quarterly system MTBF (distinct DBE/OTB times).
- Exposure is the period's overlap with the series' observation span [from, to]: the window
  given (``observed_from`` / ``observed_to``), else its first to its last event (or repair end);
  a period observed only in part is ``partial``.
- MTBF = exposure / failures; its 95% CI is the reciprocal of the exact (Garwood) Poisson CI of
  the rate (``analysis.lifetime_models.exponential.poisson_rate_ci``). No failure: no MTBF,
  and the CI's lower bound alone (the data say the MTBF is at least that).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import polars as pl

from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.status import MissingInputs
from warehouse.schemas import TABLES
from warehouse.schemas import conform

PERIODS = {"month": "1mo", "quarter": "1q"}
GROUPINGS = ("all", "cause", "component_class")
EVENT_COLUMNS = {
    "source": pl.Utf8,
    "system": pl.Utf8,
    "time": pl.Datetime("us"),
    "span_end": pl.Datetime("us"),
    "cause": pl.Utf8,
    "component_class": pl.Utf8,
}


def failure_events(
    failures: pl.DataFrame,
    interruptions: pl.DataFrame,
    node_failures: pl.DataFrame,
    host_clusters: pl.DataFrame,
) -> pl.DataFrame:
    """Every failure event as (source, system, time, span_end, cause, component_class)."""
    frames = [
        failures.select(
            source=pl.lit("failures"),
            system="system",
            time="start_time",
            span_end=pl.coalesce("end_time", "start_time"),
            cause="cause",
            component_class="component_class",
        ),
        interruptions.filter(
            ~pl.col("planned").fill_null(False) & (pl.col("failure_domain") == "infrastructure")
        ).select(
            source=pl.lit("interruptions"),
            system="cluster",
            time="end_time",
            span_end="end_time",
            cause=pl.lit(None, pl.Utf8),
            component_class="cause_class",
        ),
        node_failures.join(host_clusters, on="host", how="left").select(
            source=pl.lit("node_failures"),
            system=pl.coalesce("cluster", pl.lit("fleet")),
            time="time",
            span_end="time",
            cause=pl.lit(None, pl.Utf8),
            component_class="cause_class",
        ),
    ]
    events = pl.concat([f.cast(EVENT_COLUMNS) for f in frames])
    return events.filter(pl.col("time").is_not_null() & pl.col("system").is_not_null())


def _spans(
    events: pl.DataFrame, observed_from: datetime | None, observed_to: datetime | None
) -> pl.DataFrame:
    spans = events.group_by("source", "system").agg(
        span_from=pl.col("time").min(), span_to=pl.col("span_end").max()
    )
    if observed_from is not None:
        spans = spans.with_columns(span_from=pl.lit(observed_from, pl.Datetime("us")))
    if observed_to is not None:
        spans = spans.with_columns(span_to=pl.lit(observed_to, pl.Datetime("us")))
    return spans.filter(pl.col("span_to") > pl.col("span_from"))


def _grouped(events: pl.DataFrame) -> pl.DataFrame:
    """The events once per grouping they belong to: (grouping, class)."""
    out = [events.with_columns(grouping=pl.lit("all"), **{"class": pl.lit(None, pl.Utf8)})]
    for g in GROUPINGS[1:]:
        out.append(
            events.filter(pl.col(g).is_not_null()).with_columns(
                grouping=pl.lit(g), **{"class": pl.col(g)}
            )
        )
    return pl.concat(out)


def system_mtbf(
    events: pl.DataFrame, observed_from: datetime | None = None, observed_to: datetime | None = None
) -> pl.DataFrame:
    """The ``system_mtbf`` table of ``failure_events`` (pure)."""
    spans = _spans(events, observed_from, observed_to)
    if spans.height == 0:
        return TABLES["system_mtbf"].empty()
    ev = _grouped(
        events.join(spans, on=["source", "system"]).filter(
            (pl.col("time") >= pl.col("span_from")) & (pl.col("time") <= pl.col("span_to"))
        )
    )
    keys = ["source", "system", "grouping", "class"]
    classes = ev.select(keys).unique()
    frames = []
    for period, every in PERIODS.items():
        grid = (
            spans.with_columns(
                period_start=pl.datetime_ranges(
                    pl.col("span_from").dt.truncate(every), pl.col("span_to"), every
                )
            )
            .explode("period_start")
            .with_columns(period_end=pl.col("period_start").dt.offset_by(every))
            .filter(pl.col("period_start") <= pl.col("span_to"))
        )
        counts = (
            ev.with_columns(period_start=pl.col("time").dt.truncate(every))
            .group_by(*keys, "period_start")
            .agg(failures=pl.col("time").n_unique(), events=pl.len())
        )
        rows = (
            grid.join(classes, on=["source", "system"])
            .join(counts, on=[*keys, "period_start"], how="left", nulls_equal=True)
            .with_columns(
                period=pl.lit(period),
                failures=pl.col("failures").fill_null(0),
                events=pl.col("events").fill_null(0),
                _from=pl.max_horizontal("period_start", "span_from"),
                _to=pl.min_horizontal("period_end", "span_to"),
            )
            .with_columns(
                exposure_hours=(pl.col("_to") - pl.col("_from")).dt.total_microseconds() / 3.6e9,
                partial=(pl.col("_from") > pl.col("period_start"))
                | (pl.col("_to") < pl.col("period_end")),
                label=pl.col("period_start").dt.strftime("%Y-%m")
                if period == "month"
                else pl.format(
                    "{}-Q{}", pl.col("period_start").dt.year(), pl.col("period_start").dt.quarter()
                ),
            )
        )
        # a period starting at the span's end is kept only for an event at that very instant
        rows = rows.filter((pl.col("exposure_hours") > 0) | (pl.col("events") > 0))
        frames.append(rows)
    df = pl.concat(frames, how="diagonal_relaxed")
    rate, low, high = poisson_rate_ci(df["failures"].to_numpy(), df["exposure_hours"].to_numpy())
    with np.errstate(divide="ignore"):
        df = df.with_columns(
            mtbf_hours=pl.Series(np.where(rate > 0, 1 / rate, np.nan)).fill_nan(None),
            mtbf_ci_low=pl.Series(np.where(high > 0, 1 / high, np.nan)).fill_nan(None),
            mtbf_ci_high=pl.Series(np.where(low > 0, 1 / low, np.nan)).fill_nan(None),
        )
    order = ["source", "system", "period", "grouping", "class", "period_start"]
    return conform(
        "system_mtbf", df.sort(order, nulls_last=False).select(list(TABLES["system_mtbf"].columns))
    )


def host_clusters(wh) -> pl.DataFrame:
    """(host, cluster) of the hosts hardware events name (one cluster per host)."""
    with wh.connect() as con:
        return con.sql(
            f"SELECT host, min(cluster) AS cluster FROM ({wh.view_sql('hw_events')}) "
            "WHERE host IS NOT NULL GROUP BY host"
        ).pl()


def refresh_system_mtbf(
    wh, observed_from: datetime | None = None, observed_to: datetime | None = None
) -> pl.DataFrame:
    events = failure_events(
        wh.read("failures"), wh.read("interruptions"), wh.read("node_failures"), host_clusters(wh)
    )
    if events.height == 0:
        raise MissingInputs(
            "system_mtbf: no failure events (failures, interruptions or node_failures)"
        )
    df = system_mtbf(events, observed_from, observed_to)
    wh.replace_table("system_mtbf", df)
    return df
