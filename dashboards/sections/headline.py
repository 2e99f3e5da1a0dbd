"""Headline figures: fleet size, GPU-hours, interruptions, MTTI, measured and projected goodput, as
tiles (HTML, laid out in as many columns as the page is wide: one on a phone)."""

from __future__ import annotations

import polars as pl

from analysis.headline import fleet_headline
from analysis.slowness.at_scale import running_slow_note
from dashboards.section import NO_DATA
from dashboards.section import SCOPE_WORDS
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import hours
from dashboards.section import interruption_scope
from dashboards.section import mean_time
from dashboards.section import num
from dashboards.section import pct
from dashboards.section import projection_at
from dashboards.section import telemetry_rollup
from dashboards.section import tile

KEY = "headline"
TITLE = "Headline figures"
TABLES = (
    "job_attempts",
    "interruptions",
    "goodput_jobs",
    "goodput_projections",
    "component_history",
)


def _fleet_size(wh, coverage: pl.DataFrame, ch: pl.DataFrame) -> tuple[int, int]:
    """(hosts, GPUs): hosts seen by any source; GPUs as distinct (host, gpu) in telemetry,
    else GPU slots in the component history."""
    hosts = set(coverage["host"].to_list()) - {"(no host)"}
    hosts |= set(ch["host"].drop_nulls().to_list())
    gpus = 0
    for table in (telemetry_rollup(wh), "gpu_samples"):
        if table and wh.files(table):
            gpus = wh.query(
                f"SELECT count(DISTINCT (host, gpu)) FROM ({wh.view_sql(table)}) WHERE gpu IS NOT "
                "NULL"
            ).item()
            break
    if not gpus and ch.height:
        gpus = ch.filter(pl.col("component_class") == "gpu")["slot"].n_unique()
    return len(hosts), int(gpus or 0)


def build(ctx: ReportContext) -> Section:
    t, target = ctx.t, ctx.target_gpus
    s = Section(KEY, TITLE)
    att, intr, jobs, proj = (
        t["job_attempts"],
        t["interruptions"],
        t["goodput_jobs"],
        t["goodput_projections"],
    )
    hosts, gpus = _fleet_size(ctx.wh, ctx.coverage, t["component_history"])
    if not (hosts or att.height):
        s.note = NO_DATA
        return s
    head = fleet_headline(att, intr, jobs)
    gpu_hours, fm, measured = head["gpu_hours"], head, head["goodput_gpu_hours"]
    span_h, unexpected = fm["span_hours"], fm["unexpected"]
    scope = interruption_scope(proj)
    mtti = fm["mtti_all_hours"] if scope == "all" else fm["mtti_infrastructure_hours"]
    at = projection_at(proj, target)
    figures = [
        ("fleet", f"{hosts:,} hosts", f"{gpus:,} GPUs"),
        (
            "GPU-hours used by jobs",
            num(gpu_hours),
            f"{att.height:,} attempts" + (f" over {hours(span_h)}" if span_h else ""),
        ),
        (
            "unexpected interruptions",
            f"{unexpected:,}",
            f"{fm['infrastructure']:,} infrastructure, {fm['workload']:,} the jobs' own; "
            f"{intr.height - unexpected:,} planned"
            if intr.height
            else "interruptions not attributed yet",
        ),
        (
            f"time between interruptions, {scope} (fleet-wide)",
            mean_time(mtti),
            f"all causes: {mean_time(fm['mtti_all_hours'])}; job time span ÷ interruptions",
        ),
        (
            "measured goodput",
            pct(measured),
            "weighted by GPU-hours" if measured is not None else "goodput_jobs empty",
        ),
    ]
    if at is not None:
        r = at
        figures.append(
            (
                f"projected goodput at {target:,} GPUs",
                pct(r["goodput"]),
                (
                    f"95% band {pct(r['goodput_ci_low'])}–{pct(r['goodput_ci_high'])}; "
                    f"{running_slow_note(r)}"
                ),
            )
        )
    else:
        figures.append(
            (f"projected goodput at {target:,} GPUs", "n/a", "no projection at this scale yet")
        )
    s.extra_html = (
        '<div class="tiles">'
        + "".join(
            tile(label, value, detail, f"headline-{i}")
            for i, (label, value, detail) in enumerate(figures)
        )
        + "</div>"
    )
    parts = [f"{hosts:,} hosts with {gpus:,} GPUs ran {num(gpu_hours)} GPU-hours of jobs"]
    if unexpected:
        parts.append(
            f"{unexpected:,} unexpected interruptions ({fm['workload']:,} the jobs' own "
            f"failures), one every {mean_time(fm['mtti_infrastructure_hours'])} across the fleet "
            f"from infrastructure and one every {mean_time(fm['mtti_all_hours'])} from all causes"
        )
    if measured is not None:
        parts.append(f"measured goodput is {pct(measured)}")
    if at is not None:
        r = at
        parts.append(
            f"the rates project {pct(r['goodput'])} for one {target:,}-GPU job "
            f"(scope {SCOPE_WORDS.get(scope, scope)}, the same as the time between interruptions "
            f"above; {running_slow_note(r)})"
        )
    s.reading = "; ".join(parts) + "."
    return s
