"""Telemetry pulled from a real Prometheus equals the same telemetry ingested from the scrape
files (``tests.servers.prometheus.differences``: every metric family, gpu_hourly, counter
events, node events), with the source's default options, on a small simulated fleet whose
Kubernetes node's GPUs change their ``pod`` label as jobs come and go: at a 60 s scrape (the
TSDB's hourly rollups, and raw samples where a rollup cannot stand for an hour) and at 1 h (raw
samples). ``benchmarks/validate_differential_pull.py`` runs larger fleets at 15 s, 60 s, 1 h."""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import pytest

from analysis.telemetry.counters import refresh_counter_events
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulate
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.servers import prometheus as server
from warehouse.store import Warehouse

START = datetime(2026, 3, 2)
DAYS = 2


@pytest.mark.parametrize("scrape_s", [60, 3600])
def test_pulled_telemetry_equals_the_files(tmp_path, scrape_s):
    fleet = tmp_path / "fleet"
    simulate(
        fleet,
        llama3_cause_mix(),
        nodes=2,
        gpus_per_node=2,
        days=DAYS,
        seed=0,
        fault_scale=300.0,
        scrape_interval_s=scrape_s,
        start=START.isoformat(),
    )
    files = server.scrape_files(fleet)
    with server.serve(server.blocks(files), tmp_path / "prometheus") as url:
        ingested, pulled = Warehouse(tmp_path / "files"), Warehouse(tmp_path / "pulled")
        ingest_paths(ingested, files, jobs=1)
        src = source_config({"name": "tsdb", "kind": "prometheus", "url": url}, kinds())
        reports = pull(pulled, [src], since=START, until=START + timedelta(days=DAYS + 1))
    assert reports and all(r.status == "ok" for r in reports), [r.error for r in reports]
    for wh in (ingested, pulled):
        refresh_counter_events(wh)
    assert ingested.query("SELECT count(*) AS n FROM gpu_hourly")["n"][0] > 500
    assert ingested.query("SELECT count(*) AS n FROM hw_events")["n"][0] > 0  # counter rises
    assert server.differences(ingested, pulled) == []
    # a job's pod label coming or going is no bad input: its hours are pulled raw, not refused
    q = "SELECT count(*) AS n FROM quarantine WHERE error LIKE '%label sets%'"
    assert pulled.query(q)["n"][0] == 0
