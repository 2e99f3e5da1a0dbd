"""One answer per question over several simulated fleets: every scoped reading command equals the
whole fleet's stored tables filtered to the scope, and the CLI, `goodput sql` and the stored
tables the report reads give the same fleet goodput, lost GPU-hours by cause and MTBF of a
month.

    .venv/bin/python -m benchmarks.validate_differential_scope [--fleets 3] [--keep]

Each fleet (``goodput simulate --nodes N --days D --seed S --scrape-interval 1d``: 16, 24 and 32
nodes of 8 GPUs, 45 days, seeds 1..3; written under ``benchmarks/out/diff-scope-*`` and reused)
is ingested and built into a fresh home. Then, for every cluster, partition, account and the
busiest user, a calendar month and a two-week window:

- ``losses --by cause --json`` (scoped) == the stored ``interruptions`` of the scope's job
  attempts ending in the window, grouped by the stored cause class: the same classes, counts,
  lost GPU-hours, and MTBF = the window's own hours (clipped to the data's first start .. last
  end) / count;
- ``trend --period month --json`` over a month == the unscoped ``trend --period month`` row of
  that month (GPU-hours, goodput, lost GPU-hours, interruptions, MTBF);
- ``goodput sql`` over the scope == the same filter by hand (interruptions per class);
- unscoped: ``compare --by cluster`` goodput == SQL's GPU-hour-weighted goodput of
  ``goodput_jobs``; ``losses`` lost GPU-hours per cause == SQL's; ``trend --period month`` MTBF of
  each month == the stored ``goodput_trend`` row == SQL's month hours / unexpected interruptions.

Floats agree within 1e-9 relative. TARGET lines: every comparison equal, over every fleet.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shutil
import time
from datetime import datetime
from pathlib import Path

import polars as pl

from analysis.trend import data_window
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from pipelines.cli import main as goodput
from sample_data.simulation import source_folders
from warehouse.store import Warehouse

OUT = Path(__file__).resolve().parent / "out"
FLEETS = [(16, 1), (24, 2), (32, 3)]  # (nodes, seed)
DAYS = 45
KEYS = ["cluster", "scheduler", "job_id", "attempt"]
REL = 1e-9
CLUSTER = "simfleet"  # as `goodput simulate` suggests ingesting its fleets
WHAT = {
    "scoped losses": "scoped `losses` == the fleet's interruptions filtered to the scope",
    "scoped trend": "scoped `trend` of a month == the unscoped monthly trend's row",
    "scoped sql": "scoped `goodput sql` == the fleet's interruptions filtered to the scope",
    "fleet goodput": "fleet goodput: `compare` == `goodput sql`",
    "lost by cause": "lost GPU-hours by cause: `losses` == `goodput sql`",
    "month MTBF": "MTBF of each month: `trend` == stored goodput_trend == SQL hours / count",
}


def cli(home: Path, *argv: str):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = goodput(["--home", str(home), *argv])
    if code != 0:
        raise RuntimeError(f"goodput {' '.join(argv)} exited {code}")
    return json.loads(out.getvalue())


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= REL * max(abs(a), abs(b), 1e-12)


def build_fleet(nodes: int, seed: int, keep: bool) -> Path:
    fleet = OUT / f"diff-scope-{nodes}n-{DAYS}d-seed{seed}"
    home = OUT / f"diff-scope-home-{nodes}n-seed{seed}"
    with contextlib.redirect_stdout(io.StringIO()):
        if not (fleet / "ground_truth.json").exists():
            goodput(["simulate", "--out", str(fleet), "--nodes", str(nodes), "--days",
                     str(DAYS), "--seed", str(seed), "--scrape-interval", "1d"])  # fmt: skip
        if not (keep and (home / "parquet" / "interruptions").exists()):
            shutil.rmtree(home, ignore_errors=True)
            sources = [str(p) for p in source_folders(fleet)]
            assert goodput(["--home", str(home), "ingest", *sources, "--cluster", CLUSTER]) == 0
            assert goodput(["--home", str(home), "build"]) == 0
    return home


def scopes(wh: Warehouse) -> list[tuple[list[str], tuple | None, tuple | None]]:
    """(flags, (dimension, value) or None, (from, to) or None) to compare."""
    att = wh.read("job_attempts")
    out = []
    for dim in ("cluster", "partition", "account"):
        for value in att[dim].drop_nulls().unique().sort():
            out.append(([f"--{dim}", value], (dim, value), None))
    user = att["user"].drop_nulls().mode().sort()[0]
    out.append((["--user", user], ("user", user), None))
    first = att["start_time"].min()
    month = datetime(first.year + first.month // 12, first.month % 12 + 1, 1)
    nxt = datetime(month.year + month.month // 12, month.month % 12 + 1, 1)
    out.append((["--from", month.isoformat(), "--to", nxt.isoformat()], None, (month, nxt)))
    lo, hi = datetime(month.year, month.month, 10), datetime(month.year, month.month, 24)
    part = att["partition"].drop_nulls().mode().sort()[0]
    out.append(
        (["--partition", part, "--from", lo.isoformat(), "--to", hi.isoformat()],
         ("partition", part), (lo, hi))
    )  # fmt: skip
    return out


def check_fleet(home: Path) -> dict[str, list[str]]:
    """Per comparison, the mismatches found (empty: equal)."""
    wh = Warehouse(home, read_only=True)
    att, intr = wh.read("job_attempts"), wh.read("interruptions").filter(~pl.col("planned"))
    window = data_window(att)
    bad: dict[str, list[str]] = {"scoped losses": [], "scoped trend": [], "scoped sql": []}
    monthly = cli(home, "trend", "--period", "month", "--json")["rows"]
    months = {r["period_start"][:10]: r for r in monthly}
    for flags, dim, span in scopes(wh):
        mine = intr
        if dim is not None:
            keys = att.filter(pl.col(dim[0]) == dim[1]).select(KEYS)
            mine = mine.join(keys, on=KEYS, how="semi")
        lo, hi = window
        if span is not None:
            mine = mine.filter(pl.col("end_time").is_between(*span, closed="left"))
            lo, hi = max(lo, span[0]), min(hi, span[1])
        hours = (hi - lo).total_seconds() / 3600
        want = {
            r["cause_class"]: (r["n"], r["lost"])
            for r in mine.group_by("cause_class")
            .agg(n=pl.len(), lost=pl.col("lost_gpu_hours").fill_null(0).sum())
            .iter_rows(named=True)
        }
        got = {r["cause"]: r for r in cli(home, "losses", "--json", *flags)["rows"]}
        if set(got) != set(want) or not all(
            got[c]["interruptions"] == n
            and close(got[c]["lost_gpu_hours"], lost)
            and close(got[c]["mtbf_hours"], hours / n)
            for c, (n, lost) in want.items()
        ):
            bad["scoped losses"].append(f"{home.name} {' '.join(flags)}")
        query = "select cause_class, count(*) n from interruptions where not planned group by 1"
        sql = cli(home, "sql", "--format", "json", *flags, query)
        if {r["cause_class"]: r["n"] for r in sql} != {c: n for c, (n, _) in want.items()}:
            bad["scoped sql"].append(f"{home.name} {' '.join(flags)}")
        if dim is None:  # a calendar month: its row of the unscoped monthly trend
            row = cli(home, "trend", "--period", "month", "--json", *flags)["rows"]
            whole = months[span[0].date().isoformat()]
            keys = ("gpu_hours", "goodput", "lost_gpu_hours", "interruptions", "mtbf_hours")
            if len(row) != 1 or not all(close(row[0][k], whole[k]) for k in keys):
                bad["scoped trend"].append(f"{home.name} {' '.join(flags)}")
    bad |= check_one_answer(home, wh, intr, months)
    return bad


def check_one_answer(home: Path, wh: Warehouse, intr: pl.DataFrame, months: dict) -> dict:
    bad: dict[str, list[str]] = {"fleet goodput": [], "lost by cause": [], "month MTBF": []}
    query = (
        "select sum(productive_hours * n_gpus) / sum(wall_hours * n_gpus) g from goodput_jobs "
        "where wall_hours > 0"
    )
    sql = cli(home, "sql", "--format", "json", query)[0]["g"]
    rows = cli(home, "compare", "--by", "cluster", "--json")["rows"]
    if len(rows) != 1 or not close(rows[0]["goodput"], sql):
        bad["fleet goodput"].append(home.name)
    query = (
        "select cause_class c, sum(lost_gpu_hours) l from interruptions where not planned "
        "group by 1"
    )
    sql = cli(home, "sql", "--format", "json", query)
    got = {r["cause"]: r["lost_gpu_hours"] for r in cli(home, "losses", "--json")["rows"]}
    if set(got) != {r["c"] for r in sql} or not all(close(got[r["c"]], r["l"]) for r in sql):
        bad["lost by cause"].append(home.name)
    stored = wh.read("goodput_trend").filter(pl.col("period") == "month")
    for start, row in months.items():
        s = stored.filter(pl.col("period_start").dt.date().cast(pl.Utf8) == start)
        lo, hi = (datetime.fromisoformat(row[k]) for k in ("period_start", "period_end"))
        n = intr.filter(pl.col("end_time").is_between(lo, hi, closed="left")).height
        want = row["hours"] / n if n else None
        if not (close(row["mtbf_hours"], want) and close(s["mtbf_hours"][0], want)):
            bad["month MTBF"].append(f"{home.name} {start}")
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fleets", type=int, default=len(FLEETS), help="how many of the fleets")
    ap.add_argument("--keep", action="store_true", help="reuse built homes")
    args = ap.parse_args()
    found: dict[str, list[str]] = {}
    counted = 0
    for nodes, seed in FLEETS[: args.fleets]:
        t0 = time.perf_counter()
        home = build_fleet(nodes, seed, args.keep)
        res = check_fleet(home)
        counted += len(scopes(Warehouse(home, read_only=True)))
        for k, v in res.items():
            found.setdefault(k, []).extend(v)
        print(f"{home.name}: {sum(map(len, res.values()))} mismatches "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    for name, missed in found.items():
        target(
            f"{WHAT[name]} (floats within {REL:g})",
            not missed,
            f"{len(missed)} mismatches over {args.fleets} fleets, {counted} scopes"
            + (f": {', '.join(missed[:5])}" if missed else ""),
        )
    return None


if __name__ == "__main__":
    run_benchmark(main)
