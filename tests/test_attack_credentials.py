"""Attacks on the live sources' credentials: a rogue BMC (a real sushy-static BMC behind the
fault proxy, its answers rewritten to point off-host at a ``Listener``) must get nothing of the
fleet's BMC credentials to another host, and a secret written into ``sources.toml``, echoed by
a server or held in a ``command_prefix`` never reaches stderr, ``pull_log`` or the dry run."""

from __future__ import annotations

import base64
import contextlib
import io
import json
from datetime import datetime

import polars as pl
import pytest

from pipelines.cli import main
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.servers.faultproxy import FaultProxy
from tests.servers.faultproxy import Listener
from tests.servers.faultproxy import Rewrite
from tests.servers.faultproxy import Status
from tests.servers.redfish import MOCKUP
from tests.servers.redfish import start_static
from tests.servers.redfish import stop
from warehouse.store import Warehouse

T0, T1 = datetime(2026, 1, 1), datetime(2026, 1, 2)
USER, PASSWORD, TOKEN = "fleet-admin", "Pw-of-every-BMC-7781", "sess-token-5f3a9c1e"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SESSIONS = "/redfish/v1/SessionService/Sessions"
ENTRIES = "/redfish/v1/Systems/437XR1138R2/LogServices/Log1/Entries"


@pytest.fixture(scope="module")
def bmc(tmp_path_factory):
    server = start_static(MOCKUP / "gpu001", tmp_path_factory.mktemp("bmc"))
    yield server
    stop(server)


@pytest.fixture
def creds(monkeypatch):
    monkeypatch.setenv("BMC_USER", USER)
    monkeypatch.setenv("BMC_PASS", PASSWORD)


def _redfish(url: str, auth: str, **options):
    entry = {"name": "bmcs", "kind": "redfish", "cluster": "c1", "auth": auth, "retries": 0,
             "timeout_s": 20, "bmc_timeout_s": 60, "username_env": "BMC_USER",
             "password_env": "BMC_PASS", "bmcs": [{"host": "gpu001", "url": url}]}  # fmt: skip
    return source_config({**entry, **options}, kinds())


def _edit(fn):
    """A Rewrite that edits the answer's JSON."""

    def rewrite(body: bytes) -> bytes:
        doc = json.loads(body)
        fn(doc)
        return json.dumps(doc).encode()

    return Rewrite(rewrite)


def _session_bmc(location: str = f"{SESSIONS}/1"):
    """The proxy's answer to a session login: a token, and where the session is."""
    return Status(201, {"X-Auth-Token": TOKEN, "Location": location}, b"{}")


def _vectors(off: str) -> dict[str, tuple[str, object]]:
    """Each way a BMC's answer can send a client elsewhere: (auth, the proxy's rule)."""

    def on(path: str, fault, session: bool = True):
        def rule(seen):
            if session and seen.method == "POST" and seen.path == SESSIONS:
                return _session_bmc()
            return fault if seen.path.rstrip("/") == path.rstrip("/") else None

        return rule

    def member(doc):
        doc["Members"][0]["@odata.id"] = f"{off}/redfish/v1/Systems/437XR1138R2"

    def sessions_link(doc):
        doc["Links"]["Sessions"]["@odata.id"] = f"{off}{SESSIONS}"

    def link_only(doc):
        doc["Members"] = [{"@odata.id": f"{off}{ENTRIES}/3"}, {"@odata.id": f"{off}{ENTRIES}/4"}]

    def next_link(doc):
        doc["Members@odata.nextLink"] = f"{off}{ENTRIES}/page-2"

    def location(seen):
        if seen.method == "POST" and seen.path == SESSIONS:
            return _session_bmc(f"{off}{SESSIONS}/1")
        return None

    redirect = Status(302, {"Location": f"{off}/redfish/v1/Systems"})
    return {
        "root Links.Sessions elsewhere (session login)": (
            "session", on("/redfish/v1/", _edit(sessions_link), session=False)
        ),
        "absolute member @odata.id (basic)": (
            "basic", on("/redfish/v1/Systems", _edit(member), session=False)
        ),
        "absolute member @odata.id (session)": (
            "session", on("/redfish/v1/Systems", _edit(member))
        ),
        "session Location elsewhere (its DELETE)": ("session", location),
        "link-only expanded entries (session)": (
            "session", on(f"{ENTRIES}/page-2", _edit(link_only))
        ),
        "302 on Systems (session)": ("session", on("/redfish/v1/Systems", redirect)),
        "302 on Systems (basic)": ("basic", on("/redfish/v1/Systems", redirect, session=False)),
        "nextLink elsewhere (basic)": ("basic", on(ENTRIES, _edit(next_link), session=False)),
    }  # fmt: skip


VECTORS = list(_vectors("http://x"))


@pytest.mark.parametrize("vector", VECTORS)
def test_a_rogue_bmc_gets_no_credential_sent_to_another_host(bmc, creds, tmp_path, vector):
    with Listener() as elsewhere, FaultProxy(bmc.url) as proxy:
        auth, proxy.rule = _vectors(elsewhere.url)[vector]
        wh = Warehouse(tmp_path / "home")
        reports = pull(wh, [_redfish(proxy.url, auth)], T0, T1)
        assert elsewhere.requests == []  # nothing at all went there
        for secret in (PASSWORD, BASIC, TOKEN):
            assert secret not in elsewhere.seen_text()
        assert proxy.faults, "the rogue answer was not served"
        # the credentials did go to the BMC itself: the test is live
        sent = proxy.seen_text()
        assert (BASIC in sent) if auth == "basic" else (PASSWORD in sent or "Sessions" in vector)
    failed = [(r.target, r.error) for r in reports if r.status == "failed"]
    assert len(failed) == 1 and failed[0][0] == "gpu001", failed
    assert "not followed" in failed[0][1] and elsewhere.url.split("//")[1] in failed[0][1]
    assert wh.read("hw_events").height == 0  # a BMC is stored whole or not at all
    log = wh.read("pull_log").filter(pl.col("target") == "gpu001")
    assert log["status"].to_list() == ["failed"]


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(map(str, argv)))
    return code, out.getvalue(), err.getvalue()


