"""Pulling Redfish BMCs (sources/redfish.py) from real servers: sushy-static serving the mockups of
tests/fixtures/redfish_mockup, sushy-emulator enforcing basic auth, a socket that never answers."""

import base64
import json
import time
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from ingest.base import ParseContext
from ingest.registry import formats
from sources import kinds
from sources.base import Document
from sources.base import Failure
from sources.base import SourceError
from sources.base import Window
from sources.base import load_sources
from sources.base import source_config
from sources.pull import pull
from tests.servers.redfish import MOCKUP
from tests.servers.redfish import free_port
from tests.servers.redfish import running_bmcs
from tests.servers.redfish import silent_server
from tests.servers.redfish import start_emulator
from tests.servers.redfish import start_static
from tests.servers.redfish import stop

redfish = kinds()["redfish"]
T0, T1, T2 = datetime(2026, 1, 1), datetime(2026, 1, 2), datetime(2026, 1, 3)
WINDOW = Window(T0, T1)  # not used to select: a BMC's log is read whole every pull


@pytest.fixture(scope="module")
def redfish_bmcs(tmp_path_factory):
    with running_bmcs(tmp_path_factory.mktemp("redfish")) as bmcs:
        yield bmcs


def _src(bmcs, **options):
    entry = {"name": "bmcs", "kind": "redfish", "cluster": "c1", "auth": "none", "retries": 0,
             "timeout_s": 20, "bmcs": [{"host": h, "url": u} for h, u in bmcs.items()]}  # fmt: skip
    return source_config({**entry, **options}, kinds())


def _fetch(src) -> tuple[list[Document], dict[str, str]]:
    out = list(redfish.fetch(src, WINDOW))
    docs = [d for d in out if isinstance(d, Document)]
    return docs, {f.target: f.reason for f in out if isinstance(f, Failure)}


def _mockup_entries(host: str) -> list[dict]:
    """Every LogEntry of a mockup BMC, inline in a page or its own resource, once each."""
    found = {}
    for path in (MOCKUP / host).rglob("index.json"):
        doc = json.loads(path.read_text())
        for e in doc.get("Members", []) if "Collection" in doc["@odata.type"] else [doc]:
            if "LogEntry.v" in e.get("@odata.type", ""):
                found[e["@odata.id"]] = e
    return list(found.values())


def _utc(created: str) -> datetime:
    return datetime.fromisoformat(created).astimezone(UTC).replace(tzinfo=None)


def test_paged_log_yields_every_entry_once_and_sensors_land(redfish_bmcs, wh):
    src = _src(
        {"gpu001": redfish_bmcs.url("gpu001"), "gpu002": redfish_bmcs.url("gpu002")},
        verify_tls=str(redfish_bmcs.ca),
    )
    [report] = pull(wh, [src], T0, T1)
    assert (report.status, report.target, report.documents) == ("ok", None, 8)
    files = set(wh.read("hw_events").filter(pl.col("host") == "gpu001")["source_file"])
    assert files == {
        "pull://bmcs/gpu001/redfish/v1/Managers/BMC/LogServices/Log/Entries",
        "pull://bmcs/gpu001/redfish/v1/Systems/437XR1138R2/LogServices/Log1/Entries",
        "pull://bmcs/gpu001/redfish/v1/Systems/437XR1138R2/LogServices/Log1/Entries/page-2",
        "pull://bmcs/gpu001/redfish/v1/Systems/437XR1138R2/LogServices/Log1/Entries/page-3",
    }
    events = wh.read("hw_events")
    for host, n in (("gpu001", 6), ("gpu002", 1)):
        got = events.filter(pl.col("host") == host)
        want = _mockup_entries(host)
        assert got.height == len(want) == n
        assert sorted(got.select("time", "code", "message").rows()) == sorted(
            (_utc(e["Created"]), e["MessageId"], e["Message"]) for e in want
        )
    assert set(events["cluster"]) == {"c1"} and set(events["source"]) == {"redfish"}
    # page-2's members were links only: read one by one, stored with their own fields
    psu = events.filter(pl.col("code") == "0x6F0801").sort("time")
    assert psu["severity"].to_list() == ["critical", "info"]  # the assert, then its deassert
    assert psu["component_class"].to_list() == ["psu", "psu"]

    sensors = wh.read("bmc_sensors")
    g1 = sensors.filter(pl.col("host") == "gpu001")
    assert sorted(g1["sensor"]) == sorted(
        json.loads((MOCKUP / "gpu001/Chassis/1U/Sensors" / s / "index.json").read_text())["Name"]
        for s in ("CPU1Temp", "IntakeTemp", "CPUFan1", "PS1InputPower", "PS1InputVoltage")
    )
    cpu = g1.filter(pl.col("sensor") == "CPU #1 Temperature").row(0, named=True)
    assert (cpu["value"], cpu["unit"], cpu["sensor_type"]) == (37.0, "C", "temperature")
    thermal = json.loads((MOCKUP / "gpu002/Chassis/1U/Thermal/index.json").read_text())
    power = json.loads((MOCKUP / "gpu002/Chassis/1U/Power/index.json").read_text())
    n_power = sum(len(power.get(a, [])) for a in ("PowerControl", "Voltages", "PowerSupplies"))
    g2 = sensors.filter(pl.col("host") == "gpu002")
    assert g2.height == len(thermal["Temperatures"]) + len(thermal["Fans"]) + n_power
    # stamped when read (the resources carry no reading time), not with the window
    assert sensors["time"].min() >= report_started(wh) - timedelta(seconds=1)
    assert report.records == report.rows_ok + report.rows_quarantined + report.rows_duplicate
    assert report.rows_ok == events.height + sensors.height and report.rows_quarantined == 0


