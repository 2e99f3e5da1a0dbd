"""The one writer of a warehouse at a time: an OS file lock (``filelock``) on
``<home>/.writer.lock``, re-entrant within a process, released by the OS when its holder dies;
and the lock of each batch's stage.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock
from filelock import Timeout

from warehouse.storage import WarehouseError


class WarehouseBusy(WarehouseError):
    """Another process is writing this warehouse and the caller chose not to wait (longer)."""


# Per process: homes whose writer lock this process holds, with a re-entrant lock per home so
# nested writers (the CLI around a Dagster run whose assets write) share one acquisition, even
# through two ``Warehouse`` objects of the same home
_WRITERS: dict[Path, list] = {}
_WRITERS_GUARD = threading.Lock()
_POLL_S = 0.1


class WriterLock:
    """The writer lock of one home. ``wait``: what a writer does when another process holds it
    (True waits as long as it takes, a number that many seconds, False or 0 fails at once).
    ``on_first``: run when this process takes the lock, before the block (recovery, upgrades)."""

    def __init__(
        self,
        home: Path,
        wait: bool | float,
        read_only: bool,
        on_first: Callable[[], None] = lambda: None,
    ):
        self.home = home
        self.wait = wait
        self.read_only = read_only
        self.on_first = on_first
        self.path = home / ".writer.lock"

    def owner(self) -> str:
        """Who holds the writer lock, for messages: pid, host, command and age."""
        try:
            owner = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            owner = {}
        if not owner:
            return "another process"
        age = time.time() - owner.get("since", time.time())
        who = f"pid {owner.get('pid')} on {owner.get('host')} ({owner.get('command')})"
        return f"{who}, for {age:.0f}s"

    @contextmanager
    def writer(self, wait: bool | float | None = None):
        """Hold this warehouse's one writer lock (``<home>/.writer.lock``) for the block.

        Every write (ingest batches, derived tables, the catalog, forget) goes through here.
        Re-entrant within a process. The lock is an OS file lock, so a writer that dies
        (any signal, any host crash) releases it: a stale lock file is simply taken over.
        Another process's writer makes this one wait (``wait``: True = as long as it takes,
        with one line on stderr; a number = that many seconds; False / 0 = not at all) or
        raise ``WarehouseBusy`` naming the owner. Readers never take it. On first acquisition
        ``on_first`` runs (the warehouse recovers crashed writers' stages)."""
        if self.read_only:
            raise WarehouseError(f"warehouse {self.home} was opened read-only (a reader's command)")
        wait = self.wait if wait is None else wait
        with _WRITERS_GUARD:
            entry = _WRITERS.setdefault(self.home, [threading.RLock(), 0, None])
        rlock = entry[0]
        if not rlock.acquire(blocking=wait is not False and wait != 0):
            raise WarehouseBusy(
                f"warehouse {self.home} is being written by another thread of this process"
            )
        try:
            if entry[1] == 0:
                entry[2] = self.take(wait)
                try:
                    self.on_first()
                except BaseException:
                    _release(entry[2], self.path)
                    raise
            entry[1] += 1
            try:
                yield
            finally:
                entry[1] -= 1
                if entry[1] == 0:
                    _release(entry[2], self.path)
                    entry[2] = None
        finally:
            rlock.release()

    def take(self, wait: bool | float) -> FileLock:
        """Take the OS lock for this process, saying once on stderr whom it waits for, and
        record this process as its owner."""
        lock = FileLock(self.path, thread_local=False, poll_interval=_POLL_S)
        try:
            lock.acquire(blocking=False)
        except Timeout:
            if wait is not True and float(wait) <= 0:
                raise self._busy() from None
            print(
                f"goodput: waiting for the writer of {self.home}: {self.owner()}", file=sys.stderr
            )
            try:
                lock.acquire(timeout=-1 if wait is True else float(wait))
            except Timeout:
                raise self._busy() from None
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv)[:200],
            "since": time.time(),
        }
        try:
            self.path.write_text(json.dumps(owner))
        except BaseException:
            lock.release()
            raise
        return lock

    def _busy(self) -> WarehouseBusy:
        return WarehouseBusy(
            f"warehouse {self.home} is being written by {self.owner()}; "
            "try again later or pass --wait SECONDS"
        )

    @contextmanager
    def stage_lock(self, batch_id: str, wait: bool = True):
        """Yields whether this process holds the lock of a batch's stage: its writer's from
        staging to commit, released by the OS if the writer dies. Lock files live in the
        (local) home, so they work for an object-storage root too."""
        folder = self.home / ".staging-locks"
        folder.mkdir(exist_ok=True)
        path = folder / f"{batch_id}.lock"
        lock = FileLock(path, thread_local=False, poll_interval=_POLL_S)
        try:
            lock.acquire(blocking=wait)
        except Timeout:
            yield False
            return
        try:
            yield True
        finally:
            path.unlink(missing_ok=True)
            lock.release()


def _release(lock: FileLock, path: Path) -> None:
    """Drop a writer lock: empty the owner record, then unlock."""
    try:
        path.write_text("")
    finally:
        lock.release()
