"""The metrics of one fleet replication (the ``metric`` column of ``fleetsim_results``), from
an ``engine.Sim`` whose loop has ended at ``sim.end`` (the horizon, or the completion of the
last fixed-work job when no slot runs)."""

from __future__ import annotations

from analysis.fleetsim.jobs import DONE
from analysis.fleetsim.jobs import RUN
from analysis.fleetsim.nodes import DOWN
from analysis.fleetsim.nodes import MAINT_DOWN
from analysis.fleetsim.nodes import RETIRED

METRICS = (
    "fleet_goodput",
    "node_availability",
    "repair_queue_mean",
    "repair_wait_hours",
    "spare_utilisation",
    "spare_blocking",
    "failures",
    "systematic_failures",
    "interruptions",
    "retired_nodes",
    "bad_nodes",
    "cures",
    "silent_repairs",
    "unfinished_jobs",
)


def metrics(sim) -> dict:
    """Scalar metrics of the replication (docs/fleetsim.md, outputs)."""
    H = sim.end
    sim.queue_changed(H)
    sim.spares_changed(H)
    prod = {}  # gpus -> [productive job-hours, job-hours since submission, since start]
    walls, queued = {}, {}  # gpus -> [wall hours of finished fixed-work jobs], [queue waits]
    total_gpu_h, unfinished = 0.0, 0
    for j in range(len(sim.j_kind)):
        spec = sim.kinds[sim.j_kind[j]]
        gpus = spec["gpus"]
        done = sim.j_done[j]
        if sim.j_state[j] == RUN and H > sim.j_ready[j]:
            full, comp, _ = sim.computed(j, H)
            done += comp  # in flight at the horizon: not lost
            sim.slow_lost(j, sim.j_ready[j], H)
            sim.ckpt_gpu_h += full * spec["checkpoint_cost_s"] / 3600.0 * gpus
        sim.close_episode(j, H)
        end = sim.j_end[j] if sim.j_state[j] == DONE else H
        acc = prod.setdefault(gpus, [0.0, 0.0, 0.0])
        acc[0] += done
        acc[1] += end - sim.j_submit[j]
        acc[2] += 0.0 if sim.j_start[j] is None else end - sim.j_start[j]
        total_gpu_h += done * gpus
        if spec["work_hours"] is not None:
            if sim.j_state[j] == DONE:
                walls.setdefault(gpus, []).append(end - sim.j_submit[j])
            else:
                unfinished += 1
            if sim.j_start[j] is not None:
                queued.setdefault(gpus, []).append(sim.j_start[j] - sim.j_submit[j])
    for node in range(sim.n):
        s = sim.state[node]
        if s == DOWN:
            sim.down_hours += H - sim.down_since[node]
        elif s == MAINT_DOWN:
            sim.maint_hours += H - sim.down_since[node]
    retired_h = sum(H - t for t in sim.retired_at)
    node_h = sim.n * H
    out = {
        "fleet_goodput": total_gpu_h / (node_h * sim.gpn),
        "node_availability": 1.0 - (sim.down_hours + sim.maint_hours + retired_h) / node_h,
        "repair_queue_mean": sim.q_area / H,
        "repair_wait_hours": sim.waits / sim.n_waits if sim.n_waits else 0.0,
        "spare_utilisation": sim.sp_area / (sim.spare_target * H) if sim.spare_target else 0.0,
        "spare_blocking": sim.sp_miss / sim.sp_req if sim.sp_req else 0.0,
        "failures": float(sim.failures),
        "systematic_failures": float(sim.systematic),
        "interruptions": float(sim.interruptions),
        "retired_nodes": float(sim.retired),
        "bad_nodes": float(
            sum(b and s != RETIRED for b, s in zip(sim.bad, sim.state, strict=True))
        ),
        "cures": float(sim.cures),
        "silent_repairs": float(sim.silent),
        "unfinished_jobs": float(unfinished),
        "lost_gpu_hours:checkpoint": sim.ckpt_gpu_h,
    }
    for gpus, (p, since_submit, since_start) in sorted(prod.items()):
        out[f"ettr:{gpus}"] = p / since_submit if since_submit > 0 else 0.0
        out[f"goodput:{gpus}"] = p / since_start if since_start > 0 else 0.0
    for gpus, w in sorted(walls.items()):
        out[f"wall_hours:{gpus}"] = sum(w) / len(w)
    for gpus, w in sorted(queued.items()):
        out[f"queue_wait_hours:{gpus}"] = sum(w) / len(w)
    for cause, v in sorted(sim.lost.items()):
        out[f"lost_gpu_hours:{cause}"] = v
    return out
