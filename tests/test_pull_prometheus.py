"""The ``prometheus`` source against a real Prometheus holding the committed fleet's DCGM
history (tests/servers/prometheus.py): what it pulls, as TSDB rollups or, for series as sparse
as this fleet's (a sample every 6 h), as raw samples, derives the same gpu_hourly, gpu_daily
and counter events as ingesting the scrape files, a second pull stores nothing, credentials
reach the server, and a stopped server is a one-line error."""

from __future__ import annotations

import http.server
import json
import threading
from datetime import datetime
from typing import ClassVar

import polars as pl
import pytest

from analysis.telemetry.counters import COUNTER_SOURCE
from analysis.telemetry.counters import refresh_counter_events
from analysis.telemetry.rollups import refresh_gpu_hourly
from ingest.runner import ingest_paths
from sources import kinds
from sources.base import SourceError
from sources.base import Window
from sources.base import fetched
from sources.base import source_config
from sources.prometheus import CHANGES
from sources.prometheus.client import tsdb_session
from sources.pull import pull
from tests.conftest import SAMPLE_FLEET
from tests.servers import prometheus as server
from warehouse.store import Warehouse

HOSTS = [f"gpu-node-{i:03d}" for i in range(1, 5)]  # an eighth of the fleet: 32 GPUs
SINCE, UNTIL = datetime(2026, 1, 4), datetime(2026, 2, 4)  # the first month
AGAIN_UNTIL = datetime(2026, 1, 20)


def _source(url: str, **options):
    """The source as a site configures it: every DCGM family (the default ``metrics``), so the
    whole gpu_hourly compares with the files'."""
    entry = {
        "name": "tsdb",
        "kind": "prometheus",
        "cluster": "default",
        "url": url,
        "timeout_s": 120,
        **options,
    }
    return source_config(entry, kinds())


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    files = server.scrape_files(SAMPLE_FLEET, HOSTS)
    with server.serve(server.blocks(files), tmp_path_factory.mktemp("prometheus")) as url:
        yield url, files


@pytest.fixture(scope="module")
def both(prom, tmp_path_factory):
    """(warehouse from the scrape files, warehouse pulled from Prometheus, the pull's reports),
    each with its daily tables and counter events built."""
    url, files = prom
    ingested = Warehouse(tmp_path_factory.mktemp("files") / "home")
    ingest_paths(
        ingested, [f for f in files if f.name < f"{UNTIL:%Y-%m-%d}"], jobs=1
    )  # a file a day
    pulled = Warehouse(tmp_path_factory.mktemp("pulled") / "home")
    reports = pull(pulled, [_source(url, raw_per_hour=0)], since=SINCE, until=UNTIL)  # rollups
    for wh in (ingested, pulled):
        refresh_gpu_hourly(wh)
        refresh_counter_events(wh)
    return ingested, pulled, reports


