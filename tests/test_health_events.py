"""Health-event streams (--format health-events) -> health_events: each recognised layout on its
fixture (tests/fixtures/health_events, provenance in tests/fixtures/README.md) detected by
content and read to known rows, --map with dotted paths and kind values, relative times, and one
quarantine row per bad record with its reason."""

import json
from datetime import datetime
from datetime import timedelta
from functools import partial

import polars as pl
import pytest

from ingest.formats.health_events import parse
from ingest.registry import detect
from pipelines.cli import main
from tests.conftest import FIXTURES
from tests.conftest import parse_rows

HE = FIXTURES / "health_events"
_parse = partial(parse_rows, parse, "health_events")  # (rows, quarantine)
TRACE_MAP = {
    "cause": "fault_type.Level",
    "component": "fault_type.Class",
    "sub_cause": "fault_type.Desc",
}


def _detected(name: str) -> str | None:
    data = (HE / name).read_bytes()
    found = detect(data[:65536], name)
    return found and found.name


@pytest.mark.parametrize("name", sorted(p.name for p in HE.iterdir()))
def test_every_fixture_is_detected_as_health_events(name):
    assert _detected(name) == "health-events"


def test_plain_kubernetes_files_stay_the_k8s_format():
    """A node list with only the kubelet's conditions is the k8s format's (node_events); so are
    event lists about pods."""
    for p in (FIXTURES / "kubernetes").iterdir():
        assert detect(p.read_bytes()[:65536], p.name).name == "k8s", p.name
    kubelet_only = {
        "kind": "List",
        "apiVersion": "v1",
        "items": [
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ]
                },
            }
        ],
    }
    assert detect(json.dumps(kubelet_only).encode(), "nodes.json").name == "k8s"


def test_nvsentinel_store_export():
    ok, q = _parse(HE / "nvsentinel__store_export_from_schema.jsonl")
    assert q.height == 0
    assert ok["source"].unique().to_list() == ["nvsentinel"]
    first = ok.row(0, named=True)
    # generatedtimestamp {seconds, nanos}, lower-case BSON names, numeric recommended action
    assert first["time"] == datetime(2025, 10, 28, 10, 15, 30)
    assert (first["host"], first["kind"], first["fault"]) == (
        "gpu-node-42",
        "start",
        "SysLogsXIDError / gpu:0",
    )
    assert (first["cause"], first["component_class"], first["code"], first["action"]) == (
        "sys_logs_xid_error",
        "gpu",
        "48",
        "REPLACE_VM",
    )
    assert ok["kind"].to_list() == ["start", "start", "info", "healthy", "start", "healthy"]
    # a recovery naming no entity is the whole check's
    assert ok["fault"][-1] == "GpuMemWatch"


def test_nvsentinel_bare_event_without_time_is_quarantined():
    ok, q = _parse(HE / "nvsentinel__xid-79-error.json")
    assert ok.height == 0 and q["error"].to_list() == [
        "no time: the event cannot be placed (a field of another name: --map time=)"
    ]
    doc = json.loads((HE / "nvsentinel__xid-79-error.json").read_text())
    doc["generatedTimestamp"] = "2025-11-02T00:31:02Z"  # the protobuf's JSON form: text
    ok, _ = _parse(doc)
    assert ok.select("time", "host", "kind", "fault", "code", "action").row(0) == (
        datetime(2025, 11, 2, 0, 31, 2),
        "NODE_NAME",
        "start",
        "GpuXidError / gpu:0",
        "79",
        "RESTART_VM",
    )


def test_nvsentinel_created_at_when_the_event_carries_no_time():
    doc = {
        "_id": {"$oid": "6906a646fa62bde28eafe3cf"},
        "createdAt": {"$date": {"$numberLong": "1762043462943"}},  # canonical extended JSON
        "healthevent": {"nodename": "n1", "checkname": "GpuPcieWatch", "isfatal": True},
    }
    ok, _ = _parse([doc])
    assert ok["time"][0] == datetime(2025, 11, 2, 0, 31, 2, 943000)


def test_gpud_events_need_a_host():
    ok, q = _parse(HE / "gpud__tutorials_v1_events_xid.json", host="gpu-node-7")
    assert q.height == 0
    assert ok.select("time", "kind", "fault", "code", "component_class").rows() == [
        (datetime(2025, 6, 1, 16, 59, 14), "start", "accelerator-nvidia-error-xid", "74", "gpu"),
        (datetime(2025, 6, 1, 16, 59, 4), "start", "accelerator-nvidia-error-xid", "79", "gpu"),
    ]
    ok, q = _parse(HE / "gpud__tutorials_v1_events_xid.json", path="events.json")
    assert ok.height == 0 and q["error"].str.starts_with("no host").all()


def test_gpud_host_from_the_file_name_is_a_stand_in():
    res = parse(
        (HE / "gpud__tutorials_v1_events_xid.json").read_bytes(), _ctx(path="/x/gpu-node-7.json")
    )
    assert res.tables["health_events"]["host"].unique().to_list() == ["gpu-node-7"]
    assert res.stand_ins == frozenset({"host from file name"})


