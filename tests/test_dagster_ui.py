"""The Dagster UI as a user opens it (``dagster-webserver`` on a home, Debian's headless Chromium
driven by Playwright, 1400 px wide): the asset graph shows every group, a group's graph its assets
by name, and the page of a run the CLI recorded its steps and outcome. Screenshots are kept for
a person to look at (``$GOODPUT_SCREENSHOTS``, else the test's temporary folder)."""

from __future__ import annotations

import os
import signal
import subprocess
import warnings
from pathlib import Path

import pytest
from conftest import FIXTURES

from pipelines.resources import Settings
from pipelines.run import ingest
from pipelines.run import instance_for
from tests.servers import dagster as dagster_ui
from tests.servers.dagster import LOCATION
from tests.servers.slurm import free_ports

CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1400
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="/usr/bin/chromium absent (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """A home with one CLI ingest run recorded, and the webserver over it: (base URL, run id,
    screenshot folder)."""
    home = tmp_path_factory.mktemp("ui") / "home"
    sacct = FIXTURES / "slurm" / "sacct_parsable2_with_header_examples.txt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ingest(Settings(home=str(home), sources=[str(sacct)]))
    with instance_for(home) as instance:
        [run] = instance.get_runs()
    [port] = free_ports(1)
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = dagster_ui.start(["dagster-webserver"], home, port, **quiet)
    try:
        shots = Path(os.environ.get("GOODPUT_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
        shots.mkdir(parents=True, exist_ok=True)
        yield f"http://127.0.0.1:{port}", run.run_id, shots
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


GROUPS = ("ingest", "warehouse", "analysis", "catalog", "dashboards")


@pytest.fixture(scope="module")
def pages(ui):
    """Each page's text once the names it should show are drawn, and its screenshot."""
    sync_api = pytest.importorskip("playwright.sync_api")
    base, run_id, shots = ui
    out = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
            for name, path, shown in (
                ("asset_graph", "/asset-groups", GROUPS),
                (
                    "ingest_group",
                    f"/locations/{LOCATION}/asset-groups/ingest/lineage",
                    ("ingested_sources", "pulled_sources", "gpu_hourly"),
                ),
                ("run", f"/runs/{run_id}", ("ingested_sources", "conservation_check", "Success")),
            ):
                page.goto(base + path, wait_until="domcontentloaded")
                page.wait_for_function(
                    "names => names.every(n => document.body.innerText.includes(n))",
                    arg=list(shown),
                    timeout=180_000,
                )  # slow on a busy machine
                if name == "asset_graph":  # Dagster's newsletter dialog, once per browser
                    try:
                        page.get_by_role("button", name="Skip").click(timeout=30_000)
                    except sync_api.TimeoutError:
                        pass  # not shown
                page.wait_for_timeout(1000)  # the graph's layout settles after its nodes appear
                shot = shots / f"dagster_{name}.png"
                page.screenshot(path=str(shot))
                out[name] = {
                    "text": page.inner_text("body"),
                    "shot": shot,
                    "width": page.evaluate("document.documentElement.scrollWidth"),
                }
        finally:
            browser.close()
    return out


def test_the_asset_graph_shows_every_group_and_a_groups_assets(pages):
    graph, ingest_group = pages["asset_graph"], pages["ingest_group"]
    assert "Global asset lineage" in graph["text"]
    assert all(g in graph["text"] for g in GROUPS)
    # the ingest group's graph: its assets, and the assets downstream of them as links
    assert {"ingested_sources", "pulled_sources", "gpu_hourly", "interruptions"} <= set(
        ingest_group["text"].split()
    )
    for page in (graph, ingest_group):
        assert page["width"] <= WIDTH  # no sideways scrolling at 1400 px
        assert page["shot"].stat().st_size > 30_000  # a drawn graph, not a blank page


def test_a_cli_run_page_shows_its_job_steps_and_outcome(pages):
    run = pages["run"]
    assert "Run of" in run["text"] and "ingest" in run["text"] and "Success" in run["text"]
    steps = (
        "ingested_sources",
        "ingested_sources_conservation_check",
        "ingested_sources_quarantine_ratio_check",
        "ingested_sources_schema_check",
    )
    assert all(step in run["text"] for step in steps)
    assert run["shot"].stat().st_size > 30_000
