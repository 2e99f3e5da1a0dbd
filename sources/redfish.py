"""Redfish BMCs: every log service's entries (SEL and event logs under Systems and Managers) and
every chassis' sensor readings, read per BMC into documents for the ``redfish`` (-> hw_events)
and ``redfish-sensors`` (-> bmc_sensors) parsers.

Takes options ``bmcs`` (``[{host = "gpu001", url = "https://10.0.0.1"}, ...]``) and/or
``bmcs_file`` (``host url`` lines, ``#`` comments), an ``auth`` (``session``: POST to the
SessionService, ``X-Auth-Token`` on every request, the session deleted at the end; ``basic``; or
``none``) with credentials from ``username_env`` / ``password_env``, ``verify_tls`` (true, false
or a CA bundle path), ``concurrency`` (BMCs read at once), ``bmc_timeout_s`` (a BMC's whole walk),
``max_pages`` (per collection) and ``logs`` (the log service ids to read, e.g. ``["Sel"]`` to
leave out a Lifecycle log of tens of thousands of entries; all when empty). Returns, per BMC,
every page it read or one ``Failure``.

- Walk: ``/redfish/v1`` -> ``Systems/*`` and ``Managers/*`` -> ``LogServices/*`` -> ``Entries``,
  and ``Chassis/*`` -> its ``Sensors`` collection, else (older services) ``Thermal`` and ``Power``
  (a service that has both reports the same sensors twice under different names). Every
  collection is followed through ``Members@odata.nextLink`` until a page has none; a link seen
  twice in one collection, or more than ``max_pages`` pages, fails the BMC (a loop, not a hang).
  Members that are only links (no ``$expand`` asked: many BMCs ignore it) are read one by one and
  put in their page, so a document holds what the page would hold expanded.
- Not windowed: a BMC keeps its log (until it wraps) and offers no time query, so every pull
  reads every entry and the warehouse's record keys store each once; readings are a snapshot
  stamped with the time they were read. CHUNK is therefore long enough that a pull is one window.
- A BMC is stored whole or not at all: its documents are returned only when its walk ends, within
  ``bmc_timeout_s`` from its first request (no request outlives that deadline, however slowly
  the BMC answers: ``sources.http_client``; a BMC still running at its deadline is reported at
  once). An unreachable, refusing or failing BMC is a ``Failure(host, one line)``; the others
  are still read.
- Every request stays on the scheme, host and port of the BMC's configured url: a link
  (``@odata.id``, ``Links.Sessions``, a nextLink, the session's ``Location``) elsewhere, or a
  redirect, is not followed and fails that BMC, so its credentials (basic auth, the session
  login, ``X-Auth-Token``) never reach another host.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from urllib.parse import urljoin
from urllib.parse import urlsplit

from sources.base import Document
from sources.base import Failure
from sources.base import SourceConfig
from sources.base import SourceError
from sources.base import Window
from sources.http_client import HttpError
from sources.http_client import request as http_request
from sources.http_client import session as http_session

KIND = "redfish"
OPTIONS = {
    "bmcs": [],  # [{host = "gpu001", url = "https://10.0.0.1"}, ...]
    "bmcs_file": "",  # or/and a file of "host url" lines
    "auth": "session",  # session | basic | none
    "username_env": "",  # names of environment variables, never the credentials
    "password_env": "",
    "verify_tls": True,  # true | false | path of a CA bundle
    "concurrency": 64,  # BMCs read at once: 12,500 in an hour at 0.5 s a request
    "bmc_timeout_s": 120.0,  # one BMC's whole walk
    "max_pages": 1000,  # per collection: more is taken for a nextLink loop
    "logs": [],  # LogService ids to read (e.g. ["SEL", "EventLog"]); empty: every log service
}
OPTION_TYPES = {"verify_tls": (bool, str)}  # true, false or the path of a CA bundle
CHUNK = timedelta(days=36500)  # not windowed (see above): one window per pull
OVERLAP = timedelta(0)

ROOT = "/redfish/v1/"
SESSIONS = "/redfish/v1/SessionService/Sessions"  # where the root does not link its own
AUTHS = ("session", "basic", "none")
LOGS_FORMAT, SENSORS_FORMAT = "redfish", "redfish-sensors"


@dataclass(frozen=True)
class Bmc:
    host: str
    url: str  # scheme://address[:port], no path


class BmcError(Exception):
    """One BMC could not be read whole: one line, reported as its Failure."""


def bmcs(src: SourceConfig) -> list[Bmc]:
    """The BMCs of ``bmcs`` and ``bmcs_file``, checked (a host listed twice is a mistake)."""
    out: list[Bmc] = []
    listed = src.options["bmcs"]
    if not isinstance(listed, list):
        raise SourceError(f"{src.name}: bmcs is a list of {{host = ..., url = ...}} tables")
    for i, entry in enumerate(listed, start=1):
        if not isinstance(entry, dict) or not entry.get("host") or not entry.get("url"):
            raise SourceError(f"{src.name}: bmcs entry {i} needs a host and a url")
        out.append(_bmc(src, str(entry["host"]), str(entry["url"]), f"bmcs entry {i}"))
    if src.options["bmcs_file"]:
        path = Path(src.options["bmcs_file"]).expanduser()
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(
                f"{src.name}: bmcs_file {path}: {getattr(exc, 'strerror', None) or exc}"
            ) from None
        for n, line in enumerate(text.splitlines(), start=1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 2:
                raise SourceError(
                    f"{src.name}: {path} line {n}: expected 'host url', got {line.strip()!r}"
                )
            out.append(_bmc(src, fields[0], fields[1], f"{path} line {n}"))
    seen: set[str] = set()
    for b in out:
        if b.host in seen:
            raise SourceError(f"{src.name}: BMC host {b.host} is listed twice")
        seen.add(b.host)
    if not out:
        raise SourceError(f"{src.name}: no BMCs: set bmcs or bmcs_file")
    return out


def _bmc(src: SourceConfig, host: str, url: str, where: str) -> Bmc:
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise SourceError(
            f"{src.name}: {where}: the url holds a user name or password (user:password@, not "
            "shown): remove it; credentials come from username_env / password_env"
        )
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SourceError(f"{src.name}: {where}: url {url!r} is not http(s)://address[:port]")
    return Bmc(host, f"{parts.scheme}://{parts.netloc}")


def _checked(src: SourceConfig) -> None:
    o = src.options
    if o["auth"] not in AUTHS:
        raise SourceError(f"{src.name}: auth {o['auth']!r} is not one of {', '.join(AUTHS)}")
    if o["auth"] != "none" and not (o["username_env"] and o["password_env"]):
        raise SourceError(f"{src.name}: auth {o['auth']} needs username_env and password_env")
    verify = o["verify_tls"]
    if not isinstance(verify, (bool, str)) or verify == "":
        raise SourceError(f"{src.name}: verify_tls is true, false or the path of a CA bundle")
    if isinstance(verify, str) and not Path(verify).expanduser().exists():
        raise SourceError(f"{src.name}: verify_tls: no CA bundle at {verify}")
    if not isinstance(o["logs"], list):
        raise SourceError(f'{src.name}: logs is a list of log service ids, e.g. ["SEL"]')
    for key in ("concurrency", "max_pages"):
        if isinstance(o[key], bool) or not isinstance(o[key], int) or o[key] < 1:
            raise SourceError(f"{src.name}: {key} is a whole number >= 1")
    if (
        isinstance(o["bmc_timeout_s"], bool)
        or not isinstance(o["bmc_timeout_s"], (int, float))
        or o["bmc_timeout_s"] <= 0
    ):
        raise SourceError(f"{src.name}: bmc_timeout_s is a number of seconds > 0")


def plan(src: SourceConfig, window: Window) -> list[str]:
    """Per BMC, where its walk starts and how it signs in (no request sent, no credential read)."""
    _checked(src)
    auth = {
        "session": f"POST {SESSIONS} (X-Auth-Token; DELETE at the end), ",
        "basic": "basic auth, ",
        "none": "",
    }[src.options["auth"]]
    walk = (
        "Systems/*/LogServices/*/Entries, Managers/*/LogServices/*/Entries, "
        "Chassis/*/Sensors (else Thermal, Power), following Members@odata.nextLink"
    )
    return [f"{b.host}: GET {b.url}{ROOT} then {auth}{walk}" for b in bmcs(src)]


def fetch(src: SourceConfig, window: Window) -> Iterator[Document | Failure]:
    """Every BMC's documents, or its Failure, in the order the BMCs finish."""
    _checked(src)
    targets = bmcs(src)
    credentials = None
    if src.options["auth"] != "none":  # read once: an unset variable fails the whole source
        credentials = (src.secret("username_env"), src.secret("password_env"))
    if src.options["verify_tls"] is False:
        import urllib3

        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # asked for
    limit = float(src.options["bmc_timeout_s"])
    finished: queue.SimpleQueue = queue.SimpleQueue()  # (BMC index, its result), as they end
    running: dict[int, float] = {}  # BMC index -> the deadline of its walk, while it runs
    lock = threading.Lock()

    def read(i: int) -> None:
        deadline = time.monotonic() + limit
        with lock:
            running[i] = deadline
        try:
            finished.put((i, read_bmc(src, targets[i], credentials, deadline)))
        except BaseException as exc:  # noqa: BLE001 - a bug: raised again in the caller's thread
            finished.put((i, exc))

    pool = ThreadPoolExecutor(
        max_workers=min(src.options["concurrency"], len(targets)),
        thread_name_prefix=f"redfish-{src.name}",
    )
    try:
        for i in range(len(targets)):
            pool.submit(read, i)
        left, given_up = len(targets), set()
        while left:
            with lock:
                due = min(running.values(), default=time.monotonic() + 0.25)
            try:
                i, result = finished.get(timeout=min(0.25, max(0.0, due - time.monotonic())))
            except queue.Empty:
                i = None
            if i is not None and i not in given_up:
                with lock:
                    running.pop(i, None)
                left -= 1
                if isinstance(result, BaseException):
                    raise result
                yield from [result] if isinstance(result, Failure) else result
            now = time.monotonic()
            with lock:  # still running past its deadline: reported now, its result ignored
                late = [j for j, deadline in running.items() if now >= deadline]
                for j in late:
                    del running[j]
            for j in late:
                given_up.add(j)
                left -= 1
                yield Failure(targets[j].host, Client.late_line(limit))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def read_bmc(
    src: SourceConfig, bmc: Bmc, credentials: tuple[str, str] | None, deadline: float
) -> list[Document] | Failure:
    """One BMC's documents, or its Failure."""
    client = Client(src, bmc, credentials, deadline)
    try:
        return client.walk()
    except BmcError as exc:
        return Failure(bmc.host, _one_line(str(exc)))
    finally:
        client.close()


