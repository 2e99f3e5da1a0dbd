"""Redfish LogEntry -> hw_events and Thermal/Power/Sensor -> bmc_sensors: pinned DMTF mockups,
vendor variations, conservation, idempotence and fuzzing."""

import json
from datetime import datetime
from functools import partial

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.formats import redfish
from ingest.formats import redfish_sensors
from ingest.registry import detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import assert_fleet_faults_found
from tests.conftest import parse_rows
from tests.conftest import stored_rows

BMC = FIXTURES / "bmc"
LOG = BMC / "redfish-mockup__Systems_437XR1138R2_LogServices_Log1_Entries.json"
LOG1 = BMC / "redfish-mockup__Systems_437XR1138R2_LogServices_Log1_Entries_1.json"
LOG2 = BMC / "redfish-mockup__Systems_437XR1138R2_LogServices_Log1_Entries_2.json"
THERMAL = BMC / "redfish-mockup__Chassis_1U_Thermal.json"
POWER = BMC / "redfish-mockup__Chassis_1U_Power.json"


_logs = partial(parse_rows, redfish.parse, "hw_events")  # (rows, quarantine)
_sensors = partial(parse_rows, redfish_sensors.parse, "bmc_sensors")  # (rows, quarantine)
# rows; no record quarantined
_stored_logs = partial(stored_rows, redfish.parse, "hw_events")
_stored_sensors = partial(stored_rows, redfish_sensors.parse, "bmc_sensors")


def test_mockup_log_collection_pinned():
    ok = _stored_logs(LOG.read_bytes())  # in memory: host from the resource's @odata.id
    assert ok.height == 2
    e = ok.row(0, named=True)
    assert e["time"] == datetime(2012, 3, 7, 14, 44) and e["host"] == "437XR1138R2"
    assert (e["component_class"], e["component_id"]) == ("cooling", "0x01")
    assert (e["event_type"], e["code"], e["severity"]) == ("sel", "0x592A28", "critical")
    assert e["action"] == "Upper Critical - going high"
    assert e["message"] == "Temperature threshold exceeded" and e["source"] == "redfish"
    assert ok["source_line"].to_list() == [1, 2] and ok["component_id"][1] == "0x02"


def test_single_entries_are_one_record_each_and_host_comes_from_the_file_name():
    a, _ = _logs(LOG1.read_bytes(), path="/c/gpu-node-004.entry1.json")
    b, _ = _logs(LOG2.read_bytes(), host="given")
    assert a.height == b.height == 1
    assert a["host"][0] == "gpu-node-004" and b["host"][0] == "given"
    assert b["time"][0] == datetime(2012, 3, 7, 14, 45)


def _entry(**kw):
    base = {"@odata.type": "#LogEntry.v1_14_0.LogEntry", "Id": "1", "EntryType": "Event",
            "Created": "2026-02-01T10:00:00+08:00", "Oem": {"Vendor": {"x": [1, 2]}}}  # fmt: skip
    return {**base, **kw}


def test_vendor_variations_times_classes_and_severity():
    page = {
        "@odata.type": "#LogEntryCollection.LogEntryCollection",
        "Members": [
            _entry(
                Severity="Warning",
                Message="Correctable memory errors on DIMM A3",
                MessageId="Memory.1.0.CorrectableErrors",
            ),
            _entry(
                Severity="Critical",
                Message="Uncorrectable error",
                Links={"OriginOfCondition": {"@odata.id": "/redfish/v1/Systems/1/Memory/DIMM7"}},
            ),
            _entry(
                EntryType="SEL",
                SensorType="Power Supply / Converter",
                SensorNumber=81,
                Severity="OK",
                EntryCode="Deassert",
                Message="PSU failure",
                Created="2026-02-01T10:00:00Z",
            ),
            _entry(
                Message="GPU 3 fell off the PCIe bus",
                MessageId="OEM.GPU",
                Created="2026-02-01T10:00:00",
            ),
            _entry(
                SensorType="Drive Slot/Bay",
                Severity="Critical",
                Created="2026-02-01T10:00:00.5-05:00",
            ),
            {"@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries/9"},
            _entry(Created="yesterday"),
            "not an object",
        ],
        "@odata.nextLink": "/redfish/v1/Systems/1/LogServices/SEL/Entries?$skip=8",
    }
    ok, q = _logs(page, tz="Europe/Berlin", path="/r/n1.LogEntries.json")
    assert ok["component_class"].to_list() == [
        "host_memory",
        "host_memory",
        "psu",
        "gpu",
        "storage",
    ]
    assert ok["severity"].to_list() == ["warning", "critical", "info", "warning", "critical"]
    assert ok["event_type"].to_list() == ["redfish", "redfish", "sel", "redfish", "redfish"]
    assert ok["time"].to_list() == [
        datetime(2026, 2, 1, 2, 0), datetime(2026, 2, 1, 2, 0), datetime(2026, 2, 1, 10, 0),
        datetime(2026, 2, 1, 9, 0),  # zone-less: read in ctx.tz (Berlin, UTC+1)
        datetime(2026, 2, 1, 15, 0, 0, 500000),
    ]  # fmt: skip
    assert ok["component_id"].to_list()[1:3] == ["DIMM7", "0x51"]
    assert ok["code"].to_list() == [
        "Memory.1.0.CorrectableErrors",
        None,
        "Deassert",
        "OEM.GPU",
        None,
    ]
    assert q["line"].to_list() == [6, 7, 8]
    assert (
        "only a link" in q["error"][0]
        and "Created" in q["error"][1]
        and "not a JSON object" in q["error"][2]
    )


