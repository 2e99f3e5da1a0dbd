"""Kernel-log XID extraction next to ``grep -c 'NVRM: Xid'`` on the same file.

    .venv/bin/python -m benchmarks.bench_kernel [--mb 1024] [--xid-share 0.01] [--keep | --log PATH]

Writes a realistic `dmesg --ctime` log under /tmp (benign kernel chatter, ~1% XID lines over
64 GPUs, some multi-line and repeated), then times grep (the floor: it only counts matching
lines) and ``ingest.formats.kernel.parse`` over the file in the runner's chunks (ours also
parses times, collapses, merges, classifies and links). Target: within 5x of grep.
Both get a warm-up pass first. The parse figure includes reading and chunking exactly as the
runner does (``ingest.chunks.line_blocks``: pread blocks plus their newline counts); that share is
printed apart. Each contender runs ``--runs`` times (default 3) and the medians are compared; CPU
seconds (ours: all threads; grep: the child's rusage) and the load average are printed beside
them, since wall times on a shared machine swing with its load.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from ingest.chunks import CHUNK_BYTES
from ingest.chunks import line_blocks
from ingest.formats.kernel import FORMAT
from ingest.parsing import parse_file

BENIGN = [
    "IPv6: ADDRCONF(NETDEV_CHANGE): cali{:011x}: link becomes ready",
    (
        "perf: interrupt took too long (2503 > 2500), lowering kernel.perf_event_max_sample_rate "
        "to 79750"
    ),
    "nvidia-nvswitch{}: open (major=510)",
    (
        "EDAC MC0: 1 CE memory read error on CPU_SrcID#0_MC#0_Chan#2_DIMM#0 (channel:2 slot:0 "
        "page:0x{:x})"
    ),
    "xfs filesystem being remounted at /tmp supports timestamps until 2038 (0x7fffffff)",
    (
        "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping "
        "further processing"
    ),
    "docker0: port {}(veth1234abc) entered blocking state",
]
XIDS = [
    (
        "13",
        (
            "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception on (GPC 7, TPC 7, SM 0): "
            "Illegal Instruction Parameter"
        ),
    ),
    (
        "31",
        (
            "pid={}, name=python3, Ch 00000003, intr 10000000. MMU Fault: ENGINE GRAPHICS "
            "GPCCLIENT_T1_0 faulted @ 0x7f_ee000000"
        ),
    ),
    ("79", "pid={}, name=pt_main_thread, GPU has fallen off the bus."),
    ("94", "pid={}, name=python3, Contained ECC error"),
    (
        "48",
        (
            "pid={}, name=python3, An uncorrectable double bit error (DBE) has been detected on "
            "GPU in the framebuffer"
        ),
    ),
    (
        "149",
        (
            "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 "
            "0x00000000)"
        ),
    ),
]
BUS = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


def make_log(path: Path, target_bytes: int, xid_share: float, seed: int = 0) -> tuple[int, int]:
    """Write blocks of lines until the file reaches ``target_bytes``; return (lines, xid lines)."""
    rng = np.random.default_rng(seed)
    t = datetime(2025, 1, 1).timestamp()
    n_lines = n_xid = 0
    with open(path, "w") as fh:
        while fh.tell() < target_bytes:
            out = []
            for _ in range(100_000):
                t += float(rng.exponential(2.0))
                stamp = time.strftime("[%a %b %e %H:%M:%S %Y] ", time.gmtime(t))
                if rng.random() < xid_share:
                    code, rest = XIDS[int(rng.integers(len(XIDS)))]
                    bus = BUS[int(rng.integers(len(BUS)))]
                    out.append(
                        f"{stamp}NVRM: Xid (PCI:0000:{bus}:00): {code}, "
                        f"{rest.format(int(rng.integers(1000, 4_000_000)))}"
                    )
                    n_xid += 1
                else:
                    out.append(
                        stamp
                        + BENIGN[int(rng.integers(len(BENIGN)))].format(int(rng.integers(1 << 40)))
                    )
            fh.write("\n".join(out) + "\n")
            n_lines += len(out)
    return n_lines, n_xid


def _cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def time_grep(path: Path) -> tuple[float, int, float]:
    """(wall seconds, matching lines, grep's CPU seconds)."""
    c0, t0 = _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(
        ["grep", "-c", "NVRM: Xid", str(path)], capture_output=True, text=True, check=False
    )
    return (
        time.perf_counter() - t0,
        int(out.stdout.strip() or 0),
        _cpu(resource.RUSAGE_CHILDREN) - c0,
    )


def time_parse(path: Path) -> tuple[float, int, int, float, float]:
    """Parse as the runner does (``ingest.parsing.parse_file``: pread chunks, newline counts,
    chunks extracted on all cores, then the format's ``merge`` of them; the file read is
    included, as grep's is); also the time of reading and chunking alone, and the parse's CPU
    seconds (every thread of this process)."""
    rows = merged = 0
    c0, t0 = _cpu(resource.RUSAGE_SELF), time.perf_counter()
    with open(path, "rb") as fh:
        for _, res in parse_file(
            fh, path.name, FORMAT, ParseContext(path=str(path), host="bench-node")
        ):
            ev = res.tables.get("hw_events")
            if ev is not None:
                rows += ev.height
                merged += int(ev["count"].sum())
    total, cpu = time.perf_counter() - t0, _cpu(resource.RUSAGE_SELF) - c0
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        for _ in line_blocks(fh, plain=True):
            pass
    return total, rows, merged, time.perf_counter() - t0, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--xid-share", type=float, default=0.01)
    ap.add_argument(
        "--keep", action="store_true", help="keep the generated log (its path is printed)"
    )
    ap.add_argument("--log", type=Path, help="time this log instead of generating one (kept)")
    ap.add_argument(
        "--runs", type=int, default=3, help="timed runs of each contender (medians compared)"
    )
    args = ap.parse_args()
    if args.log:
        path, args.keep = args.log, True
        print(f"log: {path} {path.stat().st_size / 2**20:.0f} MiB")
    else:
        fd, name = tempfile.mkstemp(prefix="bench_kernel_", suffix=".log", dir="/tmp")
        os.close(fd)
        path = Path(name)
        t0 = time.perf_counter()
        n_lines, n_xid = make_log(path, args.mb << 20, args.xid_share)
        print(
            f"log: {path} {path.stat().st_size / 2**20:.0f} MiB, {n_lines:,} lines, {n_xid:,} XID "
            f"lines (generated in {time.perf_counter() - t0:.1f} s)"
        )
    size = path.stat().st_size
    try:
        time_grep(path)  # warm the page cache for both contenders
        # like grep's warm-up run: the first pass also pays one-off imports (pyarrow.compute) and
        # regex compilation; it is printed, the later passes are compared
        cold = time_parse(path)[0]
        greps = [time_grep(path) for _ in range(args.runs)]
        parses = [time_parse(path) for _ in range(args.runs)]
        g, count, g_cpu = (statistics.median(x[i] for x in greps) for i in range(3))
        p, rows, events, reading, p_cpu = (
            statistics.median(x[i] for x in parses) for i in range(5)
        )
        print(
            f"median of {args.runs} runs, load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores"
        )
        print(
            f"grep -c 'NVRM: Xid': {g:.2f} s, {g_cpu:.2f} CPU s ({count:,} lines, "
            f"{size / 2**20 / g:.0f} MiB/s)"
        )
        print(
            f"ingest.formats.kernel.parse:  {p:.2f} s, {p_cpu:.2f} CPU s ({rows:,} hw_events rows "
            f"holding {events:,} "
            f"events, {size / 2**20 / p:.0f} MiB/s)"
        )
        print(f"  reading and chunking alone ({CHUNK_BYTES >> 20} MiB chunks): {reading:.2f} s")
        print(f"  first (cold) pass: {cold:.2f} s")
        print(f"ratio parse/grep: {p / g:.2f}x wall, {p_cpu / g_cpu:.2f}x CPU")
        target("kernel XID extraction within 5x of grep -c", p / g <= 5, f"{p / g:.2f}x")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)


if __name__ == "__main__":
    run_benchmark(main)
