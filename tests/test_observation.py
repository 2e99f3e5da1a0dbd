"""The observation window: robust per-source spans (one clock-skewed record never stretches
exposure), explicit bounds, the flagged inventory-only case, and the span-agreement check."""

import os
from datetime import datetime, timedelta

import polars as pl
import pytest

from analysis.checks import spans_agree
from analysis.observation import (
    infer_window,
    refresh_observation_window,
    source_spans,
    spans_disagree,
)
from pipelines.assets import rollup_days

START = datetime(2026, 1, 5)
DAYS = 60


def _samples(times: list[datetime]) -> pl.DataFrame:
    return pl.DataFrame({"time": times, "host": "n1", "gpu": 0, "metric": "DCGM_FI_DEV_GPU_TEMP", "value": 50.0,
                         "date": [t.date() for t in times]}).with_columns(pl.col("gpu").cast(pl.Int32))


def _jobs(first: datetime, last: datetime, n: int = 200) -> pl.DataFrame:
    step = (last - first) / (n - 1)
    ends = [first + i * step for i in range(n)]
    return pl.DataFrame({"cluster": "c", "scheduler": "slurm", "job_id": [str(i) for i in range(n)], "attempt": 1,
                         "start_time": [e - timedelta(hours=1) for e in ends], "end_time": ends}).with_columns(
        pl.col("attempt").cast(pl.Int32))


def _hourly(start: datetime, days: int) -> list[datetime]:
    return [start + timedelta(hours=h) for h in range(24 * days)]


@pytest.mark.parametrize("skew", [timedelta(days=DAYS + 30), datetime(2023, 3, 1) - START, datetime(9999, 12, 31) - START])
def test_one_skewed_sample_neither_stretches_the_span_nor_breaks_the_rollup_range(wh, skew):
    times = _hourly(START, DAYS)
    wh.replace_table("gpu_samples", _samples([*times, START + skew]))
    spans = source_spans(wh)
    tel = spans.row(0, named=True)
    assert (tel["source"], tel["records"], tel["outliers"]) == ("telemetry", len(times) + 1, 1)
    assert (tel["span_from"], tel["span_to"]) == (times[0], times[-1])
    assert rollup_days(wh) == (START.date().isoformat(), times[-1].date().isoformat())
    window, _ = refresh_observation_window(wh)
    assert (window.observed_from, window.observed_to, window.method) == (times[0], times[-1], "inferred")
    assert "1 outlying record time(s)" in window.note
    stored = wh.read("observation_window", "source = 'window'").row(0, named=True)
    assert (stored["observed_from"], stored["observed_to"], stored["flagged"]) == (times[0], times[-1], False)


def test_sparse_event_logs_keep_their_first_and_last_events():
    # twelve kernel events over sixty days: gaps are wide, none is an outlier
    times = [START + timedelta(days=5 * i, hours=i) for i in range(12)]
    spans = pl.DataFrame({"source": ["hw_events"], "kind": ["events"], "records": [12], "first": [times[0]],
                          "last": [times[-1]], "span_from": [times[0]], "span_to": [times[-1]], "outliers": [0]})
    w = infer_window(spans)
    assert (w.observed_from, w.observed_to) == (times[0], times[-1])


def test_explicit_bounds_override_each_on_its_own_and_an_inventory_alone_is_flagged():
    spans = pl.DataFrame({"source": ["scheduler"], "kind": ["continuous"], "records": [10], "first": [START],
                          "last": [START + timedelta(days=DAYS)], "span_from": [START],
                          "span_to": [START + timedelta(days=DAYS)], "outliers": [0]})
    explicit = datetime(2026, 1, 1)
    w = infer_window(spans, observed_from=explicit)
    assert (w.observed_from, w.observed_to, w.method) == (explicit, START + timedelta(days=DAYS), "explicit/inferred")
    none = spans.clear()
    inv = infer_window(none, (datetime(2023, 1, 1), datetime(2026, 3, 1)))
    assert inv.flagged and inv.method == "earliest_record" and "pass --observed-from" in inv.line()
    assert not infer_window(none, (datetime(2023, 1, 1), datetime(2026, 3, 1)), explicit, datetime(2026, 3, 1)).flagged
    with pytest.raises(ValueError, match="observation window is empty"):
        infer_window(spans, observed_from=START, observed_to=START - timedelta(days=1))


