"""The synthetic fleet simulation: hardware lifetimes, faults, repairs, jobs, and their files.

The model is deliberately simple but internally consistent, so that the analysis can be
checked against a known truth:

* every hardware unit follows a per-class Weibull lifetime law (calendar time, left-truncated
  for units already installed when observation starts);
* a fatal fault takes its node out of service until repaired; the failed unit (for the GPU
  module: the whole GPU board, i.e. gpu + gpu_memory + nvlink) is replaced by a new unit;
* jobs run on a scheduler model (Slurm gang training chains, Slurm small jobs, a Kubernetes
  PyTorchJob chain) and are killed by the faults that hit their nodes.

The fault rates come from a :class:`~sample_data.model.CauseMix` the caller passes (the CLI
passes the published Llama 3 table of ``analysis.taxonomy``). ``simulate`` writes every format
through ``sample_data.writers`` (one module per ingest format). Everything is drawn from
generators seeded from ``seed`` and emitted in a fixed order, so identical arguments give
byte-identical files. Internal times are float seconds from ``start`` (UTC).
"""

from __future__ import annotations

import heapq
import json
import math
import shutil
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from sample_data import defaults
from sample_data import fail_slow
from sample_data.fault_codes import check_every_class_reports
from sample_data.fault_codes import choose_codes
from sample_data.model import CLASSES
from sample_data.model import GPU_PCI_BUS
from sample_data.model import GPU_TEMP_BETA
from sample_data.model import K8S_NAMESPACE
from sample_data.model import MAX_YEARS_INSTALLED
from sample_data.model import MODULE_CLASSES
from sample_data.model import TEMP_SD_C
from sample_data.model import TRAIN_USER
from sample_data.model import UNIT_CLASSES
from sample_data.model import USERS
from sample_data.model import Attempt
from sample_data.model import CauseMix
from sample_data.model import Fleet
from sample_data.model import class_law
from sample_data.model import ground_truth
from sample_data.model import host_name
from sample_data.model import software_rate_per_node_hour
from sample_data.model import true_laws
from sample_data.model import units_per_node
from sample_data.writers import component_history
from sample_data.writers import dcgm
from sample_data.writers import ipmi_sel
from sample_data.writers import kernel
from sample_data.writers import kubernetes
from sample_data.writers import redfish
from sample_data.writers import sacct
from sample_data.writers import sacct_json
from sample_data.writers import slurmctld
from sample_data.writers import training_log
from sample_data.writers.base import write_text
from sample_data.writers.bmc_common import sel_rows


def _serial(rng: np.random.Generator, prefix: str, counter: int) -> str:
    return f"{prefix}{int(rng.integers(1000, 10000))}{counter:06d}"


def _uuid(rng: np.random.Generator) -> str:
    h = rng.bytes(16).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _lay_out_slots(f: Fleet) -> dict[int, list[int]]:
    """Fill the fleet's slots (class, node, position, index within the class on its node), node
    by node in class order; return each GPU board's slots (node*G+gpu -> gpu, HBM, NVLink)."""
    G = f.gpus_per_node
    module_slots: dict[int, list[int]] = {}
    for n in range(f.nodes):
        for cls in CLASSES:
            for i in range(units_per_node(cls, G)):
                s = len(f.slot_class)
                f.slot_class.append(cls)
                f.slot_node.append(n)
                f.slot_pos.append(UNIT_CLASSES[cls].position.format(i))
                f.slot_index.append(i)
                if cls in MODULE_CLASSES:
                    module_slots.setdefault(n * G + i, []).append(s)
    return module_slots


