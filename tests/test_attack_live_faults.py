"""Attacks on the live sources' requests, through the fault proxy in front of a real Prometheus
(one host of the committed fleet) and real sushy-static BMCs: an answer dripped a byte a second,
a Retry-After far past ``timeout_s``, a BMC that drips, an answer without data, a connection
reset in the middle of a body. Each request ends by its deadline, each failure is one line in
``pull_log``, and a failing source never stops the sources after it."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from pipelines.cli import main
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.conftest import FIXTURES
from tests.conftest import SAMPLE_FLEET
from tests.servers import prometheus as server
from tests.servers.faultproxy import Drip
from tests.servers.faultproxy import FaultProxy
from tests.servers.faultproxy import Reset
from tests.servers.faultproxy import Rewrite
from tests.servers.faultproxy import Status
from tests.servers.redfish import MOCKUP
from tests.servers.redfish import start_static
from tests.servers.redfish import stop
from warehouse.store import Warehouse

SINCE, UNTIL = datetime(2026, 1, 6), datetime(2026, 1, 7)  # the fleet starts on the 5th
LABELS = "/api/v1/label/"
HOST_VALUES = f"{LABELS}Hostname/values"  # the answer naming the hosts
HOSTS = b'{"status":"success","data":["gpu-node-001"]}'  # the label values answer
SACCT = FIXTURES / "slurm" / "sacct_parsable2_with_header_examples.txt"


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    files = server.scrape_files(SAMPLE_FLEET, ["gpu-node-001"])
    with server.serve(server.blocks(files), tmp_path_factory.mktemp("prometheus")) as url:
        yield url


def _tsdb(url: str, **options):
    entry = {"name": "tsdb", "kind": "prometheus", "url": url, "retries": 0, "timeout_s": 30,
             "metrics": ["DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_XID_ERRORS"]}  # fmt: skip
    return source_config({**entry, **options}, kinds())


def _first(path: str, fault, times: int = 1):
    """A rule giving ``fault`` to the first ``times`` requests whose path starts with ``path``."""
    left = [times]

    def rule(seen):
        if seen.path.startswith(path) and left[0] > 0:
            left[0] -= 1
            return fault
        return None

    return rule


def _pull(wh, src) -> tuple[list, float]:
    t0 = time.monotonic()
    reports = pull(wh, [src], SINCE, UNTIL)
    return reports, time.monotonic() - t0


def test_an_answer_dripped_a_byte_a_second_is_cut_at_timeout_s(prom, tmp_path):
    with FaultProxy(prom, _first(HOST_VALUES, Drip(1.0), times=99)) as proxy:
        [report], took = _pull(Warehouse(tmp_path / "a"), _tsdb(proxy.url, timeout_s=3))
    assert report.status == "failed" and took < 12  # the answer would take 44 s dripped
    assert report.error.endswith(f"{HOST_VALUES}: no whole answer within 3 s")
    # a drip is transient: the retry that is not dripped stores the window
    with FaultProxy(prom, _first(HOST_VALUES, Drip(1.0))) as proxy:
        [report], took = _pull(Warehouse(tmp_path / "b"), _tsdb(proxy.url, timeout_s=3, retries=1))
    assert report.status == "ok" and report.rows_ok > 0 and 3 <= took < 20


def test_a_retry_after_past_timeout_s_is_not_waited_for(prom, tmp_path):
    slow_down = Status(429, {"Retry-After": "75"}, b"slow down")
    with FaultProxy(prom, _first(LABELS, slow_down, times=99)) as proxy:
        [report], took = _pull(Warehouse(tmp_path / "a"), _tsdb(proxy.url, timeout_s=5, retries=3))
    assert report.status == "failed" and took < 10
    assert "HTTP 429" in report.error and "retry after 75 s, longer than timeout_s (5 s)" in (
        report.error
    )
    # a wait within timeout_s is waited for, and the retry stores the window
    with FaultProxy(prom, _first(LABELS, Status(503, {"Retry-After": "2"}))) as proxy:
        [report], took = _pull(Warehouse(tmp_path / "b"), _tsdb(proxy.url, timeout_s=5, retries=1))
    assert report.status == "ok" and report.rows_ok > 0 and took >= 2


def test_a_connection_reset_mid_body_is_retried_and_reported_in_one_line(prom, tmp_path):
    with FaultProxy(prom, _first(HOST_VALUES, Reset(20))) as proxy:
        [report], _ = _pull(Warehouse(tmp_path / "a"), _tsdb(proxy.url, retries=1))
        assert [f for _, f in proxy.faults] == [Reset(20)]
    assert report.status == "ok" and report.rows_ok > 0
    with FaultProxy(prom, _first(HOST_VALUES, Reset(20), times=99)) as proxy:
        [report], _ = _pull(Warehouse(tmp_path / "b"), _tsdb(proxy.url, retries=2))
        assert len(proxy.faults) == 3  # the first try and both retries
    assert report.status == "failed"
    cut = f"answer cut short (20 of {len(HOSTS)} bytes)"
    assert report.error.endswith(f"{HOST_VALUES}: {cut}")


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(map(str, argv)))
    return code, out.getvalue(), err.getvalue()


def test_an_answer_without_data_fails_its_source_and_the_next_source_runs(prom, tmp_path):
    null = Rewrite(lambda _: b'{"status":"success","data":null}')
    home = tmp_path / "home"
    home.mkdir()
    with FaultProxy(prom, _first(HOST_VALUES, null)) as proxy:
        (home / "sources.toml").write_text(
            f'[[source]]\nname = "tsdb"\nkind = "prometheus"\nurl = "{proxy.url}"\nretries = 0\n\n'
            f'[[source]]\nname = "dump"\nkind = "command"\ncommand = ["cat", "{SACCT}"]\n'
        )
        code, out, err = run_cli("--home", home, "pull", "--since", SINCE, "--until", UNTIL)
    assert code == 1 and "Traceback" not in err and err.count("\n") == 1
    assert "dump: pulled" in out
    log = Warehouse(home).read("pull_log").sort("source")
    assert log.select("source", "status").rows() == [("dump", "ok"), ("tsdb", "failed")]
    assert log["error"][1].endswith(f"{HOST_VALUES}: an answer without data (None)")


def test_a_dripping_bmc_is_given_up_at_bmc_timeout_s_and_the_process_exits(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    servers = [start_static(MOCKUP / "gpu001", tmp_path), start_static(MOCKUP / "gpu002", tmp_path)]
    try:
        with FaultProxy(servers[1].url, lambda _: Drip(1.0)) as drip:
            (home / "sources.toml").write_text(
                '[[source]]\nname = "bmcs"\nkind = "redfish"\nauth = "none"\ntimeout_s = 60\n'
                "bmc_timeout_s = 3\n"
                f'bmcs = [{{host = "gpu001", url = "{servers[0].url}"}}, '
                f'{{host = "gpu002", url = "{drip.url}"}}]\n'
            )
            goodput = Path(sys.executable).parent / "goodput"
            t0 = time.monotonic()
            done = subprocess.run(
                [goodput, "--home", home, "pull", "--since", SINCE.isoformat(),
                 "--until", UNTIL.isoformat()],
                capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            took = time.monotonic() - t0
            assert drip.faults  # the root page alone (770 bytes) would take 13 minutes
    finally:
        for s in servers:
            stop(s)
    assert done.returncode == 1, done.stderr
    assert "bmcs/gpu002" in done.stderr and "not read whole within 3 s (bmc_timeout_s)" in (
        done.stderr
    )
    # the process did not wait for the drip; most of this is the CLI starting
    assert took < 120, took
    log = Warehouse(home).read("pull_log")
    assert log.filter(pl.col("target") == "gpu002")["status"].to_list() == ["failed"]
    assert Warehouse(home).read("hw_events")["host"].unique().to_list() == ["gpu001"]
