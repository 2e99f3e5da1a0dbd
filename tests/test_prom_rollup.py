"""The ``prom-rollup`` parser: one gpu_rollups row per series-hour of a TSDB's rollup answer,
quarantining, with the reason, each series-hour that cannot stand for its samples."""

import json
from datetime import datetime

import polars as pl

from ingest.base import ParseContext
from ingest.formats.prom_rollup import parse
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from warehouse.store import Warehouse

BLANK = (
    FIXTURES
    / "prometheus-rollups"
    / "prom-rollup__sample-fleet_gpu-node-006_memory-temp-blank.json"
)


def test_rollups_of_a_real_answer_one_row_per_series_hour():
    res = parse(BLANK.read_bytes(), ParseContext(path="r.json", cluster="c"))
    rows = res.tables["gpu_rollups"]
    # 2 GPUs x 2 metrics x 4 scrape hours (a scrape every 6 h); memory temperature is the DCGM
    # blank (unsupported) in every hour: a TSDB average of it is no rollup
    assert res.records == 16 and rows.height == 8 and res.quarantine.height == 8
    assert res.quarantine["error"].str.contains("DCGM blank").all()
    assert res.quarantine["raw"].str.contains("DCGM_FI_DEV_MEMORY_TEMP").all()
    assert rows["host"].unique().to_list() == ["gpu-node-006"] and rows[
        "cluster"
    ].unique().to_list() == ["c"]
    assert rows["pci_bus"].is_in(["0000:3a:00.0", "0000:5d:00.0"]).all()
    counter = rows.filter(pl.col("metric") == "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")
    # the constant hours came without mean and last: both are the hour's min
    assert (counter["mean"] == counter["min"]).all() and (counter["last"] == counter["min"]).all()
    assert (rows["n"] == 1).all() and (rows["hour"].dt.minute() == 0).all()


def _answer(series: list[dict]) -> bytes:
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": series}}
    ).encode()


def _series(column: str, value: str, t: float = 1767657599.999, **labels) -> dict:
    metric = {
        "__name__": "DCGM_FI_DEV_GPU_TEMP",
        "Hostname": "n1",
        "gpu": "0",
        "goodput_rollup": f"DCGM_FI_DEV_GPU_TEMP:{column}",
        **labels,
    }
    return {"metric": metric, "values": [[t, value]]}


def test_nan_mean_and_missing_rollup_are_quarantined_with_reasons():
    five = [
        _series(c, v)
        for c, v in (("n", "2"), ("mean", "NaN"), ("min", "60"), ("max", "61"), ("last", "61"))
    ]
    res = parse(_answer(five), ParseContext())
    assert res.records == 1 and res.quarantine["error"].to_list() == [
        "rollup value is not a finite number (the hour holds NaN or Inf samples)"
    ]
    # min != max, so mean and last are needed, and last is missing
    res = parse(_answer(five[:1] + [_series("mean", "60.5")] + five[2:4]), ParseContext())
    assert res.quarantine["error"].str.starts_with("incomplete rollup").all() and res.records == 1


def test_points_that_are_not_rollups_are_each_quarantined():
    res = parse(
        _answer([_series("n", "1", goodput_rollup="bogus"), _series("n", "1", t="x")]),
        ParseContext(),
    )
    assert res.records == 2 and res.tables["gpu_rollups"].height == 0
    assert sorted(res.quarantine["error"].str.slice(0, 24)) == [
        "point has no readable ti",
        "series has no known good",
    ]


def test_an_error_answer_is_one_record_with_prometheus_reason():
    body = json.dumps(
        {
            "status": "error",
            "errorType": "execution",
            "error": "query processing would load too many samples into memory",
        }
    ).encode()
    res = parse(body, ParseContext())
    assert res.records == 1 and "too many samples" in res.quarantine["error"][0]


def test_hours_outside_the_plausible_window_are_quarantined():
    five = [_series(c, "60", t=4102444799.999) for c in ("n", "min", "max")]  # 2099-12-31
    res = parse(_answer(five), ParseContext(not_after=datetime(2030, 1, 1)))
    assert res.records == 1 and "clock in the future" in res.quarantine["error"][0]


def test_a_series_the_answer_repeats_is_one_record_more_stored_once_or_refused(tmp_path):
    """A series-hour twice in one answer (a store answering twice through a proxy): counted
    as a repeat when its values agree, quarantined naming the kept values when they do not."""
    constant = [_series(c, v) for c, v in (("n", "4"), ("min", "60"))]  # a constant hour
    got = {}
    for name, twice in (("same", constant), ("other", [_series("n", "4"), _series("min", "70")])):
        path = tmp_path / f"{name}.json"
        path.write_bytes(_answer(constant + twice))
        assert parse(path.read_bytes(), ParseContext()).records == 2
        wh = Warehouse(tmp_path / name)
        [report] = ingest_paths(wh, [path], fmt="prom-rollup", jobs=1)
        got[name] = (report.records, report.rows_ok, report.rows_duplicate, report.rows_quarantined)
        assert wh.read("gpu_rollups")["min"].to_list() == [60.0]
    assert got == {"same": (2, 1, 1, 0), "other": (2, 1, 0, 1)}
    [error] = wh.read("quarantine")["error"].to_list()
    assert "min 60.0" in error and "min 70.0" in error and "its own file" in error


def test_an_hour_under_several_label_sets_is_not_one_sets_rollup():
    """A job started mid-hour: dcgm-exporter's pod label came, so the GPU's temperature is two
    TSDB series in that hour. Neither's rollup is the hour's (the source pulls its samples)."""
    five = {"n": "19", "mean": "60", "min": "60", "max": "60", "last": "60"}
    idle = [_series(c, v) for c, v in five.items()]
    busy = [_series(c, v, pod="train-7") for c, v in {**five, "n": "41"}.items()]
    res = parse(_answer(idle + busy), ParseContext())
    assert res.records == 2 and res.tables["gpu_rollups"].height == 0
    assert res.quarantine["error"].str.contains("several label sets").all()
