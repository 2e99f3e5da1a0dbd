"""Fail-slow episodes planted in the simulated fleet, and what they leave behind.

An episode is one GPU running slow from a start to an end: throttled (its SM clock held at a
known ``ratio`` of its max, with the clock-event reasons NVML sets for its cause,
``warehouse.signals``) or on a PCIe link trained down to half its width. Episodes start on
each GPU as a Poisson process at ``rate`` per 1,000 GPU-days, whatever the GPU does, and last a
lognormal time (median ``DURATION_MEDIAN_S``, clipped to a minute .. ten hours: Alibaba's
fail-slows last from under a minute to about ten hours). A synchronous job holding the GPU runs
at its speed: ``factor`` = 1 / ratio for a throttle, a drawn 1.05 - 1.3 for a link (the job's
share of time in host-device transfers), the largest factor where two episodes meet. Over an
overlap ``D`` the job loses ``D x (1 - 1 / factor)`` of work: the truth, per attempt, in
``ground_truth.json`` (``fail_slow``). The draws come from their own generators, so a fleet
without episodes (``rate`` 0) is the fleet it always was.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from sample_data.model import Attempt
from sample_data.model import Fleet
from sample_data.model import ts
from warehouse.signals import BIT
from warehouse.signals import cause

DURATION_MEDIAN_S = 5400.0
DURATION_SIGMA = 1.0  # of the log of the duration
MIN_S, MAX_S = 60.0, 10 * 3600.0
MAX_CLOCK_MHZ = 1980.0  # an H100 SXM's max SM clock
IDLE_CLOCK_MHZ = 345.0
LINK_WIDTH = 16
POWER_CAP_SHARE = 0.3  # scrapes of a busy GPU at its power limit (SW power cap, clock 88-96%)
# kind -> (reasons set, share of episodes, range of the SM clock ratio)
KINDS: dict[str, tuple[int, float, tuple[float, float]]] = {
    "hw_thermal": (BIT["hw_thermal_slowdown"] | BIT["hw_slowdown"], 0.3, (0.4, 0.6)),
    "power_brake": (BIT["hw_power_brake_slowdown"] | BIT["hw_slowdown"], 0.2, (0.4, 0.6)),
    "hw_slowdown": (BIT["hw_slowdown"], 0.15, (0.45, 0.65)),
    "sw_thermal": (BIT["sw_thermal_slowdown"], 0.25, (0.7, 0.9)),
    "pcie": (0, 0.1, (0.5, 0.5)),  # the link's width ratio: x8 of x16
}
PCIE_FACTOR = (1.05, 1.3)


@dataclass(frozen=True)
class Episode:
    node: int
    gpu: int
    start: float  # seconds from the fleet's start
    end: float
    kind: str
    ratio: float  # SM clock over its max (a throttle); link width over its max (pcie)
    factor: float  # slowdown of a job holding the GPU

    @property
    def reasons(self) -> int:
        return KINDS[self.kind][0]


def draw(f: Fleet, rate_per_1k_gpu_days: float, seed: int) -> list[Episode]:
    """Every episode of the fleet's window, in time order (its own generator: ``seed``)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 11]))
    gpu_days = f.nodes * f.gpus_per_node * f.horizon / 86400.0
    n = int(rng.poisson(rate_per_1k_gpu_days * gpu_days / 1000.0)) if rate_per_1k_gpu_days else 0
    kinds = list(KINDS)
    share = np.array([KINDS[k][1] for k in kinds])
    out = []
    for _ in range(n):
        kind = kinds[int(rng.choice(len(kinds), p=share / share.sum()))]
        lo, hi = KINDS[kind][2]
        ratio = float(rng.uniform(lo, hi))
        start = float(rng.uniform(0.0, f.horizon))
        dur = float(
            np.clip(rng.lognormal(math.log(DURATION_MEDIAN_S), DURATION_SIGMA), MIN_S, MAX_S)
        )
        factor = float(rng.uniform(*PCIE_FACTOR)) if kind == "pcie" else 1.0 / ratio
        out.append(
            Episode(
                node=int(rng.integers(f.nodes)),
                gpu=int(rng.integers(f.gpus_per_node)),
                start=round(start, 3),
                end=round(min(start + dur, f.horizon), 3),
                kind=kind,
                ratio=round(ratio, 4),
                factor=round(factor, 6),
            )
        )
    return sorted(out, key=lambda e: (e.start, e.node, e.gpu))


def holds(a: Attempt, node: int, gpu: int) -> bool:
    return node in a.nodes and gpu in a.gpus[a.nodes.index(node)]