def report_started(wh) -> datetime:
    return wh.read("pull_log")["started_at"].min()


def test_pulling_twice_adds_no_log_entry(redfish_bmcs, wh):
    src = _src({"gpu001": redfish_bmcs.url("gpu001")})
    [first] = pull(wh, [src], T0, T1)
    [again] = pull(wh, [src], T0, T1)  # the same window
    [later] = pull(wh, [src], T1, T2)  # the next one: the BMC's log is read whole again
    assert wh.read("hw_events").height == 6
    for r in (again, later):
        assert r.status == "ok" and r.records == first.records == 6 + 5
        assert r.rows_duplicate >= 6  # every entry read again, none stored again
    # readings are a new snapshot each pull (unless within the same second), each stored once
    snapshots = wh.read("bmc_sensors").group_by("time").len()
    assert set(snapshots["len"]) == {5}
    log = wh.read("pull_log").sort("started_at")
    assert log.select("status", "target").rows() == [("ok", None)] * 3


def test_unreachable_bmc_is_a_status_row_and_the_next_pull_reads_it(redfish_bmcs, wh, tmp_path):
    port = free_port()  # nothing listens there yet
    src = _src({"gpu001": redfish_bmcs.url("gpu001"), "gpu404": f"http://127.0.0.1:{port}"})
    whole, down = pull(wh, [src], T0, T1)
    assert (whole.status, whole.target) == ("ok", None)
    assert (down.status, down.target) == ("failed", "gpu404")
    assert down.error == (
        f"http://127.0.0.1:{port}/redfish/v1/: cannot connect ([Errno 111] Connection refused)"
    )
    assert set(wh.read("hw_events")["host"]) == {"gpu001"}
    failed = wh.read("pull_log").filter(pl.col("status") == "failed")
    assert failed.select("target", "error").rows() == [("gpu404", down.error)]
    server = start_static(MOCKUP / "gpu002", tmp_path, port=port)  # the BMC is back
    try:
        reports = pull(wh, [src], T1, T2)
    finally:
        stop(server)
    assert [(r.status, r.target) for r in reports] == [("ok", None)]
    events = wh.read("hw_events")
    assert events.filter(pl.col("host") == "gpu404").height == 1
    assert events.filter(pl.col("host") == "gpu001").height == 6


