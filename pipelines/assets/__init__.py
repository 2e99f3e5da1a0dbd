"""Dagster assets: thin wrappers over the plain functions in ingest/, analysis/, dashboards/,
one module per domain, in the data's direction (``DOMAINS``).

Groups follow the data: ingest (sources -> Parquet), warehouse (rollups, derived events),
analysis (interruptions, lifetimes, fits, goodput), catalog (the DuckDB views over all of it),
dashboards (the report). Each asset reports what a user looks for in the UI: row counts
(``dagster/row_count``), quarantine, coverage, fit and goodput summaries, the report path; its
definition carries kinds, owners and the column schema of the table it writes. A module's asset
checks sit beside its assets.

A domain module is imported after the modules whose tables it reads: an asset's deps are the
assets that write the tables it declares (``factory.writers``), and the catalog depends on
every table written before it. Adding a domain is one line in ``DOMAINS``.
"""

import importlib

import dagster as dg

DOMAINS = tuple(
    importlib.import_module(name)
    for name in (
        "pipelines.assets.ingest",
        "pipelines.assets.telemetry",
        "pipelines.assets.slowness",
        "pipelines.assets.analysis",
        "pipelines.assets.report",
        "pipelines.assets.fleetsim",
    )
)

# the names the CLI, the sensors and the tests use (imported after DOMAINS: in its order)
from pipelines.assets.analysis import component_lifetimes
from pipelines.assets.analysis import failure_fits
from pipelines.assets.analysis import goodput_projections
from pipelines.assets.ingest import TELEMETRY_DAYS
from pipelines.assets.ingest import ingest_metadata
from pipelines.assets.ingest import ingested_sources
from pipelines.assets.ingest import pull_metadata
from pipelines.assets.ingest import pulled_sources
from pipelines.assets.ingest import register_days
from pipelines.assets.ingest import rollup_days
from pipelines.assets.report import leadership_report
from pipelines.assets.report import warehouse_catalog

BY_DOMAIN = {m: dg.load_assets_from_modules([m]) for m in DOMAINS}
ALL_ASSETS = [a for assets in BY_DOMAIN.values() for a in assets]
ALL_CHECKS = dg.load_asset_checks_from_modules(DOMAINS)
INGEST_ASSETS = [ingested_sources]
PULL_ASSETS = [pulled_sources]
# a domain declaring jobs of its own (``JOBS``) runs in them; the other domains' assets but the
# sources are the build job's: what `goodput build` runs (load_assets_from_modules returns
# copies: assets are told apart by their keys)
DOMAIN_JOBS = [job for m in DOMAINS for job in getattr(m, "JOBS", ())]
BUILD_ASSETS = [
    a
    for m, assets in BY_DOMAIN.items()
    if not hasattr(m, "JOBS")
    for a in assets
    if not {ingested_sources.key, pulled_sources.key} & a.keys
]
# what each job runs, as the UI and the CLI's recorded runs describe it
JOB_DESCRIPTIONS = {
    "ingest": "Parse new source files (the landing folder, or the paths given) into the warehouse.",
    "pull": "Pull every live source of HOME/sources.toml (slurmdbd, TSDB, BMCs) from its cursor.",
    "build": "Everything downstream of ingest and pull: rollups, attribution, fits, goodput, "
    "report.",
    "refit": "Lifetimes and failure fits again (a new observation window), then the projections.",
    "build_scope": "The aggregates of a scope (a cluster, partition, account, user or period: "
    "fits, MTBF, availability, node health, breakdowns, projections) recomputed from the whole "
    "fleet's rows filtered to it, into its own warehouse.",
}

__all__ = [
    "ALL_ASSETS",
    "ALL_CHECKS",
    "BUILD_ASSETS",
    "DOMAINS",
    "DOMAIN_JOBS",
    "INGEST_ASSETS",
    "JOB_DESCRIPTIONS",
    "PULL_ASSETS",
    "TELEMETRY_DAYS",
    "component_lifetimes",
    "failure_fits",
    "goodput_projections",
    "ingest_metadata",
    "ingested_sources",
    "leadership_report",
    "pull_metadata",
    "pulled_sources",
    "register_days",
    "rollup_days",
    "warehouse_catalog",
]
