"""The spans a GPU ran slow by its own telemetry (``gpu_signal_spans``), one day at a time: the
SQL ``rollups`` runs over a day's ``gpu_samples`` (``day``) and ``gpu_rollups`` (``rolled``).

Three signals, each a series of points per GPU (``warehouse.signals`` names the metrics):

* ``clocks``: the clock-event reasons (the bitmask, or nvidia-smi's one-bit fields OR-ed per
  sample time) with the SM clock's ratio to its reference at that time (the nearest clock
  sample at or up to 5 s after it, within 5 minutes; else the clock's hourly mean). A point is
  slow when a slowdown bit is set (``SLOW_MASK``), or SW power cap holds the clock under
  ``POWER_CAP_RATIO`` of its reference.
* ``pcie_width``, ``pcie_gen``: the link's width or generation; a point is slow below its
  reference.

A reference is the GPU's own maximum where exported (max SM clock, max link width or
generation), else the highest level any GPU of its host reached that day. A raw point stands for
the time half-way to its neighbours, each gap capped at ``HOLD_S`` or 1.5 times the series'
median spacing, whichever is longer (a pull stores a state's every change with the sample
before it, and nothing in between, so up to an hour between stored points of one series is
one state); a TSDB rollup whose hour held one value (min = max) stands for its whole hour (an
hour that changed comes as raw samples). A span is a run of slow points with no gap beyond the
cap, cut at midnight (``signal_spans`` merges the days again).
"""

from __future__ import annotations

from analysis.telemetry.sql import sql_values
from warehouse.signals import BIT
from warehouse.signals import BIT_METRICS
from warehouse.signals import MASK_METRICS
from warehouse.signals import MAX_SM_CLOCK_METRICS
from warehouse.signals import PCIE_GEN_METRICS
from warehouse.signals import PCIE_MAX_GEN_METRICS
from warehouse.signals import PCIE_MAX_WIDTH_METRICS
from warehouse.signals import PCIE_WIDTH_METRICS
from warehouse.signals import POWER_CAP
from warehouse.signals import POWER_CAP_RATIO
from warehouse.signals import REASON_METRICS
from warehouse.signals import SLOW_MASK
from warehouse.signals import SM_CLOCK_METRICS

IDLE = BIT["gpu_idle"]
HOLD_S = 3600.0  # the longest gap between two stored points of one series read as one state
NEAR_S = 300.0  # a clock sample this close to a reasons sample is the clock at its time

# level metric -> its signal; reference metric -> the signal it bounds
LEVELS = {
    **dict.fromkeys(SM_CLOCK_METRICS, "clocks"),
    **dict.fromkeys(PCIE_WIDTH_METRICS, "pcie_width"),
    **dict.fromkeys(PCIE_GEN_METRICS, "pcie_gen"),
}
MAXIMA = {
    **dict.fromkeys(MAX_SM_CLOCK_METRICS, "clocks"),
    **dict.fromkeys(PCIE_MAX_WIDTH_METRICS, "pcie_width"),
    **dict.fromkeys(PCIE_MAX_GEN_METRICS, "pcie_gen"),
}
SIGNAL_METRICS = (*REASON_METRICS, *LEVELS, *MAXIMA)
_GPU_KEY = ("cluster", "host", "gpu", "uuid")
_SERIES = ", ".join(_GPU_KEY)


def _case(mapping: dict, column: str = "metric") -> str:
    """A SQL CASE of ``column`` over ``mapping``'s keys giving its values."""
    whens = " ".join(
        f"WHEN {sql_values([k])} THEN {v if isinstance(v, int) else sql_values([v])}"
        for k, v in mapping.items()
    )
    return f"CASE {column} {whens} END"


def _same(a: str, b: str, cols=_GPU_KEY) -> str:
    return " AND ".join(f"{a}.{c} IS NOT DISTINCT FROM {b}.{c}" for c in cols)


def _mask(value: str) -> str:
    """The reasons bitmask one sample of a reason metric gives (a whole mask, or one bit)."""
    bits = _case(BIT_METRICS)
    return (
        f"CASE WHEN metric IN ({sql_values(MASK_METRICS)}) THEN CAST({value} AS BIGINT) "
        f"ELSE CASE WHEN {value} <> 0 THEN {bits} ELSE 0 END END"
    )


def _slow(mask: str, ratio: str) -> str:
    return (
        f"(({mask} & {SLOW_MASK}) <> 0 OR (({mask} & {POWER_CAP}) <> 0 "
        f"AND {ratio} < {POWER_CAP_RATIO}))"
    )


