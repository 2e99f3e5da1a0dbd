"""Kernel-log ingest: real samples pinned, every prefix style, collapse / merge / linking,
conservation, idempotence, fuzz, and the synthetic fleet's ground truth."""

import json
from dataclasses import replace
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.kernel import FORMAT
from ingest.formats.kernel import parse
from ingest.formats.kernel.events import host_from_filename
from ingest.registry import detect
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import SAMPLE_FLEET
from warehouse.store import Warehouse

KDIR = FIXTURES / "kernel"
REAL = KDIR / "real_xid_kernel_lines_from_issues.log"
T0 = datetime(2024, 8, 30, 12, 0, 0)
NO_BOOT = (
    "uptime stamp and no boot time (no 'setting system clock' line before it in this "
    "boot); pass the boot time as --time"
)


def run(text: str, **kw) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    res = parse(text.encode(), ParseContext(**kw))
    ev = res.tables.get("hw_events", pl.DataFrame())
    assert res.records == ev.height + res.quarantine.height + res.duplicates
    return ev, res.quarantine, res.records


def test_real_lines_with_a_reference_time():
    ev, q, n = run(REAL.read_text(), path=str(REAL), time=T0)
    assert q.height == 0 and n == 13
    got = ev.select("source_line", "code", "component_class", "severity", "count").rows()
    assert got == [
        (3, "13", "software", "critical", 1),  # three lines of one event
        (6, "109", "gpu", "fatal", 1),
        (8, "149", "nvlink", "fatal", 1),  # 'NETIR Fatal'
        (9, "149", "nvlink", "fatal", 1),
        (10, "145", "nvlink", "warning", 1),  # 'Nonfatal'
        (11, "94", "gpu_memory", "critical", 1),
        (13, "45", "software", "warning", 1),
        (14, "45", "software", "warning", 1),
        (15, "45", "software", "warning", 1),
        (16, "45", "software", "warning", 1),
        (18, "32", "software", "critical", 2),  # identical repeat merged
        (20, "31", "software", "critical", 1),
        (22, "79", "gpu", "fatal", 1),
    ]
    by_line = {r["source_line"]: r for r in ev.iter_rows(named=True)}
    assert by_line[3]["time"] == datetime(2024, 8, 30, 11, 43, 9)
    assert (
        "Multiple Warp Errors" in by_line[3]["message"] and "ESR 0x57c730" in by_line[3]["message"]
    )
    assert by_line[3]["pid"] is None and by_line[3]["process"] is None  # pid='<unknown>'
    assert (by_line[6]["pid"], by_line[6]["process"]) == (1797828, "pt_main_thread")
    assert by_line[22]["pid"] is None and by_line[22]["message"] == "GPU has fallen off the bus"
    assert by_line[8]["pci_bus"] == "0019:01:00.0"  # non-zero PCI domain
    assert by_line[18]["pci_bus"] == "0000:01:00.0" and by_line[18]["pid"] is None  # old driver
    # uptime stamp + boot time (ctx.time) -> absolute time
    assert by_line[18]["time"] == datetime(2024, 8, 30, 18, 42, 8, 828315)
    # 45 'caused by previous Xid 149' -> the 149 on the host; 145 -> the 145
    assert by_line[13]["caused_by"] == by_line[9]["event_id"]
    assert by_line[14]["caused_by"] == by_line[10]["event_id"]
    assert ev.filter(pl.col("code") != "45")["caused_by"].null_count() == 12 - 4 + 4 - 3
    assert ev["host"].null_count() == ev.height  # no host in the file or its name
    assert ev["event_id"].n_unique() == ev.height
    assert by_line[6]["action"] == "RESET_GPU"


def test_real_lines_without_time_are_quarantined_with_reasons():
    ev, q, n = run(REAL.read_text(), path=str(REAL))
    assert ev["source_line"].to_list() == [3, 6]  # only the dmesg --ctime lines carry a date
    assert n == 14 and q.height == 12
    errors = dict(zip(q["line"].to_list(), q["error"].to_list()))
    assert errors[18] == NO_BOOT
    assert errors[22] == "kernel line without a timestamp; pass --time"


def test_kmsg_sample_has_no_fault_records_and_kmsg_xid_uses_boot_time():
    ev, q, n = run((KDIR / "gpud__pkg_kmsg_testdata_kmsg.1.log").read_text())
    assert n == 0 and q.height == 0
    line = "3,4011,57631398464,-;NVRM: Xid (PCI:0000:9b:00): 48, pid=77, name=python3, DBE\n"
    ev, q, n = run(line, options={"boot_time": "2025-01-01T02:00:00+02:00"})
    assert ev.row(0, named=True)["time"] == datetime(2025, 1, 1, 16, 0, 31, 398464)
    assert ev["component_class"].to_list() == ["gpu_memory"] and ev["severity"][0] == "fatal"
    _, q, _ = run(line)
    assert q["error"].to_list() == [NO_BOOT]


