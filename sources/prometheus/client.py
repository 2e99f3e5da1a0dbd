"""The HTTP side of the Prometheus source: requests to the TSDB's API, its answers decoded
or refused with its own reason, an answer that may lack data asked again, and the TSDB's clock
and range-selector semantics."""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import orjson

from sources import http_client
from sources.base import SourceConfig
from sources.base import SourceError
from sources.http_client import HttpError
from sources.http_client import session as http_session

SUCCESS = b'{"status":"success"'  # how Prometheus, Thanos, Mimir and VictoriaMetrics begin one


def label_values(src: SourceConfig, session, label: str, params: dict) -> list[str]:
    values = get(src, session, f"/api/v1/label/{label}/values", params)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SourceError(f"{src.name}: the values of label {label} are not a list of strings")
    return values


def range_closed(src: SourceConfig, session) -> bool:
    given = src.options["range_closed"]
    if isinstance(given, bool):
        return given
    try:
        version = get(src, session, "/api/v1/status/buildinfo", {})["version"]
        return int(str(version).split(".")[0]) < 3
    except (SourceError, KeyError, TypeError, ValueError):
        return True  # a store that does not say: Prometheus 2 semantics


def get(src, session, path: str, params: dict):
    data = decoded(src, request(src, session, "GET", path, params)).get("data")
    if not isinstance(data, (list, dict)):  # {"status":"success","data":null}
        raise SourceError(
            f"{src.name}: {base_url(src)}{path}: an answer without data ({data!r:.40})"
        )
    return data


def post(src, session, path: str, form: dict) -> bytes:
    return request(src, session, "POST", path, form)


def request(src: SourceConfig, session, method: str, path: str, params: dict) -> bytes:
    """The body of a successful answer, else SourceError with Prometheus' own reason. A redirect
    is not followed (credentials go only to ``url``); an answer that says it may lack data is
    tried again (``incomplete``)."""
    url = base_url(src) + path
    try:
        r = http_client.request(
            src,
            session,
            method,
            url,
            partial=incomplete,
            **({"params": params} if method == "GET" else {"data": params}),
        )
    except HttpError as exc:
        raise SourceError(f"{src.name}: {url}: {exc}") from None
    if r.status_code < 400 and r.content.startswith(SUCCESS):
        return r.content  # not decoded twice: the caller or the parser reads it
    if 300 <= r.status_code < 400:
        raise SourceError(
            f"{src.name}: {url}: HTTP {r.status_code} redirects to "
            f"{r.headers.get('Location', '(nowhere)')}: not followed (set url to where it points)"
        )
    try:
        doc = r.json()
    except ValueError:
        doc = None
    if r.status_code >= 400 or not isinstance(doc, dict) or doc.get("status") != "success":
        reason = (
            doc.get("error") if isinstance(doc, dict) and doc.get("error") else r.text[:200].strip()
        )
        hint = " (lower hosts_per_query)" if "too many samples" in str(reason) else ""
        raise SourceError(f"{src.name}: {url}: HTTP {r.status_code}: {reason}{hint}")
    return r.content


def incomplete(answer) -> str | None:
    """Why a successful answer may lack data, or None: any ``warnings`` (Thanos Query and Mimir
    answer with the stores they could reach and "partial response: ..." when one is down; no
    warning says the answer is whole). Such an answer is tried again as a store that did not
    answer may the next time; when the retries are spent the window fails and the next pull
    pulls it. A ``"warnings"`` inside a label value costs only a decode."""
    body = answer.content
    if b'"warnings"' not in body:
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # not JSON: reading it says so
    warnings = doc.get("warnings") if isinstance(doc, dict) else None
    if not warnings or doc.get("status") != "success":
        return None
    said = "; ".join(map(str, warnings if isinstance(warnings, list) else [warnings]))
    return f"the answer may be incomplete: {said[:300]}"


def decoded(src: SourceConfig, body: bytes):
    """A successful answer decoded, or SourceError when it is not a JSON object (cut short,
    say)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{src.name}: an answer is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{src.name}: an answer is not a JSON object")
    return doc


def base_url(src: SourceConfig) -> str:
    return str(src.options["url"]).rstrip("/")


def verify(value) -> bool | str:
    return value if isinstance(value, (bool, str)) else bool(value)


def tsdb_session(src: SourceConfig):
    """A session with the TSDB: TLS as ``verify_tls`` says, answers compressed only where
    ``compress`` asks. Prometheus gzips about 20 MB of JSON a CPU-second (a raw pull's answers are
    hundreds of MB): slower than a LAN carries them whole, and CPU the TSDB and this machine
    spend on nothing else."""
    s = http_session(src, verify=verify(src.options["verify_tls"]))
    if not src.options["compress"]:
        s.headers["Accept-Encoding"] = "identity"
    return s


def clock(src: SourceConfig) -> datetime:
    """The TSDB's now (naive UTC): what ``time()`` evaluates to there."""
    session = tsdb_session(src)
    answer = get(src, session, "/api/v1/query", {"query": "time()"})
    try:
        return datetime(1970, 1, 1) + timedelta(seconds=float(answer["result"][0]))
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        raise SourceError(f"{src.name}: time() answered {str(answer)[:100]}") from None
