"""Pieces every writer shares: atomic-enough text output, Slurm hostlists and allocations, PCI
addresses of the GPUs."""

from __future__ import annotations

import functools
from pathlib import Path

from sample_data.model import CPUS_PER_NODE
from sample_data.model import GPU_PCI_BUS
from sample_data.model import MEM_PER_NODE_MB
from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import host_name


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def hostlist(names: list[str]) -> str:
    """Compress host names into a Slurm hostlist expression, e.g. gpu-node-[001-004,010]."""
    if not names:
        return "None assigned"
    groups: dict[str, list[str]] = {}
    for n in names:
        j = len(n)
        while j > 0 and n[j - 1].isdigit():
            j -= 1
        groups.setdefault(n[:j], []).append(n[j:])
    out = []
    for prefix in sorted(groups):
        nums = sorted(set(groups[prefix]), key=lambda s: (int(s) if s else -1, s))
        if len(nums) == 1:
            out.append(prefix + nums[0])
            continue
        width = len(nums[0])
        ranges, run = [], [int(nums[0])]
        for s in nums[1:]:
            v = int(s)
            if v == run[-1] + 1 and len(s) == width:
                run.append(v)
            else:
                ranges.append(run)
                run = [v]
        ranges.append(run)
        parts = [
            f"{r[0]:0{width}d}" if len(r) == 1 else f"{r[0]:0{width}d}-{r[-1]:0{width}d}"
            for r in ranges
        ]
        out.append(f"{prefix}[{','.join(parts)}]")
    return ",".join(out)


@functools.lru_cache(maxsize=1 << 16)
def nodelist(nodes: tuple[int, ...]) -> str:
    """Hostlist expression of node indices (cached: gang jobs repeat long node sets)."""
    return hostlist([host_name(n) for n in nodes])


def alloc(f: Fleet, a: Attempt) -> tuple[int, int, int]:
    """(cpus, gpus, mem MB) of an attempt: whole nodes for gang jobs, per-GPU share otherwise."""
    G = f.gpus_per_node
    ng = sum(len(g) for g in a.gpus)
    cpus = sum(CPUS_PER_NODE * len(g) // G for g in a.gpus)
    mem = sum(MEM_PER_NODE_MB * len(g) // G for g in a.gpus)
    return cpus, ng, mem


def slurm_attempts(f: Fleet) -> list[Attempt]:
    """Slurm attempts in sacct order (job raw id, then attempt)."""
    return sorted(
        (a for a in f.attempts if a.scheduler == "slurm"), key=lambda a: (a.job_raw, a.attempt)
    )


def pci(g: int) -> str:
    return f"0000:{GPU_PCI_BUS[g]}:00"