def test_catalog_csv_is_not_taken_for_a_kernel_log():
    head = (KDIR / "nvidia_xid_catalog.csv").read_bytes()
    assert FORMAT.detect(head, "nvidia_xid_catalog.csv") == 0
    spec = detect(head, "nvidia_xid_catalog.csv")
    assert spec is None or spec.name != "kernel"
    assert FORMAT.detect(REAL.read_bytes(), REAL.name) == 90
    assert (
        FORMAT.detect((KDIR / "gpud__pkg_kmsg_testdata_kmsg.1.log").read_bytes(), "kmsg.1.log")
        == 60
    )


def test_prefix_styles_hosts_and_zones():
    text = (
        "Dec 31 23:59:59 node-a kernel: [  12.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, "
        "off bus\n"
        "2025-05-01T09:58:12+0200 node-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, off bus\n"
        "2025-05-01T09:58:12.250000+00:00 node-b kernel: NVRM: Xid (PCI:0000:5d:00): 63, retire\n"
        "[Fri Aug 30 11:43:09 2024] NVRM: Xid (0000:3b:00): 999, a new code\n"
    )
    ev, q, _ = run(
        text, path="/logs/gpu-node-007.log", time=datetime(2025, 1, 5), tz="America/Chicago"
    )
    assert q.height == 0
    rows = ev.select("host", "time", "code", "component_class").rows()
    assert rows == [
        ("node-a", datetime(2025, 1, 1, 5, 59, 59), "79", "gpu"),  # syslog: previous year, CST
        ("node-b", datetime(2025, 5, 1, 7, 58, 12), "79", "gpu"),  # explicit +0200
        ("node-b", datetime(2025, 5, 1, 9, 58, 12, 250000), "63", "gpu_memory"),
        ("gpu-node-007", datetime(2024, 8, 30, 16, 43, 9), "999", "unknown"),  # file name; CDT
    ]
    assert ev.filter(pl.col("code") == "999")["severity"].to_list() == ["warning"]
    ev, _, _ = run(text, path="/logs/gpu-node-007.log", host="given", time=datetime(2025, 1, 5))
    assert ev["host"].to_list() == ["node-a", "node-b", "node-b", "given"]
    _, q, _ = run("Nov 20 10:00:00 h kernel: NVRM: Xid (PCI:0000:01:00): 79, x\n")
    assert q["error"].to_list() == [
        "syslog timestamp has no year and no reference time; pass --time"
    ]


def test_host_from_filename():
    assert host_from_filename("/x/gpu-node-001.log") == "gpu-node-001"
    assert host_from_filename("gpu-node-001.log.1.gz") == "gpu-node-001"
    assert host_from_filename("/var/log/kern.log") is None
    assert host_from_filename("real_xid_kernel_lines_from_issues.log") is None


def test_sxid_forms_and_multiline_collapse():
    text = (
        "[Fri Aug 30 11:00:00 2024] nvidia-nvswitch2: SXID=24007, Fatal, Link 42 crumbstore ECC "
        "DBE Error\n"
        "[Fri Aug 30 11:00:00 2024] nvidia-nvswitch2: SXID=24007, Severity 1 Engine instance 42 "
        "Sub-engine instance 00\n"
        "[Fri Aug 30 11:00:00 2024] nvidia-nvswitch2: SXID=24007, Data {0x00000000, 0x00000004}\n"
        "[Fri Aug 30 11:05:00 2024] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, "
        "Link 32 egress\n"
        "[Fri Aug 30 11:06:30 2024] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028 garbage\n"
        "[Fri Aug 30 11:07:00 2024] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): oops\n"
    )
    ev, q, n = run(text)
    assert n == 4 and q.height == 1 and q["line"].to_list() == [6]
    rows = ev.select(
        "component_class", "component_id", "code", "severity", "event_type", "pci_bus"
    ).rows()
    assert rows == [
        ("nvswitch", "nvidia-nvswitch2", "24007", "fatal", "sxid", None),
        ("nvswitch", "nvidia-nvswitch3", "12028", "warning", "sxid", "0000:05:00.0"),
        ("nvswitch", "nvidia-nvswitch3", "12028", "critical", "sxid", "0000:05:00.0"),
    ]
    assert "Engine instance 42" in ev["message"][0] and ev["count"].to_list() == [1, 1, 1]


