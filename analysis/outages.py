"""Outage records: one row per failure with its repair where known, from ``failures`` (failure logs,
health-event pairs) and from ``node_events`` (a node down, drained or not ready until it
resumes): the input of ``analysis.availability``."""

from __future__ import annotations

from datetime import datetime

import polars as pl

DOWN = ("down", "drain", "not_ready")


UP = ("resume", "ready")


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
    "open": pl.Boolean,  # still out at the end of its stream: down until the span's end
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
        .with_columns(open=pl.col("end").is_null(), end=pl.coalesce("end", pl.lit(end_of_data)))
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
        open="open",
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
    end = (
        pl.when(still_out)
        .then(data_end)
        .otherwise(
            pl.coalesce(
                "end_time",
                pl.col("start_time")
                + pl.duration(microseconds=(pl.col("downtime_hours") * 3.6e9).round()),
            )
        )
    )
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
        open=still_out,
    ).cast(OUTAGE_COLUMNS)
    return pl.concat([logged, node_outages(node_events, observed_to)]).filter(
        pl.col("start").is_not_null()
        & (pl.col("end").is_null() | (pl.col("end") >= pl.col("start")))
    )
