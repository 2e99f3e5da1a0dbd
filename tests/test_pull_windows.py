"""Which windows a pull of the ``prometheus`` source marks done, against a real Prometheus
(tests/servers/prometheus.py) holding a small simulated fleet's last days of DCGM scrapes at a
15-minute interval (the rollup path): a window is done only when every hour it covers is
stored (chunk boundaries, ``settle_s``, time not yet come, a Thanos partial response), and
label values of any characters are pulled as the file ingest stores them."""

from __future__ import annotations

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


def test_a_partial_response_is_a_failed_window_and_pulled_again(prom, fleet, tmp_path):
    since, until = datetime(2026, 11, 21), datetime(2026, 11, 22)
    host = min(f.parent.name for f in fleet)
    wh = Warehouse(tmp_path / "home")

    def rule(seen):
        return server.partial_response(host) if "/query_range" in seen.path else None

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


def test_a_partial_response_that_passes_is_tried_again_within_the_pull(prom, fleet, tmp_path):
    """A store flapping for a moment: the first answer of each kind is partial, the request is
    tried again (as after a 503) and the window stored whole; one partial answer among a pull's
    many requests does not fail the window and leave it to grow until the next."""
    since, until = datetime(2026, 11, 21), datetime(2026, 11, 22)
    host = min(f.parent.name for f in fleet)
    partial = server.partial_response(host)
    hit: set[str] = set()

    def rule(seen):
        path = seen.path.split("?")[0]
        if path in hit:
            return None
        hit.add(path)
        return partial

    wh = Warehouse(tmp_path / "home")
    with FaultProxy(prom, rule) as proxy:
        reports = pull(wh, [_source(proxy.url)], since=since, until=until)
    assert [(r.status, r.error) for r in reports] == [("ok", None)]
    assert len(proxy.faults) >= 3  # the host list, the rollups and a query each once
    clean = Warehouse(tmp_path / "clean")
    pull(clean, [_source(prom)], since=since, until=until)
    cols = "hour, host, gpu, uuid, metric, n, mean, min, max, last"
    q = f"SELECT {cols} FROM gpu_rollups ORDER BY ALL"
    assert wh.query(q).equals(clean.query(q)) and host in wh.query(q)["host"].to_list()


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


SCHEDULE_START = datetime(2026, 11, 23)  # eleven hours scraped every minute
SCHEDULE_HOURS = 11


def _schedule_scrape() -> str:
    """Two GPUs scraped every minute: one on a Kubernetes node whose job's ``pod`` label comes
    at 01:30 and goes at 06:30, one on a host that goes down right after its 05:00 scrape."""
    lines = ["# TYPE DCGM_FI_DEV_GPU_TEMP gauge", "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter"]
    for k in range(SCHEDULE_HOURS * 60):
        t = SCHEDULE_START + k * timedelta(minutes=1) + timedelta(seconds=0.5)
        ms = int((t - datetime(1970, 1, 1)).total_seconds() * 1000)
        job = timedelta(hours=1, minutes=30) <= t - SCHEDULE_START < timedelta(hours=6, minutes=30)
        hosts = [("k8s-1", ',pod="job-1"' if job else "")]
        if t < SCHEDULE_START + timedelta(hours=5, minutes=1):
            hosts.append(("down-1", ""))
        for host, pod in hosts:
            labels = f'gpu="0",UUID="GPU-{host}",Hostname="{host}"{pod}'
            lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {40 + k % 7} {ms}")
            lines.append(f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{labels}}} 0 {ms}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def schedule(tmp_path_factory):
    """The same hours pulled hourly (this machine's clock set to a quarter past each hour) and
    by one pull: the two warehouses."""
    folder = tmp_path_factory.mktemp("schedule")
    (folder / "scrape.prom").write_text(_schedule_scrape())
    files = [folder / "scrape.prom"]
    home = tmp_path_factory.mktemp("homes")
    with server.serve(server.blocks(files), tmp_path_factory.mktemp("prometheus")) as url:
        hourly = Warehouse(home / "hourly")
        with pytest.MonkeyPatch.context() as mp:
            for i in range(SCHEDULE_HOURS):
                now = SCHEDULE_START + (i + 1) * HOUR + timedelta(minutes=15)
                mp.setattr(pulling, "now", lambda now=now: now)
                reports = pull(hourly, [_source(url)], since=SCHEDULE_START if i == 0 else None)
                assert [r.status for r in reports] == ["ok"], [r.error for r in reports]
        log = hourly.read("pull_log")
        once = Warehouse(home / "once")
        reports = pull(
            once, [_source(url)], since=log["window_start"].min(), until=log["window_end"].max()
        )
        assert [r.status for r in reports] == ["ok"]
    return hourly, once


def _stored(wh: Warehouse, table: str, host: str):
    time = "hour" if table == "gpu_rollups" else "time"
    return wh.query(
        f"SELECT * EXCLUDE (source_file) FROM {table} WHERE host = '{host}' ORDER BY {time}, metric"
    )


def test_hourly_pulls_across_a_pod_label_change_store_what_one_pull_does(schedule):
    """The hour after the job's pod label came (or went) is pulled raw with the sample before
    from the old label set, by one pull and by hourly ones alike: a pull starting at a later
    hour, its lookback holding both sets, does not take every first hour for a changed one."""
    hourly, once = schedule
    raw = _stored(once, "gpu_samples", "k8s-1")
    hours = raw["time"].dt.truncate("1h").unique().sort().to_list()
    # the hours split between two label sets, the hours after them, and each one's sample before
    assert [h - SCHEDULE_START for h in hours] == [timedelta(hours=h) for h in (0, 1, 2, 5, 6, 7)]
    assert _stored(hourly, "gpu_samples", "k8s-1").equals(raw)
    assert _stored(hourly, "gpu_rollups", "k8s-1").equals(_stored(once, "gpu_rollups", "k8s-1"))


def test_hourly_pulls_of_a_host_that_went_down_store_what_one_pull_does(schedule):
    """A pull whose hours hold only the last scrape before the host went down measures the
    host's scrape interval as a longer pull does: rollups, not its raw samples."""
    hourly, once = schedule
    assert _stored(once, "gpu_samples", "down-1").height == 0
    assert _stored(hourly, "gpu_samples", "down-1").height == 0
    rolled = _stored(once, "gpu_rollups", "down-1")
    assert rolled.height == 2 * 6 and rolled["n"].to_list()[-2:] == [1, 1]
    assert _stored(hourly, "gpu_rollups", "down-1").equals(rolled)
