"""A scoped warehouse: the tables of a parent warehouse, filtered, under a home of its own.

``ScopedWarehouse(parent, home, inputs)`` reads each table named in ``inputs`` through the
parent's view with the given SQL condition (None: unfiltered) and keeps every other table in
its own Parquet root (``<home>/parquet``). So the same analysis code that reads and writes a
``Warehouse`` runs over a slice of the data (a cluster, a partition, a time range) and writes
its results apart from the parent's, never into them. Which tables are inputs and what the
conditions say is the caller's business (``analysis/scope.py``); this module knows only SQL.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from warehouse.store import Warehouse
from warehouse.store import WarehouseError


class ScopedWarehouse(Warehouse):
    def __init__(self, parent: Warehouse, home: str | os.PathLike, inputs: dict[str, str | None]):
        """``inputs``: table -> SQL condition over its columns (None: every row) for the tables
        read from ``parent``; the others are this warehouse's own."""
        self.parent = parent
        self.inputs = dict(inputs)
        super().__init__(home, Path(home) / "parquet", wait=parent.wait)

    def files(self, name: str, partition: str | None = None) -> list[str]:
        if name in self.inputs:
            return self.parent.files(name, partition)
        return super().files(name, partition)

    def partition_mtimes(self, name: str) -> dict[str, float]:
        if name in self.inputs:
            return self.parent.partition_mtimes(name)
        return super().partition_mtimes(name)

    def view_sql(
        self, name: str, guard: bool | None = None, zoned: bool = False, root: str | None = None
    ) -> str:
        if name not in self.inputs:
            return super().view_sql(name, guard, zoned, root)
        # the parent's files by their absolute location (``root`` names this warehouse's own);
        # connections run in UTC, so the conditions' TIMESTAMP literals compare right with zoned
        # times
        base = self.parent.view_sql(name, guard, zoned)
        where = self.inputs[name]
        return f"SELECT * FROM ({base}) WHERE {where}" if where else base

    def connect(
        self, database: str = ":memory:", read_only: bool = False, storage: str | None = None
    ) -> duckdb.DuckDBPyConnection:
        # the parent's connection: it can read the parent's root (object storage included), and
        # this warehouse's own root is always a local directory
        return self.parent.connect(database, read_only, storage)

    def reader(self, allow_files=(), spill: str | None = None) -> duckdb.DuckDBPyConnection:
        # untrusted SQL (``goodput sql`` over a scope) reads the parent's files for the inputs
        # and the scope's home (its own tables, its host list). A parent on object storage is
        # not opened to it (allow_files are local directories): such a query fails in one line
        parent = str(self.parent.parquet)
        return super().reader(
            [*allow_files, self.home, *([] if "://" in parent else [parent])], spill
        )

    def replace_table(self, name: str, df, partitions: str = "all") -> None:
        if name in self.inputs:
            raise WarehouseError(
                f"{name} belongs to the parent warehouse {self.parent.home}; a scope only reads it"
            )
        super().replace_table(name, df, partitions)

    def batch(self, batch_id: str):
        raise WarehouseError(
            f"a scoped warehouse ({self.home}) takes no ingest: ingest into {self.parent.home}"
        )
