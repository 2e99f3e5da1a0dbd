"""Training logs as the frameworks print them (what ``ingest/formats/training_log/`` reads), from
the step times of ``sample_data.slow_steps``: Megatron-LM's ``training_log`` lines (and, for a
job with ranks, its ``times across ranks (ms)`` compute timers) or torchtitan's step lines; and
the logs of a simulated fleet's training jobs (``write_fleet``)."""

from __future__ import annotations

import gzip
import math
from dataclasses import replace
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import numpy as np
import polars as pl

from sample_data import fail_slow
from sample_data.slow_steps import StepJob
from sample_data.slow_steps import log_lines
from sample_data.slow_steps import step_durations
from sample_data.writers.base import write_text


def megatron(job: StepJob, lines: pl.DataFrame) -> str:
    out = [f"SLURM_JOB_ID={job.job_id}"]
    factor = _rank_factor(job, lines)
    for (it, t, s), f in zip(lines.iter_rows(), factor, strict=True):
        ms = s * 1000
        out.append(
            f" [{t:%Y-%m-%d %H:%M:%S}] iteration {it:8d}/{job.n_steps:8d} | consumed samples: "
            f"{it * 512:12d} | elapsed time per iteration (ms): {ms:.1f} | throughput per GPU "
            f"(TFLOP/s/GPU): {400 * job.base_step_s / s:.1f} | learning rate: 2.999E-04 | "
            "global batch size:   512 | lm loss: 6.113201E+00 | loss scale: 1.0 | grad norm: "
            "1.021 | number of skipped iterations:   0 | number of nan iterations:   0 |"
        )
        if job.ranks:
            out.append("times across ranks (ms):")
            out.append("  forward-compute:")
            compute = 0.3 * job.base_step_s * 1000
            out += [
                f"     rank {r:2d}: {compute * (f if r == job.slow_rank else 1.0):.2f}"
                for r in range(job.ranks)
            ]
    return "\n".join(out) + "\n"


def torchtitan(job: StepJob, lines: pl.DataFrame) -> str:
    out = []
    for it, t, s in lines.iter_rows():
        stamp = f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"
        tps, tflops = 4096 / s, 300 * job.base_step_s / s
        out.append(
            f"[rank0]:[titan] {stamp} - root - INFO - step: {it}  loss:  3.24405  grad_norm:  "
            f"0.8319  memory: 49.66GiB(52.28%)  tps: {tps:,.0f}  tflops: {tflops:.2f}  mfu: 30.00%"
        )
    return "\n".join(out) + "\n"


def _rank_factor(job: StepJob, lines: pl.DataFrame) -> np.ndarray:
    """Per line, the slowdown of the job's slow rank's compute (its episodes' factor)."""
    factor = np.ones(lines.height)
    it = lines["iteration"].to_numpy()
    for ep in job.episodes:
        inside = (it > ep.first_step) & (it - job.log_interval < ep.first_step + ep.steps)
        factor[inside] = ep.factor
    return factor


def write(job: StepJob, folder: Path) -> Path:
    """The job's log as Slurm writes it: ``<folder>/train-<job>.out``."""
    lines = log_lines(job)
    text = torchtitan(job, lines) if job.framework == "torchtitan" else megatron(job, lines)
    path = folder / f"train-{job.job_id}.out"
    write_text(path, text)
    return path


def write_fleet(f, folder: Path) -> set[str]:
    """The logs of a simulated fleet's Slurm training jobs (``train-<job>.out.gz``, each attempt
    appended as a requeue appends to its output file, restarting at its last checkpoint's
    iteration), their steps slowed over the fleet's fail-slow episodes on the GPUs they held
    (``sample_data.fail_slow``); returns the jobs written. Each job's step time, noise and
    layout come from a generator of its own."""
    chains: dict[str, list] = {}
    for a in f.attempts:
        if a.scheduler == "slurm" and a.ckpt_s:
            chains.setdefault(a.job_id, []).append(a)
    for job_id, atts in sorted(chains.items()):
        text = _job_log(f, sorted(atts, key=lambda a: a.attempt))
        if text:
            path = folder / f"train-{job_id}.out.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(gzip.compress(text.encode(), compresslevel=6, mtime=0))
    return {j for j in chains if (folder / f"train-{j}.out.gz").exists()}


def _job_log(f, atts: list) -> str:
    first = atts[0]
    rng = np.random.default_rng(np.random.SeedSequence([f.seed, 17, first.job_raw]))
    base = float(rng.uniform(2.0, 8.0))
    noise = float(rng.uniform(0.005, 0.02))
    framework = str(rng.choice(["megatron", "torchtitan"]))
    interval = max(1, round(f.step_log_s / base))
    start = datetime.fromisoformat(f.start)
    spans = [((a.end if a.end is not None else f.horizon) - a.start - a.overhead_s) for a in atts]
    planned = int(sum(max(s, 0.0) for s in spans) / base)
    out, it0 = [], 0
    for a, compute_s in zip(atts, spans, strict=True):
        if compute_s <= 0:
            continue
        s0 = a.start + a.overhead_s
        job = StepJob(
            job_id=a.job_id,
            n_gpus=sum(len(g) for g in a.gpus),
            start=start + timedelta(seconds=s0),
            n_steps=int(compute_s / (base * 0.9)) + 10,
            base_step_s=base,
            noise=noise,
            log_interval=interval,
            framework=framework,
            seed=int(rng.integers(2**31)),
        )
        healthy, actual = step_durations(job)
        segs = [
            (s - s0, e - s0, fac) for s, e, fac in fail_slow.segments(a, f.slow_episodes, f.horizon)
        ]
        actual = healthy * _factors(healthy, actual - healthy, segs) + (actual - healthy)
        ends = np.cumsum(actual)
        n = int(np.searchsorted(ends, compute_s, side="right")) // interval * interval
        if n == 0:
            continue
        per_line = actual[:n].reshape(-1, interval)
        lines = pl.DataFrame(
            {
                "iteration": it0 + np.arange(1, n // interval + 1) * interval,
                "time": [
                    job.start + timedelta(seconds=float(t)) for t in np.cumsum(per_line.sum(axis=1))
                ],
                "step_s": per_line.mean(axis=1),
            }
        )
        shown = replace(job, n_steps=planned)
        out.append(
            torchtitan(shown, lines) if framework == "torchtitan" else megatron(shown, lines)
        )
        if a.state != "COMPLETED":  # the next attempt restores the last checkpoint's iteration
            kept = math.floor(compute_s / a.ckpt_s) * a.ckpt_s
            it0 += int(np.searchsorted(ends, kept, side="right"))
    return "".join(out)


def _factors(healthy: np.ndarray, extra: np.ndarray, segs: list) -> np.ndarray:
    """Each step's slowdown: the steps running over each (start, end, factor) segment (seconds
    from the first step's start, in time order) at its factor; ``extra``: stalls and saves,
    which no slowdown stretches."""
    factor = np.ones(healthy.size)
    for lo, hi, fac in segs:
        i0 = int(np.searchsorted(np.cumsum(healthy * factor + extra), lo))
        factor[i0:] = fac
        i1 = int(np.searchsorted(np.cumsum(healthy * factor + extra), hi))
        factor[i1:] = 1.0
    return factor
