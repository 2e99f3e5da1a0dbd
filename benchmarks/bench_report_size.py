"""Size of the self-contained report (one HTML file: Vega inlined, every chart's aggregates
embedded once, the drill-down section included) as the fleet grows, extrapolated to 2,048 nodes.

    python -m benchmarks.bench_report_size [--nodes 16 64] [--days 30] [--fresh]

Per size N: a simulated fleet (``goodput simulate --nodes N --gpus-per-node 8 --days D --seed 3``,
kept in benchmarks/out/report-fleet-N-Dd), ``goodput ingest`` and ``goodput build`` into a home
(benchmarks/out/report-home-N-Dd), whose build writes the report. A home a finished build left
is kept: later runs write its report again with ``goodput report`` (the report is what this
measures); ``--fresh`` ingests and builds again. Printed: the HTML size,
the inlined JavaScript (fixed) and the chart data (the specs' JSON) of each size, the bytes each
host adds (the slope between the smallest and the largest size) and the size that gives at
2,048 nodes (Llama 3's fleet). A 2,048-node build takes most of an hour on 2 cores
(bench_fleet_scale); the per-host slope of two small fleets stands in for it. The survival
curves and the slowness section grow fastest in small fleets but are capped (``caps``): they
are counted at their caps (at the largest size's bytes per record) and the rest of the page
extrapolated per host. The plain linear extrapolation of the
whole page is printed beside it (an upper bound: it extends the curves past their cap).

TARGET line: the report at 2,048 nodes < 5 MB (capped sections at their caps, the rest per host).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from analysis.taxonomy import CLASSES
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from dashboards.sections import slowness
from dashboards.sections.survival import survival_frame
from sample_data.simulation import source_folders
from warehouse.signals import CAUSES

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
LIMIT = 5 * 1024**2
FLEET = 2048
MB = 1024**2


def run(*argv: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([*GOODPUT, *argv], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def report_of(nodes: int, days: float, fresh: bool) -> tuple[Path, float]:
    """The report of the N-node fleet's build (simulated and built once unless ``fresh``), and
    the seconds spent: ingest + build, or the report alone."""
    fleet = OUT / f"report-fleet-{nodes}-{days:g}d"
    if not (fleet / "ground_truth.json").exists():
        shutil.rmtree(fleet, ignore_errors=True)
        run("simulate", "--out", str(fleet), "--nodes", str(nodes), "--gpus-per-node", "8",
            "--days", f"{days:g}", "--seed", "3")  # fmt: skip
    home = OUT / f"report-home-{nodes}-{days:g}d"
    built = home / ".bench_built"
    if built.exists() and not fresh:
        return home / "reports" / "goodput_report.html", run("--home", str(home), "report")
    shutil.rmtree(home, ignore_errors=True)
    sources = [str(p) for p in source_folders(fleet)]
    wall = run("--home", str(home), "ingest", *sources, "--cluster", "sim")
    wall += run("--home", str(home), "build")
    built.touch()
    return home / "reports" / "goodput_report.html", wall


def parts(page: str) -> dict[str, int]:
    """Bytes of the page, of its inlined JavaScript and of the chart specs' JSON (the data)."""
    specs = re.search(
        r'<script type="application/json" id="report-specs">(.*?)</script>', page, re.DOTALL
    )
    scripts = sum(len(m.encode()) for m in re.findall(r"<script>(.*?)</script>", page, re.DOTALL))
    data = json.loads(specs.group(1)) if specs else {}
    return {
        "html": len(page.encode()),
        "javascript": scripts,
        "specs": len(specs.group(1).encode()) if specs else 0,
        "explore": len(json.dumps(data.get("explore", {})).encode()),
        "sections": {k: len(json.dumps(v).encode()) for k, v in data.items()},
        "records": {k: sum(map(len, v.get("datasets", {}).values())) for k, v in data.items()},
    }


def caps() -> dict[str, int]:
    """The sections whose chart data stops growing, and the records they hold at their caps:
    the survival curves (``max_points`` per class of the taxonomy) and the time lost running
    slow (the rank map's rows x steps, the nodes' chart and one bar per cause)."""
    survival = inspect.signature(survival_frame).parameters["max_points"].default + 1
    return {
        "survival": len(CLASSES) * survival,
        "slowness": slowness.ROWS * slowness.CELLS + slowness.NODES + len(CAUSES),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--days", type=float, default=30)
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="ingest and build again (default: reuse a finished build)",
    )
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for n in sorted(set(args.nodes)):
        path, wall = report_of(n, args.days, args.fresh)
        p = parts(path.read_text(encoding="utf-8"))
        sizes[n] = p
        print(
            f"{n:>5} nodes, {args.days:g} days: report {p['html'] / MB:.2f} MB (JavaScript "
            f"{p['javascript'] / MB:.2f} MB, chart specs {p['specs'] / MB:.2f} MB, of which the "
            f"drill-down {p['explore'] / 1024:.0f} kB); {wall:.0f} s",
            flush=True,
        )
    lo, hi = min(sizes), max(sizes)
    grown = {
        k: sizes[hi]["sections"][k] - sizes[lo]["sections"].get(k, 0) for k in sizes[hi]["sections"]
    }
    print(
        "chart data grown from the smallest to the largest size: "
        + ", ".join(
            f"{k} +{v / 1024:.0f} kB" for k, v in sorted(grown.items(), key=lambda kv: -kv[1])[:6]
        )
    )
    per_host = (sizes[hi]["html"] - sizes[lo]["html"]) / (hi - lo) if hi > lo else 0.0
    at_fleet = sizes[hi]["html"] + per_host * (FLEET - hi)
    print(
        f"whole page linear: {per_host / 1024:.1f} kB per host (from {lo} to {hi} nodes); at "
        f"{FLEET:,} nodes: {at_fleet / MB:.2f} MB (upper bound)"
    )
    big, cap = sizes[hi], caps()

    def capped_bytes(p):
        return sum(p["sections"].get(k, 0) for k in cap)

    rest_per_host = (
        (big["html"] - capped_bytes(big)) - (sizes[lo]["html"] - capped_bytes(sizes[lo]))
    ) / max(hi - lo, 1)
    at_cap = {k: big["sections"].get(k, 0) / max(big["records"].get(k, 0), 1) * n
              for k, n in cap.items()}  # fmt: skip
    capped = big["html"] - capped_bytes(big) + rest_per_host * (FLEET - hi) + sum(at_cap.values())
    print(
        "at their caps: "
        + ", ".join(f"{k} {cap[k]:,} records, {at_cap[k] / 1024:.0f} kB" for k in cap)
        + f"; the rest {rest_per_host / 1024:.2f} kB per host: at {FLEET:,} nodes "
        f"{capped / MB:.2f} MB"
    )
    target(
        f"report at {FLEET:,} nodes < {LIMIT // MB} MB (survival and slowness at their caps, the "
        "rest per host "
        f"from {lo}-{hi} nodes)",
        capped < LIMIT,
        f"{capped / MB:.2f} MB; whole page linear {at_fleet / MB:.2f} MB",
    )


if __name__ == "__main__":
    run_benchmark(main)
