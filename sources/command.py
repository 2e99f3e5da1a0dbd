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
from collections.abc import Iterator
from datetime import timedelta

from sources.base import REQUIRED
from sources.base import Document
from sources.base import SourceConfig
from sources.base import Window
from sources.base import run_command

KIND = "command"
OPTIONS = {"command": REQUIRED, "format": "auto", "host": None}
CHUNK = timedelta(days=1)
OVERLAP = timedelta(hours=1)


def argv(src: SourceConfig, window: Window) -> list[str]:
    cmd = src.options["command"]
    if isinstance(cmd, str):
        cmd = shlex.split(cmd)
    start, end = (
        window.start.isoformat(timespec="seconds"),
        window.end.isoformat(timespec="seconds"),
    )
    return [str(a).replace("{start}", start).replace("{end}", end) for a in cmd]


def plan(src: SourceConfig, window: Window) -> list[str]:
    return [shlex.join(argv(src, window))]


def fetch(src: SourceConfig, window: Window) -> Iterator[Document]:
    args = argv(src, window)
    fmt = src.options["format"]
    yield Document(
        f"pull://{src.name}/{window}",
        run_command(src, args),
        None if fmt == "auto" else fmt,
        host=src.options["host"],
    )