def test_host_faults_nic_cpu_memory_storage():
    p = "2025-05-01T10:00:00+0000 h1 kernel: "
    text = (
        p
        + "mlx5_core 0000:3b:00.0 ib2: Link down\n"
        + p
        + "mlx5_core 0000:5c:00.0: mlx5_port_module_event:1151:(pid 0): Port module "
        "event[error]: module 3, Cable error\n"
        + p
        + "mlx5_core 0000:3b:00.0 ib2: Link up\n"
        + p
        + "mce: [Hardware Error]: CPU 56: Machine Check Exception: 5 Bank 4: be00000000800400\n"
        + p
        + "mce: [Hardware Error]: Run the above through 'mcelog --ascii'\n"
        + p
        + "EDAC MC1: 1 UE memory read error on CPU_SrcID#1_MC#0_Chan#3_DIMM#0 (channel:3 slot:0)\n"
        + p
        + "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#2_DIMM#0 (channel:2) not a "
        "record\n"
        + p
        + "nvme nvme3: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff\n"
        + p
        + "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready\n"
    )
    ev, q, n = run(text)
    assert q.height == 0 and n == 5  # corrected errors, link up and other chatter are not records
    rows = ev.select("component_class", "event_type", "code", "severity", "component_id").rows()
    assert rows == [
        ("ib_link", "link_down", "mlx5_link_down", "critical", "ib2"),
        ("ib_link", "link_down", "mlx5_port_module_error", "critical", "0000:5c:00.0"),
        ("cpu", "mce", "mce", "fatal", "CPU 56"),
        ("host_memory", "edac", "edac_ue", "fatal", "CPU_SrcID#1_MC#0_Chan#3_DIMM#0"),
        ("storage", "nvme", "nvme_controller_down", "fatal", "nvme3"),
    ]
    assert ev["pci_bus"][0] == "0000:3b:00.0" and (ev["host"] == "h1").all()


def test_merge_window_is_configurable():
    lines = "".join(
        f"2025-05-01T10:{m:02d}:{s:02d}+0000 h kernel: NVRM: Xid (PCI:0000:18:00): 48, pid=5, "
        "name=p, DBE\n"
        for m, s in [(0, 0), (0, 30), (0, 59), (3, 0)]
    )
    ev, _, n = run(lines)
    assert n == 2 and ev["count"].to_list() == [3, 1]
    ev, _, n = run(lines, options={"xid_merge_window_s": 10})
    assert n == 4 and ev["count"].to_list() == [1, 1, 1, 1]


def test_uuid_from_the_driver_identity_line_and_gpu_from_telemetry():
    p = "[Fri Aug 30 11:00:00 2024] "
    text = (
        p
        + "NVRM: GPU at PCI:0000:18:00: GPU-0a1b2c3d-0000-1111-2222-333344445555\n"
        + p
        + "NVRM: GPU Board Serial Number: 1654623000123\n"
        + p
        + "NVRM: Xid (PCI:0000:18:00): 79, pid=9, name=p, GPU has fallen off the bus.\n"
        + p
        + "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.\n"
        + p
        + "NVRM: Xid (PCI:0000:2a:00): 45, pid=9, name=p, Ch 00000008 caused by previous Xid 79\n"
    )
    ev, _, n = run(text, host="gpu-node-002")
    assert n == 2
    assert ev["uuid"].to_list() == ["GPU-0a1b2c3d-0000-1111-2222-333344445555", None]
    assert ev["caused_by"].to_list() == [None, ev["event_id"][0]]


def test_gpu_index_from_telemetry_bus_labels_uuid_and_learned_layout():
    """fill_gpu_index: (host, uuid) and (host, bus) from telemetry, then the bus layout learned
    from events that carry an index; an ambiguous bus stays unknown."""
    from analysis.gpu_identity import fill_gpu_index
    from warehouse.schemas import conform

    hourly = pl.DataFrame(
        {
            "host": ["a", "a", "a", "b", "b"],
            "gpu": [0, 1, 2, 5, 6],
            "uuid": ["GPU-0", None, None, None, None],
            "pci_bus": [None, "0000:2a:00.0", "0000:3a:00.0", "0000:9a:00.0", "0000:9a:00.0"],
        }
    )
    events = conform(
        "hw_events",
        pl.DataFrame(
            {
                "host": ["a", "a", "c", "c", "b", "a"],
                "uuid": ["GPU-0", None, None, None, None, None],
                "pci_bus": [
                    "0000:18:00.0",
                    "0000:2a:00.0",
                    "0000:18:00.0",
                    "0000:3a:00.0",
                    "0000:9a:00.0",
                    "0000:5d:00.0",
                ],
            }
        ),
    )
    got = fill_gpu_index(events, conform("gpu_hourly", hourly))
    # by uuid; by bus label; c's 0000:18 learned from a's first event; c's 0000:3a learned from
    # a's telemetry-labelled bus; b's 0000:9a names two indices; a's 0000:5d is never seen
    assert got["gpu"].to_list() == [0, 1, 0, 2, None, None]
    assert got.columns == events.columns


