"""The report's first screen in a real browser (Debian's headless Chromium, 1400 px wide): the
period, the scope, measured goodput, lost GPU-hours, their cost, the interruptions with the time
between them, the top causes and the table of contents are all above the fold, none
overlapping, and every contents link leads to a section."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import fixture_warehouse
from test_report_browser import ARGS
from test_report_browser import CHROMIUM

from dashboards.report import build_report

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)"
)
WIDTH, FOLD = 1400, 900
FIRST_SCREEN = ("#report-period", "#report-scope", "#tile-goodput", "#tile-lost", "#tile-cost",
                "#tile-interruptions", "#summary table.data")  # fmt: skip


@pytest.fixture(scope="module")
def screen(tmp_path_factory) -> dict:
    sync_api = pytest.importorskip("playwright.sync_api")
    home = tmp_path_factory.mktemp("first") / "home"
    report = build_report(fixture_warehouse(home), images=False, gpu_hour_cost=3.0)
    out: dict = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": FOLD})
            page.goto(report.as_uri(), wait_until="load")
            page.wait_for_selector("#summary .tiles", timeout=60_000)
            out["boxes"] = {sel: page.locator(sel).first.bounding_box() for sel in FIRST_SCREEN}
            out["tiles"] = [t.bounding_box() for t in page.locator("#summary .tile").all()]
            out["tile_text"] = page.locator("#summary .tiles").inner_text()
            out["links"] = page.locator("#contents a").evaluate_all(
                "as => as.map(a => a.getAttribute('href'))"
            )
            out["ids"] = page.locator("main > section").evaluate_all("ss => ss.map(s => s.id)")
            out["glossary_terms"] = page.locator("#glossary dt").count()
            out["header"] = page.locator("header").inner_text()
            out["scroll_width"] = page.evaluate("document.documentElement.scrollWidth")
            shot = tmp_path_factory.mktemp("shot") / "first_screen.png"
            page.screenshot(path=str(shot))
            out["shot"] = shot
        finally:
            browser.close()
    return out


def test_first_screen_elements_are_above_the_fold(screen):
    for sel, box in screen["boxes"].items():
        assert box is not None and box["width"] > 0 and box["height"] > 0, sel
        assert box["y"] + box["height"] <= FOLD, sel  # seen without scrolling
    assert screen["scroll_width"] <= WIDTH  # nothing wider than the window
    text = screen["tile_text"]
    assert "measured goodput" in text and "GPU-hours lost to interruptions" in text
    assert "cost of the lost GPU-hours" in text and "at $3.00 per GPU-hour" in text
    assert " h across the fleet" in text and "MTBF" not in text  # MTTI and MTBF: defined below
    assert Path(screen["shot"]).stat().st_size > 20_000


def test_tiles_do_not_overlap(screen):
    tiles = screen["tiles"]
    assert len(tiles) >= 4
    for i, a in enumerate(tiles):
        for b in tiles[i + 1 :]:
            apart = (
                a["x"] + a["width"] <= b["x"]
                or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"]
                or b["y"] + b["height"] <= a["y"]
            )
            assert apart, (a, b)


def test_contents_link_every_section_and_the_header_names_no_local_path(screen):
    sections = [i for i in screen["ids"] if i not in ("summary", "contents-section")]
    assert screen["links"] == [f"#{i}" for i in sections]
    assert sections[-1] == "glossary" and screen["glossary_terms"] >= 30
    assert "Period:" in screen["header"] and "Scope: whole fleet" in screen["header"]
    assert "/tmp" not in screen["header"] and "home" not in screen["header"]
