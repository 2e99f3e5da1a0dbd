"""DCGM text ingest speed against prometheus_client's parser, and streaming a big scrape directory.

    python -m benchmarks.bench_telemetry [--samples N] [--dir-gb G] [--keep]

1. Parses the same dcgm-exporter text (N sample lines, realistic labels) with
   ``ingest.formats.dcgm.parse`` and with
   ``prometheus_client.parser.text_string_to_metric_families``
   (fully consumed) and prints samples/s for both and the ratio (target >= 20x).
2. Writes a G GB scrape directory under /tmp (many hosts, concatenated scrapes with ms
   timestamps, 256 MB files so the runner streams them in chunks), ingests it with
   ``ingest.runner.ingest_paths`` into a scratch warehouse and prints rows/s and the peak RSS
   of the process (ru_maxrss; target < 1.5 GB). The directory and warehouse are deleted
   afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
import zlib
from datetime import datetime
from pathlib import Path

import numpy as np

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.base import ParseContext
from ingest.formats.dcgm import parse
from ingest.runner import ingest_paths
from sample_data.model import GPU_MODEL
from sample_data.writers.dcgm import BLANK_SENTINEL
from sample_data.writers.dcgm import DCGM_METRICS
from warehouse.store import Warehouse

# dcgm-exporter's default counters file, as captured (provenance beside it)
DEFAULT_COUNTERS = (
    Path(__file__).resolve().parent.parent
    / "tests" / "fixtures" / "dcgm" / "dcgm-exporter__default-counters.csv"
)  # fmt: skip


def exporter_metrics() -> tuple[tuple[str, str, str], ...]:
    """The sample fleet's dcgm-exporter metrics, then the rest of the exporter's default set
    (its gauges and counters): (name, type, help)."""
    known = {name for name, _, _ in DCGM_METRICS}
    rows = (
        tuple(field.strip() for field in line.split(",", 2))
        for line in DEFAULT_COUNTERS.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    extra = tuple(r for r in rows if r[1] in ("gauge", "counter") and r[0] not in known)
    return (*DCGM_METRICS, *extra)


METRICS = exporter_metrics()
GPUS = 8


def scrape_text(host: str, t_ms: int, rng: np.random.Generator, blank: bool = False) -> str:
    """One /metrics scrape of an 8-GPU host, Hostname/pod labels and ms timestamps included."""
    out = []
    labels = [
        f'gpu="{g}",UUID="GPU-{zlib.crc32(f"{host}/{g}".encode()):08x}-1a2b-3c4d-5e6f-{g:012x}",'
        f'pci_bus_id="00000000:{0x18 + g:02X}:00.0",device="nvidia{g}",modelName="{GPU_MODEL}",'
        f'Hostname="{host}",container="pytorch",namespace="training",pod="llm-worker-{g}"'
        for g in range(GPUS)
    ]
    vals = rng.integers(0, 2000, (len(METRICS), GPUS))
    for m, (name, typ, hlp) in enumerate(METRICS):
        out.append(f"# HELP {name} {hlp}")
        out.append(f"# TYPE {name} {typ}")
        for g in range(GPUS):
            v = BLANK_SENTINEL if blank and name == "DCGM_FI_DEV_MEMORY_TEMP" else str(vals[m, g])
            out.append(f"{name}{{{labels[g]}}} {v} {t_ms + m}")
    return "\n".join(out) + "\n"


def make_text(n_samples: int, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    per = len(METRICS) * GPUS
    parts = [
        scrape_text(f"gpu-node-{i % 64:03d}", 1_714_000_000_000 + 30_000 * i, rng, blank=i % 7 == 0)
        for i in range(n_samples // per)
    ]
    return "".join(parts)


def bench_parser(n_samples: int, repeat: int = 3) -> None:
    """Wall-clock samples/s (best of ``repeat`` for ours, one pass of prometheus_client, which is
    slow) and CPU seconds (all threads) for both: on a shared machine wall time is noisy and
    our multi-threaded parser suffers most from contention, so both views are printed."""
    from prometheus_client.parser import text_string_to_metric_families

    text = make_text(n_samples)
    data = text.encode()
    ctx = ParseContext(path="bench.prom", time=datetime(2024, 5, 1))
    parse(data[:100_000], ctx)  # warm-up (regex compilation, thread pool)
    t_ours, c_ours = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        res = parse(data, ctx)
        t_ours = min(t_ours, time.perf_counter() - t0)
        c_ours = min(c_ours, time.process_time() - c0)
    n_ours = res.tables["gpu_samples"].height
    t0, c0 = time.perf_counter(), time.process_time()
    n_ref = sum(len(fam.samples) for fam in text_string_to_metric_families(text))
    t_ref, c_ref = time.perf_counter() - t0, time.process_time() - c0
    print(f"text: {len(data) / 1e6:.1f} MB, {n_ours:,} samples (prometheus_client saw {n_ref:,})")
    print(f"{'':32s}{'samples/s (wall)':>18s}{'samples per CPU-s':>20s}")
    print(f"{'ingest.formats.dcgm.parse':32s}{n_ours / t_ours:>18,.0f}{n_ours / c_ours:>20,.0f}")
    print(f"{'prometheus_client text parser':32s}{n_ref / t_ref:>18,.0f}{n_ref / c_ref:>20,.0f}")
    speedup = (n_ours / t_ours) / (n_ref / t_ref)
    print(
        f"speedup: {speedup:.1f}x wall, {(n_ours / c_ours) / (n_ref / c_ref):.1f}x per CPU-second"
    )
    target("DCGM text parse >= 20x prometheus_client", speedup >= 20, f"{speedup:.1f}x wall")


def write_dir(root: Path, gb: float, file_mb: int = 256) -> int:
    """Scrape files of about file_mb MB each until gb GB are written; returns bytes written."""
    rng = np.random.default_rng(1)
    goal, written, i = int(gb * 1e9), 0, 0
    block = "".join(
        scrape_text(f"gpu-node-{k:03d}", 1_714_000_000_000 + 30_000 * k, rng) for k in range(200)
    )
    hosts = 0
    while written < goal:
        host = f"gpu-node-{hosts:04d}"
        path = root / host / "scrapes.prom"
        path.parent.mkdir(parents=True, exist_ok=True)
        size = min(file_mb << 20, goal - written)
        reps = max(1, size // len(block))
        with open(path, "w") as fh:
            for r in range(reps):
                fh.write(block)
                fh.write(f"# scrape {host} {r}\n")
                i += 1
        written += path.stat().st_size
        hosts += 1
    return written


def reset_peak_rss() -> float:
    """Reset the kernel's peak-RSS mark (VmHWM) so the ingest is measured alone; returns the
    current RSS in MB."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # not Linux / not permitted: the peak then includes earlier work
    return _proc_status_mb("VmRSS")


