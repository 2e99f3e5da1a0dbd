"""The report's layout in a real browser (Debian's headless Chromium) on a phone (390 px) and on a
desktop (1400 px): no two pieces of text overlap (HTML text line by line, and every visible text
a chart drew), no table cell is narrower than its longest word, and no chart runs past the
window or its column. A full-page screenshot of each width is attached to the test output
(its path, printed and recorded as a property of the test)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import fixture_warehouse
from test_report_browser import ARGS
from test_report_browser import CHROMIUM

from analysis.site import parse
from dashboards.report import build_report

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)"
)
WIDTHS = (390, 1400)

# Every visible piece of text as a box: an HTML text node's line boxes (a wrapped line is its
# own box, so a paragraph beside a bold word is not one big rectangle), and each text a chart drew
# as the rectangle it really covers, turned with it (Vega angles axis labels; it hides those it
# thins out with opacity 0). Two boxes overlap when one reaches more than 2 px into the other
# (separating-axis test on the two quadrilaterals); the pairs found are returned as their texts.
OVERLAPS = """() => {
  const boxes = [];
  const corners = r => [[r.left, r.top], [r.right, r.top], [r.right, r.bottom], [r.left, r.bottom]];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || el.closest('svg, script, style')) continue;
    const shut = el.closest('details:not([open])');  // a closed details shows its summary only
    if (shut && !el.closest('summary')) continue;
    if (getComputedStyle(el).visibility === 'hidden') continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    for (const r of range.getClientRects())
      if (r.width > 1 && r.height > 1) boxes.push([n.textContent.trim().slice(0, 50), corners(r)]);
  }
  document.querySelectorAll('svg text').forEach(t => {
    if (!t.textContent.trim()) return;
    for (let e = t; e && e.tagName !== 'svg'; e = e.parentElement)
      if (e.getAttribute('opacity') === '0' || getComputedStyle(e).opacity === '0') return;
    const b = t.getBBox(), m = t.getScreenCTM();
    if (b.width <= 1 || b.height <= 1) return;
    const p = (x, y) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f];
    const chart = t.closest('div.chart');
    boxes.push([(chart ? chart.id + ': ' : '') + t.textContent.trim().slice(0, 40),
                [p(b.x, b.y), p(b.x + b.width, b.y), p(b.x + b.width, b.y + b.height),
                 p(b.x, b.y + b.height)]]);
  });
  // a side of either quadrilateral separates them, 2 px of slack: a text's box holds its font's
  // whole ascent and descent, more than its ink
  const apart = (a, b) => {
    for (const q of [a, b]) for (let i = 0; i < 4; i++) {
      const [x1, y1] = q[i], [x2, y2] = q[(i + 1) % 4];
      const len = Math.hypot(x2 - x1, y2 - y1) || 1, nx = (y1 - y2) / len, ny = (x2 - x1) / len;
      const proj = pts => pts.map(([x, y]) => x * nx + y * ny);
      const pa = proj(a), pb = proj(b);
      if (Math.max(...pa) < Math.min(...pb) + 2 || Math.max(...pb) < Math.min(...pa) + 2)
        return true;
    }
    return false;
  };
  const top = q => Math.min(...q.map(c => c[1])), bottom = q => Math.max(...q.map(c => c[1]));
  boxes.sort((a, b) => top(a[1]) - top(b[1]));
  const bad = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length && top(boxes[j][1]) < bottom(boxes[i][1]); j++)
      if (!apart(boxes[i][1], boxes[j][1])) bad.push([boxes[i][0], boxes[j][0]]);
  return {count: boxes.length, bad: bad};
}"""

# Each table cell's content width against its longest word (split at white space), measured in
# the cell's own font.
NARROW_CELLS = """() => {
  const ctx = document.createElement('canvas').getContext('2d');
  const bad = [];
  let cells = 0;
  document.querySelectorAll('table td, table th').forEach(c => {
    const st = getComputedStyle(c);
    ctx.font = st.font;
    const words = c.textContent.split(/\\s+/).filter(w => w);
    if (!words.length) return;
    cells++;
    const longest = Math.max(...words.map(w => ctx.measureText(w).width));
    const room = c.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    if (room + 1 < longest) bad.push([c.textContent.slice(0, 50), Math.round(room),
                                      Math.round(longest)]);
  });
  return {cells: cells, bad: bad};
}"""

# Every visible text a chart drew that its drawing cuts off (reaching past the chart's own box by
# more than a pixel): [chart, text].
CUT_OFF = """() => {
  const bad = [];
  document.querySelectorAll('div.chart svg').forEach(svg => {
    const box = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(t => {
      if (!t.textContent.trim()) return;
      for (let e = t; e && e !== svg; e = e.parentElement)
        if (e.getAttribute('opacity') === '0') return;
      const r = t.getBoundingClientRect();
      if (r.width <= 1) return;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
          || r.bottom > box.bottom + 1) bad.push([svg.closest('div.chart').id, t.textContent]);
    });
  });
  return bad;
}"""

# Each chart against the window and its column: [id, its column's width, the chart's width, its
# left and right edges].
CHARTS = """() => Array.from(document.querySelectorAll('div.chart')).map(el => {
  const svg = el.querySelector('svg'), r = svg.getBoundingClientRect();
  return [el.id, el.clientWidth, r.width, r.left, r.right];
})"""


# the first screen's parts (dashboards/sections/summary.py)
FIRST_SCREEN = ("#tile-goodput", "#tile-cost", "#compare-line", "#summary-causes table",
                "#actions table", "#vocabulary")  # fmt: skip


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("layout") / "home"
    site = parse(  # every part of the first screen: target, planned size, actions' costs
        "goodput_target = 0.95\nplanned_job_gpus = 4096\n[action_cost]\nspare_node = 250000\n"
        "faster_restart = 120000\n",
        "goodput.toml",
    )
    return build_report(fixture_warehouse(home), images=False, gpu_hour_cost=3.0, site=site)


@pytest.fixture(scope="module")
def pages(report, tmp_path_factory) -> dict[int, dict]:
    """The report at each width: what the checks found, and a full-page screenshot."""
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = tmp_path_factory.mktemp("screenshots")
    out = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            for width in WIDTHS:
                page = browser.new_page(viewport={"width": width, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(report.as_uri(), wait_until="load")
                n = int(page.locator("main").get_attribute("data-charts"))
                page.wait_for_function(
                    "n => Object.keys(window.reportViews || {}).length >= n", arg=n, timeout=60_000
                )
                page.wait_for_timeout(800)  # the concatenations fit their column
                shot = shots / f"report_{width}px.png"
                page.screenshot(path=str(shot), full_page=True)
                out[width] = {
                    "overlaps": page.evaluate(OVERLAPS),
                    "cells": page.evaluate(NARROW_CELLS),
                    "charts": page.evaluate(CHARTS),
                    "cut_off": page.evaluate(CUT_OFF),
                    "scroll_width": page.evaluate("document.documentElement.scrollWidth"),
                    "first": {sel: page.locator(sel).bounding_box() for sel in FIRST_SCREEN},
                    "errors": errors,
                    "shot": shot,
                }
                page.close()
        finally:
            browser.close()
    return out


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def shown(request, pages, record_property):
    width = request.param
    got = pages[width]
    record_property(f"screenshot_{width}px", str(got["shot"]))
    print(f"screenshot at {width} px: {got['shot']}")
    assert got["shot"].stat().st_size > 50_000 and got["errors"] == []
    return width, got


def test_no_text_overlaps_other_text(shown):
    width, got = shown
    assert got["overlaps"]["count"] > 500  # the whole page was measured
    assert got["overlaps"]["bad"] == [], width


def test_no_table_cell_is_narrower_than_its_longest_word(shown):
    width, got = shown
    assert got["cells"]["cells"] > 50
    assert got["cells"]["bad"] == [], width


def test_every_chart_is_inside_the_window_and_its_column(shown):
    width, got = shown
    assert got["scroll_width"] <= width  # the page never scrolls sideways
    assert len(got["charts"]) >= 10
    for key, room, used, left, right in got["charts"]:
        assert used <= room + 2, (key, room, used)  # nothing cut off by its column
        assert left >= -1 and right <= width + 1, (key, left, right)
    assert got["cut_off"] == [], width  # no label or title runs out of its chart


def test_the_first_screen_is_whole_at_every_width(shown):
    """Target, comparison, costs, ranked actions (two job sizes) and the definition of MTTI
    are all on the page, inside the window (a wide table scrolls inside its own box)."""
    width, got = shown
    for sel, box in got["first"].items():
        assert box is not None and box["width"] > 0 and box["height"] > 0, (width, sel)
        if "table" not in sel:
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (width, sel)