def test_runner_conservation_and_idempotence(wh, tmp_path):
    log = tmp_path / "gpu-node-009.log"
    log.write_text(REAL.read_text())
    files = [log, KDIR / "gpud__pkg_kmsg_testdata_kmsg.1.log"]
    from ingest.base import ParseContext as Ctx

    reports = ingest_paths(wh, files, "kernel", Ctx(time=T0))
    assert [(r.records, r.rows_ok, r.rows_quarantined) for r in reports] == [(13, 13, 0), (0, 0, 0)]
    hw = wh.read("hw_events")
    assert (
        hw.height == 13 and set(hw["host"]) == {"gpu-node-009"} and set(hw["source"]) == {"kernel"}
    )
    again = ingest_paths(wh, files, "kernel", Ctx(time=T0))
    assert all(r.skipped for r in again) and wh.read("hw_events").height == 13
    # a line-for-line reparse gives the same event ids
    first = parse(log.read_bytes(), ParseContext(path=str(log), time=T0)).tables["hw_events"]
    second = parse(log.read_bytes(), ParseContext(path=str(log), time=T0)).tables["hw_events"]
    assert first["event_id"].to_list() == second["event_id"].to_list()


_PIECES = [
    "[Fri Aug 30 11:43:09 2024] ",
    "[ 12.000001] ",
    "6,1,5,-;",
    "Nov 20 10:00:00 h kernel: ",
    "2025-05-01T09:58:12+0000 h kernel: ",
    "",
    "kernel: ",
    "<4>",
]
_BODIES = [
    "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics",
    "NVRM: Xid (PCI:0019:01:00): 149, NETIR Fatal XC0",
    "NVRM: Xid (PCI:zz): 1",
    "NVRM: Xid (PCI:0000:01:00): 45, pid=3, name=p, Ch 1 caused by previous Xid 149",
    "nvidia-nvswitch0: SXID=12028, Non-fatal, Link 3",
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): x",
    "mlx5_core 0000:4b:00.0 ib0: Link down",
    "NVRM: GPU at PCI:0000:cb:00: GPU-12ab",
    "EDAC MC0: 1 UE x",
    "perf: interrupt took too long",
    "\x00\xff garbage NVRM",
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_PIECES), st.sampled_from(_BODIES), st.text(max_size=8)),
        max_size=25,
    ),
    st.booleans(),
)
def test_fuzz_never_raises_and_conserves(lines, with_time):
    text = "\n".join(p + b + t for p, b, t in lines)
    res = parse(text.encode("utf-8", "surrogatepass"), ParseContext(time=T0 if with_time else None))
    ev = res.tables.get("hw_events")
    rows = 0 if ev is None else ev.height
    assert res.records == rows + res.quarantine.height + res.duplicates
    if ev is not None:
        assert ev["time"].null_count() == 0 and (ev["count"] >= 1).all()
        assert ev["severity"].is_in(["fatal", "critical", "warning", "info"]).all()


KERNEL_FLEET = SAMPLE_FLEET / "kernel"


@pytest.mark.skipif(
    not (SAMPLE_FLEET / "ground_truth.json").exists(), reason="synthetic fleet not generated yet"
)
def test_fleet_faults_with_kernel_evidence_are_in_hw_events():
    truth = json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())
    frames = [
        parse(p.read_bytes(), ParseContext(path=str(p))).tables.get("hw_events")
        for p in sorted(KERNEL_FLEET.glob("*.log"))
    ]
    hw = pl.concat([f for f in frames if f is not None])
    expected = [(f, e) for f in truth["faults"] for e in f["evidence"] if e["source"] == "kernel"]
    assert expected
    matched: set[str] = set()
    for fault, ev in expected:
        t = datetime.fromisoformat(ev["time"])
        hit = hw.filter(
            (pl.col("host") == fault["host"])
            & (pl.col("code") == ev["code"])
            & ((pl.col("time") - pl.lit(t)).abs() <= pl.duration(seconds=2))
        )
        assert hit.height >= 1, (fault["fault_id"], ev)
        assert hit["component_class"][0] == fault["component_class"], fault["fault_id"]
        matched.update(hit["event_id"].to_list())
    # fatal events that are not an injected fault: only the documented XID 45 follow-ups,
    # which are not fatal in the catalogue, so there must be none at all.
    extra = hw.filter((pl.col("severity") == "fatal") & ~pl.col("event_id").is_in(list(matched)))
    assert extra.height == 0, extra.select("host", "time", "code").head()


# --- every time prefix real kernel logs carry -------------------------------------------------

