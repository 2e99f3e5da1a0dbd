"""component_lifetimes on hand-built frames: censoring, left truncation, failure time and cause,
covariates, telemetry-only units."""

from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.lifetimes import build_component_lifetimes
from analysis.lifetimes import data_span
from analysis.lifetimes import refresh_component_lifetimes
from warehouse.schemas import TABLES
from warehouse.schemas import conform

START = datetime(2026, 1, 1)
AS_OF = datetime(2026, 3, 1)
D = timedelta(days=1)
H = timedelta(hours=1)


def history(*rows) -> pl.DataFrame:
    out = []
    for r in rows:
        host, pos = r["slot"].split("/")
        out.append({"host": host, "position": pos, "source": "components", "failed": False, **r})
    return conform("component_history", pl.DataFrame(out, infer_schema_length=None))


def hw(*rows) -> pl.DataFrame:
    out = [{"event_id": f"e{i}", "source": "kernel", "host": "n1", **r} for i, r in enumerate(rows)]
    return (
        conform("hw_events", pl.DataFrame(out, infer_schema_length=None))
        if out
        else TABLES["hw_events"].empty()
    )


def hourly(host, gpu, uuid, hours, metric, means, maxes=None, n=60) -> list[dict]:
    maxes = maxes or means
    return [
        {
            "hour": h,
            "host": host,
            "gpu": gpu,
            "uuid": uuid,
            "metric": metric,
            "n": n,
            "mean": m,
            "max": x,
            "min": m,
            "last": m,
        }
        for h, m, x in zip(hours, means, maxes)
    ]


def frame(rows) -> pl.DataFrame:
    return (
        conform("gpu_hourly", pl.DataFrame(rows, infer_schema_length=None))
        if rows
        else TABLES["gpu_hourly"].empty()
    )


def build(ch, gh=None, he=None, **kw):
    kw = {"as_of": AS_OF, "data_start": START, **kw}
    df = build_component_lifetimes(
        ch, gh if gh is not None else frame([]), he if he is not None else hw(), **kw
    )
    return {r["unit_id"]: r for r in df.iter_rows(named=True)}, df


def test_never_failing_unit_is_censored_at_as_of_with_left_truncated_entry():
    ch = history(
        {
            "component_class": "gpu",
            "serial": "S1",
            "slot": "n1/gpu0",
            "installed_at": datetime(2025, 1, 1),
        },
        {
            "component_class": "psu",
            "serial": "P9",
            "slot": "n1/psu1",
            "installed_at": datetime(2026, 2, 1),
        },
    )
    rows, df = build(ch)
    a = rows["S1"]
    assert a["entry"] == pytest.approx(365 * 24)
    assert a["duration"] == pytest.approx(365 * 24 + 59 * 24)
    assert a["event"] is False and a["failure_cause"] is None
    assert (a["observed_from"], a["observed_to"]) == (START, AS_OF)
    b = rows["P9"]  # installed during the window: entry 0
    assert (b["entry"], b["duration"]) == (0.0, pytest.approx(28 * 24))
    assert df.columns == list(TABLES["component_lifetimes"].columns)


