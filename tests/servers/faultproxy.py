"""A fault-injecting HTTP proxy and an off-host listener, for tests of the live sources against
real servers (Prometheus, the Redfish emulator) with the faults a network and a hostile or broken
server produce.

``FaultProxy(upstream, rule)`` forwards every request to ``upstream`` (a base URL) and answers
with what ``rule(request)`` returns: ``None`` (the upstream's answer unchanged) or a fault:

- ``Status(code, headers, body)``: an answer made here, the upstream not asked (503, 429 with
  ``Retry-After``, a 302 with ``Location``...);
- ``Drip(interval_s)``: the upstream's answer, its body sent one byte per ``interval_s``;
- ``Cut(keep)``: the upstream's headers (its Content-Length), then only ``keep`` bytes of the body,
  then the connection closed;
- ``Reset(keep)``: as ``Cut``, but the connection reset (RST) instead of closed;
- ``Rewrite(fn)``: the upstream's answer with its body replaced by ``fn(body)`` (a Thanos partial
  response, a series dropped, a link pointed off-host).

Every request the proxy saw is kept in ``requests`` (``Seen``: method, path with query, headers,
body), so a test asserts on what the client sent. ``Listener()`` answers every request with 200 and
``{}`` and keeps what it saw: the "other host" a credential must never reach. Both run in-process
on loopback in daemon threads; ``close()`` (or the context manager) stops them, cutting any drip.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def text(self) -> str:
        """Everything the request carried, as one string to search for a secret."""
        heads = "\n".join(f"{k}: {v}" for k, v in self.headers.items())
        return f"{self.method} {self.path}\n{heads}\n\n{self.body.decode(errors='replace')}"


@dataclass(frozen=True)
class Status:
    code: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(frozen=True)
class Drip:
    interval_s: float = 1.0


@dataclass(frozen=True)
class Cut:
    keep: int = 0


@dataclass(frozen=True)
class Reset:
    keep: int = 0


@dataclass(frozen=True)
class Rewrite:
    fn: Callable[[bytes], bytes]


Fault = Status | Drip | Cut | Reset | Rewrite
Rule = Callable[[Seen], Fault | None]


def no_faults(_: Seen) -> None:
    return None


def random_faults(rate: float, faults: list[Fault], seed: int = 0) -> Rule:
    """A rule that answers a share ``rate`` of requests with one of ``faults``, drawn with a
    seeded generator (the same requests in the same order meet the same faults)."""
    rng = random.Random(seed)
    lock = threading.Lock()

    def rule(_: Seen) -> Fault | None:
        with lock:
            return rng.choice(faults) if rng.random() < rate else None

    return rule


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Endpoint:
    """A loopback HTTP server in a daemon thread that keeps every request it saw."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler, Seen], None]):
        self.requests: list[Seen] = []
        self.stopping = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet: the tests assert on ``requests``
                pass

            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                seen = Seen(self.command, self.path, dict(self.headers.items()), self.rfile.read(n))
                endpoint.requests.append(seen)
                answer(self, seen)

            do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = _any

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def seen_text(self) -> str:
        return "\n\n".join(r.text() for r in self.requests)

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Listener(_Endpoint):
    """The other host: answers 200 ``{}`` to everything and keeps what it was sent."""

    def __init__(self):
        super().__init__(_answer_empty)


def _answer_empty(handler: BaseHTTPRequestHandler, _: Seen) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", "2")
    handler.end_headers()
    handler.wfile.write(b"{}")


class FaultProxy(_Endpoint):
    """Forwards to ``upstream``; ``rule`` (settable while running) picks each request's fault."""

    def __init__(self, upstream: str, rule: Rule = no_faults, timeout_s: float = 60.0):
        self.upstream = urlsplit(upstream)
        self.rule = rule
        self.timeout_s = timeout_s
        self.faults: list[tuple[str, Fault]] = []  # (path, fault) of every fault injected
        super().__init__(self._answer)

    def _forward(self, seen: Seen) -> tuple[int, list[tuple[str, str]], bytes]:
        conn_class = (
            http.client.HTTPSConnection
            if self.upstream.scheme == "https"
            else http.client.HTTPConnection
        )
        conn = conn_class(self.upstream.netloc, timeout=self.timeout_s)
        try:
            # the upstream answers uncompressed: a Rewrite edits the body itself, and the
            # Content-Encoding passed back on stays true of what is sent
            headers = {
                k: v
                for k, v in seen.headers.items()
                if k.lower() not in HOP_BY_HOP and k.lower() not in ("host", "accept-encoding")
            }
            conn.request(seen.method, seen.path, body=seen.body or None, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            kept = [
                (k, v)
                for k, v in resp.getheaders()
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"
            ]
            return resp.status, kept, body
        finally:
            conn.close()

    def _answer(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        fault = self.rule(seen)
        if fault is not None:
            self.faults.append((seen.path, fault))
        if isinstance(fault, Status):
            _send(handler, fault.code, list(fault.headers.items()), fault.body)
            return
        code, headers, body = self._forward(seen)
        if isinstance(fault, Rewrite):
            body = fault.fn(body)
        if isinstance(fault, Drip):
            _send_head(handler, code, headers, len(body))
            for i in range(len(body)):
                if self.stopping.wait(fault.interval_s):
                    break
                try:
                    handler.wfile.write(body[i : i + 1])
                    handler.wfile.flush()
                except OSError:
                    break
            handler.close_connection = True
            return
        if isinstance(fault, Cut | Reset):
            _send_head(handler, code, headers, len(body))
            handler.wfile.write(body[: fault.keep])
            handler.wfile.flush()
            if isinstance(fault, Reset):  # linger 0: close() sends RST, not FIN
                handler.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
            handler.close_connection = True
            return
        _send(handler, code, headers, body)


def _send_head(handler, code: int, headers: list[tuple[str, str]], length: int) -> None:
    handler.send_response(code)
    for k, v in headers:
        handler.send_header(k, v)
    handler.send_header("Content-Length", str(length))
    handler.end_headers()


def _send(handler, code: int, headers: list[tuple[str, str]], body: bytes) -> None:
    _send_head(handler, code, headers, len(body))
    if handler.command != "HEAD":
        handler.wfile.write(body)
