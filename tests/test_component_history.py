"""Component history CSV -> component_history: canonical layout, --map for other exports, time
forms, validation, conservation, idempotence, fuzzing, and the synthetic fleet's replacements."""

import json
from datetime import datetime
from functools import partial

import polars as pl
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.formats.component_history import detect
from ingest.formats.component_history import parse
from ingest.registry import detect as registry_detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import SAMPLE_FLEET
from tests.conftest import parse_rows

HEADER = "component_class,serial,slot,installed_at,removed_at,removal_reason,failed\n"


_parse = partial(parse_rows, parse, "component_history")  # (rows, quarantine)


def test_canonical_csv():
    text = HEADER + (
        "gpu,SN1,gpu-node-001/gpu0,2025-01-01T00:00:00Z,2025-03-01T12:00:00+02:00,xid 79,true\n"
        "\n"
        "GPU,SN2,gpu-node-001/gpu0,2025-03-01 14:00,,,\n"
        "HBM,SN2:hbm,gpu-node-001/gpu0-hbm,2025-03-01T14:00:00,,,FALSE\n"
        "psu,SN3,gpu-node-002/psu1,2025-01-01,2025-02-01,swap,no\n"
    )
    ok, q = _parse(text, tz="Europe/Berlin", path="/c/component_history.csv")
    assert q.height == 0
    assert ok["serial"].to_list() == ["SN1", "SN2", "SN2:hbm", "SN3"]
    assert ok["component_class"].to_list() == ["gpu", "gpu", "gpu_memory", "psu"]
    assert ok["host"].to_list() == ["gpu-node-001"] * 3 + ["gpu-node-002"]
    assert ok["position"].to_list() == ["gpu0", "gpu0", "gpu0-hbm", "psu1"]
    assert ok["installed_at"].to_list() == [
        datetime(2025, 1, 1),
        datetime(2025, 3, 1, 13),
        datetime(2025, 3, 1, 13),
        datetime(2024, 12, 31, 23),
    ]  # zone-less times are Berlin wall clock
    assert ok["removed_at"].to_list() == [
        datetime(2025, 3, 1, 10),
        None,
        None,
        datetime(2025, 1, 31, 23),
    ]
    assert ok["failed"].to_list() == [True, False, False, False]
    assert ok["source_line"].to_list() == [2, 4, 5, 6] and ok["source"][0] == "component-history"


def test_rows_that_cannot_be_lifetimes_are_quarantined():
    text = HEADER + (
        "psu,SN3,gpu-node-002/psu1,2025-01-01,2024-12-01,,no\n"
        "psu,,gpu-node-002/psu1,2025-01-01,,,\n"
        "psu,SN4,gpu-node-002/psu2,yesterday,,,\n"
        "psu,SN5,gpu-node-002/psu2,2025-01-01,someday,,\n"
        "psu,SN6,gpu-node-002/psu2,2025-01-01,,,maybe\n"
        ",SN7,gpu-node-002/psu2,2025-01-01,,,\n"
    )
    ok, q = _parse(text)
    assert ok.height == 0 and q["line"].to_list() == [2, 3, 4, 5, 6, 7]
    assert q["error"].to_list() == [
        "removed_at 2024-12-01 00:00:00.000000 is before installed_at 2025-01-01 00:00:00.000000",
        "empty serial", "unreadable installed_at 'yesterday'", "unreadable removed_at 'someday'",
        "unreadable failed 'maybe' (want true/false, 1/0, yes/no)", "empty component_class",
    ]  # fmt: skip


def test_other_export_through_column_map_and_its_time_formats():
    text = (
        "Type,SN,Location,Install Date,RemovalDate,Reason,Model\n"
        "GPU,A1,n1/GPU3,01/31/2025 10:00,02/15/2025,RMA - DBE,H100\n"
        "DIMM,A2,n1/DIMM04,1735689600,,,\n"
        "Fan,A3,n2/fan1,31.01.2025 08:30,2025/02/01 09:00,scheduled swap,\n"
    )
    ok, q = _parse(text)
    assert ok.height == 0 and q.height == 1
    assert "--map component_class=<their header>,serial=<their header>" in q["error"][0]
    cmap = {
        "component_class": "type",
        "serial": "SN",
        "slot": "location",
        "installed_at": "InstallDate",
        "removed_at": "RemovalDate",
        "removal_reason": "Reason",
    }
    ok, q = _parse(text, column_map=cmap)
    assert q.height == 0
    assert ok["component_class"].to_list() == ["gpu", "host_memory", "cooling"]
    assert ok["model"].to_list() == ["H100", None, None]
    assert ok["installed_at"].to_list() == [
        datetime(2025, 1, 31, 10),
        datetime(2025, 1, 1),
        datetime(2025, 1, 31, 8, 30),
    ]
    assert ok["removed_at"].to_list() == [datetime(2025, 2, 15), None, datetime(2025, 2, 1, 9)]
    # no failed column: a removal whose reason names a failure counts as failed
    assert ok["failed"].to_list() == [True, False, False]
    ok, _ = _parse("serial,host,position,installed_at,component_class\nX,n3,gpu1,2025-01-01,gpu\n")
    assert (ok["slot"][0], ok["host"][0], ok["position"][0]) == ("n3/gpu1", "n3", "gpu1")
    ok, _ = _parse(HEADER + "gpu,S,n/g,05/01/2025,,,\n", options={"time_format": "%d/%m/%Y"})
    assert ok["installed_at"][0] == datetime(2025, 1, 5)


