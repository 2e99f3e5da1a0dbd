"""The report-section contract and what sections share: ``Section`` (what a section module's
``build`` returns), ``ReportContext`` (what it is given), the text formatting helpers, and the
few readings more than one section states (fleet coverage, the projection at the target scale,
the interruption scope).

A section is one module ``dashboards/sections/<key>.py`` declaring ``KEY``, ``TITLE``,
``TABLES`` and ``build(ctx) -> Section``; ``dashboards.sections.registry`` finds it and places it
where ``dashboards.sections.ORDER`` lists its key.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from dataclasses import field
from functools import cached_property

import altair as alt
import polars as pl

from analysis.assumptions import GPU_HOUR_COST
from analysis.numbers import change  # noqa: F401 - the sections' formats
from analysis.numbers import hours  # noqa: F401 - the sections' formats
from analysis.numbers import mean_time  # noqa: F401 - the sections' formats
from analysis.numbers import money  # noqa: F401 - the sections' formats
from analysis.numbers import num  # noqa: F401 - the sections' formats
from analysis.numbers import pct  # noqa: F401 - the sections' formats
from analysis.site import Site
from analysis.taxonomy import DEFAULT_SCOPE

NO_DATA = "no data yet: run goodput demo / goodput build"
SCOPE_WORDS = {
    "hardware": "hardware fits only",
    "infrastructure": "infrastructure: everything but the job's own failures",
    "all": "all causes, the job's own failures included",
}
WHOLE_FLEET = "whole fleet"


@dataclass
class Section:
    key: str  # chart file name and element id (a fixed identifier, never data)
    title: str
    chart: alt.TopLevelMixin | None = None
    reading: str = ""
    note: str = ""  # shown instead of the chart when there is none
    extra_html: str = ""  # already escaped
    spec: dict | None = field(default=None, repr=False)


@dataclass
class ReportContext:
    """What every section's ``build`` gets: the warehouse, every table any section's ``TABLES``
    names (read once for the whole report), the target job size, the scope in words, the price
    of a GPU-hour and the home's settings (``analysis.site``)."""

    wh: object
    t: dict[str, pl.DataFrame]
    target_gpus: int
    scope: str = WHOLE_FLEET
    gpu_hour_cost: float = GPU_HOUR_COST  # $ per GPU-hour; 0: no cost shown
    site: Site = field(default_factory=Site)

    @cached_property
    def coverage(self) -> pl.DataFrame:
        """First/last time and rows per (source table, host), computed once per report."""
        return coverage_frame(self.wh)


# Where a browser may break a line inside a word (after a hyphen or a dash, at a slash): a word
# holding one is kept whole (``cell_html``), so a cell is never narrower than its longest word.
BREAKS_INSIDE = re.compile(r"[-‐‑‒–—/\\|]")


def cell_html(value) -> str:
    """A table cell's text, escaped, each word a line may break inside kept whole."""
    words = ("" if value is None else str(value)).split()
    return " ".join(
        f'<span class="nw">{html.escape(w)}</span>' if BREAKS_INSIDE.search(w) else html.escape(w)
        for w in words
    )


def tile(label: str, value: str, detail: str, key: str) -> str:
    """A figure as a tile (``.tiles`` lays them out in as many columns as the page is wide)."""
    return (
        f'<div class="tile" id="tile-{key}"><div class="value">{html.escape(value)}</div>'
        f'<div class="label">{html.escape(label)}</div>'
        f'<div class="detail">{html.escape(detail)}</div></div>'
    )


def html_table(header: list[str], rows: list[list]) -> str:
    """An HTML table, every cell escaped, in a box that scrolls sideways when the table is wider
    than the page (a phone): its columns never squeeze a word onto two lines."""
    head = "".join(f"<th>{cell_html(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell_html(c)}</td>" for c in r) + "</tr>" for r in rows)
    return (
        '<div class="table-scroll"><table class="data">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


# ----------------------------------------------------------------------------- shared readings
def telemetry_rollup(wh) -> str | None:
    """The table the report reads telemetry's hosts, GPUs and hours from: ``gpu_daily`` (one row
    per GPU, metric and day; the same hours, sample counts and GPUs as gpu_hourly, 24x fewer
    rows), else ``gpu_hourly``, else None (raw samples only). A scope that filters gpu_hourly
    reads it: its gpu_daily holds whole days (cut to the scope's hosts, not its hours)."""
    if wh.files("gpu_daily") and not getattr(wh, "inputs", {}).get("gpu_hourly"):
        return "gpu_daily"
    return "gpu_hourly" if wh.files("gpu_hourly") else None


def coverage_frame(wh) -> pl.DataFrame:
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
    tables = dict.fromkeys(queries)
    rollup = telemetry_rollup(wh)
    if rollup == "gpu_daily":  # gpu_hourly's hours, n and hosts from its per-day rollup
        queries["gpu_hourly"] = (
            "SELECT host, first_hour AS t0, last_hour + INTERVAL 1 HOUR AS t1, n FROM ({v}) "
            "WHERE first_hour IS NOT NULL"
        )
        tables["gpu_hourly"] = "gpu_daily"
    elif rollup == "gpu_hourly":
        queries["gpu_hourly"] = (
            "SELECT host, hour AS t0, hour + INTERVAL 1 HOUR AS t1, n FROM ({v}) WHERE hour "
            "IS NOT NULL"
        )
    else:
        queries["gpu_samples"] = (
            "SELECT host, time AS t0, time AS t1 FROM ({v}) WHERE time IS NOT NULL"
        )
    for source, inner in queries.items():
        table = tables.get(source) or source
        if not wh.files(table):
            continue
        count = "sum(n)" if source == "gpu_hourly" else "count(*)"
        sql = (
            f"SELECT '{source}' AS source, coalesce(host, '(no host)') AS host, min(t0) AS first, "
            f"max(t1) AS last, {count}::BIGINT AS rows FROM ({inner.format(v=wh.view_sql(table))}) "
            "GROUP BY 2 ORDER BY 2"
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


def scale_frame(projections: pl.DataFrame) -> pl.DataFrame:
    """The n_gpus sweep (scenario 'scale_sweep' when present), analytic rows first."""
    df = projections.filter(pl.col("knob") == "n_gpus")
    if "scale_sweep" in df["scenario"].to_list():
        df = df.filter(pl.col("scenario") == "scale_sweep")
    if df.height and "analytic" in df["method"].to_list():
        df = df.filter(pl.col("method") == "analytic")
    return df.unique("n_gpus", keep="first").sort("n_gpus")


def projection_at(proj: pl.DataFrame, target: int) -> dict | None:
    """The projection for a job of exactly ``target`` GPUs: a scale-sweep point, else the
    sensitivity baseline (analysis/whatif.py evaluates it at the target scale)."""
    sc = scale_frame(proj).filter(pl.col("n_gpus") == target)
    if sc.height:
        return sc.row(0, named=True)
    base = proj.filter(
        (pl.col("scenario") == "sensitivity")
        & (pl.col("knob") == "baseline")
        & (pl.col("n_gpus") == target)
        & (pl.col("method") == "analytic")
    )
    return base.row(0, named=True) if base.height else None


def interruption_scope(proj: pl.DataFrame) -> str:
    """The interruption scope the stored projections used (``analysis.taxonomy.SCOPES``)."""
    if "scope" in proj.columns:
        named = proj["scope"].drop_nulls()
        if named.len():
            return named[0]
    return DEFAULT_SCOPE