def test_a_bmc_that_never_answers_is_cut_at_its_deadline(redfish_bmcs):
    with silent_server() as hung:
        src = _src(
            {"gpu001": redfish_bmcs.url("gpu001"), "gpu777": hung.url},
            timeout_s=60,
            retries=3,
            bmc_timeout_s=1.5,
        )
        t0 = time.monotonic()
        docs, failed = _fetch(src)
        took = time.monotonic() - t0
    assert failed == {"gpu777": "not read whole within 1.5 s (bmc_timeout_s)"}
    assert {d.host for d in docs} == {"gpu001"}
    assert took < 15  # the per-request timeout (60 s) and retries did not hold it


def test_concurrency_bounds_the_bmcs_in_flight():
    with silent_server() as hung:
        hosts = {f"gpu{i:03d}": hung.url for i in range(7)}
        _, failed = _fetch(_src(hosts, concurrency=3, bmc_timeout_s=0.5))
    assert failed == {h: "not read whole within 0.5 s (bmc_timeout_s)" for h in hosts}
    assert hung.most_open in (2, 3)  # 3 unless a walk gave up before the third had connected


def test_only_the_log_services_asked_for(redfish_bmcs):
    docs, failed = _fetch(_src({"gpu001": redfish_bmcs.url("gpu001")}, logs=["log"]))
    assert failed == {}
    assert [d.name for d in docs if d.format == "redfish"] == [
        "pull://bmcs/gpu001/redfish/v1/Managers/BMC/LogServices/Log/Entries"
    ]


def test_a_next_link_loop_or_too_many_pages_fails_the_bmc(redfish_bmcs):
    docs, failed = _fetch(_src({"loop": redfish_bmcs.url("loop")}))
    assert docs == [] and "Members@odata.nextLink loops back" in failed["loop"]
    docs, failed = _fetch(_src({"gpu001": redfish_bmcs.url("gpu001")}, max_pages=2))
    assert docs == [] and failed["gpu001"].endswith("more than 2 pages (max_pages)")


def test_tls_verification_as_configured(redfish_bmcs):
    url = redfish_bmcs.url("gpu002")
    _, failed = _fetch(_src({"gpu002": url}))  # verify_tls = true: the system's CAs
    assert failed["gpu002"].startswith(f"{url}/redfish/v1/: certificate not trusted")
    for verify in (str(redfish_bmcs.ca), False):
        docs, failed = _fetch(_src({"gpu002": url}, verify_tls=verify))
        assert failed == {} and len(docs) == 3
    with pytest.raises(SourceError, match="verify_tls: no CA bundle at /nonexistent.pem"):
        _fetch(_src({"gpu002": url}, verify_tls="/nonexistent.pem"))


def test_basic_auth_is_sent_and_enforced(redfish_bmcs, tmp_path, monkeypatch):
    monkeypatch.setenv("BMC_USER", "admin")
    monkeypatch.setenv("BMC_PASS", "s3cret")
    creds = {"auth": "basic", "username_env": "BMC_USER", "password_env": "BMC_PASS"}
    # sushy-static accepts anything and prints each request's headers: every GET carried them
    server = redfish_bmcs.servers["gpu001"]
    header = f"Authorization: Basic {base64.b64encode(b'admin:s3cret').decode()}"
    skip = len(server.printed())
    docs, failed = _fetch(_src({"gpu001": server.url}, **creds))
    assert failed == {} and len(docs) == 5
    printed = server.printed()[skip:]
    assert printed.count(header) == printed.count('"GET /redfish/v1') == 23  # every request
    # sushy-emulator checks them: the right password reads the chassis, a wrong one is refused
    emulator = start_emulator(tmp_path, "admin", "s3cret")
    try:
        docs, failed = _fetch(_src({"gpu005": emulator.url}, **creds))
        assert failed == {}
        [thermal] = [d for d in docs if d.format == "redfish-sensors"]
        res = formats()["redfish-sensors"].parse(
            thermal.data, ParseContext(host=thermal.host, time=thermal.time)
        )
        temps = res.tables["bmc_sensors"].filter(pl.col("sensor") == "CPU Temp")
        assert temps["value"].to_list() == [41.0] and temps["host"].to_list() == ["gpu005"]
        monkeypatch.setenv("BMC_PASS", "wrong")
        docs, failed = _fetch(_src({"gpu005": emulator.url}, **creds))
        assert docs == [] and failed["gpu005"] == (
            f"{emulator.url}/redfish/v1/Systems: HTTP 401 Unauthorized: "
            "Incorrect username or password"
        )
    finally:
        stop(emulator)


