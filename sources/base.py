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

A kind may also define ``OPTION_TYPES`` (option -> the types it takes) for options whose default
does not say (one of several types). ``source_config`` checks every option once, when the file is
read: its type (that of its default unless declared), numbers finite and in range, names of
environment variables that are names (a value that looks like the secret itself is refused
without being shown), no ``user:password@`` in any URL. ``redact`` is the one function that keeps
credentials out of text: every error line, ``pull_log`` row and dry-run line goes through it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
import shlex
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterable
from collections.abc import Iterator
from dataclasses import dataclass
from dataclasses import field
from datetime import datetime
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote
from urllib.parse import quote_plus

SOURCES_FILE = "sources.toml"  # in the home
REQUIRED = object()  # an option without a default
BACKOFF_S = 0.5  # wait before the first retry of a command; doubled each time, at most 30 s
MASK = "***"  # what a credential becomes in text

# What a credential looks like in text that is not the source's own: the userinfo of a URL, the
# value of an authorization header, a password or token field of JSON, a form or a query, a JWT.
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#]*@")
_SECRET_PATTERNS = (
    (_USERINFO, rf"\1{MASK}@"),
    (
        re.compile(
            r"(?i)\b(authorization|proxy-authorization|x-auth-token|cookie|set-cookie)"
            r"(\\?\"?\s*[:=]\s*\\?\"?)((?:bearer|basic|token|digest)\s+)?[^\s\"\\,;]+"
        ),
        rf"\1\2\3{MASK}",
    ),
    (
        re.compile(
            r"(?i)(\\?\"(?:password|passwd|token|secret|api_?key|access_?token|auth_?token)\\?\""
            r"\s*:\s*\\?\")(?:[^\"\\]|\\[^\"])*(\\?\")"
        ),
        rf"\1{MASK}\2",
    ),
    (
        re.compile(r"(?i)\b(password|passwd|token|secret|api_?key|access_?token)=[^&\s\"]+"),
        rf"\1={MASK}",
    ),
    (re.compile(r"\beyJ[\w-]{4,}\.[\w-]{4,}\.[\w-]*"), MASK),
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every credential it may hold replaced by ``***``: each of ``secrets`` (the
    values a source's credentials have, ``SourceConfig.secret_values``), and whatever looks like
    one (``_SECRET_PATTERNS``). Applied wherever source text becomes output."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    for pattern, mask in _SECRET_PATTERNS:
        text = pattern.sub(mask, text)
    return text


def one_line(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` on one line, redacted."""
    return redact(" ".join(str(text).split()), secrets)


class SourceError(Exception):
    """A source that could not be read (unreachable, refused, bad answer): one line, stored as the
    window's status; the other sources still run and the next pull starts again from the cursor.
    Its text is redacted when it is made."""

    def __init__(self, message: str = ""):
        super().__init__(one_line(message))


class SourceConfigError(Exception):
    """A mistake in ``sources.toml`` or the options given: one line for the user, redacted."""

    def __init__(self, message: str = ""):
        super().__init__(one_line(message))


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
MAX_TIMEOUT_S = 86400.0  # timeout_s above a day is a mistake (a typo of units)
MAX_RETRIES = 100
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# NAME=value in an argument list: an environment variable's value (env, sudo, a remote shell);
# upper case only, as environment variables are named (ssh's -o BatchMode=yes is not one)
_ASSIGNMENT = re.compile(r"[A-Z_][A-Z0-9_]*=(.+)", re.DOTALL)


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

    def secret_values(self) -> list[str]:
        """Every text that would give a credential of this source away: the values of the
        environment variables its ``*_env`` options name (and the basic-auth token they make),
        the values of ``NAME=value`` arguments in its argument lists (``command_prefix``'s
        ``env TOKEN=...``), each also as JSON and URL encode it."""
        env = {
            k: os.environ.get(v)
            for k, v in self.options.items()
            if k.endswith("_env") and isinstance(v, str) and v
        }
        values = [v for v in env.values() if v]
        if env.get("username_env") is not None and env.get("password_env") is not None:
            pair = f"{env['username_env']}:{env['password_env']}".encode()
            values.append(base64.b64encode(pair).decode())
        for value in self.options.values():
            if isinstance(value, list):
                values += [
                    m.group(1)
                    for a in value
                    if isinstance(a, str) and (m := _ASSIGNMENT.fullmatch(a))
                ]
        return sorted(
            {f(v) for v in values for f in (str, _json_inner, quote, quote_plus)} - {""},
            key=len,
            reverse=True,
        )


def _json_inner(text: str) -> str:
    return json.dumps(text)[1:-1]


def fetched(kind, src: SourceConfig, window: Window) -> Iterator[Document | Failure]:
    """The documents (and failed targets) of ``window`` as the kind yields them, so each can be
    worked on while the kind fetches the next; SourceError when it fails. Whatever else goes
    wrong in the kind (an answer of a shape it did not expect) is a SourceError too, naming the
    exception: one source never stops the others."""
    try:
        yield from kind.fetch(src, window)
    except SourceError:
        raise
    except OSError as exc:  # network and process errors the kind did not translate
        raise SourceError(f"{src.name}: {exc.strerror or exc}") from None
    except Exception as exc:  # noqa: BLE001 - reported as the window's reason, on one line
        raise SourceError(
            f"{src.name}: could not read the answer ({type(exc).__name__}: {exc})"
        ) from None


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
    unique name, a known kind, a cluster and only its kind's options, each of its type and
    range."""
    path = home / SOURCES_FILE
    if not path.exists():
        return []
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SourceConfigError(f"{path}: {exc}") from None
    except RecursionError:
        raise SourceConfigError(f"{path}: nested too deeply to read") from None
    entries = doc.get("source", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise SourceConfigError(f"{path}: sources are [[source]] tables")
    out = [source_config(e, kinds, f"{path} source {i + 1}") for i, e in enumerate(entries)]
    first: dict[str, int] = {}
    for i, src in enumerate(out, start=1):
        if src.name in first:
            raise SourceConfigError(
                f"{path}: sources {first[src.name]} and {i} are both named {src.name!r}; each "
                "needs its own name (its cursor and status rows are kept under it)"
            )
        first[src.name] = i
    return out


def source_config(entry: dict, kinds: dict, where: str = "source") -> SourceConfig:
    entry = dict(entry)
    name, kind = entry.pop("name", None), entry.pop("kind", None)
    if not name or not isinstance(name, str):
        raise SourceConfigError(f"{where}: needs a name")
    if not isinstance(kind, str) or kind not in kinds:
        shown = repr(kind) if isinstance(kind, str) else f"of type {type(kind).__name__}"
        raise SourceConfigError(
            f"{where} ({name}): kind {shown} is not one of {', '.join(sorted(kinds))}"
        )
    where = f"{where} ({name})"
    cluster_given = "cluster" in entry
    cluster = entry.pop("cluster", "default")
    if not isinstance(cluster, str) or not cluster:
        raise SourceConfigError(f"{where}: cluster is a name (a string)")
    timeout_s = entry.pop("timeout_s", TIMEOUT_S)
    if _number_error(timeout_s, (0, MAX_TIMEOUT_S), whole=False):
        raise SourceConfigError(
            f"{where}: timeout_s is a number of seconds above 0, at most {MAX_TIMEOUT_S:g}"
        )
    retries = entry.pop("retries", RETRIES)
    if _number_error(retries, (0, MAX_RETRIES), whole=True):
        raise SourceConfigError(f"{where}: retries is a whole number from 0 to {MAX_RETRIES}")
    spec = kinds[kind].OPTIONS
    unknown = sorted(set(entry) - set(spec))
    if unknown:
        raise SourceConfigError(
            f"{where}: unknown option(s) {', '.join(unknown)} for kind {kind}; "
            f"it takes {', '.join(sorted(spec)) or 'none'}"
        )
    options = {k: entry.get(k, default) for k, default in spec.items()}
    missing = sorted(k for k, v in options.items() if v is REQUIRED)
    if missing:
        raise SourceConfigError(f"{where}: kind {kind} needs {', '.join(missing)}")
    declared = getattr(kinds[kind], "OPTION_TYPES", {})
    for option in entry:
        _check_option(where, option, entry[option], spec[option], declared.get(option))
    return SourceConfig(name, kind, cluster, options, float(timeout_s), int(retries), cluster_given)


def _check_option(where: str, option: str, value, default, types: tuple | None) -> None:
    """One line for an option that is not of its type and range (see the module's docstring),
    showing no value that could be a credential."""
    if types is None:
        if default is REQUIRED or default is None:
            types = ()  # the kind checks it
        elif isinstance(default, bool):
            types = (bool,)
        elif isinstance(default, (int, float)):
            types = (int,) if isinstance(default, int) else (int, float)
        else:
            types = (type(default),)
    if types and (not isinstance(value, types) or (bool not in types and isinstance(value, bool))):
        want = " or ".join(dict.fromkeys(_TYPE_NAMES.get(t, t.__name__) for t in types))
        raise SourceConfigError(f"{where}: {option} is {want}, not {_type_name(value)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        whole = float not in types
        if whole and value < 0:
            raise SourceConfigError(f"{where}: {option} is a whole number, 0 or more")
        if not whole and _number_error(value, (0, math.inf), whole=False):
            raise SourceConfigError(f"{where}: {option} is a finite number above 0")
    if isinstance(value, list) and isinstance(default, list) and default:
        item_types = {type(v) for v in default}
        if any(type(v) not in item_types for v in value):
            raise SourceConfigError(f"{where}: {option}: every item is {_type_name(default[0])}")
    named = option.endswith("_env") and isinstance(value, str) and value
    if named and (not _ENV_NAME.fullmatch(value) or _looks_like_a_secret(value)):
        raise SourceConfigError(
            f"{where}: {option} names the environment variable that holds the credential; "
            "the value given (not shown) is not such a name and may be the credential "
            "itself: put it in the environment and name the variable here"
        )
    if any(_USERINFO.search(text) for text in _strings(value)):
        raise SourceConfigError(
            f"{where}: {option} holds a URL with a user name or password "
            "(user:password@host, not shown): remove it; credentials come from the "
            "environment (username_env / password_env / token_env)"
        )


def _number_error(value, bounds: tuple[float, float], whole: bool) -> bool:
    """Whether ``value`` is not a number within ``bounds``: a whole one within them, or a finite
    one above the lower bound (a duration of 0 s is a mistake) and at most the upper."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    if whole:
        return not isinstance(value, int) or not bounds[0] <= value <= bounds[1]
    return not math.isfinite(value) or not bounds[0] < value <= bounds[1]


_TYPE_NAMES = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
               list: "a list", dict: "a table"}  # fmt: skip


def _type_name(value) -> str:
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def _looks_like_a_secret(name: str) -> bool:
    """A variable name does not look like a token: one long, with lower and upper case letters
    and digits mixed (a base64 or random key), or past 64 characters, does."""
    mixed = all(any(f(c) for c in name) for f in (str.islower, str.isupper, str.isdigit))
    return len(name) > 64 or (len(name) >= 20 and mixed)


def _strings(value) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