def _slot_laws(
    f: Fleet, rng: np.random.Generator, laws: dict[str, tuple[float, float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """Each slot's Weibull shape and scale (s), with the temperature covariate planted.

    A GPU slot's airflow makes it run hotter or cooler (offset in C, seen in DCGM
    temperatures); the gpu hazard is proportional to exp(beta * z - beta^2 / 2), the second
    term keeping the fleet-average rate equal to the class rate."""
    shape = np.array([laws[c][0] for c in f.slot_class])
    scale_s = np.array([laws[c][1] for c in f.slot_class]) * 3600.0
    z = rng.standard_normal((f.nodes, f.gpus_per_node))
    f.gpu_temp_offset = np.round(TEMP_SD_C * z, 2)
    hr = np.ones(len(f.slot_class))
    for s_, (cls, node, idx) in enumerate(zip(f.slot_class, f.slot_node, f.slot_index)):
        if cls == "gpu":
            hr[s_] = math.exp(f.gpu_temp_beta * z[node, idx] - f.gpu_temp_beta**2 / 2)
    scale_s = scale_s * hr ** (-1.0 / shape)  # Weibull PH: H = hr * (t / eta)^k
    f.slot_scale_s = scale_s
    return shape, scale_s


def _initial_ages(
    rng: np.random.Generator,
    module_slots: dict[int, list[int]],
    shape: np.ndarray,
    scale_s: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(age at start, age at failure) of the units in service at start: installed uniformly
    over the previous 0-3 years; the failure age comes from the Weibull law conditioned on
    survival to that age (inverse CDF)."""
    n_slots = shape.size
    age0 = rng.uniform(0.0, MAX_YEARS_INSTALLED * 365.25 * 86400.0, n_slots)
    for ss in module_slots.values():  # one GPU board: gpu, HBM and NVLink share their age
        age0[ss] = age0[ss[0]]
    u = rng.uniform(size=n_slots)
    fail_age = scale_s * ((age0 / scale_s) ** shape - np.log1p(-u)) ** (1.0 / shape)
    return age0, fail_age


class _Hardware:
    """The units in the fleet's slots over time, run as an event heap: a unit's failure
    (kind 1, payload: installation) and the replacement of a failed unit or board (kind 0,
    payload: index into ``groups``). Fills ``f.inst``, ``f.faults``, ``f.replacements``,
    ``f.gpu_uuid_at`` and the nodes' fault outages."""

    def __init__(
        self,
        f: Fleet,
        rng: np.random.Generator,
        module_slots: dict[int, list[int]],
        shape: np.ndarray,
        scale_s: np.ndarray,
    ) -> None:
        self.f, self.rng = f, rng
        self.module_slots, self.shape, self.scale_s = module_slots, shape, scale_s
        n_slots = len(f.slot_class)
        self.slot_module = [-1] * n_slots
        for m, ss in module_slots.items():
            for s in ss:
                self.slot_module[s] = m
        self.current = [-1] * n_slots  # the installation in each slot
        self.heap: list = []
        self.seq = 0
        self.counter = 0  # serial numbers issued
        self.pending_replace: dict[tuple, float] = {}  # ("m", module) or ("s", slot) -> time
        self.groups: list[tuple] = []  # replacement event payloads: (group key, fault)

    def push(self, t: float, kind: int, payload: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, kind, payload))

    def new_serials(self, slot: int, t_install: float) -> None:
        """Install a new unit in a slot outside the GPU boards."""
        cls = self.f.slot_class[slot]
        self.counter += 1
        serial = _serial(self.rng, UNIT_CLASSES[cls].serial_prefix, self.counter)
        self.f.inst.append({"slot": slot, "serial": serial, "uuid": None, "install": t_install})

    def new_module(self, m: int, t_install: float) -> list[int]:
        """Install a new GPU board: one serial and UUID for its gpu, HBM and NVLink units."""
        f = self.f
        self.counter += 1
        base = _serial(self.rng, UNIT_CLASSES["gpu"].serial_prefix, self.counter)
        uuid = _uuid(self.rng)
        idx = []
        for s in self.module_slots[m]:
            suffix = {"gpu": "", "gpu_memory": ":hbm", "nvlink": ":nvlink"}[f.slot_class[s]]
            f.inst.append(
                {
                    "slot": s,
                    "serial": base + suffix,
                    "uuid": uuid if f.slot_class[s] == "gpu" else None,
                    "install": t_install,
                }
            )
            idx.append(len(f.inst) - 1)
        node, gpu = divmod(m, f.gpus_per_node)
        f.gpu_uuid_at.setdefault((node, gpu), []).append((t_install, uuid, base))
        return idx

    def install_initial(self, age0: np.ndarray, fail_age: np.ndarray) -> None:
        """The units in service at start, with their ages, and their failures in the window."""
        f = self.f
        done_modules = set()
        for s in range(len(f.slot_class)):
            m = self.slot_module[s]
            if m < 0:
                self.new_serials(s, 0.0)
                self.current[s] = len(f.inst) - 1
            elif m not in done_modules:
                done_modules.add(m)
                for i in self.new_module(m, 0.0):
                    self.current[f.inst[i]["slot"]] = i
        for s in range(len(f.slot_class)):
            i = self.current[s]
            f.inst[i]["install"] = -float(age0[s])
            f.inst[i]["fail"] = -float(age0[s]) + float(fail_age[s])
            if f.inst[i]["fail"] < f.horizon:
                self.push(f.inst[i]["fail"], 1, i)

    def draw_new_failure(self, i: int, t: float) -> None:
        inst = self.f.inst[i]
        s = inst["slot"]
        k, sc = self.shape[s], self.scale_s[s]
        inst["fail"] = t + sc * (-math.log1p(-self.rng.uniform())) ** (1.0 / k)
        if inst["fail"] < self.f.horizon:
            self.push(inst["fail"], 1, i)

    def replace(self, t: float, payload: int) -> None:
        """Swap a failed unit (a whole board for its parts) for new ones, which start ageing."""
        f = self.f
        gkey, fault_idx = self.groups[payload]
        self.pending_replace.pop(gkey, None)
        slots = self.module_slots[gkey[1]] if gkey[0] == "m" else [gkey[1]]
        old = [self.current[s] for s in slots]
        if gkey[0] == "m":
            new = self.new_module(gkey[1], t)
        else:
            self.new_serials(slots[0], t)
            new = [len(f.inst) - 1]
        for s, io, inew in zip(slots, old, new):
            oi = f.inst[io]
            oi["removed"] = t
            oi["reason"] = "failed" if oi.get("failed") else "module_replaced"
            self.current[s] = inew
            self.draw_new_failure(inew, t)
            f.replacements.append(
                {"time": t, "slot": s, "old": io, "new": inew, "fault": fault_idx}
            )

    def fail(self, t: float, i: int) -> None:
        """Unit ``i`` fails: a fault (fatal or a warning, with its repair time and drain delay);
        a fatal one takes the node out until repaired. A board part failing while its board
        awaits replacement is a secondary fault with the same repair."""
        f = self.f
        s = f.inst[i]["slot"]
        if self.current[s] != i or f.inst[i].get("failed"):
            return
        f.inst[i]["failed"] = True
        cls, node = f.slot_class[s], f.slot_node[s]
        m = self.slot_module[s]
        gkey = ("m", m) if m >= 0 else ("s", s)
        fault = {
            "time": t,
            "node": node,
            "slot": s,
            "inst": i,
            "cls": cls,
            "gpu_index": f.slot_index[s] if m >= 0 else None,
        }
        if gkey in self.pending_replace:  # sibling of a board already awaiting replacement
            fault.update(fatal=True, secondary=True, t_off=t, t_rep=self.pending_replace[gkey])
            f.faults.append(fault)
            return
        unit = UNIT_CLASSES[cls]
        fatal = self.rng.uniform() >= unit.nonfatal
        med, sd = unit.repair_hours
        repair = med * math.exp(sd * self.rng.standard_normal()) * 3600.0
        if fatal and not unit.crash:
            off = self.rng.uniform(600.0, 4 * 3600.0)  # drained, rebooted into repair later
        else:
            off = 0.0
        t_rep = t + off + repair
        fault.update(fatal=bool(fatal), secondary=False, t_off=t + off, t_rep=t_rep)
        f.faults.append(fault)
        self.pending_replace[gkey] = t_rep
        self.push(t_rep, 0, len(self.groups))
        self.groups.append((gkey, len(f.faults) - 1))
        if fatal:
            f.unavailable[node].append((t, t_rep, "fault", len(f.faults) - 1))

    def run(self) -> None:
        while self.heap:
            t, _, kind, payload = heapq.heappop(self.heap)
            if t >= self.f.horizon:
                break
            if kind == 0:
                self.replace(t, payload)
            else:
                self.fail(t, payload)


def _simulate_hardware(f: Fleet, rng: np.random.Generator, mix: CauseMix) -> None:
    """Weibull lifetimes, faults, repairs and replacements for every unit slot (event heap)."""
    laws = {c: class_law(mix, c, f.fault_scale) for c in CLASSES}
    module_slots = _lay_out_slots(f)
    shape, scale_s = _slot_laws(f, rng, laws)
    age0, fail_age = _initial_ages(rng, module_slots, shape, scale_s)
    hardware = _Hardware(f, rng, module_slots, shape, scale_s)
    hardware.install_initial(age0, fail_age)
    hardware.run()
    true_laws(f, laws)


def _simulate_maintenance(f: Fleet, rng: np.random.Generator) -> None:
    """Planned drains: about a quarter of the nodes get one 4-8 h maintenance window."""
    H = f.horizon
    picked = rng.uniform(size=f.nodes) < 0.25
    starts = rng.uniform(0.05 * H, 0.9 * H, f.nodes)
    durs = rng.uniform(4 * 3600.0, 8 * 3600.0, f.nodes)
    for n in range(f.nodes):
        if not picked[n]:
            continue
        m0 = float(np.floor(starts[n] / 3600.0) * 3600.0)
        m = {"node": n, "start": m0, "end": m0 + float(durs[n])}
        f.maint.append(m)
        f.unavailable[n].append((m["start"], m["end"], "maint", len(f.maint) - 1))
    for lst in f.unavailable:
        lst.sort()


def _free_at(f: Fleet, n: int, t: float) -> float:
    """Earliest time >= t at which node n is not inside an unavailable interval."""
    moved = True
    while moved:
        moved = False
        for a, b, _, _ in f.unavailable[n]:
            if a <= t < b:
                t, moved = b, True
    return t


def _first_interrupt(f: Fleet, nodes: list[int], s: float, e: float) -> tuple:
    """First fatal fault or maintenance start on any of `nodes` in (s, e)."""
    best = (math.inf, None, None, None)
    for n in nodes:
        for a, _, kind, ref in f.unavailable[n]:
            if s < a < e and a < best[0]:
                best = (a, kind, ref, n)
    return best


def _gang_size(rng: np.random.Generator, pool_size: int) -> int:
    """Nodes of a training job: half to 85% of its pool, leaving one node spare."""
    if pool_size == 1:
        return 1
    low = math.ceil(0.5 * pool_size)
    need = int(rng.integers(low, max(low, int(0.85 * pool_size)) + 1))
    return min(need, pool_size - 1)


def _when_enough_free(
    f: Fleet, rng: np.random.Generator, pool: list[int], need: int, s: float
) -> tuple[float, list[int]]:
    """The first time from ``s`` at which ``need`` nodes of the pool are up, and the nodes up
    then; each wait ends a little after the next outage ends."""
    while True:
        avail = [n for n in pool if _free_at(f, n, s) == s]
        if len(avail) >= need:
            return s, avail
        ends = [b for n in pool for a, b, _, _ in f.unavailable[n] if a <= s < b]
        s = min(ends) + float(rng.uniform(30.0, 300.0))


def _end_gang_attempt(
    f: Fleet, rng: np.random.Generator, a: Attempt, e_done: float, t_sw: float
) -> None:
    """How a training attempt ends: killed by the first fault or requeued by the first drain
    on its nodes, else failed by the workload at ``t_sw``, else completed at ``e_done`` inside
    the window, else still running (``end`` stays None)."""
    H = f.horizon
    ti, kind, ref, _ = _first_interrupt(f, a.nodes, a.start, min(e_done, t_sw, H))
    if ti < math.inf and kind == "fault":
        a.end = ti + float(rng.uniform(2.0, 30.0))
        a.state, a.exit_code, a.cause = "NODE_FAIL", "0:0", ("fault", ref)
    elif ti < math.inf:
        a.end, a.state, a.cause = ti + float(rng.uniform(1.0, 20.0)), "REQUEUED", ("maint", ref)
        a.reason = "maintenance"
    elif t_sw < min(e_done, H):
        a.end, a.state, a.exit_code = t_sw, "FAILED", "1:0"
        a.reason = "nccl_watchdog_timeout" if rng.uniform() < 0.2 else "application_error"
        a.cause = ("workload",)
    elif e_done < H:
        a.end, a.state = e_done, "COMPLETED"


def _chain_job(
    f: Fleet,
    rng: np.random.Generator,
    pool: list[int],
    job: tuple[str, int, str, str],
    submit: float,
    busy_until: float,
    software_per_node_hour: float,
) -> tuple[list[Attempt], float]:
    """One training job (``job``: scheduler, key, name, partition) from its submission: its
    attempts, each restoring from the last checkpoint, until it completes or the window ends;
    and when it last ended (the horizon if it did not)."""
    scheduler, key, name, partition = job
    H, G = f.horizon, f.gpus_per_node
    need = _gang_size(rng, len(pool))
    work = float(rng.uniform(48.0, 240.0)) * 3600.0
    ckpt = int(rng.choice([1800, 2400, 3000, 3600]))
    out: list[Attempt] = []
    saved, attempt, t_sub = 0.0, 0, submit
    while True:
        # the pool is exclusive to one chain job at a time: wait for the previous one
        delay = float(rng.uniform(60.0, 900.0)) if attempt else float(rng.uniform(10.0, 120.0))
        s, avail = _when_enough_free(f, rng, pool, need, max(t_sub, busy_until) + delay)
        if s >= H:
            return out, H
        overhead = float(rng.uniform(300.0, 900.0)) if attempt else float(rng.uniform(120, 300))
        e_done = s + overhead + (work - saved)
        sw_rate = software_per_node_hour * f.fault_scale * need / 3600.0
        t_sw = s + float(rng.exponential(1.0 / sw_rate)) if sw_rate > 0 else math.inf
        a = Attempt(
            scheduler,
            key,
            attempt,
            name,
            TRAIN_USER,
            partition,
            t_sub,
            s,
            None,
            "RUNNING",
            "0:0",
            avail[:need],
            [list(range(G))] * need,
            14 * 24 * 60,
            ckpt_s=ckpt,
            overhead_s=overhead,
        )
        _end_gang_attempt(f, rng, a, e_done, t_sw)
        out.append(a)
        if a.end is None:
            return out, H
        if a.state == "COMPLETED":
            return out, a.end
        productive = max(0.0, a.end - s - overhead)
        saved = min(work, saved + math.floor(productive / ckpt) * ckpt)
        attempt += 1
        t_sub = a.end


def _gang_chain(
    f: Fleet,
    rng: np.random.Generator,
    pool: list[int],
    scheduler: str,
    first_key: int,
    name_fmt: str,
    partition: str,
    software_per_node_hour: float,
) -> list[Attempt]:
    """Back-to-back multi-node training jobs that restart from their last checkpoint; the next
    job is submitted up to 6 h before the previous one ends."""
    H = f.horizon
    out: list[Attempt] = []
    submit = float(rng.uniform(0, 2 * 3600.0))
    busy_until = 0.0
    j = 0
    while submit < H:
        job = (scheduler, first_key + j, name_fmt.format(j + 1), partition)
        atts, last_end = _chain_job(f, rng, pool, job, submit, busy_until, software_per_node_hour)
        out += atts
        j += 1
        if last_end >= H:
            break
        busy_until = last_end
        submit = max(submit + 60.0, last_end - float(rng.uniform(0, 6 * 3600.0)))
    return out


SMALL_JOB_NAMES = (
    "train.sh",
    "eval",
    "finetune",
    "bench_nccl",
    "preprocess",
    "sweep",
    "jupyter",
    "infer",
)


@dataclass
class _SmallJobDraws:
    """Every random draw of the small jobs, made in bulk up front: per submission (time, array
    tasks, GPUs, time limit in hours, user, name) and per task (wanted run time, outcome draw,
    share of its run it gets through, start jitter per candidate node, kill delay, exit code)."""

    sub_t: np.ndarray
    n_tasks: np.ndarray
    sub_g: np.ndarray
    sub_limit: np.ndarray
    sub_user: np.ndarray
    sub_name: np.ndarray
    want: np.ndarray
    u_out: np.ndarray
    frac: np.ndarray
    jit: np.ndarray
    kill_delay: np.ndarray
    exit_fail: np.ndarray


def _draw_small_jobs(f: Fleet, rng: np.random.Generator, pool: list[int]) -> _SmallJobDraws:
    """Submissions arrive as a Poisson process that keeps the pool's GPUs about 40% busy."""
    G, H = f.gpus_per_node, f.horizon
    gp_choices = np.array([g for g in (1, 2, 4, 8) if g <= G] or [G])
    gp_p = np.array([0.4, 0.2, 0.2, 0.2][: len(gp_choices)])
    gp_p = gp_p / gp_p.sum()
    mean_g = float((gp_choices * gp_p).sum())
    mean_dur = 8.0 * 3600.0
    lam = 0.4 * len(pool) * G / (mean_g * mean_dur)
    n_sub = int(rng.poisson(lam * H * 0.8))
    sub_t = np.sort(rng.uniform(0, H, n_sub))
    n_tasks = np.where(rng.uniform(size=n_sub) < 0.12, rng.integers(3, 9, n_sub), 1)
    sub_g = rng.choice(gp_choices, size=n_sub, p=gp_p)
    sub_limit = rng.choice([2, 8, 24, 48], size=n_sub, p=[0.2, 0.3, 0.35, 0.15])
    sub_user = rng.integers(0, len(USERS), n_sub)
    sub_name = rng.integers(0, len(SMALL_JOB_NAMES), n_sub)
    T = int(n_tasks.sum())
    sub_of = np.repeat(np.arange(n_sub), n_tasks)
    want = np.clip(rng.lognormal(np.log(0.4 * sub_limit[sub_of] * 3600.0), 0.8), 120.0, 30 * 3600.0)
    return _SmallJobDraws(
        sub_t,
        n_tasks,
        sub_g,
        sub_limit,
        sub_user,
        sub_name,
        want,
        u_out=rng.uniform(size=T),
        frac=rng.uniform(0.01, 1.0, T),
        jit=rng.uniform(1.0, 30.0, (T, 4)),
        kill_delay=rng.uniform(2.0, 30.0, T),
        exit_fail=rng.choice([1, 1, 1, 2, 134], size=T),
    )


def _place_task(
    f: Fleet, pool: list[int], kth: np.ndarray, t_sub: float, g: int, limit_s: float, jit
) -> tuple[float, int]:
    """(start, pool index) of a task needing ``g`` GPUs: of the (up to) four nodes whose g-th
    GPU frees first, the one it can start on first, never into an outage or a maintenance
    window its time limit would reach (reservation semantics)."""
    cand = np.maximum(kth[:, g - 1], t_sub)
    k = min(4, len(pool))
    near = np.argpartition(cand, k - 1)[:k] if k < len(pool) else np.arange(len(pool))
    near = sorted(near.tolist(), key=lambda c: (cand[c], c))
    best = None
    for r, c in enumerate(near):
        st = float(cand[c]) + float(jit[r])
        moved = True
        while moved:
            moved = False
            for a, b, kind, _ in f.unavailable[pool[c]]:
                if (a <= st < b) or (kind == "maint" and st < a < st + limit_s):
                    st, moved = b + 60.0, True
        if best is None or st < best[0]:
            best = (st, c)
    return best


def _task_outcome(
    u: float, want: float, limit_s: float, frac: float, exit_fail: int, user: tuple
) -> tuple[str, str, float, str]:
    """(state, exit code, run time, reason) of a task by its outcome draw ``u``: 74% complete
    (or time out), then failures, OOM kills, user cancels and preemptions."""
    cap = min(want, limit_s)
    if u < 0.74:
        if want > limit_s:
            return "TIMEOUT", "0:0", limit_s, "timeout"
        return "COMPLETED", "0:0", want, ""
    if u < 0.84:
        return "FAILED", f"{exit_fail}:0", cap * frac, "application_error"
    if u < 0.88:
        return "OUT_OF_MEMORY", "0:125", cap * frac * 0.5, "out_of_memory"
    if u < 0.95:
        return f"CANCELLED by {user[1]}", "0:15", cap * frac, "user_cancel"
    return "PREEMPTED", "0:0", cap * frac, "preempted"


def _small_jobs(
    f: Fleet, rng: np.random.Generator, pool: list[int], first_key: int
) -> list[Attempt]:
    """Single-node jobs on the batch/debug nodes: a GPU-lane allocator, workload outcomes.

    Random draws are made in bulk up front; the loop only runs the allocator, which keeps
    each node's GPU lanes (time each GPU becomes free) so no node is ever over-committed.
    """
    H, G = f.horizon, f.gpus_per_node
    if not pool:
        return []
    d = _draw_small_jobs(f, rng, pool)
    lanes = np.zeros((len(pool), G))
    kth = np.zeros((len(pool), G))  # each row of lanes, sorted
    out: list[Attempt] = []
    ti_ = -1
    for j in range(d.sub_t.size):
        t_sub, g, limit_h = float(d.sub_t[j]), int(d.sub_g[j]), int(d.sub_limit[j])
        limit_s = limit_h * 3600.0
        partition = "debug" if limit_h == 2 and g <= 2 else "batch"
        user, jname = USERS[int(d.sub_user[j])], SMALL_JOB_NAMES[int(d.sub_name[j])]
        nt = int(d.n_tasks[j])
        for task in range(nt):
            ti_ += 1
            st, c = _place_task(f, pool, kth, t_sub, g, limit_s, d.jit[ti_])
            if st >= H:
                continue
            n = pool[c]
            state, ec, dur, reason = _task_outcome(
                float(d.u_out[ti_]),
                float(d.want[ti_]),
                limit_s,
                float(d.frac[ti_]),
                int(d.exit_fail[ti_]),
                user,
            )
            e = st + max(dur, 30.0)
            t_int, kind, ref, _ = _first_interrupt(f, [n], st, e)
            cause: tuple = ("workload",) if state != "COMPLETED" else ()
            if t_int < math.inf and kind == "fault":
                e = t_int + float(d.kill_delay[ti_])
                state, ec, reason, cause = "NODE_FAIL", "0:0", "", ("fault", ref)
            end: float | None = e
            if e >= H:
                end, state, ec, reason, cause = None, "RUNNING", "0:0", "", ()
            chosen = sorted(np.argsort(lanes[c], kind="stable")[:g].tolist())
            lanes[c, chosen] = e
            kth[c] = np.sort(lanes[c])
            out.append(
                Attempt(
                    "slurm",
                    first_key + j,
                    0,
                    jname,
                    user,
                    partition,
                    t_sub,
                    st,
                    end,
                    state,
                    ec,
                    [n],
                    [chosen],
                    limit_h * 60,
                    reason=reason,
                    cause=cause,
                    array_task=task if nt > 1 else -1,
                )
            )
    return out


def _assign_ids(f: Fleet) -> None:
    """Slurm job ids in submission order; array tasks get consecutive raw ids."""
    slurm = [a for a in f.attempts if a.scheduler == "slurm"]
    firsts: dict[int, float] = {}
    for a in slurm:
        firsts[a.key] = min(firsts.get(a.key, math.inf), a.submit)
    order = sorted(firsts, key=lambda k: (firsts[k], k))
    next_raw = 1001
    by_key: dict[int, list[Attempt]] = {}
    for a in slurm:
        by_key.setdefault(a.key, []).append(a)
    for k in order:
        atts = by_key[k]
        tasks = sorted({a.array_task for a in atts})
        base = next_raw
        if tasks != [-1]:
            for a in atts:
                a.array_job_id = base
                a.job_raw = base + tasks.index(a.array_task)
                a.job_id = f"{base}_{a.array_task}"
            next_raw += len(tasks)
        else:
            for a in atts:
                a.job_raw, a.job_id = base, str(base)
            next_raw += 1
    for a in f.attempts:
        if a.scheduler == "k8s":
            a.job_id = f"{K8S_NAMESPACE}/{a.name}"


def build_fleet(
    mix: CauseMix,
    nodes: int = defaults.NODES,
    gpus_per_node: int = defaults.GPUS_PER_NODE,
    days: float = defaults.DAYS,
    seed: int = defaults.SEED,
    fault_scale: float = defaults.FAULT_SCALE,
    scrape_interval_s: int = defaults.SCRAPE_INTERVAL_S,
    k8s_nodes: int = 4,
    start: str = "2026-01-05T00:00:00",
    gpu_temp_beta: float = GPU_TEMP_BETA,
    fail_slow_rate: float = defaults.FAIL_SLOW_RATE,
    step_log_s: float = defaults.STEP_LOG_S,
) -> Fleet:
    """Run the whole model (no files): hardware, maintenance, schedulers, ids, fail-slow
    episodes. Fault and workload-failure rates are ``mix``'s, times ``fault_scale``;
    ``gpu_temp_beta`` is the planted temperature effect (log hazard ratio per sd of a GPU slot's
    temperature offset; 0 for a fleet where temperature does nothing); ``fail_slow_rate`` the
    fail-slow episodes per 1,000 GPU-days (``sample_data.fail_slow``; 0: none); ``step_log_s``
    about how long a training log's line covers (``writers.training_log``)."""
    if nodes < 1 or gpus_per_node < 1 or gpus_per_node > len(GPU_PCI_BUS) or days <= 0:
        raise ValueError("need nodes >= 1, 1 <= gpus_per_node <= 8, days > 0")
    if fault_scale <= 0:
        raise ValueError("fault_scale must be > 0")
    if fail_slow_rate < 0:
        raise ValueError("fail_slow_rate must be >= 0")
    k8s_nodes = max(0, min(k8s_nodes, nodes - 1))
    t0 = datetime.fromisoformat(start)
    start_epoch = (t0 - datetime(1970, 1, 1)).total_seconds()
    f = Fleet(
        start=t0.strftime("%Y-%m-%dT%H:%M:%S"),
        start_epoch=start_epoch,
        horizon=float(days) * 86400.0,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        k8s_nodes=k8s_nodes,
        seed=seed,
        fault_scale=fault_scale,
        scrape_interval_s=int(scrape_interval_s),
        hosts=[host_name(i) for i in range(nodes)],
        racks=[f"rack-{i // 4 + 1:02d}" for i in range(nodes)],
        gpu_temp_beta=float(gpu_temp_beta),
        fail_slow_rate=float(fail_slow_rate),
        step_log_s=float(step_log_s),
    )
    f.unavailable = [[] for _ in range(nodes)]
    ss = np.random.SeedSequence(seed)
    r_hw, r_maint, r_train, r_small, r_k8s = (np.random.default_rng(s) for s in ss.spawn(5))
    _simulate_hardware(f, r_hw, mix)
    _simulate_maintenance(f, r_maint)
    sw = software_rate_per_node_hour(mix)
    n_slurm = nodes - k8s_nodes
    n_small = max(1, round(0.25 * n_slurm)) if n_slurm > 1 else 0
    train_pool = list(range(n_slurm - n_small)) if n_slurm > 1 else list(range(n_slurm))
    small_pool = list(range(n_slurm - n_small, n_slurm)) if n_small else []
    k8s_pool = list(range(n_slurm, nodes))
    f.attempts.extend(
        _gang_chain(f, r_train, train_pool, "slurm", 0, "llm-pretrain-{:02d}", "train", sw)
    )
    f.attempts.extend(_small_jobs(f, r_small, small_pool, 100000))
    if k8s_pool:
        f.attempts.extend(
            _gang_chain(f, r_k8s, k8s_pool, "k8s", 10_000_000, "llm-ft-{:02d}", "", sw)
        )
    _assign_ids(f)
    f.slow_episodes = fail_slow.draw(f, f.fail_slow_rate, seed)
    return f


# What write_fleet owns under its folder (removed first, so no file of an earlier run stays).
GENERATED = (
    "slurm",
    "kernel",
    "dcgm",
    "training",
    "ipmi",
    "redfish",
    "k8s",
    "components",
    "ground_truth.json",
)


def write_fleet(f: Fleet, out: Path) -> dict:
    """Write every format under out, then ground_truth.json; return a count summary."""
    check_every_class_reports()
    out.mkdir(parents=True, exist_ok=True)
    # Regenerating into the same folder must not leave files of an earlier, different run
    # (e.g. DCGM days beyond a shorter window); only our own sub-trees are removed.
    for sub in GENERATED:
        p = out / sub
        if p.is_dir():
            shutil.rmtree(p)
        elif p.exists():
            p.unlink()
    r_codes, r_kern, r_bmc, r_dcgm = (
        np.random.default_rng(s) for s in np.random.SeedSequence([f.seed, 7]).spawn(4)
    )
    codes = choose_codes(f, r_codes)
    ev: dict[int, list] = defaultdict(list)
    summary = {}
    summary["sacct_rows"] = sacct.write(f, out / "slurm" / "sacct.txt")
    summary["sacct_json_jobs"] = sacct_json.write(f, out / "slurm" / "sacct.json")
    summary["slurmctld_lines"] = slurmctld.write(f, out / "slurm" / "slurmctld.log", codes, ev)
    kstats = kernel.write(f, out, codes, ev, r_kern)
    sel = sel_rows(f, codes, r_bmc)
    summary["sel_rows"] = ipmi_sel.write(f, out, sel, ev)
    redfish.write(f, out, sel, ev)
    summary["dcgm_files"] = dcgm.write(f, out, codes, ev, r_dcgm)
    logged = training_log.write_fleet(f, out / "training")
    summary["training_logs"] = len(logged)
    summary.update({f"k8s_{k}": v for k, v in kubernetes.write(f, out, ev).items()})
    summary["component_rows"] = component_history.write(
        f, out / "components" / "component_history.csv"
    )

    def slow(a, lo: float, hi: float) -> float:
        return fail_slow.lost_s(fail_slow.segments(a, f.slow_episodes, f.horizon), lo, hi)

    slow_truth = fail_slow.truth(f, f.slow_episodes, f.fail_slow_rate, logged)
    truth = ground_truth(f, codes, ev, {"kernel": kstats}, slow_truth, slow)
    write_text(out / "ground_truth.json", json.dumps(truth, indent=2, sort_keys=True) + "\n")
    summary["faults"] = len(truth["faults"])
    summary["faults_by_class"] = {c: law["n_failures"] for c, law in truth["laws"].items()}
    summary["attempts"] = len(f.attempts)
    summary["jobs"] = len({(a.scheduler, a.job_id) for a in f.attempts})
    summary["workload_failures"] = len(truth["workload_failures"])
    summary["replacements"] = len(truth["replacements"])
    summary["fail_slow_episodes"] = len(slow_truth["episodes"])
    summary["slow_gpu_hours"] = round(slow_truth["slow_gpu_hours"], 1)
    return summary


def source_folders(out_dir: Path) -> list[Path]:
    """A written fleet's source folders, the ones to ingest: its ``ground_truth.json`` beside
    them is the answer key, not a source (ingested, it is rejected whole)."""
    return sorted(p for p in Path(out_dir).iterdir() if p.is_dir())


def simulate(out_dir: Path, mix: CauseMix, **settings) -> dict:
    """Build the fleet (``build_fleet``'s settings: nodes, gpus_per_node, days, seed,
    fault_scale, scrape_interval_s, k8s_nodes, start, fail_slow_rate, step_log_s) and write
    every file format under out_dir; return a count summary. The same arguments give
    byte-identical files."""
    return write_fleet(build_fleet(mix, **settings), Path(out_dir))


def simulated(out_dir: Path, mix: CauseMix, **settings) -> Path:
    """``out_dir`` holding the fleet ``simulate`` writes with these settings: simulated unless a
    finished one is there (its ``ground_truth.json``, written last), as a cache between runs."""
    if not (Path(out_dir) / "ground_truth.json").exists():
        simulate(out_dir, mix, **settings)
    return Path(out_dir)
