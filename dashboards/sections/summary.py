"""The first screen: period and scope; measured goodput against its target (the home's, else the
best published ETTR) and the one-line comparison with Llama 3 (``analysis.reference_comparison``);
lost GPU-hours (and their cost when a $/GPU-hour is set) and interruptions against the previous
period of equal length, each change tested and worded as one only where it is beyond noise
(``analysis.changes``); the top 3 causes by lost GPU-hours (and $); the actions ranked at the
job sizes this fleet runs (its largest, and the planned size of ``HOME/goodput.toml``), each
with its gain, the gain's CI and its cost where the home gives one; the projection at the target
job size and why it differs from what was measured; MTTI defined once. Figures only (HTML
tiles and tables), each the same number the later sections show: the period's figures are
``analysis.trend.window_figures``, the headline's definitions."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import datetime
from datetime import timedelta

import polars as pl

from analysis.changes import Changes
from analysis.observation import stored_window
from analysis.reference_comparison import best_ettr
from analysis.reference_comparison import first_screen_line
from analysis.scope import fleet_of
from analysis.site import SITE_CONFIG
from analysis.site import Site
from analysis.taxonomy import WORKLOAD_DOMAIN
from analysis.trend import data_window
from analysis.trend import interruption_dispersion
from analysis.trend import losses_frame
from analysis.trend import period_starts
from analysis.trend import window_changes
from analysis.trend import window_figures
from analysis.whatif import action_gains
from analysis.whatif import stored_job
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import interruption_scope
from dashboards.section import mean_time
from dashboards.section import money
from dashboards.section import num
from dashboards.section import pct
from dashboards.section import projection_at
from dashboards.section import tile

KEY = "summary"
TITLE = "Summary"
TABLES = ("job_attempts", "interruptions", "goodput_jobs", "goodput_projections")
TOP = 3
WEEK = timedelta(days=7)


def report_window(wh, attempts: pl.DataFrame) -> tuple[datetime, datetime] | None:
    """The period the report covers: the stored observation window, else the job attempts'."""
    w = stored_window(wh) if wh is not None else None
    if w is not None and w.observed_from is not None and w.observed_to is not None:
        return w.observed_from, w.observed_to
    return data_window(attempts)


def action_sizes(attempts: pl.DataFrame, site: Site) -> list[tuple[int, str]]:
    """The job sizes the actions are ranked at: the largest job of the period, and the planned
    size of the home's settings when it is another."""
    largest = attempts["n_gpus"].max() if attempts.height else None
    sizes = [(int(largest), "the largest job run")] if largest else []
    planned = site.planned_job_gpus
    if planned and planned != largest:
        sizes.append((planned, f"planned, {SITE_CONFIG}"))
    return sizes


def _gain(r: dict) -> str:
    return (f"{100 * r['gain']:+.1f} points ({100 * r['gain_ci_low']:+.1f} to "
            f"{100 * r['gain_ci_high']:+.1f})")  # fmt: skip


def _cost(site: Site, r: dict) -> str:
    """An action's cost: spare nodes x the price of one, a figure the site entered for the
    others; "not given" without one."""
    cost = site.cost_of(r["knob"], r["step"])
    if cost is None:
        return "not given"
    if r["knob"] == "spares":
        return f"{money(cost)} ({r['step']} nodes x {money(site.action_cost['spares'])})"
    return f"{money(cost)} (entered)"


def actions_html(wh, stored: pl.DataFrame, sizes: list[tuple[int, str]], site: Site) -> str:
    """The 3 single improvements that buy the most goodput at the last of ``sizes`` (the
    planned size, else the largest job run), with their gains at each size, the gains' 95% CI
    (``analysis.whatif.action_gains``) and their costs; a sentence when there is nothing to
    rank."""
    if not sizes:
        return ""
    gains = {}
    try:
        for n, _ in sizes:
            rates, job, _ = stored_job(wh, n, stored)
            gains[n] = action_gains(rates, job)
    except ValueError as exc:
        return f'<p class="sub" id="actions">Actions: none ranked ({html.escape(str(exc))})</p>'
    ranked_at = sizes[-1][0]
    top = gains[ranked_at].head(TOP)
    header = ["action", *(f"gain at {n:,} GPUs ({what}; 95% CI)" for n, what in sizes), "cost"]
    rows = []
    for r in top.iter_rows(named=True):
        at = [gains[n].filter(pl.col("knob") == r["knob"]).row(0, named=True) for n, _ in sizes]
        rows.append([r["change"], *map(_gain, at), _cost(site, r)])
    notes = []
    if site.planned_job_gpus is None:
        notes.append(f"no planned job size: planned_job_gpus in HOME/{SITE_CONFIG} adds one")
    if not site.action_cost:
        notes.append(f"costs: [action_cost] in HOME/{SITE_CONFIG}")
    every = (
        f"; the what-if section ranks every one at {stored['n_gpus'][0]:,} GPUs"
        if stored.height
        else ""
    )
    return (
        f'<p class="sub">Actions, ranked by the goodput they add to one {ranked_at:,}-GPU job '
        f"(points of goodput{every})"
        + (f" ({'; '.join(notes)})" if notes else "")
        + '</p><div id="actions">'
        + html_table(header, rows)
        + "</div>"
    )