def test_detection():
    assert detect(HEADER.encode(), "x.csv") == 95
    assert (
        registry_detect(HEADER.encode() + b"gpu,S,n/g,2025-01-01,,,\n", "x.csv").name
        == "component-history"
    )
    assert detect(b"Type,SN,InstallDate\n", "x.csv") == 50
    assert detect(b"JobID|State\n", "x") == 0


def test_runner_conservation_and_idempotence(wh, tmp_path):
    f = tmp_path / "components.csv"
    f.write_text(HEADER + "gpu,S1,n/g0,2025-01-01,,,\ngpu,S2,n/g1,2025-01-01,2024-01-01,,\n")
    (r,) = ingest_paths(wh, [f])
    assert (r.format, r.records, r.rows_ok, r.rows_quarantined) == ("component-history", 2, 1, 1)
    before = wh.read("component_history")
    (again,) = ingest_paths(wh, [f])
    assert again.skipped and wh.read("component_history").equals(before)


_CELL = st.sampled_from(
    [
        "",
        "gpu",
        "GPU",
        "psu",
        "SN1",
        "n1/gpu0",
        "n1",
        "2025-01-01",
        "2025-01-01T00:00:00Z",
        "01/31/2025",
        "1735689600",
        "garbage",
        "true",
        "no",
        "2",
        '"a,b"',
        "é",
    ]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_CELL, min_size=7, max_size=7), max_size=10), st.booleans())
def test_fuzz_never_raises_and_conserves(rows, ragged):
    lines = [",".join(r[: 5 if ragged and i == 0 else 7]) for i, r in enumerate(rows)]
    ok, _ = _parse(HEADER + "\n".join(lines) + "\n")
    if ok.height:
        assert ok["installed_at"].null_count() == 0 and ok["serial"].null_count() == 0
        assert (ok["removed_at"].is_null() | (ok["removed_at"] >= ok["installed_at"])).all()


def _fleet_truth() -> dict:
    path = SAMPLE_FLEET / "ground_truth.json"
    if not path.exists():
        pytest.skip("synthetic fleet not generated yet (sample_data/fleet)")
    return json.loads(path.read_text())


def test_fleet_every_replacement_is_in_component_history():
    truth = _fleet_truth()
    csv = SAMPLE_FLEET / "components" / "component_history.csv"
    ok, q = _parse(csv.read_bytes(), path=str(csv))
    assert q.height == 0
    reps = pl.DataFrame(truth["replacements"]).with_columns(time=pl.col("time").str.to_datetime())
    assert reps.height > 0
    old = reps.join(ok, left_on=["old_serial", "slot"], right_on=["serial", "slot"], how="left")
    assert old["removed_at"].null_count() == 0
    assert (old["removed_at"] - old["time"]).dt.total_seconds().abs().max() <= 1
    assert (old["failed"] == old["old_failed"]).all()
    new = reps.join(ok, left_on=["new_serial", "slot"], right_on=["serial", "slot"], how="left")
    assert new["installed_at"].null_count() == 0
    assert (
        new.select((pl.col("installed_at") - pl.col("time")).dt.total_seconds().min()).item() >= -1
    )
    assert (new["component_class"] == new["component_class_right"]).all()


def _units(n: int) -> list[str]:
    return [
        f"gpu,SN{i:05d},node{i // 8:04d}/gpu{i % 8},2024-01-0{1 + i % 9}T00:00:00,,,"
        for i in range(n)
    ]


def test_one_unterminated_quote_loses_only_its_record():
    rows = _units(2424)
    rows[1000] = 'gpu,"SN01000,node0125/gpu0,2024-01-02T00:00:00,,,'
    ok, q = _parse(HEADER + "\n".join(rows) + "\n")
    assert ok.height == 2423 and "SN01000" not in ok["serial"].to_list()
    assert ok["serial"][1000] == "SN01001" and ok["source_line"][1000] == 1003
    assert q.rows() == [(1002, rows[1000], "unterminated quoted field (an odd number of '\"')")]