def _one_line(text: str) -> str:
    return " ".join(text.split())


class Client:
    """One BMC's HTTP session: requests cut to its deadline, pages followed, links expanded."""

    def __init__(
        self, src: SourceConfig, bmc: Bmc, credentials: tuple[str, str] | None, deadline: float
    ):
        self.src, self.bmc, self.deadline = src, bmc, deadline
        self.auth = src.options["auth"]
        self.credentials = credentials
        verify = src.options["verify_tls"]
        # given with every request too: requests lets REQUESTS_CA_BUNDLE override session.verify
        self.verify = str(Path(verify).expanduser()) if isinstance(verify, str) else verify
        self.http = http_session(src, user_option="", verify=self.verify)
        if self.auth == "basic" and credentials:
            self.http.auth = credentials
        self.session_url: str | None = None

    # -- requests -------------------------------------------------------------------------
    def request(self, method: str, path: str, **kw):
        """The answer to ``method path`` (a path or a link on the BMC), within the BMC's deadline;
        a failure, an error status or a redirect is a BmcError."""
        url = self.url(path)
        try:
            r = http_request(
                self.src, self.http, method, url, deadline=self.deadline, verify=self.verify, **kw
            )
        except HttpError as exc:
            if exc.late:  # cut short by the BMC's deadline: the line fetch() reports for it too
                raise BmcError(self.late()) from None
            hint = " (set verify_tls to the BMC's CA bundle, or false)" if exc.tls else ""
            raise BmcError(f"{url}: {exc}{hint}") from None
        if 300 <= r.status_code < 400:
            raise BmcError(
                f"{url}: HTTP {r.status_code} redirects to {r.headers.get('Location', '(nowhere)')}"
                ": not followed (credentials go only to the BMC's own url)"
            )
        if r.status_code >= 400:
            raise BmcError(f"{url}: HTTP {r.status_code} {r.reason}: {_error_text(r)}")
        return r

    def url(self, link: str) -> str:
        """``link`` (a path, or a URL) as a URL on the BMC's own scheme, host and port; a link
        anywhere else (or with a user name in it) is a BmcError: it is never followed, so the
        BMC's credentials never go where a rogue or compromised BMC points."""
        target = urlsplit(urljoin(self.bmc.url + "/", link))
        if "@" in target.netloc or _origin(target) != _origin(urlsplit(self.bmc.url)):
            where = f"{target.scheme}://{target.netloc.rpartition('@')[2]}"
            raise BmcError(
                f"{self.bmc.url}: a link to another host ({where}): not followed (credentials go "
                "only to the BMC's own url)"
            )
        return self.bmc.url + _local(target._replace(path=target.path or "/").geturl())

    def late(self) -> str:
        return self.late_line(float(self.src.options["bmc_timeout_s"]))

    @staticmethod
    def late_line(limit: float) -> str:
        return f"not read whole within {limit:g} s (bmc_timeout_s)"

    def get(self, path: str) -> tuple[bytes, object | None]:
        """The body at ``path`` and its JSON (None when it is not JSON)."""
        data = self.request("GET", path).content
        try:
            return data, json.loads(data)
        except (ValueError, UnicodeDecodeError):
            return data, None

    def get_json(self, path: str) -> dict:
        _, doc = self.get(path)
        if not isinstance(doc, dict):
            raise BmcError(f"{urljoin(self.bmc.url, path)}: not a Redfish JSON resource")
        return doc

    # -- session --------------------------------------------------------------------------
    def login(self, root: dict) -> None:
        if self.auth != "session":
            return
        path = _link(root.get("Links"), "Sessions") or SESSIONS
        user, password = self.credentials
        r = self.request("POST", path, json={"UserName": user, "Password": password})
        token = r.headers.get("X-Auth-Token")
        if not token:
            raise BmcError(
                f"{urljoin(self.bmc.url, path)}: session login answered HTTP "
                f'{r.status_code} without an X-Auth-Token (try auth = "basic")'
            )
        self.http.headers["X-Auth-Token"] = token
        location = r.headers.get("Location")
        self.session_url = self.url(location) if location else None  # deleted there at the end

    def close(self) -> None:
        """Delete the session (a BMC has few session slots); a failed delete is left to the
        session's own idle timeout and does not fail the read."""
        try:
            if self.session_url and time.monotonic() < self.deadline:
                self.request("DELETE", self.session_url)
        except BmcError:
            pass
        finally:
            self.http.close()

    # -- walk -----------------------------------------------------------------------------
    def walk(self) -> list[Document]:
        root = self.get_json(ROOT)
        self.login(root)
        wanted = {str(log).lower() for log in self.src.options["logs"]}
        docs: list[Document] = []
        for top in ("Systems", "Managers"):
            for member in self.members(_link(root, top)):
                services = _link(self.get_json(member), "LogServices")
                for service in self.members(services):
                    if wanted and service.rstrip("/").rsplit("/", 1)[-1].lower() not in wanted:
                        continue
                    entries = _link(self.get_json(service), "Entries")
                    if entries:
                        docs += self.documents(entries, LOGS_FORMAT)
        for chassis in self.members(_link(root, "Chassis")):
            ch = self.get_json(chassis)
            sensors = _link(ch, "Sensors")
            if sensors:
                docs += self.documents(sensors, SENSORS_FORMAT)
            else:
                for name in ("Thermal", "Power"):
                    if _link(ch, name):
                        docs += self.documents(_link(ch, name), SENSORS_FORMAT)
        return docs

    def pages(self, path: str | None) -> Iterator[tuple[str, bytes, object | None]]:
        """(path, body, JSON) of each page of the collection at ``path``, through its
        nextLinks; a loop or too many pages is a BmcError."""
        seen: set[str] = set()
        while path:
            if path in seen:
                raise BmcError(
                    f"{urljoin(self.bmc.url, path)}: Members@odata.nextLink loops "
                    "back to a page already read"
                )
            if len(seen) >= self.src.options["max_pages"]:
                raise BmcError(
                    f"{urljoin(self.bmc.url, path)}: more than "
                    f"{self.src.options['max_pages']} pages (max_pages)"
                )
            seen.add(path)
            data, doc = self.get(path)
            yield path, data, doc
            link = _next_link(doc)
            path = _local(self.url(urljoin(path, link))) if link else None

    def members(self, path: str | None) -> list[str]:
        """The member links of a navigation collection (Systems, LogServices ...)."""
        out: list[str] = []
        for page_path, _, doc in self.pages(path):
            if not isinstance(doc, dict) or not isinstance(doc.get("Members"), list):
                raise BmcError(f"{urljoin(self.bmc.url, page_path)}: not a Redfish collection")
            out += [link for link in map(_odata_id, doc["Members"]) if link]
        return out

    def documents(self, path: str, fmt: str) -> list[Document]:
        """One document per page of the collection (or the one resource) at ``path``; members
        that are only links are read and put in their page."""
        out = []
        for page_path, data, doc in self.pages(path):
            members = doc.get("Members") if isinstance(doc, dict) else None
            if isinstance(members, list) and any(_only_link(m) for m in members):
                expanded = [self.get_json(m["@odata.id"]) if _only_link(m) else m for m in members]
                data = json.dumps({**doc, "Members": expanded}).encode()
            # not JSON: the parser quarantines it with its reason, nothing silently lost
            out.append(
                Document(
                    name=f"pull://{self.src.name}/{self.bmc.host}{page_path}",
                    data=data,
                    format=fmt,
                    host=self.bmc.host,
                    time=datetime.now(UTC).replace(tzinfo=None, microsecond=0)
                    if fmt == SENSORS_FORMAT
                    else None,
                )
            )
        return out


