"""ipmitool sel list/elist -> hw_events and ipmitool sdr -> bmc_sensors: pinned real samples,
the quirks real BMCs produce, conservation, idempotence and fuzzing."""

from datetime import datetime
from functools import partial

import polars as pl
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.formats import ipmi_sdr
from ingest.formats import ipmi_sel
from ingest.registry import detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import assert_fleet_faults_found
from tests.conftest import parse_rows

BMC = FIXTURES / "bmc"
SEL_FILE = BMC / "ipmitool_sel_list_examples_from_docs.txt"
SDR_FILE = BMC / "telegraf_ipmi_sensor_test__sdr_v1.txt"


_sel = partial(parse_rows, ipmi_sel.parse, "hw_events")  # (rows, quarantine)
_sdr = partial(parse_rows, ipmi_sdr.parse, "bmc_sensors")  # (rows, quarantine)


def _by_line(ok: pl.DataFrame, line: int) -> dict:
    return ok.filter(pl.col("source_line") == line).row(0, named=True)


def test_sel_doc_samples_pinned():
    ok, q = _sel(SEL_FILE.read_bytes(), path=str(SEL_FILE))
    # 16 entry lines; '###' headings are comments, the Pre-Init row is quarantined
    assert ok.height == 15
    assert q["line"].to_list() == [16] and q["error"][0] == "Pre-Init timestamp, no real date"
    assert set(ok["host"]) == {"ipmitool_sel_list_examples_from_docs"}
    assert ok["event_type"].unique().to_list() == ["sel"] and ok["source"].unique().to_list() == [
        "ipmi"
    ]
    first = _by_line(ok, 2)
    assert first["time"] == datetime(2018, 10, 4, 7, 8, 54)
    assert first["component_class"] == "cooling" and first["component_id"] == "0x03"
    assert first["code"] == "Lower Critical going low" and first["severity"] == "critical"
    assert first["action"] == "Asserted"
    # (B): two-digit years, DD/MM/YY (23:13 -> 00:01 is one night, not a month), HKT = UTC+8
    hkt = _by_line(ok, 12)
    assert hkt["time"] == datetime(2026, 6, 9, 15, 13, 59) and hkt["component_id"] == "0xc3"
    assert hkt["severity"] == "critical"
    assert _by_line(ok, 13)["time"] == datetime(2026, 6, 9, 16, 1, 2)
    assert _by_line(ok, 8)["severity"] == "warning"  # Upper Non-critical
    assert _by_line(ok, 10)["severity"] == "info" and _by_line(ok, 10)["action"] == "Deasserted"
    # (C) Supermicro: fan and log-cleared rows
    fan = _by_line(ok, 17)
    assert fan["component_class"] == "cooling" and fan["time"] == datetime(2026, 3, 14, 10, 4, 19)
    cleared = _by_line(ok, 18)
    assert cleared["component_class"] == "bmc" and cleared["severity"] == "info"
    # (D) elist with a sensor name and the 7th reading column
    named = _by_line(ok, 20)
    assert named["component_id"] == "Inlet Temp1" and named["component_class"] == "cooling"
    assert named["message"].endswith("; Reading 40 > Threshold 40 degrees C")
    assert ok["event_id"].n_unique() == 15 and ok["event_id"].str.len_chars().min() == 16


