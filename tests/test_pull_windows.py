"""Which windows a pull of the ``prometheus`` source marks done, against a real Prometheus
(tests/servers/prometheus.py) holding a small simulated fleet's last days of DCGM scrapes at a
15-minute interval (the rollup path): a window is done only when every hour it covers is
stored (chunk boundaries, ``settle_s``, time not yet come, a Thanos partial response), and
label values of any characters are pulled as the file ingest stores them."""

from __future__ import annotations

import gzip
import json
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import pytest

from analysis.telemetry.rollups import refresh_gpu_hourly
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulate
from sources import kinds
from sources import pull as pulling
from sources.base import source_config
from sources.pull import cursors
from sources.pull import pull
from tests.servers import prometheus as server
from tests.servers.faultproxy import FaultProxy
from tests.servers.faultproxy import Rewrite
from warehouse.store import Warehouse

START = datetime(2026, 11, 19)  # the fleet's ten days of scrapes
HOUR = timedelta(hours=1)


def _source(url: str, **options):
    entry = {"name": "tsdb", "kind": "prometheus", "url": url, "timeout_s": 120, **options}
    return source_config(entry, kinds())


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    out = tmp_path_factory.mktemp("fleet")
    simulate(
        out,
        llama3_cause_mix(),
        nodes=2,
        gpus_per_node=2,
        days=10,
        seed=5,
        fault_scale=1.0,
        scrape_interval_s=900,
        k8s_nodes=0,
        start=START.isoformat(),
    )
    return server.scrape_files(out)


@pytest.fixture(scope="module")
def prom(fleet, tmp_path_factory):
    with server.serve(server.blocks(fleet), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def _hours(wh: Warehouse) -> list[datetime]:
    return wh.query("SELECT DISTINCT hour FROM gpu_rollups ORDER BY hour")["hour"].to_list()


def _every_hour(start: datetime, end: datetime) -> list[datetime]:
    return [start + i * HOUR for i in range(int((end - start) / HOUR))]


def test_a_backfill_across_chunk_boundaries_stores_every_hour_it_records(prom, tmp_path):
    wh = Warehouse(tmp_path / "home")
    reports = pull(
        wh, [_source(prom)], since=datetime(2026, 11, 20, 12, 30), until=datetime(2026, 11, 28)
    )
    assert [r.status for r in reports] == ["ok", "ok"]
    # the hour the pull starts in is pulled whole; the 7-day chunks meet on a whole hour
    first = datetime(2026, 11, 20, 12)
    assert [(r.window.start, r.window.end) for r in reports] == [
        (first, first + timedelta(days=7)),
        (first + timedelta(days=7), datetime(2026, 11, 28)),
    ]
    assert _hours(wh) == _every_hour(first, datetime(2026, 11, 28))
    per_day = wh.query(
        "SELECT hour::DATE AS day, count(DISTINCT hour) AS n FROM gpu_rollups GROUP BY 1 ORDER BY 1"
    )
    assert per_day["n"].to_list() == [12] + [24] * 7


def test_settle_beyond_the_overlap_loses_no_hour(prom, tmp_path, monkeypatch):
    """Hourly pulls (this machine's clock set to 12:05, 13:05, ...) with ``settle_s`` of two
    hours, as long as the overlap: each window ends where its data does."""
    wh = Warehouse(tmp_path / "home")
    src = _source(prom, settle_s=7200)
    first = datetime(2026, 11, 25, 12, 5)
    for i in range(5):
        now = first + i * HOUR
        monkeypatch.setattr(pulling, "now", lambda now=now: now)
        reports = pull(wh, [src])
        assert reports and all(r.status == "ok" for r in reports)
        assert max(r.window.end for r in reports) == now.replace(minute=0) - 2 * HOUR
    last = datetime(2026, 11, 25, 14)
    assert _hours(wh) == _every_hour(first.replace(minute=0) - timedelta(days=1), last)
    assert cursors(wh)["tsdb"] == (last, True)


def test_time_not_yet_come_is_never_marked_done(prom, tmp_path, monkeypatch):
    """``--until`` two days ahead, then this machine's clock three hours ahead of the TSDB's:
    no window reaches past the TSDB's now less ``settle_s``."""
    wh = Warehouse(tmp_path / "home")
    src = _source(prom)
    settle = timedelta(seconds=src.options["settle_s"])

    def latest() -> datetime:
        return (datetime.now(UTC).replace(tzinfo=None) - settle).replace(
            minute=0, second=0, microsecond=0
        )

    now = datetime.now(UTC).replace(tzinfo=None)
    reports = pull(wh, [src], since=now - timedelta(hours=6), until=now + timedelta(days=2))
    assert reports and all(r.status == "ok" for r in reports)
    assert max(r.window.end for r in reports) <= latest()
    assert cursors(wh)["tsdb"][0] <= latest()

    monkeypatch.setattr(
        pulling,
        "now",
        lambda: (
            datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0) + timedelta(hours=3)
        ),
    )
    reports = pull(wh, [src])
    assert reports and all(r.status == "ok" for r in reports)
    assert max(r.window.end for r in reports) <= latest()
    log = wh.read("pull_log")
    assert log["window_end"].max() <= latest()