def test_bad_documents_are_one_quarantine_row():
    for data, err in [
        (b"{not json", "not valid JSON"),
        (b'{"Name": "x"}', "not a Redfish LogEntry"),
    ]:
        ok, q = _logs(data)
        assert ok.height == 0 and q.height == 1 and q["error"][0].startswith(err)
    ok, q = _sensors(b'{"@odata.type": "#ThermalSubsystem.v1_0_0.ThermalSubsystem"}')
    assert q.height == 1 and "not a Redfish Thermal" in q["error"][0]


def test_thermal_and_power_mockups_pinned():
    ok = _stored_sensors(THERMAL.read_bytes(), time=datetime(2026, 1, 1))
    assert ok["sensor"].to_list() == [
        "CPU1 Temp",
        "CPU2 Temp",
        "Chassis Intake Temp",
        "BaseBoard System Fan",
        "BaseBoard System Fan Backup",
    ]
    assert ok["value"].to_list() == [41.0, None, 25.0, 2100.0, 2050.0]
    assert ok["unit"].to_list() == ["C", "C", "C", "RPM", "RPM"]
    assert ok["status"].to_list() == ["ok", "disabled", "ok", "ok", "ok"]
    assert ok["host"].unique().to_list() == ["1U"] and ok["time"].unique().to_list() == [
        datetime(2026, 1, 1)
    ]
    ok = _stored_sensors(
        POWER.read_bytes(), mtime=datetime(2026, 1, 2), path="/r/gpu-node-002.Power.json"
    )
    assert ok["host"].unique().to_list() == ["gpu-node-002"]
    assert list(zip(ok["sensor_type"], ok["value"], ok["unit"], ok["status"])) == [
        ("power", 344.0, "W", "ok"),
        ("voltage", 12.0, "V", "ok"),
        ("voltage", 5.0, "V", "ok"),
        ("power_supply", 325.0, "W", "warning"),
    ]
    assert ok["time"].unique().to_list() == [datetime(2026, 1, 2)]


def test_sensor_resources():
    one = {
        "@odata.type": "#Sensor.v1_7_0.Sensor",
        "@odata.id": "/redfish/v1/Chassis/HGX/Sensors/GPU0_Temp",
        "Id": "GPU0_Temp",
        "Name": "GPU 0 Temp",
        "Reading": 61.5,
        "ReadingUnits": "Cel",
        "ReadingType": "Temperature",
        "ReadingTime": "2026-03-01T12:00:00+01:00",
        "Status": {"State": "Enabled", "Health": "OK"},
    }
    ok, q = _sensors(one)
    assert ok.row(0, named=True) | {"cluster": None, "source_file": None} == {
        "time": datetime(2026, 3, 1, 11, 0), "cluster": None, "host": "HGX", "sensor": "GPU 0 Temp",
        "sensor_type": "temperature", "value": 61.5, "unit": "C", "status": "ok",
        "source": "redfish", "source_file": None, "source_line": 1,
    }  # fmt: skip
    coll = {"@odata.type": "#SensorCollection.SensorCollection",
            "Members": [{**one, "ReadingTime": None, "Reading": 3000, "ReadingUnits": "RPM",
                         "ReadingType": "Rotational", "Name": "Fan0"},
                        {"@odata.id": "/redfish/v1/Chassis/HGX/Sensors/x"}]}  # fmt: skip
    ok, q = _sensors(coll)  # no time anywhere: the reading is quarantined too
    assert ok.height == 0 and q["line"].to_list() == [1, 2]
    assert q["error"][0] == "no reading time: pass --time"
    assert q["error"][1].startswith("collection member is only a link")
    ok, q = _sensors(coll, time=datetime(2026, 1, 1))
    assert (ok["sensor_type"][0], ok["unit"][0], ok["value"][0]) == (
        "fan",
        "RPM",
        3000.0,
    ) and q.height == 1