def test_failed_unit_ends_at_its_failure_event_with_its_cause():
    ch = history(
        {
            "component_class": "gpu_memory",
            "serial": "S2:hbm",
            "slot": "n1/gpu1-hbm",
            "installed_at": datetime(2025, 6, 1),
            "removed_at": datetime(2026, 2, 1),
            "failed": True,
            "removal_reason": "failed",
        },
        {
            "component_class": "gpu",
            "serial": "S2",
            "slot": "n1/gpu1",
            "installed_at": datetime(2025, 6, 1),
            "removed_at": datetime(2026, 2, 1),
            "failed": False,
            "removal_reason": "module_replaced",
        },
        {
            "component_class": "psu",
            "serial": "P1",
            "slot": "n1/psu0",
            "installed_at": datetime(2026, 1, 10),
            "removed_at": datetime(2026, 1, 20),
            "failed": True,
            "removal_reason": "failed",
        },
    )
    he = hw(
        {
            "time": datetime(2026, 1, 20),
            "component_class": "gpu",
            "severity": "fatal",
            "gpu": 0,
        },  # another GPU
        {
            "time": datetime(2026, 1, 31, 10),
            "component_class": "gpu_memory",
            "severity": "fatal",
            "gpu": 1,
            "code": "48",
        },
        {
            "time": datetime(2026, 1, 31, 10, 0, 1),
            "component_class": "gpu",
            "severity": "critical",
            "gpu": 1,
            "code": "45",
            "caused_by": "e1",
        },
        {
            "time": datetime(2026, 1, 15),
            "component_class": "psu",
            "severity": "critical",
            "source": "ipmi",
            "component_id": "PSU0",
        },
    )
    rows, _ = build(ch, he=he)
    hbm = rows["S2:hbm"]
    assert hbm["event"] is True and hbm["failure_cause"] == "gpu_memory"
    assert hbm["observed_to"] == datetime(2026, 1, 31, 10)
    assert hbm["duration"] == pytest.approx(
        (datetime(2026, 1, 31, 10) - datetime(2025, 6, 1)).total_seconds() / 3600
    )
    assert hbm["duration_low"] is None
    sib = rows["S2"]  # removed with its board, not failed: censored at removal
    assert sib["event"] is False and sib["observed_to"] == datetime(2026, 2, 1)
    psu = rows["P1"]
    assert (psu["event"], psu["failure_cause"], psu["duration"]) == (
        True,
        "psu",
        pytest.approx(5 * 24),
    )


def test_failure_without_event_uses_removal_and_last_telemetry():
    ch = history(
        {
            "component_class": "gpu",
            "serial": "S3",
            "slot": "n1/gpu2",
            "installed_at": datetime(2025, 12, 1),
            "removed_at": datetime(2026, 2, 10),
            "failed": True,
            "removal_reason": "rma",
        }
    )
    gh = frame(
        hourly(
            "n1",
            2,
            "U3",
            [datetime(2026, 2, 4, 23), datetime(2026, 2, 5)],
            "DCGM_FI_DEV_GPU_TEMP",
            [50.0, 52.0],
        )
    )
    rows, _ = build(ch, gh)
    r = rows["S3"]
    assert r["event"] is True and r["failure_cause"] == "rma"
    assert r["observed_to"] == datetime(2026, 2, 10)
    assert r["duration_low"] == pytest.approx(
        (datetime(2026, 2, 5, 1) - datetime(2025, 12, 1)).total_seconds() / 3600
    )


def test_units_outside_the_window_are_left_out_and_removal_after_as_of_is_censored():
    ch = history(
        {
            "component_class": "cpu",
            "serial": "C0",
            "slot": "n1/cpu0",
            "installed_at": datetime(2025, 1, 1),
            "removed_at": datetime(2025, 12, 1),
            "failed": True,
        },
        {
            "component_class": "cpu",
            "serial": "C1",
            "slot": "n1/cpu0",
            "installed_at": datetime(2025, 12, 1),
            "removed_at": datetime(2026, 4, 1),
            "failed": True,
        },
        {
            "component_class": "cpu",
            "serial": "C2",
            "slot": "n1/cpu1",
            "installed_at": datetime(2026, 3, 5),
        },
    )
    rows, _ = build(ch)
    assert set(rows) == {"C1"}
    assert rows["C1"]["event"] is False and rows["C1"]["observed_to"] == AS_OF


