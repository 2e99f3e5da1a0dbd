"""The simulated fleet's hardware: slots laid out per node, each unit's Weibull lifetime law and
installed age, faults, replacements and the repairs that take a node out of service, and planned
maintenance drains."""

from __future__ import annotations

import heapq
import math

import numpy as np

from sample_data.model import CLASSES
from sample_data.model import MAX_YEARS_INSTALLED
from sample_data.model import MODULE_CLASSES
from sample_data.model import TEMP_SD_C
from sample_data.model import UNIT_CLASSES
from sample_data.model import CauseMix
from sample_data.model import Fleet
from sample_data.model import class_law
from sample_data.model import true_laws
from sample_data.model import units_per_node


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


def simulate_hardware(f: Fleet, rng: np.random.Generator, mix: CauseMix) -> None:
    """Weibull lifetimes, faults, repairs and replacements for every unit slot (event heap)."""
    laws = {c: class_law(mix, c, f.fault_scale) for c in CLASSES}
    module_slots = _lay_out_slots(f)
    shape, scale_s = _slot_laws(f, rng, laws)
    age0, fail_age = _initial_ages(rng, module_slots, shape, scale_s)
    hardware = _Hardware(f, rng, module_slots, shape, scale_s)
    hardware.install_initial(age0, fail_age)
    hardware.run()
    true_laws(f, laws)


def simulate_maintenance(f: Fleet, rng: np.random.Generator) -> None:
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
