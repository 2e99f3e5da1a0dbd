"""Local wall-clock times across DST changes (issue 32, item 9), for every parser that reads
zone-less times: the record's own evidence (a log's order, a duration, an end not before its
start) decides the hour a fall-back repeats; a time nothing decides, or one a spring-forward
skips, is a quarantine row with that reason, never a silently chosen instant."""

import json
from datetime import datetime

import polars as pl

from ingest.base import ParseContext
from ingest.formats import checkpoints
from ingest.formats import component_history
from ingest.formats import failure_log
from ingest.formats import ipmi_sel
from ingest.formats import kernel
from ingest.formats import nvidia_smi
from ingest.formats import redfish
from ingest.formats import sacctmgr_events
from ingest.formats import slurmctld

# 2026-11-01 01:00-02:00 happens twice (EDT, then EST); 2026-03-08 02:xx never
TZ = "America/New_York"
EDT_0110, EDT_0150 = datetime(2026, 11, 1, 5, 10), datetime(2026, 11, 1, 5, 50)
EST_0105, EST_0130 = datetime(2026, 11, 1, 6, 5), datetime(2026, 11, 1, 6, 30)
REPEATED = f"falls in the hour repeated when DST ends in {TZ}"
SKIPPED = f"does not exist in {TZ} (the hour skipped when DST starts)"


