"""sacct text against sacct --json of the same jobs: the same ``job_attempts``.

    python -m benchmarks.validate_differential_sacct [--fleets 16:3 32:7 64:11] [--days 30]

Each fleet (``nodes:seed``, 8 GPUs a node, its GPUs typed as Slurm lists them: ``gres/gpu`` and
``gres/gpu:h100``): ``sample_data.simulation.build_fleet`` and its two sacct writers (the text
``--parsable2 --duplicates`` dump with steps, and ``--json``), each file ingested into a warehouse
of its own (``ingest.runner.ingest_paths``), then ``job_attempts`` of the two compared
(``differences``): the same attempts by (cluster, scheduler, job_id, attempt), and every column
equal (floats within 1e-9 relative) but those ``FORMAT_OWN`` names, which only one format
carries. Also: the attempts equal the simulator's (``slurm_attempts``).

TARGET: text vs JSON job_attempts equal, on every fleet.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.targets import run_benchmark
from benchmarks.targets import target

KEY = ["cluster", "scheduler", "job_id", "attempt"]
# What one format says that the other cannot: where a row was read (``source`` names the format,
# ``source_file`` / ``source_line`` the file and its line or record number), and ``raw_state``,
# each format's own spelling of the state: the text's ``CANCELLED by 10004`` (the canceller's
# uid) is --json's ``CANCELLED`` (its ``kill_request_user`` names the canceller, not kept).
FORMAT_OWN = ("source", "source_file", "source_line", "raw_state")
RELATIVE = 1e-9


def differences(text: pl.DataFrame, json: pl.DataFrame) -> list[str]:
    """What differs between two ``job_attempts`` frames of the same jobs, one line each: attempts
    only one has, then per column (but ``FORMAT_OWN``) how many attempts disagree, with one."""
    out = []
    joined = text.join(json, on=KEY, how="full", suffix="_json", coalesce=True, nulls_equal=True)
    for side, col in (("text", "source_json"), ("json", "source")):
        alone = joined.filter(pl.col(col).is_null())
        if alone.height:
            out.append(f"{alone.height} attempt(s) only in the {side}: {alone.select(KEY).row(0)}")
    both = joined.filter(pl.col("source").is_not_null() & pl.col("source_json").is_not_null())
    for col in text.columns:
        if col in KEY or col in FORMAT_OWN:
            continue
        a, b = pl.col(col), pl.col(f"{col}_json")
        if text.schema[col].is_float():
            same = ((a - b).abs() <= RELATIVE * pl.max_horizontal(a.abs(), b.abs())) | (
                a.is_null() & b.is_null()
            )
        else:
            same = a.eq_missing(b)
        bad = both.filter(~same.fill_null(False))
        if bad.height:
            first = bad.select(*KEY, col, f"{col}_json").row(0)
            out.append(f"{col}: {bad.height} attempt(s) differ, e.g. {first}")
    return out


def _fleet(nodes: int, seed: int, days: float, root: Path) -> tuple[int, list[str], float]:
    """(attempts, differences, ingest seconds) of one fleet."""
    from ingest.runner import ingest_paths
    from pipelines.cli.sample import llama3_cause_mix
    from sample_data.simulation import build_fleet
    from sample_data.writers import sacct as sacct_text
    from sample_data.writers import sacct_json
    from sample_data.writers.base import slurm_attempts
    from warehouse.store import Warehouse

    f = build_fleet(llama3_cause_mix(), nodes=nodes, gpus_per_node=8, days=days, seed=seed,
                    fault_scale=30.0, scrape_interval_s=0, k8s_nodes=0)  # fmt: skip
    files = {"text": root / "sacct.txt", "json": root / "sacct.json"}
    sacct_text.write(f, files["text"])
    sacct_json.write(f, files["json"])
    t0, tables = time.perf_counter(), {}
    for name, path in files.items():
        wh = Warehouse(root / f"home-{name}")
        [report] = ingest_paths(wh, [path], jobs=1)
        assert report.rows_quarantined == 0, (path, report)
        tables[name] = wh.read("job_attempts")
    wall = time.perf_counter() - t0
    diffs = differences(tables["text"], tables["json"])
    truth = {(a.job_id, a.attempt + 1) for a in slurm_attempts(f)}  # the model counts from 0
    for name, table in tables.items():
        got = set(zip(table["job_id"], table["attempt"], strict=True))
        if got != truth:
            diffs.append(f"{name}: {len(got ^ truth)} attempt(s) differ from the simulator's")
    return len(truth), diffs, wall


def main() -> int | None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fleets", nargs="+", default=["16:3", "32:7", "64:11"], help="nodes:seed")
    ap.add_argument("--days", type=float, default=30.0)
    args = ap.parse_args()
    failed = []
    for spec in args.fleets:
        nodes, seed = (int(x) for x in spec.split(":"))
        with tempfile.TemporaryDirectory(prefix="diff-sacct-") as tmp:
            n, diffs, wall = _fleet(nodes, seed, args.days, Path(tmp))
        print(f"{nodes} nodes, seed {seed}: {n:,} attempts, both formats ingested in {wall:.1f} s, "
              f"{len(diffs)} difference(s)")  # fmt: skip
        for d in diffs:
            print(f"  {d}")
        if diffs:
            failed.append(spec)
    target(
        "text vs JSON job_attempts equal",
        not failed,
        f"{len(args.fleets) - len(failed)} of {len(args.fleets)} fleets equal in every column but "
        f"{', '.join(FORMAT_OWN)}; floats within {RELATIVE:g} relative",
    )
    return None


if __name__ == "__main__":
    run_benchmark(main)