def test_quoted_fields_across_lines_stray_quotes_and_ragged_rows():
    rows = _units(6)
    rows[1] = 'gpu,SN1,n1/gpu1,2024-01-01,2024-02-01,"burnt, ""smell""\nsee ticket",true'
    rows[3] = 'gpu,SN"3,n1/gpu3,2024-01-01,,,'  # pairs with nothing: one spoilt line
    rows[4] = "gpu,SN4,n1/gpu4,2024-01-01,,"
    ok, q = _parse(HEADER + "\n".join(rows) + "\n")
    assert ok["serial"].to_list() == ["SN00000", "SN1", "SN00002", "SN00005"]
    assert ok["removal_reason"][1] == 'burnt, "smell"\nsee ticket' and ok["failed"][1] is True
    assert ok["source_line"].to_list() == [2, 3, 5, 8]
    assert q.select("line", "error").rows() == [
        (6, "unterminated quoted field (an odd number of '\"')"),
        (7, "expected 7 fields separated by ',' (as the header), found 6"),
    ]


def test_implausible_install_and_removal_times_are_quarantined():
    ok, q = _parse(
        HEADER
        + "gpu,A,n1/0,1999-12-31,,,\ngpu,B,n1/1,2024-01-01,2999-01-01,,\ngpu,C,n1/2,2024-01-01,,,\n"
    )
    assert ok["serial"].to_list() == ["C"]
    assert [e.split(" (")[0] for e in q["error"]] == [
        "installed_at: time 1999-12-31T00:00:00 is before 2000-01-01T00:00:00",
        "removed_at: time 2999-01-01T00:00:00 is after "
        + q["error"][1].split(" is after ")[1].split(" (")[0],
    ]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 9), st.integers(0, 60), st.sampled_from(['"', "\n", ",", '""', "\r\n", "#"]))
def test_fuzz_one_inserted_character_costs_at_most_its_record(row, pos, char):
    rows = _units(10)
    line = rows[row]
    pos = min(pos, len(line))
    rows[row] = line[:pos] + char + line[pos:]
    ok, q = _parse(HEADER + "\n".join(rows) + "\n")
    others = [f"SN{i:05d}" for i in range(10) if i != row]
    assert set(others) <= set(ok["serial"].to_list())  # every other unit lands
    if char == '"':  # one stray quote: exactly its own line is quarantined
        assert q["line"].to_list() == [row + 2] and q["error"][0].startswith(
            "unterminated quoted field"
        )


def test_exact_duplicate_records_are_stored_once_and_counted_as_duplicates(wh, tmp_path):
    rows = _units(3)
    f = tmp_path / "components.csv"
    f.write_text(HEADER + "\n".join([rows[0], rows[1], rows[0], rows[2], rows[1]]) + "\n")
    (r,) = ingest_paths(wh, [f])
    assert (r.records, r.rows_ok, r.rows_quarantined, r.rows_duplicate) == (5, 3, 0, 2)
    ok = wh.read("component_history").sort("source_line")
    assert ok["serial"].to_list() == ["SN00000", "SN00001", "SN00002"]
    assert ok["source_line"].to_list() == [2, 3, 5]
    assert wh.read("quarantine").height == 0


# ----------------------------------------------------------------------------- other layouts
def _fixture(name):
    path = FIXTURES / "component_history" / name
    return _parse(path.read_bytes(), path=str(path))


def test_olcf_inventory_intervals_fold_the_failure_event_into_the_unit_it_ended():
    ok, q = _fixture("olcf_titan_gpu_history.txt")
    assert q.height == 0 and ok.height == 9  # nine sightings; the DBE row belongs to one of them
    assert set(ok["component_class"]) == {"gpu"}  # from the file name
    sn = ok.group_by("serial").len().sort("serial")
    assert sn.rows() == [("0323812007945", 4), ("0323812008856", 4), ("0325216047736", 1)]
    failed = ok.filter(pl.col("failed"))
    assert failed.select("serial", "host", "removal_reason", "removed_at").rows() == [
        ("0323812008856", "c23-6c1s7n2", "DBE", datetime(2018, 11, 2, 14, 42, 34))
    ]
    first = ok.filter(pl.col("source_line") == 2).row(0, named=True)  # a continuation row
    assert (first["serial"], first["slot"], first["installed_at"], first["removed_at"]) == (
        "0323812007945",
        "c13-1c1s3n3/gpu",
        datetime(2014, 1, 21, 21, 10, 42),
        datetime(2017, 8, 1, 2, 15, 2),
    )


