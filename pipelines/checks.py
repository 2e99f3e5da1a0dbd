"""Asset checks: the warehouse's and the analyses' invariants (``warehouse/checks.py``,
``analysis/checks.py``: plain functions returning a CheckResult) wrapped as Dagster checks
(``asset_check``), declared beside the assets they guard (``pipelines/assets/``): the ingest
checks one by one, the build's from ``analysis.checks.BUILD_CHECKS`` (``invariant_checks``).
Blocking checks stop downstream assets in the run; a failed ERROR check of a build fails
``goodput build`` (``failed_checks``).
"""

from collections.abc import Callable

import dagster as dg

from analysis import checks as analysis_checks
from analysis.checks import BUILD_CHECKS
from analysis.checks import ERROR
from analysis.checks import Invariant
from ingest.registry import formats
from pipelines.resources import Settings
from warehouse.checks import CheckResult


def primary_tables() -> dict[str, str]:
    """Format name -> the table that receives its records (what conservation counts)."""
    return {name: spec.primary for name, spec in formats().items()}


def _evaluation(result: CheckResult, severity: dg.AssetCheckSeverity) -> dg.AssetCheckResult:
    metadata = {
        k: dg.MetadataValue.json(v)
        if isinstance(v, dict)
        else "; ".join(v)
        if isinstance(v, list)
        else v
        for k, v in result.metadata.items()
    }
    return dg.AssetCheckResult(
        passed=result.passed, metadata=metadata, severity=severity, description=result.description
    )


def asset_check(
    name: str,
    asset: str,
    check: Callable[..., CheckResult],
    args: Callable[[Settings], tuple] = lambda settings: (),
    blocking: bool = False,
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR,
    kwargs: Callable[[Settings], dict] = lambda settings: {},
    after: tuple = (),
) -> dg.AssetChecksDefinition:
    """``check(warehouse, *args(config), **kwargs(config))`` as the Dagster check ``name`` on
    ``asset``, run after the assets ``after`` too (those that write the other tables it
    reads). The analyses' invariants check the warehouse the analyses wrote (a scope's, when
    one is set)."""
    scoped = check.__module__.startswith(f"{analysis_checks.__name__}.")

    @dg.asset_check(
        name=name,
        asset=asset,
        blocking=blocking,
        description=check.description,
        additional_deps=list(after) or None,
    )
    def _check(settings: Settings) -> dg.AssetCheckResult:
        wh = settings.analysis_warehouse() if scoped else settings.warehouse()
        return _evaluation(check(wh, *args(settings), **kwargs(settings)), severity)

    return _check


SEVERITY = {ERROR: dg.AssetCheckSeverity.ERROR, "warn": dg.AssetCheckSeverity.WARN}


def invariant_check(inv: Invariant) -> dg.AssetChecksDefinition:
    """One ``BUILD_CHECKS`` invariant as a Dagster check beside its asset, run once the writers
    of every table it reads are done, with its settings from the build's configuration."""
    from pipelines.assets.factory import writers  # the asset modules import this one

    return asset_check(
        inv.name,
        inv.asset,
        inv.check,
        blocking=inv.blocking,
        severity=SEVERITY[inv.severity],
        kwargs=lambda settings: {k: getattr(settings, k) for k in inv.settings},
        after=tuple(writers(*inv.reads, besides=inv.asset)),
    )


def invariant_checks(*assets: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    """The Dagster checks of the ``BUILD_CHECKS`` invariants that sit beside ``assets`` (a
    domain module's), in ``BUILD_CHECKS`` order."""
    keys = {k.to_user_string() for a in assets for k in a.keys}
    return [invariant_check(inv) for inv in BUILD_CHECKS if inv.asset in keys]


def failed_checks(evaluations) -> list:
    """The ERROR-severity check evaluations of a run that failed (what fails ``goodput build``)."""
    return [e for e in evaluations if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
