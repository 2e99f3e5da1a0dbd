"""Configuration shared by the Dagster assets and the CLI: one resource, the CLI's flags."""

from __future__ import annotations

import dagster as dg

from ingest.base import ParseContext
from warehouse.store import Warehouse


class GoodputConfig(dg.ConfigurableResource):
    """Where the warehouse lives and how to read sources (the same values the CLI takes)."""

    home: str = ""  # empty: $GOODPUT_HOME, else ./goodput_home
    sources: list[str] = []  # files / folders to ingest; empty: <home>/landing
    cluster: str = "default"
    tz: str = "UTC"

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def source_paths(self) -> list[str]:
        return list(self.sources) or [str(self.warehouse().landing)]

    def parse_context(self) -> ParseContext:
        return ParseContext(cluster=self.cluster, tz=self.tz)
