"""Scope: a generated two-cluster, two-partition fleet whose GPUs fail only in cluster c1.

Known truth: c1's GPUs fail at 16 per 1,000 GPU-days (exponential, replaced at once), c2's never.
Each failure interrupts the job running on that host (NODE_FAIL, with a fatal XID 79 beside it).
Hosts of even index run partition ``train``, odd ones ``debug``; accounts alternate by day.
"""

from __future__ import annotations

import json
from datetime import date
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from analysis.breakdown import breakdown
from analysis.headline import fleet_headline
from analysis.headline import selected_rates
from analysis.observation import stored_window
from analysis.scope import Scope
from analysis.scope import ScopeError
from analysis.scope import check_scope
from analysis.scope import filtered
from analysis.scope import scope_warehouse
from pipelines.cli import main
from warehouse.store import Warehouse

T0 = datetime(2026, 1, 1)
DAYS = 60
HOSTS = 8
RATE_PER_HOUR = 1 / 1500.0  # per GPU, c1 only
TRUE_RATE_1K_DAYS = RATE_PER_HOUR * 24_000


def _fleet(seed: int = 7):
    rng = np.random.default_rng(seed)
    end = T0 + timedelta(days=DAYS)
    jobs, hist, hw = [], [], []
    for cluster in ("c1", "c2"):
        for h in range(HOSTS):
            host = f"{cluster}n{h:02d}"
            fails = []
            for g in range(8):
                t = T0
                while True:
                    nxt = (
                        t + timedelta(hours=float(rng.exponential(1 / RATE_PER_HOUR)))
                        if cluster == "c1"
                        else end
                    )
                    failed = nxt < end
                    hist.append(
                        {
                            "component_class": "gpu",
                            "serial": f"{host}-g{g}-{t:%j%H%M%S}",
                            "slot": f"{host}/gpu{g}",
                            "host": host,
                            "position": str(g),
                            "installed_at": t,
                            "removed_at": nxt if failed else None,
                            "failed": failed,
                            "source": "inventory",
                            "source_file": "inv.csv",
                        }
                    )
                    if not failed:
                        break
                    fails.append((nxt, g))
                    t = nxt
            for t, g in fails:
                hw.append(
                    {
                        "time": t,
                        "cluster": cluster,
                        "host": host,
                        "component_class": "gpu",
                        "component_id": str(g),
                        "gpu": g,
                        "event_type": "xid",
                        "code": "79",
                        "severity": "fatal",
                        "action": "RESET_GPU",
                        "message": "GPU has fallen off the bus",
                        "source": "kernel",
                        "source_file": f"{host}.log",
                        "source_line": len(hw),
                    }
                )
            for d in range(DAYS):
                start, stop = T0 + timedelta(days=d), T0 + timedelta(days=d + 1)
                hit = sorted(t for t, _ in fails if start <= t < stop)
                jobs.append(
                    {
                        "cluster": cluster,
                        "scheduler": "slurm",
                        "job_id": f"{host}-{d}",
                        "attempt": 1,
                        "name": "train",
                        "user": "u",
                        "account": f"a{d % 2 + 1}",
                        "partition": "train" if h % 2 == 0 else "debug",
                        "submit_time": start,
                        "start_time": start,
                        "end_time": hit[0] if hit else stop,
                        "state": "NODE_FAIL" if hit else "COMPLETED",
                        "raw_state": "NODE_FAIL" if hit else "COMPLETED",
                        "exit_code": 0,
                        "n_nodes": 1,
                        "n_gpus": 8,
                        "nodes": [host],
                        "source_file": "sacct.txt",
                        "source_line": len(jobs),
                    }
                )
    return pl.DataFrame(jobs), pl.DataFrame(hist), pl.DataFrame(hw)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    home = tmp_path_factory.mktemp("scoped_fleet")
    wh = Warehouse(home)
    jobs, hist, hw = _fleet()
    with wh.batch("fleet") as b:
        b.add({"job_attempts": jobs, "component_history": hist, "hw_events": hw})
    return wh, jobs, hist, hw


def _fit(wh, capsys, *flags) -> pl.DataFrame:
    assert main(["--home", str(wh.home), "fit", *flags]) == 0
    out = capsys.readouterr().out
    return out


