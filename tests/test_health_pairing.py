"""Pairing health events into failures (analysis/health_events.py): a stream with known pairs
gives exactly its failures, every stored event has one outcome, a start and its end in two files
or two pulls pair, a pull repeated is stored once, and any stream keeps the pairing's invariants
(hypothesis)."""

import json
from datetime import datetime
from datetime import timedelta

import polars as pl
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from analysis.health_events import pair
from analysis.health_events import refresh_health_failures
from ingest.base import ParseContext
from ingest.runner import ingest_paths
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES

ORIGIN = datetime(2025, 1, 1)
RELATIVE = {"time_origin": ORIGIN, "time_unit": "hours"}


def _line(node, hours, kind, fault=None) -> str:
    return json.dumps({"node": node, "time": hours, "event": kind, "fault": fault})


def _at(hours: float) -> datetime:
    return ORIGIN + timedelta(hours=hours)


def _ingest(wh, tmp_path, name: str, lines: list[str]):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    [report] = ingest_paths(wh, [path], "health-events", ParseContext(options=RELATIVE), jobs=1)
    return report


def test_a_stream_with_known_pairs_gives_exactly_its_failures(wh, tmp_path):
    """Overlapping faults on one node, a repeated start, an end before its start, an exact
    duplicate end, a fault never closed; times in hours after an origin."""
    report = _ingest(
        wh,
        tmp_path,
        "trace.jsonl",
        [
            _line("a", 1, "start", "X"),
            _line("a", 2, "start", "Y"),  # another fault of node a, overlapping X
            _line("a", 3, "end", "X"),
            _line("a", 3, "end", "X"),  # the same end twice: stored once
            _line("a", 5, "end", "Y"),
            _line("b", 1, "end", "Z"),  # its start is before the data
            _line("b", 2, "start", "Z"),
            _line("b", 4, "end", "Z"),
            _line("c", 1, "start", "W"),
            _line("c", 1.5, "start", "W"),  # reported again while open: the same failure
            _line("c", 2, "end", "W"),
            _line("d", 6, "start", "V"),  # never closed
        ],
    )
    assert (report.rows_ok, report.rows_duplicate, report.rows_quarantined) == (11, 1, 0)
    assert refresh_health_failures(wh) == {"failures": 5, "open": 1, "unopened_ends": 1}
    got = wh.read("failures").sort("host", "start_time")
    assert got.select("host", "start_time", "end_time", "downtime_hours", "open").rows() == [
        ("a", _at(1), _at(3), 2.0, False),
        ("a", _at(2), _at(5), 3.0, False),
        ("b", _at(2), _at(4), 2.0, False),
        ("c", _at(1), _at(2), 1.0, False),
        ("d", _at(6), None, None, True),
    ]
    assert got["source"].unique().to_list() == ["health-events"]
    assert (got["repair_known"] == ~got["open"]).all()
    pairs = wh.read("health_event_pairs").sort("host", "time", "outcome")
    assert pairs.select("host", "time", "outcome", "failure_start").rows() == [
        ("a", _at(1), "opens", _at(1)),
        ("a", _at(2), "opens", _at(2)),
        ("a", _at(3), "closes", _at(1)),
        ("a", _at(5), "closes", _at(2)),
        ("b", _at(1), "unopened", None),
        ("b", _at(2), "opens", _at(2)),
        ("b", _at(4), "closes", _at(2)),
        ("c", _at(1), "opens", _at(1)),
        ("c", _at(1.5), "repeats", _at(1)),
        ("c", _at(2), "closes", _at(1)),
        ("d", _at(6), "open", _at(6)),
    ]
    [why] = pairs.filter(pl.col("outcome") == "unopened")["reason"]
    assert why.startswith("end of 'Z' on b with no start of it before")


def test_an_end_ends_every_fault_under_it_and_one_naming_none_every_fault_of_its_node():
    t0 = datetime(2026, 1, 1)
    rows = [
        ("n1", 0, "start", "GpuXidError / gpu:0"),
        ("n1", 1, "start", "GpuXidError / gpu:1"),
        ("n1", 2, "start", "GpuNvlinkWatch / gpu:3"),
        ("n1", 3, "healthy", "GpuXidError"),  # the check, no entity: both its GPUs
        ("n1", 4, "healthy", None),  # a reboot: the rest of the node
        ("n2", 5, "healthy", None),  # nothing open: a plain observation
        ("n2", 6, "info", "Rebooted"),
    ]
    events = pl.DataFrame(
        [
            {"time": t0 + timedelta(hours=h), "system": "c", "host": n, "kind": k, "fault": f,
             "source": "t", "source_file": "f", "source_line": i}
            for i, (n, h, k, f) in enumerate(rows)
        ]
    )  # fmt: skip
    failures, pairs = pair(
        pl.concat([TABLES["health_events"].empty(), events], how="diagonal_relaxed")
    )
    assert failures.select("start_time", "end_time").rows() == [
        (t0, t0 + timedelta(hours=3)),
        (t0 + timedelta(hours=1), t0 + timedelta(hours=3)),
        (t0 + timedelta(hours=2), t0 + timedelta(hours=4)),
    ]
    assert pairs["outcome"].to_list() == [
        "opens",
        "opens",
        "opens",
        "closes",
        "closes",
        "healthy",
        "info",
    ]


