"""A scoped warehouse: the tables of a parent warehouse, filtered, and optionally tables of its
own under a home of its own.

``ScopedWarehouse(parent, inputs, home, label)`` reads each table named in ``inputs`` through
the parent's view with the given SQL condition (None: every row). With a ``home``, every other
table is its own (``<home>/parquet``): the same analysis code that reads and writes a
``Warehouse`` then runs over a slice of the data and writes its results apart from the
parent's, never into them. Without one it is a read-only filter of the parent, and a table
outside ``inputs`` is refused (reading it raises ``NotInScope``; in SQL its view raises when
queried) rather than shown whole under the slice's name. Which tables are inputs and what the
conditions say is the caller's business (``analysis/scope.py``); this module knows only SQL.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import polars as pl

from warehouse._sql import sql_str
from warehouse._sql import typed
from warehouse.catalog import Catalog
from warehouse.schemas import TABLES
from warehouse.store import Warehouse
from warehouse.store import WarehouseError


class NotInScope(WarehouseError):
    """A table a filtered view cannot show for its slice (an aggregate of the whole fleet)."""


class ScopedCatalog(Catalog):
    """The query surface of a ``ScopedWarehouse``: its inputs through the parent's views,
    filtered; its other tables its own (``own_home``) or refused."""

    def __init__(self, scope: ScopedWarehouse, own: Catalog):
        super().__init__(own.storage, own.layout, own.lock)
        self.parent = scope.parent
        self.inputs = scope.inputs
        self.own_home = scope.own_home
        self.refused = scope.refused

    def files(self, name: str, partition: str | None = None) -> list[str]:
        if name in self.inputs:
            return self.parent.files(name, partition)
        return super().files(name, partition) if self.own_home else []

    def view_sql(
        self, name: str, guard: bool | None = None, zoned: bool = False, root: str | None = None
    ) -> str:
        if name not in self.inputs:
            if self.own_home:
                return super().view_sql(name, guard, zoned, root)
            # one typed row that raises when the view is queried (DuckDB does not fold it when
            # the view is created)
            cols = ", ".join(
                f'{typed("NULL", t, zoned)} AS "{c}"' for c, t in TABLES[name].columns.items()
            )
            return f"SELECT {cols} WHERE error({sql_str(self.refused(name))}) IS NULL"
        # the parent's files by their absolute location (``root`` names this warehouse's own);
        # connections run in UTC, so the conditions' TIMESTAMP literals compare right with zoned
        # times
        base = self.parent.view_sql(name, guard, zoned)
        where = self.inputs[name]
        return f"SELECT * FROM ({base}) WHERE {where}" if where else base

    def read(self, name: str, where: str | None = None) -> pl.DataFrame:
        if name not in self.inputs and not self.own_home:
            raise NotInScope(self.refused(name))
        return super().read(name, where)

    def connect(self, *args, **kwargs) -> duckdb.DuckDBPyConnection:
        # the parent's connection (``Catalog.connect``'s arguments): it can read the parent's
        # root (object storage included), and this warehouse's own root is always a local
        # directory
        return self.parent.connect(*args, **kwargs)

    def reader(
        self, allow_files=(), spill: str | None = None, names: list[str] | None = None
    ) -> duckdb.DuckDBPyConnection:
        # untrusted SQL (``goodput sql`` over a scope) reads the parent's files for the inputs
        # and the scope's home (its own tables). A parent on object storage is not opened to it
        # (allow_files are local directories): such a query fails in one line
        parent = str(self.parent.parquet)
        own = [self.storage.home] if self.own_home else []
        dirs = [*allow_files, *own, *([] if "://" in parent else [parent])]
        return super().reader(dirs, spill, names)


class ScopedWarehouse(Warehouse):
    def __init__(
        self,
        parent: Warehouse,
        inputs: dict[str, str | None],
        home: str | os.PathLike | None = None,
        label: str = "the scope",
    ):
        """``inputs``: table -> SQL condition over its columns (None: every row) for the tables
        read from ``parent``; the others are this warehouse's own (in ``home``) or, without a
        home, refused. ``label`` names the slice in messages."""
        self.parent = parent
        self.inputs = dict(inputs)
        self.label = label
        self.own_home = home is not None
        if home is None:  # a reader's handle on the parent's home: it writes nothing
            super().__init__(parent.home, parent.parquet, wait=parent.wait, read_only=True)
        else:
            super().__init__(home, Path(home) / "parquet", wait=parent.wait)

    def _catalog(self) -> Catalog:
        return ScopedCatalog(self, super()._catalog())

    def refused(self, name: str) -> str:
        return (
            f"{name} is computed over the whole fleet and has no rows of its own for "
            f"{self.label}; query it without a scope"
        )

    def partition_mtimes(self, name: str) -> dict[str, float]:
        if name in self.inputs:
            return self.parent.partition_mtimes(name)
        return super().partition_mtimes(name) if self.own_home else {}

    def replace_table(self, name: str, df, partitions: str = "all") -> None:
        if name in self.inputs or not self.own_home:
            raise WarehouseError(
                f"{name} belongs to the parent warehouse {self.parent.home}; a scope only reads it"
            )
        super().replace_table(name, df, partitions)

    def batch(self, batch_id: str):
        raise WarehouseError(
            f"a scoped warehouse ({self.home}) takes no ingest: ingest into {self.parent.home}"
        )