def segments(
    a: Attempt, episodes: list[Episode], horizon: float
) -> list[tuple[float, float, float]]:
    """(start, end, factor) of the times the attempt computed slowed: the episodes on GPUs it
    held, over its compute (after its start-up), the largest factor where they meet."""
    s0 = a.start + a.overhead_s
    e0 = a.end if a.end is not None else horizon
    hit = [
        (max(e.start, s0), min(e.end, e0), e.factor)
        for e in episodes
        if holds(a, e.node, e.gpu) and e.start < e0 and e.end > s0
    ]
    edges = sorted({t for s, e, _ in hit for t in (s, e)})
    out: list[tuple[float, float, float]] = []
    for lo, hi in pairwise(edges):
        fac = max((f for s, e, f in hit if s <= lo and e >= hi), default=1.0)
        if fac <= 1.0 or hi <= lo:
            continue
        if out and out[-1][1] == lo and out[-1][2] == fac:
            out[-1] = (out[-1][0], hi, fac)
        else:
            out.append((lo, hi, fac))
    return out


def lost_s(
    segs: list[tuple[float, float, float]], lo: float = -math.inf, hi: float = math.inf
) -> float:
    """The work a job loses over ``segs`` within [lo, hi): D x (1 - 1 / factor) each."""
    return sum(max(0.0, min(e, hi) - max(s, lo)) * (1 - 1 / f) for s, e, f in segs)


def gpu_signals(
    tt: np.ndarray, busy: np.ndarray, episodes: list[Episode], rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(SM clock MHz, clock-event reasons, PCIe link width) per scrape time and GPU of one
    node: a busy GPU at its max clock, at its power limit (SW power cap, 88-96% of its clock) in
    ``POWER_CAP_SHARE`` of scrapes, an idle one at its idle clock with GPU idle set; an
    episode's GPU throttled to its ratio with its reasons, or its link at x8."""
    shape = busy.shape
    capped = busy & (rng.random(shape) < POWER_CAP_SHARE)
    level = np.where(capped, rng.uniform(0.88, 0.96, shape), rng.uniform(0.97, 1.0, shape))
    clock = np.where(busy, MAX_CLOCK_MHZ * level, IDLE_CLOCK_MHZ)
    mask = np.where(busy, np.where(capped, BIT["sw_power_cap"], 0), BIT["gpu_idle"])
    width = np.full(shape, LINK_WIDTH)
    for e in episodes:
        i0, i1 = np.searchsorted(tt, [e.start, e.end])
        if i1 <= i0:
            continue
        if e.kind == "pcie":
            width[i0:i1, e.gpu] = round(LINK_WIDTH * e.ratio)
            continue
        on = busy[i0:i1, e.gpu]
        jitter = rng.uniform(0.99, 1.01, i1 - i0)
        clock[i0:i1, e.gpu] = np.where(on, MAX_CLOCK_MHZ * e.ratio * jitter, IDLE_CLOCK_MHZ)
        mask[i0:i1, e.gpu] |= e.reasons
    return np.round(clock).astype(np.int64), mask.astype(np.int64), width.astype(np.int64)


def truth(f: Fleet, episodes: list[Episode], rate: float, logged: set[str]) -> dict:
    """The ``fail_slow`` part of ground_truth.json: the rate, every episode, and every attempt
    it slowed with the work it lost (seconds and GPU-hours; ``logged``: the jobs whose step
    logs were written)."""
    jobs = []
    for a in sorted(f.attempts, key=lambda a: (a.scheduler, a.job_raw, a.job_id, a.attempt)):
        segs = segments(a, episodes, f.horizon)
        if not segs:
            continue
        gpus = sum(len(g) for g in a.gpus)
        lost = lost_s(segs)
        jobs.append(
            {
                "scheduler": a.scheduler,
                "job_id": a.job_id,
                "attempt": a.attempt + 1,
                "n_gpus": gpus,
                "logged": a.job_id in logged,
                "segments": [
                    {"start": ts(f, s), "end": ts(f, e), "factor": round(fac, 6)}
                    for s, e, fac in segs
                ],
                "extra_s": round(lost, 3),
                "slow_gpu_hours": round(lost / 3600 * gpus, 6),
            }
        )
    return {
        "rate_per_1k_gpu_days": rate,
        "meaning": (
            "a GPU throttled (SM clock at ratio x max, clock-event reasons set) or on a PCIe "
            "link at x8; a job holding it runs factor times slower and loses D x (1 - 1/factor)"
        ),
        "episodes": [
            {
                "host": f.hosts[e.node],
                "gpu": e.gpu,
                "start": ts(f, e.start),
                "end": ts(f, e.end),
                "duration_s": round(e.end - e.start, 3),
                "kind": e.kind,
                "cause": "pcie" if e.kind == "pcie" else cause(e.reasons),
                "reasons": e.reasons,
                "ratio": e.ratio,
                "factor": e.factor,
            }
            for e in episodes
        ],
        "jobs": jobs,
        "slow_gpu_hours": round(sum(j["slow_gpu_hours"] for j in jobs), 6),
    }