def test_a_start_in_one_file_and_its_end_in_the_next_pair(wh, tmp_path):
    _ingest(wh, tmp_path, "monday.jsonl", [_line("n1", 1, "start", "X")])
    refresh_health_failures(wh)
    assert wh.read("failures").select("start_time", "end_time", "open").rows() == [
        (_at(1), None, True)
    ]
    _ingest(wh, tmp_path, "tuesday.jsonl", [_line("n1", 30, "end", "X")])
    refresh_health_failures(wh)
    assert wh.read("failures").select("start_time", "end_time", "open").rows() == [
        (_at(1), _at(30), False)
    ]


def test_events_pulled_twice_are_stored_once(wh):
    """A command source (the store's export) pulled over two overlapping windows: each event
    once, the same failures as one read."""
    export = FIXTURES / "health_events" / "nvsentinel__store_export_from_schema.jsonl"
    src = source_config(
        {"name": "nvsentinel", "kind": "command", "cluster": "c1", "command": ["cat", str(export)],
         "retries": 0},
        kinds(),
    )  # fmt: skip
    t0 = datetime(2025, 10, 28)
    first = pull(wh, [src], t0, t0 + timedelta(hours=2))
    again = pull(wh, [src], t0 + timedelta(hours=1), t0 + timedelta(hours=3))
    assert sum(r.rows_ok for r in first) == 6
    assert sum(r.rows_ok for r in again) == 0 and sum(r.rows_duplicate for r in again) == 6
    assert wh.read("health_events").height == 6
    assert refresh_health_failures(wh)["failures"] == 2


_KINDS = st.sampled_from(["start", "start", "end", "healthy", "info"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["n1", "n2"]),
            st.integers(0, 40),
            _KINDS,
            st.sampled_from(["A", "A / x", "B", None]),
        ),
        max_size=40,
        unique=True,
    )
)
def test_every_event_has_one_outcome_and_failures_never_overlap_within_a_fault(rows):
    t0 = datetime(2026, 1, 1)
    events = pl.concat(
        [
            TABLES["health_events"].empty(),
            pl.DataFrame(
                [
                    {"time": t0 + timedelta(minutes=m), "system": "c", "host": n, "kind": k,
                     "fault": f, "source": "t", "source_file": "f", "source_line": i}
                    for i, (n, m, k, f) in enumerate(rows)
                ],
                schema_overrides={"source_line": pl.Int64, "time": pl.Datetime("us")},
            ) if rows else TABLES["health_events"].empty(),
        ],
        how="diagonal_relaxed",
    )  # fmt: skip
    failures, pairs = pair(events)
    assert pairs.height == events.height and pairs["outcome"].null_count() == 0
    outcome = pairs["outcome"].value_counts().rows()
    count = dict(outcome)
    assert failures.height == count.get("opens", 0) + count.get("open", 0)
    assert failures["open"].sum() == count.get("open", 0)
    assert (
        failures.filter(~pl.col("open"))["end_time"]
        >= failures.filter(~pl.col("open"))["start_time"]
    ).all()
    starts = events.filter(pl.col("kind") == "start").height
    assert count.get("opens", 0) + count.get("open", 0) + count.get("repeats", 0) >= starts
    assert count.get("info", 0) == events.filter(pl.col("kind") == "info").height
    # within one fault key, failures follow one another
    keyed = (
        failures.join(
            pairs.filter(pl.col("outcome").is_in(["opens", "open"])).select(
                "host", "source_line", start_time="time", key=pl.col("fault").fill_null("")
            ),
            on=["host", "start_time", "source_line"],
        )
        .sort("host", "key", "start_time")
        .with_columns(prev_end=pl.col("end_time").shift(1).over("host", "key"))
    )
    assert (keyed["prev_end"].is_null() | (keyed["start_time"] >= keyed["prev_end"])).all()
