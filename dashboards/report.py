"""The leadership report: one self-contained HTML file (Vega, Vega-Lite and Vega-Embed inlined,
no network), plus a PNG and an SVG per chart for slides.

Each section is a titled chart and one sentence computed from the same numbers the chart
draws; a section whose tables are empty says so instead. Everything from the data is text:
strings placed in HTML go through ``html.escape``, chart specs travel as JSON inside a
``type="application/json"`` script with ``<``, ``>`` and ``&`` written as ``\\u003c`` escapes,
and tooltips use Vega-Embed's default (escaping) handler.
"""

from __future__ import annotations

import html
import json
import math
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import altair as alt
import polars as pl
import vl_convert as vlc

from analysis.assumptions import TARGET_GPUS
from analysis.goodput_measured import fleet_mtti
from analysis.taxonomy import DEFAULT_SCOPE, WORKLOAD, WORKLOAD_DOMAIN
from dashboards import charts
from dashboards.vendor import javascript_bundle, vegalite_version

NO_DATA = "no data yet: run goodput demo / goodput build"
SCOPE_WORDS = {
    "hardware": "hardware fits only",
    "infrastructure": "infrastructure: everything but the job's own failures",
    "all": "all causes, the job's own failures included",
}


@dataclass
class Section:
    key: str  # chart file name and element id (a fixed identifier, never data)
    title: str
    chart: alt.TopLevelMixin | None = None
    reading: str = ""
    note: str = ""  # shown instead of the chart when there is none
    extra_html: str = ""  # already escaped
    spec: dict | None = field(default=None, repr=False)


# ----------------------------------------------------------------------------- formatting
def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{100 * x:.{digits}f}%"


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "n/a"
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _hours(h: float | None) -> str:
    if h is None or not math.isfinite(h):
        return "n/a"
    if h < 1:
        return f"{h * 60:.0f} min"
    if h < 48:
        return f"{h:.1f} h"
    return f"{h / 24:.1f} days"


