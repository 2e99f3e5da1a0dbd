"""Asset checks: the warehouse's and the analyses' invariants (``warehouse/checks.py``,
``analysis/checks.py``: plain functions returning a CheckResult) wrapped as Dagster checks on
the assets they guard. Blocking checks stop downstream assets in the run.
"""

from collections.abc import Callable

import dagster as dg

from analysis import checks as analysis_checks
from ingest.registry import formats
from pipelines.resources import GoodputConfig
from warehouse import checks as warehouse_checks
from warehouse.checks import CheckResult


def primary_tables() -> dict[str, str]:
    """Format name -> the table that receives its records (what conservation counts)."""
    return {name: spec.primary for name, spec in formats().items()}


def _evaluation(result: CheckResult, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
    metadata = {k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in result.metadata.items()}
    return dg.AssetCheckResult(passed=result.passed, metadata=metadata, severity=severity, description=result.description)


def _asset_check(
    name: str,
    asset: str,
    check: Callable[..., CheckResult],
    args: Callable[[GoodputConfig], tuple] = lambda goodput: (),
    blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
) -> dg.AssetChecksDefinition:
    """``check(warehouse, *args(config))`` as the Dagster check ``name`` on ``asset``. The
    analyses' invariants check the warehouse the analyses wrote (a scope's, when one is set)."""
    scoped = check.__module__ == analysis_checks.__name__

    @dg.asset_check(name=name, asset=asset, blocking=blocking, description=check.description)
    def _check(goodput: GoodputConfig) -> dg.AssetCheckResult:
        wh = goodput.analysis_warehouse() if scoped else goodput.warehouse()
        return _evaluation(check(wh, *args(goodput)), severity)

    return _check


conservation_check = _asset_check(
    "conservation_check", "ingested_sources", warehouse_checks.conservation, lambda goodput: (primary_tables(),), blocking=True
)
pull_conservation_check = _asset_check(
    "pull_conservation_check", "pulled_sources", warehouse_checks.pull_conservation, blocking=True
)
schema_check = _asset_check("schema_check", "ingested_sources", warehouse_checks.schema, blocking=True)
quarantine_ratio_check = _asset_check(
    "quarantine_ratio_check", "ingested_sources", warehouse_checks.quarantine_ratio,
    lambda goodput: (goodput.max_quarantine_ratio,), severity=dg.AssetCheckSeverity.WARN,
)
duplicate_keys_check = _asset_check("duplicate_keys_check", "warehouse_catalog", warehouse_checks.duplicate_keys)
fits_converged_check = _asset_check("fits_converged_check", "failure_rates", analysis_checks.fits_converged, blocking=True)
goodput_bounds_check = _asset_check("goodput_bounds_check", "goodput_projections", analysis_checks.goodput_bounds)
source_spans_check = _asset_check(
    "source_spans_check", "component_lifetimes", analysis_checks.spans_agree, severity=dg.AssetCheckSeverity.WARN
)

ALL_CHECKS = [source_spans_check, conservation_check, pull_conservation_check, schema_check, quarantine_ratio_check, duplicate_keys_check, fits_converged_check, goodput_bounds_check]
