"""Pull live sources into the warehouse, incrementally and safely.

For each source: the window from its cursor (less the kind's ``OVERLAP`` for records that change
late) to now, or the ``since``/``until`` given (a backfill), never past the source's clock (its
``clock``, else this machine's: time not yet come is not pulled, whatever ``until`` says), cut
to what the kind can pull whole now (its ``settled``: a TSDB's whole hours that ended
``settle_s`` ago) and into the kind's ``CHUNK``s. Each chunk's documents go through the ingest
parsers and are committed in one warehouse batch together with the chunk's ``pull_log`` row: a
chunk is stored whole, with its status, or not at all, and a crash part-way leaves the cursor
where the stored data ends. The window a ``pull_log`` row records is the one its data covers.
A source that fails (``SourceError``) gets a ``failed`` row with the reason and stops at that
chunk, so no later window is marked done past a gap; the other sources still run. The cursor
is the end of the earliest gap: from the start of the source's first pulled window, the end of
the ok windows that join up with it; a failed window, or time a backfill jumped over (a later
Dagster partition, ``--since`` past the cursor), is a gap the next pull starts at, whatever
was pulled after it. A source's next chunk is fetched and parsed while the current one is
committed, each of its documents parsed as it arrives, so its server, the parsers and the commit
work at once (two chunks are held at most).
Records pulled twice (the overlap, a repeated pull, a file ingested earlier) are stored once by
the warehouse's record keys and counted in ``rows_duplicate``.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC
from datetime import datetime
from datetime import timedelta

import polars as pl

from ingest.base import ParseContext
from ingest.runner import MemoryInput
from ingest.runner import commit_documents
from ingest.runner import parse_documents
from ingest.staging import FileReport
from sources import kinds
from sources.base import Document
from sources.base import Failure
from sources.base import SourceConfig
from sources.base import SourceConfigError
from sources.base import SourceError
from sources.base import Window
from sources.base import fetched
from sources.base import one_line
from sources.base import redact
from warehouse.store import Warehouse

FIRST_PULL = timedelta(days=1)  # how far back a source's first pull reaches without --since


@dataclass
class PullReport:
    source: str
    kind: str
    window: Window
    status: str  # ok | failed
    target: str | None = None  # a failed part of the source (a BMC); None: the whole source
    error: str | None = None
    documents: int = 0
    bytes: int = 0
    records: int = 0
    rows_ok: int = 0
    rows_quarantined: int = 0
    rows_duplicate: int = 0
    held_back: int = 0  # bytes of documents' unfinished last lines, read by a later pull


def now() -> datetime:
    """This machine's clock, naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def cursors(wh: Warehouse) -> dict[str, tuple[datetime, bool]]:
    """Per source, (time, pulled): where its next pull resumes. From the start of its first
    pulled window (the earliest pull's first chunk), the end of the ok windows that cover it
    without a break (True); the start itself when none covers it (False: its first window
    failed; without ``since`` the pull would otherwise start a day back and leave it out). A
    window that failed and was never pulled since, and time no pull covered, are where the ok
    windows break: never skipped, whatever was pulled past them."""
    if not wh.files("pull_log"):
        return {}
    log = wh.read("pull_log", "target IS NULL")
    first = (
        log.sort("started_at", "window_start")
        .group_by("source", maintain_order=True)
        .agg(anchor=pl.col("window_start").first())
    )
    runs = (
        log.filter(pl.col("status") == "ok")
        .sort("source", "window_start")
        .with_columns(reach=pl.col("window_end").cum_max().over("source"))
        .with_columns(  # a window starting past every earlier window's end begins a new run
            run=(pl.col("window_start") > pl.col("reach").shift(1).over("source"))
            .fill_null(True)
            .cum_sum()
            .over("source")
        )
        .group_by("source", "run")
        .agg(start=pl.col("window_start").min(), end=pl.col("window_end").max())
    )
    joined = first.join(runs, on="source", how="left").with_columns(
        covers=(pl.col("start") <= pl.col("anchor")) & (pl.col("anchor") < pl.col("end"))
    )
    out = joined.group_by("source").agg(
        t=pl.coalesce(pl.col("end").filter("covers").max(), pl.col("anchor").first()),
        pulled=pl.col("covers").any(),
    )
    return {s: (t, pulled) for s, t, pulled in out.rows()}


