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

import argparse
import json
import os
import statistics
import subprocess
import time

from benchmarks.bench_cli_start import GOODPUT
from benchmarks.bench_cli_start import REPO
from benchmarks.bench_cli_start import add_home_option
from benchmarks.bench_cli_start import demo_home
from benchmarks.targets import run_benchmark
from benchmarks.targets import target

EXAMPLE = ["project", "--gpus", "32768", "--spares", "16", "--method", "mc"]
LIMIT_S, LIMIT_MB = 5.0, 500.0


def measured(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MB, stdout) of one fresh ``goodput`` process."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*GOODPUT, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"goodput {' '.join(argv)} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_home_option(ap)
    ap.add_argument("--runs", type=int, default=3, help="fresh processes (default 3)")
    args = ap.parse_args()
    home = demo_home(args.home)
    argv = ["--home", str(home), *EXAMPLE]
    runs = [measured(argv) for _ in range(args.runs)]
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
