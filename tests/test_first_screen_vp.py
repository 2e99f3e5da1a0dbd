"""The first screen for a VP: goodput against its target (the home's ``goodput.toml``, else the
best published ETTR), the comparison with Llama 3, the top costs, the actions ranked at the job
sizes this fleet runs with the CI of each gain and its cost, mean times in human units; the
home's settings file and ``--gpu-hour-cost`` over it."""

from __future__ import annotations

import argparse
import html
import re

import pytest
from test_report import fixture_warehouse

from analysis.numbers import mean_time
from analysis.reference_comparison import compare
from analysis.reference_comparison import headline
from analysis.site import SITE_CONFIG
from analysis.site import Site
from analysis.site import load
from analysis.site import parse
from analysis.whatif import action_gains
from analysis.whatif import sensitivity_frame
from analysis.whatif import sensitivity_set
from analysis.whatif import stored_job
from dashboards.section import ReportContext
from dashboards.sections import summary
from pipelines.cli import main
from pipelines.cli.build import site_and_cost

SITE = """goodput_target = 0.95
gpu_hour_cost = 2.5
planned_job_gpus = 4096

[action_cost]
spare_node = 250000
faster_restart = 120000
"""
MEASURED = 0.825  # the fixture's measured goodput (weighted by GPU-hours)
LARGEST = 16  # the fixture's largest job (GPUs)


@pytest.fixture(scope="module")
def wh(tmp_path_factory):
    return fixture_warehouse(tmp_path_factory.mktemp("vp") / "home")


def first_screen(wh, site: Site, cost: float = 0.0):
    t = {name: wh.read(name) for name in summary.TABLES}
    ctx = ReportContext(wh=wh, t=t, target_gpus=16_384, gpu_hour_cost=cost, site=site)
    return summary.build(ctx).extra_html