SEL_CLASSES = """\
   1 | 03/14/2026 | 09:00:01 | Power Supply #0x51 | Failure detected | Asserted
   2 | 03/14/2026 | 09:00:02 | Memory #0x87 | Uncorrectable ECC | Asserted
   3 | 03/14/2026 | 09:00:03 | Processor #0x04 | IERR | Asserted
   4 | 03/14/2026 | 09:00:04 | Drive Slot / Bay #0xa0 | Drive Fault | Asserted
   5 | 03/14/2026 | 09:00:05 | Critical Interrupt #0x13 | PCI SERR | Asserted
   6 | 03/14/2026 | 09:00:06 | Critical Interrupt PCIe GPU3 | Bus Fatal Error | Asserted
   7 | 03/14/2026 | 09:00:07 | Power Unit #0x01 | Power off/down | Asserted
   8 | 03/14/2026 | 09:00:08 | Power Unit #0x01 | AC lost | Asserted
   9 | 03/14/2026 | 09:00:09 | OS Critical Stop #0x20 | Run-time critical stop | Asserted
   a | 03/14/2026 | 09:00:10 | Memory #0x87 | Correctable ECC | Asserted
   b | 03/14/2026 | 09:00:11 | System Firmware Progress #0x0f | Unspecified | Asserted
   c | 03/14/2026 | 09:00:12 | Fan #0x30 | Lower Critical going low | Deasserted
   d | 03/14/2026 | 09:00:13 | OEM record e0 | 000000 | 0102030405
SEL has no more entries
"""


def test_sel_sensor_types_to_classes_and_severity():
    ok, q = _sel(SEL_CLASSES, path="/var/log/bmc/gpu-node-007.sel.txt")
    assert q.height == 0 and ok.height == 13  # the trailer is not a record
    assert ok["host"].unique().to_list() == ["gpu-node-007"]
    got = list(zip(ok["component_class"], ok["severity"]))
    assert got == [
        ("psu", "critical"), ("host_memory", "critical"), ("cpu", "critical"),
        ("storage", "critical"), ("unknown", "critical"), ("gpu", "critical"),
        ("host_os", "info"), ("psu", "warning"), ("host_os", "critical"),
        ("host_memory", "warning"), ("host_os", "warning"), ("cooling", "info"),
        ("unknown", "warning"),
    ]  # fmt: skip
    assert ok["code"][1] == "Uncorrectable ECC" and ok["component_id"][5] == "PCIe GPU3"
    oem = ok.row(12, named=True)
    assert oem["action"] is None and oem["message"] == "OEM record e0: 000000; 0102030405"


def test_sel_dates_zones_and_hosts():
    text = (
        "1 | 01/02/26 | 10:00:00 PM | Fan #0x30 | Lower Critical going low | Asserted\n"
        "2 | 13/02/26 | 10:00:00 XYZ | Fan #0x30 | Lower Critical going low | Asserted\n"
        "3 | 14/02/26 | 10:00:00 +05:30 | Fan #0x30 | Lower Critical going low | Asserted\n"
        "4 | 02/01/2026 | 10:00:00 CST | Fan #0x30 | Lower Critical going low | Asserted\n"
    )
    ok, q = _sel(text, tz="Europe/Berlin", host="n1")
    assert q.height == 0 and ok["host"].unique().to_list() == ["n1"]
    assert ok["time"].to_list() == [
        datetime(
            2026, 2, 1, 21, 0
        ),  # day 13 later in the file makes the 2-digit dates D/M; 10 PM Berlin
        datetime(2026, 2, 13, 9, 0),  # unknown zone: read in ctx.tz
        datetime(2026, 2, 14, 4, 30),  # numeric offset
        datetime(2026, 2, 1, 9, 0),  # 4-digit year is always M/D; CST is ambiguous -> ctx.tz
    ]
    forced, _ = _sel(
        "1 | 01/02/26 | 10:00:00 | Fan #0x30 | x | Asserted\n", options={"date_order": "mdy"}
    )
    assert forced["time"][0] == datetime(2026, 1, 2, 10, 0)


def test_sel_quarantines_what_it_cannot_place():
    text = (
        "# collected 2026-01-01\n\n"
        "   2 | Pre-Init  |0000005616| Power Unit #0x51 | Power off/down | Asserted\n"
        "   3 | 02/30/2026 | 10:00:00 | Fan #0x30 | Lower Critical going low | Asserted\n"
        "Get SEL Info command failed\n"
        "   4 | 02/03/2026 | 10:00:00 | Fan #0x30\n"
    )
    ok, q = _sel(text)
    assert ok.height == 0
    assert q["line"].to_list() == [3, 4, 5, 6]
    assert q["error"][0] == "Pre-Init timestamp, no real date"
    assert q["error"][1].startswith("unreadable SEL date/time '02/30/2026 10:00:00'")
    assert q["error"][2].startswith("not an ipmitool sel line") and q["error"][3].startswith(
        "not an"
    )


