"""Which hardware event ends a unit's life: the failure events (``hw_events`` of a failing severity,
each with its chain root's class as the cause) and their match to a removed unit (same host;
GPU-family units by GPU index, others by class and position number; the earliest when the unit's
own index matches, else the one nearest the removal)."""

from __future__ import annotations

import polars as pl

from analysis.hw_evidence import resolve_chains

GPU_FAMILY = ("gpu", "gpu_memory", "gpu_sram", "nvlink")


FAILURE_SEVERITIES = ("fatal", "critical", "warning")


def failure_events(hw_events: pl.DataFrame) -> pl.DataFrame:
    """Initiating hardware events that can end a unit's life, with their unit index."""
    ev = resolve_chains(hw_events).filter(pl.col("event_id") == pl.col("root_id"))
    ev = ev.join(
        hw_events.select("event_id", "gpu", "component_id", "uuid"), on="event_id", how="left"
    )
    return ev.filter(
        pl.col("severity").str.to_lowercase().is_in(FAILURE_SEVERITIES)
        & pl.col("host").is_not_null()
        & ~(
            (pl.col("counter").fill_null(False))
            & (pl.col("severity").str.to_lowercase() == "warning")
        )
    ).select(
        "host",
        ev_time="time",
        ev_class="component_class",
        ev_id="event_id",
        ev_gpu=pl.col("gpu").cast(pl.Int32),
        ev_idx=pl.col("component_id").str.extract(r"(\d+)").cast(pl.Int32),
        ev_sev=pl.col("severity").str.to_lowercase(),
        ev_counter=pl.col("counter").fill_null(False),
    )


def _match_failures(units: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Per failed unit (_u): the earliest best-matching event in [observed_from, end]."""
    failed = units.filter(pl.col("_failed")).select(
        "_u", "host", "component_class", "gpu", "idx", "observed_from", "_end"
    )
    if failed.height == 0 or events.height == 0:
        return pl.DataFrame(
            schema={"_u": pl.UInt32, "fail_time": pl.Datetime("us"), "fail_cause": pl.Utf8}
        )
    j = failed.join(events, on="host", how="inner").filter(
        (pl.col("ev_time") >= pl.col("observed_from")) & (pl.col("ev_time") <= pl.col("_end"))
    )
    gpu_unit = pl.col("component_class").is_in(GPU_FAMILY)
    same = pl.col("ev_class") == pl.col("component_class")
    score = (
        pl.when(
            gpu_unit & pl.col("ev_class").is_in(GPU_FAMILY) & (pl.col("ev_gpu") == pl.col("gpu"))
        )
        .then(pl.when(same).then(3).otherwise(2))
        .when(gpu_unit & pl.col("ev_class").is_in(GPU_FAMILY) & pl.col("ev_gpu").is_not_null())
        .then(None)  # another GPU's event
        .when(~gpu_unit & same & (pl.col("ev_idx") == pl.col("idx")))
        .then(3)
        .when(same)
        .then(1)
        .otherwise(None)
    )
    sev_rank = pl.col("ev_sev").replace_strict({"fatal": 0, "critical": 1, "warning": 2}, default=3)
    return (
        j.with_columns(score=score, sev_rank=sev_rank)
        .filter(pl.col("score").is_not_null())
        # the unit's own index: its first event; index unknown: the event nearest its removal
        # (another unit's fault of the same class is likelier anywhere before than in the repair
        # window); counter increments surface a scrape interval late, so log lines come first
        .with_columns(
            order=pl.when(pl.col("score") == 3)
            .then(pl.col("ev_time").dt.epoch("us"))
            .otherwise(-pl.col("ev_time").dt.epoch("us"))
        )
        .sort(
            ["_u", "ev_counter", "score", "sev_rank", "order", "ev_id"],
            descending=[False, False, True, False, False, False],
        )
        .group_by("_u", maintain_order=True)
        .agg(fail_time=pl.col("ev_time").first(), fail_cause=pl.col("ev_class").first())
    )


def with_failures(units: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Units numbered (``_u``) with the event that ended each failed one (``fail_time``,
    ``fail_cause``, ``_match_failures``)."""
    matches = _match_failures(units.with_row_index("_u"), events)
    return (
        units.with_row_index("_u")
        .join(matches, on="_u", how="left")
        .with_columns(
            # a telemetry-only unit counts as failed only when an event explains its replacement
            _failed=pl.col("_failed") & (~pl.col("_telemetry") | pl.col("fail_time").is_not_null()),
        )
    )
