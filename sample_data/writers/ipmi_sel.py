"""`ipmitool sel elist` per host (read by ``ingest/formats/ipmi_sel.py``)."""

from __future__ import annotations

import time
from pathlib import Path

from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import write_text
from sample_data.writers.bmc_common import SelRecord
from sample_data.writers.bmc_common import log_entries


def write(f: Fleet, out: Path, sel_rows: list[list[SelRecord]], ev: dict) -> int:
    """ipmi/<host>.sel.txt from each node's SEL records (``bmc_common.sel_rows``)."""
    n_rows = 0
    for host, entries in log_entries(f, sel_rows):
        sel = []
        for rid, g, (t, _, st, num, desc, direc, extra, _, fi) in entries:
            line = (
                f"{rid:>4x} | {time.strftime('%m/%d/%Y', g)} | {time.strftime('%H:%M:%S', g)}"
                f" | {st} #0x{num:02x} | {desc} | {direc}"
            )
            if extra:
                line += f" | {extra}"
            sel.append(line)
            if fi >= 0:
                ev[fi].append({"source": "ipmi", "code": desc, "time": ts(f, t)})
        n_rows += len(sel)
        write_text(out / "ipmi" / f"{host}.sel.txt", "\n".join(sel) + "\n")
    return n_rows