def test_scope_describe_and_slug():
    assert Scope(user="ann", cluster="c1").describe() == "cluster c1, user ann"
    s = Scope(datetime(2026, 1, 1), datetime(2026, 2, 1), "c1", "gpu")
    assert s.describe() == "cluster c1, partition gpu, 2026-01-01 to 2026-02-01"
    assert s.slug == Scope(datetime(2026, 1, 1), datetime(2026, 2, 1), "c1", "gpu").slug
    assert s.slug != Scope(datetime(2026, 1, 1), datetime(2026, 2, 1), "c1", "cpu").slug
    assert s.slug.startswith("cluster-c1_partition-gpu_2026-01-01--2026-02-01-")
    assert Scope().describe() == Scope().header() == "whole fleet" and Scope().whole
    assert Scope(datetime(2026, 1, 1), None, account="ml").header() == (
        "account ml, 2026-01-01 to end (job attempts overlapping the period, kept whole; "
        "interruptions and job chains ending in it; events and hours cut to it; hardware of the "
        "hosts that ran these jobs)"
    )
    with pytest.raises(ScopeError, match="must be after"):
        Scope(datetime(2026, 2, 1), datetime(2026, 1, 1))


def test_scoped_views_filter_jobs_hosts_and_time(fleet):
    wh, jobs, _hist, hw = fleet
    sw = filtered(wh, Scope(cluster="c1"))
    assert (
        scope_warehouse(wh, Scope(cluster="c1")).home
        == wh.home / "scopes" / Scope(cluster="c1").slug
    )
    assert set(sw.read("job_attempts")["cluster"].unique()) == {"c1"}
    assert sw.read("job_attempts").height == jobs.filter(pl.col("cluster") == "c1").height
    assert set(sw.read("component_history")["host"].str.slice(0, 2).unique()) == {"c1"}
    assert sw.read("hw_events").height == hw.height  # every failure is c1's
    assert filtered(wh, Scope(cluster="c2")).read("hw_events").height == 0
    # partition: the hosts that ran its jobs (even hosts run train)
    sp = filtered(wh, Scope(partition="train"))
    assert sorted(sp.read("component_history")["host"].unique()) == [
        f"c{c}n{h:02d}" for c in (1, 2) for h in (0, 2, 4, 6)
    ]
    # time: attempts overlapping [from, to) kept whole, events cut to it
    t = filtered(wh, Scope(datetime(2026, 1, 10, 12), datetime(2026, 1, 20)))
    att = t.read("job_attempts")
    assert att["start_time"].min() == datetime(2026, 1, 10) and att["end_time"].max() <= datetime(
        2026, 1, 20
    )
    lo, hi = datetime(2026, 1, 10, 12), datetime(2026, 1, 20)
    assert att.height == jobs.filter((pl.col("end_time") > lo) & (pl.col("start_time") < hi)).height
    assert (
        att.height < 10 * 2 * HOSTS
    )  # days 9..18, less the day-9 jobs a failure ended before noon
    ev = t.read("hw_events")
    assert (
        ev.height
        == hw.filter(
            pl.col("time").is_between(
                datetime(2026, 1, 10, 12), datetime(2026, 1, 20), closed="left"
            )
        ).height
    )
    # the parent is untouched
    assert wh.read("job_attempts").height == jobs.height


