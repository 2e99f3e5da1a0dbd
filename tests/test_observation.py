"""The observation window: robust per-source spans (one clock-skewed record never stretches
exposure), explicit bounds, the flagged inventory-only case, and the span-agreement check."""

from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.checks.bounds import spans_agree
from analysis.observation import infer_window
from analysis.observation import refresh_observation_window
from analysis.observation import source_spans
from analysis.observation import spans_disagree
from pipelines.assets import rollup_days

START = datetime(2026, 1, 5)
DAYS = 60


def _samples(times: list[datetime]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "time": times,
            "host": "n1",
            "gpu": 0,
            "metric": "DCGM_FI_DEV_GPU_TEMP",
            "value": 50.0,
            "date": [t.date() for t in times],
        }
    ).with_columns(pl.col("gpu").cast(pl.Int32))


def _jobs(first: datetime, last: datetime, n: int = 200) -> pl.DataFrame:
    step = (last - first) / (n - 1)
    ends = [first + i * step for i in range(n)]
    return pl.DataFrame(
        {
            "cluster": "c",
            "scheduler": "slurm",
            "job_id": [str(i) for i in range(n)],
            "attempt": 1,
            "start_time": [e - timedelta(hours=1) for e in ends],
            "end_time": ends,
        }
    ).with_columns(pl.col("attempt").cast(pl.Int32))


def _hourly(start: datetime, days: int) -> list[datetime]:
    return [start + timedelta(hours=h) for h in range(24 * days)]


@pytest.mark.parametrize(
    "skew",
    [timedelta(days=DAYS + 30), datetime(2023, 3, 1) - START, datetime(9999, 12, 31) - START],
)
def test_one_skewed_sample_neither_stretches_the_span_nor_breaks_the_rollup_range(wh, skew):
    times = _hourly(START, DAYS)
    wh.replace_table("gpu_samples", _samples([*times, START + skew]))
    spans = source_spans(wh)
    tel = spans.row(0, named=True)
    assert (tel["source"], tel["records"], tel["outliers"]) == ("telemetry", len(times) + 1, 1)
    assert (tel["span_from"], tel["span_to"]) == (times[0], times[-1])
    assert rollup_days(wh) == (START.date().isoformat(), times[-1].date().isoformat())
    window, _ = refresh_observation_window(wh)
    assert (window.observed_from, window.observed_to, window.method) == (
        times[0],
        times[-1],
        "inferred",
    )
    assert "1 outlying record time(s)" in window.note
    stored = wh.read("observation_window", "source = 'window'").row(0, named=True)
    assert (stored["observed_from"], stored["observed_to"], stored["flagged"]) == (
        times[0],
        times[-1],
        False,
    )


def test_sparse_event_logs_keep_their_first_and_last_events():
    # twelve kernel events over sixty days: gaps are wide, none is an outlier
    times = [START + timedelta(days=5 * i, hours=i) for i in range(12)]
    spans = pl.DataFrame(
        {
            "source": ["hw_events"],
            "kind": ["events"],
            "records": [12],
            "first": [times[0]],
            "last": [times[-1]],
            "span_from": [times[0]],
            "span_to": [times[-1]],
            "outliers": [0],
        }
    )
    w = infer_window(spans)
    assert (w.observed_from, w.observed_to) == (times[0], times[-1])


def test_explicit_bounds_override_each_on_its_own_and_an_inventory_alone_is_flagged():
    spans = pl.DataFrame(
        {
            "source": ["scheduler"],
            "kind": ["continuous"],
            "records": [10],
            "first": [START],
            "last": [START + timedelta(days=DAYS)],
            "span_from": [START],
            "span_to": [START + timedelta(days=DAYS)],
            "outliers": [0],
        }
    )
    explicit = datetime(2026, 1, 1)
    w = infer_window(spans, observed_from=explicit)
    assert (w.observed_from, w.observed_to, w.method) == (
        explicit,
        START + timedelta(days=DAYS),
        "explicit/inferred",
    )
    none = spans.clear()
    inv = infer_window(none, (datetime(2023, 1, 1), datetime(2026, 3, 1)))
    assert inv.flagged and inv.method == "earliest_record" and "pass --observed-from" in inv.line()
    assert not infer_window(
        none, (datetime(2023, 1, 1), datetime(2026, 3, 1)), explicit, datetime(2026, 3, 1)
    ).flagged
    with pytest.raises(ValueError, match="observation window is empty"):
        infer_window(spans, observed_from=START, observed_to=START - timedelta(days=1))


def test_span_check_fails_when_telemetry_ends_a_month_after_the_scheduler(wh):
    wh.replace_table("job_attempts", _jobs(START, START + timedelta(days=DAYS)))
    wh.replace_table("gpu_samples", _samples(_hourly(START, DAYS)))
    res = spans_agree(wh)
    assert res.passed and res.metadata["sources"] == 2
    wh.replace_table("gpu_samples", _samples(_hourly(START, DAYS + 30)))
    res = spans_agree(wh)
    assert not res.passed and res.metadata["disagree"].startswith(
        "telemetry spans 2026-01-05..2026-04-04, the others 2026-01-05..2026-03-05"
    )
    assert len(spans_disagree(source_spans(wh))) == 1


@pytest.mark.parametrize("seed", range(4))
def test_telemetry_span_from_hourly_counts_equals_quantiles_over_every_sample(
    wh, monkeypatch, seed
):
    """The telemetry's span is read from gpu_sample_times (per hour: samples, first, last) and
    the samples of the few hours its ranks and bounds fall in, and a day ingested since its
    rollup from its samples: the same figures as quantile_disc over every sample (the former
    SQL, kept for the other sources), clock-skewed samples included."""
    import random

    from analysis import observation
    from analysis.telemetry.rollups import refresh_gpu_hourly

    rng = random.Random(seed)
    days = 20
    times = [
        START + timedelta(hours=h, milliseconds=rng.randrange(0, 3_600_000))
        for h in range(24 * days)
        for _ in range(rng.randrange(0, 4))
    ]
    times += [
        START - timedelta(days=rng.randrange(400, 900)),
        START + timedelta(days=rng.randrange(200, 9000)),
    ][: seed % 3]
    wh.replace_table("gpu_samples", _samples(times))
    refresh_gpu_hourly(wh)
    new_day = [
        START + timedelta(days=days, seconds=rng.randrange(0, 86_400))
        for _ in range(rng.randrange(1, 50))
    ]
    wh.replace_table(
        "gpu_samples", _samples(new_day), partitions="touched"
    )  # ingested, not rolled up yet

    read: list[list[str]] = []
    real = observation.sample_times_sql
    monkeypatch.setattr(
        observation, "sample_times_sql", lambda w, dates: read.append(dates) or real(w, dates)
    )
    tel = source_spans(wh).filter(pl.col("source") == "telemetry").row(0, named=True)

    def us(t):
        return None if t is None else (t - datetime(1970, 1, 1)) // timedelta(microseconds=1)

    got = (
        tel["records"],
        us(tel["first"]),
        us(tel["last"]),
        us(tel["span_from"]),
        us(tel["span_to"]),
        tel["outliers"],
    )
    with wh.connect() as con:
        want = con.execute(
            observation._span_sql(wh.view_sql("gpu_samples"), "time", "true")
        ).fetchall()[0]
    assert got == want
    assert 1 <= len({d for ds in read for d in ds}) <= 6  # a few hours' samples, not the history's