def test_inventory_intervals_reject_what_they_cannot_place():
    text = (
        # continuation before any serial
        " | c1-0c0s0n0 | 01/01/2020 00:00:00 | 01/02/2020 00:00:00\n"
        "SN1 | c1-0c0s0n1 | 01/05/2020 00:00:00 | 02/01/2020 00:00:00\n"
        " | | OTB | 01/01/2020 00:00:00\n"  # before SN1's first installation
        "SN1 | c1-0c0s0n1 | 01/05/2020\n"  # three fields
        " | | DBE | 03/01/2020 10:00:00\n"  # after last seen: the failure ends the stay then
        "SN2 | c1-0c0s0n2 | someday | 02/01/2020 00:00:00\n"
    )
    ok, q = _parse(text, path="/x/gpu_history.txt")
    assert ok.select("serial", "failed", "removal_reason", "removed_at").rows() == [
        ("SN1", True, "DBE", datetime(2020, 3, 1, 10))
    ]
    assert dict(zip(q["line"], q["error"], strict=True)) == {
        1: "a continuation row with a blank serial before any serial",
        3: (
            "OTB at 01/01/2020 00:00:00 for serial SN1: no readable installation of that serial "
            "starts at or before it"
        ),
        4: (
            "expected 4 '|'-separated fields (serial | location | first seen | last seen, "
            "or ' | | EVENT | time'), found 3"
        ),
        6: "unreadable installed_at 'someday'",
    }
    ok, q = _parse(text, path="/x/history.txt")  # no class in the name: one row says what to do
    assert ok.height == 0 and q.height == 1 and "name the file after it" in q["error"][0]


def test_hpe_sat_hwhist_tables_become_installations():
    rows = []
    for name in (
        "hpe_sat_hwhist_by_xname.txt",
        "hpe_sat_hwhist_by_fru.txt",
        "hpe_sat_hwhist_added.txt",
    ):
        ok, q = _fixture(name)
        assert q.height == 0
        rows += ok.select(
            "component_class", "host", "position", "model", "installed_at", "removed_at", "failed"
        ).rows()
    assert rows == [  # five Detected events of one FRU at one xname are one stay, still in service
        (
            "cpu",
            "x3000c0s3b0n0",
            "p0",
            "AdvancedMicroDevicesInc",
            datetime(2021, 6, 2, 18, 37, 31, 619581),
            None,
            False,
        ),
        (
            "psu",
            "x3000c0s17e0",
            "t1",
            "LiteonPower",
            datetime(2021, 6, 2, 18, 37, 34, 623145),
            None,
            False,
        ),
        (
            "host_memory",
            "x3000c0s7b0n0",
            "d9",
            "Hynix.HMA41GR7MFR8NTFT1",
            datetime(2021, 5, 4, 19, 33, 3, 396677),
            None,
            False,
        ),
    ]


def test_hwhist_removed_events_end_stays_and_bad_rows_are_quarantined():
    head = "+---+\n| FRUID | xname | Timestamp | EventType |\n+---+\n"
    body = [
        "| NodeAccel.NVIDIA.X.G1 | x1000c0s0b0n0a0 | 2024-01-01T00:00:00Z | Added |",
        "| NodeAccel.NVIDIA.X.G1 | x1000c0s0b0n0a0 | 2024-02-01T00:00:00Z | Removed |",
        # back: a second stay
        "| NodeAccel.NVIDIA.X.G1 | x1000c0s0b0n0a0 | 2024-03-01T00:00:00Z | Added |",
        "| NodeAccel.NVIDIA.X.G1 | x1000c0s0b0n0a0 | 2024-03-05T00:00:00Z | Scanned |",
        # never seen before
        "| NodeAccel.NVIDIA.X.G2 | x1000c0s0b0n0a1 | 2024-01-01T00:00:00Z | Removed |",
        "| NodeAccel.NVIDIA.X.G3 | x1000c0s0b0n0a2 | 2024-01-01T00:00:00Z | Moved |",
        "| NodeAccel.NVIDIA.X.G3 | x1000c0s0b0n0a2 | yesterday | Added |",
        "| NodeAccel.NVIDIA.X.G3 | x1000c0s0b0n0a2 | 2024-01-01T00:00:00Z |",
    ]
    ok, q = _parse(head + "\n".join(body) + "\n+---+\n")
    assert ok.select(
        "component_class", "serial", "position", "installed_at", "removed_at", "removal_reason"
    ).rows() == [
        (
            "gpu",
            "NodeAccel.NVIDIA.X.G1",
            "a0",
            datetime(2024, 1, 1),
            datetime(2024, 2, 1),
            "Removed",
        ),
        ("gpu", "NodeAccel.NVIDIA.X.G1", "a0", datetime(2024, 3, 1), None, None),
    ]
    assert not ok["failed"].any()  # HSM does not say why a FRU left: censored, not failed
    assert dict(zip(q["line"], q["error"], strict=True)) == {
        8: "Removed at 2024-01-01T00:00:00Z with no earlier event of this FRU at x1000c0s0b0n0a1",
        9: "unknown EventType 'Moved' (want Added, Removed, Detected or Scanned)",
        10: "unreadable Timestamp 'yesterday'",
        11: "expected 4 '|'-separated columns as the header, found 3",
    }
