"""The results' limits: every failing class has a converged selected fit, goodput and availability
fractions lie in [0, 1] with their intervals around them, and the sources' time spans agree."""

from __future__ import annotations

from analysis.checks._utils import EXAMPLES
from analysis.checks._utils import violations
from analysis.headline import selected_rates
from analysis.observation import source_spans
from analysis.observation import spans_disagree
from warehouse.checks import invariant
from warehouse.checks import query_tables
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
    bad = [f"{c}: no selected model" for c in missing]
    bad += [f"{c}: selected model did not converge" for c in unconverged]
    return not bad, {
        "classes": len(classes),
        "missing": ", ".join(missing),
        "unconverged": ", ".join(unconverged),
        "violations": len(bad),
        "examples": bad[:EXAMPLES],
    }


_GOODPUTS = {  # table -> (row in words, its goodput columns): measured and projected goodput
    "goodput_jobs": ("'job ' || job_id", ("goodput",)),
    "goodput_breakdown": ("dimension || ' ' || coalesce(value, '(none)')", ("goodput",)),
    "goodput_trend": ("period || ' from ' || strftime(period_start, '%Y-%m-%d')", ("goodput",)),
    "goodput_projections": (
        "concat_ws(' ', scenario, method, knob, n_gpus::VARCHAR || ' GPUs')",
        ("goodput", "goodput_ci_low", "goodput_ci_high"),
    ),
}


@invariant("Goodput (measured and projected) lies in [0, 1] with its CI around it.")
def goodput_bounds(wh: Warehouse) -> tuple[bool, dict]:
    """No job chain's measured goodput missing or outside [0, 1], no slice's or period's outside
    it, no projection (nor its CI bounds) outside it, and every projection's CI contains its
    estimate."""
    parts = []
    for table, (label, cols) in _GOODPUTS.items():
        out = " OR ".join(f"{c} < 0 OR {c} > 1 OR isnan({c})" for c in cols)
        if table == "goodput_jobs":
            out += " OR goodput IS NULL"
        if "goodput_ci_low" in cols:
            out += " OR goodput_ci_low > goodput + 1e-9 OR goodput_ci_high < goodput - 1e-9"
        shown = " || ', ' || ".join(
            f"'{c} ' || coalesce(round({c}, 4)::VARCHAR, 'null')" for c in cols
        )
        parts.append(
            f"SELECT '{table}' AS \"table\", {label} AS row, {shown} AS value "
            f"FROM {table} WHERE {out}"
        )
    rows = query_tables(wh, " UNION ALL ".join(parts), *_GOODPUTS)
    counts = rows.group_by("table").len()
    per = dict(counts.rows())
    return violations(
        rows,
        lambda r: f"{r['table']} {r['row']}: {r['value']}",
        jobs_out_of_bounds=per.get("goodput_jobs", 0),
        projections_out_of_bounds=per.get("goodput_projections", 0),
    )


@invariant("Availability and its CI lie in [0, 1], with the CI around the estimate.")
def availability_bounds(wh: Warehouse) -> tuple[bool, dict]:
    """Every system's and node's availability (where known) and its CI bounds in [0, 1], the
    CI containing the estimate."""
    rows = query_tables(
        wh,
        """
        SELECT source, system, level, host, availability, availability_ci_low AS lo,
            availability_ci_high AS hi
        FROM availability WHERE availability IS NOT NULL AND (
            availability < 0 OR availability > 1 OR isnan(availability)
            OR availability_ci_low < 0 OR availability_ci_high > 1
            OR availability_ci_low > availability + 1e-9
            OR availability_ci_high < availability - 1e-9)
        ORDER BY system, host NULLS FIRST""",
        "availability",
    )
    return violations(
        rows,
        lambda r: (
            f"{r['source']} {r['system']} {r['host'] or r['level']}: "
            f"{r['availability']:.4g} [{r['lo']}, {r['hi']}]"
        ),
    )


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
        "violations": len(bad),
        "examples": bad[:EXAMPLES],
    }