_B = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus."
_AT = datetime(2025, 1, 21, 4, 41, 44, 283302)  # the instant most stamps below name
_BOOTED = datetime(2025, 1, 22)  # --time, taken as the boot time of uptime stamps
_UP = datetime(2025, 1, 22, 6, 42, 8, 828315)  # _BOOTED + 24128.828315 s
_PREFIX_CASES = [
    # (prefix, time with --time, host, quarantine reason without --time or None)
    ("[24128.828315] ", _UP, None, NO_BOOT),  # dmesg raw
    ("[Tue Jan 21 04:41:44 2025] ", _AT.replace(microsecond=0), None, None),  # dmesg -T / --ctime
    ("2025-01-21T04:41:44,283302+00:00 ", _AT, None, None),  # dmesg --time-format=iso
    ("kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ", _AT, None, None),  # ... --decode
    ("kern  :err   : [24128.828315] ", _UP, None, NO_BOOT),  # dmesg --decode
    ("kern  :warn  : [Tue Jan 21 04:41:44 2025] ", _AT.replace(microsecond=0), None, None),
    # -T --show-delta
    ("[Tue Jan 21 04:41:44 2025 <    0.000293>] ", _AT.replace(microsecond=0), None, None),
    ("[24128.828315 <    0.000293>] ", _UP, None, NO_BOOT),  # --show-delta
    ("[Jan21 04:41] ", _AT.replace(second=0, microsecond=0), None,  # --time-format=reltime
     "dmesg reltime timestamp has no year and no reference time; pass --time"),
    ("[<    0.000293>] ", _BOOTED, None,  # --time-format=delta: no time at all
     "dmesg delta stamp gives only the gap to the previous line, no time; pass --time"),
    ("", _BOOTED, None, "kernel line without a timestamp; pass --time"),  # --time-format=notime
    # journald short / RFC 3164
    ("Jan 21 04:41:44 gpu01 kernel: ", _AT.replace(microsecond=0), "gpu01",
     "syslog timestamp has no year and no reference time; pass --time"),
    ("<4>Jan 21 04:41:44 gpu01 kernel: ", _AT.replace(microsecond=0), "gpu01",
     "syslog timestamp has no year and no reference time; pass --time"),
    ("Jan 21 04:41:44.283302 gpu01 kernel: ", _AT, "gpu01",  # short-precise
     "syslog timestamp has no year and no reference time; pass --time"),
    # short-iso
    ("2025-01-21T04:41:44+0000 gpu01 kernel: ", _AT.replace(microsecond=0), "gpu01", None),
    ("2025-01-21T06:41:44.283302+02:00 gpu01 kernel: ", _AT, "gpu01", None),  # short-iso-precise
    ("[24128.828315] gpu01 kernel: ", _UP, "gpu01", NO_BOOT),  # short-monotonic
    ("1737434504.283302 gpu01 kernel: ", _AT, "gpu01", None),  # short-unix
    ("<4>1 2025-01-21T04:41:44.283302Z gpu01 kernel - - - ", _AT, "gpu01", None),  # RFC 5424
    ('<4>1 2025-01-21T04:41:44.283302+00:00 gpu01 kernel - - [meta sequenceId="7"] ',
     _AT, "gpu01", None),
    ("4,1234,24128828315,-;", _UP, None, NO_BOOT),  # /dev/kmsg
]  # fmt: skip


@pytest.mark.parametrize(("prefix", "when", "host", "reason"), _PREFIX_CASES)
def test_every_time_prefix(prefix, when, host, reason):
    ev, q, _ = run(prefix + _B + "\n", time=_BOOTED)
    assert q.height == 0 and ev.select("time", "host", "code", "message").row(0) == (
        when,
        host,
        "79",
        "GPU has fallen off the bus.",
    )
    ev, q, _ = run(prefix + _B + "\n")
    if reason is None:  # the line dates itself: no --time needed, and none is used
        assert ev["time"].to_list() == [when]
    else:
        assert ev.height == 0 and q["error"].to_list() == [reason]


def test_journald_json_lines():
    rec = {
        "__REALTIME_TIMESTAMP": "1737434504283302", "__MONOTONIC_TIMESTAMP": "24128828315",
        "_HOSTNAME": "gpu01", "SYSLOG_IDENTIFIER": "kernel", "MESSAGE": _B,
    }  # fmt: skip
    mono = {k: v for k, v in rec.items() if k != "__REALTIME_TIMESTAMP"}
    text = json.dumps(rec) + "\n" + json.dumps(mono | {"MESSAGE": _B.replace("79", "48")}) + "\n"
    ev, q, _ = run(text, time=_BOOTED)
    assert q.height == 0
    assert ev.select("time", "host", "code").rows() == [(_AT, "gpu01", "79"), (_UP, "gpu01", "48")]
    _, q, _ = run(text)
    assert q["line"].to_list() == [2] and q["error"].to_list() == [NO_BOOT]


def test_dmesg_iso_lines_are_not_dated_to_time():
    """The issue's case: ``dmesg --decode --time-format=iso`` lines were quarantined as having
    no timestamp, and following the advice (--time) dated every event to --time."""
    text = "".join(
        f"kern  :warn  : 2025-01-21T04:4{m}:44,283302+00:00 NVRM: Xid (PCI:0000:3b:00): 48, "
        "pid=1, name=x, DBE\n"
        for m in (1, 3, 5)
    )
    for kw in ({}, {"time": _BOOTED}):
        ev, q, _ = run(text, **kw)
        assert q.height == 0 and ev["time"].dt.minute().to_list() == [41, 43, 45]


