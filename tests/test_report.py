"""The leadership report: sections and their computed readings, self-containment, escaping of
hostile data, images per chart, an empty warehouse, the CLI, and the sample fleet's size."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import polars as pl
import pytest

from analysis.breakdown import refresh_breakdown
from dashboards.page import script_json
from dashboards.report import build_report
from dashboards.report import build_sections
from dashboards.section import NO_DATA
from dashboards.sections import ORDER
from dashboards.sections import causes
from dashboards.sections import registry
from dashboards.sections import survival
from pipelines.cli import main
from tests.conftest import FIXTURES
from tests.conftest import SAMPLE_FLEET
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse

FIXTURE = FIXTURES / "report" / "tables.json"
FIXTURE_GPUS = 16_384  # the job size of the fixture's projections and what-if rows
XSS = "<img src=x onerror=alert(1)>"
EVIL_HOST = "gpu-node-9</script><script>alert(2)</script>"
# the sections the fixture's tables do not make (``build`` returns None), and those it makes
# with no chart: a first screen, tiles, notes (node_health and slowness have no rows in the
# fixture) or a table (analyses)
ABSENT = {"system_mtbf", "availability", "operations_whatif"}
NO_CHART = {"summary", "headline", "references", "slowness", "node_health", "analyses", "glossary"}
ALL_CHARTS = [k for k in ORDER if k not in ABSENT | NO_CHART]
# the page: the first screen, the table of contents, then the other sections in report order
SECTIONS = [ORDER[0], "contents-section", *(k for k in ORDER[1:] if k not in ABSENT)]
DATA_SECTIONS = [k for k in SECTIONS if k not in ("contents-section", "glossary")]


def fixture_frame(name: str, rows: list[dict]) -> pl.DataFrame:
    schema = TABLES[name].schema
    cols = {c for r in rows for c in r}
    df = pl.DataFrame(
        rows,
        schema={
            c: (pl.Utf8 if isinstance(t, pl.Datetime) else t)
            for c, t in schema.items()
            if c in cols
        },
    )
    df = df.with_columns(
        pl.col(c).str.to_datetime("%Y-%m-%dT%H:%M:%S", time_unit="us")
        for c, t in schema.items()
        if c in cols and isinstance(t, pl.Datetime)
    )
    return conform(name, df)


def fixture_warehouse(home: Path) -> Warehouse:
    """A warehouse holding tests/fixtures/report/tables.json (ingest tables via a batch,
    derived tables replaced whole)."""
    wh = Warehouse(home)
    tables = {
        k: fixture_frame(k, v)
        for k, v in json.loads(FIXTURE.read_text()).items()
        if not k.startswith("_")
    }
    with wh.batch("fixture") as b:
        b.add({k: v for k, v in tables.items() if TABLES[k].kind == "ingest"})
    for k, v in tables.items():
        if TABLES[k].kind == "derived":
            wh.replace_table(k, v)
    refresh_breakdown(wh)  # computed from the fixture's jobs, interruptions and goodput
    wh.refresh_catalog()
    return wh


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    wh = fixture_warehouse(tmp_path_factory.mktemp("rep") / "home")
    out = build_report(wh, target_gpus=FIXTURE_GPUS)
    return out, out.read_text(encoding="utf-8")


def readings(page: str) -> dict[str, str]:
    """section id -> its reading (or note) as plain text."""
    out = {}
    for m in re.finditer(r'<section id="([^"]+)">(.*?)</section>', page, re.DOTALL):
        r = re.search(r'<p class="(?:reading|note)">(.*?)</p>', m.group(2), re.DOTALL)
        out[m.group(1)] = html.unescape(r.group(1)) if r else ""
    return out


def printed_path(capsys) -> Path:
    """The path ``goodput report`` printed (with or without a 'report:' label)."""
    return Path(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("report:").strip())


def test_every_section_has_a_chart_and_computed_reading(built):
    out, page = built
    assert out.name == "goodput_report.html" and out.parent.name == "reports"
    assert f'data-charts="{len(ALL_CHARTS)}"' in page
    r = readings(page)
    assert list(r) == SECTIONS
    assert r["causes"] == (
        "Of the 4 unexpected interruptions, 0 were the jobs' own failures (failure domain "
        "workload: exit codes, OOM; class software) and 4 the fleet's. Of the 3 interruptions "
        "outside class software (Llama 3: 356 of 419), gpu caused 100% (Llama 3: 48%)."
    )
    assert r["failure_rates"].startswith(
        "gpu fails most often: 2 failures per 1,000 unit-days (95% CI 1–4, 3 failures); "
        "Weibull shape 1.50 (CI 1.10–2.00): increasing hazard: wear-out"
    )
    assert r["failure_rates"].endswith("No failures observed (not plotted): host_memory.")
    assert (
        r["survival"].startswith("At 8 days of age")
        and "gpu has the lowest survival: 80.0%" in r["survival"]
    )
    assert "psu the highest at 100.0%" in r["survival"]
    # 1 vs 0 and 1 vs 2 failures: no trend test rejects, and the reading names none
    # (tests/test_trend_shape.py); before, it named "the largest change"
    assert "no class shows a clear trend" in r["rate_trend"]
    assert r["hazard_ratios"].startswith("Clear effects (1 of 2: adjusted p < 0.05 after holm")
    assert "temp_mean hazard ratio 1.30 per degC" in r["hazard_ratios"]
    assert "util_mean" not in r["hazard_ratios"]
    assert r["goodput_scale"].startswith(
        "At 16,384 GPUs the projected goodput is 80.0% (95% band 75.0%–84.0%)"
    )
    assert (
        "checkpoint every 15 min" in r["goodput_scale"]
        and "at 131,072 GPUs it is 40.0%" in r["goodput_scale"]
    )
    assert r["sensitivity"] == (
        "At 16,384 GPUs, the biggest lever is gpu failure rate x0.5: +5.00 percentage points "
        "(80.0% to 85.0%); next is checkpoint cost x0.5 (+2.00 pp)."
    )
    # 16·25 + 8·1 + 8·12 = 504 GPU-hours, productive 16·20 + 8·12 = 416 -> 82.5%
    assert r["goodput_measured"].startswith(
        "Weighted by GPU-hours, measured goodput is 82.5% over 3 job chains"
    )
    # lost work (9.5%) rests on the assumed interval: the largest *measured* loss is named
    assert (
        "the largest measured loss is queue wait after failure at 1.6% of GPU-hours. Sized by "
        "assumptions, not records: lost work since last checkpoint 9.5%, restart / recovery 3.2%, "
        "checkpoint overhead 1.6%." in r["goodput_measured"]
    )
    assert (
        r["data_quality"]
        == "2 files gave 24 rows; 2 records were quarantined (7.69%), most from kernel (2)."
    )
    assert (
        r["coverage"]
        == "Data spans 2026-01-05 to 2026-01-12; 2 of 3 hosts appear in all 2 source tables."
    )
    assert r["explore"] == (
        "Without a selection: 4 unexpected interruptions fell on 1 day(s); the busiest day "
        "(2026-01-05) had 4. Of 1 "
        "partition(s), (none) lost the most GPU-hours: 40 (100%), in 4 interruptions."
    )
    h = r["headline"]
    assert h.startswith("3 hosts with 0 GPUs ran 832 GPU-hours of jobs")
    assert (
        "4 unexpected interruptions (0 the jobs' own failures)" in h
        and "82.5%" in h
        and "project 80.0% for one 16,384-GPU job" in h
    )


def test_reading_follows_the_data(tmp_path):
    """Change the interruption mix and the causes sentence changes with it."""
    wh = fixture_warehouse(tmp_path / "home")
    intr = wh.read("interruptions").with_columns(pl.lit("nic").alias("cause_class"))
    wh.replace_table("interruptions", intr)
    r = {s.key: s.reading for s in build_sections(wh)}
    assert r["causes"].endswith(
        "Of the 4 interruptions outside class software (Llama 3: 356 of 419), "
        "nic caused 100% (Llama 3: 2%)."
    )


def test_self_contained_no_external_reference(built):
    _, page = built
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.IGNORECASE)
    assert not re.search(r"<link\b", page, re.IGNORECASE)
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "default-src 'none'" in page  # CSP: the browser refuses any fetch
    assert "window.vegaEmbed" in page and "vegaLite" in page  # the libraries are inline
    assert page.count("<script") == 3 and page.lower().count("</script") == 3


def test_hostile_strings_are_text(built):
    _, page = built
    # drop the Vega bundle (its tooltip code builds <img> for image tooltips we never use)
    ours = re.sub(r"<script>.*?</script>", "", page, count=1, flags=re.DOTALL)
    assert "<img" not in ours.lower()  # neither as markup nor raw inside the JSON block
    block = re.search(r'id="report-specs">(.*?)</script>', page, re.DOTALL).group(1)
    assert "<" not in block and ">" not in block
    assert EVIL_HOST not in page
    # shown escaped in the HTML tables (job name, user, quarantine reason)
    assert html.escape(XSS) in page and html.escape("mallory<b>") in page
    specs = json.loads(re.search(r'id="report-specs">(.*?)</script>', page, re.DOTALL).group(1))
    datasets = json.dumps([s.get("datasets") for s in specs.values()])
    assert json.dumps(EVIL_HOST)[1:-1] in datasets  # the host survives as data for the chart


def test_script_json_round_trip():
    obj = {"a": "</script><!-- & <b>", "b": [1.5, None, "\u2028"]}
    text = script_json(obj)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == obj


def test_images_for_every_chart(built):
    out, _ = built
    titles = {m.KEY: m.TITLE for m in registry()}
    for name in ALL_CHARTS:
        png, svg = out.parent / "charts" / f"{name}.png", out.parent / "charts" / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert svg.read_text().lstrip().startswith("<svg"), name
        # a slide export says what it shows: the section's title, the period and the scope
        text = html.unescape(re.sub(r"<[^>]+>", " ", svg.read_text()))
        for line in (
            titles[name],
            "Period: not established yet (run goodput build)",
            "Scope: whole fleet",
        ):
            assert line in text, (name, line)


def test_empty_warehouse_says_no_data(tmp_path, capsys):
    home = tmp_path / "home"
    Warehouse(home)
    assert main(["--home", str(home), "report"]) == 0
    out = printed_path(capsys)
    assert out == home.resolve() / "reports" / "goodput_report.html"
    page = out.read_text()
    r = readings(page)
    assert list(r) == SECTIONS and all(r[k].startswith(NO_DATA) for k in DATA_SECTIONS)
    assert 'data-charts="0"' in page
    assert not list((out.parent / "charts").glob("*"))


def test_cli_out_and_partial_warehouse(tmp_path, capsys):
    """Only ingest tables present: the data sections render, the fit sections say no data."""
    wh = fixture_warehouse(tmp_path / "home")
    for name, table in TABLES.items():
        if table.kind == "derived":
            wh.replace_table(name, table.empty())
    target = tmp_path / "out" / "r.html"
    assert main(["--home", str(wh.home), "report", "--out", str(target)]) == 0
    assert printed_path(capsys) == target
    r = readings(target.read_text())
    assert r["data_quality"].startswith("2 files gave 24 rows")
    assert r["headline"].startswith("3 hosts") and "measured goodput" not in r["headline"]
    ingest_charts = {"data_quality", "coverage"}
    no_data = {*ALL_CHARTS, "node_health", "slowness", "analyses"} - ingest_charts
    assert {k for k, v in r.items() if v.startswith(NO_DATA)} == no_data
    assert sorted(p.stem for p in (target.parent / "charts").glob("*.png")) == sorted(ingest_charts)
    # --out naming a folder writes goodput_report.html inside it
    assert main(["--home", str(wh.home), "report", "--out", str(target.parent)]) == 0
    assert printed_path(capsys) == target.parent / "goodput_report.html"


def test_llama3_reference_mix():
    ref = causes.llama3_frame()
    assert ref["count"].sum() == 419
    assert dict(zip(ref["cause_class"], ref["count"], strict=True))["gpu"] == 148 + 17 + 6
    assert dict(zip(ref["cause_class"], ref["count"], strict=True))["software"] == 54 + 7 + 2


def test_survival_frame_is_thinned():
    t = list(range(5000))
    sc = pl.DataFrame(
        {
            "component_class": ["gpu"] * 5000,
            "estimator": ["kaplan_meier"] * 5000,
            "t": [float(x) for x in t],
            "survival": [1 - x / 10000 for x in t],
            "ci_low": [None] * 5000,
            "ci_high": [None] * 5000,
            "at_risk": [1] * 5000,
        }
    )
    out = survival.survival_frame(sc, max_points=100)
    assert out.height <= 102 and out["t"].min() == 0 and out["t"].max() == 4999


@pytest.mark.skipif(not (SAMPLE_FLEET / "slurm").exists(), reason="sample fleet not committed yet")
def test_sample_fleet_report_is_small(tmp_path):
    """The committed fleet gives a report under 5 MB with an image per chart. To keep the test
    fast it skips sacct.json (the same jobs as sacct.txt) and the DCGM of all hosts but one:
    the report carries only per-host aggregates of telemetry, so they add no size."""
    from analysis.attribution import refresh_interruptions
    from analysis.goodput_measured import refresh_goodput_jobs
    from ingest.base import ParseContext
    from ingest.runner import ingest_paths

    wh = Warehouse(tmp_path / "home")
    paths = [
        p for p in sorted(SAMPLE_FLEET.iterdir()) if p.is_dir() and p.name not in ("dcgm", "slurm")
    ]
    paths += [SAMPLE_FLEET / "slurm" / "sacct.txt", SAMPLE_FLEET / "slurm" / "slurmctld.log"]
    paths += sorted((SAMPLE_FLEET / "dcgm").iterdir())[:1]
    ingest_paths(wh, paths, "auto", ParseContext(cluster="default", tz="UTC"))
    refresh_interruptions(wh)
    refresh_goodput_jobs(wh)
    out = build_report(wh)
    assert out.stat().st_size < 5_000_000
    page = out.read_text()
    n = int(re.search(r'data-charts="(\d+)"', page).group(1))
    pngs = sorted((out.parent / "charts").glob("*.png"))
    assert n >= 5 and len(pngs) == n and len(list((out.parent / "charts").glob("*.svg"))) == n
    intr = wh.read("interruptions").filter(~pl.col("planned"))
    own = intr.filter(pl.col("failure_domain") == "workload").height
    assert readings(page)["causes"].startswith(
        f"Of the {intr.height:,} unexpected interruptions, {own:,} were the jobs' own failures "
        f"(failure domain workload: exit codes, OOM; class software) and {intr.height - own:,} "
        "the fleet's."
    )


def test_table_sections_show_their_reading_and_coverage_counts_attempts_once(tmp_path):
    """A section without a chart (a table) shows its reading, not 'no data'; the coverage table
    counts each job attempt once, though an attempt spans several hosts."""
    from analysis.status import record

    wh = fixture_warehouse(tmp_path / "home")
    record(wh, "interruptions", "ok", rows=3)
    record(wh, "failure_fits", "skipped", "no component_lifetimes")
    page = build_report(wh, images=False).read_text(encoding="utf-8")
    analyses = re.search(r'<section id="analyses">(.*?)</section>', page, re.DOTALL).group(1)
    assert NO_DATA not in analyses
    assert (
        '<p class="reading">1 of 2 analyses ran; missing inputs or errors: failure_fits skipped'
        in analyses
    )
    attempts = wh.read("job_attempts")
    assert attempts["nodes"].list.len().max() > 1  # the fixture has multi-host attempts
    coverage = re.search(r'<section id="coverage">(.*?)</section>', page, re.DOTALL).group(1)
    row = re.search(r"<td>job_attempts</td>(?:<td>.*?</td>){2}<td>([\d,]+)</td>", coverage)
    assert int(row.group(1).replace(",", "")) == attempts.height
