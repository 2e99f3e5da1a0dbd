"""Redfish SEL ``LogEntryCollection`` per host, mirroring the IPMI SEL (read by
``ingest/formats/redfish.py``)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from sample_data.fault_codes import REDFISH_SENSOR_TYPE
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import write_text
from sample_data.writers.bmc_common import SelRecord
from sample_data.writers.bmc_common import log_entries


def write(f: Fleet, out: Path, sel_rows: list[list[SelRecord]], ev: dict) -> int:
    """redfish/<host>.LogEntries.json from each node's SEL records (``bmc_common.sel_rows``)."""
    n_rows = 0
    for host, entries in log_entries(f, sel_rows):
        members = []
        for rid, g, (t, _, st, num, desc, direc, extra, sev, fi) in entries:
            msg_id = "0x" + hashlib.sha1(f"{st}|{desc}|{direc}".encode()).hexdigest()[:6].upper()
            rf_type = REDFISH_SENSOR_TYPE.get(st, st)
            members.append(
                {
                    "@odata.id": f"/redfish/v1/Systems/1/LogServices/SEL/Entries/{rid}",
                    "@odata.type": "#LogEntry.v1_14_0.LogEntry",
                    "Id": str(rid),
                    "Name": f"Log Entry {rid}",
                    "EntryType": "SEL",
                    "Severity": sev,
                    "Created": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", g),
                    "EntryCode": "Assert" if direc == "Asserted" else "Deassert",
                    "SensorType": rf_type,
                    "SensorNumber": num,
                    "Message": f"{st} #0x{num:02x} {desc}"
                    + (f" ({extra})" if extra else "")
                    + ("" if direc == "Asserted" else " - deasserted"),
                    "MessageId": msg_id,
                    "Links": {
                        "OriginOfCondition": {"@odata.id": "/redfish/v1/Chassis/1"},
                        "Oem": {},
                    },
                    "Oem": {},
                }
            )
            if fi >= 0:
                ev[fi].append({"source": "redfish", "code": msg_id, "time": ts(f, t)})
        n_rows += len(members)
        coll = {
            "@odata.type": "#LogEntryCollection.LogEntryCollection",
            "Name": "Log Service Collection",
            "Description": "Collection of Logs for this System",
            "Members@odata.count": len(members),
            "Members": members,
            "@odata.id": "/redfish/v1/Systems/1/LogServices/SEL/Entries",
        }
        write_text(out / "redfish" / f"{host}.LogEntries.json", json.dumps(coll, indent=4) + "\n")
    return n_rows