def test_sdr_telegraf_sample_pinned():
    ok, q = _sdr(
        SDR_FILE.read_bytes(), path="/x/gpu-node-001.sdr.txt", time=datetime(2026, 1, 2, 3, 4, 5)
    )
    assert q.height == 0 and ok.height == 17
    assert ok["host"].unique().to_list() == ["gpu-node-001"]
    assert ok["time"].unique().to_list() == [datetime(2026, 1, 2, 3, 4, 5)]
    rows = {r["sensor"]: r for r in ok.iter_rows(named=True)}
    assert (rows["Ambient Temp"]["value"], rows["Ambient Temp"]["unit"]) == (20.0, "C")
    assert (
        rows["Ambient Temp"]["sensor_type"] == "temperature"
        and rows["Ambient Temp"]["status"] == "ok"
    )
    assert (rows["Planar 5V"]["value"], rows["Planar 5V"]["unit"]) == (4.9, "V")
    assert (rows["Fan 1A Tach"]["value"], rows["Fan 1A Tach"]["sensor_type"]) == (2610.0, "fan")
    assert (rows["Avg Power"]["value"], rows["Avg Power"]["unit"]) == (210.0, "W")
    assert (rows["Power Supply 1"]["value"], rows["Power Supply 1"]["unit"]) == (0.0, "mask")
    nr = rows["DASD Backplane 3"]
    assert nr["value"] is None and nr["unit"] is None and nr["status"] == "ns: Not Readable"


def test_sdr_elist_and_sensor_layouts():
    text = (
        "Power Supply 1   | 06h | ok  | 10.1 | 0 Watts, Presence detected, Failure detected\n"
        "Fan Block 1      | 09h | ok  |  7.1 | 21.56 percent, Transition to Running\n"
        "CPU Temp Interf  | 76h | ns  |  7.1 | Disabled\n"
        "Inlet Temp       | 04h | ok  |  7.1 | no reading\n"
        "CPU1 Temp        | 27.000     | degrees C  | ok    | na | na | na | 85.000 | 90.000 | na\n"
        "Fan 9            | na         | RPM        | na    | na | na | na | na | na | na\n"
        "just text\n"
    )
    ok, q = _sdr(text, mtime=datetime(2026, 1, 1))
    assert q["line"].to_list() == [7]
    assert ok["value"].to_list() == [0.0, 21.56, None, None, 27.0, None]
    assert ok["unit"].to_list() == ["W", "%", None, None, "C", None]
    assert ok["status"].to_list() == [
        "ok: Presence detected, Failure detected", "ok: Transition to Running", "ns: Disabled",
        "ok: no reading", "ok", "na",
    ]  # fmt: skip
    assert ok["time"].unique().to_list() == [datetime(2026, 1, 1)]


def test_sdr_without_any_time_is_quarantined():
    ok, q = _sdr("Ambient Temp | 20 degrees C | ok\n")
    assert ok.height == 0 and q["error"][0].startswith("no reading time")


def test_detection_tells_sel_from_sdr():
    assert detect(SEL_FILE.read_bytes(), SEL_FILE.name).name == "ipmi-sel"
    assert detect(SDR_FILE.read_bytes(), SDR_FILE.name).name == "ipmi-sdr"
    elist = b"Fan Block 1      | 09h | ok  |  7.1 | 21.56 percent\n"
    assert detect(elist, "x.txt").name == "ipmi-sdr"