def _table(header: list[str], rows: list[list]) -> str:
    """An HTML table; every cell is escaped."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r)
        + "</tr>"
        for r in rows
    )
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


# ----------------------------------------------------------------------------- reading the warehouse
def _coverage(wh) -> pl.DataFrame:
    """first/last time and row count per (source table, host): aggregates, never raw samples."""
    parts = []
    queries = {
        "job_attempts": (
            "SELECT unnest(nodes) AS host, start_time AS t0, coalesce(end_time, start_time) AS t1 "
            "FROM ({v}) WHERE start_time IS NOT NULL"
        ),
        "hw_events": "SELECT host, time AS t0, time AS t1 FROM ({v}) WHERE time IS NOT NULL",
        "bmc_sensors": "SELECT host, time AS t0, time AS t1 FROM ({v}) WHERE time IS NOT NULL",
    }
    if wh.files("gpu_hourly"):
        queries["gpu_hourly"] = (
            "SELECT host, hour AS t0, hour + INTERVAL 1 HOUR AS t1, n FROM ({v}) WHERE hour IS NOT NULL"
        )
    else:
        queries["gpu_samples"] = (
            "SELECT host, time AS t0, time AS t1 FROM ({v}) WHERE time IS NOT NULL"
        )
    for table, inner in queries.items():
        if not wh.files(table):
            continue
        count = "sum(n)" if table == "gpu_hourly" else "count(*)"
        sql = (
            f"SELECT '{table}' AS source, coalesce(host, '(no host)') AS host, min(t0) AS first, "
            f"max(t1) AS last, {count}::BIGINT AS rows FROM ({inner.format(v=wh.view_sql(table))}) "
            "GROUP BY 2"
        )
        parts.append(wh.query(sql))
    if not parts:
        return pl.DataFrame(
            schema={
                "source": pl.Utf8,
                "host": pl.Utf8,
                "first": pl.Datetime("us"),
                "last": pl.Datetime("us"),
                "rows": pl.Int64,
            }
        )
    return pl.concat(
        [p.with_columns(pl.col("first", "last").cast(pl.Datetime("us"))) for p in parts]
    )


def _fleet_size(wh, coverage: pl.DataFrame) -> tuple[int, int]:
    """(hosts, GPUs): hosts seen by any source; GPUs as distinct (host, gpu) in telemetry,
    else GPU slots in the component history."""
    hosts = set(coverage["host"].to_list()) - {"(no host)"}
    ch = wh.read("component_history")
    hosts |= set(ch["host"].drop_nulls().to_list())
    gpus = 0
    for table in ("gpu_hourly", "gpu_samples"):
        if wh.files(table):
            gpus = wh.query(
                f"SELECT count(DISTINCT (host, gpu)) FROM ({wh.view_sql(table)}) WHERE gpu IS NOT NULL"
            ).item()
            break
    if not gpus and ch.height:
        gpus = ch.filter(pl.col("component_class") == "gpu")["slot"].n_unique()
    return len(hosts), int(gpus or 0)


# ----------------------------------------------------------------------------- sections
def _projection_at(proj: pl.DataFrame, target: int) -> dict | None:
    """The projection for a job of exactly ``target`` GPUs: a scale-sweep point, else the
    sensitivity baseline (analysis/whatif.py evaluates it at the target scale)."""
    sc = charts.scale_frame(proj).filter(pl.col("n_gpus") == target)
    if sc.height:
        return sc.row(0, named=True)
    base = proj.filter(
        (pl.col("scenario") == "sensitivity")
        & (pl.col("knob") == "baseline")
        & (pl.col("n_gpus") == target)
        & (pl.col("method") == "analytic")
    )
    return base.row(0, named=True) if base.height else None


def _headline(wh, t: dict, coverage: pl.DataFrame, target: int) -> Section:
    s = Section("headline", "Headline figures")
    att, intr, jobs, proj = (
        t["job_attempts"],
        t["interruptions"],
        t["goodput_jobs"],
        t["goodput_projections"],
    )
    hosts, gpus = _fleet_size(wh, coverage)
    if not (hosts or att.height):
        s.note = NO_DATA
        return s
    ran = att.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    gpu_hours = (
        ran.select(
            (
                pl.col("n_gpus").fill_null(0)
                * (pl.col("end_time") - pl.col("start_time")).dt.total_seconds()
            ).sum()
            / 3600
        ).item()
        or 0.0
    )
    fm = fleet_mtti(att, intr)
    span_h, unexpected = fm["span_hours"], fm["unexpected"]
    scope = _scope(proj)
    mtti = fm["mtti_all_hours"] if scope == "all" else fm["mtti_infrastructure_hours"]
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    gj = jobs.filter(pl.col("wall_hours") > 0)
    measured = (
        gj.select((w * pl.col("productive_hours")).sum() / (w * pl.col("wall_hours")).sum()).item()
        if gj.height
        else None
    )
    at = _projection_at(proj, target)
    figures = [
        ("fleet", f"{hosts:,} hosts", f"{gpus:,} GPUs"),
        (
            "GPU-hours used by jobs",
            _num(gpu_hours),
            f"{att.height:,} attempts" + (f" over {_hours(span_h)}" if span_h else ""),
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
            f"MTTI, {scope} (fleet-wide)",
            _hours(mtti),
            f"all causes: {_hours(fm['mtti_all_hours'])}; job time span ÷ interruptions",
        ),
        (
            "measured goodput",
            _pct(measured),
            "weighted by GPU-hours" if measured is not None else "goodput_jobs empty",
        ),
    ]
    if at is not None:
        r = at
        figures.append(
            (
                f"projected goodput at {target:,} GPUs",
                _pct(r["goodput"]),
                f"95% band {_pct(r['goodput_ci_low'])}–{_pct(r['goodput_ci_high'])}",
            )
        )
    else:
        figures.append(
            (f"projected goodput at {target:,} GPUs", "n/a", "no projection at this scale yet")
        )
    s.chart = charts.headline_chart(
        pl.DataFrame(figures, schema=["label", "value", "detail"], orient="row")
    )
    parts = [f"{hosts:,} hosts with {gpus:,} GPUs ran {_num(gpu_hours)} GPU-hours of jobs"]
    if unexpected:
        parts.append(
            f"{unexpected:,} jobs were interrupted unexpectedly ({fm['workload']:,} by their own failures), "
            f"one every {_hours(fm['mtti_infrastructure_hours'])} across the fleet from infrastructure "
            f"and one every {_hours(fm['mtti_all_hours'])} from all causes"
        )
    if measured is not None:
        parts.append(f"measured goodput is {_pct(measured)}")
    if at is not None:
        r = at
        parts.append(
            f"the rates project {_pct(r['goodput'])} for one {target:,}-GPU job "
            f"(scope {SCOPE_WORDS.get(scope, scope)}, the same as the MTTI above)"
        )
    s.reading = "; ".join(parts) + "."
    return s


def _scope(proj: pl.DataFrame) -> str:
    """The interruption scope the stored projections used (``analysis.taxonomy.SCOPES``)."""
    if "scope" in proj.columns:
        named = proj["scope"].drop_nulls()
        if named.len():
            return named[0]
    return DEFAULT_SCOPE


def _causes(t: dict) -> Section:
    s = Section("causes", "Interruption causes, beside the Llama 3 published mix")
    # the jobs' own failures (workload domain: exit codes, OOM) are one class of their own,
    # apart from infrastructure causes (a software/NCCL hang on the fabric side stays software)
    intr = t["interruptions"].with_columns(
        pl.when(pl.col("failure_domain") == WORKLOAD_DOMAIN)
        .then(pl.lit(WORKLOAD))
        .otherwise(pl.col("cause_class"))
        .alias("cause_class")
    )
    mix = charts.cause_mix_frame(intr)
    ref = charts.llama3_frame()
    s.extra_html = (
        "<details><summary>How the Llama 3 categories map to our classes</summary>"
        + _table(
            ["Llama 3 category", "interruptions", "our class"], [list(r) for r in charts.LLAMA3_MIX]
        )
        + "</details>"
    )
    if mix.height == 0:
        s.note = (
            NO_DATA
            if intr.height == 0
            else f"no unexpected interruptions ({intr.height:,} planned ones only)"
        )
        return s
    s.chart = charts.causes_chart(mix, ref)
    total = mix["count"].sum()
    own = mix.filter(pl.col("cause_class") == WORKLOAD)["count"].sum()
    # Llama 3's 419 interruptions hold no failures of the jobs' own: compare infrastructure only
    infra = mix.filter(pl.col("cause_class") != WORKLOAD)
    s.reading = (
        f"Of the {total:,} unexpected interruptions, {own:,} were the jobs' own failures "
        f"(class {WORKLOAD}: exit codes, OOM) and {total - own:,} infrastructure."
    )
    if infra.height:
        top = infra.row(0, named=True)
        share = top["count"] / infra["count"].sum()
        ref_share = ref.filter(pl.col("cause_class") == top["cause_class"])["share"]
        llama = _pct(ref_share[0], 0) if ref_share.len() else "0%"
        k = min(3, infra.height)
        s.reading += (
            f" Among infrastructure interruptions {top['cause_class']} caused {_pct(share, 0)} "
            f"(Llama 3: {llama})"
            + (f"; the top {k} infrastructure classes account for "
               f"{_pct(infra['count'].head(k).sum() / infra['count'].sum(), 0)}." if k > 1 else ".")
        )
    return s


def _rates(t: dict) -> Section:
    s = Section("failure_rates", "Failure rate per component class (95% CI) and Weibull shape")
    df = charts.rates_frame(t["failure_rates"])
    pos = df.filter(pl.col("rate_per_1k_unit_days") > 0)
    if pos.height == 0:
        s.note = NO_DATA if df.height == 0 else "no failures observed in any class yet"
        return s
    s.chart = charts.failure_rate_chart(df)
    r = pos.row(0, named=True)
    text = (
        f"{r['component_class']} fails most often: {_num(r['rate_per_1k_unit_days'])} failures per 1,000 "
        f"unit-days (95% CI {_num(r['rate_ci_low'])}–{_num(r['rate_ci_high'])}, {r['n_events'] or 0:,} failures)"
    )
    if r["shape"] is not None:
        text += f"; Weibull shape {r['shape']:.2f}"
        if r["shape_ci_low"] is not None and r["shape_ci_high"] is not None:
            text += f" (CI {r['shape_ci_low']:.2f}–{r['shape_ci_high']:.2f})"
        if r["shape_reading"]:
            text += f": {r['shape_reading']}"
    zero = df.filter(~(pl.col("rate_per_1k_unit_days") > 0))["component_class"].to_list()
    if zero:
        text += f". No failures observed (not plotted): {', '.join(zero)}"
    s.reading = text + "."
    return s


def _step_at(curve: pl.DataFrame, t: float) -> dict | None:
    before = curve.filter(pl.col("t") <= t)
    return before.row(-1, named=True) if before.height else None


def _survival(t: dict) -> Section:
    s = Section("survival", "Kaplan-Meier survival per component class (95% CI bands)")
    km = charts.survival_frame(t["survival_curves"])
    if km.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.survival_chart(km)
    horizon = km.group_by("component_class").agg(pl.col("t").max())["t"].min()
    at = []
    for (cls,), curve in km.partition_by("component_class", as_dict=True).items():
        row = _step_at(curve, horizon)
        if row is not None:
            at.append((row["survival"], cls, row))
    at.sort(key=lambda x: (x[0], x[1]))
    lo, hi = at[0], at[-1]
    text = (
        f"At {horizon / 24:.0f} days of age (the longest age every class reaches), {lo[1]} has the lowest "
        f"survival: {_pct(lo[0])} still in service"
    )
    if lo[2]["ci_low"] is not None and lo[2]["ci_high"] is not None:
        text += f" (95% CI {_pct(lo[2]['ci_low'])}–{_pct(lo[2]['ci_high'])})"
    if len(at) > 1:
        text += f"; {hi[1]} the highest at {_pct(hi[0])}"
    s.reading = text + "."
    return s


def _trend(t: dict) -> Section:
    s = Section("rate_trend", "Failure rate per month (95% CI)")
    df = charts.trend_frame(t["failure_rates"])
    if df.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.rate_trend_chart(df)
    months = sorted(df["window"].unique().to_list())
    best = None
    for (cls,), g in df.partition_by("component_class", as_dict=True).items():
        # low-exposure windows (flagged in failure_rates) are not compared: their rates say little
        g = g.sort("month").filter(
            pl.col("rate_per_1k_unit_days").is_not_null() & ~pl.col("low_exposure").fill_null(False)
        )
        if g.height < 2:
            continue
        a, b = g.row(0, named=True), g.row(-1, named=True)
        change = abs(
            math.log((b["rate_per_1k_unit_days"] + 1e-9) / (a["rate_per_1k_unit_days"] + 1e-9))
        )
        if best is None or change > best[0]:
            best = (change, cls, a, b)
    if best is None:
        s.reading = f"{len(months)} month(s) of fits; no class has two months to compare yet."
        return s
    _, cls, a, b = best
    from analysis.survival import rate_change_test  # the exact test, one place

    p = rate_change_test(a["n_events"], a["exposure_hours"], b["n_events"], b["exposure_hours"])
    s.reading = (
        f"Across {len(months)} months ({months[0]} to {months[-1]}), the largest change is {cls}: "
        f"{_num(a['rate_per_1k_unit_days'])} ({a['window']}) to {_num(b['rate_per_1k_unit_days'])} ({b['window']}) "
        f"failures per 1,000 unit-days ({a['n_events']} vs {b['n_events']} failures); exact test of "
        f"equal rates (conditional binomial) p = {p:.2g}: "
        + ("a real change." if p < 0.05 else "consistent with no change.")
    )
    return s


def _hazards(t: dict) -> Section:
    s = Section("hazard_ratios", "What raises the failure hazard (Cox hazard ratios, 95% CI)")
    hr = t["hazard_ratios"].filter((pl.col("hr") > 0) & pl.col("hr").is_finite())
    if hr.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.hazard_ratio_chart(t["hazard_ratios"])
    # only effects that survive the multiple-testing correction and pass the PH test
    clear = hr.filter(pl.col("clear_effect").fill_null(False)).sort("p_adjusted")
    method = hr["p_adjust_method"].drop_nulls().first() or "multiple-testing"
    if clear.height == 0:
        s.reading = (
            f"None of the {hr.height} covariate effects survives {method} correction for "
            f"{hr.height} tests (adjusted p < 0.05) with a passing proportional-hazards test: "
            "no clear driver yet."
        )
        return s
    effects = "; ".join(
        f"{r['covariate']} on {r['component_class']} multiplies the hazard by {r['hr']:.2f} "
        f"{r['unit'] or 'per unit'} (95% CI {r['ci_low']:.2f}–{r['ci_high']:.2f}, "
        f"adjusted p={r['p_adjusted']:.2g})"
        for r in clear.iter_rows(named=True)
    )
    s.reading = (
        f"Clear effects ({clear.height} of {hr.height}: adjusted p < 0.05 after {method} "
        f"correction for {hr.height} tests, proportional hazards not rejected): {effects}."
    )
    return s


def _scale(t: dict, target: int) -> Section:
    s = Section(
        "goodput_scale", "Projected goodput vs job scale, and the checkpoint interval to use"
    )
    sc = charts.scale_frame(t["goodput_projections"])
    if sc.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.scale_chart(sc, target)
    exact = _projection_at(t["goodput_projections"], target)
    near = (
        exact
        if exact is not None
        else sc.with_columns(
            (pl.col("n_gpus").cast(pl.Float64).log() - math.log(target)).abs().alias("_d")
        )
        .sort("_d")
        .row(0, named=True)
    )
    big = sc.row(-1, named=True)
    text = (
        f"At {near['n_gpus']:,} GPUs the projected goodput is {_pct(near['goodput'])} "
        f"(95% band {_pct(near['goodput_ci_low'])}–{_pct(near['goodput_ci_high'])}) with a checkpoint every "
        f"{_hours(near['optimal_interval_hours'])} (Daly's optimum; Young's "
        f"{_hours(near['young_interval_hours'])}). Interruption scope: "
        f"{SCOPE_WORDS.get(_scope(t['goodput_projections']), _scope(t['goodput_projections']))}"
    )
    if big["n_gpus"] != near["n_gpus"]:
        text += f"; at {big['n_gpus']:,} GPUs it is {_pct(big['goodput'])}"
    s.reading = text + "."
    return s


def _tornado(t: dict) -> Section:
    s = Section("sensitivity", "What-if: which single improvement buys the most goodput")
    sens = charts.sensitivity_frame(t["goodput_projections"])
    if sens.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.tornado_chart(sens)
    a = sens.row(0, named=True)
    text = f"At {a['n_gpus']:,} GPUs, the biggest lever is {a['change']}: {a['gain_pp']:+.2f} percentage points"
    if a["goodput_base"] is not None:
        text += f" ({_pct(a['goodput_base'])} to {_pct(a['goodput'])})"
    if sens.height > 1:
        b = sens.row(1, named=True)
        text += f"; next is {b['change']} ({b['gain_pp']:+.2f} pp)"
    s.reading = text + "."
    return s


def _goodput(t: dict) -> Section:
    s = Section("goodput_measured", "Measured goodput per job chain, and where the badput went")
    jobs = t["goodput_jobs"].filter(pl.col("wall_hours") > 0)
    if jobs.height == 0:
        s.note = NO_DATA
        return s
    parts = charts.badput_frame(jobs)
    s.chart = charts.goodput_chart(charts.goodput_hist_frame(jobs), parts)
    good = parts.row(0, named=True)
    worst = parts.slice(1).sort("share", descending=True).row(0, named=True)
    job_mean = jobs["goodput"].mean()
    s.reading = (
        f"Weighted by GPU-hours, measured goodput is {_pct(good['share'])} over {jobs.height:,} job chains "
        f"(job-weighted mean {_pct(job_mean)}); the largest loss is {worst['part']} at "
        f"{_pct(worst['share'])} of GPU-hours."
    )
    s.reading += " " + _assumptions_text(jobs)
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    top = (
        jobs.with_columns(
            ((pl.col("wall_hours") - pl.col("productive_hours")) * w).alias("badput_gpu_hours")
        )
        .sort("badput_gpu_hours", descending=True)
        .head(5)
    )
    s.extra_html = '<p class="sub">Job chains that lost the most GPU-hours</p>' + _table(
        ["job", "name", "user", "GPUs", "attempts", "goodput", "badput GPU-hours"],
        [
            [
                r["job_id"],
                r["name"],
                r["user"],
                r["n_gpus"],
                r["attempts"],
                _pct(r["goodput"]),
                _num(r["badput_gpu_hours"]),
            ]
            for r in top.iter_rows(named=True)
        ],
    )
    return s


def _assumptions_text(jobs: pl.DataFrame) -> str:
    """What the badput split rests on: jobs measured from their own checkpoint logs, and the
    stated interval, cost and restart for the others (columns of ``goodput_jobs``)."""
    measured = jobs.filter(pl.col("method") == "measured").height
    assumed = jobs.height - measured
    sets = jobs.select("ckpt_interval_s", "ckpt_cost_s", "restart_s").unique().drop_nulls()
    text = f"Badput split: {measured:,} job chains from their own checkpoint times"
    if sets.height:
        a = sets.row(0, named=True)
        text += (
            f", {assumed:,} assuming a checkpoint every {_hours(a['ckpt_interval_s'] / 3600)} costing "
            f"{a['ckpt_cost_s']:g} s and a restart of {_hours(a['restart_s'] / 3600)} after each failure"
        )
    return text + " (goodput build --ckpt-interval / --ckpt-cost / --restart)."


def _quality(t: dict) -> Section:
    s = Section("data_quality", "Data quality: rows kept and records quarantined per source format")
    man = t["ingest_manifest"]
    if man.height == 0:
        s.note = NO_DATA
        return s
    df = charts.ingest_frame(man)
    s.chart = charts.data_quality_chart(df)
    kept, bad = int(df["rows_ok"].sum()), int(df["rows_quarantined"].sum())
    text = f"{man.height:,} files gave {kept:,} rows; {bad:,} records were quarantined ({_pct(bad / (kept + bad) if kept + bad else 0, 2)})"
    if bad:
        w = df.sort("rows_quarantined", descending=True).row(0, named=True)
        text += f", most from {w['format']} ({w['rows_quarantined']:,})"
    s.reading = text + "."
    q = t["quarantine"]
    if q.height:
        errs = (
            q.group_by(pl.col("format"), pl.col("error").str.slice(0, 120))
            .agg(pl.len().alias("n"))
            .sort("n", descending=True)
            .head(8)
        )
        s.extra_html = '<p class="sub">Most frequent quarantine reasons</p>' + _table(
            ["format", "reason", "records"], [list(r) for r in errs.iter_rows()]
        )
    return s


def _coverage_section(coverage: pl.DataFrame) -> Section:
    s = Section("coverage", "Data quality: time covered per source and host")
    if coverage.height == 0:
        s.note = NO_DATA
        return s
    s.chart = charts.coverage_chart(coverage)
    per = (
        coverage.group_by("source")
        .agg(
            pl.col("first").min(),
            pl.col("last").max(),
            pl.col("rows").sum(),
            pl.col("host").n_unique().alias("hosts"),
        )
        .sort("source")
    )
    hosts = coverage.filter(pl.col("host") != "(no host)")
    n_hosts = hosts["host"].n_unique()
    n_src = hosts["source"].n_unique()
    full = (
        hosts.group_by("host")
        .agg(pl.col("source").n_unique())
        .filter(pl.col("source") == n_src)
        .height
    )
    text = (
        f"Data spans {per['first'].min():%Y-%m-%d} to {per['last'].max():%Y-%m-%d}; {full:,} of {n_hosts:,} hosts "
        f"appear in all {n_src} source tables"
    )
    missing = sorted(set(per["source"].to_list()) ^ set(hosts["source"].to_list()))
    s.reading = text + (f" (no per-host data in {', '.join(missing)})" if missing else "") + "."
    s.extra_html = _table(
        ["source table", "first (UTC)", "last (UTC)", "rows", "hosts"],
        [
            [
                r["source"],
                f"{r['first']:%Y-%m-%d %H:%M}",
                f"{r['last']:%Y-%m-%d %H:%M}",
                f"{r['rows']:,}",
                r["hosts"],
            ]
            for r in per.iter_rows(named=True)
        ],
    )
    return s


def _analyses_section(wh, t: dict) -> Section:
    """What ran on the data at hand, what was skipped and why, the observation window and
    where each class's unit population came from (no chart: a table)."""
    s = Section("analyses", "Analyses run and skipped, observation window, unit populations")
    st = wh.read("analysis_status").sort("analysis")
    win = wh.read("observation_window")
    if st.height == 0 and win.height == 0:
        s.note = NO_DATA
        return s
    skipped = st.filter(pl.col("status") != "ok")
    text = f"{st.height - skipped.height} of {st.height} analyses ran"
    if skipped.height:
        text += "; missing inputs or errors: " + "; ".join(f"{a} {st_}" for a, st_ in skipped.select("analysis", "status").rows())
    w = win.filter(pl.col("source") == "window")
    if w.height and w["observed_from"][0] is not None:
        r = w.row(0, named=True)
        text += (f". Exposure is measured from {r['observed_from']:%Y-%m-%d %H:%M} to {r['observed_to']:%Y-%m-%d %H:%M} UTC "
                 f"({r['method']}{', flagged: ' + r['note'] if r['flagged'] else ''})")
    fr = t["failure_rates"]
    if fr.height:
        pops = fr.filter((pl.col("window") == "all") & (pl.col("stratum") == "all")).group_by("population").agg(
            pl.col("component_class").unique().sort().str.join(", ")).sort("population")
        text += ". Units per class from: " + "; ".join(f"{p or 'unknown'} ({c})" for p, c in pops.rows())
    s.reading = text + "."
    s.extra_html = _table(
        ["analysis", "status", "reason", "rows"],
        [[a, b, c or "", "" if n is None else f"{n:,}"] for a, b, c, n in st.select("analysis", "status", "reason", "rows").rows()],
    )
    spans = win.filter(pl.col("source") != "window")
    if spans.height:
        s.extra_html += '<p class="sub">Robust time span per source (outlying record times do not stretch it)</p>' + _table(
            ["source", "from (UTC)", "to (UTC)", "records", "outlying times"],
            [[r["source"], f"{r['observed_from']:%Y-%m-%d %H:%M}", f"{r['observed_to']:%Y-%m-%d %H:%M}",
              f"{r['records']:,}", f"{r['outliers']:,}"] for r in spans.iter_rows(named=True)],
        )
    return s


