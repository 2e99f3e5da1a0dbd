"""What the hourly rollups a Prometheus-compatible TSDB computes share between the source that
asks for them (``sources.prometheus``) and the parser that stores them
(``ingest.formats.prom_rollup``): the rollup functions, the label that names which one a series
holds, how a response's series become one row per series-hour, and which rows cannot stand for
their hour's samples.

A rollup series is the answer to ``FN(metric[range])`` evaluated at the last millisecond of each
hour, with ``__name__`` and ``goodput_rollup="<metric>:<column>"`` set by ``label_replace`` (the
metric is in it too because ``or``, which joins the rollups of all metrics into one answer,
matches series without their ``__name__``): its value at time t is that rollup over the
samples of the hour holding t.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from ingest.gpu_labels import FOLDED_LABELS
from ingest.gpu_labels import FP64_BLANK
from ingest.gpu_labels import INT32_BLANK
from ingest.gpu_labels import INT32_MAX
from ingest.gpu_labels import INT64_BLANK_FLOAT
from ingest.prom_series import label_columns

ROLLUP_LABEL = "goodput_rollup"
# gpu_rollups column -> the PromQL range function that computes it. The source asks for
# ``CONSTANT_FILLED`` only where the hour's min != max: in a constant hour (most hours of an
# error counter) they equal its min, and are filled in from it here (a row without max is
# constant; one with max == min may lack mean and last).
ROLLUP_FUNCTIONS = {
    "n": "count_over_time",
    "mean": "avg_over_time",
    "min": "min_over_time",
    "max": "max_over_time",
    "last": "last_over_time",
}
CONSTANT_FILLED = ("max", "mean", "last")
HOUR_S = 3600

# the ranges of DCGM blank values (ingest.gpu_labels): a sample there is "unsupported", stored
# as null and left out of gpu_hourly, so a TSDB aggregate over one is not the hour's rollup
_BLANK_RANGES = (
    (INT32_BLANK, INT32_MAX),
    (FP64_BLANK, FP64_BLANK + 15),
    (INT64_BLANK_FLOAT, float("inf")),
)


def series_points(result: list) -> tuple[pl.DataFrame, list[dict], list[tuple[int, str, str]]]:
    """The points of a matrix ``result`` as (series, t, raw) rows (t in float seconds, raw the
    value text), the labels of each series (``labels[series]``), and the entries that are not a
    series of [time, value] pairs, as (index, raw JSON, reason). A series of [number, string]
    pairs (what Prometheus writes) is taken whole, with no per-point Python work."""
    lengths, ts, raws, labels, bad = [], [], [], [], []
    for i, s in enumerate(result):
        values = s.get("values") if isinstance(s, dict) else None
        if not isinstance(values, list) or not isinstance(s.get("metric", {}), dict):
            bad.append(
                (i, json.dumps(s)[:500], "series is not an object with metric labels and values")
            )
            continue
        if values and not (set(map(type, values)) <= {list} and set(map(len, values)) == {2}):
            bad.append(
                (i, json.dumps(s)[:500], "series has points that are not [time, value] pairs")
            )
            continue
        lengths.append(len(values))
        labels.append({str(a): str(b) for a, b in (s.get("metric") or {}).items()})
        if values:
            t, v = zip(*values, strict=True)
            ts.extend(t if set(map(type, t)) <= {int, float} else map(_seconds, t))
            raws.extend(v if set(map(type, v)) == {str} else map(str, v))
    points = pl.DataFrame(
        {
            "series": np.repeat(np.arange(len(lengths), dtype=np.int64), lengths),
            "t": ts,
            "raw": raws,
        },
        schema={"series": pl.Int64, "t": pl.Float64, "raw": pl.Utf8},
    )
    return points, labels, bad


def _seconds(t) -> float | None:
    try:
        return float(t)
    except (TypeError, ValueError):
        return None


def series_key(labels: dict) -> str:
    """One series' identity: its labels but the rollup label, as sorted JSON."""
    return json.dumps({k: v for k, v in labels.items() if k != ROLLUP_LABEL}, sort_keys=True)


def record_series(labels: dict) -> str:
    """The series as the warehouse keys its samples and hours (``_SERIES_KEY``: metric, host, GPU,
    UUID, PCI bus, MIG instance), as JSON: the TSDB series of one GPU's metric whose other labels
    differ (dcgm-exporter's ``pod`` while a job runs, ``modelName``) are one record series."""
    cols = label_columns(labels)
    return json.dumps(
        [labels.get("__name__"), *(cols[lab] for lab in FOLDED_LABELS.values())]
        + [cols["host"] or cols["instance_host"]]
        + [cols[c] for c in ("gpu", "uuid", "pci_bus", "mig_instance")]
    )


def rollup_label(metric: str, column: str) -> str:
    return f"{metric}:{column}"


