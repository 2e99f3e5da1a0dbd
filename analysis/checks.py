"""The analyses' invariants as plain checks: every failing class has a converged selected fit,
goodput (measured and projected) lies in [0, 1] with its CI around it, and the sources' time
spans agree.

Each takes a :class:`~warehouse.store.Warehouse` and returns a
:class:`~warehouse.checks.CheckResult`; ``pipelines/checks.py`` wraps them as Dagster asset
checks.
"""

from __future__ import annotations

from analysis.headline import selected_rates
from analysis.observation import source_spans
from analysis.observation import spans_disagree
from warehouse.checks import invariant
from warehouse.store import Warehouse


@invariant("Every class with failures has a converged, AIC-selected model.")
def fits_converged(wh: Warehouse) -> tuple[bool, dict]:
    """Every selected model converged, and every class with lifetimes has a selected model."""
    rates = wh.read("failure_rates")
    lt = wh.read("component_lifetimes")
    classes = set(lt.filter(lt["event"])["component_class"].unique()) if lt.height else set()
    sel = selected_rates(rates)
    missing = (
        sorted(classes - set(sel["component_class"].to_list())) if sel.height else sorted(classes)
    )
    unconverged = (
        sorted(sel.filter(~sel["converged"])["component_class"].unique().to_list())
        if sel.height
        else []
    )
    return not missing and not unconverged, {
        "classes": len(classes),
        "missing": ", ".join(missing),
        "unconverged": ", ".join(unconverged),
    }


@invariant("Measured and projected goodput lie in [0, 1] with CI bounds around the estimate.")
def goodput_bounds(wh: Warehouse) -> tuple[bool, dict]:
    """No job's measured goodput and no projection (nor its CI bounds) outside [0, 1], and every
    projection's CI contains its estimate."""
    with wh.connect() as con:
        jobs = con.execute(
            f"SELECT count(*) FROM ({wh.view_sql('goodput_jobs')}) "
            "WHERE goodput < 0 OR goodput > 1 OR goodput IS NULL"
        ).fetchall()[0][0]
        proj = con.execute(
            f"SELECT count(*) FROM ({wh.view_sql('goodput_projections')}) "
            "WHERE goodput < 0 OR goodput > 1 OR "
            "goodput_ci_low > goodput + 1e-9 OR goodput_ci_high < goodput - 1e-9 OR "
            "goodput_ci_low < 0 OR goodput_ci_high > 1"
        ).fetchall()[0][0]
    return jobs == 0 and proj == 0, {"jobs_out_of_bounds": jobs, "projections_out_of_bounds": proj}


@invariant(
    "The sources' time spans agree (e.g. telemetry does not end a month after everything else)."
)
def spans_agree(wh: Warehouse) -> tuple[bool, dict]:
    """Every dated source's robust span agrees with the others' (no source starting or ending
    a week, and a quarter of the window, apart from all the rest)."""
    spans = source_spans(wh)
    bad = spans_disagree(spans)
    return not bad, {
        "sources": spans.height,
        "disagree": "; ".join(bad),
        "outlying_times": int(spans["outliers"].sum()),
    }
