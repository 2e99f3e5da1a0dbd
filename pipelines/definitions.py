"""Dagster entry point: ``dagster dev`` from the repository root loads ``defs`` from here."""

import dagster as dg

from pipelines.assets import ALL_ASSETS
from pipelines.resources import GoodputConfig

defs = dg.Definitions(assets=ALL_ASSETS, resources={"goodput": GoodputConfig()})
