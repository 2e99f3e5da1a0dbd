"""Training jobs' own logs to ``training_steps``: one row per logged step (or logging interval)
with its time per iteration, for the step-time analysis (``analysis.slowness``). Also fills
``step_timers`` (Megatron's per-operation timers), ``rank_scores`` (straggler reports) and
``checkpoints`` (the saves the log records, read as the ``checkpoints`` format reads them).

Step lines:
- Megatron-LM / NeMo 1 (``training_log``): ``[<time>] iteration N/ M | consumed samples: ... |
  elapsed time per iteration (ms): X[/mean] | throughput per GPU (TFLOP/s/GPU): T | ...``, with
  or without the leading time (older versions print none) and ``/infinity`` totals. X is the
  mean over the logging interval.
- NeMo 2 / Lightning (``MegatronProgressBar``): ``Training epoch E, iteration I/N | ... |
  global_step: G | ... | train_step_timing in s: X``; the step is ``global_step`` (``iteration``
  when absent).
- torchtitan: ``[rank0]:[titan] <time> - root - INFO - step: N  loss: ...  tps: 5,856  tflops:
  339.16  mfu: ...``; the time per step is the time between two step lines over the steps
  between them (none for the first line).
``steps`` is the iteration less the previous step line's: the interval a line covers (null on a
log's first line and where the iteration goes back, a restart).

Timers (Megatron ``--timing-log-level``; a line's timers belong to the step line before it):
``time (ms) | name: X | ...`` (older versions: one value per timer), ``(min, max) time across
ranks (ms):`` then ``    name ......: (min, max)`` lines, ``max time across ranks (ms):`` then
``    name ......: max``, and ``times across ranks (ms):`` then ``  name:`` and ``     rank  R:
X`` lines (``--timing-log-option all``: one row per rank).

Straggler reports of the NVIDIA resiliency extension (``StragglerDetectionCallback``, NeMo and
Megatron-Bridge): ``GPU relative performance:`` / ``GPU individual performance:`` followed by
``Worst|Best performing K/N ranks:`` and ``  Rank=R Node=H Score=S`` lines; the report's time is
the timestamp on its header or the line before it (the logger's prefix), else the last one
before it.

Lines may carry torchrun's ``[rankN]:`` / ``[defaultN]:`` prefix. Times are read as the
``checkpoints`` format reads them (zone-less ones in ``ctx.tz``; the log's order places a
repeated DST hour); a step line without one keeps a null ``time`` (its step time still counts),
a timer or score row takes its step line's or report's time. The job is the file's
``SLURM_JOB_ID=`` line, else its Slurm output name; the host ``ctx.host``, else a host the
output name carries after the job (``train-81234-gpu-node-007.out``, announced as taken from the
file name).

Records: every step line (a row of ``training_steps`` or quarantined), and every timer value,
score or checkpoint save that is rejected; the stored timers, scores and saves are rows of their
own tables beside the steps. A record is quarantined for what is wrong with it: an unreadable
step line, a timer entry or score that is not a number, a save without a timestamp, a time that
is implausible or falls in a DST gap, a file that names no job. Other lines (the frameworks'
chatter) are not records. Large files arrive in chunks: ``extract`` classifies each chunk's
lines and ``merge`` finishes them as one file, so a block cut by a chunk boundary stays whole.
"""

from __future__ import annotations

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult

from .lines import extract
from .records import finish
from .sniff import detect as detect  # FormatSpec.declare finds it by this name


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    return finish([extract(data, ctx)], ctx)


def merge(parts: list[pl.DataFrame], ctx: ParseContext) -> ParseResult:
    return finish(parts, ctx)


FORMAT = FormatSpec.declare(
    globals(),
    primary="training_steps",
    description=(
        "training job logs: Megatron-LM / NeMo / torchtitan step lines, Megatron timers, "
        "straggler reports (NVIDIA resiliency extension), checkpoint saves"
    ),
    line_oriented=True,
)