def _parse(module, text: str, table: str, **ctx):
    res = module.parse(text.encode(), ParseContext(tz=TZ, **ctx))
    ok = res.tables.get(table, pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height + res.duplicates
    return ok, dict(
        zip(res.quarantine["line"].to_list(), res.quarantine["error"].to_list(), strict=True)
    )


def _xid(stamp: str, pid: int) -> str:
    return (
        f"[{stamp}] NVRM: Xid (PCI:0000:3b:00): 79, pid={pid}, name=x, GPU has fallen off "
        "the bus.\n"
    )


def test_kernel_log_order_places_the_repeated_hour_and_a_lone_or_skipped_time_is_quarantined():
    stamps = ["Sun Nov  1 01:10:00 2026", "Sun Nov  1 01:50:00 2026", "Sun Nov  1 01:05:00 2026",
              "Sun Nov  1 01:30:00 2026"]  # fmt: skip
    ok, bad = _parse(
        kernel, "".join(_xid(s, i) for i, s in enumerate(stamps)), "hw_events", host="n1"
    )
    assert bad == {} and ok.sort("source_line")["time"].to_list() == [
        EDT_0110,
        EDT_0150,
        EST_0105,
        EST_0130,
    ]
    lone = _xid("Sun Nov  1 00:30:00 2026", 1) + _xid("Sun Nov  1 01:30:00 2026", 2)
    lone += _xid("Sun Mar  8 02:30:00 2026", 3)
    ok, bad = _parse(kernel, lone, "hw_events", host="n1")
    assert ok["time"].to_list() == [datetime(2026, 11, 1, 4, 30)]
    assert (
        bad[2]
        == f"local time 2026-11-01 01:30:00 {REPEATED}, and the log's order does not tell which"
    )
    assert bad[3] == f"local time 2026-03-08 02:30:00 {SKIPPED}"


def test_slurmctld_log_order_places_the_repeated_hour():
    lines = [f"[2026-11-01T{t}.000] error: Nodes n{i} not responding, setting DOWN\n"
             for i, t in enumerate(["01:10:00", "01:50:00", "01:05:00", "01:30:00"])]  # fmt: skip
    ok, bad = _parse(slurmctld, "".join(lines), "node_events")
    assert bad == {} and ok.sort("time")["host"].to_list() == ["n0", "n1", "n2", "n3"]
    assert ok.sort("time")["time"].to_list() == [EDT_0110, EDT_0150, EST_0105, EST_0130]
    ok, bad = _parse(
        slurmctld,
        "[2026-03-08T02:30:00.000] error: Nodes n1 not responding, setting DOWN\n",
        "node_events",
    )
    assert ok.height == 0 and bad == {1: f"local time 2026-03-08 02:30:00 {SKIPPED}"}


def test_nvidia_smi_loop_order_places_the_repeated_hour():
    text = "timestamp, index, temperature.gpu\n" + "".join(
        f"2026/11/01 {t}.000, 0, {40 + i}\n"
        for i, t in enumerate(["01:10:00", "01:50:00", "01:05:00", "01:30:00"])
    )
    ok, bad = _parse(nvidia_smi, text, "gpu_samples")
    got = dict(zip(ok["value"].to_list(), ok["time"].to_list(), strict=True))
    assert bad == {} and got == {40.0: EDT_0110, 41.0: EDT_0150, 42.0: EST_0105, 43.0: EST_0130}


def test_sel_record_order_places_the_repeated_hour():
    text = "".join(
        f"{i + 1} | 11/01/2026 | {t} | Fan #0x30 | Lower Critical going low | Asserted\n"
        for i, t in enumerate(["01:10:00", "01:50:00", "01:05:00", "01:30:00"])
    )
    ok, bad = _parse(ipmi_sel, text, "hw_events", host="n1")
    assert bad == {} and ok.sort("source_line")["time"].to_list() == [
        EDT_0110,
        EDT_0150,
        EST_0105,
        EST_0130,
    ]


def test_checkpoint_log_order_decides_and_a_csv_row_without_evidence_is_quarantined():
    log = "".join(
        f"2026-11-01 {t}\tJob ID: 7\t# GPUs: 8\tSaved checkpoint\tIteration: {i}\n"
        for i, t in enumerate(["01:10:00", "01:50:00", "01:05:00", "01:30:00"])
    )
    ok, bad = _parse(checkpoints, log, "checkpoints")
    assert bad == {} and ok.sort("iteration")["time"].to_list() == [
        EDT_0110,
        EDT_0150,
        EST_0105,
        EST_0130,
    ]
    csv = "job_id,time,event\n7,2026-11-01 01:30:00,save_end\n7,2026-11-01 03:00:00,save_end\n"
    ok, bad = _parse(checkpoints, csv, "checkpoints")
    assert ok["time"].to_list() == [datetime(2026, 11, 1, 8)]
    assert bad == {
        2: f"local time 2026-11-01 01:30:00 {REPEATED}, and the record does not tell which"
    }


def test_sacctmgr_event_end_not_before_its_start_decides():
    text = "Cluster|NodeName|TimeStart|TimeEnd|State|User|Reason\n" + (
        # 20 min across the change
        "c1|n1|2026-11-01T01:50:00|2026-11-01T01:10:00|DOWN|root(0)|psu\n"
        # 40 min or 1 h 40 min
        "c1|n2|2026-11-01T01:10:00|2026-11-01T01:50:00|DOWN|root(0)|psu\n"
    )
    ok, bad = _parse(sacctmgr_events, text, "node_events")
    down = ok.filter(pl.col("event") == "down")
    assert down["host"].to_list() == ["n1"] and down["time"].to_list() == [EDT_0150]
    assert bad == {
        3: (
            f"TimeStart '2026-11-01 01:10:00' / TimeEnd '2026-11-01 01:50:00' fall in the hour "
            f"repeated when DST ends in {TZ}, and their order does not tell which"
        )
    }


def test_failure_log_downtime_decides():
    text = "system,host,start_time,end_time,downtime_hours,cause,sub_cause\n" + (
        # EDT -> EST: 1 h 40 min
        "s,n1,2026-11-01 01:10:00,2026-11-01 01:50:00,1.6667,hardware,gpu\n"
        # 40 min: both passes fit
        "s,n2,2026-11-01 01:10:00,2026-11-01 01:50:00,0.6667,hardware,gpu\n"
    )
    ok, bad = _parse(failure_log, text, "failures")
    assert ok["host"].to_list() == ["n1"] and ok["start_time"].to_list() == [EDT_0110]
    assert ok["end_time"].to_list() == [datetime(2026, 11, 1, 6, 50)]
    assert list(bad) == [3] and "the downtime or their order does not tell which" in bad[3]


def test_component_history_removal_not_before_installation_decides():
    text = "component_class,serial,slot,installed_at,removed_at,removal_reason,failed\n" + (
        "gpu,SN1,n1/gpu0,2026-11-01 01:50:00,2026-11-01 01:10:00,xid 79,true\n"
        "gpu,SN2,n1/gpu1,2026-11-01 01:10:00,2026-11-01 01:50:00,xid 79,true\n"
        "gpu,SN3,n1/gpu2,2026-03-08 02:30:00,,,\n"
    )
    ok, bad = _parse(component_history, text, "component_history", path="/c/component_history.csv")
    assert ok["serial"].to_list() == ["SN1"]
    assert (ok["installed_at"][0], ok["removed_at"][0]) == (EDT_0150, datetime(2026, 11, 1, 6, 10))
    assert (
        "fall in the hour repeated" in bad[3]
        and bad[4] == f"installed_at '2026-03-08 02:30:00' {SKIPPED}"
    )


def test_redfish_entry_with_a_zone_less_time_in_the_repeated_hour_is_quarantined():
    entry = {
        "@odata.type": "#LogEntry.v1_14_0.LogEntry",
        "EntryType": "Event",
        "Severity": "Warning",
        "Message": "Correctable memory errors on DIMM A3",
    }
    page = {"@odata.type": "#LogEntryCollection.LogEntryCollection", "Members": [
        {**entry, "Id": "1", "Created": "2026-11-01T01:30:00"},
        {**entry, "Id": "2", "Created": "2026-11-01T01:30:00-05:00"},
    ]}  # fmt: skip
    res = redfish.parse(
        json.dumps(page).encode(), ParseContext(tz=TZ, path="/r/n1.LogEntries.json")
    )
    assert res.tables["hw_events"]["time"].to_list() == [EST_0130]
    assert res.quarantine["error"].to_list() == [
        f"Created: local time 2026-11-01 01:30:00 {REPEATED}, and the record does not tell which"
    ]
