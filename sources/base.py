"""What every live source shares: its configuration, the window it pulls, what it returns.

A source *kind* is a module in ``sources/`` that defines ``KIND`` (its name in ``sources.toml``)
and four things:

- ``OPTIONS: dict[str, object]``: the options it takes, each with its default (``REQUIRED``
  for none). ``SourceConfig.options`` holds them filled in; an unknown option is an error.
- ``CHUNK: timedelta``: the longest window one request (or set of requests) covers; a longer
  pull is cut into chunks, each committed, with its status row, on its own.
- ``OVERLAP: timedelta``: how far before its cursor every pull starts again, for records that
  change late (a running job that ends, a late scrape). Re-pulled records are exact repeats
  and are stored once (record keys), so overlap costs only the transfer.
- ``plan(src, window) -> list[str]``: the commands and queries a pull would run, for
  ``--dry-run`` (no I/O, no credentials read).
- ``fetch(src, window) -> Iterator[Document | Failure]``: the I/O. Each document is a response or
  command output in a format an ``ingest`` parser reads; it goes through that parser, the
  warehouse's record keys and quarantine exactly as a file would. A failure raises
  ``SourceError`` with one line saying what failed (never a traceback); nothing of the window is
  then stored. A kind
  that reads many independent targets (hundreds of BMCs) yields a ``Failure`` for a target it
  could not read instead, and its other targets' documents are stored; such a kind reads every
  target whole again on each pull, so a failed target is caught up by the next one.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
import tomllib
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from datetime import timedelta
from pathlib import Path

SOURCES_FILE = "sources.toml"  # in the home
REQUIRED = object()  # an option without a default
BACKOFF_S = 0.5  # wait before the first retry of a command; doubled each time, at most 30 s


class SourceError(Exception):
    """A source that could not be read (unreachable, refused, bad answer): one line, stored as the
    window's status; the other sources still run and the next pull starts again from the cursor."""


class SourceConfigError(Exception):
    """A mistake in ``sources.toml`` or the options given: one line for the user."""


@dataclass(frozen=True)
class Window:
    """A half-open time range [start, end), naive UTC."""

    start: datetime
    end: datetime

    def chunks(self, size: timedelta) -> list[Window]:
        out, t = [], self.start
        while t < self.end:
            out.append(Window(t, min(t + size, self.end)))
            t += size
        return out

    def __str__(self) -> str:
        return f"{self.start.isoformat()}..{self.end.isoformat()}"


@dataclass
class Document:
    """One response or command output, parsed as if it were a file called ``name``."""

    name: str  # stored as source_file: says which source, request and window it came from
    data: bytes
    format: str | None  # the ingest format that reads it (ingest.registry); None: detected
    host: str | None = None  # ParseContext.host for documents that do not name their host
    options: dict = field(default_factory=dict)  # ParseContext.options for its parser
    time: datetime | None = (
        None  # ParseContext.time: when a snapshot without its own times was read
    )


@dataclass(frozen=True)
class Failure:
    """One target of a source (a BMC) that could not be read in this pull: a status row."""

    target: str
    reason: str  # one line


TIMEOUT_S = 30.0  # per request or command
RETRIES = 3  # attempts after the first, with exponential backoff, on transient failures


@dataclass(frozen=True)
class SourceConfig:
    name: str  # unique in sources.toml; the cursor and the status rows are kept under it
    kind: str
    cluster: str  # stored with every record
    options: dict  # the kind's OPTIONS, filled in
    timeout_s: float = TIMEOUT_S
    retries: int = RETRIES
    # ``cluster`` written in sources.toml: every record's cluster (ParseContext.cluster_given);
    # else records that name their cluster (sacct's Cluster) keep it, the others get "default"
    cluster_given: bool = False

    def secret(self, option: str) -> str | None:
        """The value of the environment variable that option ``option`` names (credentials are
        never stored in the file); None when the option is not set; an error when the variable
        it names is unset."""
        var = self.options.get(option)
        if not var:
            return None
        value = os.environ.get(var)
        if value is None:
            raise SourceError(f"{self.name}: environment variable {var} ({option}) is not set")
        return value


def fetch_all(kind, src: SourceConfig, window: Window) -> list[Document | Failure]:
    """Every document (and failed target) of ``window``, or SourceError: a window is stored whole
    or not at all."""
    try:
        return list(kind.fetch(src, window))
    except SourceError:
        raise
    except OSError as exc:  # network and process errors the kind did not translate
        raise SourceError(f"{src.name}: {exc.strerror or exc}") from None


def run_command(src: SourceConfig, argv: list[str], shown: str | None = None) -> bytes:
    """``argv``'s standard output (no standard input), retried ``src.retries`` times with
    exponential backoff on a non-zero exit or after ``src.timeout_s``; a missing command, or an
    exit of 126/127 (a shell or ``env`` found no such command), fails at once. Failure: a
    SourceError naming the command (``shown``, else the command line) and its first line of
    standard error."""
    shown = shown or shlex.join(argv)[:200]
    why = ""
    for attempt in range(src.retries + 1):
        if attempt:
            time.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 30))
        try:
            code, out, err = _run_group(argv, src.timeout_s)
        except FileNotFoundError:
            raise SourceError(f"{src.name}: {argv[0]}: command not found") from None
        except subprocess.TimeoutExpired:
            why = f"{shown} gave no answer within {src.timeout_s:g} s"
            continue
        if code == 0:
            return out
        first = next(
            (ln.strip() for ln in err.decode(errors="replace").splitlines() if ln.strip()), ""
        )
        why = f"{shown} exited {code}: {first[:300] or '(no message)'}"
        if code in (126, 127):  # no retry finds a command that is not there
            break
    raise SourceError(f"{src.name}: {why}")


