"""The report's HTML page: one self-contained file (Vega, Vega-Lite and Vega-Embed inlined, no
network request). Everything from the data is text: strings placed in HTML go through
``html.escape``, chart specs travel as JSON inside a ``type="application/json"`` script with
``<``, ``>`` and ``&`` written as ``\\u003c`` escapes, and tooltips use Vega-Embed's default
(escaping) handler. Above the sections, a red banner names every invariant check the warehouse
fails (``analysis.checks``) with its count of offending rows and a few of them."""

from __future__ import annotations

import html
import json

from analysis.checks import ERROR
from analysis.checks import Evaluated
from dashboards.section import NO_DATA
from dashboards.section import WHOLE_FLEET
from dashboards.section import Section
from dashboards.vendor import javascript_bundle

CSS = """
body { font-family: Helvetica, Arial, sans-serif; color: #222; background: #f5f6f8; margin: 0; }
header { background: #1f3b73; color: white; padding: 20px 32px; }
header h1 { margin: 0 0 4px 0; font-size: 24px; }
header p { margin: 0; opacity: .85; font-size: 13px; }
header p.context { opacity: 1; font-size: 15px; margin-bottom: 4px; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 40px; }
section { background: white; border-radius: 6px; padding: 16px 22px; margin: 18px 0;
          box-shadow: 0 1px 3px rgba(0,0,0,.08); }
section h2 { font-size: 18px; margin: 0 0 10px 0; color: #1f3b73; }
.chart { overflow-x: auto; }
.chart.vega-embed { display: flex; flex-direction: column; width: 100%; }
.vega-bindings { order: -1; display: flex; flex-wrap: wrap; gap: 6px 22px; margin: 0 0 10px;
                  font-size: 14px; }
.vega-bind-name { color: #1f3b73; font-weight: bold; }
.chart svg { max-width: 100%; height: auto; }  /* the last few pixels a fit leaves over */
.reading { font-size: 15px; margin: 10px 0 4px; }
.note { font-style: italic; color: #8a5a00; background: #fff7e0; padding: 10px 12px;
         border-radius: 4px; }
.sub { font-size: 13px; color: #555; margin: 12px 0 4px; }
.table-scroll { overflow-x: auto; margin: 6px 0; }
table.data { border-collapse: collapse; font-size: 12px; }
table.data th, table.data td { border-bottom: 1px solid #e3e3e3; padding: 3px 10px 3px 0;
                               text-align: left; vertical-align: top; }
.nw { white-space: nowrap; }
details { font-size: 13px; margin-top: 8px; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(190px, 1fr)); gap: 12px;
          margin: 12px 0; }
.tile { border: 1px solid #e3e6ec; border-radius: 6px; padding: 10px 12px; }
.tile .value { font-size: 26px; font-weight: bold; color: #1f3b73; }
.tile .label { font-size: 13px; color: #333; margin-top: 2px; }
.tile .detail { font-size: 12px; color: #666; margin-top: 4px; }
.why { font-size: 14px; margin: 10px 0 0; }
ol#actions { font-size: 14px; margin: 4px 0 10px; }
nav#contents ol { columns: 2; font-size: 14px; margin: 6px 0; padding-left: 22px; }
nav#contents a { color: #1f3b73; text-decoration: none; }
dl.glossary dt { font-weight: bold; margin-top: 8px; }
dl.glossary dd { margin: 2px 0 0 16px; font-size: 14px; }
footer { font-size: 11px; color: #777; text-align: center; padding: 12px; }
@media (max-width: 600px) {  /* a phone: one column, less padding */
  header { padding: 14px 16px; }
  main { padding: 8px 8px 24px; }
  section { padding: 12px 12px; margin: 12px 0; }
  nav#contents ol { columns: 1; }
}
#failed-checks { background: #b3261e; color: white; border-radius: 6px; padding: 14px 22px;
                 margin: 18px 0; }
#failed-checks h2 { font-size: 18px; margin: 0 0 8px 0; color: white; }
#failed-checks ul { margin: 4px 0; padding-left: 20px; font-size: 14px; }
#failed-checks li li { font-size: 13px; overflow-wrap: anywhere; }
#failed-checks code { font-weight: bold; }
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
  // Charts fit their column: a single or layered view has width "container" (Vega-Lite lays
  // it out to the element); a concatenation has its view widths scaled until it fits, again
  // when the window is resized. Each view is kept in window.reportViews (the Vega view API).
  var specs = JSON.parse(document.getElementById("report-specs").textContent);
  var PHONE = 560;  // a chart's column narrower than this (px) stacks its side-by-side views
  window.reportViews = {};
  function scaled(spec, f) {
    if (Array.isArray(spec)) return spec.map(function (x) { return scaled(x, f); });
    if (spec === null || typeof spec !== "object") return spec;
    var out = {};
    Object.keys(spec).forEach(function (k) {
      var v = spec[k];
      if (k === "datasets" || k === "data" || k === "config") out[k] = v;
      else if (k === "width" && typeof v === "number" && !("type" in spec))
        out[k] = Math.max(80, Math.round(v * f));  // a view's width (marks carry "type")
      else out[k] = scaled(v, f);
    });
    return out;
  }
  function stacked(spec) {
    // a phone's column: views side by side are stacked instead, each at the column's width
    if (Array.isArray(spec)) return spec.map(stacked);
    if (spec === null || typeof spec !== "object") return spec;
    var out = {};
    Object.keys(spec).forEach(function (k) {
      if (k === "datasets" || k === "data" || k === "config") out[k] = spec[k];
      else if (k === "hconcat") out.vconcat = stacked(spec[k]);
      else if (k === "columns") out[k] = 1;
      else out[k] = stacked(spec[k]);
    });
    return out;
  }
  function lines(text, chars) {
    // a title or subtitle longer than ``chars`` as lines of whole words (Vega clips one line)
    if (typeof text !== "string" || text.length <= chars) return text;
    var out = [], line = "";
    text.split(" ").forEach(function (w) {
      if (line && (line + " " + w).length > chars) { out.push(line); line = w; }
      else line = line ? line + " " + w : w;
    });
    return out.concat(line ? [line] : []);
  }
  function narrowed(spec, chars, limit) {
    // every title (of a chart, a view, an axis, a legend) and subtitle in lines that fit, and
    // no axis or legend whose own labels may run longer than ``limit.axis`` / ``limit.legend``
    // pixels
    if (Array.isArray(spec)) return spec.map(function (x) { return narrowed(x, chars, limit); });
    if (spec === null || typeof spec !== "object") return spec;
    var out = {};
    Object.keys(spec).forEach(function (k) {
      var v = spec[k];
      if (k === "datasets" || k === "data" || k === "config" || k === "tooltip") out[k] = v;
      else if (k === "encoding") out[k] = narrowed(v, Math.floor(chars * 0.6), limit);
      else if (k === "title" && typeof v === "string") out[k] = lines(v, chars);
      else if (k === "title" && v && typeof v === "object")
        out[k] = Object.assign({}, v, {text: lines(v.text, chars),
                                       subtitle: lines(v.subtitle, chars)});
      else if ((k === "axis" || k === "legend") && v && typeof v === "object") {
        out[k] = narrowed(v, chars, limit);
        var most = limit[k];
        if (v.labelLimit === 0 || v.labelLimit > most) out[k].labelLimit = most;
      }
      else out[k] = narrowed(v, chars, limit);
    });
    return out;
  }
  function fitted(spec, width) {
    // what the column's width asks of a chart: axis labels that would overlap thinned out
    // (Vega's greedy removal, on every kind of axis); a y axis's end labels inside its range,
    // so the lowest never meets the first label of the x axis; on a phone, category labels cut
    // short (an ellipsis; the tooltip has them whole), legends under the chart and titles in
    // lines of whole words
    var config = Object.assign({}, spec.config);
    ["axisQuantitative", "axisTemporal", "axisDiscrete"].forEach(function (k) {
      config[k] = Object.assign({labelOverlap: "greedy"}, config[k]);
    });
    config.axisYQuantitative = Object.assign({labelFlush: true}, config.axisYQuantitative);
    if (width < PHONE) {
      var limit = {axis: Math.max(60, Math.round(width / 4)), legend: Math.round(width / 2)};
      config.axisDiscrete = Object.assign({}, config.axisDiscrete, {labelLimit: limit.axis});
      config.legend = Object.assign({}, config.legend, {orient: "bottom", direction: "vertical",
                                                        labelLimit: limit.legend});
      spec = narrowed(stacked(spec), Math.max(24, Math.floor((width - 16) / 7)), limit);
    }
    return Object.assign({}, spec, {config: config});
  }
  function draw(id, f) {
    var el = document.getElementById("chart-" + id);
    var spec = f === 1 ? specs[id] : scaled(specs[id], f);
    spec = fitted(spec, el.clientWidth);
    return vegaEmbed(el, spec, {renderer: "svg", actions: false}).then(function (res) {
      window.reportViews[id] = res.view;
      return el;
    }).catch(function (err) {
      el.textContent = "chart failed to render: " + err;
      console.error(err);
    });
  }
  function fit(id, f, tries, prev) {
    // the width a concatenation uses is about fixed + f * views: two draws give both, the
    // third fits (the secant step); view widths scale by f, labels and legends do not
    return draw(id, f).then(function (el) {
      var svg = el && el.querySelector("svg");
      if (!svg || tries <= 0) return;
      var room = el.clientWidth - 2, used = svg.getBoundingClientRect().width;
      if (room <= 0 || (used <= room && used > 0.92 * room) || (used < room && f >= 1.6)) return;
      var slope = prev && prev.f !== f ? (used - prev.used) / (f - prev.f) : used / f;
      var next = Math.min(1.6, Math.max(0.3, f + (room - used) / Math.max(slope, 1)));
      if (Math.abs(next - f) > 0.005) return fit(id, next, tries - 1, {f: f, used: used});
    });
  }
  var concat = Object.keys(specs).filter(function (id) { return specs[id].width !== "container"; });
  Object.keys(specs).forEach(function (id) {
    if (concat.indexOf(id) < 0) draw(id, 1); else fit(id, 1, 4);
  });
  var timer = null, lastWidth = window.innerWidth;
  window.addEventListener("resize", function () {
    if (window.innerWidth === lastWidth) return;
    lastWidth = window.innerWidth;
    clearTimeout(timer);
    timer = setTimeout(function () { concat.forEach(function (id) { fit(id, 1, 4); }); }, 250);
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


CONCAT = ("hconcat", "vconcat", "concat", "facet", "repeat")


def fit_container(spec: dict) -> dict:
    """The spec as the page embeds it: a single or layered view takes its element's width
    (Vega-Lite's width "container" with autosize fit-x); a concatenation, which Vega-Lite
    cannot fit to a container, is scaled to fit by the page's script (``EMBED_JS``)."""
    if any(k in spec for k in CONCAT):
        return spec
    return {**spec, "width": "container", "autosize": {"type": "fit-x", "contains": "padding"}}


def contents_html(sections: list[Section]) -> str:
    """The table of contents: a link to every section after the first (the first screen)."""
    items = "".join(
        f'<li><a href="#{html.escape(s.key)}">{html.escape(s.title)}</a></li>' for s in sections[1:]
    )
    return (
        '<section id="contents-section"><h2>Contents</h2><nav id="contents">'
        f"<ol>{items}</ol></nav></section>"
    )


def checks_banner(evaluated: list[Evaluated]) -> str:
    """The red banner of the failed ERROR invariant checks (and of those that could not run),
    each named with what it checks, its count of offending rows and a few of them; empty when
    every check holds."""
    failed = [e for e in evaluated if e.failed and e.invariant.severity == ERROR]
    if not failed:
        return ""
    items = []
    for e in failed:
        head = (
            f"<code>{html.escape(e.invariant.name)}</code>: {html.escape(e.invariant.description)}"
        )
        if e.result is None:
            items.append(f"<li>{head} Could not be evaluated: {html.escape(e.error)}</li>")
            continue
        meta = e.result.metadata
        count = meta.get("violations")
        examples = meta.get("examples") or []
        head += f" {count:,} violation(s)" if count is not None else ""
        head += ", e.g.:" if examples else "."
        rows = "".join(f"<li>{html.escape(str(x))}</li>" for x in examples)
        items.append(f"<li>{head}" + (f"<ul>{rows}</ul>" if rows else "") + "</li>")
    n = len(failed)
    return (
        '<div id="failed-checks" role="alert"><h2>'
        f"{n} invariant check{'s' if n > 1 else ''} failed: figures in this report break a "
        "limit they must keep</h2>"
        f"<ul>{''.join(items)}</ul></div>"
    )


def render_html(
    sections: list[Section],
    generated: str,
    period: str,
    scope: str = WHOLE_FLEET,
    banner: str = "",
) -> str:
    """The page: the header (period, scope), the banner of failed invariant checks, the first
    section, the table of contents, then every other section. No local path appears: the file
    is read away from its machine."""
    body = []
    for s in sections:
        inner = f"<h2>{html.escape(s.title)}</h2>"
        if s.spec is not None:
            inner += f'<div class="chart" id="chart-{html.escape(s.key)}"></div>'
            inner += f'<p class="reading">{html.escape(s.reading)}</p>'
        elif s.reading:  # a table section: its reading, then its table
            inner += f'<p class="reading">{html.escape(s.reading)}</p>'
        else:
            inner += f'<p class="note">{html.escape(s.note or NO_DATA)}</p>'
        inner += s.extra_html
        body.append(f'<section id="{html.escape(s.key)}">{inner}</section>')
    body.insert(min(1, len(body)), contents_html(sections))
    body.insert(0, banner)
    specs = {s.key: fit_container(s.spec) for s in sections if s.spec is not None}
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>GPU fleet goodput report</title>"
        f"<style>{CSS}</style></head><body>"
        "<header><h1>GPU fleet reliability and goodput</h1>"
        f'<p class="context"><span id="report-period">Period: {html.escape(period)}</span> · '
        f'<span id="report-scope">Scope: {html.escape(scope)}</span></p>'
        f"<p>Generated {html.escape(generated)}. "
        "Intervals are 95% confidence intervals or bands; terms are explained in the "
        '<a href="#glossary" style="color:white">glossary</a>.</p></header>'
        f'<main data-charts="{len(specs)}">' + "".join(body) + "</main>"
        "<footer>fleet-goodput report; Vega, Vega-Lite and Vega-Embed are inlined, the file "
        "makes no network request."
        "</footer>"
        f"<script>{javascript_bundle()}</script>"
        f'<script type="application/json" id="report-specs">{script_json(specs)}</script>'
        f"<script>{EMBED_JS}</script></body></html>\n"
    )