def typical_job_gpus(attempts: pl.DataFrame) -> float | None:
    """The GPUs of the job attempts, averaged over GPU-hours (the size a GPU-hour ran at)."""
    ran = attempts.filter(pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null())
    w = (
        pl.col("n_gpus").fill_null(0)
        * (pl.col("end_time") - pl.col("start_time")).dt.total_seconds()
    )
    den = ran.select(w.sum()).item()
    return ran.select((w * pl.col("n_gpus").fill_null(0)).sum()).item() / den if den else None


def why_projection_differs(
    measured: float | None, at: dict, target: int, typical: float | None
) -> str:
    """One sentence: why the projection at ``target`` GPUs is not the measured goodput."""
    size = f"{typical:,.0f}" if typical else "far fewer"
    gap = "below" if measured is None or at["goodput"] < measured else "above"
    return (
        f"The projection is {gap} the measured figure because this fleet's jobs ran on {size} "
        f"GPUs on average (weighted by GPU-hours), while one {target:,}-GPU job depends on every "
        f"part it spans at once: it would be interrupted every {mean_time(at['mtti_hours'])} and "
        "spend that much more of its time redoing lost work, restarting and checkpointing."
    )


@dataclass(frozen=True)
class _Period:
    """The report's period: its figures (``window_figures``), and the comparison its tiles
    state: the period against the previous period of equal length (as far as the data reaches
    back), else, with nothing before it, its latest whole week against the week before; each
    change with its test (``analysis.trend.window_changes``), or None with nothing to compare."""

    start: datetime
    end: datetime
    now: dict
    label: str  # what is compared: "the last 60 days" / "week of 2026-02-23"
    against: str  # with what: "the previous 60 days" / "the week before"
    a: dict | None  # the figures compared ...
    b: dict | None  # ... and those they are compared with
    changes: Changes | None

    @classmethod
    def of(cls, att, intr, jobs, start: datetime, end: datetime) -> _Period:
        now = window_figures(att, intr, jobs, start, end)
        days = (end - start).total_seconds() / 86400
        span = data_window(att)
        scale = interruption_dispersion(intr, span)
        first = max(start - (end - start), span[0]) if span else start
        if first < start and window_figures(att, intr, jobs, first, start)["attempts"] > 0:
            shown = (start - first).total_seconds() / 86400
            against = f"the previous {days:,.0f} days" + (
                f" (of which the data covers {shown:,.1f})" if shown < days - 1e-9 else ""
            )
            windows = ((start, end), (first, start))
            label = f"the last {days:,.0f} days"
        else:
            whole = [w for w in period_starts(start, end, "week") if w >= start and w + WEEK <= end]
            if len(whole) < 2:
                return cls(start, end, now, "", "", None, None, None)
            windows = ((whole[-1], whole[-1] + WEEK), (whole[-2], whole[-1]))
            label, against = f"week of {whole[-1]:%Y-%m-%d}", "the week before"
        a, b = (window_figures(att, intr, jobs, *w) for w in windows)
        changes = window_changes(att, intr, jobs, *windows, scale)
        return cls(start, end, now, label, against, a, b, changes)

    @property
    def days(self) -> float:
        return (self.end - self.start).total_seconds() / 86400

    def versus(self, figure: str) -> str:
        """The compared windows' ``figure`` (goodput, lost_share, interruptions) and its change
        in words (``analysis.changes.Change.words``): a change only where its test tells it
        from noise."""
        if self.changes is None:
            return "no earlier period in the data"
        a, b = self.a, self.b
        if figure == "goodput":
            shown = f"{pct(a['goodput_gpu_hours'])} against {pct(b['goodput_gpu_hours'])}"
            change = self.changes.goodput.words("points")
        elif figure == "lost_share":
            shown = f"{pct(_share(a))} of its GPU-hours lost against {pct(_share(b))}"
            change = self.changes.lost_share.words("points")
        else:
            shown = f"{_per_day(a)} against {_per_day(b)}"
            change = self.changes.interruptions.words()
        return f"{self.label}: {shown} {self.against}: {change}"


