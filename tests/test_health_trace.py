"""A published-style fault trace of a few hundred servers over a year (sample_data.fault_trace:
nested causes, times in days after its start) read as health events: its availability, fault
rate per 1,000 node-days and repair-time median / mean / p90 equal a computation in plain Python
over the same file, and its repair law reaches `goodput fleetsim` (repair model fitted)."""

import json
from collections import Counter
from datetime import datetime

import polars as pl
import pytest
import yaml

from analysis.availability import refresh_availability
from analysis.fleetsim.run import repair_law
from analysis.fleetsim.scenario import validate
from analysis.health_events import refresh_health_failures
from ingest.base import ParseContext
from ingest.runner import ingest_paths
from pipelines.cli import main
from sample_data.fault_trace import ORIGIN
from sample_data.fault_trace import fault_trace

MAP = {"cause": "fault_type.Level", "component": "fault_type.Class", "sub_cause": "fault_type.Desc"}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """The trace ingested (format detected, --map and relative times as the CLI passes them),
    paired and its availability computed: (warehouse, the file)."""
    from warehouse.store import Warehouse

    root = tmp_path_factory.mktemp("trace")
    path = root / "trace.jsonl"
    path.write_bytes(fault_trace(servers=300, days=365, seed=44).ndjson())
    wh = Warehouse(root / "home")
    ctx = ParseContext(
        cluster="lab",
        column_map=MAP,
        options={"time_origin": ORIGIN, "time_unit": "days"},
        not_after=datetime(2030, 1, 1),
    )
    [report] = ingest_paths(wh, [path], "auto", ctx, jobs=1)
    assert report.format == "health-events" and report.rows_quarantined == 0
    refresh_health_failures(wh)
    refresh_availability(wh)
    return wh, path


def by_hand(path) -> dict:
    """The file's numbers in plain Python: each fault_end closes the open fault_start of its
    node and fault type; a fault never closed is down until the trace's last event (as
    availability counts a failure still open at the end of its stream) and its repair is
    right-censored there: MTTR = repair hours / repairs done, the median and 90th percentile
    from lifelines' Kaplan-Meier estimate; the span runs from the first fault's start to that
    last event, over the servers that had a fault (the hosts the records name: the trace gives
    no fleet size)."""
    from lifelines import KaplanMeierFitter

    records = [json.loads(line) for line in path.read_text().splitlines()]
    open_at, downtimes = {}, []
    for r in records:
        key = (r["node_id"], *r["fault_type"].values())
        if r["event_type"] == "fault_start":
            open_at[key] = r["event_time"]
        else:
            downtimes.append(r["event_time"] - open_at.pop(key))
    last = max(r["event_time"] for r in records)
    downtimes += [last - t for t in open_at.values()]
    first = min(r["event_time"] for r in records if r["event_type"] == "fault_start")
    nodes = len({r["node_id"] for r in records})
    node_days = nodes * (last - first)
    hours = [d * 24 for d in downtimes]
    done = [True] * (len(downtimes) - len(open_at)) + [False] * len(open_at)
    km = KaplanMeierFitter().fit(hours, done)
    return {
        "failures": len(downtimes),
        "nodes": nodes,
        "still_open": len(open_at),
        "availability": 1 - sum(downtimes) / node_days,
        "per_1k_node_days": len(downtimes) / node_days * 1000,
        "repair_mean_h": sum(hours) / sum(done),
        "repair_median_h": km.percentile(0.5),
        "repair_p90_h": km.percentile(0.1),
        "classes": Counter(
            r["fault_type"]["Class"] for r in records if r["event_type"] == "fault_start"
        ),
    }


def test_availability_rate_and_repair_times_equal_a_hand_computation(lab):
    wh, path = lab
    want = by_hand(path)
    assert want["failures"] > 1500 and want["still_open"] > 0
    row = wh.read("availability").filter(pl.col("level") == "system").row(0, named=True)
    assert (row["system"], row["failures"], row["nodes"]) == (
        "lab",
        want["failures"],
        want["nodes"],
    )
    assert row["availability"] == pytest.approx(want["availability"], rel=1e-9)
    assert row["failures_per_node_year"] * 1000 / 365 == pytest.approx(
        want["per_1k_node_days"], rel=1e-9
    )
    assert row["mttr_hours"] == pytest.approx(want["repair_mean_h"], rel=1e-9)
    assert row["repair_median_hours"] == pytest.approx(want["repair_median_h"], rel=1e-9)
    assert row["repair_p90_hours"] == pytest.approx(want["repair_p90_h"], rel=1e-9)
    failures = wh.read("failures")
    assert failures["open"].sum() == want["still_open"] == row["repairs_open"]
    got = Counter(failures["component_class"].to_list())
    # the trace's classes through the common component names
    assert got["gpu"] == want["classes"]["GPU"] and got["gpu_memory"] == want["classes"]["HBM"]
    assert got["host_memory"] == want["classes"]["DIMM"] and got["nic"] == want["classes"]["NIC"]


def test_the_repair_law_reaches_fleetsim(lab, tmp_path, capsys):
    """repair.model 'fitted' reads the trace's repair fit (lognormal, median 6 h as generated);
    the per-class rates of the same failures, as a rates table, drive the same scenario."""
    wh, _ = lab
    fit = wh.read("repair_fits").filter((pl.col("quantity") == "repair") & pl.col("selected"))
    assert fit["model"].to_list() == ["lognormal"]
    law = repair_law(validate({"fleet": {"nodes": 8}}), wh)
    assert law.name == "lognormal"
    median = float(law.inverse_cumulative_hazard(0.6931471805599453))
    assert median == pytest.approx(fit["median_hours"][0]) and 5.5 < median < 6.6
    avail = wh.read("availability").filter(pl.col("level") == "system").row(0, named=True)
    node_hours = avail["span_hours"] * avail["nodes"]
    rates = (
        wh.read("failures")
        .group_by("component_class")
        .agg(events=pl.len())
        .with_columns(exposure_hours=pl.lit(node_hours), unit=pl.lit("node"))
        .sort("component_class")
    )
    rates_csv = tmp_path / "rates.csv"
    rates.write_csv(rates_csv)
    scenario = {
        "name": "trace",
        "horizon_days": 30,
        "rates": str(rates_csv),
        "fleet": {"nodes": 300, "gpus_per_node": 8, "hot_spares": 4},
        "jobs": [{"gpus": 512, "count": 2}, {"gpus": 8, "count": 100}],
        "repair": {"technicians": 4, "model": "fitted"},
        "replications": {"min": 2, "max": 2},
    }
    path = tmp_path / "trace.yaml"
    path.write_text(yaml.safe_dump(scenario))
    argv = ["--home", str(wh.home), "fleetsim", "--scenario", str(path), "--json", "--workers", "1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"]["replications"] == 2
    assert 0 < out["baseline"]["metrics"]["ettr:512"]["mean"] < 1
