"""Kernel logs with NVIDIA XID/SXID, mlx5, MCE, EDAC and NVMe lines (read by
``ingest/formats/kernel/``)."""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from sample_data.fault_codes import KERNEL_HOST_CODE
from sample_data.fault_codes import MLX5_SHARES
from sample_data.fault_codes import SXID_TEXT
from sample_data.fault_codes import XID_BY_CODE
from sample_data.model import NIC_PCI_BUS
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.model import uuid_at
from sample_data.writers.base import pci
from sample_data.writers.base import write_text

BENIGN_KERNEL = (
    (
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
        "further processing"
    ),
    "IPv6: ADDRCONF(NETDEV_CHANGE): eth0: link becomes ready",
    (
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 "
        "page:0x4a1c2 offset:0x0 grain:32 syndrome:0x0 - area:DRAM err_code:0000:009f socket:0 "
        "ha:0 channel_mask:4 rank:1)"
    ),
    (
        "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate "
        "to 79750"
    ),
    "nvidia-nvswitch1: open (major=510)",
    "xfs filesystem being remounted at /tmp supports timestamps until 2038 (0x7fffffff)",
)
BOOT_KERNEL = (
    (
        "Linux version 5.15.0-105-generic (buildd@lcy02-amd64-007) (gcc (Ubuntu 11.4.0-1ubuntu1~"
        "22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #115-Ubuntu SMP Mon Apr 15 "
        "09:52:04 UTC 2024 (Ubuntu 5.15.0-105.115-generic 5.15.149)"
    ),
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08  Sat Feb 17 22:55:48 UTC 2024",
    "nvidia-nvswitch0: open (major=510)",
)


def _xid_lines(
    f: Fleet, t: float, idx: int, code: dict, gpu: tuple[str | None, str | None], proc: str
) -> list[tuple[float, str]]:
    """The XID line of a GPU board fault, with the driver's board context when it prints it
    and the XID 45 follow-ups on the other GPUs whose channels it tears down."""
    k, bus = code["code"], pci(idx)
    xid = XID_BY_CODE[k]
    lines: list[tuple[float, str]] = []
    if code["multiline"]:
        lines.append((t, f"NVRM: GPU at PCI:{bus}: {gpu[0]}"))
        lines.append((t, f"NVRM: GPU Board Serial Number: {gpu[1]}"))
    text = xid.text.replace("GPU0", f"GPU{idx}")
    lines.append((t, f"NVRM: Xid (PCI:{bus}): {k}, {proc}, {text}"))
    if code["multiline"] and k == "79":
        lines.append((t, f"NVRM: GPU {bus}.0: GPU has fallen off the bus."))
    if code["followups"] and xid.echoed and f.gpus_per_node > 1:
        others = [g for g in range(f.gpus_per_node) if g != idx][: code["followups"]]
        for j, g in enumerate(others):
            echo = f"Ch {8 + j:08x} caused by previous Xid {k}"
            lines.append((t + 0.5 + j, f"NVRM: Xid (PCI:{pci(g)}): 45, {proc}, {echo}"))
    return lines


def _sxid_lines(idx: int, code: dict) -> list[str]:
    """An NVSwitch's SXID line, with its severity and data lines when the driver prints them."""
    sw, k = f"nvidia-nvswitch{idx}", code["code"]
    lines = [f"{sw}: SXID={k}, {SXID_TEXT[k]}"]
    if code["multiline"]:
        lines.append(f"{sw}: SXID={k}, Severity 1 Engine instance 42 Sub-engine instance 00")
        data = ", ".join(["0x00000000"] * 2 + ["0x00000004"] + ["0x00000000"] * 5)
        lines.append(f"{sw}: SXID={k}, Data {{{data}}}")
    return lines


def _mlx5_line(idx: int, k: str) -> str:
    """The ConnectX driver's line for an IB link fault: the link going down or a cable error."""
    dev = f"mlx5_core 0000:{NIC_PCI_BUS[idx % len(NIC_PCI_BUS)]}:00.0"
    if k == "mlx5_port_module_error":
        return (
            f"{dev}: mlx5_port_module_event:1151:(pid 0): Port module event[error]: "
            f"module {idx}, Cable error, High Temperature"
        )
    return f"{dev} ib{idx}: Link down"


def _host_lines(idx: int, cls: str) -> list[str]:
    """The kernel's lines for a host fault the BMC also reports (machine check, uncorrectable
    DIMM error, NVMe controller loss); none for the classes only the BMC sees (PSU, fans)."""
    if cls == "cpu":
        mce = f"mce: [Hardware Error]: CPU {idx * 56}: Machine Check Exception: 5 Bank 4: "
        return [
            mce + "be00000000800400",
            "mce: [Hardware Error]: Run the above through 'mcelog --ascii'",
        ]
    if cls == "host_memory":
        ue = (
            f"EDAC MC{idx // 8}: 1 UE memory read error on CPU_SrcID#{idx // 8}_MC#0_"
            f"Chan#{idx % 8}_DIMM#0 (channel:{idx % 8} slot:0 page:0x1f2a3 offset:0x0 "
            "grain:32 - area:DRAM err_code:0000:009f)"
        )
        return [ue]
    if cls == "storage":
        return [
            f"nvme nvme{idx}: controller is down; will reset: CSTS=0xffffffff, PCI_STATUS=0xffff"
        ]
    return []