def test_detection_tells_logs_from_sensors():
    assert detect(LOG.read_bytes(), LOG.name).name == "redfish"
    assert detect(LOG1.read_bytes(), LOG1.name).name == "redfish"
    assert detect(THERMAL.read_bytes(), THERMAL.name).name == "redfish-sensors"
    assert detect(POWER.read_bytes(), POWER.name).name == "redfish-sensors"


def test_runner_conservation_and_idempotence(wh):
    files = [LOG, LOG1, LOG2, THERMAL, POWER]
    first = ingest_paths(wh, files)
    assert [(r.format, r.rows_ok, r.rows_quarantined) for r in first] == [
        ("redfish", 2, 0), ("redfish", 1, 0), ("redfish", 1, 0),
        ("redfish-sensors", 5, 0), ("redfish-sensors", 4, 0),
    ]  # fmt: skip
    events = wh.read("hw_events")
    assert events.height == 4 and events["event_id"].n_unique() == 4
    again = ingest_paths(wh, files)
    assert all(r.skipped for r in again)
    assert wh.read("hw_events").sort("event_id").equals(events.sort("event_id"))
    assert wh.read("bmc_sensors").height == 9


_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 300),
    st.floats(allow_nan=False),
    st.sampled_from(
        [
            "SEL",
            "Event",
            "OK",
            "Critical",
            "Temperature",
            "Memory",
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:00+05:30",
            "x",
        ]
    ),
)
_KEYS = st.sampled_from(
    [
        "EntryType",
        "Severity",
        "Created",
        "MessageId",
        "Message",
        "SensorType",
        "SensorNumber",
        "EntryCode",
        "Links",
        "Oem",
        "Name",
        "Reading",
        "ReadingUnits",
        "ReadingCelsius",
        "Status",
        "@odata.id",
    ]
)
_OBJ = st.recursive(
    _SCALAR,
    lambda c: st.dictionaries(_KEYS, c, max_size=6) | st.lists(c, max_size=3),
    max_leaves=20,
)
_TYPES = st.sampled_from(["#LogEntryCollection.LogEntryCollection", "#LogEntry.v1_0_0.LogEntry",
                          "#Thermal.v1_0_0.Thermal", "#Power.v1_0_0.Power", "#Sensor.v1_0_0.Sensor",
                          "#SensorCollection.SensorCollection"])  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(_TYPES, st.dictionaries(st.sampled_from(["Members", "Temperatures", "Fans", "Voltages",
                                                "PowerSupplies", "PowerControl"]),
                               st.lists(_OBJ, max_size=4), max_size=3), _OBJ)  # fmt: skip
def test_fuzz_never_raises_and_conserves(otype, arrays, extra):
    doc = {"@odata.type": otype, **arrays, "Extra": extra}
    ok, _ = _logs(doc)
    assert ok.height == 0 or ok["time"].null_count() == 0
    ok, _ = _sensors(doc, time=datetime(2026, 1, 1))
    assert ok.height == 0 or ok["time"].null_count() == 0
    _logs(json.dumps(extra).encode())


def test_fleet_every_redfish_fault_is_in_hw_events():
    assert_fleet_faults_found("redfish", "*.LogEntries.json", _logs, "Assert")


def _log_entry(i, created, msg="Power supply 1 failed"):
    return {"@odata.type": "#LogEntry.v1_14_0.LogEntry", "Id": str(i), "EntryType": "Event",
            "Severity": "Critical", "Created": created, "Message": msg}  # fmt: skip


