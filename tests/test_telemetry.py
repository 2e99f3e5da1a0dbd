"""gpu_hourly rollups, counter increments to hw_events, UUID changes to component_history."""

from datetime import date
from datetime import datetime
from datetime import timedelta

import duckdb
import numpy as np
import polars as pl

from analysis.lifetime_covariates import covariate_sql
from analysis.lifetime_covariates import unit_covariates
from analysis.lifetimes import build_component_lifetimes
from analysis.telemetry import counters
from analysis.telemetry.counters import counter_events
from analysis.telemetry.counters import refresh_counter_events
from analysis.telemetry.metrics import CANONICAL_METRICS
from analysis.telemetry.metrics import COUNTER_METRICS
from analysis.telemetry.replacements import gpu_replacements
from analysis.telemetry.replacements import infer_gpu_replacements
from analysis.telemetry.replacements import refresh_gpu_replacements
from analysis.telemetry.rollups import gpu_presence
from analysis.telemetry.rollups import refresh_gpu_hourly
from analysis.telemetry.rollups import stale_dates
from warehouse.schemas import conform

T0 = datetime(2024, 5, 1, 10, 0)


def _samples(rows):
    df = pl.DataFrame(rows, schema=["time", "host", "gpu", "uuid", "metric", "value"], orient="row")
    return conform(
        "gpu_samples",
        df.with_columns(
            cluster=pl.lit("c"),
            date=pl.col("time").dt.date(),
            source=pl.lit("dcgm"),
            source_file=pl.lit("f"),
        ),
    )


def _write(wh, df):
    with wh.batch(f"b{df.height}{df['time'].min().microsecond}") as b:
        b.add({"gpu_samples": df})


def test_hourly_incremental(wh):
    m = "DCGM_FI_DEV_GPU_TEMP"
    day1 = [(T0 + timedelta(minutes=20 * i), "n1", 0, "GPU-a", m, float(40 + i)) for i in range(4)]
    day1.append((T0, "n1", 0, "GPU-a", m, None))  # sentinel: not counted
    _write(wh, _samples(day1))
    assert stale_dates(wh) == [date(2024, 5, 1)]
    assert refresh_gpu_hourly(wh) == [date(2024, 5, 1)]
    h = wh.read("gpu_hourly").sort("hour")
    assert h["hour"].to_list() == [T0, T0 + timedelta(hours=1)]
    assert h.select("n", "mean", "min", "max", "last").rows() == [
        (3, 41.0, 40.0, 42.0, 42.0),
        (1, 43.0, 43.0, 43.0, 43.0),
    ]
    assert stale_dates(wh) == [] and refresh_gpu_hourly(wh) == []
    assert refresh_gpu_hourly(wh, [date(2024, 5, 1)]) == []  # a requested day already done
    assert refresh_gpu_hourly(wh, [date(2024, 5, 1)], force=True) == [date(2024, 5, 1)]
    _write(wh, _samples([(T0 + timedelta(days=1), "n1", 0, "GPU-a", m, 50.0)]))
    assert refresh_gpu_hourly(wh) == [date(2024, 5, 2)]  # only the new day is recomputed
    assert wh.read("gpu_hourly").height == 3
    assert CANONICAL_METRICS[m] == "temp" and CANONICAL_METRICS["power.draw"] == "power"