def test_runner_conservation_and_idempotence(wh, tmp_path):
    sel = tmp_path / "gpu-node-009.sel.txt"
    sel.write_text(
        SEL_CLASSES + "   9 | Pre-Init  |0000005616| Power Unit #0x51 | Power off/down | Asserted\n"
    )
    first = ingest_paths(wh, [sel, SDR_FILE])
    assert [r.format for r in first] == ["ipmi-sel", "ipmi-sdr"]
    assert (first[0].records, first[0].rows_ok, first[0].rows_quarantined) == (14, 13, 1)
    events = wh.read("hw_events")
    assert events.height == 13 and set(events["host"]) == {"gpu-node-009"}
    assert wh.read("bmc_sensors").height == 17
    again = ingest_paths(wh, [sel, SDR_FILE])
    assert all(r.skipped for r in again)
    assert wh.read("hw_events").sort("event_id").equals(events.sort("event_id"))
    # parsing the same bytes again yields the same event ids
    ok1, _ = _sel(sel.read_bytes(), path=str(sel))
    ok2, _ = _sel(sel.read_bytes(), path=str(sel))
    assert ok1["event_id"].to_list() == ok2["event_id"].to_list()


_FIELD = st.sampled_from(
    ["1", "1f3", "Pre-Init", "03/14/2026", "14/03/26", "99/99/99", "10:00:00", "10:00:00 HKT",
     "25:61:00", "0000005616", "Temperature #0x01", "Power Unit #0x51", "Fan", "", "Asserted",
     "Deasserted", "Upper Critical going high", "Reading 40 > Threshold 40 degrees C", "0x00",
     "20 degrees C", "ok", "ns", "no reading", "06h", "7.1", "é|", "\t"]
)  # fmt: skip
_LINE = st.one_of(
    st.lists(_FIELD, min_size=0, max_size=8).map(" | ".join),
    st.text(max_size=40),
    st.just("SEL has no more entries"),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_LINE, max_size=12), st.sampled_from(["UTC", "Asia/Hong_Kong", "America/Chicago"]))
def test_fuzz_sel_and_sdr_conserve_and_never_raise(lines, tz):
    data = "\n".join(lines).encode()
    ok, q = _sel(data, tz=tz, time=datetime(2026, 1, 1))
    assert ok.height == 0 or ok["time"].null_count() == 0
    known = ("not an ipmitool sel line", "Pre-Init timestamp", "unreadable SEL date/time")
    assert all(e.startswith(known) for e in q["error"])
    ok, _ = _sdr(data, tz=tz, time=datetime(2026, 1, 1))
    assert ok.height == 0 or ok["sensor"].null_count() == 0


def test_fleet_every_ipmi_fault_is_in_hw_events():
    assert_fleet_faults_found("ipmi", "*.sel.txt", _sel, "Asserted")


def test_sel_duplicate_entry_stored_once_and_unset_clock_quarantined(wh, tmp_path):
    line = "  1a | 05/01/2024 | 10:00:00 | Power Supply #0x51 | Failure detected | Asserted"
    text = (
        f"{line}\n"
        "  1b | 05/01/2024 | 10:05:00 | Power Supply #0x51 | Failure detected | Deasserted\n"
        f"{line}\n"  # a second dump of the same SEL appended
        "  1c | 01/01/1970 | 00:00:07 | Temperature #0x30 | Upper Critical going high | Asserted\n"
    )  # the last line ends with its newline: without one it would be held back as incomplete
    p = tmp_path / "n1.sel.txt"
    p.write_text(text)
    (rep,) = ingest_paths(wh, [p], fmt="ipmi-sel")
    # the repeat is neither a row nor a rejected record: it is counted as a duplicate
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (4, 2, 1, 1)
    assert wh.read("hw_events").sort("source_line").select("source_line", "time").rows() == [
        (1, datetime(2024, 5, 1, 10, 0)),
        (2, datetime(2024, 5, 1, 10, 5)),
    ]
    q = wh.read("quarantine")
    assert q["line"].to_list() == [4]
    assert q["error"][0].startswith("time 1970-01-01T00:00:07 is before 2000-01-01")


