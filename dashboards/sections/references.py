"""How we compare: every published figure of the reference fleets (Llama 3, Meta's RSC clusters,
ByteRobust, StepFun, Titan, LANL, and a site's own targets) beside this fleet's figure
normalised the same way, with its 95% CI and the ratio (``analysis.reference_comparison``)."""

from __future__ import annotations

import html

import polars as pl

from analysis.reference_comparison import HEADER
from analysis.reference_comparison import cells
from analysis.reference_comparison import compare
from analysis.reference_comparison import headline
from analysis.reference_comparison import missing_reasons
from analysis.references import SITE_FILE
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table

KEY = "references"
TITLE = "How we compare with published fleets"
TABLES = ("job_attempts", "interruptions", "availability")


def _reading(rows: pl.DataFrame) -> str:
    line = headline(rows)
    compared = rows.filter(pl.col("verdict").is_not_null())
    counts = {v: compared.filter(pl.col("verdict") == v).height for v in ("worse", "better")}
    parts = [f"This fleet's {line.text}" if line else "No projection to put beside Llama 3's"]
    if compared.height:
        parts.append(
            f"of {compared.height} published figures, this fleet is worse on {counts['worse']}, "
            f"better on {counts['better']} and no different (the 95% CI of the ratio holds 1) on "
            f"{compared.height - counts['worse'] - counts['better']}"
        )
    missing = rows.filter(pl.col("missing").is_not_null()).height
    if missing:
        parts.append(
            f"{missing} have no figure of this fleet to compare (n/a: "
            f"{'; '.join(missing_reasons(rows))})"
        )
    return "; ".join(parts) + "."


def _sources(rows: pl.DataFrame) -> str:
    """What each figure counts and where it was published, and how this fleet's are counted."""
    defs = "".join(
        f"<li><b>{html.escape(r['short'])}</b>, {html.escape(cells(r)[1])}: "
        f"{html.escape(r['definition'])}</li>"
        for r in rows.iter_rows(named=True)
    )
    fleets = rows.unique("fleet", keep="first", maintain_order=True)
    src = "".join(
        f"<li><b>{html.escape(r['short'])}</b> ({html.escape(r['fleet_size'] or 'size not given')}"
        f"; {html.escape(r['period'])}): {html.escape(r['source'])}"
        + (f" ({html.escape(r['url'])})" if r["url"] else "")
        + f". Checked: {html.escape(r['verified'])}</li>"
        for r in fleets.iter_rows(named=True)
    )
    ours = "".join(
        f"<li>{html.escape(b)}</li>" for b in dict.fromkeys(rows["ours_basis"].drop_nulls())
    )
    return (
        "<details><summary>What each figure counts, its source, and how this fleet's are "
        f"counted</summary><p>Published:</p><ul>{defs}</ul><p>Sources:</p><ul>{src}</ul>"
        f"<p>This fleet:</p><ul>{ours}</ul><p>A site adds its own targets in "
        f"HOME/{SITE_FILE} (docs/cli.md).</p></details>"
    )


def build(ctx: ReportContext) -> Section:
    if ctx.wh is None or not any(ctx.t[n].height for n in ("job_attempts", "availability")):
        return Section(KEY, TITLE, note=NO_DATA)  # nothing of this fleet's to compare
    rows = compare(ctx.wh, getattr(ctx.wh, "home", None), tables=ctx.t)
    table = html_table(HEADER, [cells(r) for r in rows.iter_rows(named=True)])
    return Section(KEY, TITLE, reading=_reading(rows), extra_html=table + _sources(rows))