def target_words(site: Site, home, measured: float | None) -> str:
    """The goodput target and the measured goodput's distance to it: the home's
    (``goodput_target``), else the best published ETTR."""
    if site.goodput_target is not None:
        value, whence = site.goodput_target, f"the site's, {SITE_CONFIG}"
    else:
        f = best_ettr(home)
        if f is None:
            return f"no target (goodput_target in HOME/{SITE_CONFIG})"
        value = f.value
        whence = (f"{f.fleet.label}'s published ETTR at {f.at_gpus:,} GPUs; the site's own: "
                  f"goodput_target in HOME/{SITE_CONFIG}")  # fmt: skip
    words = f"target {pct(value)} ({whence})"
    if measured is None:
        return words
    gap = 100 * (measured - value)
    where = (
        "at the target"
        if abs(gap) < 0.05
        else f"{abs(gap):.1f} points " + ("below" if gap < 0 else "above")
    )
    return f"{words}: {where}"


def _share(f: dict) -> float | None:
    return f["lost_gpu_hours"] / f["gpu_hours"] if f["gpu_hours"] else None


def _per_day(f: dict) -> str:
    """Unexpected interruptions of a window and their rate a day (windows differ in length)."""
    return f"{f['unexpected']:,} ({24 * f['unexpected'] / f['hours']:.3g} a day)"


def _tiles(p: _Period, cost: float, at: dict | None, target: int, target_line: str) -> list[str]:
    """Goodput (against its target), lost GPU-hours (and their cost), interruptions, and the
    projection at the target size when there is one; each with its change and whether it is
    beyond noise."""
    now = p.now
    lost = p.versus("lost_share")
    tiles = [
        tile(
            "measured goodput",
            pct(now["goodput_gpu_hours"]),
            f"{target_line}; {p.versus('goodput')}",
            "goodput",
        ),
        tile(
            "GPU-hours lost to interruptions",
            num(now["lost_gpu_hours"]),
            f"{pct(_share(now))} of {num(now['gpu_hours'])} GPU-hours; {lost}",
            "lost",
        ),
    ]
    if cost > 0:
        tiles.append(
            tile(
                "cost of the lost GPU-hours",
                money(now["lost_gpu_hours"] * cost),
                f"at ${cost:,.2f} per GPU-hour; {lost}",
                "cost",
            )
        )
    tiles.append(tile("unexpected interruptions", f"{now['unexpected']:,}",
                       f"one every {mean_time(now['mtbf_hours'])} across the fleet; "
                       + p.versus("interruptions"), "interruptions"))  # fmt: skip
    if at is not None:
        tiles.append(tile(f"projected goodput at {target:,} GPUs", pct(at["goodput"]),
                           f"95% band {pct(at['goodput_ci_low'])}–{pct(at['goodput_ci_high'])}; "
                           f"MTTI {mean_time(at['mtti_hours'])}", "projected"))  # fmt: skip
    return tiles


def _in_period(att: pl.DataFrame, intr: pl.DataFrame, p: _Period):
    """The attempts that overlap the period and the interruptions that end in it."""
    period_att = att.filter(
        (pl.col("end_time").cast(pl.Datetime("us")) > p.start)
        & (pl.col("start_time").cast(pl.Datetime("us")) < p.end)
    )
    period_intr = intr.filter(
        (pl.col("end_time").cast(pl.Datetime("us")) >= p.start)
        & (pl.col("end_time").cast(pl.Datetime("us")) < p.end)
    )
    return period_att, period_intr


def _causes_table(causes: pl.DataFrame, cost: float) -> str:
    rows = [
        [r["cause"], num(r["lost_gpu_hours"]), pct(r["share"]), f"{r['interruptions']:,}",
         mean_time(r["mtbf_hours"])]
        + ([money(r["lost_gpu_hours"] * cost)] if cost > 0 else [])
        for r in causes.iter_rows(named=True)
    ]  # fmt: skip
    header = ["cause", "lost GPU-hours", "share of lost", "interruptions", "one every"]
    header += ["cost"] if cost > 0 else []
    return html_table(header, rows)


