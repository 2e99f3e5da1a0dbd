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


def test_coverage_and_fleet_size_from_gpu_daily_equal_those_from_gpu_hourly(
    demo, tmp_path, monkeypatch
):
    wh, _ = demo
    assert section.telemetry_rollup(wh) == "gpu_daily"
    cov, size = _readings(wh)
    tel = cov.filter(pl.col("source") == "gpu_hourly")
    assert (
        tel.height > 0
        and tel["rows"].sum()
        == wh.query(f"SELECT sum(n)::BIGINT AS n FROM ({wh.view_sql('gpu_hourly')})")["n"][0]
    )
    assert (
        size[1]
        == wh.query(
            f"SELECT count(DISTINCT (host, gpu)) AS n FROM ({wh.view_sql('gpu_hourly')}) WHERE "
            "gpu IS NOT NULL"
        )["n"][0]
    )

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


def test_a_large_fleet_charts_its_least_covered_hosts():
    """Past ``MAX_HOSTS`` hosts the chart holds those with the fewest source tables, then the
    least time covered, and says so; at 1,803 hosts the whole chart had 5,899 rows, which Altair
    refuses (the 2,048-node benchmark's report lost the section)."""
    from datetime import datetime
    from datetime import timedelta

    from dashboards.sections import coverage

    t0 = datetime(2026, 1, 1)
    rows = [
        (src, f"node-{h:04d}", t0, t0 + timedelta(days=54 - (h == 7) * 30), 100)
        for h in range(2000) for src in ("gpu_hourly", "hw_events", "job_attempts")
        if not (h == 1999 and src == "hw_events")
    ]  # fmt: skip
    cov = pl.DataFrame(rows, schema=["source", "host", "first", "last", "rows"], orient="row")
    shown = coverage.least_covered(cov, 3)
    assert shown["host"].unique().sort().to_list() == ["node-0000", "node-0007", "node-1999"]
    assert shown.height == 8  # node-1999 lacks one source; node-0007 covers 24 days; then by name

    class Ctx:  # what build() reads
        coverage = cov
        wh = None

    cov_no_attempts = cov.filter(pl.col("source") != "job_attempts")
    Ctx.coverage = cov_no_attempts
    s = coverage.build(Ctx)
    assert (
        len(s.chart.to_dict()["datasets"][next(iter(s.chart.to_dict()["datasets"]))])
        <= 2 * coverage.MAX_HOSTS
    )
    assert f"the {coverage.MAX_HOSTS} of 2,000 hosts with the least coverage" in s.reading
