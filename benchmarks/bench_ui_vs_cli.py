"""A `build` launched from the Dagster UI against `goodput build` from the command line, on the
committed sample fleet.

    .venv/bin/python -m benchmarks.bench_ui_vs_cli [--home DIR] [--port 3999]

One home (``benchmarks/out/ui-vs-cli-home`` by default, wiped first) gets the sample fleet with
`goodput ingest`, and is copied whole (Parquet, catalog, Dagster instance) to ``HOME-ui``. Then
`goodput build` runs on HOME (timed, a child process), then `dagster dev` is started on the
copy's instance (``DAGSTER_HOME=HOME-ui/.dagster``, ``GOODPUT_HOME=HOME-ui``) and the `build`
job is launched through its GraphQL API, as the UI's Launch button does: the queued run
coordinator hands it to the daemon, the default run launcher starts it in a new process with the
executor of ``pipelines/definitions.py``. Timed from the launch request to the run's end (the
server's start-up is not counted). Each run builds its own copy of the same ingest, so they do
the same work (on one shared home the second build would find the daily rollups fresh and skip
them: 38 s of `gpu_hourly` against 5 s, measured).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sample_data.simulation import source_folders
from tests.servers import dagster as dagster_ui

REPO = Path(__file__).resolve().parent.parent
GOODPUT = [sys.executable, "-m", "pipelines.cli"]
DEFAULT_HOME = REPO / "benchmarks" / "out" / "ui-vs-cli-home"
SAMPLE = REPO / "sample_data" / "fleet"
RATIO = 1.5
TERMINAL = {"SUCCESS", "FAILURE", "CANCELED"}


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cli_build(home: Path) -> tuple[float, float]:
    cpu0, t0 = cpu_children(), time.perf_counter()
    subprocess.run(
        [*GOODPUT, "--home", str(home), "build"],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t0, cpu_children() - cpu0


def ui_build(home: Path, port: int, log: Path) -> tuple[float, str, str]:
    """(seconds from launch to the run's end, final status, run id) of the `build` job launched
    through the GraphQL API of `dagster dev`."""
    from dagster_graphql import DagsterGraphQLClient
    from dagster_graphql import DagsterGraphQLClientError

    with log.open("w") as out:
        server = dagster_ui.start(["dagster", "dev"], home, port, stdout=out, stderr=out)
    try:
        client = DagsterGraphQLClient("127.0.0.1", port_number=port)
        for attempt in range(60):  # the code location may still be loading
            try:
                t0 = time.perf_counter()
                run_id = client.submit_job_execution("build", run_config={})
                break
            except DagsterGraphQLClientError:
                if attempt == 59:
                    raise
                time.sleep(2)
        state = ""
        while state not in TERMINAL:
            time.sleep(1)
            state = client.get_run_status(run_id).value
        return time.perf_counter() - t0, state, run_id
    finally:
        os.killpg(server.pid, signal.SIGINT)  # dagster dev stops its webserver, daemon and runs
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--home",
        type=Path,
        default=DEFAULT_HOME,
        help=f"home the CLI builds, HOME-ui the UI (both wiped first; default {DEFAULT_HOME})",
    )
    ap.add_argument("--port", type=int, default=3999, help="port for dagster dev (default 3999)")
    args = ap.parse_args()
    home = args.home
    ui_home = home.with_name(home.name + "-ui")
    for h in (home, ui_home):
        shutil.rmtree(h, ignore_errors=True)
    home.mkdir(parents=True)
    sources = [str(p) for p in source_folders(SAMPLE)]
    print(f"ingesting the sample fleet into {home} ...", flush=True)
    subprocess.run(
        [*GOODPUT, "--home", str(home), "ingest", *sources],
        cwd=REPO,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    shutil.copytree(home, ui_home, symlinks=True)  # the same ingest for both builds
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    cli_s, cli_cpu = cli_build(home)
    print(
        f"goodput build (CLI, in-process run):      {cli_s:7.1f} s wall, {cli_cpu:7.1f} s CPU",
        flush=True,
    )
    log = ui_home / "dagster-dev.log"
    ui_s, state, run_id = ui_build(ui_home, args.port, log)
    print(
        f"build launched through dagster dev (UI):   {ui_s:7.1f} s wall, status {state} (run "
        f"{run_id}; log {log})"
    )
    print(f"load average {os.getloadavg()[0]:.1f}")
    target(
        f"UI-launched build within {RATIO:g}x of goodput build",
        state == "SUCCESS" and ui_s <= RATIO * cli_s,
        f"UI {ui_s:.0f} s vs CLI {cli_s:.0f} s: {ui_s / cli_s:.2f}x, {state}",
    )


if __name__ == "__main__":
    run_benchmark(main)