def _sorted(df: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return df.sort(keys, nulls_last=True)


def test_pulled_rollups_give_the_files_gpu_hourly(both):
    ingested, pulled, reports = both
    assert all(r.status == "ok" for r in reports), [r.error for r in reports if r.status != "ok"]
    keys = ["hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric"]
    want = _sorted(ingested.read("gpu_hourly"), keys)
    got = _sorted(pulled.read("gpu_hourly"), keys)
    assert want.height > 25_000 and got.height == want.height
    assert got.select(keys).equals(want.select(keys))
    assert got["n"].to_list() == want["n"].to_list()
    for c in ("mean", "min", "max", "last"):
        assert ((got[c] - want[c]).abs() <= 1e-9 * want[c].abs().clip(lower_bound=1)).all(), c
    daily_keys = ["date", "host", "gpu", "uuid", "metric"]
    wd, gd = (
        _sorted(ingested.read("gpu_daily"), daily_keys),
        _sorted(pulled.read("gpu_daily"), daily_keys),
    )
    assert gd.select(daily_keys, "n", "first_hour", "last_hour").equals(
        wd.select(daily_keys, "n", "first_hour", "last_hour")
    )
    assert ((gd["sum"] - wd["sum"]).abs() <= 1e-6 * wd["sum"].abs().clip(lower_bound=1)).all()


@pytest.fixture(scope="module")
def raw(prom, both, tmp_path_factory):
    """The same month pulled with the default ``raw_per_hour``: this fleet's series hold fewer
    samples an hour than a rollup has points, so they come raw; one host per query, three
    queries at once."""
    pulled = Warehouse(tmp_path_factory.mktemp("raw") / "home")
    src = _source(prom[0], hosts_per_query=1, concurrency=3)
    reports = pull(pulled, [src], since=SINCE, until=UNTIL)
    refresh_gpu_hourly(pulled)
    refresh_counter_events(pulled)
    return pulled, reports


def test_sparse_series_are_pulled_as_the_files_raw_samples(prom, both, raw):
    ingested, _, _ = both
    pulled, reports = raw
    assert reports and all(r.status == "ok" for r in reports), [r.error for r in reports]
    assert pulled.query("SELECT count(*) AS n FROM gpu_rollups")["n"][0] == 0
    cols = "time, host, gpu, uuid, pci_bus, metric, value"
    want = ingested.query(f"SELECT {cols} FROM gpu_samples ORDER BY ALL")
    assert want.height > 25_000
    assert pulled.query(f"SELECT {cols} FROM gpu_samples ORDER BY ALL").equals(want)
    keys = ["hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric"]
    hourly = ", ".join([*keys, "n", "mean", "min", "max", "last"])
    q = f"SELECT {hourly} FROM gpu_hourly ORDER BY ALL"
    assert pulled.query(q).equals(ingested.query(q))
    q = (
        "SELECT time, host, component_id, code, count FROM hw_events "
        f"WHERE source = '{COUNTER_SOURCE}' ORDER BY ALL"
    )
    assert pulled.query(q).equals(ingested.query(q))
    again = pull(pulled, [_source(prom[0])], since=SINCE, until=AGAIN_UNTIL)
    assert sum(r.records for r in again) > 10_000 and sum(r.rows_ok for r in again) == 0


def test_pulled_counter_samples_give_the_files_counter_events(both):
    ingested, pulled, _ = both
    cols = ["time", "host", "component_id", "component_class", "code", "count", "severity"]
    want = ingested.query(
        f"SELECT {', '.join(cols)} FROM hw_events WHERE source = '{COUNTER_SOURCE}' ORDER BY ALL"
    )
    got = pulled.query(
        f"SELECT {', '.join(cols)} FROM hw_events WHERE source = '{COUNTER_SOURCE}' ORDER BY ALL"
    )
    assert want.height > 50
    assert got.equals(want)


def test_raw_samples_only_for_changed_counters_and_blank_hours(both):
    ingested, pulled, _ = both
    samples = ingested.query("SELECT count(*) AS n FROM gpu_samples")["n"][0]
    raw = pulled.query(f"""SELECT metric IN ({", ".join(f"'{m}'" for m in CHANGES)}) AS counter,
                          count(*) AS n, count(value) AS valued
                          FROM gpu_samples GROUP BY 1 ORDER BY 1""").rows()
    assert (
        0 < sum(n for _, n, _ in raw) < samples / 5
    )  # changed counter hours and the sample before each
    assert raw[-1][0] and raw[-1][1] > 0
    # gauges only in the hours holding a DCGM blank (fetched raw: a rollup would average it)
    assert all(valued == 0 for counter, _, valued in raw if not counter)
    blanks = pulled.query("SELECT count(*) AS n FROM quarantine WHERE error LIKE '%DCGM blank%'")[
        "n"
    ][0]
    assert blanks == sum(n for counter, n, _ in raw if not counter)


def test_pulling_again_adds_nothing(both, prom):
    _, pulled, _ = both
    tables = ("gpu_rollups", "gpu_samples", "quarantine")
    before = {t: pulled.query(f"SELECT count(*) AS n FROM {t}")["n"][0] for t in tables}
    again = pull(pulled, [_source(prom[0], raw_per_hour=0)], since=SINCE, until=AGAIN_UNTIL)
    assert [r.status for r in again] == ["ok"] * len(again)
    assert sum(r.records for r in again) > 10_000
    assert sum(r.rows_ok for r in again) == 0
    assert sum(r.rows_duplicate + r.rows_quarantined for r in again) == sum(
        r.records for r in again
    )
    assert {t: pulled.query(f"SELECT count(*) AS n FROM {t}")["n"][0] for t in tables} == before


def test_a_stopped_server_is_one_line(tmp_path):
    src = _source(f"http://127.0.0.1:{server.free_port()}", retries=0, timeout_s=5)
    with pytest.raises(SourceError) as err:
        list(fetched(kinds()["prometheus"], src, Window(SINCE, datetime(2026, 1, 5))))
    assert "\n" not in str(err.value) and "cannot connect" in str(err.value)
    [report] = pull(Warehouse(tmp_path / "home"), [src], since=SINCE, until=datetime(2026, 1, 5))
    assert (
        report.status == "failed" and "cannot connect" in report.error and "\n" not in report.error
    )


@pytest.mark.parametrize(("compress", "encoding"), [(False, None), (True, "gzip")])
def test_answers_are_gzipped_only_where_compress_asks(prom, compress, encoding):
    url, _ = prom
    answer = tsdb_session(_source(url, compress=compress)).get(f"{url}/api/v1/label/gpu/values")
    assert answer.headers.get("Content-Encoding") == encoding
    assert answer.json()["data"] == [str(i) for i in range(8)]


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every API call with an empty success and keeps each request's Authorization."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self):
        self.seen.append(self.headers.get("Authorization"))
        body = json.dumps({"status": "success", "data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    ("options", "env", "header"),
    [
        ({"token_env": "PROM_TOKEN"}, {"PROM_TOKEN": "s3cret"}, "Bearer s3cret"),
        (
            {"username_env": "PROM_USER", "password_env": "PROM_PASS"},
            {"PROM_USER": "ops", "PROM_PASS": "pw"},
            "Basic b3BzOnB3",
        ),
    ],
)
def test_credentials_from_the_environment_reach_the_server(monkeypatch, options, env, header):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        _Recorder.seen = []
        src = _source(f"http://127.0.0.1:{httpd.server_address[1]}", **options)
        assert (
            list(fetched(kinds()["prometheus"], src, Window(SINCE, datetime(2026, 1, 5)))) == []
        )  # no hosts
        assert _Recorder.seen and set(_Recorder.seen) == {header}
    finally:
        httpd.shutdown()


def test_an_unset_credential_variable_is_one_line(monkeypatch):
    monkeypatch.delenv("PROM_TOKEN", raising=False)
    src = _source("http://127.0.0.1:9", token_env="PROM_TOKEN")
    with pytest.raises(SourceError, match="PROM_TOKEN"):
        list(fetched(kinds()["prometheus"], src, Window(SINCE, datetime(2026, 1, 5))))


def test_dry_run_plan_names_the_queries_without_io():
    src = _source(
        "http://127.0.0.1:9", metrics=["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]
    )
    plan = kinds()["prometheus"].plan(src, Window(datetime(2026, 1, 5), datetime(2026, 1, 5, 6)))
    assert any(
        "/api/v1/query_range" in p and "avg_over_time(DCGM_FI_DEV_GPU_TEMP" in p for p in plan
    )
    assert any("last_over_time(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" in p for p in plan)
