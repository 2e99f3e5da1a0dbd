"""A command whose standard output is a file format the ingest reads: a site's own export script,
``kubectl get pods,events -A -o json``, ``ipmitool sel elist`` over ssh, ...

Options: ``command``, the argument list, in which ``{start}`` and ``{end}`` (ISO-8601 UTC,
seconds) are replaced by the window's bounds; ``format``, the ingest format of its output
(``auto``: detected from the content, as for files); ``host``, for outputs that name no host.
A command that exits non-zero, is not found or runs past ``timeout_s`` fails the window with its
first line of standard error; it is tried ``retries`` more times first, with backoff.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta

from sources.base import REQUIRED, Document, SourceConfig, SourceError, Window

KIND = "command"
OPTIONS = {"command": REQUIRED, "format": "auto", "host": None}
CHUNK = timedelta(days=1)
OVERLAP = timedelta(hours=1)


def argv(src: SourceConfig, window: Window) -> list[str]:
    cmd = src.options["command"]
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    start, end = window.start.isoformat(timespec="seconds"), window.end.isoformat(timespec="seconds")
    return [str(a).replace("{start}", start).replace("{end}", end) for a in cmd]


def plan(src: SourceConfig, window: Window) -> list[str]:
    return [shlex.join(argv(src, window))]


def run(src: SourceConfig, args: list[str]) -> bytes:
    """``args``' standard output, retried with exponential backoff; SourceError (one line) when
    every try fails."""
    why = ""
    for attempt in range(src.retries + 1):
        if attempt:
            time.sleep(min(0.5 * 2 ** (attempt - 1), 30))
        try:
            done = subprocess.run(args, capture_output=True, timeout=src.timeout_s, check=False)
        except FileNotFoundError:
            raise SourceError(f"{src.name}: command not found: {args[0]}") from None
        except subprocess.TimeoutExpired:
            why = f"{shlex.join(args)[:200]}: no answer within {src.timeout_s:g} s"
            continue
        if done.returncode == 0:
            return done.stdout
        err = next((ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()), "")
        why = f"{shlex.join(args)[:200]} exited {done.returncode}: {err.strip()[:300]}"
    raise SourceError(f"{src.name}: {why}")


def fetch(src: SourceConfig, window: Window) -> Iterator[Document]:
    args = argv(src, window)
    fmt = src.options["format"]
    yield Document(f"pull://{src.name}/{window}", run(src, args), None if fmt == "auto" else fmt,
                   host=src.options["host"])
