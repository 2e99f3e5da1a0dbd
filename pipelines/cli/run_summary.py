"""What ``goodput demo`` and ``goodput build`` print after a run: the observation window and
skipped analyses, a summary computed from the warehouse, and the asset checks' outcome."""

from __future__ import annotations

from analysis.headline import BAND_COVERS
from analysis.headline import read_headline
from analysis.headline import selected_rates
from analysis.numbers import mean_time
from analysis.observation import stored_window
from warehouse.store import Warehouse


def status_lines(wh: Warehouse) -> list[str]:
    """The observation window and one line per analysis skipped or failed in the last build."""
    lines = []
    window = stored_window(wh)
    if window is not None:
        lines.append(window.line())
    st = wh.read("analysis_status", "status <> 'ok'").sort("analysis")
    lines += [f"{s}: {a} ({r})" for a, s, r in st.select("analysis", "status", "reason").rows()]
    return lines


def summary_lines(wh: Warehouse) -> list[str]:
    """A short summary computed from the warehouse (nothing printed here is canned); the
    headline numbers and selected rates come from ``analysis.headline``, as in the report."""
    q = wh.query
    head = read_headline(wh)
    s = q(
        "SELECT (SELECT count(*) FROM ingest_manifest) files, (SELECT "
        "coalesce(sum(rows_quarantined), 0) FROM ingest_manifest) quarantined, "
        "(SELECT count(DISTINCT host) FROM (SELECT unnest(nodes) host FROM job_attempts)) hosts"
    ).row(0, named=True)
    lines = [
        f"files ingested: {s['files']:,} ({s['quarantined']:,} records quarantined)",
        (
            f"hosts: {s['hosts']:,}  jobs: {head['jobs']:,}  attempts: {head['attempts']:,}  "
            f"GPU-hours: {head['gpu_hours']:,.0f}"
        ),
    ]
    failed = q(
        "SELECT state, count(*) n FROM job_attempts WHERE state NOT IN ('COMPLETED', 'RUNNING', "
        "'PENDING') GROUP BY 1 ORDER BY 2 DESC"
    )
    if failed.height:
        lines.append(
            "attempts not completed, by state: " + ", ".join(f"{a} {n:,}" for a, n in failed.rows())
        )
    mix = q(  # the class as stored, the word `goodput sql` and the report show
        "SELECT coalesce(cause_class, 'unknown') cause_class, count(*) n FROM interruptions "
        "WHERE NOT planned GROUP BY 1 ORDER BY 2 DESC, 1"
    )
    if mix.height:
        total = mix["n"].sum()
        lines.append(
            f"unexpected interruptions: {total:,} (lost {head['lost_gpu_hours']:,.0f} "
            "GPU-hours); by cause:"
        )
        lines += [f"  {c:<12} {n:>5,}  {100 * n / total:5.1f}%" for c, n in mix.rows()]
        infra, every = (
            "n/a" if h is None else f"{h:.2f} h"
            for h in (head["mtti_infrastructure_hours"], head["mtti_all_hours"])
        )
        lines.append(
            f"fleet MTTI: infrastructure {infra} ({head['infrastructure']:,} interruptions), all "
            f"causes {every} (+{head['workload']:,} the jobs' own failures)"
        )
    rates = selected_rates(wh.read("failure_rates")).sort(
        "rate_per_1k_unit_days", descending=True, nulls_last=True
    )
    if rates.height:
        lines.append(
            "failure rates per 1,000 unit-days (95% CI), selected model (as `goodput fit`):"
        )
        from analysis.survival import age_reading  # the class's Weibull age reading, one place

        lines += [
            f"  {r['component_class']:<12} {r['rate_per_1k_unit_days']:8.3f} "
            f"[{r['rate_ci_low']:.3f}, {r['rate_ci_high']:.3f}]"
            f"  {r['model']:<11} {r['n_events']:>4} failures  {age_reading(r) or ''}"
            for r in rates.iter_rows(named=True)
        ]
    if head["goodput_gpu_hours"] is not None:
        lines.append(
            f"measured goodput: {head['goodput_gpu_hours']:.1%} weighted by GPU-hours, "
            f"{head['goodput_mean']:.1%} mean over job chains"
        )
    proj = q(
        "SELECT n_gpus, mtti_hours, optimal_interval_hours, goodput, goodput_ci_low, "
        "goodput_ci_high, scope FROM goodput_projections "
        "WHERE scenario = 'sensitivity' AND knob = 'baseline' LIMIT 1"
    )
    if proj.height:
        n, mtti, interval, g, lo, hi, scope = proj.row(0)
        lines.append(
            f"projected for a {n:,}-GPU job, {scope or 'hardware'} scope: MTTI {mean_time(mtti)}, "
            f"checkpoint every {60 * interval:.0f} min (Daly), "
            f"goodput {g:.1%} [{lo:.1%}, {hi:.1%}] (the 95% band {BAND_COVERS})"
        )
    return lines


def checks_line(evaluations) -> str:
    failed = [e.check_name for e in evaluations if not e.passed]
    return f"asset checks: {len(evaluations) - len(failed)}/{len(evaluations)} passed" + (
        f" (failed: {', '.join(failed)})" if failed else ""
    )


def failure_lines(evaluations) -> list[str]:
    """One line per failed ERROR check of a run: its name, what it checks, how many rows break
    it and a few of them (the metadata ``analysis.checks.violations`` writes)."""
    from pipelines.checks import failed_checks

    return [
        _failure_line(
            e.check_name, e.description, {k: getattr(v, "value", v) for k, v in e.metadata.items()}
        )
        for e in failed_checks(evaluations)
    ]


def invariant_failure_lines(evaluated, scope: str) -> list[str]:
    """``failure_lines`` of the invariants evaluated on a scope's warehouse
    (``analysis.checks.evaluate``: what a scoped build recomputed, or reused), each naming the
    scope; one that could not run is a failure too."""
    from analysis.checks import ERROR

    lines = []
    for e in evaluated:
        if not e.failed or e.invariant.severity != ERROR:
            continue
        meta = e.result.metadata if e.result is not None else {"examples": [e.error]}
        lines.append(
            _failure_line(e.invariant.name, e.invariant.description, meta, f" in scope {scope}")
        )
    return lines


def _failure_line(name: str, description: str, meta: dict, where: str = "") -> str:
    line = f"check failed{where}: {name} ({description})"
    count = meta.get("violations")
    if count is not None:
        line += f": {count:,} violation(s)"
    examples = meta.get("examples")
    if examples:  # a list as a plain check returns it, one text as Dagster's metadata holds it
        line += f", e.g. {examples if isinstance(examples, str) else '; '.join(examples)}"
    return line