def test_reltime_plus_lines_take_the_minute_of_the_header_above():
    text = (
        "[Jan21 04:41] nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context\n"
        "[  +0.283302] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
        "[Jan21 04:43] perf: interrupt took too long\n"
        "[  +5.000000] NVRM: Xid (PCI:0000:5d:00): 48, pid=1, name=x, DBE\n"
    )
    ev, q, _ = run(text, time=_BOOTED)
    assert q.height == 0
    assert ev.select("source_line", "time").rows() == [
        (2, datetime(2025, 1, 21, 4, 41)), (4, datetime(2025, 1, 21, 4, 43))
    ]  # fmt: skip
    _, q, _ = run("[  +0.283302] " + _B + "\n", time=_BOOTED)
    assert q["error"].to_list() == [
        "dmesg reltime '+delta' stamp with no '[Mon DD HH:MM]' header line before it in the file"
    ]


def test_uptime_lines_are_dated_by_the_boot_banner_of_their_boot():
    text = (
        "[    1.234567] rtc_cmos 00:05: setting system clock to 2025-01-21T04:00:00 UTC "
        "(1737432000)\n"
        "[  101.234567] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the "
        "bus.\n"
        "[    0.000000] Linux version 6.8.0-51-generic\n"  # a reboot: the banner's boot is over
        "[    5.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the "
        "bus.\n"
    )
    ev, q, _ = run(text)
    assert ev.select("source_line", "time").rows() == [(2, datetime(2025, 1, 21, 4, 1, 40))]
    assert q.select("line", "error").rows() == [(4, NO_BOOT)]
    ev, q, _ = run(text, time=_BOOTED)  # --time dates the boot without a banner
    assert q.height == 0 and ev["time"].to_list() == [
        datetime(2025, 1, 21, 4, 1, 40),
        datetime(2025, 1, 22, 0, 0, 5),
    ]


# --- record-level quarantine and plausibility ---------------------------------------------------


def test_one_absurd_uptime_loses_only_its_line():
    good = "".join(
        f"[{100 + 100 * i}.000000] NVRM: Xid (PCI:0000:{i:02x}:00): 79, pid=1, name=x, off the "
        "bus\n"
        for i in range(15)
    )
    text = (
        good
        + "[99999999999999999999.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, off the "
        "bus\n"
    )
    ev, q, n = run(text, time=_BOOTED)
    assert n == 16 and ev.height == 15
    assert q.select("line", "error").rows() == [(16, "uptime stamp 1e+20 s is out of range")]


def test_times_outside_the_plausible_window_are_quarantined_per_line():
    text = (
        "[Tue Jan 21 04:41:44 2025] " + _B + "\n"
        "[Fri Jan 21 04:41:44 2095] " + _B.replace("3b", "5d") + "\n"
        "[Thu Jan 21 04:41:44 1999] " + _B.replace("3b", "6e") + "\n"
    )
    ev, q, _ = run(text, not_after=datetime(2026, 1, 1))
    assert ev["source_line"].to_list() == [1]
    assert q.select("line", "error").rows() == [
        (2, "time 2095-01-21T04:41:44 is after 2026-01-01T00:00:00 (clock in the future)"),
        (3, "time 1999-01-21T04:41:44 is before 2000-01-01T00:00:00 (implausible clock)"),
    ]


# --- NVSwitch / NVLink links and severities -------------------------------------------------------


def test_sxid_lines_of_one_nvswitch_within_a_second_stay_one_event_per_link():
    """A real capture: SXid 20034 on three NVSwitches, several links each within one second,
    with ``Severity ... Engine instance N`` and ``Data`` continuation lines."""
    path = KDIR / "gpud__sxid_readme_xid79_with_nvswitch_links.log"
    ev, q, n = run(path.read_text(), time=_BOOTED)
    assert q.height == 0 and n == 6
    got = ev.select("source_line", "code", "component_id", "pci_bus", "link", "severity").rows()
    assert got == [
        (3, "79", "0000:91:00.0", "0000:91:00.0", None, "fatal"),
        (6, "20034", "nvidia-nvswitch1", "0000:06:00.0", 48, "fatal"),
        (7, "20034", "nvidia-nvswitch0", "0000:05:00.0", 63, "fatal"),  # + its Data line
        (
            8,
            "20034",
            "nvidia-nvswitch2",
            "0000:07:00.0",
            60,
            "critical",
        ),  # no Fatal/Non-fatal word seen
        (10, "20034", "nvidia-nvswitch2", "0000:07:00.0", 37, "fatal"),
        (11, "20034", "nvidia-nvswitch0", "0000:05:00.0", 62, "fatal"),
    ]
    assert ev["uuid"][0] == "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b"
    assert "Data {0x10000000" in ev["message"][2] and "Engine instance 62" in ev["message"][5]
    assert ev["time"][1] == _BOOTED + timedelta(seconds=6781753.400584)