def test_gpud_set_healthy_ends_its_component_and_a_reboot_every_fault():
    answer = [
        {
            "component": "accelerator-nvidia-error-xid",
            "startTime": "2025-06-01T00:00:00Z",
            "endTime": "2025-06-02T00:00:00Z",
            "events": [
                {"time": "2025-06-01T01:00:00Z", "name": "error_xid", "type": "Fatal",
                 "message": "XID 79"},
                {"time": "2025-06-01T02:00:00Z", "name": "SetHealthy", "type": "Info"},
            ],
        },
        {
            "component": "os",
            "startTime": "2025-06-01T00:00:00Z",
            "endTime": "2025-06-02T00:00:00Z",
            "events": [
                {"time": "2025-06-01T03:00:00Z", "name": "reboot", "type": "Warning"},
                {"time": "2025-06-01T04:00:00Z", "name": "kmsg", "type": "Warning", "message": "x"},
            ],
        },
    ]  # fmt: skip
    ok, _ = _parse(answer, host="h")
    assert ok.select("kind", "fault").rows() == [
        ("start", "accelerator-nvidia-error-xid"),
        ("healthy", "accelerator-nvidia-error-xid"),
        ("healthy", None),  # a reboot names no fault: every fault of the machine
        ("info", "os"),
    ]


def test_kubernetes_node_conditions():
    ok, q = _parse(HE / "cilium__gke_node_with_npd_conditions.json")
    assert q.height == 0 and ok.height == 13
    assert set(ok["kind"]) == {"healthy"}  # every condition good: Ready True, the rest False
    ready = ok.filter(pl.col("fault") == "Ready").row(0, named=True)
    assert (ready["time"], ready["cause"], ready["sub_cause"]) == (
        datetime(2019, 3, 7, 13, 36, 12),
        "not_ready",
        "KubeletReady",
    )
    assert ok.filter(pl.col("fault") == "KernelDeadlock")["component_class"][0] == "host_os"
    node = json.loads((HE / "cilium__gke_node_with_npd_conditions.json").read_text())
    conditions = node["items"][0]["status"]["conditions"]
    flip = {"KernelDeadlock": "True", "Ready": "False", "MemoryPressure": "Unknown"}
    for c in conditions:
        c["status"] = flip.get(c["type"], c["status"])
    ok, _ = _parse(node)
    kinds = dict(ok.select("fault", "kind").rows())
    assert (kinds["KernelDeadlock"], kinds["Ready"], kinds["MemoryPressure"]) == (
        "start",
        "start",
        "info",
    )


def test_kubernetes_node_events():
    ok, q = _parse(HE / "k8s_node_events_from_kubelet_reasons.json")
    assert q.height == 0
    assert ok.select("host", "kind", "fault").rows() == [
        ("gpu-node-3", "start", "DiskPressure"),
        ("gpu-node-5", "start", "Ready"),
        ("gpu-node-5", "info", "Rebooted"),
        ("gpu-node-5", "healthy", "Ready"),
        ("gpu-node-3", "healthy", "DiskPressure"),
        ("gpu-node-9", "start", "MemoryPressure"),
    ]


def test_kubernetes_records_that_cannot_be_read():
    doc = {
        "kind": "List",
        "items": [
            {"kind": "Node", "metadata": {"name": "bare"}, "status": {}},
            {
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"conditions": [{"type": "KernelDeadlock", "status": "True"}]},
            },
            {"kind": "Pod", "metadata": {"name": "p"}},
            {"kind": "Event", "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Pulled"},
        ],
    }
    ok, q = _parse(doc, path="nodes.json")
    assert ok.height == 0
    assert q["error"].to_list() == [
        "Node bare has no conditions",
        (
            "condition KernelDeadlock of node n1 has no lastTransitionTime: when its status "
            "began is unknown"
        ),
        "kind Pod is not read as health events (Node, Event)",
    ]  # the event about a pod is not a record


def test_ticket_state_changes_by_their_field_names():
    ok, q = _parse(HE / "servicenow_incident_state_changes_from_schema.csv")
    assert q.height == 0
    assert ok.select("host", "fault", "kind").rows()[:4] == [
        ("gpu-node-014", "INC0010231", "start"),
        ("gpu-node-014", "INC0010231", "start"),  # In Progress
        ("gpu-node-014", "INC0010231", "end"),  # Resolved
        ("gpu-node-014", "INC0010231", "end"),  # Closed
    ]
    first = ok.row(0, named=True)
    assert (first["cause"], first["component_class"], first["time"]) == (
        "hardware",
        "gpu",
        datetime(2026, 2, 3, 8, 12, 40),
    )
    assert ok.filter(pl.col("fault") == "INC0010238")["component_class"][0] == "psu"


