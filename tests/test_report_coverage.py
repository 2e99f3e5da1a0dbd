"""The report's coverage and fleet-size numbers read gpu_daily (one row per GPU, metric and day),
not every hour of gpu_hourly: the same numbers on the sample fleet."""

from __future__ import annotations

import shutil

import polars as pl

from dashboards import section
from dashboards.sections import headline
from warehouse.store import Warehouse


def _readings(wh) -> tuple[pl.DataFrame, tuple[int, int]]:
    cov = section.coverage_frame(wh).sort("source", "host")
    return cov, headline._fleet_size(wh, cov, wh.read("component_history"))


def test_coverage_and_fleet_size_from_gpu_daily_equal_those_from_gpu_hourly(demo, tmp_path, monkeypatch):
    wh, _ = demo
    assert section.telemetry_rollup(wh) == "gpu_daily"
    cov, size = _readings(wh)
    tel = cov.filter(pl.col("source") == "gpu_hourly")
    assert tel.height > 0 and tel["rows"].sum() == wh.query(
        f"SELECT sum(n)::BIGINT AS n FROM ({wh.view_sql('gpu_hourly')})")["n"][0]
    assert size[1] == wh.query(
        f"SELECT count(DISTINCT (host, gpu)) AS n FROM ({wh.view_sql('gpu_hourly')}) WHERE gpu IS NOT NULL")["n"][0]

    # the same frame and fleet size as read from every hour of gpu_hourly
    for mod in (section, headline):
        monkeypatch.setattr(mod, "telemetry_rollup", lambda w: "gpu_hourly")
    hourly_cov, hourly_size = _readings(wh)
    monkeypatch.undo()
    assert cov.equals(hourly_cov) and size == hourly_size

    # and gpu_hourly is not read at all: a copy without it gives the same numbers
    home = tmp_path / "home"
    shutil.copytree(wh.home, home)
    shutil.rmtree(home / "parquet" / "gpu_hourly")
    copy = Warehouse(home)
    got_cov, got_size = _readings(copy)
    assert got_cov.equals(cov) and got_size == size
