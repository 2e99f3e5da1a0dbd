"""Asset checks: the warehouse's and the analyses' invariants (``warehouse/checks.py``,
``analysis/checks.py``: plain functions returning a CheckResult) wrapped as Dagster checks
(``asset_check``), declared beside the assets they guard (``pipelines/assets/``). Blocking
checks stop downstream assets in the run.
"""

from collections.abc import Callable

import dagster as dg

from analysis import checks as analysis_checks
from ingest.registry import formats
from pipelines.resources import GoodputConfig
from warehouse.checks import CheckResult


def primary_tables() -> dict[str, str]:
    """Format name -> the table that receives its records (what conservation counts)."""
    return {name: spec.primary for name, spec in formats().items()}


def _evaluation(result: CheckResult, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
    metadata = {
        k: dg.MetadataValue.json(v) if isinstance(v, dict) else v
        for k, v in result.metadata.items()
    }
    return dg.AssetCheckResult(
        passed=result.passed, metadata=metadata, severity=severity, description=result.description
    )


def asset_check(
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
