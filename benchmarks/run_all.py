"""Every benchmark at its default size, one after another (``make bench``: ~5 min on 2 cores
for the others, plus bench_fleet_scale's 128-, 512- and 2,048-node fleets, 48-75 min on an idle machine),
then the table of their ``TARGET`` lines. Exits non-zero when a target is missed or a
benchmark fails to run.

    .venv/bin/python -m benchmarks.run_all [--only bench_kernel bench_sacct ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

BENCHMARKS = [
    "bench_sacct", "bench_telemetry", "bench_kernel", "bench_survival", "bench_goodput",
    "validate_attribution", "validate_survival_coverage", "validate_survivor_inventory",
    "validate_claims",
    "bench_fleet_scale", "bench_cli_start", "bench_ui_vs_cli",
]  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="+", choices=BENCHMARKS, default=BENCHMARKS)
    args = ap.parse_args()
    verdicts, failed = [], 0
    for name in args.only:
        print(f"\n=== benchmarks.{name}", flush=True)
        t0 = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-m", f"benchmarks.{name}"], stdout=subprocess.PIPE, text=True, check=False
        )
        print(run.stdout, end="", flush=True)
        lines = [ln for ln in run.stdout.splitlines() if ln.startswith("TARGET ")]
        if run.returncode and not any(" FAIL: " in ln for ln in lines):
            lines.append(f"TARGET FAIL: benchmarks.{name} exited with status {run.returncode}")
        failed += run.returncode != 0
        verdicts += [f"{name:28s} {ln.removeprefix('TARGET ')}" for ln in lines]
        print(f"({time.perf_counter() - t0:.0f} s)")
    print("\n=== targets")
    print("\n".join(verdicts))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