def test_dotted_paths_kind_values_and_relative_times():
    """The issue's fault trace: nested cause, its own kind words, times in days after a start."""
    fault = {"Level": "Hardware", "Class": "GPU", "Desc": "XID 79"}
    lines = [
        {"node_id": "n1", "event_time": 1.5, "event_type": "FAULT_BEGIN", "fault_type": fault},
        {"node_id": "n1", "event_time": 2.25, "event_type": "FAULT_CLEAR", "fault_type": fault},
    ]
    text = "\n".join(json.dumps(x) for x in lines) + "\n"
    column_map = {
        **TRACE_MAP,
        "host": "node_id",
        "time": "event_time",
        "kind": "event_type",
        "start": "fault_begin",
        "end": "fault_clear|fault_done",
    }
    origin = datetime(2024, 3, 10)
    ok, q = _parse(
        text, column_map=column_map, options={"time_origin": origin, "time_unit": "days"}
    )
    assert q.height == 0
    path = "Hardware / GPU / XID 79"
    assert ok.select("time", "kind", "fault", "cause", "sub_cause", "component_class").rows() == [
        (origin + timedelta(days=1.5), "start", path, "hardware", "XID 79", "gpu"),
        (origin + timedelta(days=2.25), "end", path, "hardware", "XID 79", "gpu"),
    ]
    hours, _ = _parse(
        text, column_map=column_map, options={"time_origin": origin, "time_unit": "hours"}
    )
    assert hours["time"][0] == origin + timedelta(hours=1.5)


def test_bad_records_quarantined_each_with_its_reason():
    text = "\n".join(  # noqa: FLY002 (one record a line, as the file has them)
        [
            '{"node_id":"n1","event_time":"2026-01-01T00:00:00Z","event_type":"fault_start"}',
            "{not json",
            "[1, 2]",
            '{"event_time":"2026-01-01T00:00:00Z","event_type":"fault_start"}',
            '{"node_id":"n1","event_type":"fault_start"}',
            '{"node_id":"n1","event_time":"12.5","event_type":"fault_start"}',
            '{"node_id":"n1","event_time":"someday","event_type":"fault_start"}',
            '{"node_id":"n1","event_time":"1995-01-01T00:00:00Z","event_type":"fault_start"}',
            '{"node_id":"n1","event_time":"2026-01-01T00:00:00Z","event_type":"rebooting"}',
            '{"node_id":"n1","event_time":"2026-01-01T00:00:00Z"}',
        ]
    )
    ok, q = _parse(text, not_after=datetime(2027, 1, 1))
    assert ok.height == 1
    errors = dict(zip(q["line"], q["error"], strict=True))
    assert errors[2] == "line is not valid JSON"
    assert errors[3] == "line is not a JSON object"
    assert errors[4].startswith("no host")
    assert errors[5].startswith("no time")
    assert errors[6].startswith("time '12.5' is a number, not a date")
    assert errors[7] == "unreadable time 'someday'"
    assert errors[8].startswith("time: time 1995-01-01T00:00:00 is before 2000-01-01")
    assert errors[9].startswith("event kind 'rebooting' means none of start, end, healthy, info")
    assert errors[10].startswith("no event kind")


def test_csv_row_with_the_wrong_field_count_spoils_only_itself():
    text = (
        "host,time,event\nn1,2026-01-01T00:00:00Z,down\nn1,2026-01-01T01:00:00Z\n"
        "n1,2026-01-01T02:00:00Z,up\n"
    )
    ok, q = _parse(text)
    assert ok["kind"].to_list() == ["start", "end"]
    assert q["error"].to_list() == ["expected 3 fields (as the header), found 2"]


def test_a_map_naming_no_health_event_field_is_one_clear_reason():
    ok, q = _parse(HE / "fault_trace__relative_days.jsonl", column_map={"hosts": "node_id"})
    assert ok.height == 0 and q.height == 1
    assert q["error"][0].startswith("--map names 'hosts', not a health-event field; known: system")


def test_cli_relative_time_options(tmp_path, capsys):
    home = tmp_path / "home"
    trace = HE / "fault_trace__relative_days.jsonl"
    ingest = ["--home", str(home), "ingest", str(trace)]
    assert main([*ingest, "--time-unit", "days"]) == 2
    assert "--time-unit needs --time-origin" in capsys.readouterr().err
    assert main([*ingest, "--time-origin", "2025-01-01", "--time-unit", "weeks"]) == 2
    assert "--time-unit 'weeks': use one of days, hours, minutes, s, ms" in capsys.readouterr().err
    mapped = ",".join(f"{k}={v}" for k, v in TRACE_MAP.items())
    assert (
        main([*ingest, "--time-origin", "2025-01-01", "--time-unit", "days", "--map", mapped]) == 0
    )
    assert "52 rows, 0 quarantined" in capsys.readouterr().out


def _ctx(**kw):
    from ingest.base import ParseContext

    return ParseContext(**kw)


def test_a_bad_line_among_json_lines_of_nodes_spoils_only_itself():
    """``kubectl get nodes -o json | jq -c '.items[]'``: one object a line, one line cut."""
    node = {
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "conditions": [
                {
                    "type": "KernelDeadlock",
                    "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }
    ok, q = _parse(json.dumps(node) + '\n{"kind": "Node", "metad\n')
    assert ok.select("host", "kind", "fault").rows() == [("n1", "start", "KernelDeadlock")]
    assert q.select("line", "error").rows() == [(2, "line is not valid JSON")]