def test_counter_increments_not_resets():
    dbe, crc = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    t = [T0 + timedelta(minutes=i) for i in range(6)]
    rows = [
        (t[i], "n1", 3, "GPU-a", dbe, v) for i, v in enumerate([0, 0, 2, 2, 0, 1])
    ]  # reset at t4
    rows += [(t[i], "n1", 1, "GPU-b", crc, v) for i, v in enumerate([5, 9, None, 9, 20, 20])]
    rows += [
        (t[i], "n1", 1, "GPU-b", "DCGM_FI_DEV_XID_ERRORS", v)
        for i, v in enumerate([0, 79, 79, 0, 0, 48])
    ]
    x79, x48 = 'DCGM_EXP_XID_ERRORS_COUNT{xid="79"}', 'DCGM_EXP_XID_ERRORS_COUNT{xid="48"}'
    rows += [
        (t[i], "n1", 1, "GPU-b", x79, v) for i, v in enumerate([0, 1, 1, 0, 0, 0])
    ]  # window rolls on
    rows += [(t[i], "n1", 1, "GPU-b", x48, v) for i, v in enumerate([0, 0, 0, 0, 0, 1])]
    ev = counter_events(_samples(rows)).sort("time", "code")
    assert ev.select("time", "gpu", "component_class", "code", "count").rows() == [
        (t[1], 1, "gpu", x79, 1),
        (t[1], 1, "nvlink", crc, 4),
        (t[2], 3, "gpu_memory", dbe, 2),
        (t[4], 1, "nvlink", crc, 11),
        (t[5], 1, "gpu", x48, 1),
        (t[5], 3, "gpu_memory", dbe, 1),
    ]
    assert set(ev["event_type"]) == {"counter"} and set(ev["source"]) == {"dcgm_counter"}
    assert ev["event_id"].n_unique() == 6
    assert ev.sort("event_id").equals(_counter_events_reference(_samples(rows)).sort("event_id"))


def _counter_events_reference(samples: pl.DataFrame) -> pl.DataFrame:
    """counter events as the in-memory Polars diff over all samples computed them before the
    increments moved into DuckDB SQL (``lag`` over each series, out of core); the rows are
    written by the product's own writer, so only the increments are compared."""
    keys = ["cluster", "host", "gpu", "uuid", "metric"]
    rises = (
        samples.lazy()
        .with_columns(base=pl.col("metric").str.replace(r"\{.*$", ""))
        .filter(pl.col("base").is_in(list(COUNTER_METRICS)) & pl.col("value").is_not_null())
        .select(keys + ["base", "time", "value", "source_file"])
        .sort(keys + ["time"], nulls_last=True)
        .with_columns(inc=pl.col("value").diff().over(keys))
        .filter(pl.col("inc") > 0)
        .collect()
    )
    return counters._counter_event_rows(rises)


def _hourly_reference(samples: pl.DataFrame) -> pl.DataFrame:
    """gpu_hourly as the in-memory Polars rollup of all samples computed it before the daily
    tables moved out of core."""
    return (
        samples.filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
        .with_columns(hour=pl.col("time").dt.truncate("1h"))
        .group_by("hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric")
        .agg(
            n=pl.len().cast(pl.Int64),
            mean=pl.col("value").mean(),
            min=pl.col("value").min(),
            max=pl.col("value").max(),
            last=pl.col("value").sort_by("time").last(),
        )
        .with_columns(date=pl.col("hour").dt.date())
    )


def _same_rows(got: pl.DataFrame, want: pl.DataFrame) -> None:
    keys = [c for c, t in want.schema.items() if t != pl.Float64]
    got, want = got.select(want.columns).sort(keys), want.sort(keys)
    assert got.height == want.height > 0
    assert got.select(keys).equals(want.select(keys))
    for c in set(want.columns) - set(keys):  # DuckDB and Polars may sum in another order
        assert got[c].is_null().equals(want[c].is_null()), c
        scale = max(1.0, want[c].abs().max() or 0.0)
        assert ((got[c] - want[c]).abs().max() or 0.0) <= 1e-9 * scale, c


