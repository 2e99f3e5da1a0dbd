"""Measured goodput against the truth on simulated fleets: every attempt seen, chain-hours and
goodput of the training chains, Kubernetes and Slurm.

    python -m benchmarks.validate_measured_goodput [--seeds 16] [--days 30]

For each seed, a fleet of 16 nodes (4 on Kubernetes) and one of 128 nodes (32 on Kubernetes)
(``sample_data.simulation.build_fleet``, Llama 3's mix x 60); the Kubernetes files
(pods, events, PyTorchJobs) and the sacct dump are written and ingested into a fresh warehouse
as a user would; the truth is ``sample_data.truth.chain_truth`` (each training chain's
attempts, start-up / restore times and time budget). Per fleet and scheduler:

* attempts seen == attempts in the truth, each with its true start and end (to the second);
* chain-hours (first start to last end) equal the truth within a second per attempt;
* measured goodput, weighted by GPU-hours over the chains, given each chain's true checkpoint
  interval and free saves (the simulator's), within the bound the unknown restore times allow.
  A record does not say how long each restore took (measured goodput assumes 0 at a first start
  and ``RESTART_S`` after a failure; the truth has each attempt's ``overhead_s``). A completed
  attempt's productive time moves by exactly that difference d; a failed attempt's kept work
  moves by one whole interval tau when the shift crosses a checkpoint, which it does with
  probability |d| / tau (the failure falls anywhere in the interval), so its variance is
  tau x |d|. Per fleet the bound is (sum over chains of n_gpus x |sum of d over completed
  attempts| + 4 x sqrt(sum of n_gpus^2 x tau x |d| over failed attempts)) / GPU-hours of wall:
  the certain shift plus four standard deviations of the interval crossings.

Printed beside it (no target): the same goodput under the default assumptions (30 min
interval, 60 s saves), the bias the report's assumed parts carry.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import numpy as np
import polars as pl

from analysis.assumptions import RESTART_S
from analysis.goodput_measured import measure
from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import build_fleet
from sample_data.truth import chain_truth
from sample_data.writers import kubernetes
from sample_data.writers import sacct
from warehouse.store import Warehouse

SIZES = ((16, 4), (128, 32))  # (nodes, of them on Kubernetes)
Z = 4.0  # standard deviations of the checkpoint crossings the bound allows
POINT = 0.01  # printed: the share of fleets within 1 point
SCHEDULERS = ("k8s", "slurm")


def fleet_errors(seed: int, nodes: int, k8s_nodes: int, days: float, work: Path) -> dict:
    """Per scheduler: attempts (seen, true), attempts whose times differ, the largest chain-hour
    difference in seconds per attempt, goodput (measured, true, under the default assumptions)."""
    f = build_fleet(llama3_cause_mix(), nodes=nodes, gpus_per_node=8, days=days, seed=seed,
                    fault_scale=60.0, scrape_interval_s=0, k8s_nodes=k8s_nodes)  # fmt: skip
    out = work / f"fleet-{nodes}-{seed}"
    kubernetes.write(f, out, defaultdict(list))
    sacct.write(f, out / "slurm" / "sacct.txt")
    wh = Warehouse(work / f"home-{nodes}-{seed}")
    reports = ingest_paths(wh, [out / "k8s", out / "slurm"])
    assert all(r.rows_quarantined == 0 for r in reports), [
        r.path for r in reports if r.rows_quarantined
    ]
    attempts = wh.read("job_attempts")
    chains = defaultdict(list)
    for a in f.attempts:
        if a.ckpt_s:
            chains[(a.scheduler, a.job_id)].append(a)
    res = {}
    for sched in SCHEDULERS:
        seen = true = moved = 0
        worst = 0.0
        b = [0.0, 0.0]  # certain shift (GPU-seconds), variance of the crossings (GPU-seconds^2)
        g = {"goodput": [0.0, 0.0], "goodput_true": [0.0, 0.0], "goodput_default": [0.0, 0.0]}
        for (s, job), atts in sorted(chains.items()):
            if s != sched:
                continue
            t = chain_truth(f, atts)
            rows = attempts.filter((pl.col("scheduler") == sched) & (pl.col("job_id") == job))
            seen += rows.height
            true += len(t["attempts"])
            got = sorted(zip(rows["start_time"].to_list(), rows["end_time"].to_list(), strict=True))
            want = [(_t(a["start"]), _t(a["end"])) for a in t["attempts"]]
            moved += sum(x != y for x, y in zip(got, want, strict=False)) + abs(
                len(got) - len(want)
            )
            if not t["wall_s"]:
                continue
            m = measure(rows, t["ckpt_interval_s"], 0.0, RESTART_S).row(0, named=True)
            d = measure(rows).row(0, named=True)
            worst = max(worst, abs(m["wall_hours"] * 3600 - t["wall_s"]) / len(t["attempts"]))
            shift, var = _restore_error(t)
            b[0] += m["n_gpus"] * abs(shift)
            b[1] += m["n_gpus"] ** 2 * var
            w = m["n_gpus"] * m["wall_hours"]
            for key, good in (
                ("goodput", m["goodput"]),
                ("goodput_true", t["goodput"]),
                ("goodput_default", d["goodput"]),
            ):
                g[key][0] += w * good
                g[key][1] += w
        gpu_s = g["goodput"][1] * 3600
        res[sched] = {"seen": seen, "true": true, "moved": moved, "worst_s": worst,
                      "bound": (b[0] + Z * b[1] ** 0.5) / gpu_s if gpu_s else None,
                      **{k: v[0] / v[1] if v[1] else None for k, v in g.items()}}  # fmt: skip
    return res


def _restore_error(truth: dict) -> tuple[float, float]:
    """(certain shift of productive seconds, variance in seconds^2 of the checkpoint crossings)
    that the chain's unknown restore times cause (module docstring)."""
    ended = [a for a in truth["attempts"] if a["end"]]
    shift = var = 0.0
    for i, a in enumerate(ended):
        d = a["overhead_s"] - (RESTART_S if i else 0.0)
        if a["state"] == "COMPLETED":
            shift += d
        else:
            var += truth["ckpt_interval_s"] * abs(d)
    return shift, var


