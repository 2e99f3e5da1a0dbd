"""``failures`` rows (source ``health-events``) paired from every stored ``health_events`` row,
and ``health_event_pairs``: what became of each event. Run by the build over the whole table, so
a fault's start in one file or pull and its end in the next pair.

Rule (per system, node and fault, in time order; ties in the file's order, then an end before a
start): a start opens a failure unless its fault is open already (then it repeats it: one failure
from the first start to the first end after it, however often the source reports the fault
meanwhile); an end or healthy status closes the open failure; another end after the close
repeats it; an end before any start of its fault makes no failure (``unopened``: its start is
before the data or was lost), a healthy status then is a plain observation (``healthy``). An end
or healthy status applies to every fault of its node at or under its own (``GpuXidError`` ends
``GpuXidError / gpu:0``), and one naming no fault to all of them (a reboot). A failure whose end
never comes stays ``open``: no end time, no repair time, counted down until the end of observation
by availability. Vectorized: one sort, window functions per fault and two joins.
"""

from __future__ import annotations

import polars as pl

from warehouse.schemas import FAULT_SEP
from warehouse.schemas import TABLES
from warehouse.schemas import conform

SOURCE = "health-events"  # the failures partition written here
ENDS = ("end", "healthy")
KEY = ["system", "host", "_key"]


def _streams(ev: pl.DataFrame) -> pl.DataFrame:
    """Per (system, host, fault key): its starts and every end or healthy status that applies
    to it, in pairing order. ``_i`` is the event's row; an end reaching several faults is one
    row per fault."""
    starts = ev.filter(pl.col("kind") == "start").with_columns(_key=pl.col("fault").fill_null(""))
    ends = ev.filter(pl.col("kind").is_in(ENDS))
    keys = pl.concat(
        [
            starts.select("system", "host", "_key"),
            ends.filter(pl.col("fault").is_not_null()).select("system", "host", _key="fault"),
        ]
    ).unique()
    reached = ends.join(keys, on=["system", "host"]).filter(
        pl.col("fault").is_null()
        | (pl.col("_key") == pl.col("fault"))
        | pl.col("_key").str.starts_with(pl.col("fault") + FAULT_SEP)
    )
    both = pl.concat([starts, reached.select(starts.columns)])
    return both.with_columns(_start=pl.col("kind") == "start").sort(
        [*KEY, "time", "source_file", "source_line", "_start"], nulls_last=True
    )


def _classified(s: pl.DataFrame) -> pl.DataFrame:
    """Each stream row's part: ``_opens`` (a start after no open failure), ``_closes`` (an end
    while one is open), ``_run`` (the failure it belongs to, per key), ``_since`` (that
    failure's start) and ``_seen`` (a start came before it in its key)."""
    prev = pl.col("_start").shift(1).over(KEY).fill_null(False)
    s = s.with_columns(
        _opens=pl.col("_start") & ~prev,
        _closes=~pl.col("_start") & prev,
        _seen=(pl.col("_start").cast(pl.Int32).cum_sum().over(KEY) > 0),
    )
    return s.with_columns(
        _run=pl.col("_opens").cast(pl.Int32).cum_sum().over(KEY),
        _since=pl.when("_opens").then("time").forward_fill().over(KEY),
    )


def pair(events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``failures`` rows, ``health_event_pairs`` rows) of ``health_events`` rows (pure)."""
    ev = conform("health_events", events).with_row_index("_i")
    s = _classified(_streams(ev))
    opened = s.filter("_opens")
    closed = s.filter("_closes").select(*KEY, "_run", end="time")
    f = opened.join(closed, on=[*KEY, "_run"], how="left")
    hours = (pl.col("end") - pl.col("time")).dt.total_microseconds() / 3.6e9
    failures = conform(
        "failures",
        f.select(
            system="system",
            host="host",
            start_time="time",
            end_time="end",
            downtime_hours=hours,
            repair_known=pl.col("end").is_not_null(),
            cause="cause",
            sub_cause="sub_cause",
            component_class="component_class",
            open=pl.col("end").is_null(),
            source=pl.lit(SOURCE),
            source_file="source_file",
            source_line="source_line",
        ).sort("system", "host", "start_time"),
    )
    return failures, _pairs(ev, s, f)


def _pairs(ev: pl.DataFrame, s: pl.DataFrame, f: pl.DataFrame) -> pl.DataFrame:
    """One row per event: its outcome, the start of the failure it belongs to, the reason."""
    still_open = f.filter(pl.col("end").is_null()).select("_i", _open=pl.lit(True))
    starts = (
        s.filter("_start")
        .join(still_open, on="_i", how="left")
        .select(
            "_i",
            outcome=pl.when("_opens")
            .then(
                pl.when(pl.col("_open").fill_null(False))
                .then(pl.lit("open"))
                .otherwise(pl.lit("opens"))
            )
            .otherwise(pl.lit("repeats")),
            failure_start="_since",
        )
    )
    # an end reaching several faults: it closes if it closes any, else repeats if any of its
    # faults had a start
    ends = (
        s.filter(~pl.col("_start"))
        .group_by("_i")
        .agg(
            _closes=pl.col("_closes").any(),
            _seen=pl.col("_seen").any(),
            failure_start=pl.when("_closes").then("_since").min(),
            _last=pl.when("_seen").then("_since").max(),
        )
        .select(
            "_i",
            outcome=pl.when("_closes").then(pl.lit("closes")).when("_seen").then(pl.lit("repeats")),
            failure_start=pl.coalesce("failure_start", "_last"),
        )
    )
    out = ev.join(pl.concat([starts, ends]), on="_i", how="left").with_columns(
        outcome=pl.coalesce(
            "outcome",
            pl.when(pl.col("kind") == "info")
            .then(pl.lit("info"))
            .when(pl.col("kind") == "healthy")
            .then(pl.lit("healthy"))
            .otherwise(pl.lit("unopened")),
        )
    )
    return conform(
        "health_event_pairs",
        out.with_columns(
            reason=pl.when(pl.col("outcome") == "unopened").then(
                pl.format(
                    "end of '{}' on {} with no start of it before: its start is before the "
                    "data, or was lost; no failure made",
                    pl.col("fault").fill_null("every fault"),
                    "host",
                )
            )
        )
        .sort("_i")
        .select(list(TABLES["health_event_pairs"].columns)),
    )


def refresh_health_failures(wh) -> dict[str, int]:
    """Rewrite the ``health-events`` partition of ``failures`` and ``health_event_pairs`` from
    every stored health event; returns the failures, open ones and unopened ends."""
    if TABLES["failures"].partition != "source":
        raise RuntimeError("failures must be partitioned by source to be rewritten per source")
    failures, pairs = pair(wh.read("health_events"))
    if failures.height:
        wh.replace_table("failures", failures, partitions="touched")
    else:
        wh.drop_partition("failures", SOURCE)
    wh.replace_table("health_event_pairs", pairs)
    return {
        "failures": failures.height,
        "open": int(failures["open"].sum()),
        "unopened_ends": int((pairs["outcome"] == "unopened").sum()),
    }