SPANS_SQL = f"""
WITH raw AS (
    SELECT {_SERIES}, time, metric, value FROM day
    WHERE metric IN ({sql_values(SIGNAL_METRICS)}) AND value IS NOT NULL AND isfinite(value)
), hourly AS (
    SELECT {_SERIES}, hour, metric, n, mean, min, max FROM rolled
    WHERE metric IN ({sql_values(SIGNAL_METRICS)})
), gpu_refs AS (
    SELECT {_SERIES}, {_case(MAXIMA)} AS signal, max(v) AS ref FROM (
        SELECT {_SERIES}, metric, value AS v FROM raw WHERE metric IN ({sql_values(MAXIMA)})
        UNION ALL
        SELECT {_SERIES}, metric, max AS v FROM hourly WHERE metric IN ({sql_values(MAXIMA)})
    ) GROUP BY ALL
), host_refs AS (
    SELECT cluster, host, {_case(LEVELS)} AS signal, max(v) AS ref FROM (
        SELECT cluster, host, metric, value AS v FROM raw WHERE metric IN ({sql_values(LEVELS)})
        UNION ALL
        SELECT cluster, host, metric, max AS v FROM hourly WHERE metric IN ({sql_values(LEVELS)})
    ) GROUP BY ALL
), refs AS (
    SELECT l.{_SERIES.replace(", ", ", l.")}, l.signal, coalesce(g.ref, h.ref) AS ref
    FROM (SELECT DISTINCT {_SERIES}, {_case(LEVELS)} AS signal FROM (
            SELECT {_SERIES}, metric FROM raw WHERE metric IN ({sql_values(LEVELS)})
            UNION ALL SELECT {_SERIES}, metric FROM hourly WHERE metric IN ({sql_values(LEVELS)})
        )) l
    LEFT JOIN gpu_refs g ON {_same("l", "g")} AND l.signal = g.signal
    LEFT JOIN host_refs h ON l.cluster IS NOT DISTINCT FROM h.cluster
        AND l.host IS NOT DISTINCT FROM h.host AND l.signal = h.signal
    WHERE coalesce(g.ref, h.ref) > 0
), levels AS (
    SELECT r.cluster, r.host, coalesce(r.gpu, -1) AS g, coalesce(r.uuid, '') AS u, r.gpu, r.uuid,
        r.time, f.signal, r.value / f.ref AS ratio
    FROM (SELECT *, {_case(LEVELS)} AS signal FROM raw WHERE metric IN ({sql_values(LEVELS)})) r
    JOIN refs f ON {_same("r", "f")} AND r.signal = f.signal
), hourly_levels AS (
    SELECT h.cluster, h.host, h.gpu, h.uuid, h.hour, f.signal, h.n, h.mean / f.ref AS ratio,
        h.min = h.max AS steady, h.min / f.ref AS steady_ratio
    FROM (SELECT *, {_case(LEVELS)} AS signal FROM hourly WHERE metric IN ({sql_values(LEVELS)})) h
    JOIN refs f ON {_same("h", "f")} AND h.signal = f.signal
), reasons AS (
    SELECT {_SERIES}, coalesce(gpu, -1) AS g, coalesce(uuid, '') AS u, time,
        bit_or({_mask("value")}) AS mask
    FROM raw WHERE metric IN ({sql_values(REASON_METRICS)}) GROUP BY ALL
), clocks AS (
    SELECT r.cluster, r.host, r.gpu, r.uuid, r.time, r.mask,
        coalesce(CASE WHEN epoch_us(r.time) - epoch_us(c.time) <= {NEAR_S * 1e6}
            THEN c.ratio END, hl.ratio) AS ratio
    FROM reasons r
    ASOF LEFT JOIN (SELECT * FROM levels WHERE signal = 'clocks') c
        ON r.cluster IS NOT DISTINCT FROM c.cluster AND r.host IS NOT DISTINCT FROM c.host
        AND r.g = c.g AND r.u = c.u AND r.time + INTERVAL 5 SECOND >= c.time
    LEFT JOIN (SELECT * FROM hourly_levels WHERE signal = 'clocks') hl
        ON {_same("r", "hl")} AND hl.hour = date_trunc('hour', r.time)
), points AS (
    -- raw points (lo = hi = their time, placed below) and a TSDB hour of one value, which
    -- stands for the whole hour
    SELECT {_SERIES}, 'clocks' AS signal, false AS hour, epoch_us(time) / 1e6 AS lo0,
        epoch_us(time) / 1e6 AS hi0, mask, ratio, 1 AS n,
        coalesce({_slow("mask", "ratio")}, false) AS slow, (mask & {IDLE}) = 0 AS busy
    FROM clocks
    UNION ALL
    SELECT {_SERIES}, signal, false, epoch_us(time) / 1e6, epoch_us(time) / 1e6, NULL, ratio, 1,
        ratio < 0.999, NULL
    FROM levels WHERE signal <> 'clocks'
    UNION ALL
    SELECT {_SERIES}, 'clocks', true, h0, h0 + 3600, mask, ratio, n,
        coalesce({_slow("mask", "ratio")}, false), (mask & {IDLE}) = 0
    FROM (
        SELECT x.*, hl.ratio, epoch_us(x.hour) / 1e6 AS h0 FROM (
            SELECT {_SERIES}, hour, bit_or({_mask("min")}) AS mask, max(n) AS n
            FROM hourly WHERE metric IN ({sql_values(REASON_METRICS)})
            GROUP BY ALL HAVING bool_and(min = max)
        ) x LEFT JOIN (SELECT * FROM hourly_levels WHERE signal = 'clocks') hl
            ON {_same("x", "hl")} AND hl.hour = x.hour
    )
    UNION ALL
    SELECT {_SERIES}, signal, true, h0, h0 + 3600, NULL, steady_ratio, n, steady_ratio < 0.999,
        NULL
    FROM (SELECT *, epoch_us(hour) / 1e6 AS h0 FROM hourly_levels)
    WHERE signal <> 'clocks' AND steady
), spaced AS (
    SELECT *, lag(hour) OVER w AS prev_hour, lag(hi0) OVER w AS prev_hi,
        lead(hour) OVER w AS next_hour, lead(lo0) OVER w AS next_lo,
        CASE WHEN NOT hour AND NOT lag(hour) OVER w THEN lo0 - lag(hi0) OVER w END AS raw_gap
    FROM points WINDOW w AS (PARTITION BY {_SERIES}, signal ORDER BY lo0, hour)
), capped AS (
    SELECT *, greatest(1.5 * coalesce(spacing, 0), {HOLD_S}) AS cap FROM (
        SELECT *, median(raw_gap) OVER (PARTITION BY {_SERIES}, signal) AS spacing FROM spaced
    )
), covered AS (
    -- a raw point reaches half-way to a raw neighbour, and up to a TSDB hour (its value holds
    -- until the next stored point), each side at most ``cap``
    SELECT {_SERIES}, signal, mask, ratio, n, slow, busy, coalesce(spacing, 3600.0) AS spacing,
        CASE WHEN hour THEN lo0 ELSE lo0 - least(greatest(CASE
            WHEN prev_hour IS NULL THEN coalesce(spacing, 0) / 2
            WHEN prev_hour THEN lo0 - prev_hi ELSE (lo0 - prev_hi) / 2 END, 0), cap) END AS lo,
        CASE WHEN hour THEN hi0 ELSE hi0 + least(greatest(CASE
            WHEN next_hour IS NULL THEN coalesce(spacing, 0) / 2
            WHEN next_hour THEN next_lo - hi0 ELSE (next_lo - hi0) / 2 END, 0), cap) END AS hi,
        lo0 - lo0 % 86400 AS day0
    FROM capped
), clipped AS (
    SELECT * REPLACE (greatest(lo, day0) AS lo, least(hi, day0 + 86400) AS hi) FROM covered
), runs AS (
    SELECT *, sum(brk) OVER (PARTITION BY {_SERIES}, signal ORDER BY lo, hi
        ROWS UNBOUNDED PRECEDING) AS run
    FROM (
        SELECT *, CASE WHEN slow IS DISTINCT FROM lag(slow) OVER w
            OR busy IS DISTINCT FROM lag(busy) OVER w
            OR lo > max(hi) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) + 1
            THEN 1 ELSE 0 END AS brk
        FROM clipped WINDOW w AS (PARTITION BY {_SERIES}, signal ORDER BY lo, hi)
    )
)
SELECT {_SERIES}, signal,
    -- stored as every table's times are: TIMESTAMPTZ (the session's zone is UTC)
    make_timestamp(CAST(min(lo) * 1e6 AS BIGINT))::TIMESTAMPTZ AS start_time,
    make_timestamp(CAST(max(hi) * 1e6 AS BIGINT))::TIMESTAMPTZ AS end_time,
    CASE WHEN signal = 'clocks' THEN bit_or(mask & {SLOW_MASK | POWER_CAP}) END AS reasons,
    bool_and(busy) AS busy,
    sum(ratio * (hi - lo)) / nullif(sum((hi - lo) * (ratio IS NOT NULL)::INT), 0) AS ratio,
    sum(n)::BIGINT AS samples, max(spacing) AS spacing_s
FROM runs WHERE slow GROUP BY {_SERIES}, signal, run
ORDER BY host NULLS FIRST, gpu NULLS FIRST, signal, start_time
"""
