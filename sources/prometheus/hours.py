"""The hours a Prometheus pull stores: whole settled hours in chunks, and the evaluation
instants (the last millisecond of an hour) its queries use."""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

from ingest.tsdb import HOUR_S
from sources.base import SourceConfig
from sources.base import Window

MS = 0.001
CHUNK = timedelta(days=7)  # a backfill's commit: series labels cross the wire once a chunk


def settled(src: SourceConfig, window: Window, now: datetime) -> Window:
    """What of ``window`` a pull stores whole at ``now``: every hour it reaches into, from the
    start of its first (a rollup is of a whole hour; a backfill ending mid-hour leaves that hour
    to the next, which starts there), up to the last hour that ended ``settle_s`` before
    ``now`` (a later pull's overlap takes the rest once complete). Empty (start >= end) when no
    such hour is left."""
    settle = timedelta(seconds=float(src.options["settle_s"]))
    return Window(floor_hour(window.start), floor_hour(min(window.end, now - settle)))


def hour_chunks(window: Window, now: datetime, src: SourceConfig) -> list[Window]:
    """The settled hours of ``window`` (``settled``) in chunks of ``CHUNK``."""
    span = settled(src, window, now)
    return span.chunks(CHUNK) if span.end > span.start else []


def eval_times(chunk: Window) -> tuple[float, float]:
    """The first and last evaluation instants: the last millisecond of the chunk's first and
    last hour."""
    return epoch(chunk.start) + HOUR_S - MS, epoch(chunk.end) - MS


def epoch(t: datetime) -> float:
    return (t - datetime(1970, 1, 1)).total_seconds()


def floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)
