"""Small files parsed in parallel: consecutive small files grouped in tasks, the tasks parsed in
worker processes (or here, when there is too little work to start them), the results handed
back in file order, so the tables written are the same for any number of processes; and how
many processes to start (the cores this process may use, within its cgroup's CPU quota).

Workers are spawned and run ``_parse_task``, which they import from this module by name.
"""

from __future__ import annotations

import io
import math
import multiprocessing
import os
import signal
import stat
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import zstandard

from ingest import chunks
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.files import open_source
from ingest.files import text_head
from ingest.parsing import checked
from ingest.parsing import parse_bytes
from ingest.parsing import reraise_interrupt
from ingest.registry import detect
from ingest.registry import formats
from ingest.staging import FileReport

# Small files are parsed in a process pool, several per task (a task's pickling and round trip
# cost about as much as parsing one small file), while this process commits them in file order.
TASK_FILES = 64
TASK_BYTES = 4 << 20
POOL_MIN_FILES = 256  # fewer small files than this (and fewer bytes than POOL_MIN_BYTES) are
POOL_MIN_BYTES = 64 << 20  # parsed here: starting the workers would cost more than it saves


@dataclass
class Item:
    """One file on its way through an ingest (``ingest.runner``): read and hashed there, parsed
    (maybe in a worker process), committed there in file order."""

    path: Path
    report: FileReport
    data: bytes | None = None  # a small file's bytes, to parse
    ctx: ParseContext | None = None
    stream: BinaryIO | None = None  # a large file, open: parsed in chunks into its own batch
    results: list[tuple[str, ParseResult]] | None = None
    # the forced --format's own sniffer knows the content: no record in it means nothing to
    # report (a healthy node's kernel log), not the wrong format
    recognised: bool = False


def default_jobs(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """Parsing processes when none are asked for: one per core this process may run on, and
    no more than its cgroup's CPU quota (a Kubernetes pod's CPU limit: on a 64-core node a
    2-CPU pod sees 64 cores, and 64 parsers would exceed its memory limit)."""
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    quota = _cgroup_cpus(cgroup)
    return max(1, min(cores, quota)) if quota else cores


def _cgroup_cpus(cgroup: Path) -> int | None:
    """CPUs the cgroup's quota allows (rounded up), from cgroup v2 ``cpu.max`` or v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``; None when there is no quota."""
    try:
        if (cgroup / "cpu.max").exists():
            quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        else:
            v1 = cgroup / "cpu"
            quota, period = (
                (v1 / f).read_text().strip() for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            )
        if quota in ("max", "-1"):
            return None
        return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        return None


def worth_a_pool(files: list[Path]) -> bool:
    """Whether the small files are enough work to start worker processes for."""
    n = size = 0
    for p in files:
        try:
            st = p.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size <= chunks.CHUNK_BYTES:
            n, size = n + 1, size + st.st_size
        if n >= POOL_MIN_FILES or size >= POOL_MIN_BYTES:
            return True
    return False


def parsed_items(items: Iterator[Item], fmt: str | None, jobs: int, pooled: bool) -> Iterator[Item]:
    """``items`` in the same order, each small file's with its parse ``results``. Consecutive
    small files are parsed in tasks of up to TASK_FILES files / TASK_BYTES bytes (``_parse_task``);
    with ``pooled``, by ``jobs`` worker processes, at most 2 x jobs tasks ahead of the caller,
    else here, one task at a time. The tasks, and so the tables, are the same either way."""
    ahead: deque[tuple[list[Item], Future | None]] = deque()
    group: list[Item] = []
    size = 0
    # spawned: a fork of this process, whose Polars thread pool may be running, can deadlock;
    # and spawned workers are this process's children, so its rusage counts their CPU
    # workers ignore Ctrl-C (a terminal sends it to the whole process group): this process
    # stops them, and says so in one line
    pool = (
        ProcessPoolExecutor(
            jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=signal.signal,
            initargs=(signal.SIGINT, signal.SIG_IGN),
        )
        if pooled
        else None
    )
    limit = 2 * jobs if pooled else 0
    try:

        def submit() -> None:
            nonlocal group, size
            if group:
                task = [(it.data, it.path.name, it.ctx) for it in group]
                if pool is None:
                    future: Future = Future()
                    future.set_result(_parse_task(task, fmt))
                else:
                    future = pool.submit(_parse_task, task, fmt)
                ahead.append((group, future))
                group, size = [], 0

        for it in items:
            if it.data is not None:
                group.append(it)
                size += len(it.data)
                if len(group) >= TASK_FILES or size >= TASK_BYTES:
                    submit()
            else:
                submit()
                ahead.append(([it], None))
            while len(ahead) > limit:
                yield from _resolved(*ahead.popleft())
        submit()
        while ahead:
            yield from _resolved(*ahead.popleft())
    finally:  # also when the caller stops early (an error committing): queued tasks are dropped
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _resolved(group: list[Item], future: Future | None) -> Iterator[Item]:
    for it, (results, done) in zip(
        group, future.result() if future else [(None, True)] * len(group)
    ):
        if future is not None:
            it.results, it.report.done, it.data = results, done, None
        yield it


def _parse_task(
    files: list[tuple[bytes, str, ParseContext]], fmt: str | None
) -> list[tuple[list, bool]]:
    """``parse_bytes`` of each small file, in order, except that the files of a format with
    ``parse_many`` are parsed together: one call per format for the whole task, so the fixed
    cost of a parse is paid once per task, not once per file. A file that cannot be read whole,
    is empty or is not recognised, and every file of a ``parse_many`` call that fails (a
    parser bug), goes through ``parse_bytes`` alone, as before."""
    out: list[tuple[list, bool] | None] = [None] * len(files)
    together: dict[str, list[tuple[int, bytes]]] = {}
    forced = formats()[fmt] if fmt else None
    for i, (data, name, _) in enumerate(files):
        spec, text = _whole(data, name, forced)
        if spec is None:
            out[i] = parse_bytes(data, name, fmt, files[i][2])
        else:
            together.setdefault(spec.name, []).append((i, text))
    for name, group in together.items():
        spec = formats()[name]
        try:
            results = [
                checked(spec, r)
                for r in spec.parse_many([(text, files[i][2]) for i, text in group])
            ]
        except Exception as exc:  # noqa: BLE001 - parsed one by one, a parser bug quarantines only its file
            reraise_interrupt(exc)
            results = [None] * len(group)
        for (i, _), res in zip(group, results, strict=True):
            out[i] = (
                ([(name, res)], True)
                if res is not None
                else parse_bytes(files[i][0], files[i][1], fmt, files[i][2])
            )
    return out  # type: ignore[return-value]


def _whole(data: bytes, name: str, spec: FormatSpec | None) -> tuple[FormatSpec | None, bytes]:
    """(format, decompressed text) of a small file that its format's ``parse_many`` can take
    whole (sniffed as ``parsing.parse_file`` does, at most CHUNK_BYTES once decompressed);
    (None, b"") for any other file."""
    try:
        with open_source(io.BytesIO(data)) as fh:
            head = text_head(fh)
            if not head.strip():
                return None, b""
            spec = spec or detect(head, name)
            if spec is None or spec.parse_many is None:
                return None, b""
            text = fh.read(chunks.CHUNK_BYTES + 1)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError):
        return None, b""
    # a longer text, or one with a line too long to parse, is parsed in chunks (``parse_bytes``)
    return (
        (spec, text)
        if len(text) <= chunks.CHUNK_BYTES and chunks.newlines_if_short(text) is not None
        else (None, b"")
    )