def _t(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s) if s else None


def main() -> None:
    args = options(seeds=16, days=30.0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for nodes, k8s in SIZES:
            for seed in range(args.seeds):
                r = fleet_errors(seed, nodes, k8s, args.days, Path(tmp))
                rows += [{"nodes": nodes, "seed": seed, "scheduler": s, **v} for s, v in r.items()]
    df = pl.DataFrame(rows).with_columns(
        (pl.col("goodput") - pl.col("goodput_true")).alias("error"),
        (pl.col("goodput_default") - pl.col("goodput_true")).alias("default_error"),
    )
    fleets = df.select("nodes", "seed").n_unique()
    print(f"{fleets} fleets ({args.seeds} seeds x {len(SIZES)} sizes, {args.days:g} days)")
    with pl.Config(tbl_rows=10, tbl_cols=-1, tbl_width_chars=250):
        print(
            df.group_by("nodes", "scheduler", maintain_order=True).agg(
                pl.col("seen").sum().alias("attempts seen"),
                pl.col("true").sum().alias("attempts true"),
                pl.col("moved").sum().alias("times differ"),
                pl.col("worst_s").max().round(2).alias("max chain-hour diff s/attempt"),
                pl.col("error").abs().max().alias("max |error|"),
                pl.col("bound").median().alias("median bound"),
                (pl.col("error").abs() / pl.col("bound")).max().alias("max |error| / bound"),
                pl.col("error").mean().alias("mean error"),
                pl.col("default_error").mean().alias("mean error, default assumptions"),
            )
        )
    for sched in SCHEDULERS:
        s = df.filter(pl.col("scheduler") == sched)
        target(
            f"{sched}: attempts seen == attempts in the truth, times equal, over {fleets} fleets",
            s["seen"].sum() == s["true"].sum() and s["moved"].sum() == 0,
            f"{s['seen'].sum():,} seen, {s['true'].sum():,} true, {s['moved'].sum()} with other "
            "times",
        )
        target(
            f"{sched}: chain-hours equal the truth within 1 s per attempt",
            s["worst_s"].max() <= 1.0,
            f"largest difference {s['worst_s'].max():.2f} s per attempt",
        )
        s = s.filter(pl.col("error").is_not_null())
        errs, ratio = s["error"].abs(), (s["error"].abs() / s["bound"])
        target(
            f"{sched}: |measured - true goodput| within the restore-time bound in every fleet",
            bool(s.height) and ratio.max() <= 1.0,
            f"largest |error| / bound {ratio.max():.2f}; |error| max {errs.max():.4f}, median "
            f"{float(np.median(errs.to_numpy())):.4f}, bound median {s['bound'].median():.4f} over "
            f"{s.height} fleets; within {POINT * 100:g} point in {int((errs <= POINT).sum())}",
        )


if __name__ == "__main__":
    run_benchmark(main)