def peak_rss_mb() -> float:
    hwm = _proc_status_mb("VmHWM")
    return hwm if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _proc_status_mb(field: str) -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def bench_directory(gb: float, keep: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="dcgm_bench_dir_", dir="/tmp"))
    home = Path(tempfile.mkdtemp(prefix="dcgm_bench_wh_", dir="/tmp"))
    try:
        t0 = time.perf_counter()
        nbytes = write_dir(root, gb)
        print(
            f"wrote {nbytes / 1e9:.2f} GB of scrapes to {root} in {time.perf_counter() - t0:.0f} s"
        )
        rss0 = reset_peak_rss()
        wh = Warehouse(home)
        t0 = time.perf_counter()
        reports = ingest_paths(wh, [root], fmt="dcgm", ctx=ParseContext(cluster="bench"))
        dt = time.perf_counter() - t0
        rows = sum(r.rows_ok for r in reports)
        quarantined = sum(r.rows_quarantined for r in reports)
        peak = peak_rss_mb()
        print(
            f"ingested {len(reports)} files, {rows:,} samples ({quarantined} quarantined) in "
            f"{dt:.0f} s: {rows / dt:,.0f} samples/s, {nbytes / dt / 1e6:.0f} MB/s"
        )
        print(f"peak RSS during ingest: {peak:,.0f} MB (RSS before: {rss0:,.0f} MB)")
        target(
            f"{gb:g} GB scrape directory ingest peak RSS < 1536 MB", peak < 1536, f"{peak:,.0f} MB"
        )
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
            shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--samples", type=int, default=300_000, help="sample lines in the speed test (0 = skip)"
    )
    ap.add_argument(
        "--dir-gb", type=float, default=2.0, help="size of the scrape directory (0 = skip)"
    )
    ap.add_argument(
        "--keep", action="store_true", help="keep the generated directory and warehouse"
    )
    args = ap.parse_args()
    if args.samples > 0:
        bench_parser(args.samples)
    if args.dir_gb > 0:
        bench_directory(args.dir_gb, args.keep)


if __name__ == "__main__":
    run_benchmark(main)
