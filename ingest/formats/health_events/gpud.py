"""leptonai gpud's event history: the ``/v1/events`` answer, one object per component
(``{component, startTime, endTime, events: [{time, name, type, message}]}``), or a flat list of
its events. A machine's gpud names no host: ``--host`` (the command source's ``host``), else
the file's name, says whose it is.

A ``Fatal`` or ``Critical`` event starts a fault of its component; ``SetHealthy`` (an operator
clearing it) ends the component's faults; a ``reboot`` (component ``os``) ends every fault of the
machine, as gpud's own health states clear reboot-repaired XIDs on one; anything else
(``Info``, ``Warning``) is information. Python per component: an answer is one machine's."""

from __future__ import annotations

import orjson
import polars as pl

from ingest.base import ParseContext
from ingest.gpu_labels import host_from_path

from .finish import category
from .records import Records

START_TYPES = ("Fatal", "Critical")
SET_HEALTHY, REBOOT = "SetHealthy", "reboot"
# gpud's components (components/*/component.go) by the docs/design.md class of what they watch
CLASSES = {
    "accelerator-nvidia-error-xid": "gpu",
    "accelerator-nvidia-gpu-counts": "gpu",
    "accelerator-nvidia-clock-speed": "gpu",
    "accelerator-nvidia-processes": "gpu",
    "accelerator-nvidia-utilization": "gpu",
    "accelerator-nvidia-gpm": "gpu",
    "accelerator-nvidia-error-sxid": "nvswitch",
    "accelerator-nvidia-fabric-manager": "nvswitch",
    "accelerator-nvidia-nvlink": "nvlink",
    "accelerator-nvidia-infiniband": "ib_link",
    "accelerator-nvidia-peermem": "ib_link",
    "accelerator-nvidia-ecc": "gpu_memory",
    "accelerator-nvidia-remapped-rows": "gpu_memory",
    "accelerator-nvidia-memory": "gpu_memory",
    "accelerator-nvidia-hw-slowdown": "cooling",
    "accelerator-nvidia-temperature": "cooling",
    "accelerator-nvidia-power": "psu",
    "accelerator-nvidia-nccl": "software",
    "accelerator-nvidia-persistence-mode": "host_os",
    "cpu": "cpu",
    "memory": "host_memory",
    "disk": "storage",
    "nfs": "storage",
    "fuse": "storage",
    "os": "host_os",
    "kernel-module": "host_os",
    "library": "host_os",
    "pci": "host_os",
    "network-latency": "nic",
    "containerd": "software",
    "docker": "software",
}


def _events(records: Records) -> tuple[list[dict], list[tuple[int, str, str]]]:
    """(one row per event, in file order, with its component; records that are not events as
    (line, raw, reason))."""
    rows, bad = [], []
    for line, obj in records.objects():
        items = obj if isinstance(obj, list) else [obj]
        for item in items:
            if not isinstance(item, dict):
                bad.append((line, orjson.dumps(item).decode()[:500], "not a JSON object"))
            elif isinstance(item.get("events"), list):
                for ev in item["events"]:
                    rows.append((line, ev, item.get("component")))
            else:
                rows.append((line, item, None))
    out = []
    for line, ev, component in rows:
        if not isinstance(ev, dict):
            bad.append((line, orjson.dumps(ev).decode()[:500], "event is not a JSON object"))
            continue
        out.append(
            {
                "line": line,
                "raw": orjson.dumps(ev).decode(),
                "component": ev.get("component") or component,
                "time": _text(ev.get("time")),
                "name": _text(ev.get("name")),
                "type": _text(ev.get("type")),
                "message": _text(ev.get("message")),
            }
        )
    return out, bad


def _text(v) -> str | None:
    return None if v is None else v if isinstance(v, str) else orjson.dumps(v).decode()


def read(records: Records, ctx: ParseContext) -> tuple[pl.DataFrame, bool]:
    """(the events as canonical columns, whether the host was taken from the file name)."""
    rows, bad = _events(records)
    schema = {c: pl.Utf8 for c in ("raw", "component", "time", "name", "type", "message")}
    df = pl.DataFrame(rows, schema={"line": pl.Int64, **schema})
    bad_df = pl.DataFrame(
        {"line": [b[0] for b in bad], "raw": [b[1] for b in bad], "_shape": [b[2] for b in bad]},
        schema={"line": pl.Int64, "raw": pl.Utf8, "_shape": pl.Utf8},
    )
    guessed = host_from_path(ctx.path) if ctx.host is None else None
    component, name = pl.col("component"), pl.col("name")
    reboot = name == REBOOT
    df = df.with_columns(
        host=pl.lit(ctx.host or guessed, pl.Utf8),
        kind=pl.when(reboot | (name == SET_HEALTHY))
        .then(pl.lit("healthy"))
        .when(pl.col("type").is_in(START_TYPES))
        .then(pl.lit("start"))
        .otherwise(pl.lit("info")),
        # a reboot names no fault: it ends every fault of the machine
        fault=pl.when(~reboot).then(component),
        cause=category(name),
        sub_cause=pl.col("message"),
        component_class=component.replace_strict(CLASSES, default=None),
        code=pl.col("message").str.extract(r"(?i)\bS?XID\s*(\d+)"),
        severity=pl.col("type"),
    ).drop("name", "type")
    frames = [df, bad_df, records.rejected()]
    return pl.concat(frames, how="diagonal_relaxed").sort("line", maintain_order=True), (
        guessed is not None
    )
