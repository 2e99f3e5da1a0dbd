"""The README's Monte Carlo example, `goodput project --gpus 32768 --spares 16 --method mc`, on a
demo-built home: its wall time and peak memory as a fresh process, and that it says the spare
pool ran out (the demo fleet fails 20x as often as Llama 3: a 32k-GPU job meets ~330 hardware
failures per 24 h repair time against 16 spares, and waits for repaired nodes nearly all its
time).

    .venv/bin/python -m benchmarks.bench_mc_spares [--home DIR] [--runs 3]

Without ``--home`` the home is ``benchmarks/out/cli-start-home`` (``bench_cli_start``'s, built
once by `goodput demo` and reused). The targets are on the fastest run (what the command costs
when it has a core); the median, CPU seconds and the load are printed beside it.
"""

from __future__ import annotations

import json
import os
import statistics

from benchmarks.bench_cli_start import measured
from benchmarks.bench_cli_start import timing_options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target

EXAMPLE = ["project", "--gpus", "32768", "--spares", "16", "--method", "mc"]
LIMIT_S, LIMIT_MB = 5.0, 500.0


def main() -> None:
    n_runs, home = timing_options(__doc__, runs=3)
    argv = ["--home", str(home), *EXAMPLE]
    runs = [measured(argv) for _ in range(n_runs)]
    walls, cpu, rss = [r[0] for r in runs], [r[1] for r in runs], [r[2] for r in runs]
    text = runs[0][3]
    print(f"goodput {' '.join(EXAMPLE)}  (home {home})")
    print("\n".join(line for line in text.splitlines() if not line.startswith("    ")))
    load = os.getloadavg()[0]
    target(
        f"the README's Monte Carlo example answers in < {LIMIT_S:g} s",
        min(walls) < LIMIT_S,
        f"fastest {min(walls):.2f} s, median {statistics.median(walls):.2f} s, CPU "
        f"{statistics.median(cpu):.2f} s, load {load:.1f} on {os.cpu_count()} cores",
    )
    target(
        f"the README's Monte Carlo example peaks under {LIMIT_MB:g} MB",
        max(rss) < LIMIT_MB,
        f"peak RSS {max(rss):.0f} MB",
    )
    said = next((ln for ln in text.splitlines() if "spare pool" in ln), "")
    target("it says the spare pool ran out, and why", "RAN OUT" in said, said.strip())
    obj = json.loads(measured([*argv, "--json"])[3])
    target(
        "--json carries the spare pool's figures",
        obj.get("spares_ran_out") == 1.0 and obj.get("hardware_failures_per_repair", 0) > 16,
        f"spares_ran_out {obj.get('spares_ran_out')}, after "
        f"{obj.get('spares_ran_out_hours') or 0:.2f} h, waiting {obj.get('wait_share') or 0:.1%}, "
        f"{obj.get('hardware_failures_per_repair') or 0:.0f} hardware failures per repair time",
    )


if __name__ == "__main__":
    run_benchmark(main)
