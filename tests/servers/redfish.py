"""Real Redfish servers for the pull tests: ``sushy-static`` serving the mockups of
tests/fixtures/redfish_mockup (one process per BMC, gpu002 over TLS with a certificate made here),
``sushy-emulator`` (its fake driver) enforcing basic auth from an htpasswd file, and a socket that
accepts connections and never answers. Each is polled until it answers, with a deadline, and
stopped on teardown. Without sushy-tools the tests are skipped, or fail when CI is set."""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

MOCKUP = Path(__file__).resolve().parent.parent / "fixtures" / "redfish_mockup"
START_TIMEOUT_S = 60.0  # a loaded 2-core machine starts a Python server slowly


@dataclass
class Server:
    url: str
    proc: subprocess.Popen
    log: Path  # what the server printed (sushy-static prints every request's headers)

    def printed(self) -> str:
        return self.log.read_text(errors="replace")


def binary(name: str) -> str:
    """The path of ``name`` (the venv's bin first); skip, or fail under CI, when absent."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        msg = f"{name} (sushy-tools) is not installed"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_answering(server: Server) -> None:
    import requests

    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if server.proc.poll() is not None:
            pytest.fail(
                f"{server.url}: server exited {server.proc.returncode}: {server.printed()[-500:]}"
            )
        try:
            with warnings.catch_warnings():  # the TLS server's certificate is not checked here
                warnings.simplefilter("ignore")
                if (
                    requests.get(f"{server.url}/redfish/v1/", timeout=2, verify=False).status_code
                    == 200
                ):
                    return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            pytest.fail(
                f"{server.url}: no answer within {START_TIMEOUT_S:g} s: {server.printed()[-500:]}"
            )
        time.sleep(0.1)


def _start(args: list[str], scheme: str, port: int, log: Path, cwd: Path | None = None) -> Server:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # request headers reach the log as they come
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    server = Server(f"{scheme}://127.0.0.1:{port}", proc, log)
    try:
        _wait_answering(server)
    except BaseException:
        stop(server)
        raise
    return server


def start_static(
    mockup: Path, workdir: Path, tls: tuple[Path, Path] | None = None, port: int | None = None
) -> Server:
    """``sushy-static`` serving ``mockup`` on a loopback port (a free one unless given; HTTPS
    with ``tls``)."""
    port = port or free_port()
    args = [binary("sushy-static"), "-i", "127.0.0.1", "-p", str(port), "-m", str(mockup)]
    if tls:
        args += ["-c", str(tls[0]), "-k", str(tls[1])]
    return _start(args, "https" if tls else "http", port, workdir / f"{mockup.name}-{port}.log")


def start_emulator(workdir: Path, user: str, password: str) -> Server:
    """``sushy-emulator`` (fake driver) on a free port, answering only ``user:password`` (basic)."""
    import bcrypt

    port = free_port()
    htpasswd = workdir / "htpasswd"
    htpasswd.write_text(
        f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
    )
    conf = workdir / "emulator.conf"
    conf.write_text(f"SUSHY_EMULATOR_AUTH_FILE = {str(htpasswd)!r}\n")
    args = [
        binary("sushy-emulator"),
        "--fake",
        "-i",
        "127.0.0.1",
        "-p",
        str(port),
        "--config",
        str(conf),
    ]
    return _start(args, "http", port, workdir / f"emulator-{port}.log", cwd=workdir)


def self_signed(workdir: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (its own CA) and its key, made with openssl."""
    cert, key = workdir / "bmc.crt", workdir / "bmc.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def stop(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()


@dataclass
class Silent:
    url: str
    most_open: int = 0  # the most connections open at once


@contextmanager
def silent_server() -> Iterator[Silent]:
    """A real listening socket that accepts connections, reads what clients send and never
    answers: a hung BMC. Counts the connections open at once."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.setblocking(False)
    silent = Silent(f"http://127.0.0.1:{listener.getsockname()[1]}")
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            # clients' closes before new connections: a walk that gave up closed its socket
            # before the next walk connected, so its close is counted first
            events = sorted(sel.select(timeout=0.05), key=lambda e: e[0].fileobj is listener)
            for key, _ in events:
                if key.fileobj is listener:
                    try:
                        conn, _ = listener.accept()
                    except OSError:
                        continue
                    sel.register(conn, selectors.EVENT_READ)
                    silent.most_open = max(silent.most_open, len(sel.get_map()) - 1)
                    continue
                try:
                    data = key.fileobj.recv(65536)
                except OSError:
                    data = b""
                if not data:  # the client gave up
                    sel.unregister(key.fileobj)
                    key.fileobj.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield silent
    finally:
        done.set()
        thread.join(timeout=5)
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        sel.close()


@dataclass
class Bmcs:
    """The running mockup BMCs: host -> server, and the CA that gpu002's certificate is."""

    servers: dict[str, Server]
    ca: Path

    def url(self, host: str) -> str:
        return self.servers[host].url


@contextmanager
def running_bmcs(workdir: Path) -> Iterator[Bmcs]:
    """gpu001 and loop over HTTP, gpu002 over HTTPS, each its own sushy-static process."""
    binary("sushy-static")
    cert, key = self_signed(workdir)
    servers: dict[str, Server] = {}
    try:
        servers["gpu001"] = start_static(MOCKUP / "gpu001", workdir)
        servers["gpu002"] = start_static(MOCKUP / "gpu002", workdir, tls=(cert, key))
        servers["loop"] = start_static(MOCKUP / "loop", workdir)
        yield Bmcs(servers, cert)
    finally:
        for server in servers.values():
            stop(server)
