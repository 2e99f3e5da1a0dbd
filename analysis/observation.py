"""The observation window: per source, the span its records robustly cover, and the one window
(``observed_from``, ``observed_to``) every exposure is measured over (``observation_window``).

A source's span is the dense part of its record times, not min..max: the core is the 5th..95th
percentile; records further than half the core's width (at least an hour) beyond it are
outliers (a clock-skewed sample dated a month ahead, in 2023 or 9999) and do not stretch the
span, which runs from the earliest to the latest record that is not an outlier. All in DuckDB
over the Parquet, so memory does not grow with the data.

The window is the union of the spans of the continuous sources (scheduler accounting, GPU
telemetry, node events); with none of them, of the hardware event logs (a BMC SEL keeps entries
from before collection began, so it only decides when nothing else can); with no dated source at
all (an inventory alone) the window cannot be inferred: it runs from the earliest to the latest
inventory record and is flagged. Explicit bounds (``--observed-from`` / ``--observed-to``)
override the inferred ones, each on its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from datetime import timedelta
from fractions import Fraction

import polars as pl

from analysis.telemetry.counters import COUNTER_SOURCE
from analysis.telemetry.rollups import sample_hours_sql
from analysis.telemetry.rollups import sample_times_sql
from warehouse.schemas import TABLES
from warehouse.schemas import conform

CORE_LOW, CORE_HIGH = 0.05, 0.95
OUTLIER_MARGIN = 0.5  # of the core's width, beyond the core
MIN_MARGIN_US = 3_600_000_000  # one hour
# Spans disagree when one source starts or ends this much (and this share of the window) apart
# from the others' union.
DISAGREE_DAYS = 7.0
DISAGREE_SHARE = 0.25

# Bounds an explicit --observed-from / --observed-to must lie within: fleets of GPUs with error
# logging are younger than this, and a bound past a year from now is a typo (a window of
# 739,680 days from 0001-01-01 divides every rate by thousands)
PLAUSIBLE_FROM = datetime(2000, 1, 1)
PLAUSIBLE_AHEAD = timedelta(days=366)


def check_bound(name: str, value: datetime | None, now: datetime) -> None:
    """Raise ValueError (one line) when an explicit window bound is outside the plausible range:
    ``PLAUSIBLE_FROM`` .. ``now`` + ``PLAUSIBLE_AHEAD`` (naive UTC)."""
    if value is not None and not PLAUSIBLE_FROM <= value <= now + PLAUSIBLE_AHEAD:
        raise ValueError(
            f"{name} {value.date().isoformat()} is outside {PLAUSIBLE_FROM:%Y-%m-%d} .. "
            f"{now + PLAUSIBLE_AHEAD:%Y-%m-%d} (a year from now); check the date"
        )


# (source name, table, time expression, kind, filter): kind 'continuous' sources decide the window
SOURCES: tuple[tuple[str, str, str, str, str], ...] = (
    ("scheduler", "job_attempts", "coalesce(end_time, start_time)", "continuous", "true"),
    ("telemetry", "gpu_samples", "time", "continuous", "true"),
    ("node_events", "node_events", "time", "continuous", "true"),
    ("hw_events", "hw_events", "time", "events", f"source <> '{COUNTER_SOURCE}'"),
)


@dataclass(frozen=True)
class Window:
    observed_from: datetime | None
    observed_to: datetime | None
    method: str  # explicit | inferred | earliest_record | none (and mixes: 'explicit/inferred')
    note: str = ""

    @property
    def flagged(self) -> bool:
        return self.method.endswith("earliest_record") or self.observed_from is None

    def line(self) -> str:
        if self.observed_from is None:
            return "observation window: none (no dated records)"
        return (
            f"observation window: {self.observed_from:%Y-%m-%d %H:%M} .. "
            f"{self.observed_to:%Y-%m-%d %H:%M} UTC "
            f"({(self.observed_to - self.observed_from).total_seconds() / 86400:.1f} days, "
            f"{self.method})" + (f"; {self.note}" if self.note else "")
        )


def _span_sql(view: str, expr: str, where: str) -> str:
    return f"""
    WITH t AS (SELECT epoch_us({expr}) AS x FROM ({view}) WHERE {expr} IS NOT NULL AND {where}),
    q AS (SELECT count(*) AS n, min(x) AS mn, max(x) AS mx,
                 quantile_disc(x, {CORE_LOW}) AS lo, quantile_disc(x, {CORE_HIGH}) AS hi FROM t),
    m AS (SELECT *, greatest({OUTLIER_MARGIN} * (hi - lo), {MIN_MARGIN_US}) AS margin FROM q)
    SELECT m.n, m.mn, m.mx,
           (SELECT min(x) FROM t WHERE x >= m.lo - m.margin) AS span_from,
           (SELECT max(x) FROM t WHERE x <= m.hi + m.margin) AS span_to,
           (SELECT count(*) FROM t WHERE x < m.lo - m.margin OR x > m.hi + m.margin) AS outliers
    FROM m
    """


def _telemetry_span(wh, con) -> tuple:
    """``_span_sql``'s figures for gpu_samples (n, first, last, span from / to, outliers, in
    epoch microseconds) from the per-hour counts
    (``analysis.telemetry.rollups.sample_hours_sql``): each rank and bound falls in one hour, and
    only that hour's samples are read (a few hours of the whole history). quantile_disc's rank of
    q over n records is ceil(n * q) - 1 (0-based)."""
    hours = con.execute(
        "SELECT epoch_us(hour), n, epoch_us(first), epoch_us(last), dates FROM "
        f"({sample_hours_sql(wh)}) ORDER BY hour"
    ).fetchall()
    n = sum(h[1] for h in hours)
    if not n:
        return 0, None, None, None, None, 0

    def times(h, cond: str, agg: str = "x", tail: str = "") -> int:
        """``agg`` over the times x (epoch microseconds) of hour ``h`` that meet ``cond``."""
        return con.execute(
            f"SELECT {agg} FROM (SELECT epoch_us(time) AS x FROM ({sample_times_sql(wh, h[4])})) "
            f"WHERE x >= {h[0]} AND x < {h[0] + 3_600_000_000} AND {cond} {tail}"
        ).fetchall()[0][0]

    def rank(k: int) -> int:  # the k-th smallest time (0-based)
        for h in hours:
            if k < h[1]:
                return times(h, "true", tail=f"ORDER BY x LIMIT 1 OFFSET {k}")
            k -= h[1]
        raise AssertionError("rank beyond the samples")

    lo = rank(max(math.ceil(float(n) * CORE_LOW) - 1, 0))
    hi = rank(max(math.ceil(float(n) * CORE_HIGH) - 1, 0))
    margin = max(Fraction(OUTLIER_MARGIN) * (hi - lo), MIN_MARGIN_US)
    a, b = (
        math.ceil(lo - margin),
        math.floor(hi + margin),
    )  # integer times: x >= a, x <= b as in SQL
    # the first time >= a and the last <= b; records outside [a, b]
    first_in = next(h for h in hours if h[3] >= a)
    span_from = first_in[2] if first_in[2] >= a else times(first_in, f"x >= {a}", "min(x)")
    last_in = next(h for h in reversed(hours) if h[2] <= b)
    span_to = last_in[3] if last_in[3] <= b else times(last_in, f"x <= {b}", "max(x)")
    out = 0
    for h in hours:
        if h[3] < a or h[2] > b:
            out += h[1]
        elif h[2] < a or h[3] > b:
            out += times(h, f"(x < {a} OR x > {b})", "count(*)")
    return n, hours[0][2], hours[-1][3], span_from, span_to, out


def _ts(us) -> datetime | None:
    return None if us is None else pl.Series([us], dtype=pl.Int64).cast(pl.Datetime("us"))[0]


def source_spans(wh) -> pl.DataFrame:
    """One row per dated source with records: records, first, last, robust span, outliers."""
    rows = []
    for name, table, expr, kind, where in SOURCES:
        if not wh.files(table) and not (table == "gpu_samples" and wh.files("gpu_rollups")):
            continue
        with wh.connect() as con:
            if (
                table == "gpu_samples"
                and where == "true"
                and not getattr(wh, "inputs", {}).get(table)
            ):
                n, mn, mx, lo, hi, out = _telemetry_span(wh, con)
            else:  # every record (a scope's filtered samples included)
                n, mn, mx, lo, hi, out = con.execute(
                    _span_sql(wh.view_sql(table), expr, where)
                ).fetchall()[0]
        if n:
            rows.append(
                {
                    "source": name,
                    "kind": kind,
                    "records": n,
                    "first": _ts(mn),
                    "last": _ts(mx),
                    "span_from": _ts(lo),
                    "span_to": _ts(hi),
                    "outliers": out,
                }
            )
    schema = {
        "source": pl.Utf8,
        "kind": pl.Utf8,
        "records": pl.Int64,
        "first": pl.Datetime("us"),
        "last": pl.Datetime("us"),
        "span_from": pl.Datetime("us"),
        "span_to": pl.Datetime("us"),
        "outliers": pl.Int64,
    }
    return pl.DataFrame(rows, schema=schema)


def _inventory_bounds(wh) -> tuple[datetime | None, datetime | None]:
    if not wh.files("component_history"):
        return None, None
    with wh.connect() as con:
        lo, hi = con.execute(
            "SELECT min(installed_at), greatest(max(installed_at), max(removed_at)) FROM "
            f"({wh.view_sql('component_history')})"
        ).fetchall()[0]
    return lo, hi


def infer_window(
    spans: pl.DataFrame,
    inventory: tuple[datetime | None, datetime | None] = (None, None),
    observed_from: datetime | None = None,
    observed_to: datetime | None = None,
) -> Window:
    """The window from source spans (pure): explicit bounds win, each on its own."""
    use = spans.filter(pl.col("kind") == "continuous")
    if use.height == 0:
        use = spans
    if use.height:  # whole seconds: sub-second clock digits are not information about exposure
        lo, hi = (
            use["span_from"].min().replace(microsecond=0),
            use["span_to"].max().replace(microsecond=0),
        )
        how, note = "inferred", ""
        out = int(use["outliers"].sum())
        if out:
            note = f"{out:,} outlying record time(s) outside the span ignored"
    elif inventory[0] is not None:
        lo, hi, how = inventory[0], inventory[1], "earliest_record"
        note = (
            "no dated source besides the inventory: window inferred from the earliest and "
            "latest inventory record; pass --observed-from / --observed-to"
        )
    else:
        lo, hi, how, note = None, None, "none", ""
    if observed_from is None and observed_to is None:
        return Window(lo, hi, how, note)
    f = observed_from or lo
    t = observed_to or hi
    if f is not None and t is not None and t <= f:
        raise ValueError(f"observation window is empty: from {f} to {t}")
    if observed_from is not None and observed_to is not None:
        return Window(f, t, "explicit")
    return Window(f, t, f"explicit/{how}" if observed_from is not None else f"{how}/explicit", note)


def spans_disagree(spans: pl.DataFrame) -> list[str]:
    """Sources whose span starts or ends well apart from all the others (e.g. telemetry ending a
    month after everything else): one line each."""
    bad = []
    if spans.height < 2:
        return bad
    for row in spans.iter_rows(named=True):
        others = spans.filter(pl.col("source") != row["source"])
        lo, hi = others["span_from"].min(), others["span_to"].max()
        width_days = (max(hi, row["span_to"]) - min(lo, row["span_from"])).total_seconds() / 86400
        limit = max(DISAGREE_DAYS, DISAGREE_SHARE * width_days)
        early = (lo - row["span_from"]).total_seconds() / 86400
        late = (row["span_to"] - hi).total_seconds() / 86400
        if row["kind"] == "events":  # SEL logs legitimately reach back before collection
            early = 0.0
        if early > limit or late > limit:
            bad.append(
                f"{row['source']} spans {row['span_from']:%Y-%m-%d}..{row['span_to']:%Y-%m-%d}, "
                f"the others {lo:%Y-%m-%d}..{hi:%Y-%m-%d}"
            )
    return bad


def window_table(spans: pl.DataFrame, window: Window) -> pl.DataFrame:
    """The ``observation_window`` table: a row per source span and one for the window used."""
    per_source = spans.select(
        "source",
        "records",
        "outliers",
        observed_from="span_from",
        observed_to="span_to",
        first="first",
        last="last",
        method=pl.lit("span"),
        flagged=pl.lit(False),
        note=pl.lit(None, pl.Utf8),
    )
    used = pl.DataFrame(
        {
            "source": ["window"],
            "observed_from": [window.observed_from],
            "observed_to": [window.observed_to],
            "method": [window.method],
            "flagged": [window.flagged],
            "note": [window.note or None],
        },
        schema={
            "source": pl.Utf8,
            "observed_from": pl.Datetime("us"),
            "observed_to": pl.Datetime("us"),
            "method": pl.Utf8,
            "flagged": pl.Boolean,
            "note": pl.Utf8,
        },
    )
    return conform(
        "observation_window",
        pl.concat([conform("observation_window", per_source), conform("observation_window", used)]),
    )


def refresh_observation_window(
    wh, observed_from: datetime | None = None, observed_to: datetime | None = None
) -> tuple[Window, pl.DataFrame]:
    """Infer the window, store ``observation_window``; returns (window, source spans)."""
    spans = source_spans(wh)
    window = infer_window(spans, _inventory_bounds(wh), observed_from, observed_to)
    wh.replace_table("observation_window", window_table(spans, window))
    return window, spans


def stored_window(wh) -> Window | None:
    """The window the last build used (None before any build)."""
    if "observation_window" not in TABLES or not wh.files("observation_window"):
        return None
    w = wh.read("observation_window", "source = 'window'")
    if w.height == 0:
        return None
    r = w.row(0, named=True)
    return Window(r["observed_from"], r["observed_to"], r["method"], r["note"] or "")
