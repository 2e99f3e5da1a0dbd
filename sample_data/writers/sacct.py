"""`sacct --parsable2 --duplicates --allusers` text (read by ``ingest/formats/sacct/``)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sample_data.model import CLUSTER
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from sample_data.writers.base import alloc
from sample_data.writers.base import nodelist
from sample_data.writers.base import slurm_attempts
from sample_data.writers.base import write_text

SACCT_FIELDS = (
    "JobID|JobIDRaw|JobName|Partition|Account|User|Submit|Start|End|Elapsed|Timelimit|State|"
    "ExitCode|NNodes|AllocCPUS|AllocTRES|Reason|NodeList|Cluster"
)


def elapsed(sec: float) -> str:
    """Slurm Elapsed: D-HH:MM:SS or HH:MM:SS."""
    s = max(0, round(sec))
    d, r = divmod(s, 86400)
    h, r = divmod(r, 3600)
    m, s = divmod(r, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


def _tres(cpus: int, gpus: int, mem_mb: int, nodes: int, billing: bool = True) -> str:
    head = f"billing={cpus}," if billing else ""
    gres = f"gres/gpu={gpus},gres/gpu:h100={gpus}," if gpus else ""
    return f"{head}cpu={cpus},{gres}mem={mem_mb}M,node={nodes}"


class StepEnd(NamedTuple):
    """How a job's ending shows in its steps."""

    state: str  # of the batch and .0 steps
    exit_code: str | None  # of those steps (None: the job's own)
    extern: str  # state of the extern step


# A job the scheduler cancels (time limit, preemption, requeue) cancels its steps with SIGTERM;
# a lost node takes them down with SIGKILL and the extern step with them.
STEP_END = {
    "COMPLETED": StepEnd("COMPLETED", None, "COMPLETED"),
    "FAILED": StepEnd("FAILED", None, "COMPLETED"),
    "OUT_OF_MEMORY": StepEnd("OUT_OF_MEMORY", "0:125", "COMPLETED"),
    "CANCELLED": StepEnd("CANCELLED", "0:15", "COMPLETED"),
    "TIMEOUT": StepEnd("CANCELLED", "0:15", "COMPLETED"),
    "PREEMPTED": StepEnd("CANCELLED", "0:15", "COMPLETED"),
    "REQUEUED": StepEnd("CANCELLED", "0:15", "COMPLETED"),
    "NODE_FAIL": StepEnd("CANCELLED", "0:9", "CANCELLED"),
    "RUNNING": StepEnd("RUNNING", "0:0", "RUNNING"),
}


def _line(values: dict[str, str]) -> str:
    return "|".join(values[k] for k in SACCT_FIELDS.split("|"))


def _job_lines(f: Fleet, a: Attempt) -> list[str]:
    """The attempt's job line, then its ``.batch``, ``.extern`` and ``.0`` step lines (steps
    have no partition or user and are submitted as they start)."""
    cpus, ng, mem = alloc(f, a)
    nn, nl = len(a.nodes), nodelist(tuple(a.nodes))
    shared = {
        "Account": a.user[2],
        "Start": ts(f, a.start),
        "End": ts(f, a.end) if a.end is not None else "Unknown",
        "Elapsed": elapsed((a.end if a.end is not None else f.horizon) - a.start),
        "Cluster": CLUSTER,
    }
    job = {"JobID": a.job_id, "JobIDRaw": str(a.job_raw), "JobName": a.name}
    job |= {"Partition": a.partition, "User": a.user[0], "Submit": ts(f, a.submit)}
    job |= {"State": a.state, "ExitCode": a.exit_code, "NNodes": str(nn), "AllocCPUS": str(cpus)}
    job |= {"Timelimit": elapsed(a.time_limit_min * 60), "Reason": "None"}
    lines = [_line(shared | job | {"AllocTRES": _tres(cpus, ng, mem, nn), "NodeList": nl})]
    end = STEP_END[a.state.split()[0]]
    code = end.exit_code or a.exit_code
    c0 = cpus // nn
    first = (1, c0, _tres(c0, len(a.gpus[0]), mem // nn, 1, False), f.hosts[a.nodes[0]])
    whole = (nn, cpus, _tres(cpus, ng, mem, nn, False), nl)
    steps = (
        ("batch", "batch", end.state, code, first),
        ("extern", "extern", end.extern, "0:0", whole),
        ("0", "torchrun" if a.partition == "train" else "python", end.state, code, whole),
    )
    for sid, name, state, exit_code, (snn, c, tres, snl) in steps:
        step = {"JobID": f"{a.job_id}.{sid}", "JobIDRaw": f"{a.job_raw}.{sid}", "JobName": name}
        step |= {"Partition": "", "User": "", "Submit": ts(f, a.start), "State": state}
        step |= {"ExitCode": exit_code, "NNodes": str(snn), "AllocCPUS": str(c)}
        step |= {"Timelimit": "", "Reason": ""}
        lines.append(_line(shared | step | {"AllocTRES": tres, "NodeList": snl}))
    return lines


def write(f: Fleet, path: Path) -> int:
    """`sacct --parsable2 --duplicates --allusers` with header; job line then its steps."""
    lines = [SACCT_FIELDS]
    for a in slurm_attempts(f):
        lines += _job_lines(f, a)
    write_text(path, "\n".join(lines) + "\n")
    return len(lines) - 1
