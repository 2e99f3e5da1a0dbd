"""System MTBF by calendar period: counts, exact Poisson CIs, simultaneous failures, empty and
partial periods, every series (failure records, interruptions, node failures), the CLI view and
the report section, on hand-made events and on the Titan / LANL extracts."""

from datetime import datetime

import polars as pl
import pytest
from scipy import stats

from analysis.system_mtbf import failure_events
from analysis.system_mtbf import refresh_system_mtbf
from analysis.system_mtbf import system_mtbf
from dashboards.report import build_sections
from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES

NO_HOSTS = pl.DataFrame(schema={"host": pl.Utf8, "cluster": pl.Utf8})


def _failures(rows):
    return pl.DataFrame(
        [
            {"system": s, "start_time": t, "end_time": None, "cause": c, "component_class": k}
            for s, t, c, k in rows
        ]
    ).pipe(lambda df: pl.concat([TABLES["failures"].empty(), df], how="diagonal_relaxed"))


def test_counts_cis_and_simultaneous_failures():
    t = datetime
    rows = [
        ("s", t(2020, 1, 1), "hardware", "gpu"),
        ("s", t(2020, 1, 5), "hardware", "gpu"),
        ("s", t(2020, 1, 5), "hardware", "gpu"),  # one instant
        ("s", t(2020, 2, 9), "software", None),
        # March: none
        ("s", t(2020, 4, 15, 12), "hardware", "psu"),
    ]
    ev = failure_events(
        _failures(rows), TABLES["interruptions"].empty(), TABLES["node_failures"].empty(), NO_HOSTS
    )
    df = system_mtbf(ev)
    month = df.filter((pl.col("period") == "month") & (pl.col("grouping") == "all"))
    assert month["label"].to_list() == ["2020-01", "2020-02", "2020-03", "2020-04"]
    assert month["failures"].to_list() == [2, 1, 0, 1] and month["events"].to_list() == [3, 1, 0, 1]
    assert month["partial"].to_list() == [
        False,
        False,
        False,
        True,
    ]  # observed up to the last failure
    jan = month.row(0, named=True)
    assert jan["exposure_hours"] == 31 * 24 and jan["mtbf_hours"] == pytest.approx(31 * 24 / 2)
    # exact Poisson: chi-square bounds on 2 events
    assert jan["mtbf_ci_low"] == pytest.approx(744 / (stats.chi2.ppf(0.975, 6) / 2))
    assert jan["mtbf_ci_high"] == pytest.approx(744 / (stats.chi2.ppf(0.025, 4) / 2))
    march = month.row(2, named=True)
    assert march["mtbf_hours"] is None and march["mtbf_ci_high"] is None
    assert march["mtbf_ci_low"] == pytest.approx(31 * 24 / (stats.chi2.ppf(0.975, 2) / 2))
    assert month["exposure_hours"][3] == 14.5 * 24
    q = df.filter((pl.col("period") == "quarter") & (pl.col("grouping") == "all"))
    assert q["label"].to_list() == ["2020-Q1", "2020-Q2"] and q["failures"].to_list() == [3, 1]
    by_cause = df.filter((pl.col("period") == "quarter") & (pl.col("grouping") == "cause"))
    assert dict(
        zip(by_cause["class"] + "/" + by_cause["label"], by_cause["failures"], strict=True)
    ) == {
        "hardware/2020-Q1": 2,
        "hardware/2020-Q2": 1,
        "software/2020-Q1": 1,
        "software/2020-Q2": 0,
    }
    assert set(df.filter(pl.col("grouping") == "component_class")["class"]) == {"gpu", "psu"}


def test_every_series_and_an_explicit_window():
    inter = pl.concat(
        [
            TABLES["interruptions"].empty(),
            pl.DataFrame(
                {
                    "cluster": ["c1", "c1", "c1"],
                    "end_time": [datetime(2025, 1, 3), datetime(2025, 1, 4), datetime(2025, 1, 5)],
                    "cause_class": ["gpu", "software", "nic"],
                    "planned": [False, False, True],
                    "failure_domain": ["infrastructure", "workload", "infrastructure"],
                }
            ),
        ],
        how="diagonal_relaxed",
    )
    nodes = pl.concat(
        [
            TABLES["node_failures"].empty(),
            pl.DataFrame(
                {
                    "host": ["n1", "n9"],
                    "time": [datetime(2025, 1, 2), datetime(2025, 1, 9)],
                    "cause_class": ["gpu", "psu"],
                }
            ),
        ],
        how="diagonal_relaxed",
    )
    hosts = pl.DataFrame({"host": ["n1"], "cluster": ["c1"]})
    ev = failure_events(TABLES["failures"].empty(), inter, nodes, hosts)
    # only the unplanned infrastructure interruption; a node no hardware event names is 'fleet'
    assert sorted(ev.select("source", "system").rows()) == [
        ("interruptions", "c1"),
        ("node_failures", "c1"),
        ("node_failures", "fleet"),
    ]
    df = system_mtbf(ev, observed_from=datetime(2025, 1, 1), observed_to=datetime(2025, 2, 1))
    m = df.filter((pl.col("period") == "month") & (pl.col("grouping") == "all"))
    assert m["exposure_hours"].to_list() == [744.0] * 3 and not m["partial"].any()
    assert m["failures"].to_list() == [1, 1, 1]


def test_titan_and_lanl_extracts_end_to_end(wh, capsys, tmp_path):
    from ingest.base import ParseContext

    ctx = ParseContext(cluster="titan", not_before=datetime(1990, 1, 1))
    reports = ingest_paths(
        wh,
        [FIXTURES / "titan" / "gc_sample.csv", FIXTURES / "lanl" / "lanl_sample.csv"],
        "auto",
        ctx,
    )
    assert [r.error for r in reports] == [None, None]
    wh.refresh_catalog()
    df = refresh_system_mtbf(wh)
    systems = set(df["system"])
    assert "titan" in systems and {"2", "20"} <= systems  # LANL's systems by number
    titan = df.filter(
        (pl.col("system") == "titan")
        & (pl.col("period") == "quarter")
        & (pl.col("grouping") == "all")
    )
    stored = wh.read("failures").filter(pl.col("system") == "titan")
    assert titan["events"].sum() == stored.height
    assert titan["failures"].sum() == stored["start_time"].n_unique()
    wh.refresh_catalog()
    home = str(wh.home)
    assert main(["mtbf", "--home", home, "--system", "titan", "--by", "component_class"]) == 0
    out = capsys.readouterr().out
    assert "gpu_memory" in out and "2016-Q4" in out
    assert main(["mtbf", "--home", home, "--system", "nope"]) == 2
    assert "no system 'nope'" in capsys.readouterr().err
    sections = {s.key: s for s in build_sections(wh, target_gpus=1024)}
    assert (
        sections["system_mtbf"].chart is not None
        and "titan (failures)" in sections["system_mtbf"].reading
    )


def test_report_leaves_the_section_out_without_failures(wh):
    wh.refresh_catalog()
    assert "system_mtbf" not in {s.key for s in build_sections(wh, target_gpus=1024)}
