"""Attribution against the synthetic fleet's ground truth, on fleets of three seeds.

    python -m benchmarks.validate_attribution [--seeds 1 2 3] [--days 60] [--nodes 32] \\
        [--out /tmp/...]
    python -m benchmarks.validate_attribution --scale 100000   # attribution speed on random frames

Each seed: ``sample_data.simulation.simulate`` into a temporary folder,
``ingest.runner.ingest_paths`` into a temporary warehouse, the ``analysis.telemetry`` refreshers,
``build_interruptions``, then scoring against ``ground_truth.json``:

- truth: every attempt a fault killed (class = the fault's class, unexpected), every workload
  failure (FAILED / OUT_OF_MEMORY: software, unexpected; CANCELLED / PREEMPTED / TIMEOUT:
  planned) and every attempt a maintenance drain requeued (planned);
- an attributed row matches a truth row on (scheduler, job_id) and end time within
  ``END_TOLERANCE_S`` (truth rounds to the second, Kubernetes reports the restart a few seconds
  later);
- precision = predicted unexpected interruptions whose class equals the truth's / all predicted
  unexpected interruptions; recall = truth unexpected interruptions found unexpected with the
  right class / all truth unexpected interruptions; the same restricted to infrastructure;
- mix error = max over classes of |predicted share - true share| among unexpected interruptions;
- lifetimes: failed units vs the truth's faults (failure time within 1 s, same cause class).

Prints one line per seed plus the per-class mix; acceptance is precision and recall >= 0.95 and
mix error <= 2 percentage points.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from datetime import datetime
from pathlib import Path

import polars as pl

from benchmarks.targets import run_benchmark
from benchmarks.targets import target

END_TOLERANCE_S = 120
PLANNED_WORKLOAD_STATES = ("CANCELLED", "PREEMPTED", "TIMEOUT")


def truth_interruptions(truth: dict) -> pl.DataFrame:
    """(scheduler, job_id, end_time, cause_class, planned, kind) for every truth interruption."""
    rows = []
    for f in truth["faults"]:
        for a in f["killed_attempts"]:
            if a["end_time"]:
                rows.append(
                    (
                        a["scheduler"],
                        a["job_id"],
                        a["end_time"],
                        f["component_class"],
                        False,
                        "fault",
                    )
                )
    for w in truth["workload_failures"]:
        planned = w["state"].split()[0] in PLANNED_WORKLOAD_STATES
        rows.append((w["scheduler"], w["job_id"], w["end_time"], "software", planned, "workload"))
    for p in truth["planned"]:
        for a in p["requeued_attempts"]:
            if a["end_time"]:
                rows.append(
                    (a["scheduler"], a["job_id"], a["end_time"], "host_os", True, "maintenance")
                )
    df = pl.DataFrame(
        rows,
        schema=["scheduler", "job_id", "end_time", "cause_class", "planned", "kind"],
        orient="row",
    )
    return df.with_columns(
        pl.col("end_time").str.to_datetime("%Y-%m-%dT%H:%M:%S").cast(pl.Datetime("us"))
    )


def match(pred: pl.DataFrame, truth: pl.DataFrame) -> pl.DataFrame:
    """Predicted rows with the nearest truth row of the same job (within the tolerance)."""
    p = pred.select(
        "scheduler", "job_id", "end_time", "cause_class", "planned", "failure_domain"
    ).sort("end_time")
    t = truth.select(
        "scheduler",
        "job_id",
        t_end="end_time",
        t_class="cause_class",
        t_planned="planned",
        t_kind="kind",
    ).sort("t_end")
    return p.join_asof(
        t,
        left_on="end_time",
        right_on="t_end",
        by=["scheduler", "job_id"],
        strategy="nearest",
        tolerance=f"{END_TOLERANCE_S}s",
        check_sortedness=False,
    )


def score(interruptions: pl.DataFrame, truth: pl.DataFrame) -> dict:
    m = match(interruptions, truth)
    pred_u = m.filter(~pl.col("planned"))
    ok_p = pred_u.filter(
        pl.col("t_class").is_not_null()
        & ~pl.col("t_planned")
        & (pl.col("t_class") == pl.col("cause_class"))
    )
    truth_u = truth.filter(~pl.col("planned"))
    found = ok_p.select("scheduler", "job_id", "t_end").unique()
    infra = ~pl.col("cause_class").is_in(["software"])
    pred_i = pred_u.filter(pl.col("failure_domain") == "infrastructure")
    ok_i = pred_i.filter(pl.col("t_class") == pl.col("cause_class"))
    truth_i = truth_u.filter(infra)
    found_i = ok_i.filter(~pl.col("t_planned")).select("scheduler", "job_id", "t_end").unique()
    mix_p = pred_u.group_by("cause_class").agg(pred=pl.len())
    mix_t = truth_u.group_by("cause_class").agg(truth=pl.len())
    mix = (
        mix_t.join(mix_p, on="cause_class", how="full", coalesce=True)
        .fill_null(0)
        .with_columns(
            pred_share=pl.col("pred") / max(pred_u.height, 1),
            true_share=pl.col("truth") / max(truth_u.height, 1),
        )
        .with_columns(error=(pl.col("pred_share") - pl.col("true_share")).abs())
        .sort("truth", descending=True)
    )
    return {
        "n_pred_unexpected": pred_u.height,
        "n_true_unexpected": truth_u.height,
        "precision": ok_p.height / max(pred_u.height, 1),
        "recall": found.height / max(truth_u.height, 1),
        "infra_precision": ok_i.height / max(pred_i.height, 1),
        "infra_recall": found_i.height / max(truth_i.height, 1),
        "planned_found": m.filter(pl.col("planned") & pl.col("t_planned").fill_null(False)).height,
        "planned_true": truth.filter(pl.col("planned")).height,
        "unmatched_pred": m.filter(pl.col("t_class").is_null()).height,
        "mix_error": float(mix["error"].max()) if mix.height else 0.0,
        "mix": mix,
    }


def score_lifetimes(lifetimes: pl.DataFrame, truth: dict) -> dict:
    """Failed units vs truth faults: same set, failure time within 1 s, same cause class."""
    faults = {f["unit_serial"]: f for f in truth["faults"]}
    failed = lifetimes.filter(pl.col("event"))
    exact = sum(
        r["failure_cause"] == faults[r["unit_id"]]["component_class"]
        and abs(
            (
                r["observed_to"] - datetime.fromisoformat(faults[r["unit_id"]]["time"])
            ).total_seconds()
        )
        <= 1
        for r in failed.iter_rows(named=True)
        if r["unit_id"] in faults
    )
    return {
        "true_failures": len(faults),
        "failed_units": failed.height,
        "missed": len(set(faults) - set(failed["unit_id"])),
        "extra": len(set(failed["unit_id"]) - set(faults)),
        "exact": exact,
        "censored": lifetimes.height - failed.height,
    }


def ingest_fleet(fleet_dir: Path, home: Path):
    """Ingest a fleet folder into a fresh warehouse and run the telemetry refreshers."""
    from analysis.telemetry.counters import refresh_counter_events
    from analysis.telemetry.replacements import refresh_gpu_replacements
    from analysis.telemetry.rollups import refresh_gpu_hourly
    from ingest.base import ParseContext
    from ingest.runner import ingest_paths
    from sample_data.simulation import source_folders
    from warehouse.store import Warehouse

    wh = Warehouse(home)
    cluster = json.loads((fleet_dir / "ground_truth.json").read_text())["cluster"]
    ingest_paths(wh, source_folders(fleet_dir), ctx=ParseContext(cluster=cluster))
    refresh_gpu_hourly(wh)
    refresh_counter_events(wh)
    refresh_gpu_replacements(wh)
    return wh


def fleet_lifetimes(wh, gt: dict, **options):
    """component_lifetimes of an ingested simulated fleet over the span its ground truth
    ``gt`` covers (``options``: build_component_lifetimes' own)."""
    from analysis.lifetimes import build_component_lifetimes

    return build_component_lifetimes(
        wh.read("component_history"),
        wh.read("gpu_hourly"),
        wh.read("hw_events"),
        as_of=datetime.fromisoformat(gt["end"]),
        data_start=datetime.fromisoformat(gt["start"]),
        **options,
    )


def run_seed(seed: int, root: Path, days: float, nodes: int) -> dict:
    from analysis.attribution import build_interruptions
    from pipelines.cli.sample import llama3_cause_mix
    from sample_data.simulation import simulate

    fleet, home = root / f"fleet-{seed}", root / f"home-{seed}"
    for p in (fleet, home):
        shutil.rmtree(p, ignore_errors=True)
    t0 = time.perf_counter()
    simulate(fleet, llama3_cause_mix(), nodes=nodes, days=days, seed=seed)
    t1 = time.perf_counter()
    wh = ingest_fleet(fleet, home)
    t2 = time.perf_counter()
    df = build_interruptions(wh.read("job_attempts"), wh.read("node_events"), wh.read("hw_events"))
    t3 = time.perf_counter()
    gt = json.loads((fleet / "ground_truth.json").read_text())
    res = score(df, truth_interruptions(gt))
    res.update(
        seed=seed, simulate_s=t1 - t0, ingest_s=t2 - t1, attribute_s=t3 - t2, n_rows=df.height
    )
    lt = fleet_lifetimes(wh, gt, nodes_per_rack=4)
    res["lifetimes"] = score_lifetimes(lt, gt)
    return res


def scale_check(
    n_attempts: int, n_events: int, n_hosts: int = 4096, nodes_per_attempt: int = 4
) -> dict:
    """Time ``build_interruptions`` on random frames: n_attempts failed attempts over 60 days on
    n_hosts hosts, n_events hardware events and as many node events."""
    import numpy as np

    from analysis.attribution import build_interruptions
    from warehouse.schemas import conform

    rng = np.random.default_rng(0)
    t0 = np.datetime64("2026-01-01T00:00:00", "us")
    span = 60 * 86400 * 10**6
    end = t0 + rng.integers(0, span, n_attempts).astype("timedelta64[us]")
    hosts = np.array([f"node-{i:05d}" for i in range(n_hosts)])
    nodes = hosts[rng.integers(0, n_hosts, (n_attempts, nodes_per_attempt))]
    states = np.array(["NODE_FAIL", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "PREEMPTED"])
    att = pl.DataFrame(
        {
            "cluster": "c",
            "scheduler": "slurm",
            "job_id": np.arange(n_attempts).astype(str),
            "attempt": 1,
            "start_time": end - np.timedelta64(6 * 3600, "s"),
            "end_time": end,
            "n_gpus": 32,
            "state": states[rng.integers(0, len(states), n_attempts)],
            "exit_code": 1,
            "nodes": nodes.tolist(),
        }
    )
    classes = np.array(["gpu", "gpu_memory", "nvlink", "ib_link", "psu", "cooling", "software"])
    sevs = np.array(["fatal", "critical", "warning", "info"])
    hw = pl.DataFrame(
        {
            "event_id": np.arange(n_events).astype(str),
            "time": t0 + rng.integers(0, span, n_events).astype("timedelta64[us]"),
            "host": hosts[rng.integers(0, n_hosts, n_events)],
            "component_class": classes[rng.integers(0, len(classes), n_events)],
            "severity": sevs[rng.integers(0, len(sevs), n_events)],
            "source": "kernel",
        }
    )
    ne = pl.DataFrame(
        {
            "time": t0 + rng.integers(0, span, n_events).astype("timedelta64[us]"),
            "host": hosts[rng.integers(0, n_hosts, n_events)],
            "event": "down",
            "reason": "Not responding",
        }
    )
    att, hw, ne = conform("job_attempts", att), conform("hw_events", hw), conform("node_events", ne)
    t = time.perf_counter()
    out = build_interruptions(att, ne, hw)
    return {
        "attempts": n_attempts,
        "events": n_events,
        "rows": out.height,
        "seconds": time.perf_counter() - t,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--days", type=float, default=60)
    ap.add_argument("--nodes", type=int, default=32)
    ap.add_argument(
        "--out", type=Path, default=None, help="work folder (default: a temporary one, removed)"
    )
    ap.add_argument(
        "--scale",
        type=int,
        default=0,
        metavar="N",
        help="instead: time build_interruptions on N random failed attempts and 10 N events",
    )
    args = ap.parse_args(argv)
    if args.scale:
        r = scale_check(args.scale, 10 * args.scale)
        print(
            f"build_interruptions: {r['attempts']:,} failed attempts x {r['events']:,} hw events + "
            f"{r['events']:,} node events -> {r['rows']:,} rows in {r['seconds']:.2f} s"
        )
        return
    root = args.out or Path(tempfile.mkdtemp(prefix="validate_attribution-"))
    root.mkdir(parents=True, exist_ok=True)
    ok = True
    try:
        for seed in args.seeds:
            r = run_seed(seed, root, args.days, args.nodes)
            passed = r["precision"] >= 0.95 and r["recall"] >= 0.95 and r["mix_error"] <= 0.02
            ok &= passed
            print(
                f"seed {seed}: unexpected pred {r['n_pred_unexpected']} true "
                f"{r['n_true_unexpected']} | "
                f"precision {r['precision']:.3f} recall {r['recall']:.3f} | infra precision "
                f"{r['infra_precision']:.3f} recall {r['infra_recall']:.3f} | planned "
                f"{r['planned_found']}/"
                f"{r['planned_true']} | mix error {100 * r['mix_error']:.2f} pp | "
                f"{'PASS' if passed else 'FAIL'} | attribution {r['attribute_s']:.2f}s "
                f"(ingest {r['ingest_s']:.0f}s, {r['n_rows']} rows)"
            )
            lt = r["lifetimes"]
            print(
                f"  lifetimes: {lt['failed_units']} failed units for {lt['true_failures']} true "
                f"failures (missed {lt['missed']}, extra {lt['extra']}, time and cause exact "
                f"{lt['exact']}), {lt['censored']} censored"
            )
            with pl.Config(tbl_rows=30, tbl_hide_dataframe_shape=True, float_precision=3):
                print(r["mix"])
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)
    target(
        "attribution precision and recall >= 0.95, mix error <= 2 pp on every seed",
        ok,
        f"seeds {' '.join(map(str, args.seeds))}",
    )


if __name__ == "__main__":
    run_benchmark(main)
