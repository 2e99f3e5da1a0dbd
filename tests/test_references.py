"""How we compare: the published figures (analysis/data/reference_fleets.toml, a site's
HOME/references.toml on top), this fleet's figures normalised the same way, the ratios and their
CIs, the one line for the first screen, ``goodput references``; and the published figures
recomputed from committed extracts of their public data (the whole data:
benchmarks/validate_references.py)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis import references
from analysis.reference_comparison import Ours
from analysis.reference_comparison import compare
from analysis.reference_comparison import headline
from analysis.reference_comparison import ratio_ci
from analysis.reference_comparison import repair_minutes
from analysis.taxonomy import LLAMA3_TABLE
from benchmarks.validate_references import quarter_mtbf
from benchmarks.validate_references import stepfun_rate
from ingest.base import ParseContext
from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import FIXTURES
from tests.conftest import llama3_fits
from tests.conftest import table
from warehouse.store import Warehouse

START = datetime(2026, 1, 1)


def test_the_reference_file_holds_every_fleet_the_issue_names_with_its_source():
    figures = references.load()
    assert {f.fleet.id for f in figures} == {"llama3", "rsc1", "rsc2", "byterobust", "stepfun",
                                             "titan", "lanl"}  # fmt: skip
    for f in figures:
        assert f.fleet.source and f.fleet.verified and f.definition, f.fleet.id
        assert f.metric in references.METRICS
    by = {(f.fleet.id, f.metric, f.label, f.at_gpus): f.value for f in figures}
    assert by[("rsc1", "failures_per_1k_node_days", "", None)] == 6.50
    assert by[("rsc2", "failures_per_1k_node_days", "", None)] == 2.34
    assert by[("byterobust", "ettr", "", 9600)] == 0.97
    assert by[("titan", "system_mtbf_hours", "2015-Q4", 18688)] == 7.7
    assert by[("titan", "system_mtbf_hours", "2016-Q4", 18688)] == 2.7
    assert by[("stepfun", "failures_per_1k_node_days", "", None)] == pytest.approx(4.2, abs=0.01)
    # Llama 3: one place. The count behind its figures is the taxonomy table's, its run the
    # taxonomy's and the default job horizon's
    assert references.published_events("llama3", "mtti_hours") == sum(n for _, n, _ in LLAMA3_TABLE)
    assert by[("llama3", "mtti_hours", "", 16384)] == pytest.approx(54 * 24 / 419)
    assert by[("llama3", "interruptions_per_1k_gpu_days", "", None)] == pytest.approx(
        1000 * 419 / (16384 * 54)
    )


def test_a_site_file_overrides_a_fleet_and_adds_its_own_targets(tmp_path):
    (tmp_path / references.SITE_FILE).write_text(
        '[[fleet]]\nid = "llama3"\nname = "Llama 3, our reading"\ngpus = 16384\ndays = 54\n'
        '[[fleet.figure]]\nmetric = "mtti_hours"\nvalue = 2.5\ndefinition = "ours"\n'
        '[[fleet]]\nid = "target"\nname = "Our 2026 target"\nshort = "target"\ngpus = 16384\n'
        '[[fleet.figure]]\nmetric = "ettr"\nvalue = 0.95\ndefinition = "goodput we fund"\n'
    )
    got = references.load(tmp_path)
    llama = [f for f in got if f.fleet.id == "llama3"]
    assert [(f.metric, f.value) for f in llama] == [("mtti_hours", 2.5)]
    target = next(f for f in got if f.fleet.id == "target")
    assert (target.metric, target.value, target.at_gpus) == ("ettr", 0.95, 16384)
    assert {f.fleet.id for f in got} >= {"rsc1", "titan", "lanl"}  # the others kept


@pytest.mark.parametrize(
    "text, said",
    [
        ("[[fleet]]\nid = 'x'\n", "needs an id and a name"),
        ("[[fleet]]\nid = 'x'\nname = 'X'\n[[fleet.figure]]\nmetric = 'speed'\nvalue = 1\n",
         "metric 'speed' is not one of"),
        (("[[fleet]]\nid = 'x'\nname = 'X'\n[[fleet.figure]]\nmetric = 'ettr'\nvalue = 1.5\n"
          "at_gpus = 8\n"), "out of range"),
        (("[[fleet]]\nid = 'x'\nname = 'X'\ndays = 5\n[[fleet.figure]]\n"
          "metric = 'failures_per_1k_node_days'\nevents = 3\n"), "needs the fleet's size"),
        ("[fleet\n", "not valid TOML"),
    ],
)  # fmt: skip
def test_a_bad_site_file_is_one_line_from_the_cli_too(tmp_path, capsys, text, said):
    (tmp_path / references.SITE_FILE).write_text(text)
    with pytest.raises(ValueError, match=said):
        references.load(tmp_path)
    # a home with a warehouse for the command to read
    ingest_paths(Warehouse(tmp_path), [FIXTURES / "slurm" / "xdmod__accounting-logs.log"])
    assert main(["--home", str(tmp_path), "references"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def one_llama3_job(wh, interruptions: int = 419) -> None:
    """Llama 3's run as this fleet's records: one 16,384-GPU job on 2,048 nodes for 54 days and
    ``interruptions`` unexpected infrastructure interruptions of it."""
    wh.replace_table(
        "job_attempts",
        table("job_attempts", cluster="c", scheduler="slurm", job_id="1", attempt=1,
              start_time=START, end_time=START + timedelta(days=54), n_gpus=16384,
              n_nodes=2048, state="COMPLETED"),
    )  # fmt: skip
    ends = [START + timedelta(hours=3 * i + 1) for i in range(interruptions)]
    wh.replace_table(
        "interruptions",
        table("interruptions", cluster="c", scheduler="slurm", job_id="1",
              attempt=list(range(1, interruptions + 1)), end_time=ends, n_gpus=16384,
              cause_class="gpu", failure_domain="infrastructure", planned=False),
    )  # fmt: skip


def test_llama3s_own_records_and_rates_compare_as_one_times_llama3(wh):
    """A fleet that is Llama 3's run (its job, its 419 interruptions, its class rates as fits)
    comes out at 1.0x Llama 3 on every Llama 3 count and at its MTTI, each CI holding 1."""
    one_llama3_job(wh)
    wh.replace_table("failure_rates", llama3_fits())
    rows = compare(wh, wh.home)
    llama = {r["metric"]: r for r in rows.filter(pl.col("fleet") == "llama3").iter_rows(named=True)}
    for metric in ("interruptions_per_1k_gpu_days", "failures_per_1k_node_days", "mtti_hours"):
        r = llama[metric]
        assert r["ratio"] == pytest.approx(1.0, abs=1e-9 if metric != "mtti_hours" else 1e-6), (
            metric
        )
        assert r["ratio_ci_low"] < 1 < r["ratio_ci_high"] and r["verdict"] == "no different"
    assert llama["interruptions_per_1k_gpu_days"]["ours"] == pytest.approx(1000 * 419 / 16384 / 54)
    line = headline(rows)
    assert line.text.startswith("interruption rate 1.0x Llama 3's at the same size (16,384 GPUs;")
    assert line.ci_low < 1 < line.ci_high
    # Titan counts GPU failures only: all 419 are gpu here, at 18,688 GPUs
    titan = rows.filter(pl.col("metric") == "system_mtbf_hours").row(0, named=True)
    assert titan["ours"] == pytest.approx(54 * 24 * 16384 / 419 / 18688)


def test_twice_llama3s_interruptions_are_twice_its_rate_and_worse(wh):
    one_llama3_job(wh, interruptions=838)
    rows = compare(wh, wh.home)
    r = rows.filter(
        (pl.col("fleet") == "llama3") & (pl.col("metric") == "interruptions_per_1k_gpu_days")
    ).row(0, named=True)
    assert r["ratio"] == pytest.approx(2.0) and r["verdict"] == "worse"
    # the ratio's CI holds both counts' Poisson error: sqrt(1/838 + 1/419) on the log scale
    s = math.log(r["ratio_ci_high"] / r["ratio_ci_low"]) / (2 * 1.959963984540054)
    assert s == pytest.approx(math.sqrt(1 / 838 + 1 / 419), rel=0.05)
    # no projection (no fits): the MTTI comes from the interruptions measured
    assert rows.filter(pl.col("metric") == "ettr")["ours"].null_count() == 0


def test_a_published_value_without_a_count_is_taken_as_exact():
    f = next(f for f in references.load() if f.fleet.id == "rsc1" and f.at_gpus is None)
    r, lo, hi = ratio_ci(Ours(13.0, 10.4, 16.25), f)
    assert (r, lo, hi) == pytest.approx((2.0, 1.6, 2.5))


def test_an_empty_warehouse_says_what_is_missing(wh):
    rows = compare(wh, wh.home)
    assert rows["ours"].null_count() == rows.height
    assert set(rows["missing"]) == {
        "no job time to count over (job_attempts without start and end)",
        "no failure rates or interruptions to project from",
        "no node outages (node down/drain events or failure records)",
    }
    assert headline(rows) is None


def test_goodput_references_prints_the_table_and_json(wh, capsys):
    one_llama3_job(wh)
    assert main(["--home", str(wh.home), "references"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Interruption rate 1.0x Llama 3's at the same size (16,384 GPUs")
    assert "RSC-1" in out and "Titan" in out and "sources" in out
    assert max(map(len, out.splitlines()[:15])) < 130
    assert main(["--home", str(wh.home), "references", "--format", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["headline"].startswith("interruption rate 1.0x")
    assert len(obj["rows"]) == len(references.load()) and {"ours", "ratio", "source"} <= set(
        obj["rows"][0]
    )


# ----------------------------------------------------------------------------- public data
def test_titans_quarterly_system_mtbf_from_the_committed_extract(wh):
    """The rows of Titan's gc_full.csv that failed in 2015-Q4 and 2016-Q4, through the product's
    ingest and system MTBF: the paper's 7.7 h and 2.7 h within 10%."""
    ingest_paths(wh, [FIXTURES / "titan" / "gc_failures_2015q4_2016q4.csv"],
                 ctx=ParseContext(cluster="titan", cluster_given=True))  # fmt: skip
    published = {f.label: f.value for f in references.load() if f.fleet.id == "titan"}
    for label, value in published.items():
        got = quarter_mtbf(wh, label, datetime(2015, 10, 1), datetime(2017, 1, 1))
        assert abs(got.value / value - 1) <= 0.10, (label, got.value)
        assert got.ci_low < value < got.ci_high


def test_stepfuns_fault_rate_from_its_trace():
    f = next(f for f in references.load() if f.fleet.id == "stepfun")
    got = stepfun_rate(FIXTURES / "stepfun" / "fault_starts.csv", f.fleet.nodes, f.fleet.days)
    assert got.value == pytest.approx(f.value, rel=1e-12) and abs(got.value - 4.2) < 0.05
    assert got.ci_low < 4.2 < got.ci_high


def test_lanls_repair_time_is_the_mean_over_every_repaired_failure(wh):
    """On the committed LANL extract (302 records of several systems), the pooled repair time
    the comparison uses is the plain mean of the records' downtime: what the paper's 355
    minutes over all failures is (the whole release: benchmarks/validate_references.py)."""
    from analysis.availability import refresh_availability

    ingest_paths(wh, [FIXTURES / "lanl" / "lanl_sample.csv"],
                 ctx=ParseContext(not_before=datetime(1990, 1, 1)))  # fmt: skip
    got = repair_minutes(refresh_availability(wh)[0])
    f = wh.read("failures").filter(pl.col("downtime_hours").is_not_null())
    assert got.value == pytest.approx(60 * f["downtime_hours"].mean(), rel=1e-9)
    assert "systems" in got.basis