def kernel_lines_for_fault(
    f: Fleet, i: int, code: dict, gpu_uuid: str | None, gpu_serial: str | None, name: str
) -> list[tuple[float, str]]:
    """Kernel lines of one fault: one primary line with its code, plus optional context. The
    code's kind (XID, SXID, mlx5) picks the driver that writes it; other codes are BMC events,
    and the kernel writes its own line for the host faults among them."""
    flt = f.faults[i]
    t, k = flt["time"], code["code"]
    idx = f.slot_index[flt["slot"]]
    if k in XID_BY_CODE:
        pid = f"{code['pid']}" if name != "<unknown>" else "'<unknown>'"
        return _xid_lines(f, t, idx, code, (gpu_uuid, gpu_serial), f"pid={pid}, name={name}")
    if k in SXID_TEXT:
        return [(t, msg) for msg in _sxid_lines(idx, code)]
    if k in dict(MLX5_SHARES):
        return [(t, _mlx5_line(idx, k))]
    return [(t, msg) for msg in _host_lines(idx, flt["cls"])]


def _running_name(f: Fleet, node: int, t: float, by_node: dict) -> str:
    for a in by_node.get(node, ()):
        if a.start <= t and (a.end is None or t <= a.end + 60):
            return "pt_main_thread" if a.partition in ("train", "") else "python3"
    return "<unknown>"


def write(f: Fleet, out: Path, codes: list[dict], ev: dict, rng: np.random.Generator) -> dict:
    """kernel/<host>.log; odd-numbered hosts use `dmesg --ctime`, even ones journald short-iso."""
    by_node: dict[int, list[Attempt]] = defaultdict(list)
    for a in f.attempts:
        for n in a.nodes:
            by_node[n].append(a)
    per_node: dict[int, list[tuple[float, int, str]]] = defaultdict(list)
    stats = {"primary_lines": 0, "xid45_followups": 0, "benign_lines": 0}
    for i, flt in enumerate(f.faults):
        gpu_uuid = gpu_serial = None
        if flt["gpu_index"] is not None:
            gpu_uuid, gpu_serial = uuid_at(f, flt["node"], flt["gpu_index"], flt["time"])
        name = _running_name(f, flt["node"], flt["time"], by_node)
        lines = kernel_lines_for_fault(f, i, codes[i], gpu_uuid, gpu_serial, name)
        if not lines:  # a fault only the BMC sees: no kernel evidence, no reboot in this log
            continue
        for t, msg in lines:
            per_node[flt["node"]].append((t, 1, msg))
        code = codes[i]["code"]
        ev[i].append(
            {
                "source": "kernel",
                "code": KERNEL_HOST_CODE.get(flt["cls"], code),
                "time": ts(f, flt["time"]),
            }
        )
        if flt["fatal"] and not flt["secondary"]:
            for j, msg in enumerate(BOOT_KERNEL):
                per_node[flt["node"]].append((flt["t_rep"] + 20 + j, 0, msg))
    for m in f.maint:
        for j, msg in enumerate(BOOT_KERNEL):
            per_node[m["node"]].append((m["end"] - 300 + j, 0, msg))
    H = f.horizon
    for n in range(f.nodes):
        k = int(rng.poisson(H / (12 * 3600.0)))
        tt = np.sort(rng.uniform(0, H, k))
        which = rng.integers(0, len(BENIGN_KERNEL), k)
        for t, w in zip(tt, which):
            per_node[n].append((float(t), 2, BENIGN_KERNEL[int(w)]))
    for n in range(f.nodes):
        host = f.hosts[n]
        rows = sorted(r for r in per_node[n] if 0 <= r[0] < H)
        journald = (n + 1) % 2 == 0
        lines = []
        for t, kind, msg in rows:
            if kind == 1:
                if "caused by previous Xid" in msg:
                    stats["xid45_followups"] += 1
                elif _is_primary_kernel(msg):
                    stats["primary_lines"] += 1
            elif kind == 2:
                stats["benign_lines"] += 1
            g = time.gmtime(round(f.start_epoch + t))
            if journald:
                lines.append(f"{time.strftime('%Y-%m-%dT%H:%M:%S', g)}+0000 {host} kernel: {msg}")
            else:
                lines.append(f"[{time.strftime('%a %b %e %H:%M:%S %Y', g)}] {msg}")
        write_text(out / "kernel" / f"{host}.log", "\n".join(lines) + ("\n" if lines else ""))
    return stats


PRIMARY_KERNEL_MARKERS = (
    "NVRM: Xid (",
    "Fatal, Link",
    "Link down",
    "Port module event[error]",
    "Machine Check Exception",
    " UE memory read error",
    "controller is down",
)


def _is_primary_kernel(msg: str) -> bool:
    """The one line per fault that carries its code (XID, SXID, mlx5, MCE, EDAC UE, NVMe)."""
    return any(m in msg for m in PRIMARY_KERNEL_MARKERS) and "caused by previous Xid" not in msg
