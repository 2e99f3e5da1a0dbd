"""Fleet simulator speed and memory: the committed 100k-GPU example scenario
(sample_data/fleetsim/example.yaml: 12,500 nodes of 8 GPUs, the Llama 3 failure mix drawn from
its fits' uncertainty, 5% bad nodes, spares, triage with false blame and silent repairs, 40
technicians, retirement, maintenance windows, slots and a queue of fixed-work jobs with
backfill; fail-slow GPUs at the demo fleet's rate and law, replaced an hour after they slow) for
one simulated year, 30 replications (the stopping rule off: all 30 run), on the
cores this process may use.

    .venv/bin/python -m benchmarks.bench_fleetsim [--replications 30] [--workers N]

Targets (issues 33, 43): 30 replications with heterogeneity and a queue < 60 s on 2 cores;
peak RSS (this process or any replication process) < 2 GB.
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from pathlib import Path

from analysis.assumptions import SLOW_DETECT_HOURS
from analysis.fleetsim.run import default_workers
from analysis.fleetsim.run import resolve
from analysis.fleetsim.run import simulate
from analysis.fleetsim.scenario import load
from analysis.fleetsim.scenario import with_knob
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.defaults import FAIL_SLOW_RATE
from sample_data.fail_slow import DURATION_MEDIAN_S
from sample_data.fail_slow import DURATION_SIGMA

EXAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "fleetsim" / "example.yaml"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replications", type=int, default=30)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    spec = load(EXAMPLE)
    n = args.replications
    spec = with_knob(with_knob(spec, "replications.max", n), "replications.min", n)
    # fail-slow GPUs as the demo fleet plants them, found and replaced after an hour
    law = {"mu_log_hours": math.log(DURATION_MEDIAN_S / 3600), "sigma": DURATION_SIGMA}
    for key, value in (("rate_per_1k_gpu_days", FAIL_SLOW_RATE), ("model", "lognormal"),
                       ("params", law), ("detect_hours", SLOW_DETECT_HOURS)):  # fmt: skip
        spec = with_knob(spec, f"fail_slow.{key}", value)
    workers = default_workers() if args.workers is None else args.workers
    inputs = resolve(spec)
    t = time.perf_counter()
    est = simulate(spec, inputs, workers=workers)
    wall = time.perf_counter() - t
    gpus = spec["fleet"]["nodes"] * spec["fleet"]["gpus_per_node"]
    g = est.mean["fleet_goodput"]
    f, h = est.fit_half["fleet_goodput"], est.sim_half["fleet_goodput"]
    fit_share = f * f / (f * f + h * h) if f > 0 else 0.0
    print(f"fleetsim: {gpus:,} GPUs x {spec['horizon_days']:g} days x {est.replications} "
          f"replications on {workers} worker(s) in {wall:.1f} s "
          f"({wall / est.replications:.2f} s per replication-worker slot); "
          f"fleet goodput {g:.4f} [{est.ci_low['fleet_goodput']:.4f}, "
          f"{est.ci_high['fleet_goodput']:.4f}], {est.mean['failures']:,.0f} failures and "
          f"{est.mean['interruptions']:,.0f} interruptions per year; fits "
          f"{fit_share:.0%} of the goodput CI's width; {est.mean['systematic_failures']:,.0f} "
          f"failures from bad nodes; fixed-work jobs of 256 GPUs: wall "
          f"{est.mean.get('wall_hours:256', 0):.2f} h, queue wait "
          f"{est.mean.get('queue_wait_hours:256', 0):.2f} h; GPU-hours lost running slow "
          f"{est.mean.get('lost_gpu_hours:fail_slow', 0):,.0f}")  # fmt: skip
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 2**20  # fmt: skip
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = kids.ru_utime + kids.ru_stime if workers > 1 else time.process_time()
    print(f"CPU {cpu:.1f} s in all ({cpu / est.replications:.2f} s per replication): the wall "
          f"time on {workers} idle cores would be about {cpu / workers:.1f} s")  # fmt: skip
    print(f"peak RSS {rss:.2f} GiB (largest of this process and the replication processes)")
    target(f"100k GPUs x 1 year x {n} replications, bad nodes and a queue, < 60 s "
           f"({workers} workers)", wall < 60, f"{wall:.1f} s")  # fmt: skip
    target("peak RSS < 2 GB", rss < 2.0, f"{rss:.2f} GiB")


if __name__ == "__main__":
    run_benchmark(main)