def test_covariates_per_gpu_and_per_host_and_rack():
    hours = [START + i * H for i in range(4)]
    rows = (
        hourly("n1", 0, "U0", hours[:2], "DCGM_FI_DEV_GPU_TEMP", [60.0, 70.0], [75.0, 80.0])
        + hourly("n1", 0, "U0", hours[:2], "DCGM_FI_DEV_POWER_USAGE", [300.0, 300.0])
        + hourly("n1", 0, "U0", hours[:2], "DCGM_FI_DEV_GPU_UTIL", [40.0, 60.0])
        + hourly("n1", 1, "U1", hours[:2], "temperature.gpu", [40.0, 40.0], n=30)
        + hourly("n1", 0, "U0", hours[:2], "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", [9.0, 9.0])
    )
    ch = history(
        {
            "component_class": "gpu",
            "serial": "S0",
            "slot": "n1/gpu0",
            "installed_at": datetime(2025, 1, 1),
        },
        {
            "component_class": "gpu",
            "serial": "S1",
            "slot": "n1/gpu1",
            "installed_at": datetime(2025, 1, 1),
        },
        {
            "component_class": "cooling",
            "serial": "F0",
            "slot": "n1/fan0",
            "installed_at": datetime(2025, 1, 1),
        },
        {
            "component_class": "cooling",
            "serial": "F5",
            "slot": "n5/fan0",
            "installed_at": datetime(2025, 1, 1),
        },
    )
    got, _ = build(ch, frame(rows), nodes_per_rack=4)
    g0 = got["S0"]
    assert (g0["temp_mean"], g0["temp_max"], g0["power_mean"], g0["util_mean"]) == (
        65.0,
        80.0,
        300.0,
        50.0,
    )
    assert got["S1"]["temp_mean"] == 40.0 and got["S1"]["power_mean"] is None
    # host-level for a fan: n-weighted over both GPUs: (60*60 + 70*60 + 40*30*2) / 180
    assert got["F0"]["temp_mean"] == pytest.approx((60 * 60 + 70 * 60 + 40 * 60) / 180)
    assert got["F0"]["temp_max"] == 80.0
    assert (got["F0"]["rack"], got["F5"]["rack"]) == ("rack-01", "rack-02")
    racks = pl.DataFrame({"host": ["n1"], "rack": ["r-a"]})
    got, _ = build(ch, frame(rows), racks=racks)
    assert (got["S0"]["rack"], got["F5"]["rack"]) == ("r-a", None)


def test_telemetry_only_gpus_and_inferred_history_rows():
    hours_a = [START + i * D for i in range(9)]
    hours_b = [START + i * D for i in range(9, 40)]
    rows = (
        hourly("n2", 0, "UA", hours_a, "DCGM_FI_DEV_GPU_TEMP", [50.0] * 9)
        + hourly("n2", 0, "UB", hours_b, "DCGM_FI_DEV_GPU_TEMP", [55.0] * 31)
        + hourly("n2", 1, "UC", hours_a + hours_b, "DCGM_FI_DEV_GPU_TEMP", [50.0] * 40)
    )
    # telemetry's own inferred history rows for n2/gpu0 are not read a second time
    ch = history(
        {
            "component_class": "gpu",
            "serial": "UA",
            "slot": "n2/gpu0",
            "source": "telemetry",
            "installed_at": None,
            "removed_at": START + 9 * D,
        },
        {
            "component_class": "gpu",
            "serial": "UB",
            "slot": "n2/gpu0",
            "source": "telemetry",
            "installed_at": START + 9 * D,
        },
        {
            "component_class": "psu",
            "serial": "P",
            "slot": "n2/psu0",
            "installed_at": datetime(2025, 1, 1),
        },
    )
    he = hw(
        {
            "time": START + 8 * D + 3 * H,
            "host": "n2",
            "component_class": "gpu",
            "severity": "fatal",
            "gpu": 0,
        }
    )
    got, df = build(ch, frame(rows), he)
    assert df.filter(pl.col("component_class") == "gpu").height == 3
    a, b, c = got["UA"], got["UB"], got["UC"]
    assert (a["entry"], a["event"], a["failure_cause"]) == (0.0, True, "gpu")
    assert a["duration"] == pytest.approx(8 * 24 + 3)
    assert (b["event"], b["observed_from"], b["observed_to"]) == (False, START + 9 * D, AS_OF)
    assert c["event"] is False and c["duration"] == pytest.approx(
        59 * 24
    )  # replaced? no: same UUID throughout


