"""AIReSim's Table I configuration (tests/fixtures/airesim/config.yaml) in the fleet simulator
(``analysis.fleetsim.airesim``: the same semantics) beside AIReSim itself, in one run.

    .venv/bin/python -m benchmarks.bench_fleetsim_airesim [--replications 30]
        [--airesim DIR --airesim-python PYTHON [--airesim-replications 2]]

``--airesim``: a checkout of karthikp-ubc/airesim (not part of this repository: fetch it
outside it) and a Python that imports its dependency simpy (defaults: the environment's
``AIRESIM_DIR`` and ``AIRESIM_PYTHON``, so ``run_all`` measures it where they are set). Its
replications run one at a time in that Python, the simulator's here in this process, so the
two per-replication times are single-core times taken under the same load.

Targets (issue 43): over the replications, mean wall clock within 2% of the published 9,873 h
and ETTR within 1 point of 62.3%; removing systematic failures (no bad servers, the same
seeds) saves at most 2.3% of the wall clock (as published: to one decimal); a replication at
least 50x faster than AIReSim's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import yaml

from analysis.fleetsim import airesim
from analysis.fleetsim import engine
from analysis.fleetsim.run import repair_law
from analysis.fleetsim.run import seed_of
from analysis.fleetsim.run import t_half
from analysis.fleetsim.run import triage_law
from analysis.fleetsim.scenario import with_knob
from benchmarks.targets import run_benchmark
from benchmarks.targets import target

CONFIG = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "airesim" / "config.yaml"
PUBLISHED_WALL_HOURS, PUBLISHED_ETTR, PUBLISHED_SAVING = 9873.0, 0.623, 0.023
SPEEDUP = 50.0
# one AIReSim replication of the config, timed, as JSON (run in AIReSim's own Python)
AIRESIM_RUN = """
import json, sys, time, yaml
sys.path.insert(0, sys.argv[1])
from airesim.params import Params
from airesim.simulator import Simulator
cfg = yaml.safe_load(open(sys.argv[2]))
p = Params(**{k: v for k, v in cfg.items() if k in Params.__dataclass_fields__})
t = time.perf_counter()
s = Simulator(p, seed=p.seed + int(sys.argv[3])).run()
print(json.dumps({"seconds": time.perf_counter() - t, "wall_hours": s.training_time_hours,
                  "ettr": s.effective_training_ratio, "failures": s.total_failures}))
"""


def fleetsim_runs(spec, rates, n: int) -> tuple[list[dict], float]:
    law, tri = repair_law(spec), triage_law(spec)
    t = time.perf_counter()
    out = [engine.run(spec, rates, law, spec["jobs"], seed_of(spec, i), tri) for i in range(n)]
    return out, (time.perf_counter() - t) / n


def airesim_runs(directory: str, python: str, n: int) -> list[dict]:
    out = []
    for i in range(n):
        res = subprocess.run(
            [python, "-c", AIRESIM_RUN, directory, str(CONFIG), str(i)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(f"AIReSim replication {i}: {out[-1]}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replications", type=int, default=30)
    ap.add_argument(
        "--airesim",
        default=os.environ.get("AIRESIM_DIR"),
        help="a checkout of karthikp-ubc/airesim",
    )
    ap.add_argument("--airesim-python", default=os.environ.get("AIRESIM_PYTHON"),
                    help="a Python with simpy")  # fmt: skip
    ap.add_argument("--airesim-replications", type=int, default=2)
    args = ap.parse_args()
    config = yaml.safe_load(CONFIG.read_text())
    spec, rates = airesim.scenario(config)
    g = spec["jobs"][0]["gpus"]
    n = args.replications
    base, per_rep = fleetsim_runs(spec, rates, n)
    clean, _ = fleetsim_runs(with_knob(spec, "bad_nodes.share", 0.0), rates, n)
    wall = np.array([r[f"wall_hours:{g}"] for r in base])
    ettr = np.array([r[f"ettr:{g}"] for r in base])
    wall0 = np.array([r[f"wall_hours:{g}"] for r in clean])
    saving = 1 - wall0 / wall
    print(f"fleetsim, AIReSim Table I: {n} replications, {per_rep:.2f} s each (one core); "
          f"wall clock {wall.mean():,.1f} h +- {t_half(wall):.1f} (published 9,873), ETTR "
          f"{ettr.mean():.4f} +- {t_half(ettr):.4f} (published 0.623), failures "
          f"{np.mean([r['failures'] for r in base]):,.0f} (systematic "
          f"{np.mean([r['systematic_failures'] for r in base]):,.0f}); without bad servers "
          f"{wall0.mean():,.1f} h: saving {saving.mean():.3%} +- {t_half(saving):.3%}")  # fmt: skip
    off = wall.mean() / PUBLISHED_WALL_HOURS - 1
    target("mean wall clock within 2% of 9,873 h", abs(off) < 0.02,
           f"{wall.mean():,.1f} h, {off:+.2%}")  # fmt: skip
    target("ETTR within 1 point of 62.3%", abs(ettr.mean() - PUBLISHED_ETTR) < 0.01,
           f"{ettr.mean():.2%}")  # fmt: skip
    target("removing systematic failures saves <= 2.3% (to one decimal, as published)",
           round(saving.mean() * 100, 1) <= PUBLISHED_SAVING * 100,
           f"{saving.mean():.3%}")  # fmt: skip
    if not (args.airesim and args.airesim_python):
        target(f"a replication >= {SPEEDUP:g}x faster than AIReSim's", False,
               "not measured: give --airesim DIR (a checkout of karthikp-ubc/airesim) and "
               "--airesim-python (a Python with simpy)")  # fmt: skip
        return
    theirs = airesim_runs(args.airesim, args.airesim_python, args.airesim_replications)
    their_s = float(np.mean([r["seconds"] for r in theirs]))
    print(f"AIReSim: {len(theirs)} replications, {their_s:.1f} s each; wall clock "
          f"{np.mean([r['wall_hours'] for r in theirs]):,.1f} h, ETTR "
          f"{np.mean([r['ettr'] for r in theirs]):.4f}")  # fmt: skip
    target(f"a replication >= {SPEEDUP:g}x faster than AIReSim's", their_s / per_rep >= SPEEDUP,
           f"{their_s / per_rep:.0f}x: {per_rep:.2f} s against {their_s:.1f} s")  # fmt: skip


if __name__ == "__main__":
    run_benchmark(main)
