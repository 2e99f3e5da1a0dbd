"""What ran on the data at hand and what was skipped, the observation window, and where each
class's unit population came from (a table, no chart)."""

from __future__ import annotations

import polars as pl

from analysis.headline import unit_populations
from analysis.numbers import MINUTE
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table

KEY = "analyses"
TITLE = "Analyses run and skipped, observation window, unit populations"
TABLES = ("failure_rates", "analysis_status", "observation_window")


def build(ctx: ReportContext) -> Section:
    """What ran on the data at hand, what was skipped and why, the observation window and
    where each class's unit population came from (no chart: a table)."""
    s = Section(KEY, TITLE)
    t = ctx.t
    st = t["analysis_status"].sort("analysis")
    win = t["observation_window"]
    if st.height == 0 and win.height == 0:
        s.note = NO_DATA
        return s
    skipped = st.filter(pl.col("status") != "ok")
    text = f"{st.height - skipped.height} of {st.height} analyses ran"
    if skipped.height:
        text += "; missing inputs or errors: " + "; ".join(
            f"{a} {st_}" for a, st_ in skipped.select("analysis", "status").rows()
        )
    w = win.filter(pl.col("source") == "window")
    if w.height and w["observed_from"][0] is not None:
        r = w.row(0, named=True)
        text += (
            f". Exposure is measured from {r['observed_from']:{MINUTE}} to "
            f"{r['observed_to']:{MINUTE}} UTC "
            f"({r['method']}{', flagged: ' + r['note'] if r['flagged'] else ''})"
        )
    fr = t["failure_rates"]
    if fr.height:
        text += ". Units per class from: " + "; ".join(
            f"{p or 'unknown'} ({c})" for p, c in unit_populations(fr)
        )
    s.reading = text + "."
    s.extra_html = html_table(
        ["analysis", "status", "reason", "rows"],
        [
            [a, b, c or "", "" if n is None else f"{n:,}"]
            for a, b, c, n in st.select("analysis", "status", "reason", "rows").rows()
        ],
    )
    spans = win.filter(pl.col("source") != "window")
    if spans.height:
        s.extra_html += (
            '<p class="sub">Robust time span per source (outlying record times do not stretch '
            "it)</p>"
            + html_table(
                ["source", "from (UTC)", "to (UTC)", "records", "outlying times"],
                [
                    [
                        r["source"],
                        f"{r['observed_from']:{MINUTE}}",
                        f"{r['observed_to']:{MINUTE}}",
                        f"{r['records']:,}",
                        f"{r['outliers']:,}",
                    ]
                    for r in spans.iter_rows(named=True)
                ],
            )
        )
    return s