def rollup_column(labels: dict) -> str | None:
    """The gpu_rollups column a rollup series holds (as its label says), else None."""
    return labels.get(ROLLUP_LABEL, "").rpartition(":")[2] or None


def readable_time() -> pl.Expr:
    """A point's time ``t`` (seconds) is a number a clock can hold (not NaN, not beyond ~33,000
    years)."""
    return pl.col("t").is_not_null() & (pl.col("t").abs() < 1e12)


def rollup_rows(points: pl.DataFrame, labels: list[dict], period_s: int = HOUR_S) -> pl.DataFrame:
    """``series_points`` of rollup series -> one row per (series ``key``, ``hour``) holding the
    five rollups (``CONSTANT_FILLED`` from the min in a constant hour; null where the response
    lacks one), with its ``record`` series (``record_series``) and ``copy`` (0, or the how-manyth
    repeat of the series in the answer). Points with no time, or of a series with no or an unknown
    rollup label, are left out (the parser quarantines them)."""
    per_series = pl.DataFrame(
        {
            "series": range(len(labels)),
            "key": [series_key(x) for x in labels],
            "record": [record_series(x) for x in labels],
            "fn": [rollup_column(x) for x in labels],
        },
        schema={"series": pl.Int64, "key": pl.Utf8, "record": pl.Utf8, "fn": pl.Utf8},
    )
    pts = points.join(per_series, on="series", how="left").filter(
        pl.col("fn").is_in(list(ROLLUP_FUNCTIONS)) & readable_time()
    )
    pts = pts.with_columns(
        value=pl.col("raw")
        .str.strip_chars()
        .str.replace(r"^\+", "")
        .cast(pl.Float64, strict=False),
        hour=pl.from_epoch(
            ((pl.col("t") // period_s) * period_s).cast(pl.Int64), time_unit="s"
        ).cast(pl.Datetime("us")),
    )
    # a series the answer holds twice makes a second row (``copy`` 1, ...): the warehouse
    # stores it once, counted as a repeat, or quarantines it when its values differ
    pts = pts.with_columns(copy=pl.int_range(pl.len()).over("key", "hour", "fn"))
    rows = pts.group_by("key", "hour", "copy", maintain_order=True).agg(
        pl.col("record").first(),
        has_max=(pl.col("fn") == "max").any(),
        **{c: pl.col("value").filter(pl.col("fn") == c).first() for c in ROLLUP_FUNCTIONS},
    )
    constant = ~pl.col("has_max") | (pl.col("min") == pl.col("max"))
    return rows.with_columns(
        pl.when(~pl.col("has_max") if c == "max" else pl.col(c).is_null() & constant)
        .then(pl.col("min"))
        .otherwise(pl.col(c))
        .alias(c)
        for c in CONSTANT_FILLED
    ).drop("has_max")


def several_label_sets() -> pl.Expr:
    """Whether a ``rollup_rows`` row's hour holds its record series under several label sets."""
    return pl.col("key").n_unique().over("record", "hour") > 1


def unusable() -> pl.Expr:
    """Why a ``rollup_rows`` row cannot stand for its series-hour (null when it can): a rollup
    missing from the response, a value that is not a finite number, a min..max range that may
    hold a DCGM blank (the TSDB averaged it; a file ingest stores it as null and leaves it out),
    or an hour its record series spends under several label sets (a job's ``pod`` label came or
    went: the warehouse keys one hour of the GPU's metric, and one set's rollup is not the
    hour's). Its raw samples are pulled and stored instead."""
    values = [pl.col(c) for c in ROLLUP_FUNCTIONS]
    finite = pl.all_horizontal(*(v.is_finite() for v in values))
    blank = pl.any_horizontal(
        *((pl.col("min") <= hi) & (pl.col("max") >= lo) for lo, hi in _BLANK_RANGES)
    )
    return (
        pl.when(pl.any_horizontal(v.is_null() for v in values))
        .then(
            pl.lit(
                f"incomplete rollup: some of {', '.join(ROLLUP_FUNCTIONS)} missing or not a number"
            )
        )
        .when(~finite)
        .then(pl.lit("rollup value is not a finite number (the hour holds NaN or Inf samples)"))
        .when(blank)
        .then(
            pl.lit(
                "the hour's min..max range may hold a DCGM blank value, which a rollup cannot "
                "leave out"
            )
        )
        .when((pl.col("n") < 1) | (pl.col("n") > 1e15) | (pl.col("n") != pl.col("n").floor()))
        .then(pl.lit("rollup sample count is not a positive whole number"))
        .when(several_label_sets())
        .then(
            pl.lit(
                "the hour holds its GPU metric under several label sets (a label such as pod "
                "changed): one set's rollup is not the hour's"
            )
        )
    )
