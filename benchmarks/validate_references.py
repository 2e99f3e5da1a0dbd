"""Every published figure of ``analysis/data/reference_fleets.toml`` that names its public data
(``reproduce``) recomputed from that data by the product, within 10% of the figure, with TARGET
lines; and each reproduced figure's one-line comparison (not a unit test: the data live in the
shared datasets folder).

    python -m benchmarks.validate_references [--datasets DIR]

- titan: ``titan/gc_full.csv`` through ``goodput ingest`` (service nodes excluded), the quarter's
  system MTBF of ``analysis.system_mtbf`` (distinct failure instants over the quarter's hours);
- lanl: ``lanl/LANL_1996-2005.csv`` through ``goodput ingest``, the mean time to repair over
  every repaired failure (``analysis.reference_comparison.repair_minutes``, the figure this
  fleet's own repair time is compared with);
- stepfun: every fault start of the public trace (``tests/fixtures/stepfun/fault_starts.csv``)
  per 1,000 server-days (``reference_comparison.per_1k_unit_days``, the count this fleet's
  failures per 1,000 node-days use).

LANL's abstract also gives a range, 20 to 1,000 failures per year per system; it is not a figure
of the file: the data give 22 to 1,194 (each system's failures over its span), printed here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import polars as pl

from analysis.availability import refresh_availability
from analysis.reference_comparison import Ours
from analysis.reference_comparison import per_1k_unit_days
from analysis.reference_comparison import repair_minutes
from analysis.references import Figure
from analysis.references import load
from analysis.system_mtbf import failure_events
from analysis.system_mtbf import system_mtbf
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from benchmarks.validate_public_datasets import default_datasets
from benchmarks.validate_public_datasets import goodput
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

ROOT = Path(__file__).resolve().parents[1]
STEPFUN = ROOT / "tests" / "fixtures" / "stepfun" / "fault_starts.csv"
WITHIN = 0.10


def quarter_mtbf(
    wh: Warehouse,
    label: str,
    observed_from: datetime | None = None,
    observed_to: datetime | None = None,
) -> Ours:
    """The system MTBF of one quarter (``label``, e.g. 2016-Q4) of the warehouse's failure
    records, with its 95% CI."""
    events = failure_events(
        wh.read("failures"),
        TABLES["interruptions"].empty(),
        TABLES["node_failures"].empty(),
        pl.DataFrame(schema={"host": pl.Utf8, "cluster": pl.Utf8}),
    )
    q = system_mtbf(events, observed_from, observed_to).filter(
        (pl.col("period") == "quarter") & (pl.col("grouping") == "all") & (pl.col("label") == label)
    )
    if q.height == 0:
        return Ours(missing=f"no failures in {label}")
    r = q.row(0, named=True)
    return Ours(r["mtbf_hours"], r["mtbf_ci_low"], r["mtbf_ci_high"],
                f"{r['failures']:,} failures in {label}")  # fmt: skip


def stepfun_rate(path: Path, servers: int, days: float) -> Ours:
    """Fault starts of the StepFun trace per 1,000 server-days."""
    n = pl.read_csv(path).height
    return per_1k_unit_days(n, servers * days * 24.0, f"{n:,} fault starts")


def reproduced(f: Figure, titan: Warehouse, lanl_availability: pl.DataFrame) -> Ours:
    """The figure recomputed from its public data (``f.reproduce``)."""
    if f.reproduce == "titan":
        return quarter_mtbf(titan, f.label)
    if f.reproduce == "lanl":
        return repair_minutes(lanl_availability)
    if f.reproduce == "stepfun":
        return stepfun_rate(STEPFUN, f.fleet.nodes, f.fleet.days)
    raise ValueError(f"no public data named {f.reproduce!r}")


def main() -> int | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", type=Path, default=default_datasets(),
                    help="folder with titan/ and lanl/")  # fmt: skip
    args = ap.parse_args()
    if args.datasets is None or not (args.datasets / "titan" / "gc_full.csv").is_file():
        sys.exit("validate_references: no datasets folder (titan/, lanl/); pass --datasets DIR")
    figures = [f for f in load() if f.reproduce]
    with tempfile.TemporaryDirectory() as work:
        titan, lanl = Path(work) / "titan", Path(work) / "lanl"
        goodput("ingest", str(args.datasets / "titan" / "gc_full.csv"), "--home", str(titan),
                "--cluster", "titan", "--exclude-hosts",
                str(args.datasets / "titan" / "titan.service.txt"))  # fmt: skip
        goodput("ingest", str(args.datasets / "lanl" / "LANL_1996-2005.csv"), "--home", str(lanl),
                "--not-before", "1990-01-01")  # fmt: skip
        availability = refresh_availability(Warehouse(lanl))[0]
        print(f"{'fleet':8} {'figure':34} {'published':>10} {'from its data':>14}  95% CI / basis")
        for f in figures:
            got = reproduced(f, Warehouse(titan), availability)
            what = f"{f.metric}{', ' + f.label if f.label else ''}"
            ci = f"[{got.ci_low:.3g}, {got.ci_high:.3g}]" if got.ci_low and got.ci_high else ""
            print(f"{f.fleet.id:8} {what:34} {f.value:10.3g} {got.value or 0:14.3g}  {ci} "
                  f"{got.basis or got.missing}")  # fmt: skip
            target(
                f"{f.fleet.label} {what} recomputed from its public data within 10% of the "
                f"published {f.shown}",
                got.value is not None and abs(got.value / f.value - 1) <= WITHIN,
                f"{got.value:.3g}" if got.value is not None else got.missing,
            )
        years = availability.filter(pl.col("level") == "system").select(
            per_year=8766.0 / pl.col("mtbf_hours")
        )["per_year"]
        print(
            f"LANL failures per system-year from its data: {years.min():.0f} to {years.max():,.0f} "
            "(the abstract's range: 20 to 1,000; not a figure of the file)"
        )
    return None


if __name__ == "__main__":
    run_benchmark(main)
