"""sacctmgr show event (slurmdbd's node state history) to node_events."""

from datetime import datetime

from ingest.base import ParseContext
from ingest.formats.sacctmgr_events import FORMAT
from ingest.formats.sacctmgr_events import parse
from ingest.registry import detect
from tests.conftest import FIXTURES

CAPTURE = FIXTURES / "slurm" / "sacctmgr_show_event_22_05_8.txt"


def _rows(data: bytes, **ctx):
    res = parse(data, ParseContext(path="events.txt", **ctx))
    ne = res.tables.get("node_events")
    rows = [] if ne is None else ne.select("time", "host", "event", "reason").rows()
    assert (0 if ne is None else ne.height) + res.quarantine.height == res.records
    return rows, res.quarantine


def test_real_capture_start_and_end_rows_without_the_cluster_event():
    rows, q = _rows(CAPTURE.read_bytes())
    assert q.height == 0

    def t(s):
        return datetime.fromisoformat(f"2026-11-25T13:{s}")

    assert rows == [
        (t("39:08"), "gpu001", "drain", "PSU redundancy lost"),  # FAIL
        (t("39:09"), "gpu001", "resume", "PSU redundancy lost"),
        (t("37:33"), "gpu002", "drain", "maint: firmware update"),
        (t("37:34"), "gpu002", "resume", "maint: firmware update"),
        # drained, then set down: the next event starts when the first ends, so no resume
        (t("39:09"), "gpu003", "drain", "ib link flapping"),
        (t("39:10"), "gpu003", "drain", "kernel panic"),  # still open: start row only
        (t("37:33"), "gpu004", "down", "Xid 79 GPU has fallen off the bus"),
    ]


def test_detected_with_and_without_header():
    data = CAPTURE.read_bytes()
    assert detect(data, "events.txt") is FORMAT
    body = b"c1|gpu9|2026-01-02T03:04:05|Unknown|DOWN|root(0)|Xid 79\n"
    assert detect(body, "x") is FORMAT
    rows, q = _rows(body)
    assert rows == [(datetime(2026, 1, 2, 3, 4, 5), "gpu9", "down", "Xid 79")] and q.height == 0


def test_bad_lines_are_quarantined_one_by_one_and_good_ones_kept():
    data = (
        b"\n".join(
            [
                b"Cluster|NodeName|TimeStart|TimeEnd|State|User|Reason",
                (
                    b"c1|gpu1|2026-01-02T03:04:05|2026-01-02T04:00:00|IDLE+DRAIN|root(0)|a|reason|"
                    b"with bars"
                ),
                b"c1|gpu2|yesterday|Unknown|DOWN|root(0)|x",
                b"c1|gpu3|2026-01-02T03:04:05|Unknown|IDLE|root(0)|x",
                b"c1|gpu4|2026-01-02T05:00:00|2026-01-02T04:00:00|DOWN|root(0)|x",
                b"c1|gpu5|2026-01-02T03:04:05",
                b"c1|gpu[6-7]|2026-01-02T03:04:05|Unknown|DOWN*|root(0)|psu",
                b"c1|gpu[8|2026-01-02T03:04:05|Unknown|DOWN|root(0)|x",
            ]
        )
        + b"\n"
    )
    rows, q = _rows(data, tz="Europe/Berlin")
    assert rows == [
        (datetime(2026, 1, 2, 2, 4, 5), "gpu1", "drain", "a|reason|with bars"),
        (datetime(2026, 1, 2, 3, 0, 0), "gpu1", "resume", "a|reason|with bars"),
        (datetime(2026, 1, 2, 2, 4, 5), "gpu6", "down", "psu"),
        (datetime(2026, 1, 2, 2, 4, 5), "gpu7", "down", "psu"),
    ]
    errors = dict(zip(q["line"].to_list(), q["error"].to_list(), strict=True))
    assert sorted(errors) == [3, 4, 5, 6, 8]
    assert errors[3].startswith("unreadable TimeStart 'yesterday'")
    assert errors[4] == "node state 'IDLE' is no down, drain, fail or reboot state"
    assert errors[5] == "TimeEnd 2026-01-02T04:00:00 is before TimeStart 2026-01-02T05:00:00"
    assert errors[6] == "expected 7 fields separated by '|', found 3"
    assert "gpu[8" in q.filter(q["line"] == 8)["raw"][0]


def test_a_header_without_node_names_rejects_every_line_with_one_reason():
    data = b"Cluster|TimeStart|State\nc1|2026-01-02T03:04:05|DOWN\n"
    rows, q = _rows(data)
    assert rows == [] and q["error"].to_list() == [
        "the header has no nodename field: no line can be read as a node event"
    ]


def test_a_cluster_given_is_the_cluster_of_every_event_never_a_merge_of_two():
    header = "Cluster|NodeName|TimeStart|TimeEnd|State|Reason\n"
    line = "{}|gpu001|2026-01-01T00:00:00|Unknown|DOWN|psu\n"
    one = (header + line.format("cluster")).encode()
    for ctx, want in (({}, "cluster"), ({"cluster": "east", "cluster_given": True}, "east")):
        ne = parse(one, ParseContext(**ctx)).tables["node_events"]
        assert ne["cluster"].to_list() == [want]
    two = (header + line.format("a") + line.format("b")).encode()
    res = parse(two, ParseContext(cluster="a", cluster_given=True))
    assert res.tables["node_events"]["cluster"].to_list() == ["a"]
    assert res.quarantine["error"].to_list() == [
        (
            "this dump holds records of clusters a, b: the cluster given (a) would merge them; "
            "read it without a given cluster, or one cluster at a time (sacct -M b)"
        )
    ]