def test_session_login_posts_the_credentials_and_needs_a_token(redfish_bmcs, monkeypatch):
    monkeypatch.setenv("BMC_USER", "admin")
    monkeypatch.setenv("BMC_PASS", "s3cret")
    server = redfish_bmcs.servers["gpu001"]
    src = _src(
        {"gpu001": server.url}, auth="session", username_env="BMC_USER", password_env="BMC_PASS"
    )
    docs, failed = _fetch(src)
    # sushy-static answers every POST 204 and issues no session: the BMC fails, in one line
    assert docs == [] and failed["gpu001"] == (
        f"{server.url}/redfish/v1/SessionService/Sessions: session login answered HTTP 204 "
        'without an X-Auth-Token (try auth = "basic")'
    )
    deadline = time.monotonic() + 10
    while "UserName" not in server.printed() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert """Data: b'{"UserName": "admin", "Password": "s3cret"}'""" in server.printed()
    monkeypatch.delenv("BMC_PASS")
    with pytest.raises(
        SourceError, match="environment variable BMC_PASS .password_env. is not set"
    ):
        _fetch(src)


def test_bmcs_file_and_plan(tmp_path, redfish_bmcs):
    listing = tmp_path / "bmcs.txt"
    listing.write_text(
        f"# host url\ngpu001 {redfish_bmcs.url('gpu001')}  # rack 1\n\n"
        f"gpu009 http://10.0.0.9:8443/redfish/v1\n"
    )
    src = _src({}, bmcs_file=str(listing), auth="basic", username_env="U", password_env="P")
    plan = redfish.plan(src, WINDOW)  # no request, no credential read (U and P are unset)
    assert [p.split(": ")[0] for p in plan] == ["gpu001", "gpu009"]
    assert plan[1].startswith("gpu009: GET http://10.0.0.9:8443/redfish/v1/ then basic auth, ")
    (tmp_path / "sources.toml").write_text(
        '[[source]]\nname = "bmcs"\nkind = "redfish"\ncluster = "c1"\nauth = "none"\n'
        'verify_tls = false\nbmcs = [{host = "gpu100", url = "https://10.0.0.1"}]\n'
        f'bmcs_file = "{listing}"\n'
    )
    [loaded] = load_sources(tmp_path, kinds())
    assert [p.split(" then ")[0] for p in redfish.plan(loaded, WINDOW)] == [
        "gpu100: GET https://10.0.0.1/redfish/v1/",
        f"gpu001: GET {redfish_bmcs.url('gpu001')}/redfish/v1/",
        "gpu009: GET http://10.0.0.9:8443/redfish/v1/",
    ]
    listing.write_text("gpu001\n")
    with pytest.raises(SourceError, match=r"bmcs.txt line 1: expected 'host url', got 'gpu001'"):
        redfish.plan(src, WINDOW)
    for bad, msg in [
        ({"bmcs": [{"host": "a"}]}, "bmcs entry 1 needs a host and a url"),
        ({"bmcs": [{"host": "a", "url": "10.0.0.1"}]}, "is not http"),
        ({"bmcs": [{"host": "a", "url": "http://x"}] * 2}, "a is listed twice"),
        ({"bmcs": []}, "no BMCs"),
        ({"auth": "digest"}, "auth 'digest' is not one of"),
    ]:
        src = source_config(
            {
                "name": "b",
                "kind": "redfish",
                "bmcs": [{"host": "a", "url": "http://x"}],
                "auth": "none",
                **bad,
            },
            kinds(),
        )
        with pytest.raises(SourceError, match=msg):
            redfish.plan(src, WINDOW)


def test_many_bmcs_read_concurrently_from_one_server(tmp_path):
    server = start_static(MOCKUP / "gpu001", tmp_path)
    try:
        hosts = {f"gpu{i:03d}": server.url for i in range(1, 25)}
        docs, failed = _fetch(_src(hosts, concurrency=8))
    finally:
        stop(server)
    assert failed == {} and {d.host for d in docs} == set(hosts)
    assert len(docs) == 24 * 5  # four log pages and one sensor collection each
