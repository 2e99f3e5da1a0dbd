"""HTTP for the live sources: ``session`` (a ``requests`` session that follows no redirect and
retries nothing by itself) and ``request`` (one request, retried on transient failures, each try
held to one deadline that covers its whole answer). Failures are ``HttpError``: one line.

requests' and urllib3's timeouts bound each socket operation, not the answer: a server that sends
a byte a second never trips them. So one watcher thread shuts a try's connection down when the
try's deadline passes (urllib3's own advice for a wall-clock limit), and what was read by then is
never taken for the whole answer. A try ends within ``src.timeout_s``, or within the caller's
``deadline`` when that comes first (a BMC's whole walk). Transient failures (no connection, an
answer cut short or reset, no whole answer in time, HTTP 429 and 5xx) are tried ``src.retries``
more times after a backoff (0.5 s doubled each time) or the server's ``Retry-After``; no wait is
longer than ``src.timeout_s``: a server that asks for a longer one fails the request at once, and
the next pull tries again. An answer the caller finds partial (``partial``: a Thanos Query whose
store did not answer) is transient too. Redirects are answers like any other: the caller decides
(the sources refuse them, so credentials never go where a server points).
"""

from __future__ import annotations

import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable
from functools import cache

from sources.base import BACKOFF_S
from sources.base import SourceConfig

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0


class HttpError(Exception):
    """A request that failed, after its retries, as one line. ``late``: the caller's deadline
    passed; ``tls``: the TLS handshake failed (not retried)."""

    def __init__(self, message: str, late: bool = False, tls: bool = False):
        super().__init__(message)
        self.late, self.tls = late, tls


class _Try:
    """One try of a request: its deadline, the connection it uses, whether the deadline cut it."""

    __slots__ = ("conn", "cut", "deadline", "done", "lock")

    def __init__(self, deadline: float):
        self.deadline, self.conn, self.cut, self.done = deadline, None, False, False
        self.lock = threading.Lock()

    def use(self, conn) -> None:
        with self.lock:
            self.conn = conn
            if self.cut:  # connected after its deadline: cut at once
                _shut(conn)

    def expire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.cut = True
            if self.conn is not None:
                _shut(self.conn)

    def finish(self) -> bool:
        """Whether the try was cut at its deadline; from now on it is not."""
        with self.lock:
            self.done = True
            return self.cut


def _shut(conn) -> None:
    sock = getattr(conn, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # the blocked read returns; the pool drops the socket
        except OSError:
            pass


class _Watcher:
    """One daemon thread that expires each try at its deadline."""

    def __init__(self):
        self._heap: list[tuple[float, int, _Try]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, t: _Try) -> None:
        with self._cond:
            heapq.heappush(self._heap, (t.deadline, next(self._seq), t))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="deadlines", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and self._heap[0][0] <= now:
                    heapq.heappop(self._heap)[2].expire()
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


_WATCHER = _Watcher()
_current = threading.local()  # .attempt: the try this thread is making


@cache
def _adapter_class():
    """A requests adapter whose connections tell the current try which socket to cut."""
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection
    from urllib3.connection import HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool
    from urllib3.connectionpool import HTTPSConnectionPool

    def watched(base):
        class Watched(base):
            def connect(self):
                super().connect()
                _register(self)

            def request(self, *args, **kwargs):
                _register(self)  # a kept-alive connection is not connected again
                return super().request(*args, **kwargs)

        Watched.__name__ = Watched.__qualname__ = f"Watched{base.__name__}"
        return Watched

    pools = {
        scheme: type(f"Watched{pool.__name__}", (pool,), {"ConnectionCls": watched(conn)})
        for scheme, pool, conn in (
            ("http", HTTPConnectionPool, HTTPConnection),
            ("https", HTTPSConnectionPool, HTTPSConnection),
        )
    }

    class Adapter(HTTPAdapter):
        def init_poolmanager(self, *args, **kwargs):
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy, **kwargs):
            manager = super().proxy_manager_for(proxy, **kwargs)
            if not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = pools
            return manager

    return Adapter


def _register(conn) -> None:
    attempt = getattr(_current, "attempt", None)
    if attempt is not None:
        attempt.use(conn)


def session(
    src: SourceConfig,
    user_option: str = "username_env",
    password_option: str = "password_env",
    token_option: str = "token_env",
    verify: bool | str = True,
):
    """A ``requests`` session for ``src`` (for ``request``): bearer or basic auth from the
    environment variables the options name, TLS verification as given (a CA bundle path, or
    False), no retries of its own."""
    import requests

    class Session(requests.Session):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):
            out = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if (
                verify is None and self.verify is not True
            ):  # REQUESTS_CA_BUNDLE must not undo verify_tls
                out["verify"] = self.verify
            return out

    s = Session()
    adapter = _adapter_class()(pool_maxsize=64)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.verify = verify
    token = src.secret(token_option) if token_option in src.options else None
    if token:
        s.headers["Authorization"] = f"Bearer {token}"
    elif user_option in src.options and src.options.get(user_option):
        s.auth = (src.secret(user_option) or "", src.secret(password_option) or "")
    return s