def test_sdr_implausible_time_and_non_finite_reading_quarantined():
    text = "Planar 12V | 12.04 Volts | ok\nPlanar 5V | 1e999 Volts | ok\n"
    ok, q = _sdr(text, time=datetime(2024, 5, 1), host="n1")
    assert ok.select("sensor", "value").rows() == [("Planar 12V", 12.04)]
    assert q.select("line", "error").rows() == [(2, "non-finite reading: 1e999 Volts")]
    ok, q = _sdr(text, mtime=datetime(1970, 1, 1, 0, 0, 5), host="n1")  # a restored file's mtime
    assert ok.height == 0 and q.height == 2
    assert q["error"][0].startswith("time 1970-01-01T00:00:05 is before 2000-01-01")


def test_hp_proliant_sdr_elist_full_capture():
    ok, q = _sdr(
        (BMC / "collegeboreal__hp-dl360-g7_sdr_elist_full.txt").read_bytes(),
        time=datetime(2021, 11, 24),
        host="dl360",
    )
    assert q.height == 0 and ok.height == 43
    got = {r["sensor"]: (r["value"], r["unit"], r["status"]) for r in ok.iter_rows(named=True)}
    assert got["Power Supply 1"] == (0.0, "W", "ok: Presence detected, Failure detected")
    assert got["Temp 28"] == (73.0, "C", "ok") and got["Temp 17"] == (30.0, "C", "ok")
    assert got["Temp 4"] == (None, None, "ns: Disabled")
    assert got["UID Light"] == (None, None, "ok")  # sdr elist line with an empty reading column
    assert got["Fan Block 1"] == (21.56, "%", "ok: Transition to Running")
    assert got["Power Meter"] == (100.0, "W", "ok: Device Enabled")


def test_real_sel_list_captures_and_empty_sel():
    ok, q = _sel((BMC / "collegeboreal__hp-dl360-g7_sel_list.txt").read_bytes(), host="dl360")
    assert q.height == 0
    assert ok.select("time", "component_class", "component_id", "code").rows() == [
        (
            datetime(2021, 6, 29, 8, 18, 6),
            "host_memory",
            "0x2b",
            "Correctable ECC logging limit reached",
        ),
        (
            datetime(2021, 11, 3, 15, 1, 48),
            "host_memory",
            "0x2b",
            "Correctable ECC logging limit reached",
        ),
    ]
    ok, q = _sel((BMC / "gengwg-cheatsheets__sel_list.txt").read_bytes(), host="n1")
    assert q.height == 0
    assert ok.select("time", "component_class", "code", "severity").rows() == [
        (datetime(2019, 12, 17, 2, 57, 25), "bmc", "Log area reset/cleared", "info"),
        (datetime(2020, 2, 6, 18, 30, 50), "psu", "Power Supply AC lost", "warning"),
    ]
    # what the same HP host printed after `sel clear`: an empty log is no record and no error
    ok, q = _sel("SEL has no entries\n", host="dl360")
    assert ok.height == 0 and q.height == 0


def test_dell_idrac_sdr_type_two_sensors_share_a_name_both_kept():
    """Two CPU sensors both named 'Temp' (ids 0Eh/0Fh): an SDR line is not deduplicated."""
    data = (BMC / "white-raven-poweredge-shutup__idrac_sdr_type_temperature.txt").read_bytes()
    ok, q = _sdr(data, time=datetime(2022, 1, 1), host="r720")
    assert q.height == 0
    assert ok.select("sensor", "value", "unit", "sensor_type").rows() == [
        ("Inlet Temp", 19.0, "C", "temperature"),
        ("Exhaust Temp", 36.0, "C", "temperature"),
        ("Temp", 41.0, "C", "temperature"),
        ("Temp", 40.0, "C", "temperature"),
    ]