def test_daily_tables_out_of_core_equal_whole_table_analyses(wh):
    """Counter events and GPU replacements come from compact daily tables, computed a day at a
    time, and equal the whole-gpu_samples analyses; a value held across midnight is no event."""
    dbe, temp = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_TEMP"
    t = [T0 + timedelta(hours=6 * i) for i in range(12)]  # 6-hourly over 4 days (May 1-4)
    # 2 held over midnight into day 3, reset at t9
    dbe_values = [0, 0, 0, 2, 2, 2, 2, 2, 3, 0, 0, 1]
    rows = [(t[i], "n1", 3, "GPU-a", dbe, float(v)) for i, v in enumerate(dbe_values)]
    rows += [(t[i], "n1", 3, "GPU-a", temp, 40.0 + i) for i in range(12)]
    # slot n1/gpu1 gets a new GPU on day 2; a blank and a NaN are not values
    rows += [(t[i], "n1", 1, "GPU-old" if i < 6 else "GPU-new", temp, 50.0) for i in range(12)]
    rows += [(t[0], "n1", 1, "GPU-old", temp, None), (t[1], "n1", 1, "GPU-old", dbe, float("nan"))]
    for (d,), day in _samples(rows).partition_by("date", as_dict=True).items():
        with wh.batch(f"day-{d}") as b:
            b.add({"gpu_samples": day})

    assert refresh_counter_events(wh) == 3  # brings the daily tables up first
    assert stale_dates(wh) == []
    changes = wh.read("gpu_counter_changes").filter(pl.col("uuid") == "GPU-a").sort("time")
    # each series' first sample of a day and every change: 6 of the 12 DBE samples
    assert changes.select("time", "value").rows() == [
        (t[0], 0.0),
        (t[3], 2.0),
        (t[7], 2.0),
        (t[8], 3.0),
        (t[9], 0.0),
        (t[11], 1.0),
    ]
    got = wh.read("hw_events").drop("source")
    want = counter_events(wh.read("gpu_samples")).drop("source")
    assert got.sort("event_id").equals(want.sort("event_id"))
    assert got.sort("event_id").equals(
        _counter_events_reference(wh.read("gpu_samples")).drop("source").sort("event_id")
    )
    assert got.sort("time").select("time", "count").rows() == [(t[3], 2), (t[8], 1), (t[11], 1)]

    hist = infer_gpu_replacements(wh)
    assert hist.sort("serial").equals(gpu_replacements(wh.read("gpu_samples")).sort("serial"))
    assert hist.filter(pl.col("serial") == "GPU-new")["installed_at"].to_list() == [t[6]]
    _same_rows(wh.read("gpu_hourly"), _hourly_reference(wh.read("gpu_samples")))


def test_daily_step_redone_when_a_table_is_missing(wh):
    """A crash between the daily tables' writes leaves the day stale, so the next run redoes it."""
    _write(wh, _samples([(T0, "n1", 0, "GPU-a", "DCGM_FI_DEV_GPU_TEMP", 40.0)]))
    assert refresh_gpu_hourly(wh) == [date(2024, 5, 1)] and stale_dates(wh) == []
    wh.drop_partition("gpu_sightings", "2024-05-01")
    assert stale_dates(wh) == [date(2024, 5, 1)]
    assert refresh_gpu_hourly(wh) == [date(2024, 5, 1)]
    assert wh.read("gpu_sightings").select("uuid", "first_seen", "last_seen").rows() == [
        ("GPU-a", T0, T0)
    ]


def test_refresh_counter_events_replaces_its_partition(wh):
    dbe = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    _write(
        wh,
        _samples(
            [
                (T0, "n1", 0, "GPU-a", dbe, 0.0),
                (T0 + timedelta(minutes=1), "n1", 0, "GPU-a", dbe, 1.0),
            ]
        ),
    )
    assert refresh_counter_events(wh) == 1
    assert refresh_counter_events(wh) == 1 and wh.read("hw_events").height == 1  # idempotent


