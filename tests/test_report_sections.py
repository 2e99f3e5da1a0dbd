"""Report sections are modules of dashboards/sections/, found by scanning the package: the split
from the two monolithic modules changed nothing the report shows, adding a section is adding
one file, and the header states the period and the scope."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from test_report import fixture_warehouse

import dashboards.sections
from analysis.headline import BAND_COVERS
from analysis.slowness.at_scale import running_slow_note
from dashboards.report import build_report
from dashboards.report import build_sections
from dashboards.section import NO_DATA
from dashboards.sections import registry
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES
from warehouse.schemas import conform

BEFORE = FIXTURES / "report" / "sections_before_split.json"
SECTIONS_DIR = Path(dashboards.sections.__file__).parent


def _plain(sections) -> list[dict]:
    out = [
        {"key": s.key, "title": s.title, "reading": s.reading, "note": s.note,
         "extra_html": s.extra_html, "spec": s.spec}
        for s in sections
    ]  # fmt: skip
    return json.loads(json.dumps(out, sort_keys=True, default=str))


def _tables_aside(text: str) -> str:
    """HTML without what tables gained since the split: the box that scrolls a wide table
    sideways and the spans that keep a word with a hyphen or a dash whole."""
    text = re.sub(r'<div class="table-scroll">(<table .*?</table>)</div>', r"\1", text)
    return re.sub(r'<span class="nw">(.*?)</span>', r"\1", text)


def _datasets_by_order(spec: dict) -> dict:
    text = json.dumps(spec)
    names = dict.fromkeys(re.findall(r"data-[0-9a-f]{32}", text))
    for i, name in enumerate(names):
        text = text.replace(name, f"data-{i}")
    return json.loads(text)


def _palette_aside(spec):
    """``spec`` without what changed on purpose since the split: the colour of classes (one
    palette, ``charts.class_colors``; the Pareto's bars coloured by class instead of one blue),
    the goodput colour scale of the breakdowns (the data's range instead of 0-1), and the
    number formats and titles of tooltips (one format for hours between events, ``charts.HOURS``,
    one for shares of GPU-hours, "CI low" / "CI high"): each tooltip keeps its field and type."""
    from dashboards.charts import CLASS_FIELDS

    if isinstance(spec, list):
        return [_palette_aside(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    out = {k: _palette_aside(v) for k, v in spec.items()}
    enc = out.get("encoding")
    if isinstance(enc, dict) and isinstance(enc.get("tooltip"), list):
        tips = [{k: v for k, v in t.items() if k in ("field", "type")} for t in enc["tooltip"]]
        out["encoding"] = enc = {**enc, "tooltip": tips}
    if isinstance(enc, dict) and isinstance(enc.get("color"), dict):
        color = enc["color"]
        if color.get("field") in CLASS_FIELDS:
            out["encoding"] = {k: v for k, v in enc.items() if k != "color"}
        elif color.get("field") == "goodput":
            out["encoding"] = {
                **enc,
                "color": {k: v for k, v in color.items() if k not in ("scale", "legend")},
            }
    mark = out.get("mark")
    if (
        isinstance(mark, dict)
        and mark.get("type") == "bar"
        and mark.get("color", "#4c78a8") == "#4c78a8"
    ):
        rest = {k: v for k, v in mark.items() if k != "color"}
        out["mark"] = "bar" if rest == {"type": "bar"} else rest
    return out


def test_sections_equal_those_of_the_code_before_the_split(tmp_path):
    """tests/fixtures/report/sections_before_split.json was written by the old report.py and
    charts.py on the fixture warehouse: every key, title, reading, table and chart spec is the
    same now, but for the Llama 3 comparison of the causes chart, changed on purpose
    (test_llama3_comparison_has_one_denominator_on_both_sides), and the colours of classes and of
    goodput (``_palette_aside``); sections added since the split are set aside."""
    before = json.loads(BEFORE.read_text())
    now = _plain(build_sections(fixture_warehouse(tmp_path / "home")))
    now = [
        s for s in now if s["key"] in {b["key"] for b in before}
    ]  # sections added since the split aside
    assert [s["key"] for s in now] == [s["key"] for s in before]
    for old, new in zip(before, now, strict=True):
        for field in ("title", "reading", "note", "extra_html", "spec"):
            if field == "spec":
                old[field], new[field] = _palette_aside(old[field]), _palette_aside(new[field])
            if old["key"] == "causes" and field == "reading":  # one denominator on both sides
                continue
            if old["key"] == "goodput_scale" and field == "spec":  # the projection's new columns
                for rows in new[field]["datasets"].values():
                    for row in rows:
                        for column in ("goodput_fail_stop", "slow_lost_share", "slow_detect_hours"):
                            row.pop(column, None)
                # datasets are named by their content's hash: by their order on both sides
                old[field], new[field] = (
                    _datasets_by_order(old[field]),
                    _datasets_by_order(new[field]),
                )
            if old["key"] in ("goodput_scale", "headline") and field == "reading":
                # what the projection holds of running slow (the fixture measured none)
                assert f"; {running_slow_note({})}" in new[field]
                new[field] = new[field].replace(f"; {running_slow_note({})}", "")
            if old["key"] == "goodput_scale" and field == "reading":  # what the band holds
                assert new[field] == (
                    f"{old[field]} The 95% band {BAND_COVERS} (the what-if section varies those)."
                )
                continue
            if old["key"] == "causes" and field == "spec":
                pareto = new[field]["hconcat"][0]
                assert pareto == old[field]["hconcat"][0]
                name = pareto["data"]["name"]
                assert new[field]["datasets"][name] == old[field]["datasets"][name]
                continue
            if field == "note" and old[field] == NO_DATA:  # names what it lacks since
                assert new[field].startswith(NO_DATA), old["key"]
                continue
            if field == "extra_html":  # tables scroll sideways on a phone, words kept whole
                new[field] = _tables_aside(new[field])
            if old["key"] == "headline" and field in ("spec", "extra_html"):
                # changed on purpose: tiles in HTML (as many columns as the page is wide) in
                # place of a chart of text, whose columns overlapped on a phone
                assert (new["spec"], old["extra_html"]) == (None, "")
                assert 'id="tile-headline-0"' in new["extra_html"]
                continue
            if old["key"] == "headline" and field == "reading":  # one wording for interruptions
                said = "4 jobs were interrupted unexpectedly (0 by their own failures)"
                assert new[field] == old[field].replace(
                    said, "4 unexpected interruptions (0 the jobs' own failures)"
                ).replace(  # MTTI is one job's; the fleet's is the time between interruptions
                    "the same as the MTTI above", "the same as the time between interruptions above"
                )
                continue
            if old["key"] == "hazard_ratios" and field in ("title", "reading", "spec"):
                # changed on purpose: effects apart from associations (power), PH failures
                # named, a colour for associations (tests/test_cox_covariates.py)
                continue
            if old["key"] in ("failure_rates", "survival", "rate_trend") and field in (
                "reading",
                "spec",
            ):
                # changed on purpose: the selected row is the observed rate unless a model is
                # clearly better (new columns in the charts' data), shape readings say when the
                # data cannot tell, KM curves stop under 10 units at risk, trends are claimed
                # only where a test across classes rejects (tests/test_projection_rates.py,
                # tests/test_survival_curves.py, tests/test_trend_shape.py)
                continue
            if old["key"] == "goodput_measured" and field in ("reading", "spec"):
                # changed on purpose: a badput part sized by assumptions is labelled so and never
                # named the largest loss (tests/test_goodput_measured.py)
                continue
            if (
                old["key"] == "sensitivity" and field == "spec"
            ):  # each item's goodput_base is its own
                # baseline (goodput - gain: the Monte Carlo one for spares), equal here up to
                # rounding
                def rows(spec):
                    return next(iter(spec["datasets"].values()))

                for a, b in zip(rows(old[field]), rows(new[field]), strict=True):
                    assert b == {**a, "goodput_base": pytest.approx(a["goodput_base"])}
                continue
            if old["key"] == "explore" and field in (
                "title",
                "reading",
                "spec",
                "extra_html",
            ):  # the drill-down
                continue  # section since (tests/test_report_interactive.py)
            if (
                old["key"] == "coverage" and field == "extra_html"
            ):  # job_attempts counted once since
                # (test_report.py::
                #  test_table_sections_show_their_reading_and_coverage_counts_attempts_once)
                strip = re.compile(r"(<td>job_attempts</td>(?:<td>[^<]*</td>){2})<td>[^<]*</td>")
                assert strip.sub(r"\1", new[field]) == strip.sub(r"\1", old[field])
                continue
            assert new[field] == old[field], (old["key"], field)


def test_llama3_comparison_has_one_denominator_on_both_sides(tmp_path):
    """Llama 3's 419 interruptions of one job hold its software bugs and no other failure of
    its own: the chart and the reading compare shares of the interruptions outside class
    software (where the jobs' own failures are) on both sides (the fixture's 4 gpu/software
    interruptions plus 4 of the jobs' own: gpu is 3 of 3, not 3 of 4 or 3 of 8; Llama 3's gpu
    171 of 356, not of
    419)."""
    wh = fixture_warehouse(tmp_path / "home")
    intr = wh.read("interruptions")
    own = intr.filter(pl.col("job_id") == "201").with_columns(
        pl.Series("job_id", ["901"]),
        pl.lit("workload").alias("failure_domain"),
        pl.lit("software").alias("cause_class"),  # as attribution stores a job's own failure
    )
    own = pl.concat([own.with_columns(pl.lit(f"90{i}").alias("job_id")) for i in range(1, 5)])
    wh.replace_table("interruptions", pl.concat([intr, own]))
    causes = next(s for s in build_sections(wh) if s.key == "causes")
    assert ("Of the 3 interruptions outside class software (Llama 3: 356 of "
            "419), gpu caused 100% (Llama 3: 48%)") in causes.reading  # fmt: skip
    compare = causes.spec["hconcat"][1]
    assert compare["title"] == "Share vs Llama 3, class software left out"
    assert compare["encoding"]["x"]["title"] == (
        "share of interruptions outside class software (both sides)"
    )
    rows = causes.spec["datasets"][compare["data"]["name"]]
    fleet = {r["cause_class"]: r["share"] for r in rows if r["source"] == "this fleet"}
    assert fleet == {"gpu": 1.0}  # no software bar: the jobs' own failures are class software
    llama = {r["cause_class"]: r["count"] for r in rows if r["source"] != "this fleet"}
    assert sum(llama.values()) == 419 - (54 + 7 + 2) and not {"workload", "software"} & set(llama)
    assert {r["cause_class"]: r["share"] for r in rows if r["source"] != "this fleet"}["gpu"] == (
        pytest.approx((148 + 17 + 6) / 356)
    )
    pareto = causes.spec["datasets"][causes.spec["hconcat"][0]["data"]["name"]]
    assert {r["cause_class"]: r["count"] for r in pareto}["software"] == 5  # still in the Pareto


def test_registry_is_the_files_of_the_package_in_order():
    files = {p.stem for p in SECTIONS_DIR.glob("*.py") if not p.stem.startswith("_")}
    mods = registry()
    assert {m.KEY for m in mods} == files
    assert all(m.__name__ == f"dashboards.sections.{m.KEY}" for m in mods)  # file name = key
    assert [m.KEY for m in mods] == list(dashboards.sections.ORDER)
    assert [m.KEY for m in mods][:4] == ["summary", "headline", "references", "trend"]
    assert mods[-1].KEY == "glossary"
    for m in mods:
        assert set(m.TABLES) <= set(TABLES), m.KEY  # warehouse tables, declared in schemas.py
        assert m.TITLE and callable(m.build)


EXTRA = """
from dashboards.section import Section

KEY = "zz_extra"
TITLE = "A section added as one file"
TABLES = ("hw_events",)


def build(ctx):
    s = Section(KEY, TITLE)
    s.reading = f"{ctx.t['hw_events'].height} hardware events; scope {ctx.scope}."
    return s
"""


@pytest.fixture
def extra_section(tmp_path, monkeypatch):
    """A throwaway section module in a folder added to the sections package's search path."""
    folder = tmp_path / "more_sections"
    folder.mkdir()
    (folder / "zz_extra.py").write_text(EXTRA)
    path = [*dashboards.sections.__path__, str(folder)]
    monkeypatch.setattr(dashboards.sections, "__path__", path)
    yield
    sys.modules.pop("dashboards.sections.zz_extra", None)


def test_a_section_file_order_does_not_place_is_refused(extra_section):
    with pytest.raises(TypeError, match=r"report section zz_extra is not in .*ORDER"):
        registry()


def test_a_key_in_order_without_its_module_is_refused(monkeypatch):
    monkeypatch.setattr(dashboards.sections, "ORDER", (*dashboards.sections.ORDER, "zz_gone"))
    with pytest.raises(TypeError, match="ORDER names zz_gone: no such section"):
        registry()


def test_a_new_section_file_is_discovered_and_placed_where_order_lists_it(
    tmp_path, extra_section, monkeypatch
):
    order = list(dashboards.sections.ORDER)
    order.insert(order.index("failure_rates") + 1, "zz_extra")
    monkeypatch.setattr(dashboards.sections, "ORDER", tuple(order))
    wh = fixture_warehouse(tmp_path / "home")
    secs = build_sections(wh, scope="partition gpu-a")
    keys = [s.key for s in secs]
    assert keys.index("zz_extra") == keys.index("failure_rates") + 1
    extra = secs[keys.index("zz_extra")]
    n = wh.read("hw_events").height
    assert n > 0 and extra.reading == f"{n} hardware events; scope partition gpu-a."
    assert extra.title == "A section added as one file" and extra.spec is None


def test_a_module_missing_part_of_the_contract_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "zz_broken.py").write_text('KEY = "zz_broken"\nTITLE = "no build"\n')
    path = [*dashboards.sections.__path__, str(folder)]
    monkeypatch.setattr(dashboards.sections, "__path__", path)
    try:
        with pytest.raises(TypeError, match="zz_broken does not define TABLES, build"):
            registry()
    finally:
        sys.modules.pop("dashboards.sections.zz_broken", None)


def test_a_failing_section_reports_its_error_and_the_others_still_build(tmp_path, monkeypatch):
    wh = fixture_warehouse(tmp_path / "home")
    sec = next(m for m in registry() if m.KEY == "survival")

    def boom(ctx):
        raise ValueError("bad curve")

    monkeypatch.setattr(sec, "build", boom)
    secs = {s.key: s for s in build_sections(wh)}
    assert secs["survival"].note == "this section could not be built: ValueError: bad curve"
    assert secs["survival"].title == sec.TITLE and secs["survival"].spec is None
    assert secs["failure_rates"].spec is not None


def test_header_states_period_and_scope(tmp_path):
    wh = fixture_warehouse(tmp_path / "home")
    page = build_report(wh, images=False).read_text()
    assert "Period: not established yet (run goodput build)" in page
    assert '<span id="report-scope">Scope: whole fleet</span>' in page
    win = conform(
        "observation_window",
        pl.DataFrame(
            {"source": ["window"], "observed_from": [datetime(2026, 1, 1)],
             "observed_to": [datetime(2026, 3, 31, 12)], "method": ["explicit"], "flagged": [False]}
        ),
    )  # fmt: skip
    wh.replace_table("observation_window", win)
    page = build_report(wh, images=False, scope="partition <gpu-a>").read_text()
    assert "Period: 2026-01-01 00:00 to 2026-03-31 12:00 UTC</span>" in page
    assert '<span id="report-scope">Scope: partition &lt;gpu-a&gt;</span>' in page