def windows(
    src: SourceConfig,
    cursor: tuple[datetime, bool] | None,
    since: datetime | None,
    until: datetime | None,
    clock: datetime | None = None,
) -> list[Window]:
    """The chunks a pull of ``src`` covers: [since, until) when since is given (a backfill),
    else from the cursor (less the overlap once something was pulled; ``FIRST_PULL`` back
    without one) to ``until`` or now (this minute); never past ``clock`` (the source's now, this
    machine's by default), and only what the kind can pull whole by then (its ``settled``)."""
    kind = kinds()[src.kind]
    clock = clock or now()
    end = min(until, clock) if until else clock.replace(second=0, microsecond=0)
    if since is not None:
        start = since
    elif cursor is not None:
        start = cursor[0] - kind.OVERLAP if cursor[1] else cursor[0]
    else:
        start = end - FIRST_PULL
    span = Window(start, end)
    if hasattr(kind, "settled"):
        span = kind.settled(src, span, clock)
    return span.chunks(kind.CHUNK) if span.start < span.end else []


def source_clock(src: SourceConfig) -> datetime:
    """The source's now (naive UTC), where its kind can ask (``clock``), never later than this
    machine's: a clock running ahead, here or there, does not mark time done that has not
    come."""
    kind = kinds()[src.kind]
    mine = now()
    return min(mine, kind.clock(src)) if hasattr(kind, "clock") else mine


