"""The report in a real browser (Debian's headless Chromium driven by Playwright): it loads from
file:// with the network blocked, logs no console error, requests nothing, renders every chart,
and hostile job / host names stay text."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_report import EVIL_HOST
from test_report import XSS
from test_report import fixture_warehouse

from dashboards.report import build_report

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("browser") / "home"
    return build_report(fixture_warehouse(home), images=False)  # images: tested in test_report


@pytest.fixture(scope="module")
def loaded(report, tmp_path_factory):
    """Open the report once; collect console errors, page errors, dialogs and every request."""
    sync_api = pytest.importorskip("playwright.sync_api")
    seen = {"console_errors": [], "page_errors": [], "dialogs": [], "requests": [], "blocked": []}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})

            def route(r):
                url = r.request.url
                seen["requests"].append(url)
                if url.startswith("file://"):
                    r.continue_()
                else:
                    seen["blocked"].append(url)
                    r.abort()

            page.route("**/*", route)
            page.on(
                "console", lambda m: m.type == "error" and seen["console_errors"].append(m.text)
            )
            page.on("pageerror", lambda e: seen["page_errors"].append(str(e)))

            def dialog(d):
                seen["dialogs"].append(d.message)
                d.dismiss()

            page.on("dialog", dialog)
            page.goto(report.as_uri(), wait_until="load")
            expected = int(page.locator("main").get_attribute("data-charts"))
            page.wait_for_function(
                "n => document.querySelectorAll('.vega-embed svg.marks').length >= n",
                arg=expected,
                timeout=20_000,
            )
            page.wait_for_timeout(300)  # let any late handler fire before counting
            seen["expected"] = expected
            seen["rendered"] = page.locator(".vega-embed svg.marks").count()
            seen["chart_divs"] = page.locator("div.chart").count()
            seen["img_x"] = page.locator("img[src='x']").count()
            seen["imgs"] = page.locator("img").count()
            seen["table_text"] = page.locator("#goodput_measured table").inner_text()
            seen["quarantine_text"] = page.locator("#data_quality table").inner_text()
            seen["axis_text"] = (
                page.locator("#chart-coverage svg.marks").text_content() if seen["rendered"] else ""
            )
            shot = tmp_path_factory.mktemp("shot") / "report.png"
            page.screenshot(path=str(shot), full_page=True)
            seen["screenshot"] = shot
        finally:
            browser.close()
    return seen


def test_loads_offline_without_errors_or_requests(loaded, report):
    assert loaded["console_errors"] == [] and loaded["page_errors"] == []
    assert loaded["blocked"] == []  # no http(s), data-fetch or anything else off disk
    assert loaded["requests"] == [report.as_uri()]


def test_every_chart_renders(loaded):
    assert loaded["expected"] == 13 == loaded["chart_divs"]  # every section with a chart
    assert loaded["rendered"] == loaded["expected"]
    shot = loaded["screenshot"]
    assert shot.stat().st_size > 50_000  # a full page of charts, not a blank canvas


def test_hostile_names_are_text_and_run_nothing(loaded):
    assert loaded["dialogs"] == []
    assert loaded["img_x"] == 0 and loaded["imgs"] == 0
    assert XSS in loaded["table_text"]  # shown literally, as the job's name
    assert XSS in loaded["quarantine_text"]
    # the host with a </script> in its name is a label in the coverage chart
    # (Vega may ellipsize a long label, so look for its start)
    assert EVIL_HOST[:19] == "gpu-node-9</script>" and EVIL_HOST[:19] in loaded["axis_text"]