def _reading(p: _Period, scope: str, causes: pl.DataFrame, cost: float) -> str:
    now = p.now
    parts = [
        (
            f"From {p.start:%Y-%m-%d} to {p.end:%Y-%m-%d} ({p.days:,.0f} days, {scope}) jobs used "
            f"{num(now['gpu_hours'])} GPU-hours at a measured goodput of "
            f"{pct(now['goodput_gpu_hours'])}"
        ),
        f"{now['unexpected']:,} unexpected interruptions (one every "
        f"{mean_time(now['mtbf_hours'])}) cost {num(now['lost_gpu_hours'])} GPU-hours"
        + (f" ({money(now['lost_gpu_hours'] * cost)})" if cost > 0 else ""),
    ]
    if causes.height:
        top = causes.row(0, named=True)
        parts.append(f"{top['cause']} cost the most ({pct(top['share'])} of the lost GPU-hours)")
    return "; ".join(parts) + "."


def _comparison(ctx: ReportContext, home) -> str:
    """The first screen's line beside published fleets (the How we compare section's first)."""
    try:
        line = first_screen_line(ctx.wh, home, ctx.t)
    except ValueError as exc:  # a site's references.toml that does not parse
        line_text = html.escape(str(exc))
        return f'<p class="sub" id="compare-line">Against published fleets: {line_text}</p>'
    if line is None:
        return ""
    return (f'<p class="sub" id="compare-line">Against published fleets: '
            f'{html.escape(line.text)} (<a href="#references">How we compare</a>)</p>')  # fmt: skip


def _vocabulary(at: dict | None, target: int) -> str:
    """MTTI, defined once: the mean time of the report's projected job, against the fleet's
    time between interruptions of any job."""
    job = f"one {target:,}-GPU job" if at is not None else "one job of a given size"
    return (
        f'<p class="why" id="vocabulary">MTTI: the mean time to interruption of {job}, which '
        "stops when any part it spans fails. \u201cOne every\u201d: the time between unexpected "
        "interruptions of any job across the fleet. MTBF, in later sections, is a component "
        "class\u2019s mean time between failures.</p>"
    )


def build(ctx: ReportContext) -> Section:
    t, target = ctx.t, ctx.target_gpus
    att, intr, jobs = t["job_attempts"], t["interruptions"], t["goodput_jobs"]
    window = report_window(ctx.wh, att)
    if window is None or att.height == 0:
        return Section(KEY, TITLE, note=NO_DATA)
    home = getattr(fleet_of(ctx.wh), "home", None) if ctx.wh is not None else None
    p = _Period.of(att, intr, jobs, *window)
    cost = ctx.gpu_hour_cost
    proj = t["goodput_projections"]
    at = projection_at(proj, target)
    target_line = target_words(ctx.site, home, p.now["goodput_gpu_hours"])
    tiles = _tiles(p, cost, at, target, target_line)
    period_att, period_intr = _in_period(att, intr, p)
    causes = losses_frame(period_att, period_intr, "cause").head(TOP)
    why = ""
    if at is not None:
        why = why_projection_differs(
            p.now["goodput_gpu_hours"], at, target, typical_job_gpus(period_att)
        )
        why += f" (Interruption scope of the projection: {interruption_scope(proj)}.)"
    stored = proj.filter(pl.col("scenario") == "sensitivity")
    priced = (
        "" if cost > 0 else (f"; no price: --gpu-hour-cost, or gpu_hour_cost in HOME/{SITE_CONFIG}")
    )
    extra = (
        f'<div class="tiles">{"".join(tiles)}</div>'
        + _comparison(ctx, home)
        + f'<p class="sub">Top {TOP} costs: causes by lost GPU-hours '
        f"(the jobs' own failures: class software, failure domain "
        f"{html.escape(WORKLOAD_DOMAIN)}{html.escape(priced)})</p>"
        + f'<div id="summary-causes">{_causes_table(causes, cost)}</div>'
        + (
            actions_html(ctx.wh, stored, action_sizes(period_att, ctx.site), ctx.site)
            if ctx.wh is not None
            else ""
        )
        + (f'<p class="why" id="projection-why">{html.escape(why)}</p>' if why else "")
        + _vocabulary(at, target)
    )
    return Section(KEY, TITLE, reading=_reading(p, ctx.scope, causes, cost), extra_html=extra)