def test_counter_events_by_host_range_equal_one_pass(wh, monkeypatch):
    """Hosts split into ranges of ~COUNTER_GROUP_ROWS stored changes (here one or two hosts
    each, a null host among them) give the events of one pass over every series."""
    dbe, crc = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    rows = [
        (T0 + timedelta(minutes=10 * i), host, g, f"GPU-{host}-{g}", m, float(i // (g + 2)))
        for host in ("n1", "n2", "n3", None) for g in (0, 1) for m in (dbe, crc) for i in range(6)
    ]  # fmt: skip
    samples = _samples(rows)
    _write(wh, samples)
    whole = refresh_counter_events(wh)
    one_pass = wh.read("hw_events").sort("event_id")
    assert whole == one_pass.height > 0 and one_pass["host"].null_count() > 0
    monkeypatch.setattr(counters, "COUNTER_GROUP_ROWS", 5)
    assert refresh_counter_events(wh) == whole
    assert wh.read("hw_events").sort("event_id").equals(one_pass)
    assert one_pass.equals(_counter_events_reference(samples).sort("event_id"))


def test_counter_events_are_computed_only_for_new_or_changed_days(wh, monkeypatch):
    """Counter events are kept one piece per day: a new day computes only that day (its first
    rise taken over the day before's last value), a day whose samples changed redoes itself and
    the days after it, a day with no rises is done too (an empty piece), and a partition
    written whole by an older version is replaced. Each time the events equal one pass over
    every sample."""
    import time

    dbe, crc = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    start = datetime(2024, 5, 1)

    def day(n: int, bump: float = 0.0) -> list:
        # six samples a day per (host, gpu, metric); values rise within and across days, and
        # host n2's DBE counter steps at midnight only (a rise seen at a day's first sample)
        return [
            (start + timedelta(days=n, hours=4 * i), host, g, f"GPU-{host}-{g}", m,
             float(n * 3 + (0 if host == "n2" and m == dbe else i // 2)) + bump)
            for host in ("n1", "n2", None) for g in (0, 1) for m in (dbe, crc) for i in range(6)
        ]  # fmt: skip

    def pieces() -> dict[str, float]:
        return wh.piece_mtimes("hw_events", "dcgm_counter")

    def check(samples: list) -> None:
        want = _counter_events_reference(_samples(samples)).sort("event_id")
        got = wh.read("hw_events").sort("event_id")
        assert got.height == want.height > 0 and got.equals(want)

    quiet = [(start + timedelta(hours=i), "n9", 0, "GPU-n9-0", dbe, 5.0) for i in range(3)]
    _write(wh, _samples(quiet))  # day 0: samples, no rise
    rows = quiet + day(1) + day(2)
    _write(wh, _samples(day(1) + day(2)))
    monkeypatch.setattr(counters, "COUNTER_GROUP_ROWS", 20)  # several host ranges
    n = refresh_counter_events(wh)
    assert set(pieces()) == {"day-2024-05-01", "day-2024-05-02", "day-2024-05-03"}
    assert n == wh.read("hw_events").height
    check(rows)
    assert counters.counter_days_to_redo(wh) == ([], [])  # nothing to do: nothing rewritten
    before = pieces()
    time.sleep(0.01)

    _write(wh, _samples(day(3)))  # the next day arrives
    refresh_gpu_hourly(wh)
    assert counters.counter_days_to_redo(wh) == (["2024-05-04"], [])
    refresh_counter_events(wh)
    after = pieces()
    assert {p for p in after if after[p] != before.get(p)} == {"day-2024-05-04"}
    check(rows := rows + day(3))

    late = [(start + timedelta(days=2, hours=23), "n1", 0, "GPU-n1-0", dbe, 100.0)]
    _write(wh, _samples(late))  # a late sample on day 2 (it changes day 3's first rise too)
    refresh_gpu_hourly(wh)
    assert counters.counter_days_to_redo(wh) == (["2024-05-03", "2024-05-04"], [])
    refresh_counter_events(wh)
    check(rows := rows + late)
    assert any(
        e.startswith("dcgm_counter:n1:0:GPU-n1-0:" + dbe + ":2024-05-03T23")
        for e in wh.read("hw_events")["event_id"]
    )

    wh.replace_partition(
        "hw_events", "dcgm_counter", [wh.read("hw_events").head(3)]
    )  # an older version's layout
    assert set(pieces()) == {"data"}
    assert counters.counter_days_to_redo(wh)[1] == ["data"]
    refresh_counter_events(wh)
    assert "data" not in pieces() and len(pieces()) == 4
    check(rows)


def test_uuid_change_is_replacement(wh):
    m = "DCGM_FI_DEV_GPU_TEMP"
    rows = [
        (T0 + timedelta(hours=i), "n1", 2, "GPU-old" if i < 3 else "GPU-new", m, 40.0)
        for i in range(6)
    ]
    rows += [(T0 + timedelta(hours=i), "n1", 0, "GPU-same", m, 40.0) for i in range(6)]
    hist = gpu_replacements(_samples(rows)).sort("serial", descending=True)
    assert hist.select("serial", "slot", "position", "installed_at", "removed_at").rows() == [
        ("GPU-old", "n1/gpu2", "2", None, T0 + timedelta(hours=3)),
        ("GPU-new", "n1/gpu2", "2", T0 + timedelta(hours=3), None),
    ]
    assert set(hist["source"]) == {"telemetry"} and set(hist["component_class"]) == {"gpu"}
    _write(wh, _samples(rows))
    assert refresh_gpu_replacements(wh) == 2 and refresh_gpu_replacements(wh) == 2
    assert wh.read("component_history").height == 2


def test_sample_fleet_ground_truth(wh, tmp_path):
    """Fleet scrapes ingest cleanly; DBE increments and UUID changes match the ground truth.

    A few daily files go through the runner as committed; the rest are concatenated into one
    file (the parser takes concatenated scrapes) to keep the test fast."""
    import gzip
    import json

    import pytest

    from ingest.runner import ingest_paths
    from tests.conftest import SAMPLE_FLEET

    if not (SAMPLE_FLEET / "dcgm").exists():
        pytest.skip("sample fleet not generated")
    files = sorted((SAMPLE_FLEET / "dcgm").glob("*/*.prom.gz"))
    rest = tmp_path / "all_hosts.prom"  # lines carry Hostname labels and ms timestamps
    rest.write_bytes(b"".join(gzip.decompress(f.read_bytes()) for f in files[3:]))
    inputs = [*files[:3], rest]  # the first three as committed: gzip, one per host and day
    reports = ingest_paths(wh, inputs, fmt="dcgm")
    assert sum(r.rows_quarantined for r in reports) == 0 and sum(r.rows_ok for r in reports) > 0
    view = wh.view_sql("gpu_samples")
    with duckdb.connect() as con:
        no_host, no_uuid = con.sql(
            f"SELECT count(*) FILTER (host IS NULL), count(*) FILTER (uuid IS NULL) FROM ({view})"
        ).fetchall()[0]
        blank_metrics = {
            r[0]
            for r in con.sql(f"SELECT DISTINCT metric FROM ({view}) WHERE value IS NULL").fetchall()
        }
        scraped = {r[0] for r in con.sql(f"SELECT DISTINCT uuid FROM ({view})").fetchall()}
    assert no_host == 0 and no_uuid == 0
    assert blank_metrics <= {"DCGM_FI_DEV_MEMORY_TEMP"}  # the generator's sentinel host(s)

    gt = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    refresh_counter_events(wh)
    # the daily out-of-core tables give what the whole-table analyses of all samples give
    samples = wh.read("gpu_samples")
    _same_rows(wh.read("gpu_hourly"), _hourly_reference(samples))
    counters = samples.filter(
        pl.col("metric").str.replace(r"\{.*$", "").is_in(list(COUNTER_METRICS))
    )
    assert wh.read("gpu_counter_changes").height < counters.height / 2
    got = wh.read("hw_events").sort("event_id")
    assert got.drop("source").equals(counter_events(samples).sort("event_id").drop("source"))
    assert got.height and got.drop("source").equals(
        _counter_events_reference(samples).sort("event_id").drop("source")
    )
    assert (
        infer_gpu_replacements(wh)
        .sort("slot", "serial")
        .equals(gpu_replacements(samples).sort("slot", "serial"))
    )
    del samples
    # component lifetimes read out of core (presence rows + covariates joined in DuckDB over
    # Parquet) equal those from all of gpu_hourly in memory
    hourly, presence = wh.read("gpu_hourly"), gpu_presence(wh)
    assert presence.height == 2 * hourly.select("host", "gpu", "uuid").n_unique()
    args = (wh.read("component_history"), wh.read("hw_events"))
    whole = build_component_lifetimes(args[0], hourly, args[1])
    assert whole.height > 32 * 8 and whole["temp_mean"].null_count() == 0
    out_of_core = build_component_lifetimes(
        args[0], presence, args[1], hourly_covariates=covariate_sql(wh), connect=wh.connect
    )
    _same_rows(out_of_core, whole)  # means: summation order
    ev = wh.read("hw_events").filter(pl.col("code") == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    seen = [(r["host"], r["gpu"], r["time"]) for r in ev.iter_rows(named=True)]
    expected = {
        (f["host"], f["gpu_index"], datetime.fromisoformat(e["time"]))
        for f in gt["faults"]
        if f["component_class"] == "gpu_memory"
        for e in f["evidence"]
        if e["source"] == "dcgm" and e["code"] == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
    }
    assert expected and len(expected) == len(seen)  # scrape times carry ms jitter: match within 2 s
    for host, gpu, t in expected:
        assert any(
            h == host and g == gpu and abs((t2 - t).total_seconds()) <= 2 for h, g, t2 in seen
        ), (host, gpu, t)

    hist = infer_gpu_replacements(wh)
    old_of = {
        (r["slot"], r["removed_at"]): r["serial"]
        for r in hist.iter_rows(named=True)
        if r["removed_at"]
    }
    inferred = {
        (r["slot"], old_of[(r["slot"], r["installed_at"])], r["serial"])
        for r in hist.iter_rows(named=True)
        if r["installed_at"] is not None
    }
    truth = {
        (r["slot"], r["old_uuid"], r["new_uuid"]) for r in gt["replacements"] if r.get("new_uuid")
    }
    # every true swap whose old and new GPU were both scraped is found, and nothing else
    assert inferred and inferred == {t for t in truth if t[1] in scraped and t[2] in scraped}


# the per-unit covariate join as it ran over every gpu_hourly row before whole days came from
# gpu_daily
_COV_REFERENCE_SQL = """
WITH per_gpu AS (
    SELECT u._u, h.cov, sum(h.mean * h.n) / sum(h.n) AS m, max(h.max) AS mx,
        max(h.hour) AS last_hour
    FROM units u JOIN hourly h
      ON u.host = h.host AND u.gpu = h.gpu
     AND h.hour >= date_trunc('hour', u.observed_from) AND h.hour < u.observed_to
    WHERE u.gpu IS NOT NULL
    GROUP BY u._u, h.cov
), host_hourly AS (
    SELECT host, hour, cov, sum(mean * n) AS s, sum(n) AS n, max(max) AS mx FROM hourly GROUP BY ALL
), per_host AS (
    SELECT u._u, h.cov, sum(h.s) / sum(h.n) AS m, max(h.mx) AS mx, NULL::TIMESTAMP AS last_hour
    FROM units u JOIN host_hourly h
      ON u.host = h.host
     AND h.hour >= date_trunc('hour', u.observed_from) AND h.hour < u.observed_to
    WHERE u.gpu IS NULL
    GROUP BY u._u, h.cov
), allc AS (SELECT * FROM per_gpu UNION ALL SELECT * FROM per_host)
SELECT _u,
    max(m) FILTER (WHERE cov = 'temp') AS temp_mean,
    max(mx) FILTER (WHERE cov = 'temp') AS temp_max,
    max(m) FILTER (WHERE cov = 'power') AS power_mean,
    max(m) FILTER (WHERE cov = 'util') AS util_mean,
    max(last_hour) AS last_seen_hour
FROM allc GROUP BY _u
"""


def test_covariates_from_daily_rows_equal_the_join_over_every_hour(wh):
    """Lifetimes take whole days of covariates from gpu_daily and only the days a unit enters or
    leaves from gpu_hourly: the same means, maxima and last hours as the join over every hour,
    for windows starting and ending mid-day, on midnight, within one day, and per host."""
    from analysis.lifetime_covariates import _covariates
    from analysis.lifetime_covariates import _hourly_covariates

    temp, power, util = "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL"
    day0 = datetime(2024, 5, 1)
    hours = [day0 + timedelta(minutes=30 * i) for i in range(4 * 48)]  # 4 days, 2 samples an hour
    rows = [
        (t, host, gpu, f"GPU-{host}-{gpu}", m, float((i * 7 + gpu * 3 + len(m)) % 50) + 0.25 * k)
        for i, t in enumerate(hours)
        for host in ("n1", "n2")
        for gpu in (0, 1)
        for k, m in enumerate((temp, power, util))
        if not (host == "n2" and gpu == 1 and i % 48 > 40)  # a GPU silent every evening
    ]
    for (d,), part in _samples(rows).partition_by("date", as_dict=True).items():
        with wh.batch(f"day-{d}") as b:
            b.add({"gpu_samples": part})
    assert len(refresh_gpu_hourly(wh)) == 4
    assert wh.read("gpu_daily").height == 4 * 4 * 3  # days x GPUs x metrics
    h = timedelta(hours=1)
    windows = [
        (
            "n1",
            0,
            day0 + 5 * h + timedelta(minutes=20),
            day0 + 3 * 24 * h + 7 * h + timedelta(minutes=10),
        ),
        ("n1", 1, day0, day0 + 4 * 24 * h),  # whole days only
        ("n2", 1, day0 + 24 * h, day0 + 3 * 24 * h),  # midnight to midnight
        ("n2", 0, day0 + 30 * h, day0 + 33 * h + timedelta(minutes=1)),  # within one day
        ("n2", 1, day0 + 23 * h, day0 + 49 * h),
        (
            "n2",
            0,
            day0 + 24 * h,
            day0 + 2 * 24 * h + 22 * h + timedelta(minutes=30),
        ),  # ends at 22:30
        ("n1", None, day0 + 2 * h, day0 + 75 * h + timedelta(minutes=30)),  # host units: all GPUs
        ("n2", None, day0, day0 + 4 * 24 * h),
        ("n1", 0, day0 + 10 * 24 * h, day0 + 11 * 24 * h),  # no data
    ]
    units = pl.DataFrame(
        windows,
        schema={
            "host": pl.Utf8,
            "gpu": pl.Int32,
            "observed_from": pl.Datetime("us"),
            "observed_to": pl.Datetime("us"),
        },
        orient="row",
    ).with_row_index("_u")
    hourly = _hourly_covariates(wh.read("gpu_hourly"))
    with duckdb.connect() as con:
        con.register("units", units)
        con.register("hourly", hourly)
        want = con.sql(_COV_REFERENCE_SQL).pl()
    out_of_core = _covariates(units, covariate_sql(wh), wh.connect)
    in_memory = _covariates(units, hourly)
    assert want.height == 8 and want["last_seen_hour"].null_count() == 2
    _same_rows(out_of_core.cast(want.schema), want)
    _same_rows(in_memory.cast(want.schema), want)


def test_covariates_do_not_depend_on_the_order_of_the_hours():
    """Two builds read the same hours in another order (DuckDB's threads): a float sum's last
    bits follow it, and a Cox fit of a covariate that separates the failures magnifies them."""
    rng = np.random.default_rng(2)
    day0 = datetime(2025, 3, 1)
    hours = [day0 + timedelta(hours=i) for i in range(6 * 24)]
    n = len(hours) * 8
    hourly = pl.DataFrame(
        {
            "hour": [h for h in hours for _ in range(8)],
            "host": "n1",
            "gpu": list(range(8)) * len(hours),
            "uuid": [f"GPU-{g}" for g in range(8)] * len(hours),
            "metric": "DCGM_FI_DEV_POWER_USAGE",
            "n": rng.integers(50, 61, n),
            "mean": rng.uniform(200.0, 700.0, n),
            "max": 700.0,
        }
    ).with_columns(pl.col("gpu").cast(pl.Int32), pl.col("n").cast(pl.Int64))
    units = pl.DataFrame(
        {
            "host": ["n1", "n1", "n1"],
            "gpu": [0, 3, None],
            "observed_from": [day0 + timedelta(hours=5), day0, day0 + timedelta(hours=30)],
            "observed_to": [day0 + timedelta(days=5), day0 + timedelta(days=6), hours[-1]],
            "_failed": False,
            "fail_time": None,
        },
        schema_overrides={"gpu": pl.Int32, "fail_time": pl.Datetime("us")},
    ).with_row_index("_u")
    one = unit_covariates(units, hourly).sort("_u")
    for seed in range(4):
        other = unit_covariates(units, hourly.sample(fraction=1.0, shuffle=True, seed=seed))
        assert other.sort("_u")["power_mean"].equals(one["power_mean"])