def plan(
    wh: Warehouse,
    sources: list[SourceConfig],
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[tuple[SourceConfig, Window, list[str]]]:
    """What a pull would do, without doing it: per source and chunk, the commands and queries."""
    got = cursors(wh)
    out = []
    for src in sources:
        secrets = src.secret_values()
        for w in windows(src, got.get(src.name), since, until):
            try:
                lines = kinds()[src.kind].plan(src, w)
            except SourceError as exc:  # plans read only the configuration: a mistake in it
                raise SourceConfigError(_one_line(f"{src.name}: {exc}", src)) from None
            out.append((src, w, [redact(line, secrets) for line in lines]))
    return out


def pull(
    wh: Warehouse,
    sources: list[SourceConfig],
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[PullReport]:
    """Pull every source (see the module's docstring); one report per chunk and failed target.
    Holds the warehouse's writer lock throughout."""
    reports: list[PullReport] = []
    with wh.writer(), ThreadPoolExecutor(1) as ahead:
        got = cursors(wh)
        for src in sources:
            try:
                clock = source_clock(src)
            except SourceError as exc:  # unreachable: its first window fails, as a fetch would
                todo = windows(src, got.get(src.name), since, until)[:1]
                started = datetime.now(UTC).replace(tzinfo=None)
                for w in todo:
                    reports += _pull_window(wh, src, w, started, exc, [])
                continue
            todo = windows(src, got.get(src.name), since, until, clock)
            fetching = ahead.submit(_fetch, src, todo[0]) if todo else None
            for i, w in enumerate(todo):
                started, fetched, parsed = fetching.result()
                fetching = ahead.submit(_fetch, src, todo[i + 1]) if i + 1 < len(todo) else None
                reports += _pull_window(wh, src, w, started, fetched, parsed)
                if reports[-1].status == "failed" and reports[-1].target is None:
                    break  # no window past a gap is marked done (a chunk fetched ahead is dropped)
            if fetching is not None:
                fetching.cancel()
    return reports


def _fetch(
    src: SourceConfig, w: Window
) -> tuple[datetime, list[Document | Failure] | SourceError, list]:
    """When the fetch of ``w`` started, its documents (and failed targets) or why the source
    failed, and the documents parsed (``parse_documents``)."""
    started = datetime.now(UTC).replace(tzinfo=None)
    got: list[Document | Failure] = []
    parsed: list = []
    try:
        for d in fetched(kinds()[src.kind], src, w):
            got.append(d)
            if isinstance(d, Document):  # parsed while the server answers the next document
                parsed += parse_documents([_input(src, d)])
    except SourceError as exc:
        return started, exc, []
    return started, got, parsed


def _input(src: SourceConfig, d: Document) -> MemoryInput:
    ctx = ParseContext(
        cluster=src.cluster,
        cluster_given=src.cluster_given,
        host=d.host,
        time=d.time,
        options=d.options,
    )
    return MemoryInput(_named(src, d.name), d.data, d.format, ctx)


def _pull_window(
    wh: Warehouse,
    src: SourceConfig,
    w: Window,
    started: datetime,
    got: list[Document | Failure] | SourceError,
    parsed: list,
) -> list[PullReport]:
    batch_id = hashlib.sha256(f"pull\n{src.name}\n{w}\n{started.isoformat()}".encode()).hexdigest()[
        :16
    ]
    if isinstance(got, SourceError):
        report = PullReport(src.name, src.kind, w, "failed", error=_one_line(str(got), src))
        with wh.batch(batch_id) as batch:
            batch.add(_log_rows(src, [report], started, batch_id))
        return [report]
    docs = [d for d in got if isinstance(d, Document)]
    failures = [f for f in got if isinstance(f, Failure)]
    whole = PullReport(
        src.name, src.kind, w, "ok", documents=len(docs), bytes=sum(len(d.data) for d in docs)
    )
    out = [whole] + [
        PullReport(src.name, src.kind, w, "failed", target=f.target, error=_one_line(f.reason, src))
        for f in failures
    ]

    def log(files: list[FileReport]) -> dict[str, pl.DataFrame]:
        whole.records = sum(r.records for r in files)
        whole.rows_ok = sum(r.rows_ok for r in files)
        whole.rows_quarantined = sum(r.rows_quarantined for r in files)
        whole.rows_duplicate = sum(r.rows_duplicate for r in files)
        whole.held_back = sum(r.held_back for r in files)
        broken = [r.path for r in files if not r.done]
        if (
            broken
        ):  # a parser failed on a response: quarantined whole, and the window is tried again
            whole.status, whole.error = (
                "failed",
                f"could not parse {len(broken)} response(s), e.g. {broken[0]}",
            )
        return _log_rows(src, out, started, batch_id)

    commit_documents(wh, parsed, batch_id, log)
    return out


def _named(src: SourceConfig, name: str) -> str:
    """A document's ``source_file``: ``pull://<source>/...``, what says where a row came from."""
    prefix = f"pull://{src.name}/"
    return name if name.startswith(prefix) else prefix + name.removeprefix("pull://")


def _log_rows(
    src: SourceConfig, reports: list[PullReport], started: datetime, batch_id: str
) -> dict[str, pl.DataFrame]:
    finished = datetime.now(UTC).replace(tzinfo=None)
    rows = [
        {
            "source": src.name,
            "kind": src.kind,
            "cluster": src.cluster,
            "window_start": r.window.start,
            "window_end": r.window.end,
            "target": r.target,
            "status": r.status,
            "error": r.error,
            "documents": r.documents,
            "bytes": r.bytes,
            "records_read": r.records,
            "rows_ok": r.rows_ok,
            "rows_quarantined": r.rows_quarantined,
            "rows_duplicate": r.rows_duplicate,
            "started_at": started,
            "finished_at": finished,
            "batch": batch_id,
        }
        for r in reports
    ]
    return {"pull_log": pl.DataFrame(rows)}


def _one_line(text: str, src: SourceConfig) -> str:
    """The reason on one line, without the source's name (the row names it), and without the
    source's credentials (``sources.base.redact``): what pull_log, stderr and Dagster show."""
    text = one_line(text, src.secret_values())
    return text.removeprefix(f"{src.name}: ")[:500]