def test_nvlink_xid_links_and_worst_severity():
    p = "[Tue Jan 21 04:41:44 2025] NVRM: Xid (PCI:0000:04:00): "
    text = (
        p
        + "149, NETIR_LINK_EVT Nonfatal XC0 i0 Link 00 (0x025001c6 0x00000000)\n"
        + p
        + "149, NETIR_LINK_EVT/NETIR_LINK_DOWN Fatal XC0 i0 Link 00 (0x00000011 0x00000000)\n"
        + p
        + "149, NETIR_LINK_EVT Nonfatal XC0 i0 Link 01 (0x025001c6 0x00000000)\n"
        + p
        + "149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)\n"
        + "[Tue Jan 21 04:41:44 2025] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, "
        "Non-fatal, Link 30 LTSSM\n"
        + "[Tue Jan 21 04:41:44 2025] nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 20034, Fatal, "
        "Link 30 LTSSM Fault Up\n"
    )
    ev, q, n = run(text)
    assert q.height == 0 and n == 4
    assert ev.select("code", "link", "severity", "count").rows() == [
        ("149", 0, "fatal", 1),  # Nonfatal then Fatal on link 0: the worst line decides
        ("149", 1, "warning", 1),
        ("149", None, "fatal", 1),  # 'Link -1' names no link
        ("20034", 30, "fatal", 1),
    ]


# --- chunking, compression and duplicates ---------------------------------------------------------


def _burst_log() -> str:
    """A raw-dmesg log whose bursts, repeats, multi-line events, banner and causes are spread so
    that small chunks cut through all of them."""
    lines = [
        (
            "[    1.000000] rtc_cmos 00:05: setting system clock to 2025-01-21T04:00:00 UTC "
            "(1737432000)"
        )
    ]
    lines.append(
        "[    2.000000] NVRM: GPU at PCI:0000:18:00: GPU-0a1b2c3d-0000-1111-2222-333344445555"
    )
    t = 10.0
    for burst in range(12):
        for k in range(6):  # identical repeats merge; per-SM lines collapse
            t += 0.1
            lines.append(
                f"[{t:12.6f}] NVRM: Xid (PCI:0000:18:00): 13, pid=1, name=p, Graphics SM "
                f"Exception (SM {k % 2})"
            )
            lines.append(f"[{t:12.6f}] perf: interrupt took too long (2503 > 2500)")
        t += 0.2
        for link in (1, 2, 1):
            lines.append(
                f"[{t:12.6f}] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link "
                f"{link} egress"
            )
        lines.append(
            f"[{t:12.6f}] nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 2 egress"
        )
        lines.append(
            f"[{t + 1:12.6f}] NVRM: Xid (PCI:0000:2a:00): 45, pid=9, name=p, Ch 1 caused by "
            "previous Xid 13"
        )
        t += 45 if burst % 3 else 200
    return "\n".join(lines) + "\n"


def test_same_events_whatever_the_compression_or_chunking(monkeypatch, tmp_path):
    import gzip
    import io

    from ingest import chunks
    from ingest import parsing

    data = _burst_log().encode()
    ctx = ParseContext(path="node.log")
    whole = parse(data, ctx)
    assert whole.records >= 20 and whole.quarantine.height == 0
    plain, gz = tmp_path / "node.log", tmp_path / "node.log.gz"
    plain.write_bytes(data)
    gz.write_bytes(gzip.compress(data))

    def results(chunk_bytes: int, path) -> list:
        monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk_bytes)
        with open(path, "rb") as raw:
            return [r for _, r in parsing.parse_file(raw, "node.log", FORMAT, ctx)]

    for chunk_bytes in (700, 1500, 4099):
        for path in (plain, gz):
            (res,) = results(chunk_bytes, path)
            assert res.tables["hw_events"].equals(whole.tables["hw_events"]), (
                chunk_bytes,
                path.name,
            )
            assert res.records == whole.records
    # the pieces alone differ (so the check above can fail): merging is what makes them agree
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1500)
    pieces = [parse(block, ctx) for block, _ in chunks.line_blocks(io.BytesIO(data), plain=False)]
    assert len(pieces) > 5 and sum(p.records for p in pieces) != whole.records


def test_gzip_and_chunked_ingest_store_the_same_rows(wh, tmp_path, monkeypatch):
    import gzip

    from ingest import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1000)
    data = _burst_log().encode()
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "node-1.log").write_bytes(data)
    (b / "node-1.log.gz").write_bytes(gzip.compress(data))
    other = Warehouse(tmp_path / "other")
    (plain,) = ingest_paths(wh, [a], "kernel", ParseContext())
    (packed,) = ingest_paths(other, [b], "kernel", ParseContext())
    whole = parse(data, ParseContext())
    assert plain.rows_ok == packed.rows_ok == whole.tables["hw_events"].height == 20
    # each burst repeats one SXid line exactly (Link 1 at the same time): 12 duplicates
    assert plain.rows_duplicate == packed.rows_duplicate == whole.duplicates == 12
    cols = ["time", "host", "code", "link", "severity", "count", "message"]
    first, second = (w.read("hw_events").sort("time", "link").select(cols) for w in (wh, other))
    assert first.equals(second)
    # the gzip copy of a log already ingested adds nothing: every record is a duplicate
    (again,) = ingest_paths(wh, [b], "kernel", ParseContext())
    assert again.rows_ok == 0 and again.rows_duplicate == again.records == plain.records == 32


