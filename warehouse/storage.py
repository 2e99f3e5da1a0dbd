"""Where a warehouse's files live and how one is written: the home and the Parquet root (a local
directory or ``s3://bucket/prefix``) behind one fsspec filesystem, and atomic single-file writes.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from warehouse._sql import literal_path
from warehouse._utils import NULL_PARTITION
from warehouse._utils import join
from warehouse._utils import mtime
from warehouse.schemas import TABLES

SCRATCH_ENV = "GOODPUT_SCRATCH"


class WarehouseError(Exception):
    """A warehouse location the user got wrong (scheme, bucket, credentials); the CLI prints it
    as one line."""


def resolve_home(home: str | os.PathLike | None = None) -> Path:
    """--home, else $GOODPUT_HOME, else ./goodput_home."""
    chosen = home or os.environ.get("GOODPUT_HOME") or "goodput_home"
    return Path(chosen).expanduser().resolve()


def resolve_parquet_uri(uri: str | os.PathLike | None, home: Path) -> str:
    """--warehouse-uri, else $GOODPUT_WAREHOUSE_URI, else <home>/parquet; returns an absolute
    local path or ``s3://bucket/prefix``."""
    chosen = str(uri or os.environ.get("GOODPUT_WAREHOUSE_URI") or home / "parquet")
    protocol = fsspec.utils.get_protocol(chosen)
    if protocol == "file":
        return str(Path(chosen.removeprefix("file://")).expanduser().resolve())
    if protocol != "s3" or not chosen.removeprefix("s3://").split("/")[0]:
        raise WarehouseError(
            f"warehouse URI {chosen!r}: use a local directory or s3://bucket/prefix"
        )
    return chosen.rstrip("/")


class Storage:
    """The home and the Parquet root's files: ``fs`` (the fsspec filesystem), ``root`` (the
    root in its form), ``parquet`` (the root as users name it), ``local`` (a local disk),
    ``scratch`` (temporary files of out-of-core steps)."""

    def __init__(self, home: Path, parquet: str):
        self.home = home
        self.parquet = parquet
        # temporary files of out-of-core steps: a local disk even where the home is a shared
        # volume (Kubernetes: an emptyDir)
        self.scratch = Path(os.environ.get(SCRATCH_ENV) or home).expanduser().resolve()
        self.fs, self.root = fsspec.core.url_to_fs(parquet)
        self.local = isinstance(self.fs, LocalFileSystem)

    def create(self) -> None:
        """Make the scratch folder and the Parquet root (a bucket is only checked)."""
        try:
            self.scratch.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(
                f"cannot use ${SCRATCH_ENV} {self.scratch}: {exc.strerror or exc}"
            ) from None
        if not os.access(self.home, os.W_OK | os.X_OK):
            raise WarehouseError(f"cannot use home {self.home}: not writable")
        if self.local:
            self.fs.makedirs(self.root, exist_ok=True)
        else:
            self.check_bucket()

    def check_bucket(self) -> None:
        """Fail on open, in one line, when the bucket is missing or unreachable: object stores
        create nothing up front, and a first write failing mid-batch says less."""
        bucket = self.root.split("/")[0]
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            raise WarehouseError(f"{self.parquet}: bucket {bucket!r} does not exist") from None
        except Exception as exc:  # noqa: BLE001 - credentials, endpoint, permissions: the user's setup
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise WarehouseError(
                f"{self.parquet}: cannot reach bucket {bucket!r} ({reason}); check "
                "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, AWS_DEFAULT_REGION"
            ) from None

    def path(self, *parts: str) -> str:
        """A path inside the Parquet root, in the filesystem's own form."""
        return join(self.root, *parts)

    def public(self, path: str) -> str:
        """A path of the filesystem's form as users name it (a local path or a URI)."""
        return self.parquet + path[len(self.root) :]

    def duck_path(self, path: str) -> str:
        """A path of the filesystem's form as DuckDB reads it, literally (a URI on object
        storage, where the filesystem is registered on the connection)."""
        return literal_path(path if self.local else f"{self.fs.protocol[0]}://{path}")

    def find(self, path: str) -> list[str]:
        """Parquet files under ``path`` (none if it does not exist), sorted."""
        return sorted(f for f in self.fs.find(path) if f.endswith(".parquet"))

    def writable(self) -> bool:
        """Whether this process may write the home (a reader decides whether to save)."""
        return os.access(self.home, os.W_OK | os.X_OK)

    def rm_tree(self, path: str) -> None:
        try:
            self.fs.rm(path, recursive=True)
        except FileNotFoundError:
            pass

    def write(self, path: str, write: Callable[[IO[bytes]], object], atomic: bool = True) -> None:
        """Write one file. ``atomic``: on a local disk through a temp name and a rename; on
        object storage the PUT itself is all-or-nothing, so the object is written in place."""
        target = path
        if self.local:
            self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
            if atomic:
                target = join(posixpath.dirname(path), f".{uuid.uuid4().hex}.tmp")
        try:
            with self.fs.open(target, "wb") as fh:
                write(fh)
        except BaseException:
            if target != path:  # a failed write leaves no temp file behind
                self.fs.rm(target)
            raise
        if target != path:
            self.fs.mv(target, path)

    def table_files(self, name: str, partition: str | None = None) -> list[str]:
        """A table's Parquet files (local paths or URIs), or only those of one hive partition."""
        rel = "" if partition is None else f"{TABLES[name].partition}={partition}"
        return [self.public(f) for f in self.find(self.path(name, rel))]

    def partition_mtimes(self, name: str) -> dict[str, float]:
        """Hive partition value -> newest modification time of its files (epoch seconds), from
        one listing; the null partition is left out."""
        prefix = f"{TABLES[name].partition}="
        out: dict[str, float] = {}
        for f, info in self.fs.find(self.path(name), detail=True).items():
            part = f.rsplit("/", 2)[-2]
            if (
                f.endswith(".parquet")
                and part.startswith(prefix)
                and part != prefix + NULL_PARTITION
            ):
                value = part[len(prefix) :]
                out[value] = max(out.get(value, 0.0), mtime(info))
        return out
