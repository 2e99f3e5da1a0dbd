"""Component history CSV, one row per installation (read by
``ingest/formats/component_history/``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import write_text

HEADER = (
    "component_class", "serial", "slot", "installed_at", "removed_at", "removal_reason", "failed",
)  # fmt: skip


def installations(f: Fleet) -> list[tuple[str, ...]]:
    """One row (``HEADER``) per installation of every unit seen during the window (ISO UTC
    times), ordered by slot, installation time and serial."""
    rows = []
    H = f.horizon
    for inst in f.inst:
        if inst.get("removed") is not None and inst["removed"] <= 0:
            continue
        s = inst["slot"]
        removed = inst.get("removed")
        failed = bool(inst.get("failed")) and inst["fail"] < H
        if removed is not None and removed < H:
            rem, reason = ts(f, removed), inst.get("reason", "")
        elif failed:  # failed in the window, still in its slot awaiting the repair
            rem, reason = ts(f, inst["fail"]), "failed_awaiting_replacement"
        else:
            rem, reason = "", ""
        rows.append(
            (
                f.slot_class[s],
                inst["serial"],
                f"{f.hosts[f.slot_node[s]]}/{f.slot_pos[s]}",
                ts(f, inst["install"]),
                rem,
                reason,
                "true" if failed else "false",
            )
        )
    rows.sort(key=lambda r: (r[2], r[3], r[1]))
    return rows


def write(f: Fleet, path: Path) -> int:
    """The component history CSV: ``HEADER`` and the ``installations`` rows."""
    rows = installations(f)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(HEADER)
    w.writerows(rows)
    write_text(path, buf.getvalue())
    return len(rows)
