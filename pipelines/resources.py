"""Configuration shared by the Dagster assets and the CLI: one resource, the CLI's flags."""

import os
from datetime import UTC
from datetime import datetime

import dagster as dg

from analysis.assumptions import ATTRIBUTION_AFTER_S
from analysis.assumptions import ATTRIBUTION_BEFORE_S
from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import CKPT_INTERVAL_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import RESTART_S
from analysis.assumptions import TARGET_GPUS
from analysis.scope import Scope
from analysis.scope import scope_warehouse
from ingest.base import ParseContext
from warehouse.store import Warehouse

# first day a Dagster backfill of the live sources offers (the pulled_sources asset's daily
# partitions)
PULL_BACKFILL_START = os.environ.get("GOODPUT_PULL_BACKFILL_START", "2024-01-01")


def select_sources(wh: Warehouse, names: list[str] | tuple[str, ...] = ()) -> list:
    """The sources of ``wh``'s ``sources.toml``, or the ones ``names`` names (an unknown name is
    a one-line ``SourceConfigError``)."""
    from sources import kinds
    from sources.base import SourceConfigError
    from sources.base import load_sources

    every = load_sources(wh.home, kinds())
    known = {s.name: s for s in every}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SourceConfigError(
            f"no source named {', '.join(unknown)} in {wh.home / 'sources.toml'}; "
            f"it has {', '.join(known) or 'none'}"
        )
    return [known[n] for n in names] if names else every


HOME_GPU_HOUR_COST = -1.0  # Settings.gpu_hour_cost: the home's


class Settings(dg.ConfigurableResource):
    """Where the warehouse lives, how to read sources, and the analysis assumptions.

    The same values the CLI takes as flags; set them in the launchpad or in code."""

    home: str = ""  # empty: $GOODPUT_HOME, else ./goodput_home
    # Parquet root, a directory or s3://bucket/prefix; empty: $GOODPUT_WAREHOUSE_URI, else
    # <home>/parquet
    warehouse_uri: str = ""
    sources: list[str] = []  # noqa: RUF012 (pydantic copies defaults) - empty: <home>/landing
    # cluster name stored with every record; empty: the cluster a record names, else "default"
    cluster: str = ""
    tz: str = "UTC"
    ingest_jobs: int = 0  # processes that parse source files; 0: one per core
    observed_from: str = (
        ""  # ISO start of the observation window; empty: inferred from the data's span
    )
    observed_to: str = ""  # ISO end (units still in service are censored here); empty: inferred
    nodes_per_rack: int = 0  # rack covariate from host order; 0: no rack rule
    window_before_s: float = ATTRIBUTION_BEFORE_S  # attribution window around an attempt's end
    window_after_s: float = ATTRIBUTION_AFTER_S
    ckpt_interval_s: float = (
        CKPT_INTERVAL_S  # checkpoint assumptions for lost work / measured goodput
    )
    ckpt_cost_s: float = CKPT_COST_S
    restart_s: float = RESTART_S
    target_gpus: int = TARGET_GPUS  # job size the projections and the report focus on
    gpus_per_node: int = GPUS_PER_NODE
    # $ per GPU-hour the report prices lost GPU-hours at (0: no cost); below 0: the home's
    # goodput.toml, else none (``goodput build`` passes the one it resolved)
    gpu_hour_cost: float = HOME_GPU_HOUR_COST
    max_quarantine_ratio: float = 0.05  # asset check threshold
    # scope of the analysis assets (analysis/scope.py); all empty: the whole fleet
    scope_from: str = ""  # ISO start (inclusive) of the jobs and events analysed
    scope_to: str = ""  # ISO end (exclusive)
    scope_cluster: str = ""
    scope_partition: str = ""
    scope_account: str = ""
    scope_user: str = ""

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None, self.warehouse_uri or None)

    def scope(self) -> Scope:
        return Scope(
            naive_utc(self.scope_from),
            naive_utc(self.scope_to),
            self.scope_cluster or None,
            self.scope_partition or None,
            self.scope_account or None,
            self.scope_user or None,
        )

    def analysis_warehouse(self) -> Warehouse:
        """Where the analysis assets read and write: the warehouse itself, or with a scope set
        its scoped warehouse (``HOME/scopes/<slug>``: the whole fleet's rows filtered, the
        aggregates its own)."""
        wh, scope = self.warehouse(), self.scope()
        return wh if scope.whole else scope_warehouse(wh, scope)

    def source_paths(self) -> list[str]:
        return list(self.sources) or [str(self.warehouse().landing)]

    def parse_context(self) -> ParseContext:
        return ParseContext(
            cluster=self.cluster or "default", cluster_given=bool(self.cluster), tz=self.tz
        )

    def window_bounds(self) -> tuple[datetime | None, datetime | None]:
        """(observed_from, observed_to) as naive UTC; None where inferred from the data. A
        scope's bounds are the window where no explicit one is given."""
        return naive_utc(self.observed_from) or naive_utc(self.scope_from), naive_utc(
            self.observed_to
        ) or naive_utc(self.scope_to)


def naive_utc(text: str) -> datetime | None:
    """An ISO time as naive UTC (the warehouse's clock); None for an empty one."""
    if not text:
        return None
    t = datetime.fromisoformat(text)
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