def request(
    src: SourceConfig,
    http,
    method: str,
    url: str,
    deadline: float | None = None,
    partial: Callable[[object], str | None] | None = None,
    **kw,
):
    """The answer to ``method url`` on session ``http``, read whole (see the module's docstring),
    whatever its status once the retries are spent; ``deadline``: a ``time.monotonic()`` no try
    outlives. ``partial``: why a successful answer says it lacks data (a store of a Thanos Query
    did not answer), or None: such an answer is transient too, tried again like a 503, and
    once the retries are spent a HttpError saying why. HttpError when no answer came."""
    import requests

    why = "no time left"
    for attempt in range(src.retries + 1):
        now = time.monotonic()
        stop, late = now + src.timeout_s, False
        if deadline is not None and deadline <= stop:
            stop, late = deadline, True
        if stop <= now:
            raise HttpError(why, late=True)
        limit = stop - now
        this = _Try(stop)
        _WATCHER.watch(this)
        _current.attempt = this
        try:
            answer = http.request(method, url, timeout=limit, allow_redirects=False, **kw)
            error = None
        except requests.RequestException as exc:
            answer, error = None, exc
        finally:
            _current.attempt = None
        if this.finish():  # what was read by the deadline is not the whole answer
            why = f"no whole answer within {limit:g} s"
            if late:
                raise HttpError(why, late=True)
        elif error is not None:
            why, transient, tls = _describe(error, limit)
            if tls or not transient:
                raise HttpError(why, tls=tls)
        elif answer.status_code in RETRY_STATUSES and attempt < src.retries:
            why = f"HTTP {answer.status_code} {answer.reason}"
            asked = _retry_after(answer)
            if asked is not None and asked > src.timeout_s:
                raise HttpError(
                    f"{why}: the server asks to retry after {asked:g} s, longer than timeout_s "
                    f"({src.timeout_s:g} s): not waited for, the next pull tries again"
                )
            _wait(asked if asked is not None else _backoff(src, attempt), deadline, why)
            continue
        else:
            lacking = partial(answer) if partial is not None and answer.status_code < 300 else None
            if lacking is None:
                return answer
            why = lacking
        if attempt < src.retries:
            _wait(_backoff(src, attempt), deadline, why)
    raise HttpError(why)


def _backoff(src: SourceConfig, attempt: int) -> float:
    return min(BACKOFF_S * 2**attempt, MAX_BACKOFF_S, src.timeout_s)


def _wait(seconds: float, deadline: float | None, why: str) -> None:
    if deadline is not None and time.monotonic() + seconds >= deadline:
        raise HttpError(why, late=True)
    time.sleep(seconds)


def _retry_after(answer) -> float | None:
    """The answer's ``Retry-After`` in seconds (a number or an HTTP date), else None."""
    from urllib3.exceptions import InvalidHeader
    from urllib3.util.retry import Retry

    value = answer.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(Retry().parse_retry_after(value), 0.0)
    except (InvalidHeader, ValueError, OverflowError):
        return None


def _describe(exc: Exception, limit: float) -> tuple[str, bool, bool]:
    """(one line, transient, a TLS failure) for a requests failure: never the tuple of its
    arguments."""
    import requests
    from urllib3.exceptions import ConnectTimeoutError
    from urllib3.exceptions import NewConnectionError
    from urllib3.exceptions import ReadTimeoutError

    causes = list(_causes(exc))
    if isinstance(exc, requests.exceptions.SSLError):
        trust = "CERTIFICATE_VERIFY_FAILED" in str(exc)
        return ("certificate not trusted" if trust else f"TLS failed ({_root(exc)})"), False, True
    # NewConnectionError is a ConnectTimeoutError in urllib3: told apart first
    if any(isinstance(c, NewConnectionError) for c in causes) or isinstance(
        exc, requests.exceptions.ProxyError
    ):
        return f"cannot connect ({_root(exc)})", True, False
    if any(isinstance(c, (ConnectTimeoutError, requests.ConnectTimeout)) for c in causes):
        return f"cannot connect (no answer within {limit:g} s)", True, False
    if any(isinstance(c, (ReadTimeoutError, TimeoutError, requests.Timeout)) for c in causes):
        return f"no answer within {limit:g} s", True, False
    if isinstance(exc, requests.exceptions.ChunkedEncodingError):
        return f"answer cut short ({_cut(causes)})", True, False
    if isinstance(exc, requests.exceptions.ContentDecodingError):
        return f"answer not decodable ({_root(exc)})", True, False
    if isinstance(exc, requests.ConnectionError):
        return f"connection lost before an answer ({_cut(causes)})", True, False
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}", False, False


def _causes(exc: BaseException):
    """``exc`` and every exception in its arguments, cause and context, once each."""
    seen, todo = set(), [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
        todo += [c for c in (e.__cause__, e.__context__, getattr(e, "reason", None))
                 if isinstance(c, BaseException)]  # fmt: skip


def _cut(causes: list[BaseException]) -> str:
    """How an answer ended early: the bytes it had of those announced, a reset, a close."""
    for c in causes:
        partial, expected = getattr(c, "partial", None), getattr(c, "expected", None)
        if partial is not None and expected is not None:
            got = len(partial) if isinstance(partial, bytes) else int(partial)
            return f"{got} of {got + int(expected)} bytes"
    if any(isinstance(c, ConnectionResetError) for c in causes):
        return "connection reset"
    return "connection closed"


def _root(exc: BaseException) -> str:
    """The last words of a connection error's reason, e.g. ``[Errno 111] Connection refused``."""
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return " ".join(str(reason or exc).rsplit(": ", 1)[-1].split())