def test_scope_errors_are_one_line(fleet, capsys):
    wh, *_ = fleet
    with pytest.raises(ScopeError, match=r"unknown cluster 'c9'; the data has: c1, c2"):
        check_scope(wh, Scope(cluster="c9"))
    assert not (wh.home / "scopes" / Scope(cluster="c9").slug).exists()  # nothing left behind
    with pytest.raises(ScopeError, match=r"unknown partition 'gpu'; the data has: debug, train"):
        check_scope(wh, Scope(partition="gpu"))
    with pytest.raises(
        ScopeError,
        match=r"holds no job attempt and no host \(the jobs run 2026-01-01 to 2026-03-02\)",
    ):
        check_scope(wh, Scope(datetime(2025, 1, 1), datetime(2025, 2, 1)))
    assert main(["--home", str(wh.home), "fit", "--cluster", "c9"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "goodput: error: unknown cluster 'c9'; the data has: c1, c2"
    assert (
        main(["--home", str(wh.home), "report", "--from", "2026-02-01", "--to", "2026-01-01"]) == 2
    )
    assert "must be after --from" in capsys.readouterr().err


def test_scoped_fit_finds_the_rate_where_the_faults_are(fleet, capsys):
    wh, _jobs, _hist, hw = fleet
    out = _fit(wh, capsys, "--cluster", "c1")
    home = wh.home / "scopes" / Scope(cluster="c1").slug
    assert out.splitlines()[0] == (
        f"scope: cluster c1 (refit on the scope's {HOSTS * 8 + hw.height:,} units, cached in "
        f"{home})"
    )
    c1 = (
        selected_rates(scope_warehouse(wh, Scope(cluster="c1")).read("failure_rates"))
        .filter(pl.col("component_class") == "gpu")
        .row(0, named=True)
    )
    assert c1["n_events"] == hw.height
    assert c1["rate_ci_low"] <= TRUE_RATE_1K_DAYS <= c1["rate_ci_high"]
    window = stored_window(scope_warehouse(wh, Scope(cluster="c1")))  # from c1's own records
    assert window.observed_to == datetime(2026, 3, 2)
    hours = (window.observed_to - window.observed_from).total_seconds() / 3600
    assert c1["exposure_hours"] == pytest.approx(HOSTS * 8 * hours, rel=1e-6)
    _fit(wh, capsys, "--cluster", "c2")
    c2 = selected_rates(scope_warehouse(wh, Scope(cluster="c2")).read("failure_rates")).filter(
        pl.col("component_class") == "gpu"
    )
    assert c2.height == 0 or (
        c2["n_events"][0] == 0 and c2["rate_per_1k_unit_days"][0] < 0.1 * TRUE_RATE_1K_DAYS
    )
    # the parent has no fits: a scope writes only its own tables
    assert wh.read("failure_rates").height == 0
    # a second run reuses the scope's results while the data is unchanged ...
    sw = scope_warehouse(wh, Scope(cluster="c1"))
    stamp = [Path(f).stat().st_mtime_ns for f in sw.files("failure_rates")]
    _fit(wh, capsys, "--cluster", "c1")
    assert [Path(f).stat().st_mtime_ns for f in sw.files("failure_rates")] == stamp
    # ... and project uses the scope's rates
    assert (
        main(
            ["--home", str(wh.home), "project", "--cluster", "c1", "--scope", "hardware", "--json"]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out.splitlines()[-1])
    gpu = next(c for c in res["classes"] if c["component_class"] == "gpu")
    assert gpu["events"] == hw.height


def test_breakdown_equals_hand_sums(fleet, capsys):
    wh, jobs, _hist, hw = fleet
    assert (
        main(["--home", str(wh.home), "build", "--from", "2026-01-01", "--to", "2026-03-03"]) == 0
    )
    out = capsys.readouterr().out
    scope = Scope(datetime(2026, 1, 1), datetime(2026, 3, 3))
    sw = scope_warehouse(wh, scope)
    # chains ending exactly at `to` would be outside: the scope runs a day past the last end
    # the whole fleet is built first, then the scope's aggregates from its rows, in its home
    assert f"\nscope: 2026-01-01 to 2026-03-03 ({sw.home})\n" in out
    bd = sw.read("goodput_breakdown")
    assert sw.read("node_health").height > 0 and wh.read("node_health").height > 0
    # a scope holding every job: its breakdown is the whole fleet's, its rows are the fleet's
    assert bd.sort("dimension", "value").equals(
        wh.read("goodput_breakdown").sort("dimension", "value")
    )
    intr, gj = sw.read("interruptions"), sw.read("goodput_jobs")
    assert intr.sort("job_id").equals(wh.read("interruptions").sort("job_id"))
    assert (
        intr.height == hw.select("host", pl.col("time").dt.date()).unique().height
    )  # one interrupted job per host-day hit
    keyed = intr.join(jobs.select("job_id", "partition", "account"), on="job_id")
    for dim in ("cluster", "partition", "account"):
        for value in jobs[dim].unique():
            row = bd.filter((pl.col("dimension") == dim) & (pl.col("value") == value)).row(
                0, named=True
            )
            a = jobs.filter(pl.col(dim) == value)
            assert row["attempts"] == a.height and row["jobs"] == a.height
            hours = sum(
                8 * (e - s).total_seconds() / 3600
                for s, e in zip(a["start_time"], a["end_time"], strict=True)
            )
            assert row["gpu_hours"] == pytest.approx(hours)
            i = keyed.filter(pl.col(dim) == value)
            assert row["interruptions"] == i.height
            assert row["lost_gpu_hours"] == pytest.approx(sum(i["lost_gpu_hours"]))
            g = gj.join(a.select("job_id"), on="job_id")
            assert row["goodput"] == pytest.approx(
                sum(g["productive_hours"] * g["n_gpus"]) / sum(g["wall_hours"] * g["n_gpus"])
            )
    assert (
        bd.filter((pl.col("dimension") == "cluster") & (pl.col("value") == "c2"))["interruptions"][
            0
        ]
        == 0
    )
    # the breakdown's clusters add up to the headline
    head = fleet_headline(sw.read("job_attempts"), intr, gj)
    cl = bd.filter(pl.col("dimension") == "cluster")
    assert cl["interruptions"].sum() == head["unexpected"]
    assert cl["lost_gpu_hours"].sum() == pytest.approx(head["lost_gpu_hours"])
    assert cl["gpu_hours"].sum() == pytest.approx(head["gpu_hours"])
    # the headline accessor gives the numbers the CLI summary computed in SQL before it
    old = sw.query(
        "SELECT (SELECT count(*) FROM job_chains) jobs, (SELECT count(*) FROM job_attempts) "
        "attempts, (SELECT coalesce(sum(n_gpus * date_diff('second', start_time, end_time)) / "
        "3600.0, 0) FROM job_attempts) gpu_hours, (SELECT sum(lost_gpu_hours) FROM interruptions "
        "WHERE NOT planned) lost, (SELECT sum(productive_hours * n_gpus) / nullif(sum(wall_hours "
        "* n_gpus), 0) FROM goodput_jobs) g, (SELECT avg(goodput) FROM goodput_jobs) a"
    ).row(0, named=True)
    assert (
        (head["jobs"], head["attempts"])
        == (old["jobs"], old["attempts"])
        == (jobs.height, jobs.height)
    )
    assert head["gpu_hours"] == pytest.approx(old["gpu_hours"])
    assert head["lost_gpu_hours"] == pytest.approx(old["lost"])
    assert head["goodput_gpu_hours"] == pytest.approx(old["g"]) and head[
        "goodput_mean"
    ] == pytest.approx(old["a"])
    assert head["unexpected"] == intr.height > 0
    assert f"jobs: {jobs.height:,}  attempts: {jobs.height:,}" in out


def test_breakdown_pure_handles_no_jobs():
    from warehouse.schemas import TABLES

    empty = breakdown(
        TABLES["job_attempts"].empty(),
        TABLES["interruptions"].empty(),
        TABLES["goodput_jobs"].empty(),
    )
    assert empty.height == 0 and empty.columns == list(TABLES["goodput_breakdown"].columns)


def test_config_scope_is_the_dagster_resources(fleet):
    from pipelines.resources import Settings
    from warehouse.scoped import ScopedWarehouse
    from warehouse.store import WarehouseError

    wh, jobs, *_ = fleet
    plain = Settings(home=str(wh.home))
    assert plain.scope().whole and type(plain.analysis_warehouse()) is Warehouse
    cfg = Settings(
        home=str(wh.home),
        scope_cluster="c2",
        scope_from="2026-02-01T00:00:00Z",
        scope_to="2026-02-11",
    )
    assert cfg.scope().describe() == "cluster c2, 2026-02-01 to 2026-02-11"
    assert cfg.window_bounds() == (
        datetime(2026, 2, 1),
        datetime(2026, 2, 11),
    )  # the scope's window
    sw = cfg.analysis_warehouse()
    assert isinstance(sw, ScopedWarehouse) and sw.home.parent == wh.home / "scopes"
    # c2 never fails: whole days only; the attempts ending at 'from' do not overlap it
    assert sw.read("job_attempts").height == 10 * HOSTS
    with pytest.raises(WarehouseError, match="belongs to the parent warehouse"):
        sw.replace_table("job_attempts", jobs)


def test_breakdowns_section_reads_the_table():
    from dashboards.section import NO_DATA
    from dashboards.section import ReportContext
    from dashboards.sections import breakdowns

    bd = pl.DataFrame(
        {
            "dimension": ["cluster", "cluster", "partition", "partition", "account"],
            "value": ["c1", "c2", "train", None, "a1"],
            "jobs": [10, 10, 12, 8, 20],
            "attempts": [11, 10, 13, 8, 21],
            "gpu_hours": [800.0, 200.0, 600.0, 400.0, 1000.0],
            "interruptions": [3, 1, 2, 2, 4],
            "infrastructure": [2, 1, 1, 2, 3],
            "lost_gpu_hours": [90.0, 10.0, 40.0, 60.0, 100.0],
            "goodput": [0.8, 0.95, 0.9, 0.7, 0.83],
        }
    )
    s = breakdowns.build(
        ReportContext(wh=None, t={"goodput_breakdown": bd}, target_gpus=16384, scope="cluster c1")
    )
    assert s.key == "breakdowns" and breakdowns.TABLES == ("goodput_breakdown",)
    assert s.reading.startswith(
        "cluster c1 lost the most (90 GPU-hours, 90.0% of the clusters' loss, with 80.0% of their "
        "GPU-hours; goodput 80.0%); partition (none) lost the most (60 GPU-hours, 60.0% of the "
        "partitions' loss, with 40.0% of their GPU-hours; goodput 70.0%)."
    )
    assert (
        "<td>partition</td><td>(none)</td><td>8</td><td>8</td><td>400</td><td>2</td><td>2</td><td>60</td><td>70.0%</td>"
        in s.extra_html
    )
    assert s.chart is not None
    empty = breakdowns.build(
        ReportContext(wh=None, t={"goodput_breakdown": bd.clear()}, target_gpus=1)
    )
    assert empty.chart is None and empty.note == NO_DATA


def test_scoped_report_names_its_scope(fleet, capsys):
    wh, *_ = fleet
    assert main(["--home", str(wh.home), "report", "--cluster", "c1"]) == 0
    path = Path(capsys.readouterr().out.strip().removeprefix("report: "))
    assert path == wh.home / "scopes" / Scope(cluster="c1").slug / "reports" / "goodput_report.html"
    page = path.read_text()
    assert (
        '<span id="report-scope">Scope: cluster c1 (hardware of the cluster&#x27;s hosts)</span>'
        in page
    )
    assert (
        "<td>cluster</td><td>c1</td><td>480</td>" in page
    )  # the breakdown holds the scope's jobs only
    assert "<td>c2</td>" not in page
    assert (path.parent / "charts" / "breakdowns.png").stat().st_size > 1000  # the chart renders


def test_a_scope_reads_the_daily_rollups_cut_to_its_hosts_and_days(demo):
    """Lifetimes and the report read gpu_daily: in a scope it is the parent's, cut to the
    scope's hosts and to the days overlapping its period (it was rolled up again from every
    host's samples)."""
    wh, _ = demo
    every = wh.read("gpu_daily")
    sw = filtered(wh, Scope(datetime(2026, 2, 1), datetime(2026, 2, 8, 12), partition="train"))
    daily, hourly = sw.read("gpu_daily"), sw.read("gpu_hourly")
    assert daily.height and set(daily["host"]) == set(hourly["host"]) < set(every["host"])
    assert (daily["date"].min(), daily["date"].max()) == (date(2026, 2, 1), date(2026, 2, 8))
    assert sw.read("gpu_sample_times")["hour"].min() == datetime(2026, 2, 1)


def test_relative_periods_resolve_against_now(fleet, capsys):
    from pipelines.cli.errors import CliError
    from pipelines.cli.home import last_period

    now = datetime(2026, 3, 18, 10, 30)  # a Wednesday
    assert last_period("month", now) == (datetime(2026, 2, 1), datetime(2026, 3, 1))
    assert last_period("week", now) == (datetime(2026, 3, 9), datetime(2026, 3, 16))
    assert last_period("quarter", now) == (datetime(2025, 10, 1), datetime(2026, 1, 1))
    assert last_period("30d", now) == (now - timedelta(days=30), now)
    with pytest.raises(CliError, match="a duration .* or one of day, week, month"):
        last_period("fortnight", now)
    wh, *_ = fleet
    argv = ["--home", str(wh.home), "losses", "--last", "30d", "--from", "2026-01-01"]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == "goodput: error: give --last or --from/--to, not both"


def test_every_table_says_how_a_scope_cuts_it():
    """A table is rows a scope filters, bookkeeping shown whole, or an aggregate a scope
    recomputes, exactly one of them: a new table cannot be left out of the rule."""
    from analysis.scope import RECOMPUTED
    from analysis.scope import ROWS
    from analysis.scope import UNFILTERED
    from warehouse.schemas import TABLES

    kinds = [*ROWS, *UNFILTERED, *RECOMPUTED]
    assert sorted(kinds) == sorted(TABLES)  # each once, none missing
