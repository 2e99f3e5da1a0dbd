"""Every invariant check a build runs, on the demo and on simulated fleets: all must hold.

    python -m benchmarks.validate_invariants [--fleets 10]

The demo (the committed sample fleet, as ``goodput demo`` ingests and builds it) and
``--fleets`` simulated fleets (``sample_data.simulation.simulate``: 8 to 64 nodes, 14 to 30
days, each its own seed) run through the whole pipeline (``pipelines.run.run_pipeline``: the
ingest and build jobs, as the CLI runs them), each fleet with a different set of its sources
(all, the scheduler's alone, the scheduler with telemetry, with the hardware logs, Kubernetes
with telemetry ...). A fleet passes when every ERROR-severity asset check of its runs passed
(``analysis.checks.BUILD_CHECKS`` and the ingest checks); one ``TARGET`` per fleet names the
failed checks and their first offending rows. The demo has its own line for the capacity bound:
the GPU-hours its jobs used against those its 256 GPUs can give.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import dagster as dg

from analysis.checks.accounting import capacity
from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from pipelines.cli.run_summary import failure_lines
from pipelines.cli.sample import SAMPLE_FLEET
from pipelines.cli.sample import llama3_cause_mix
from pipelines.run import PipelineError
from pipelines.run import run_pipeline
from sample_data.simulation import simulate
from sample_data.simulation import source_folders
from warehouse.store import Warehouse

# (nodes, days, the source folders ingested: None for all of them)
FLEETS = (
    (16, 30, None),
    (8, 14, ("slurm",)),
    (32, 14, ("slurm", "dcgm")),
    (16, 30, ("slurm", "kernel", "ipmi", "redfish")),
    (16, 14, ("k8s", "dcgm", "components")),
    (64, 14, None),
    (8, 30, ("slurm", "components")),
    (32, 14, ("slurm", "k8s", "kernel")),
    (16, 14, ("dcgm", "kernel", "ipmi", "components")),
    (24, 21, None),
)


def checked(evaluations) -> tuple[int, list[str]]:
    """(ERROR checks evaluated, one line per failed one)."""
    errors = [e for e in evaluations if e.severity == dg.AssetCheckSeverity.ERROR]
    return len(errors), failure_lines(evaluations)


def verdict(name: str, evaluations) -> None:
    n, failed = checked(evaluations)
    target(
        f"{name}: every invariant check holds",
        n > 0 and not failed,
        f"{n - len(failed)} of {n} ERROR checks passed"
        + (f"; {' | '.join(f[:300] for f in failed)}" if failed else ""),
    )


def main() -> None:
    args = options(fleets=len(FLEETS))
    with tempfile.TemporaryDirectory(prefix="validate-invariants-") as tmp:
        work = Path(tmp)
        wh = Warehouse(work / "demo")
        evaluations = run_pipeline(
            wh, source_folders(SAMPLE_FLEET), cluster="simfleet", nodes_per_rack=4
        )
        verdict("demo", evaluations)
        cap = capacity(wh)
        target(
            "demo: GPU-hours used at most those installed, every day",
            cap.passed,
            f"highest day {cap.metadata['highest_use']:.1%} of the installed GPU-hours"
            + (f"; {'; '.join(cap.metadata['examples'])}" if not cap.passed else ""),
        )
        for i, (nodes, days, kinds) in enumerate(FLEETS[: args.fleets]):
            out = work / f"fleet-{i}"
            simulate(out, llama3_cause_mix(), nodes=nodes, days=days, seed=100 + i)
            folders = [p for p in source_folders(out) if kinds is None or p.name in kinds]
            fleet = Warehouse(work / f"home-{i}")
            label = f"fleet {i + 1} ({nodes} nodes, {days} days, "
            label += f"{'all sources' if kinds is None else '+'.join(kinds)})"
            try:
                evaluations = run_pipeline(fleet, folders, cluster="sim", nodes_per_rack=4)
            except PipelineError as exc:  # a step that failed is no check that held
                target(f"{label}: every invariant check holds", False, str(exc))
                continue
            verdict(label, evaluations)


if __name__ == "__main__":
    run_benchmark(main)
