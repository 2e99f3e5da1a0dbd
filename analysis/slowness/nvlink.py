"""NVLink error events as evidence for a slow period (``attribution``): per period, the GPU of
its job's nodes with most NVLink errors around it."""

from __future__ import annotations

import polars as pl

from analysis.slowness.keys import KEYS

NVLINK_BEFORE_S = 300.0  # NVLink errors this long before a period count for it


def nvlink_evidence(
    periods: pl.DataFrame, hosts: pl.DataFrame, events: pl.DataFrame
) -> pl.DataFrame:
    """Per period, the GPU of its job's nodes with most NVLink error events from
    ``NVLINK_BEFORE_S`` before it to its end: ``_n_host``, ``_n_gpu``, ``_n_events``."""
    # counted by two as-of lookups of each GPU's running event count (at the window's end and
    # just before its start), not by pairing every event with every period of its host: a
    # month-long job's periods times its nodes' events ran to tens of millions of rows
    nv = (
        events.filter(pl.col("component_class") == "nvlink")
        .select("host", pl.col("gpu").fill_null(-1), "time")  # -1: no GPU named
        .sort("host", "gpu", "time")
        .with_columns(_c=pl.int_range(1, pl.len() + 1).over("host", "gpu"))
    )
    win = periods.filter(pl.col("start_time").is_not_null()).select(*KEYS, "start_time", "end_time")
    q = (
        hosts.select(*KEYS, "host")
        .join(win, on=KEYS)
        .join(nv.select("host", "gpu").unique(), on="host", how="inner")
        .with_columns(
            _lo=pl.col("start_time")
            - pl.duration(seconds=NVLINK_BEFORE_S)
            - pl.duration(microseconds=1)
        )
    )

    def count_at(col: str) -> pl.DataFrame:
        hit = q.sort(col).join_asof(
            nv.select("host", "gpu", "time", "_c"),
            left_on=col,
            right_on="time",
            by=["host", "gpu"],
            strategy="backward",
            check_sortedness=False,  # sorted by ``col`` overall, so within every group
        )
        return hit.select(*KEYS, "host", "gpu", pl.col("_c").fill_null(0).alias(col))

    hit = (
        count_at("end_time")
        .join(count_at("_lo"), on=[*KEYS, "host", "gpu"])
        .with_columns(_n=pl.col("end_time") - pl.col("_lo"))
        .filter(pl.col("_n") > 0)
    )
    top = (
        hit.select(*KEYS, "host", "gpu", _n_events=pl.col("_n").cast(pl.UInt32))
        # a tie goes to the first host, then GPU: group_by's order is a hash's, not the data's
        .sort(["_n_events", "host", "gpu"], descending=[True, False, False])
        .group_by(KEYS, maintain_order=True)
        .first()
    )
    gpu = pl.when(pl.col("gpu") >= 0).then(pl.col("gpu")).cast(pl.Int32)
    return top.select(*KEYS, _n_host="host", _n_gpu=gpu, _n_events="_n_events")