def test_exact_duplicate_lines_are_stored_once_and_counted_as_duplicates(wh, tmp_path):
    text = (KDIR / "gpud__sxid_readme_xid79_with_nvswitch_links.log").read_text()
    once, _, n_once = run(text, time=_BOOTED)
    p = tmp_path / "node-1.log"
    p.write_text(text + text)  # overlapping rotated files concatenated
    (rep,) = ingest_paths(wh, [p], "kernel", ParseContext(time=_BOOTED))
    # the second copy's 9 fault lines (1 Xid, 8 SXid) are duplicates, not merged repeats
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (15, 6, 0, 9)
    assert n_once == 6
    twice = wh.read("hw_events").sort("source_line", "link")
    cols = ["time", "code", "link", "severity", "count", "message"]
    assert twice.select(cols).equals(once.sort("source_line", "link").select(cols))
    assert twice["count"].to_list() == [1] * 6
    assert wh.read("quarantine").height == 0


# --- more real captures ---------------------------------------------------------------------------


def test_nvsentinel_burst_lines():
    path = KDIR / "nvsentinel__syslog_monitor_xid_burst.log"
    ev, q, n = run(path.read_text(), time=_BOOTED)
    assert q.height == 0 and n == 5
    assert ev.select("code", "pci_bus", "component_class", "pid", "process", "time").rows() == [
        ("119", "0002:00:00.0", "gpu", 1582259, "nvc:[driver]", _BOOTED),
        ("79", "0001:00:00.0", "gpu", 123456, "test", _BOOTED),
        ("94", "0003:00:00.0", "gpu_memory", 789012, "process", _BOOTED),
        (
            "13",
            "0000:97:00.0",
            "software",
            2519562,
            "python3",
            _BOOTED + timedelta(seconds=103859.498995),
        ),
        ("31", "0000:02:00.0", "software", None, None, _BOOTED),
    ]
    _, q, _ = run(path.read_text())  # no --time: every line says why it has no time
    assert q["error"].to_list() == ["kernel line without a timestamp; pass --time"] * 3 + [
        NO_BOOT
    ] + ["kernel line without a timestamp; pass --time"]


# --- property: arbitrary and mutated lines --------------------------------------------------------


_MUTATIONS = st.sampled_from(
    ["", "\x00", "\ufffd", "[", "]", ":", ",", " ", "-1", "99999999999999999999", "{", '"']
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([p for p, *_ in _PREFIX_CASES] + _PIECES),
                  st.sampled_from(_BODIES + [_B]), st.integers(0, 60), _MUTATIONS),
        min_size=1, max_size=20,
    ),
    st.integers(1, 19),
    st.booleans(),
)  # fmt: skip
def test_mutated_lines_never_raise_conserve_and_merge_like_the_whole(lines, cut, with_time):
    """Any prefix with any body, with one character spliced in anywhere: parsing never raises,
    records = rows + quarantine + duplicates, and two halves merged give exactly what the whole
    gives."""
    text = [(p + b)[:i] + m + (p + b)[i:] for p, b, i, m in lines]
    ctx = ParseContext(time=T0 if with_time else None)
    whole = parse("\n".join(text).encode("utf-8", "surrogatepass") + b"\n", ctx)
    rows = whole.tables["hw_events"].height if "hw_events" in whole.tables else 0
    assert whole.records == rows + whole.quarantine.height + whole.duplicates
    cut = min(cut, len(text))
    head = FORMAT.extract(("\n".join(text[:cut]) + "\n").encode("utf-8", "surrogatepass"), ctx)
    tail = FORMAT.extract(
        ("\n".join(text[cut:]) + "\n").encode("utf-8", "surrogatepass"),
        replace(ctx, line_offset=cut),
    )
    merged = FORMAT.merge([head, tail], ctx)
    assert merged.records == whole.records and merged.quarantine.equals(whole.quarantine)
    if rows:
        assert merged.tables["hw_events"].equals(whole.tables["hw_events"])


@pytest.mark.parametrize(
    "prefix",
    ["kern  :info  : 2025-01-21T04:41:44,283302+00:00 ", "[Jan21 04:41] ", "[  +0.000123] ",
     "kern  :info  : [  12.000001] ", "<6>1 2025-01-21T04:41:44Z gpu01 kernel - - - ",
     "1737434504.283302 gpu01 kernel: "],
)  # fmt: skip
def test_chatter_without_xids_is_detected_in_every_stamp_style(prefix):
    head = "".join(
        f"{prefix}perf: interrupt took too long ({n} > 2500)\n" for n in range(20)
    ).encode()
    assert FORMAT.detect(head, "dmesg.txt") == 60
