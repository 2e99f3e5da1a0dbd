"""dcgm-exporter `/metrics` scrapes, gzip per host and day (read by ``ingest/formats/dcgm.py``)."""

from __future__ import annotations

import gzip
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from sample_data import fail_slow
from sample_data.fault_codes import XID_BY_CODE
from sample_data.model import GPU_MODEL
from sample_data.model import K8S_NAMESPACE
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import pci

BLANK_SENTINEL = "9223372036854775794"
DCGM_METRICS = (  # name, type, help
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
)
# what shows a GPU running slow (sample_data.fail_slow), written after the others with draws of
# their own: a fleet's other samples do not depend on its fail-slow episodes
SLOW_METRICS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width."),
)


def node_load(
    f: Fleet, n: int, tt: np.ndarray, attempts: list[Attempt], pod_names: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(busy, pod) per scrape time ``tt`` and GPU of node ``n``: whether an attempt holds the
    GPU, and the index of its Kubernetes pod in ``pod_names`` (filled here; 0 = no pod)."""
    busy = np.zeros((tt.size, f.gpus_per_node), bool)
    pod = np.zeros((tt.size, f.gpus_per_node), np.int64)
    for a in attempts:
        e = a.end if a.end is not None else f.horizon
        i0, i1 = np.searchsorted(tt, [a.start, e])
        if i1 <= i0:
            continue
        gl = a.gpus[a.nodes.index(n)]
        busy[i0:i1, gl] = True
        if a.scheduler == "k8s":
            pname = f"{a.name}-worker-{a.nodes.index(n)}"
            pod_names.setdefault(pname, len(pod_names))
            pod[i0:i1, gl] = pod_names[pname]
    return busy, pod


def gpu_readings(
    busy: np.ndarray, offset: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(util %, GPU temperature C, memory temperature C, power W) per scrape and GPU: load
    drives utilisation, temperature and power; a GPU slot's airflow ``offset`` shifts its
    temperature only."""
    shape = busy.shape
    util = np.where(busy, np.clip(rng.normal(93, 5, shape), 0, 100), 0).round().astype(np.int64)
    temp = (33 + 0.33 * util + offset + rng.normal(0, 1.2, shape)).round().astype(np.int64)
    mtemp = (temp + 4 + rng.normal(0, 1, shape)).round().astype(np.int64)
    power = (68 + 5.9 * util + rng.normal(0, 6, shape)).round(3)
    return util, temp, mtemp, power


def _down_intervals(f: Fleet) -> dict[int, list[tuple[float, float]]]:
    """Per node, when it is powered off: from a fatal fault's drain to its repair, and through
    a maintenance window (from a minute after it starts)."""
    off: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for flt in f.faults:
        if flt["fatal"]:
            off[flt["node"]].append((flt["t_off"], flt["t_rep"]))
    for m in f.maint:
        off[m["node"]].append((m["start"] + 60, m["end"]))
    return off


def _mark_faults(
    f: Fleet,
    fault_ids: list[int],
    tt: np.ndarray,
    codes: list[dict],
    ev: dict,
    rng: np.random.Generator,
    gauges: dict[str, np.ndarray],
) -> None:
    """What a node's GPU faults show from the fault until the node goes off: the XID (and the
    XID 45 echoes on other GPUs), a DBE and a failed row remap for memory faults, a burst of
    NVLink CRC errors. ``gauges`` (xid, dbe, remap, crc_inc) are filled in place."""
    G = f.gpus_per_node
    for i in fault_ids:
        flt = f.faults[i]
        g = flt["gpu_index"]
        if g is None or not flt["fatal"] or flt["secondary"]:
            continue
        i0, i1 = np.searchsorted(tt, [flt["time"], flt["t_off"]])
        if i1 <= i0:
            continue
        code = codes[i]["code"]
        gauges["xid"][i0:i1, g] = int(code)
        first = ts(f, float(tt[i0]))
        if flt["cls"] == "gpu_memory":
            gauges["dbe"][i0:i1, g] = 1
            if XID_BY_CODE[code].remaps_rows:
                gauges["remap"][i0:i1, g] = 1
            ev[i].append({"source": "dcgm", "code": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "time": first})
        if flt["cls"] == "nvlink":
            gauges["crc_inc"][i0, g] += int(rng.integers(1000, 100000))
        if codes[i]["followups"] and XID_BY_CODE[code].echoed and G > 1:
            others = [x for x in range(G) if x != g][: codes[i]["followups"]]
            gauges["xid"][i0:i1, others] = 45
        ev[i].append({"source": "dcgm", "code": f"DCGM_FI_DEV_XID_ERRORS={code}", "time": first})


def _since_boot(increments: np.ndarray, boot: np.ndarray) -> np.ndarray:
    """A counter from its increments, restarted at each boot (``boot``: boots so far)."""
    total = np.cumsum(increments, axis=0)
    seg_start = np.searchsorted(boot, boot, side="left")
    base = np.where(seg_start[:, None] > 0, total[np.maximum(seg_start - 1, 0)], 0)
    return total - base


def write(f: Fleet, out: Path, codes: list[dict], ev: dict, rng: np.random.Generator) -> int:
    """dcgm/<host>/<date>.prom.gz: concatenated /metrics scrapes with ms timestamps.

    No scrape while the node is powered off (repair or maintenance); counters and the last
    XID reset at the reboot that ends such an interval; a replaced GPU shows its new UUID.
    """
    G, H, dt = f.gpus_per_node, f.horizon, float(f.scrape_interval_s)
    by_node: dict[int, list[Attempt]] = defaultdict(list)
    for a in f.attempts:
        for n in a.nodes:
            by_node[n].append(a)
    off = _down_intervals(f)
    faults_by_node: dict[int, list[int]] = defaultdict(list)
    for i, flt in enumerate(f.faults):
        faults_by_node[flt["node"]].append(i)
    total = 0
    if dt <= 0:
        return 0
    episodes: dict[int, list] = defaultdict(list)
    for e in f.slow_episodes:
        episodes[e.node].append(e)
    for n in range(f.nodes):
        slow_rng = np.random.default_rng(np.random.SeedSequence([f.seed, 13, n]))
        phase = float(rng.uniform(0, 59))
        pod_names = {"": 0}
        tt = np.arange(phase, H, dt)
        up = np.ones(tt.size, bool)
        boot = np.zeros(tt.size, np.int64)
        for a, b in sorted(off[n]):
            up &= ~((tt >= a) & (tt < b))
            boot += tt >= b
        S = tt.size
        busy, pod = node_load(f, n, tt, by_node[n], pod_names)
        util, temp, mtemp, power = gpu_readings(busy, f.gpu_temp_offset[n], rng)
        fb = np.where(busy, rng.integers(52000, 79000, (S, G)), 0)
        gauges = {k: np.zeros((S, G), np.int64) for k in ("dbe", "xid", "remap")}
        gauges["crc_inc"] = rng.poisson(0.15 * dt / 3600.0, (S, G))
        _mark_faults(f, faults_by_node[n], tt, codes, ev, rng, gauges)
        crc = _since_boot(gauges["crc_inc"], boot)
        vals = [temp, mtemp, power, util, fb, gauges["dbe"], gauges["xid"], gauges["remap"], crc]
        slow = fail_slow.gpu_signals(tt, busy, episodes[n], slow_rng)
        sel = np.nonzero(up)[0]
        if sel.size == 0:
            continue
        total += _write_host(
            f,
            out,
            n,
            tt[sel],
            ([v[sel] for v in vals], [v[sel] for v in slow]),
            pod[sel],
            list(pod_names),
            (rng, slow_rng),
        )
    return total


def _gpu_labels(
    f: Fleet, n: int, tt: np.ndarray, pod: np.ndarray, pod_names: list[str]
) -> pl.Series:
    """The label set of each (scrape, GPU), scrape-major: the GPU's UUID at that time (a
    replaced board shows its new one) and, on Kubernetes nodes, the pod that holds it."""
    G, S = f.gpus_per_node, tt.size
    host = f.hosts[n]
    labels, lab_idx = [], np.zeros((S, G), np.int64)
    for g in range(G):
        hist = f.gpu_uuid_at[(n, g)]
        starts = np.array([h[0] for h in hist])
        which = np.maximum(np.searchsorted(starts, tt, side="right") - 1, 0)
        lab_idx[:, g] = len(labels) + which
        labels += [
            f'gpu="{g}",UUID="{h[1]}",pci_bus_id="0000{pci(g)}.0",device="nvidia{g}",'
            f'modelName="{GPU_MODEL}",Hostname="{host}"'
            for h in hist
        ]
    lab = pl.Series(labels, dtype=pl.String).gather(lab_idx.ravel())
    if n < f.nodes - f.k8s_nodes:
        return lab
    suffix = [',container="",namespace="",pod=""'] + [
        f',container="pytorch",namespace="{K8S_NAMESPACE}",pod="{p}"' for p in pod_names[1:]
    ]
    sfx = pl.Series(suffix, dtype=pl.String).gather(pod.ravel())
    return pl.DataFrame({"a": lab, "b": sfx}).select(pl.concat_str(["a", "b"])).to_series()


def _metric_frames(
    f: Fleet,
    n: int,
    tt: np.ndarray,
    metrics: tuple,
    vals: list[np.ndarray],
    lab: pl.Series,
    rng,
    first: int = 0,
) -> list[pl.DataFrame]:
    """Each of ``metrics``' HELP and TYPE lines and one sample line per GPU, per scrape, as rows
    (day, scrape, position in the scrape, line) to be put in order and split by day; the
    metrics stand from position ``first`` of their block on in each scrape."""
    G, S = f.gpus_per_node, tt.size
    ms = np.round((f.start_epoch + tt) * 1000).astype(np.int64)
    s_idx = np.repeat(np.arange(S), G)
    g_idx = np.tile(np.arange(G), S)
    blank_mem = n % 8 == 5  # an exporter on old firmware: memory temperature unsupported
    days = ((f.start_epoch + tt) // 86400).astype(np.int64)
    frames = []
    for mi, (name, ty, help_) in enumerate(metrics, start=first):
        v = vals[mi - first].ravel()
        if metrics is not DCGM_METRICS:
            vs = pl.Series(v).cast(pl.String)
        elif mi == 2:
            vs = pl.Series(v).round(3).cast(pl.String)
        elif mi == 1 and blank_mem:
            vs = pl.repeat(BLANK_SENTINEL, v.size, eager=True, dtype=pl.String)
        else:
            vs = pl.Series(v).cast(pl.String)
        tms = pl.Series(np.repeat(ms, G) + rng.integers(0, 40, S * G)).cast(pl.String)
        line = (
            pl.DataFrame({"l": lab, "v": vs, "t": tms})
            .select(pl.concat_str([pl.lit(name + "{"), "l", pl.lit("} "), "v", pl.lit(" "), "t"]))
            .to_series()
        )
        frames.append(
            pl.DataFrame(
                {"day": days[s_idx], "s": s_idx, "k": mi * (G + 2) + 2 + g_idx, "line": line}
            )
        )
        for h, header in enumerate((f"# HELP {name} {help_}", f"# TYPE {name} {ty}")):
            frames.append(
                pl.DataFrame(
                    {
                        "day": days,
                        "s": np.arange(S),
                        "k": np.full(S, mi * (G + 2) + h),
                        "line": pl.repeat(header, S, eager=True),
                    }
                )
            )
    return frames


def _write_host(
    f: Fleet,
    out: Path,
    n: int,
    tt: np.ndarray,
    vals: tuple[list[np.ndarray], list[np.ndarray]],
    pod: np.ndarray,
    pod_names: list[str],
    rngs: tuple,
) -> int:
    """Format one host's scrapes with Polars string ops and write one gzip file per UTC day:
    ``vals`` and ``rngs`` hold the ``DCGM_METRICS``' values and generator, then the
    ``SLOW_METRICS``'."""
    lab = _gpu_labels(f, n, tt, pod, pod_names)
    frames = _metric_frames(f, n, tt, DCGM_METRICS, vals[0], lab, rngs[0])
    frames += _metric_frames(f, n, tt, SLOW_METRICS, vals[1], lab, rngs[1], first=len(DCGM_METRICS))
    df = (
        pl.concat(frames)
        .sort(["s", "k"])
        .group_by("day", maintain_order=True)
        .agg(pl.col("line").str.join("\n"))
    )
    written = 0
    for d, text in zip(df["day"].to_list(), df["line"].to_list()):
        date = time.strftime("%Y-%m-%d", time.gmtime(int(d) * 86400))
        p = out / "dcgm" / f.hosts[n] / f"{date}.prom.gz"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(gzip.compress((text + "\n").encode(), compresslevel=6, mtime=0))
        written += 1
    return written