def test_default_bounds_come_from_the_data():
    ch = history(
        {
            "component_class": "gpu",
            "serial": "S",
            "slot": "n1/gpu0",
            "installed_at": datetime(2025, 1, 1),
        }
    )
    gh = frame(hourly("n1", 0, "U", [START, START + 10 * H], "DCGM_FI_DEV_GPU_TEMP", [1.0, 1.0]))
    he = hw(
        {"time": START - 30 * D, "component_class": "bmc", "severity": "info"},  # old SEL entry
        {"time": START + 2 * H, "component_class": "gpu", "severity": "warning", "gpu": 3},
    )
    assert data_span(ch, gh, he) == (START, START + 11 * H)
    # without telemetry: the hardware events span it
    assert data_span(ch, frame([]), he) == (START - 30 * D, START + 2 * H)


def test_refresh_writes_the_table(wh):
    ch = history(
        {
            "component_class": "gpu",
            "serial": "S1",
            "slot": "n1/gpu0",
            "installed_at": datetime(2025, 1, 1),
        }
    )
    with wh.batch("b") as b:
        b.add({"component_history": ch})
    refresh_component_lifetimes(wh, as_of=AS_OF, data_start=START)
    assert wh.read("component_lifetimes")["duration"].to_list() == [
        pytest.approx(365 * 24 + 59 * 24)
    ]


def test_without_an_inventory_hosts_seen_carry_units_of_each_failing_class_over_the_window():
    hosts = pl.DataFrame({"host": ["n1", "n2"], "n_gpus": [8, 8]})
    he = hw(
        {
            "time": START + 10 * D,
            "component_class": "psu",
            "component_id": "PS1",
            "severity": "critical",
        },
        {"time": START + 20 * D, "component_class": "gpu_memory", "gpu": 3, "severity": "fatal"},
        {"time": START + 30 * D, "component_class": "gpu_memory", "gpu": 3, "severity": "fatal"},
        {
            "time": START + 40 * D,
            "component_class": "psu",
            "severity": "warning",
        },  # no removal confirms it
    )
    _, df = build(TABLES["component_history"].empty(), he=he, observed_hosts=hosts)
    window_h = (AS_OF - START).total_seconds() / 3600
    assert set(df["population"]) == {"observed_units"}
    psu = df.filter(pl.col("component_class") == "psu")
    # two PSUs per host (class_rates.UNIT_COUNTS); the failed one is renewed at its failure
    assert psu.height == 2 * 2 + 1 and psu["event"].sum() == 1
    assert (psu["duration"] - psu["entry"]).sum() == pytest.approx(2 * 2 * window_h)
    hbm = df.filter(pl.col("component_class") == "gpu_memory")
    assert hbm.height == 2 * 8 + 2 and hbm["event"].sum() == 2
    assert (hbm["duration"] - hbm["entry"]).sum() == pytest.approx(2 * 8 * window_h)
    failed = hbm.filter("event").sort("observed_to")
    assert failed["slot"].to_list() == ["n1/gpu_memory3", "n1/gpu_memory3"]
    assert failed["observed_to"].to_list() == [START + 20 * D, START + 30 * D]
    assert failed["failure_cause"].to_list() == ["gpu_memory", "gpu_memory"]
    # an inventory, when there is one, is the population: no observed units are added
    ch = history(
        {
            "component_class": "psu",
            "serial": "P1",
            "slot": "n1/psu0",
            "installed_at": START - 100 * D,
        }
    )
    _, with_inventory = build(ch, he=he, observed_hosts=hosts)
    assert set(with_inventory["population"]) == {"inventory"}
