"""The spans a GPU ran slow by its own telemetry, whole: the day-cut rows of
``gpu_signal_spans`` (``analysis.telemetry.signals``) merged across midnight, with their reasons
decoded and their cause (``warehouse.signals``)."""

from __future__ import annotations

import polars as pl

from warehouse.signals import cause_expr
from warehouse.signals import names_expr

SPAN_KEY = ["cluster", "host", "gpu", "uuid", "signal", "busy"]
# a span this long is a fail-slow episode (``rates`` counts it; alone, ``attribution`` makes it a
# slow period of a job on the GPU); a shorter one rests on a sample or two
MIN_EPISODE_S = 600.0
# a clocks span stands for a thermal or power slowdown by its bits; a link span for PCIe
PCIE_SIGNALS = ("pcie_width", "pcie_gen")
SCHEMA = {
    "cluster": pl.Utf8,
    "host": pl.Utf8,
    "gpu": pl.Int32,
    "uuid": pl.Utf8,
    "signal": pl.Utf8,
    "start_time": pl.Datetime("us"),
    "end_time": pl.Datetime("us"),
    "duration_s": pl.Float64,
    "reasons": pl.Int64,
    "busy": pl.Boolean,
    "reason_names": pl.Utf8,
    "cause": pl.Utf8,
    "ratio": pl.Float64,
    "samples": pl.Int64,
    "spacing_s": pl.Float64,
}


def merged(day_spans: pl.DataFrame) -> pl.DataFrame:
    """``gpu_signal_spans`` rows as whole spans (``SCHEMA``): a day's span and the next that
    starts within a sample spacing of its end (the day cut between them, or one missing sample)
    are one; its ratio is the duration-weighted mean of theirs."""
    if day_spans.height == 0:
        return pl.DataFrame(schema=SCHEMA)
    gap = pl.max_horizontal(pl.col("spacing_s").fill_null(0.0), pl.lit(1.0))
    ordered = day_spans.sort([*SPAN_KEY, "start_time"], nulls_last=True).with_columns(
        _d=(pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6
    )
    reach = pl.col("end_time").cum_max().shift(1).over(SPAN_KEY)
    ordered = ordered.with_columns(
        _new=(
            reach.is_null()
            | (pl.col("start_time") > reach + pl.duration(microseconds=(gap * 1e6).cast(pl.Int64)))
        )
    ).with_columns(_grp=pl.col("_new").cum_sum().over(SPAN_KEY))
    weighted = pl.col("ratio") * pl.col("_d")
    out = ordered.group_by([*SPAN_KEY, "_grp"], maintain_order=True).agg(
        pl.col("start_time").min(),
        pl.col("end_time").max(),
        pl.col("reasons").bitwise_or(),
        (weighted.sum() / pl.col("_d").filter(pl.col("ratio").is_not_null()).sum()).alias("ratio"),
        pl.col("samples").sum(),
        pl.col("spacing_s").max(),
    )
    out = out.with_columns(
        duration_s=(pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 1e6,
        reason_names=pl.when(pl.col("signal") == "clocks").then(names_expr(pl.col("reasons"))),
        cause=pl.when(pl.col("signal").is_in(PCIE_SIGNALS))
        .then(pl.lit("pcie"))
        .otherwise(cause_expr(pl.col("reasons"))),
        ratio=pl.col("ratio").fill_nan(None),
    )
    return out.select(list(SCHEMA)).cast(SCHEMA)


def gpu_spans(wh) -> pl.DataFrame:
    """Every whole span the warehouse's telemetry holds (``merged``)."""
    return merged(wh.read("gpu_signal_spans"))