def _thanos_partial(host: str):
    """A Thanos Query answer while the store holding ``host`` is down: its series are missing
    and a warning says so."""

    def rewrite(body: bytes) -> bytes:
        zipped = body[:2] == b"\x1f\x8b"  # the client asked for gzip
        doc = json.loads(gzip.decompress(body) if zipped else body)
        doc["data"]["result"] = [
            s for s in doc["data"]["result"] if s["metric"].get("Hostname") != host
        ]
        doc["warnings"] = [
            'partial response: store 10.0.0.7:10901 (labels: [zone="b"]) unavailable'
        ]
        out = json.dumps(doc).encode()
        return gzip.compress(out) if zipped else out

    return rewrite


def test_a_partial_response_is_a_failed_window_and_pulled_again(prom, fleet, tmp_path):
    since, until = datetime(2026, 11, 21), datetime(2026, 11, 22)
    host = min(f.parent.name for f in fleet)
    wh = Warehouse(tmp_path / "home")

    def rule(seen):
        return Rewrite(_thanos_partial(host)) if "/query_range" in seen.path else None

    with FaultProxy(prom, rule) as proxy:
        [failed] = pull(wh, [_source(proxy.url)], since=since, until=until)
        assert proxy.faults
    assert failed.status == "failed" and "partial response" in failed.error
    assert "\n" not in failed.error
    log = wh.read("pull_log")
    assert log.select("status", "error").rows() == [("failed", failed.error)]
    assert wh.query("SELECT count(*) AS n FROM gpu_rollups")["n"][0] == 0
    assert cursors(wh)["tsdb"] == (since, False)

    again = pull(wh, [_source(prom)], until=until)  # from where it failed
    assert [(r.status, r.window.start) for r in again] == [("ok", since)]
    clean = Warehouse(tmp_path / "clean")
    pull(clean, [_source(prom)], since=since, until=until)
    cols = "hour, host, gpu, uuid, metric, n, mean, min, max, last"
    q = f"SELECT {cols} FROM gpu_rollups ORDER BY ALL"
    assert wh.query(q).equals(clean.query(q))
    assert host in wh.query("SELECT DISTINCT host FROM gpu_rollups")["host"].to_list()


ODD_START = datetime(2026, 11, 25)
EVERY_CHARACTER = "".join(chr(c) for c in range(1, 128)) + "ü日本🙂\u2028"
ODD_HOSTS = ["gpu\n07", 'gpu"07\\n', EVERY_CHARACTER]
HUGE_HOST = "h" * 1_000_000  # over the query_bytes every request is held to