def _odata_id(obj: object) -> str | None:
    oid = obj.get("@odata.id") if isinstance(obj, dict) else None
    return oid if isinstance(oid, str) and oid else None


def _link(obj: object, key: str) -> str | None:
    """``obj[key]["@odata.id"]``, else None."""
    return _odata_id(obj.get(key) if isinstance(obj, dict) else None)


def _local(link: str) -> str:
    """A link as a path on its BMC (``https://10.0.0.1/redfish/v1/X?$skip=50`` ->
    ``/redfish/v1/X?$skip=50``): page names and the loop guard do not depend on how it is
    written."""
    parts = urlsplit(link)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def _only_link(member: object) -> bool:
    return (
        isinstance(member, dict)
        and "@odata.id" in member
        and set(member) <= {"@odata.id", "@odata.type"}
    )


def _next_link(doc: object) -> str | None:
    if not isinstance(doc, dict):
        return None
    link = doc.get("Members@odata.nextLink") or doc.get("@odata.nextLink")
    return link if isinstance(link, str) and link else None


def _error_text(response) -> str:
    """A Redfish error's message (``{"error": {"message": ...}}``), else the body's start."""
    try:
        error = response.json().get("error", {})
        info = error.get("@Message.ExtendedInfo") or [{}]
        message = error.get("message") or info[0].get("Message")
    except (ValueError, AttributeError, TypeError, IndexError):
        message = None
    return str(message)[:200] if message else response.text[:200]


def _origin(parts) -> tuple[str, str, int | None]:
    """(scheme, host, port) of a split URL, the port filled in for the scheme."""
    try:
        port = parts.port
    except ValueError:  # not a port: no origin of the BMC's
        return ("", "", None)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return (parts.scheme.lower(), (parts.hostname or "").lower(), port or default)