def _write(home, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "sources.toml").write_text(text)


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJncHUtZmxlZXQiLCJyb2xlIjoicmVhZCJ9.Zm9vYmFyYmF6cXV4"
RANDOM_KEY = "aZ3kQ9vL2mX8pR4tW7yB1nC6"


@pytest.mark.parametrize(
    ("option", "secret"),
    [
        ('token_env = "{s}"', JWT),
        ('token_env = "{s}"', RANDOM_KEY),
        ('url = "http://admin:{s}@127.0.0.1:9"', "Pr0m-pass"),
        ('password_env = "{s}"', "hunter2 with spaces"),
    ],
)
def test_a_secret_written_into_sources_toml_is_refused_without_being_shown(
    tmp_path, option, secret
):
    home = tmp_path / "home"
    url = "" if option.startswith("url") else 'url = "http://127.0.0.1:9"\n'
    _write(
        home, f'[[source]]\nname = "tsdb"\nkind = "prometheus"\n{url}{option.format(s=secret)}\n'
    )
    for dry in ([], ["--dry-run"]):
        code, out, err = run_cli("--home", home, "pull", *dry)
        assert code == 2 and err.count("\n") == 1, err
        assert "tsdb" in err and option.split(" ")[0] in err
        assert secret not in out + err
        assert not secret.startswith("Pr0m") or "user name or password" in err


def test_a_bmc_url_with_userinfo_is_refused_without_being_shown(tmp_path, monkeypatch):
    home = tmp_path / "home"
    listing = tmp_path / "bmcs.txt"
    listing.write_text("gpu001 https://root:calvin-9@10.0.0.1\n")
    _write(home, f'[[source]]\nname = "bmcs"\nkind = "redfish"\nauth = "none"\n'
                 f'bmcs_file = "{listing}"\n')  # fmt: skip
    code, out, err = run_cli("--home", home, "pull", "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "user name or password" in err
    assert "calvin" not in out + err
    code, out, err = run_cli(
        "--home", home, "pull", "--since", "2026-01-01", "--until", "2026-01-02"
    )
    assert code == 1 and "calvin" not in out + err and "user name or password" in err
    [error] = Warehouse(home).read("pull_log")["error"].to_list()
    assert "calvin" not in error and "user name or password" in error
    # written in sources.toml itself: refused when the file is read
    bmcs = 'bmcs = [{host = "gpu001", url = "https://root:calvin-9@10.0.0.1"}]'
    _write(home, f'[[source]]\nname = "bmcs"\nkind = "redfish"\nauth = "none"\n{bmcs}\n')
    code, out, err = run_cli("--home", home, "pull", "--dry-run")
    assert code == 2 and "calvin" not in out + err and "bmcs holds a URL" in err


def test_a_bmc_echoing_the_login_body_does_not_put_the_password_in_pull_log(bmc, creds, tmp_path):
    def echo(seen):
        if seen.method == "POST" and seen.path == SESSIONS:
            message = f"login refused for {seen.body.decode()}"
            return Status(401, {"Content-Type": "application/json"},
                          json.dumps({"error": {"message": message}}).encode())  # fmt: skip
        return None

    home = tmp_path / "home"
    with FaultProxy(bmc.url, echo) as proxy:
        _write(home, f'[[source]]\nname = "bmcs"\nkind = "redfish"\nauth = "session"\n'
                     'username_env = "BMC_USER"\npassword_env = "BMC_PASS"\nretries = 0\n'
                     f'bmcs = [{{host = "gpu001", url = "{proxy.url}"}}]\n')  # fmt: skip
        code, out, err = run_cli(
            "--home", home, "pull", "--since", "2026-01-01", "--until", "2026-01-02"
        )
        assert PASSWORD in proxy.seen_text()  # the BMC was sent it, and echoed it
    assert code == 1 and "login refused for" in err and "HTTP 401" in err
    log = Warehouse(home).read("pull_log").filter(pl.col("status") == "failed")
    [error] = log["error"].to_list()
    assert "login refused for" in error
    for text in (error, out, err):
        assert PASSWORD not in text and json.dumps(PASSWORD)[1:-1] not in text


def test_command_prefix_environment_values_are_never_printed(tmp_path):
    secret = "jwt-for-slurmrestd-0c4e"
    home = tmp_path / "home"
    prefix = f'command_prefix = ["env", "SLURM_JWT={secret}", "false"]'
    _write(home, '[[source]]\nname = "slurm"\nkind = "slurm"\nmode = "parsable"\nevents = false\n'
                 f'{prefix}\nretries = 0\n')  # fmt: skip
    code, out, err = run_cli("--home", home, "pull", "--dry-run", "--since", "2026-01-01",
                             "--until", "2026-01-01T06:00")  # fmt: skip
    assert code == 0 and "SLURM_JWT=***" in out and secret not in out + err
    code, out, err = run_cli("--home", home, "pull", "--since", "2026-01-01",
                             "--until", "2026-01-01T06:00")  # fmt: skip
    assert code == 1 and "SLURM_JWT=***" in err and "exited 1" in err
    [error] = Warehouse(home).read("pull_log")["error"].to_list()
    assert "SLURM_JWT=***" in error
    assert secret not in out + err + error
