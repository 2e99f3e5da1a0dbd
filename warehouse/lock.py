"""The one writer of a warehouse at a time: an OS file lock on ``<home>/.writer.lock``, re-entrant
within a process, released by the OS when its holder dies; and the lock of each batch's stage.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from contextlib import ExitStack
from contextlib import contextmanager
from pathlib import Path

from warehouse.files import WarehouseError


class WarehouseBusy(WarehouseError):
    """Another process is writing this warehouse and the caller chose not to wait (longer)."""


# Per process: homes whose writer lock this process holds, with a re-entrant lock per home so
# nested writers (the CLI around a Dagster run whose assets write) share one acquisition.
_WRITERS: dict[Path, list] = {}
_WRITERS_GUARD = threading.Lock()


class WriterLock:
    """The writer lock of a ``Warehouse`` (``home``, ``read_only``, ``wait``); taking it first
    recovers crashed writers' stages and upgrades an older layout (``Staging``, ``Layout``)."""

    @property
    def lock_path(self) -> Path:
        return self.home / ".writer.lock"

    def lock_owner(self) -> str:
        """Who holds the writer lock, for messages: pid, host, command and age."""
        try:
            owner = json.loads(self.lock_path.read_text() or "{}")
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
        the warehouse is recovered (committed stages rolled forward, others discarded)."""
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
                entry[2] = self._take_lock(wait)
                try:
                    self._recover()
                    self._upgrade_times()
                    self._upgrade_sources()
                except BaseException:
                    _release(entry[2])
                    raise
            entry[1] += 1
            try:
                yield
            finally:
                entry[1] -= 1
                if entry[1] == 0:
                    _release(entry[2])
                    entry[2] = None
        finally:
            rlock.release()

    def _take_lock(self, wait: bool | float):
        with ExitStack() as stack:  # closes the file if taking the lock fails
            fh = stack.enter_context(open(self.lock_path, "a+"))
            deadline = None if wait is True else time.monotonic() + float(wait)
            told = False
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    owner = self.lock_owner()
                    if deadline is not None and time.monotonic() >= deadline:
                        raise WarehouseBusy(
                            f"warehouse {self.home} is being written by {owner}; "
                            "try again later or pass --wait SECONDS"
                        ) from None
                    if not told:
                        print(
                            f"goodput: waiting for the writer of {self.home}: {owner}",
                            file=sys.stderr,
                        )
                        told = True
                    time.sleep(0.1)
            fh.seek(0)
            fh.truncate()
            owner = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": " ".join(sys.argv)[:200],
                "since": time.time(),
            }
            fh.write(json.dumps(owner))
            fh.flush()
            stack.pop_all()  # success: the caller holds the lock (and the file) open
            return fh

    @contextmanager
    def _stage_lock(self, batch_id: str, wait: bool = True):
        """Yields whether this process holds the lock of a batch's stage: its writer's from
        staging to commit, released by the OS if the writer dies. Lock files live in the
        (local) home, so they work for an object-storage root too."""
        folder = self.home / ".staging-locks"
        folder.mkdir(exist_ok=True)
        path = folder / f"{batch_id}.lock"
        with open(path, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                yield True
            finally:
                path.unlink(missing_ok=True)


def _release(fh) -> None:
    """Drop a writer lock: empty the owner record, then unlock (closing releases the flock)."""
    try:
        fh.seek(0)
        fh.truncate()
        fh.flush()
    finally:
        fh.close()
