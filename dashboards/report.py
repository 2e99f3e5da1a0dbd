"""The leadership report: one self-contained HTML file (``dashboards.page``), plus a PNG and an
SVG per chart for slides (``dashboards.images``). The sections themselves are modules of
``dashboards/sections/`` (found by ``dashboards.sections.registry``); this module reads the
tables they name once, builds them in order, and writes the page and the images.

Each section is a titled chart and one sentence computed from the same numbers the chart
draws; a section whose tables are empty says so instead. A character XML cannot hold (an
escape sequence in a host name) is shown as its picture in the page, the charts and their
images alike (``dashboards.printable.xml_safe``, applied to each whole spec and page).
"""

from __future__ import annotations

import sys
from datetime import UTC
from datetime import datetime
from pathlib import Path

from analysis.assumptions import GPU_HOUR_COST
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import TARGET_GPUS
from analysis.checks import evaluate
from analysis.numbers import MINUTE
from analysis.observation import stored_window
from analysis.site import Site
from dashboards import charts
from dashboards.images import write_images
from dashboards.page import checks_banner
from dashboards.page import render_html
from dashboards.printable import printable
from dashboards.printable import xml_safe
from dashboards.section import NO_DATA
from dashboards.section import WHOLE_FLEET
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.sections import registry
from dashboards.sections import tables


def home_site(wh) -> Site:
    """The settings of the home behind ``wh`` (``HOME/goodput.toml``; a scope's is its fleet's);
    a file that does not parse is said on stderr and the report built without it (``goodput
    report`` and ``build`` refuse it before)."""
    from analysis.scope import fleet_of
    from analysis.site import load

    try:
        return load(getattr(fleet_of(wh), "home", None))
    except ValueError as exc:
        print(f"goodput report: {exc}; the report uses no site setting", file=sys.stderr)
        return Site()


def build_sections(
    wh,
    target_gpus: int = TARGET_GPUS,
    scope: str = WHOLE_FLEET,
    gpu_hour_cost: float | None = None,
    site: Site | None = None,
) -> list[Section]:
    """Every section of ``dashboards.sections``, in report order; each table any of them names
    is read once. A section that fails to build (or whose table could not be read) reports
    its error instead of sinking the report. ``site``: the home's settings (default: read from
    ``wh.home``); ``gpu_hour_cost`` None: the site's price, else none."""
    site = home_site(wh) if site is None else site
    if gpu_hour_cost is None:
        gpu_hour_cost = site.gpu_hour_cost if site.gpu_hour_cost is not None else GPU_HOUR_COST
    t, unread = {}, {}
    for name in tables():
        try:
            t[name] = wh.read(name)
        except Exception as exc:  # noqa: BLE001 - reported by the sections that need it
            unread[name] = exc
    ctx = ReportContext(wh=wh, t=t, target_gpus=target_gpus, scope=scope,
                        gpu_hour_cost=gpu_hour_cost, site=site)  # fmt: skip
    out = []
    for module in registry():
        try:
            bad = [n for n in module.TABLES if n in unread]
            if bad:
                raise RuntimeError(f"table {bad[0]} could not be read: {unread[bad[0]]}")
            sec = module.build(ctx)
            if sec is None:  # a section for data this warehouse does not hold: left out
                continue
            if sec.note == NO_DATA:
                sec.note = lacking(module.TABLES, t)
            if sec.chart is not None:
                sec.spec = charts.class_colors(printable(charts.configure(sec.chart).to_dict()))
        except Exception as exc:  # noqa: BLE001 - one broken input table must not sink the report
            print(f"goodput report: section {module.KEY!r} failed: {exc!r}", file=sys.stderr)
            sec = Section(
                module.KEY,
                module.TITLE,
                note=f"this section could not be built: {type(exc).__name__}: {exc}",
            )
        out.append(sec)
    return out


def lacking(names: tuple[str, ...], t: dict) -> str:
    """The no-data note of a section, naming what it lacks: the tables it reads that are empty
    in this warehouse (a home holding only some sources: no telemetry, no job records)."""
    empty = [n for n in names if n in t and t[n].height == 0]
    return f"{NO_DATA} (nothing in {', '.join(empty)})" if empty else NO_DATA


def period_text(wh) -> str:
    """The stored observation window (``analysis.observation.stored_window``) in words."""
    w = stored_window(wh)
    if w is None or w.observed_from is None or w.observed_to is None:
        return "not established yet (run goodput build)"
    text = f"{w.observed_from:{MINUTE}} to {w.observed_to:{MINUTE}} UTC"
    return text + (" (estimated from the earliest records)" if w.flagged else "")


def build_report(
    wh,
    out: Path | None = None,
    target_gpus: int = TARGET_GPUS,
    images: bool = True,
    scope: str = WHOLE_FLEET,
    gpu_hour_cost: float | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
    site: Site | None = None,
) -> Path:
    """Write the HTML report (default ``<home>/reports/goodput_report.html``; an existing
    directory as ``out`` gets that file name inside it) and, unless ``images`` is false, its
    chart images (``charts/<section>.png|svg`` next to it); returns the HTML path. The header
    states the period (the stored observation window) and ``scope``, a one-line description
    of what the report covers; ``gpu_hour_cost`` ($ per GPU-hour, 0: none; None: the site's)
    prices the lost GPU-hours on the first screen, ``site`` (``analysis.site``, default read
    from the home) gives its goodput target, planned job size and the actions' costs.
    The invariant checks run on ``wh`` (``gpus_per_node``: the GPUs of a host whose data does
    not show them) and any that fails is named above all."""
    out = Path(out) if out is not None else wh.reports / "goodput_report.html"
    if out.is_dir():
        out = out / "goodput_report.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    sections = build_sections(wh, target_gpus, scope, gpu_hour_cost, site)
    generated = datetime.now(UTC).strftime(f"{MINUTE} UTC")
    period = period_text(wh)
    banner = checks_banner(evaluate(wh, gpus_per_node=gpus_per_node))
    page = xml_safe(render_html(sections, generated, period, scope, banner))
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    if images:
        write_images(sections, out.parent / "charts", period, scope)
    return out