def test_span_check_fails_when_telemetry_ends_a_month_after_the_scheduler(wh):
    wh.replace_table("job_attempts", _jobs(START, START + timedelta(days=DAYS)))
    wh.replace_table("gpu_samples", _samples(_hourly(START, DAYS)))
    res = spans_agree(wh)
    assert res.passed and res.metadata["sources"] == 2
    wh.replace_table("gpu_samples", _samples(_hourly(START, DAYS + 30)))
    res = spans_agree(wh)
    assert not res.passed and res.metadata["disagree"].startswith("telemetry spans 2026-01-05..2026-04-04, the others 2026-01-05..2026-03-05")
    assert len(spans_disagree(source_spans(wh))) == 1


def _span_per_record(times: list[int]) -> tuple:
    """The span as DuckDB's quantile_disc over every record gives it (the former per-record SQL)."""
    import duckdb

    from analysis.observation import CORE_HIGH, CORE_LOW, MIN_MARGIN_US, OUTLIER_MARGIN

    with duckdb.connect() as con:
        con.register("t0", pl.DataFrame({"x": times}, schema={"x": pl.Int64}))
        return con.execute(f"""
            WITH t AS (SELECT x FROM t0),
            q AS (SELECT count(*) AS n, min(x) AS mn, max(x) AS mx,
                         quantile_disc(x, {CORE_LOW}) AS lo, quantile_disc(x, {CORE_HIGH}) AS hi FROM t),
            m AS (SELECT *, greatest({OUTLIER_MARGIN} * (hi - lo), {MIN_MARGIN_US}) AS margin FROM q)
            SELECT m.n, m.mn, m.mx, (SELECT min(x) FROM t WHERE x >= m.lo - m.margin),
                   (SELECT max(x) FROM t WHERE x <= m.hi + m.margin),
                   (SELECT count(*) FROM t WHERE x < m.lo - m.margin OR x > m.hi + m.margin) FROM m""").fetchall()[0]


@pytest.mark.parametrize("seed", range(8))
def test_span_from_counts_per_time_equals_quantiles_over_every_record(seed):
    """The span SQL reads one row per distinct time with its record count; its quantile ranks
    are those of quantile_disc over every record (sizes such as 60, where n * 0.05 rounds up in
    floating point, included), outliers and ties included."""
    import random

    import duckdb

    from analysis.observation import _span_sql

    rng = random.Random(seed)
    hour = 3_600_000_000
    for n in (1, 2, 19, 20, 21, 60, 61, 99, 100, 101, rng.randrange(200, 5000)):
        times = [rng.randrange(0, 40) * hour // rng.choice((1, 2, 7)) for _ in range(n)]
        times += [rng.choice((-1, 1)) * 10_000 * hour for _ in range(rng.randrange(0, 3))]  # clock-skewed records
        counts = pl.DataFrame({"x": times}, schema={"x": pl.Int64}).group_by("x").agg(n=pl.len().cast(pl.Int64))
        with duckdb.connect() as con:
            con.register("counts", counts)
            got = con.execute(_span_sql("SELECT x, n FROM counts")).fetchall()[0]
        assert got == _span_per_record(times), (seed, n)


def test_telemetry_span_reads_rolled_up_days_from_their_time_counts_and_new_days_from_samples(wh):
    """Days already rolled up are read from gpu_sample_times (one row per distinct time), a day
    ingested since from its gpu_samples: the span is the same as over every sample."""
    from analysis.telemetry import refresh_gpu_hourly

    times = [t for t in _hourly(START, 10) for _ in range(3)]  # three samples per scrape time
    wh.replace_table("gpu_samples", _samples(times))
    refresh_gpu_hourly(wh)
    counts = wh.read("gpu_sample_times")
    assert (counts.height, counts["n"].sum()) == (24 * 10, 3 * 24 * 10)
    # the samples of the rolled-up days are no longer read: with their counts kept newer, the
    # rolled-up days count three samples per time even where gpu_samples now holds one
    late = [START + timedelta(days=10, hours=h) for h in range(24)]
    wh.replace_table("gpu_samples", _samples([*_hourly(START, 10), *late]))
    for d in {t.date() for t in times}:
        for f in wh.files("gpu_sample_times", partition=d.isoformat()):
            os.utime(f)
    tel = source_spans(wh).row(0, named=True)
    assert (tel["records"], tel["first"], tel["last"], tel["outliers"]) == (len(times) + 24, times[0], late[-1], 0)
    assert (tel["span_from"], tel["span_to"]) == (times[0], late[-1])
    refresh_gpu_hourly(wh)  # rolled up again from the samples: one per time
    assert source_spans(wh)["records"][0] == 24 * 11