def test_log_duplicate_entry_stored_once_and_implausible_created_quarantined(wh, tmp_path):
    page = {
        "@odata.type": "#LogEntryCollection.LogEntryCollection",
        "Members": [
            _log_entry(1, "2024-05-01T10:00:00Z"),
            _log_entry(2, "2024-05-01T10:05:00+02:00"),
            _log_entry(1, "2024-05-01T10:00:00Z"),  # the same entry again (overlapping pages)
            _log_entry(3, "1970-01-01T00:00:00Z"),
            _log_entry(4, None),
        ],
    }
    p = tmp_path / "n1.json"
    p.write_text(json.dumps(page))
    (rep,) = ingest_paths(wh, [p], fmt="redfish")
    # the repeated entry is neither a row nor a rejected record: it is counted as a duplicate
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (5, 2, 2, 1)
    assert wh.read("hw_events").sort("source_line").select("source_line", "time").rows() == [
        (1, datetime(2024, 5, 1, 10, 0)),
        (2, datetime(2024, 5, 1, 8, 5)),
    ]
    q = wh.read("quarantine").sort("line")
    assert q["line"].to_list() == [4, 5]
    assert q["error"][0].startswith("time 1970-01-01T00:00:00 is before 2000-01-01")
    assert q["error"][1] == "entry has no Created time"


def test_sensor_non_finite_implausible_and_misshaped_array_quarantined():
    doc = (
        b'{"@odata.type": "#Thermal.v1_7_0.Thermal", "Fans": {"Name": "not an array"},'
        b' "Temperatures": [{"Name": "Inlet", "ReadingCelsius": 24},'
        b' {"Name": "CPU1", "ReadingCelsius": NaN}, {"Name": "CPU2", "ReadingCelsius": Infinity}]}'
    )
    ok, q = _sensors(doc, time=datetime(2024, 5, 1), host="n1")
    assert ok.select("sensor", "value").rows() == [("Inlet", 24.0)]
    assert q["error"].to_list() == [
        "non-finite reading: NaN",
        "non-finite reading: inf",
        "Fans is not a JSON array",
    ]
    ok, q = _sensors(doc, time=datetime(2099, 1, 1), host="n1")
    assert ok.height == 0 and "clock in the future" in q["error"][0]


def test_openbmc_postcode_page_and_unset_bmc_clock_entries():
    ok = _stored_logs(
        (BMC / "openbmc-docs__redfish-postcodes_Entries.json").read_bytes(), host="obmc"
    )
    row = ok.row(0, named=True)
    assert (row["time"], row["code"], row["severity"], row["message"]) == (
        datetime(2019, 12, 6, 14, 10, 30), "OpenBMC.0.1.BiosPostCode", "info",
        "Boot Count: 4: TS Offset: 0.0033; POST Code: 0x43",
    )  # fmt: skip
    # Intel's PSU manager README: an OpenBMC whose clock was never set dates events 1970-01-03
    ok, q = _logs(
        (BMC / "intel-bmc-psu-manager__EventLog_entries_clock_1970.json").read_bytes(), host="obmc"
    )
    assert ok.height == 0 and q["line"].to_list() == [1, 2, 3]
    assert (
        q["error"][0]
        == "time 1970-01-03T09:06:50 is before 2000-01-01T00:00:00 (implausible clock)"
    )


def test_sensor_without_reading_type_and_sushy_power():
    ok, q = _sensors(
        (BMC / "redfish-mockup__Chassis_1U_Sensors_CPU1Temp.json").read_bytes(),
        time=datetime(2024, 5, 1),
    )
    assert q.height == 0
    assert ok.select("host", "sensor", "sensor_type", "value", "unit", "status").rows() == [
        ("1U", "CPU #1 Temperature", "temperature", 37.0, "C", "ok")
    ]
    ok, q = _sensors(
        (BMC / "sushy__json_samples_power.json").read_bytes(), time=datetime(2024, 5, 1)
    )
    assert q.height == 0
    assert ok.select("host", "sensor", "sensor_type", "value", "unit").rows() == [
        ("MultiBladeEncl", "Power Supply 0", "power_supply", 650.0, "W"),
        ("MultiBladeEncl", "Power Supply 1", "power_supply", 635.0, "W"),
    ]
