"""Fleet simulator speed and memory: the committed 100k-GPU example scenario
(sample_data/fleetsim/example.yaml: 12,500 nodes of 8 GPUs, the Llama 3 failure mix, spares,
triage with false blame, 40 technicians, retirement, maintenance windows) for one simulated
year, 30 replications (the stopping rule off: all 30 run), on the cores this process may use.

    .venv/bin/python -m benchmarks.bench_fleetsim [--replications 30] [--workers N]

Targets (issue 33): 30 replications < 60 s on 2 cores; peak RSS (this process or any
replication process) < 2 GB.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from analysis.fleetsim.run import default_workers
from analysis.fleetsim.run import resolve
from analysis.fleetsim.run import simulate
from analysis.fleetsim.scenario import load
from analysis.fleetsim.scenario import with_knob
from benchmarks.targets import run_benchmark
from benchmarks.targets import target

EXAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "fleetsim" / "example.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replications", type=int, default=30)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    spec = load(EXAMPLE)
    n = args.replications
    spec = with_knob(with_knob(spec, "replications.max", n), "replications.min", n)
    workers = default_workers() if args.workers is None else args.workers
    inputs = resolve(spec)
    t = time.perf_counter()
    est = simulate(spec, inputs, workers=workers)
    wall = time.perf_counter() - t
    gpus = spec["fleet"]["nodes"] * spec["fleet"]["gpus_per_node"]
    g = est.mean["fleet_goodput"]
    print(f"fleetsim: {gpus:,} GPUs x {spec['horizon_days']:g} days x {est.replications} "
          f"replications on {workers} worker(s) in {wall:.1f} s "
          f"({wall / est.replications:.2f} s per replication-worker slot); "
          f"fleet goodput {g:.4f} [{est.ci_low['fleet_goodput']:.4f}, "
          f"{est.ci_high['fleet_goodput']:.4f}], {est.mean['failures']:,.0f} failures and "
          f"{est.mean['interruptions']:,.0f} interruptions per year")  # fmt: skip
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20  # fmt: skip
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = kids.ru_utime + kids.ru_stime if workers > 1 else time.process_time()
    print(f"CPU {cpu:.1f} s in all ({cpu / est.replications:.2f} s per replication): the wall "
          f"time on {workers} idle cores would be about {cpu / workers:.1f} s")  # fmt: skip
    print(f"peak RSS {rss:.2f} GiB (largest of this process and the replication processes)")
    target(f"100k GPUs x 1 year x {n} replications < 60 s ({workers} workers)", wall < 60,
           f"{wall:.1f} s")  # fmt: skip
    target("peak RSS < 2 GB", rss < 2.0, f"{rss:.2f} GiB")


if __name__ == "__main__":
    run_benchmark(main)
