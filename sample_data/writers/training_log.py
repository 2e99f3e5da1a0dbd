"""Training logs as the frameworks print them (what ``ingest/formats/training_log/`` reads), from
the step times of ``sample_data.slow_steps``: Megatron-LM's ``training_log`` lines (and, for a
job with ranks, its ``times across ranks (ms)`` compute timers) or torchtitan's step lines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from sample_data.slow_steps import StepJob
from sample_data.slow_steps import log_lines
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