def _finite(obj):
    """The spec with NaN / infinity as null: JSON has no such numbers."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def build_sections(wh, target_gpus: int = TARGET_GPUS) -> list[Section]:
    """Every section, in report order; a section that fails to build reports its error."""
    names = [
        "job_attempts",
        "interruptions",
        "failure_rates",
        "survival_curves",
        "hazard_ratios",
        "goodput_jobs",
        "goodput_projections",
        "ingest_manifest",
        "quarantine",
    ]
    t = {n: wh.read(n) for n in names}
    coverage = _coverage(wh)
    builders = [
        ("headline", "Headline figures", lambda: _headline(wh, t, coverage, target_gpus)),
        ("causes", "Interruption causes", lambda: _causes(t)),
        ("failure_rates", "Failure rate per component class", lambda: _rates(t)),
        ("survival", "Kaplan-Meier survival", lambda: _survival(t)),
        ("rate_trend", "Failure rate per month", lambda: _trend(t)),
        ("hazard_ratios", "Hazard ratios", lambda: _hazards(t)),
        ("goodput_scale", "Projected goodput vs job scale", lambda: _scale(t, target_gpus)),
        ("sensitivity", "What-if sensitivity", lambda: _tornado(t)),
        ("goodput_measured", "Measured goodput", lambda: _goodput(t)),
        ("data_quality", "Data quality", lambda: _quality(t)),
        ("coverage", "Time coverage", lambda: _coverage_section(coverage)),
        ("analyses", "Analyses run and skipped", lambda: _analyses_section(wh, t)),
    ]
    out = []
    for key, title, build in builders:
        try:
            sec = build()
            if sec.chart is not None:
                sec.spec = _finite(charts.configure(sec.chart).to_dict())
        except Exception as exc:  # noqa: BLE001 - one broken input table must not sink the report
            print(f"goodput report: section {key!r} failed: {exc!r}", file=sys.stderr)
            sec = Section(
                key, title, note=f"this section could not be built: {type(exc).__name__}: {exc}"
            )
        out.append(sec)
    return out


# ----------------------------------------------------------------------------- HTML
CSS = """
body { font-family: Helvetica, Arial, sans-serif; color: #222; background: #f5f6f8; margin: 0; }
header { background: #1f3b73; color: white; padding: 20px 32px; }
header h1 { margin: 0 0 4px 0; font-size: 24px; }
header p { margin: 0; opacity: .85; font-size: 13px; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 40px; }
section { background: white; border-radius: 6px; padding: 16px 22px; margin: 18px 0;
          box-shadow: 0 1px 3px rgba(0,0,0,.08); }
section h2 { font-size: 18px; margin: 0 0 10px 0; color: #1f3b73; }
.chart { overflow-x: auto; }
.reading { font-size: 15px; margin: 10px 0 4px; }
.note { font-style: italic; color: #8a5a00; background: #fff7e0; padding: 10px 12px; border-radius: 4px; }
.sub { font-size: 13px; color: #555; margin: 12px 0 4px; }
table.data { border-collapse: collapse; font-size: 12px; margin: 6px 0; }
table.data th, table.data td { border-bottom: 1px solid #e3e3e3; padding: 3px 10px 3px 0; text-align: left;
                               word-break: break-all; }
details { font-size: 13px; margin-top: 8px; }
footer { font-size: 11px; color: #777; text-align: center; padding: 12px; }
@media print {
  body, main, section { background: white !important; box-shadow: none; }
  header { background: white; color: #1f3b73; border-bottom: 2px solid #1f3b73; }
  main { max-width: none; padding: 0; }
  section { break-before: page; page-break-before: always; break-inside: avoid; margin: 0; }
  section:first-of-type { break-before: auto; page-break-before: auto; }
  .chart { overflow: visible; }
  .chart svg, .chart canvas { max-width: 100% !important; height: auto !important; }
  details { display: block; }
}
"""

CSP = (
    "default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
    "img-src data:; font-src data:; connect-src 'none'; form-action 'none'; base-uri 'none'"
)

EMBED_JS = """
(function () {
  var specs = JSON.parse(document.getElementById("report-specs").textContent);
  Object.keys(specs).forEach(function (id) {
    var el = document.getElementById("chart-" + id);
    vegaEmbed(el, specs[id], {renderer: "svg", actions: false}).catch(function (err) {
      el.textContent = "chart failed to render: " + err;
      console.error(err);
    });
  });
})();
"""


def script_json(obj) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' survive literally, so no data
    can close the element or open a comment (``</`` becomes ``\\u003c/``)."""
    text = json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render_html(sections: list[Section], generated: str, home: str) -> str:
    body = []
    for s in sections:
        inner = f"<h2>{html.escape(s.title)}</h2>"
        if s.spec is not None:
            inner += f'<div class="chart" id="chart-{html.escape(s.key)}"></div>'
            inner += f'<p class="reading">{html.escape(s.reading)}</p>'
        else:
            inner += f'<p class="note">{html.escape(s.note or NO_DATA)}</p>'
        inner += s.extra_html
        body.append(f'<section id="{html.escape(s.key)}">{inner}</section>')
    specs = {s.key: s.spec for s in sections if s.spec is not None}
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>GPU fleet goodput report</title>"
        f"<style>{CSS}</style></head><body>"
        "<header><h1>GPU fleet reliability and goodput</h1>"
        f"<p>Generated {html.escape(generated)} from the warehouse at {html.escape(home)}. "
        "Intervals are 95% confidence intervals or bands.</p></header>"
        f'<main data-charts="{len(specs)}">' + "".join(body) + "</main>"
        "<footer>fleet-goodput report; Vega, Vega-Lite and Vega-Embed are inlined, the file makes no network request."
        "</footer>"
        f"<script>{javascript_bundle()}</script>"
        f'<script type="application/json" id="report-specs">{script_json(specs)}</script>'
        f"<script>{EMBED_JS}</script></body></html>\n"
    )


def write_images(sections: list[Section], folder: Path) -> list[Path]:
    """PNG (2x) and SVG per chart; stale images of sections without a chart are removed."""
    folder.mkdir(parents=True, exist_ok=True)
    vl = vegalite_version()
    written = []
    for s in sections:
        png, svg = folder / f"{s.key}.png", folder / f"{s.key}.svg"
        if s.spec is None:
            png.unlink(missing_ok=True)
            svg.unlink(missing_ok=True)
            continue
        svg.write_text(vlc.vegalite_to_svg(s.spec, vl_version=vl), encoding="utf-8")
        png.write_bytes(vlc.vegalite_to_png(s.spec, vl_version=vl, scale=2))
        written += [png, svg]
    return written


def build_report(
    wh, out: Path | None = None, target_gpus: int = TARGET_GPUS, images: bool = True
) -> Path:
    """Write the HTML report (default ``<home>/reports/goodput_report.html``; an existing
    directory as ``out`` gets that file name inside it) and, unless ``images`` is false, its
    chart images (``charts/<section>.png|svg`` next to it); returns the HTML path."""
    out = Path(out) if out is not None else wh.reports / "goodput_report.html"
    if out.is_dir():
        out = out / "goodput_report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = build_sections(wh, target_gpus)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = render_html(sections, generated, str(wh.home))
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    if images:
        write_images(sections, out.parent / "charts")
    return out