def _run_group(argv: list[str], timeout_s: float) -> tuple[int, bytes, bytes]:
    """(exit status, standard output, standard error) of ``argv``, run in a session of its own;
    past ``timeout_s`` (or interrupted) every process of that session is killed, not only the
    child: a shell ``command_prefix`` would otherwise leave its hung ``sacct`` running, one
    per try. A process the command leaves running after it exits (ssh's ControlPersist master)
    is its own."""
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return proc.returncode, out, err


def load_sources(home: Path, kinds: dict) -> list[SourceConfig]:
    """The sources of ``home/sources.toml`` (none when the file is absent), checked: each has a
    unique name, a known kind, a cluster and only its kind's options."""
    path = home / SOURCES_FILE
    if not path.exists():
        return []
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SourceConfigError(f"{path}: {exc}") from None
    entries = doc.get("source", [])
    if not isinstance(entries, list):
        raise SourceConfigError(f"{path}: sources are [[source]] tables")
    return [source_config(e, kinds, f"{path} source {i + 1}") for i, e in enumerate(entries)]


def source_config(entry: dict, kinds: dict, where: str = "source") -> SourceConfig:
    entry = dict(entry)
    name, kind = entry.pop("name", None), entry.pop("kind", None)
    if not name or not isinstance(name, str):
        raise SourceConfigError(f"{where}: needs a name")
    if kind not in kinds:
        raise SourceConfigError(
            f"{where} ({name}): kind {kind!r} is not one of {', '.join(sorted(kinds))}"
        )
    cluster_given = "cluster" in entry
    cluster = entry.pop("cluster", "default")
    common = {k: entry.pop(k) for k in ("timeout_s", "retries") if k in entry}
    spec = kinds[kind].OPTIONS
    unknown = sorted(set(entry) - set(spec))
    if unknown:
        raise SourceConfigError(
            f"{where} ({name}): unknown option(s) {', '.join(unknown)} for kind {kind}; "
            f"it takes {', '.join(sorted(spec)) or 'none'}"
        )
    options = {k: entry.get(k, default) for k, default in spec.items()}
    missing = sorted(k for k, v in options.items() if v is REQUIRED)
    if missing:
        raise SourceConfigError(f"{where} ({name}): kind {kind} needs {', '.join(missing)}")
    try:
        return SourceConfig(
            name,
            kind,
            str(cluster),
            options,
            float(common.get("timeout_s", TIMEOUT_S)),
            int(common.get("retries", RETRIES)),
            cluster_given,
        )
    except (TypeError, ValueError) as exc:
        raise SourceConfigError(f"{where} ({name}): {exc}") from None


def http_session(
    src: SourceConfig,
    user_option: str = "username_env",
    password_option: str = "password_env",
    token_option: str = "token_env",
    verify: bool | str = True,
):
    """A ``requests`` session for ``src``: retries with exponential backoff on connection errors
    and 429/5xx (urllib3's Retry), bearer or basic auth from the environment variables the
    options name, TLS verification as given (a CA bundle path, or False)."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    class Session(requests.Session):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):
            out = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if (
                verify is None and self.verify is not True
            ):  # REQUESTS_CA_BUNDLE must not undo verify_tls
                out["verify"] = self.verify
            return out

    s = Session()
    retry = Retry(
        total=src.retries,
        connect=src.retries,
        read=src.retries,
        backoff_factor=0.5,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=None,
        respect_retry_after_header=True,
        raise_on_status=False,
    )
    adapter = HTTPAdapter(max_retries=retry, pool_maxsize=64)
    s.mount("http://", adapter)
    s.mount("https://", adapter)
    s.verify = verify
    token = src.secret(token_option) if token_option in src.options else None
    if token:
        s.headers["Authorization"] = f"Bearer {token}"
    elif user_option in src.options and src.options.get(user_option):
        s.auth = (src.secret(user_option) or "", src.secret(password_option) or "")
    return s


def http_error(src: SourceConfig, url: str, exc: Exception) -> SourceError:
    """A requests failure as one line."""
    import requests

    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        r = exc.response
        return SourceError(
            f"{src.name}: {url}: HTTP {r.status_code} {r.reason}: {r.text[:200].strip()}"
        )
    if isinstance(exc, requests.Timeout):
        return SourceError(f"{src.name}: {url}: no answer within {src.timeout_s:g} s")
    if isinstance(exc, requests.ConnectionError):
        return SourceError(f"{src.name}: {url}: cannot connect ({type(exc).__name__})")
    return SourceError(f"{src.name}: {url}: {exc}")
