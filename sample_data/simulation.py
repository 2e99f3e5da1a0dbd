"""The synthetic fleet simulation: hardware lifetimes, faults, repairs, jobs, and their files.

The model is deliberately simple but internally consistent, so that the analysis can be
checked against a known truth:

* every hardware unit follows a per-class Weibull lifetime law (calendar time, left-truncated
  for units already installed when observation starts);
* a fatal fault takes its node out of service until repaired; the failed unit (for the GPU
  module: the whole GPU board, i.e. gpu + gpu_memory + nvlink) is replaced by a new unit;
* jobs run on a scheduler model (Slurm gang training chains, Slurm small jobs, a Kubernetes
  PyTorchJob chain) and are killed by the faults that hit their nodes.

``sample_data.hardware`` draws the hardware's life, ``sample_data.scheduler`` the jobs; this
module runs them in order, assigns ids and writes the files. The fault rates come from a
:class:`~sample_data.model.CauseMix` the caller passes (the CLI passes the published Llama 3
table of ``analysis.taxonomy``). ``simulate`` writes every format through
``sample_data.writers`` (one module per ingest format). Everything is drawn from generators
seeded from ``seed`` and emitted in a fixed order, so identical arguments give byte-identical
files. Internal times are float seconds from ``start`` (UTC).
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import numpy as np

from sample_data import defaults
from sample_data import fail_slow
from sample_data.fault_codes import check_every_class_reports
from sample_data.fault_codes import choose_codes
from sample_data.hardware import simulate_hardware
from sample_data.hardware import simulate_maintenance
from sample_data.model import GPU_PCI_BUS
from sample_data.model import GPU_TEMP_BETA
from sample_data.model import K8S_NAMESPACE
from sample_data.model import Attempt
from sample_data.model import CauseMix
from sample_data.model import Fleet
from sample_data.model import host_name
from sample_data.model import software_rate_per_node_hour
from sample_data.scheduler import gang_chain
from sample_data.scheduler import small_jobs
from sample_data.truth import ground_truth
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
    simulate_hardware(f, r_hw, mix)
    simulate_maintenance(f, r_maint)
    sw = software_rate_per_node_hour(mix)
    n_slurm = nodes - k8s_nodes
    n_small = max(1, round(0.25 * n_slurm)) if n_slurm > 1 else 0
    train_pool = list(range(n_slurm - n_small)) if n_slurm > 1 else list(range(n_slurm))
    small_pool = list(range(n_slurm - n_small, n_slurm)) if n_small else []
    k8s_pool = list(range(n_slurm, nodes))
    f.attempts.extend(
        gang_chain(f, r_train, train_pool, "slurm", 0, "llm-pretrain-{:02d}", "train", sw)
    )
    f.attempts.extend(small_jobs(f, r_small, small_pool, 100000))
    if k8s_pool:
        f.attempts.extend(
            gang_chain(f, r_k8s, k8s_pool, "k8s", 10_000_000, "llm-ft-{:02d}", "", sw)
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
