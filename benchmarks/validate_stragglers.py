"""The what-if analysis of per-operation traces (``analysis.slowness.whatif``) on ByteDance's
three published straggler traces (``../shared/datasets/stragglers``), against the paper's
per-trace results (J. Lin et al., OSDI '25, arXiv 2505.05713): slowdown S within 5% and the
same worker-vs-stage verdict, and the analysis of the largest trace in < 60 s on 2 cores.

    python -m benchmarks.validate_stragglers [--datasets DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

from analysis.slowness.whatif import analyse
from analysis.slowness.whatif import read_trace
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from benchmarks.validate_public_datasets import default_datasets

# trace -> (S, M_W, M_S, the verdict the paper reads from them)
PUBLISHED = {
    "AR": (1.973, 1.002, -0.001, "worker"),
    "SE": (1.537, 0.025, 0.688, "stage"),
    "ST": (1.179, 0.031, 1.219, "stage"),
}
WITHIN = 0.05
LARGEST_S = 60.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int | None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--datasets", type=Path, default=default_datasets(), help="folder with stragglers/"
    )
    args = ap.parse_args()
    folder = args.datasets / "stragglers" if args.datasets else None
    if folder is None or not (folder / "trace-AR.parquet").is_file():
        print("validate_stragglers: no stragglers/trace-*.parquet; pass --datasets DIR")
        return 2
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print("trace  rows      S (paper)       M_W (paper)     M_S (paper)     verdict   wall    CPU")
    timings = {}
    for name, (s_pub, mw_pub, ms_pub, verdict) in PUBLISHED.items():
        path = folder / f"trace-{name}.parquet"
        t0, c0 = time.perf_counter(), _cpu()
        trace = read_trace(path)
        res = analyse(trace)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        timings[name] = (trace.height, wall, cpu)
        print(
            f"{name:5}  {trace.height:7,}  {res.slowdown:.3f} ({s_pub:.3f})  "
            f"{res.worker_share:6.3f} ({mw_pub:6.3f})  {res.stage_share:6.3f} ({ms_pub:6.3f})  "
            f"{res.verdict:8}  {wall:5.2f}s  {cpu:5.2f}s"
        )
        target(
            f"{name}: S within {WITHIN:.0%} of the published {s_pub}",
            abs(res.slowdown / s_pub - 1) <= WITHIN,
            f"{res.slowdown:.3f}, {res.slowdown / s_pub - 1:+.2%}",
        )
        target(
            f"{name}: verdict {verdict} as the paper's",
            res.verdict == verdict,
            f"{res.verdict}: M_W {res.worker_share:.3f}, M_S {res.stage_share:.3f}",
        )
    largest = max(timings, key=lambda n: timings[n][0])
    rows, wall, cpu = timings[largest]
    target(
        f"analysis of the largest trace ({largest}, {rows:,} operations) < {LARGEST_S:.0f} s",
        wall < LARGEST_S,
        f"{wall:.2f} s wall, {cpu:.2f} CPU-s, load {os.getloadavg()[0]:.1f}",
    )
    return None


if __name__ == "__main__":
    run_benchmark(main)
