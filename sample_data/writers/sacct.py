"""`sacct --parsable2 --duplicates --allusers` text (read by ``ingest/formats/sacct.py``)."""

from __future__ import annotations

from pathlib import Path

from sample_data.model import CLUSTER, Fleet, ts
from sample_data.writers.base import alloc, nodelist, slurm_attempts, write_text

SACCT_FIELDS = (
    "JobID|JobIDRaw|JobName|Partition|Account|User|Submit|Start|End|Elapsed|State|"
    "ExitCode|NNodes|AllocCPUS|AllocTRES|NodeList|Cluster"
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


STEP_STATE = {  # job state -> (batch/.0 state, step exit code, extern state)
    "COMPLETED": ("COMPLETED", None, "COMPLETED"),
    "FAILED": ("FAILED", None, "COMPLETED"),
    "OUT_OF_MEMORY": ("OUT_OF_MEMORY", "0:125", "COMPLETED"),
    "CANCELLED": ("CANCELLED", "0:15", "COMPLETED"),
    "TIMEOUT": ("CANCELLED", "0:15", "COMPLETED"),
    "PREEMPTED": ("CANCELLED", "0:15", "COMPLETED"),
    "REQUEUED": ("CANCELLED", "0:15", "COMPLETED"),
    "NODE_FAIL": ("CANCELLED", "0:9", "CANCELLED"),
    "RUNNING": ("RUNNING", "0:0", "RUNNING"),
}


def write(f: Fleet, path: Path) -> int:
    """`sacct --parsable2 --duplicates --allusers` with header; job line then its steps."""
    H = f.horizon
    lines = [SACCT_FIELDS]
    for a in slurm_attempts(f):
        cpus, ng, mem = alloc(f, a)
        hosts = [f.hosts[n] for n in a.nodes]
        nl = nodelist(tuple(a.nodes))
        end = ts(f, a.end) if a.end is not None else "Unknown"
        el = elapsed((a.end if a.end is not None else H) - a.start)
        lines.append(
            "|".join(
                [
                    a.job_id,
                    str(a.job_raw),
                    a.name,
                    a.partition,
                    a.user[2],
                    a.user[0],
                    ts(f, a.submit),
                    ts(f, a.start),
                    end,
                    el,
                    a.state,
                    a.exit_code,
                    str(len(a.nodes)),
                    str(cpus),
                    _tres(cpus, ng, mem, len(a.nodes)),
                    nl,
                    CLUSTER,
                ]
            )
        )
        st, sec, ext = STEP_STATE[a.state.split()[0]]
        sec = sec or a.exit_code
        c0, g0, m0 = cpus // len(a.nodes), len(a.gpus[0]), mem // len(a.nodes)
        steps = [
            ("batch", "batch", st, sec, 1, c0, _tres(c0, g0, m0, 1, False), hosts[0]),
            (
                "extern",
                "extern",
                ext,
                "0:0",
                len(hosts),
                cpus,
                _tres(cpus, ng, mem, len(hosts), False),
                nl,
            ),
            (
                "0",
                "torchrun" if a.partition == "train" else "python",
                st,
                sec,
                len(hosts),
                cpus,
                _tres(cpus, ng, mem, len(hosts), False),
                nl,
            ),
        ]
        for sid, sname, sst, sec_, nn, c, tres, snl in steps:
            lines.append(
                "|".join(
                    [
                        f"{a.job_id}.{sid}",
                        f"{a.job_raw}.{sid}",
                        sname,
                        "",
                        a.user[2],
                        "",
                        ts(f, a.start),
                        ts(f, a.start),
                        end,
                        el,
                        sst,
                        sec_,
                        str(nn),
                        str(c),
                        tres,
                        snl,
                        CLUSTER,
                    ]
                )
            )
    write_text(path, "\n".join(lines) + "\n")
    return len(lines) - 1