def _escaped(value: str) -> str:
    """A label value as the text exposition writes it between its quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _odd_scrape(i: int, host: str) -> str:
    """Six hours of one GPU of ``host`` every 15 minutes: a temperature, and an ECC counter that
    rises once (its changed hour is pulled raw, selected by the host's label)."""
    labels = f'gpu="0",UUID="GPU-odd-{i}",Hostname="{_escaped(host)}"'
    lines = []
    for k in range(24):
        ms = int((ODD_START + k * timedelta(minutes=15) - datetime(1970, 1, 1)).total_seconds())
        lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {40 + k % 7} {ms * 1000}")
        lines.append(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{labels}}} {int(k >= 9)} {ms * 1000}")
    return "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n" + "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """A Prometheus holding hosts named with a line feed, quotes and backslashes, every ASCII
    character and some beyond, and a megabyte; and their scrape files."""
    folder = tmp_path_factory.mktemp("odd")
    files = []
    for i, host in enumerate([*ODD_HOSTS, HUGE_HOST]):
        files.append(folder / f"odd-{i}.prom")
        files[-1].write_text(_odd_scrape(i, host))
    with server.serve(server.blocks(files), tmp_path_factory.mktemp("prometheus")) as url:
        yield url, files


def test_label_values_of_any_character_are_pulled_as_the_files_store_them(odd, tmp_path):
    url, files = odd
    pulled = Warehouse(tmp_path / "pulled")
    reports = pull(pulled, [_source(url)], since=ODD_START, until=ODD_START + 6 * HOUR)
    whole = [r for r in reports if r.target is None]
    assert [r.status for r in whole] == ["ok"], [r.error for r in whole]
    [skipped] = [r for r in reports if r.target is not None]
    assert skipped.status == "failed" and "query_bytes" in skipped.error
    assert len(skipped.target) < 80 and "\n" not in skipped.target + skipped.error
    hosts = pulled.query("SELECT DISTINCT host FROM gpu_rollups")["host"].to_list()
    assert sorted(hosts) == sorted(ODD_HOSTS)
    # the counter's rise was pulled raw, by a matcher on each host
    raw = pulled.query("SELECT DISTINCT host FROM gpu_samples")["host"].to_list()
    assert sorted(raw) == sorted(ODD_HOSTS)

    ingested = Warehouse(tmp_path / "files")
    ingest_paths(ingested, files[: len(ODD_HOSTS)], jobs=1)
    for wh in (pulled, ingested):
        refresh_gpu_hourly(wh)
    q = "SELECT hour, host, gpu, uuid, metric, n, mean, min, max, last FROM gpu_hourly ORDER BY ALL"
    assert pulled.query(q).height == 2 * 6 * len(ODD_HOSTS)
    assert pulled.query(q).equals(ingested.query(q))


def test_a_query_limit_splits_host_groups_and_pulls_the_same(odd, tmp_path):
    """One group of every host (``concurrency`` 1) makes a rollup query longer than 13,000
    bytes: held to that, the group is split, and each request stays within it."""
    url, _ = odd
    q = "SELECT hour, host, gpu, metric, n, mean, min, max, last FROM gpu_rollups ORDER BY ALL"
    got, sent = [], []
    for limit in (1_000_000, 13_000):
        wh = Warehouse(tmp_path / str(limit))
        with FaultProxy(url) as proxy:
            src = _source(proxy.url, query_bytes=limit, concurrency=1)
            reports = pull(wh, [src], since=ODD_START, until=ODD_START + 6 * HOUR)
        assert [r.status for r in reports if r.target is None] == ["ok"]
        got.append(wh.query(q))
        sent.append([r for r in proxy.requests if r.method == "POST"])
    assert got[0].height == 2 * 6 * len(ODD_HOSTS) and got[0].equals(got[1])
    assert max(len(r.body) for r in sent[1]) <= 13_000 < max(len(r.body) for r in sent[0])
    assert len(sent[1]) > len(sent[0])
