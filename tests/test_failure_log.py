"""Failure / repair records (--format failure-log) -> failures: LANL's release read natively
(tests/fixtures/lanl, see PROVENANCE.md), other exports by header names or --map, a log with no
repair time, and one quarantine row per bad record with its reason."""

import csv
from collections import Counter
from datetime import datetime
from functools import partial

import pytest

from ingest.formats.failure_log import parse
from ingest.registry import detect
from pipelines.cli import main
from tests.conftest import FIXTURES
from tests.conftest import parse_rows

LANL = FIXTURES / "lanl" / "lanl_sample.csv"
OLD = datetime(1990, 1, 1)  # LANL's records start in 1996
CAUSES = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")


_parse = partial(parse_rows, parse, "failures")  # (rows, quarantine)


def test_lanl_detected_by_its_header():
    assert detect(LANL.read_bytes()[:65536], "whatever.csv").name == "failure-log"


def test_lanl_read_natively():
    rows = list(csv.DictReader(LANL.open().readlines()[1:]))
    ok, q = _parse(LANL.read_bytes(), not_before=OLD)
    assert q.height == 0 and ok.height == len(rows)
    want = Counter(
        next((c.lower().replace(" ", "_") for c in CAUSES if r[c].strip()), None) for r in rows
    )
    assert Counter(ok["cause"].to_list()) == want
    first = rows[0]
    got = ok.row(0, named=True)
    filled = next(c for c in CAUSES if first[c].strip())
    assert got["system"] == first["System"] and got["host"] == (first["nodenum"] or None)
    assert got["sub_cause"] == first[filled]
    assert got["downtime_hours"] == pytest.approx(float(first["Down Time"]) / 60)
    assert got["start_time"] == datetime.strptime(
        first["Prob Started (mm/dd/yy hh:mm)"], "%m/%d/%Y %H:%M"
    )
    assert got["system_nodes"] == int(first["nodes"]) and got["system_processors"] == int(
        first["procstot"]
    )
    assert ok["repair_known"].all()
    # the stated downtime wins over end - start (a DST change in a local clock, a typo)
    assert ok["downtime_hours"].to_list() == pytest.approx(
        [float(r["Down Time"]) / 60 for r in rows]
    )


def test_lanl_before_2000_is_implausible_by_default():
    ok, q = _parse(LANL.read_bytes())
    assert q.height > 0 and q["error"].str.contains("before 2000-01-01").all()
    assert (ok["start_time"] >= datetime(2000, 1, 1)).all()


def test_lanl_bad_records_quarantined_with_reasons():
    lines = LANL.read_text().splitlines()
    good = lines[2]
    f = next(csv.reader([good]))
    two = f.copy()
    two[19:25] = [""] * 6
    two[19], two[20] = "Power Outage", "Memory Dimm"
    early = f.copy()
    early[17] = "1/1/1990 0:00"
    neg = f.copy()
    neg[18] = "-5"
    junk = f.copy()
    junk[16] = "someday"
    short = ",".join(f[:10])
    text = (
        "\n".join([*lines[:2], good, *(",".join(x) for x in (two, early, neg, junk)), short]) + "\n"
    )
    ok, q = _parse(text, not_before=OLD)
    assert ok.height == 1
    assert q["error"].to_list() == [
        (
            "2 root-cause columns filled (want one of facilities, hardware, human_error, network, "
            "undetermined, software)"
        ),
        f"end time 1/1/1990 0:00 is before start time {f[16]}",
        "negative downtime '-5'",
        "unreadable start time 'someday'",
        "expected 26 fields (as the header), found 10",
    ]


def test_canonical_header_end_or_downtime():
    text = (
        "system,host,start_time,end_time,downtime_hours,cause,sub_cause\n"
        "a100,n1,2025-01-01T00:00:00Z,2025-01-01T02:30:00Z,,hardware,GPU\n"
        "a100,n2,2025-01-02T00:00:00Z,,1.5,software,driver hang\n"
        "a100,n3,2025-01-03T00:00:00Z,,,hardware,DIMM\n"
    )
    assert detect(text.encode(), "x.csv").name == "failure-log"
    ok, q = _parse(text)
    assert q.height == 0
    assert ok["downtime_hours"].to_list() == [2.5, 1.5, None]
    assert ok["end_time"].to_list() == [
        datetime(2025, 1, 1, 2, 30),
        datetime(2025, 1, 2, 1, 30),
        None,
    ]
    assert ok["repair_known"].to_list() == [True, True, False]
    assert ok["component_class"].to_list() == ["gpu", None, "host_memory"]


def test_date_host_what_failed_log_by_map():
    text = (
        "Date,Node,Part\n"
        "2025-03-01,gpu-node-004,GPU\n"
        "2025-03-04,gpu-node-009,PSU\n"
        "2025-03-05,,fan\n"
    )
    ok, q = _parse(text, cluster="east", column_map={"start_time": "Date", "sub_cause": "Part"})
    assert q.height == 0
    assert ok["system"].to_list() == ["east"] * 3
    assert ok["host"].to_list() == ["gpu-node-004", "gpu-node-009", None]
    assert ok["component_class"].to_list() == ["gpu", "psu", "cooling"]
    assert ok["end_time"].null_count() == 3 and ok["downtime_hours"].null_count() == 3
    assert not ok["repair_known"].any()


def test_no_start_column_is_one_line_for_the_file():
    ok, q = _parse("when,where\nyesterday,here\n")
    assert ok.height == 0 and q.height == 1
    assert "--map start_time=" in q["error"][0]


def test_cli_ingest_lanl_sample_twice(tmp_path, capsys):
    home = str(tmp_path / "home")
    args = ["ingest", str(LANL), "--home", home, "--not-before", "1990-01-01"]
    assert main(args) == 0
    assert "302 rows, 0 quarantined" in capsys.readouterr().out
    assert main(args) == 0
    assert "already ingested" in capsys.readouterr().out
    assert (
        main(
            [
                "sql",
                "select count(*) n, count(distinct system) s from failures",
                "--home",
                home,
                "--format",
                "csv",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[1].split(",")[0] == "302"