def table_rows(page: str, element_id: str) -> list[list[str]]:
    """The body rows of the table inside ``#element_id``, each cell as text."""
    block = page[page.index(f'id="{element_id}"') :]
    body = block[block.index("<tbody>") : block.index("</tbody>")]
    return [
        [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def test_mean_times_read_in_minutes_below_two_hours():
    assert mean_time(0.25) == "15 min"
    assert mean_time(0.1) == "6 min"
    assert mean_time(1.99) == "119 min"
    assert mean_time(2.0) == "2.0 h"
    assert mean_time(71.9) == "71.9 h"
    assert mean_time(100) == "4.2 days"
    assert mean_time(None) == "n/a"


def test_site_file_settings_and_its_one_line_errors(tmp_path):
    site = parse(SITE, "goodput.toml")
    assert (site.goodput_target, site.gpu_hour_cost, site.planned_job_gpus) == (0.95, 2.5, 4096)
    assert site.action_cost == {"spares": 250_000.0, "restart_s": 120_000.0}
    assert site.cost_of("spares", 8) == 2_000_000.0  # nodes x the price of one
    assert site.cost_of("restart_s") == 120_000.0 and site.cost_of("ckpt_cost_s") is None
    assert load(tmp_path) == Site()  # no file: no setting
    for text, says in (
        ("goodput_target = 95", "goodput_target must be a number between 0 and 1"),
        ("planned_gpus = 8", "unknown key(s) planned_gpus"),
        ("[action_cost]\nspares = 1", "unknown action_cost key(s) spares"),
        ("gpu_hour_cost = -1", "gpu_hour_cost must be a number >= 0"),
        ("planned_job_gpus = 1.5", "planned_job_gpus must be a whole number"),
        ("goodput_target = ", "not valid TOML"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            parse(text, "goodput.toml")


def test_gpu_hour_cost_from_the_option_else_the_home_else_none(tmp_path):
    class Home:
        home = tmp_path

    def cost(given):
        return site_and_cost(argparse.Namespace(gpu_hour_cost=given), Home)[1]

    assert cost(None) == 0.0
    (tmp_path / SITE_CONFIG).write_text(SITE)
    assert cost(None) == 2.5 and cost(4.0) == 4.0 and cost(0.0) == 0.0


def test_action_gains_are_the_sensitivitys_with_a_ci_around_each(wh):
    """Two ways to one number: each gain the first screen ranks is the what-if section's."""
    rates, job, _ = stored_job(wh, 64)
    gains = action_gains(rates, job)
    stored = sensitivity_frame(sensitivity_set(rates, job))
    assert sorted(gains["knob"]) == sorted(stored["knob"])
    for r in gains.iter_rows(named=True):
        same = stored.filter(stored["knob"] == r["knob"]).row(0, named=True)
        assert r["gain"] == pytest.approx(same["knob_value"], abs=1e-12), r["knob"]
        assert r["change"] == same["change"]
        assert r["gain_ci_low"] <= r["gain"] <= r["gain_ci_high"], r["knob"]
    restart = gains.filter(gains["knob"] == "restart_s").row(0, named=True)
    assert 0 < restart["gain_ci_low"] < restart["gain_ci_high"]  # halving a restart always helps
    assert gains["gain"].to_list() == sorted(gains["gain"], reverse=True)


def test_first_screen_with_the_homes_settings(wh):
    page = first_screen(wh, parse(SITE, "goodput.toml"), cost=2.5)
    below = f"{100 * (0.95 - MEASURED):.1f}"
    assert f"target 95.0% (the site&#x27;s, {SITE_CONFIG}): {below} points below" in page
    line = headline(compare(wh, wh.home))
    assert f"Against published fleets: {html.escape(line.text)}" in page
    assert line.text.startswith("interruption rate ") and "Llama 3's at the same size" in line.text
    # the actions: at the largest job run and at the planned size, ranked at the planned one
    assert f"gain at {LARGEST} GPUs (the largest job run; 95% CI)" in html.unescape(page)
    assert "gain at 4,096 GPUs (planned, goodput.toml; 95% CI)" in page
    assert "one 4,096-GPU job (points of goodput; the what-if section ranks every one at " in page
    rates, job, _ = stored_job(wh, 4096)
    planned = action_gains(rates, job).head(summary.TOP)
    rows = table_rows(page, "actions")
    assert [r[0] for r in rows] == planned["change"].to_list()
    for row, r in zip(rows, planned.iter_rows(named=True), strict=True):
        assert row[2] == (
            f"{100 * r['gain']:+.1f} points ({100 * r['gain_ci_low']:+.1f} to "
            f"{100 * r['gain_ci_high']:+.1f})"
        )
        want = {"spares": "$2,000,000 (8 nodes x $250,000)", "restart_s": "$120,000 (entered)"}
        assert row[3] == want.get(r["knob"], "not given")
    # the top costs priced, mean times in human units, MTTI defined once
    causes = table_rows(page, "summary-causes")
    assert causes[0][0] == "gpu" and causes[0][4] == "36.0 h" and causes[0][5] == "$75"
    assert causes[1][4] == "4.5 days"
    assert "MTTI 2.5 h" in page and page.count("MTTI:") == 1  # defined once
    assert page.count("MTBF") == 1  # in that definition: a component's, elsewhere


def test_first_screen_without_settings_takes_the_best_published_ettr(wh):
    page = html.unescape(first_screen(wh, Site()))
    assert (
        "target 97.0% (ByteRobust's published ETTR at 9,600 GPUs; the site's own: "
        f"goodput_target in HOME/{SITE_CONFIG}): 14.5 points below" in page
    )
    assert "no planned job size: planned_job_gpus in HOME/goodput.toml adds one" in page
    assert "costs: [action_cost] in HOME/goodput.toml" in page
    assert f"one {LARGEST}-GPU job" in page and "4,096" not in page
    assert all(r[-1] == "not given" for r in table_rows(page, "actions"))


def test_report_refuses_a_bad_settings_file(wh, tmp_path, capsys):
    (wh.home / SITE_CONFIG).write_text("gpu_hour_cost = -2\n")
    out = tmp_path / "r.html"
    assert main(["--home", str(wh.home), "report", "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("gpu_hour_cost must be a number >= 0, not -2")
    (wh.home / SITE_CONFIG).unlink()
