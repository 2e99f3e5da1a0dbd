"""10,000 Slurm jobs pulled from a real slurmdbd (sacct through sources.pull) into a warehouse.

    .venv/bin/python -m benchmarks.bench_pull_slurm [--jobs 10000]

Starts the test cluster of ``tests/servers/slurm.py`` (root and Debian's slurm-wlm, slurmdbd,
mariadb-server, munge), runs one real job, then copies that job's row of slurmdbd's own job table
(``<cluster>_job_table`` in MariaDB) ``--jobs`` times with new job ids, times, states (70%
COMPLETED, 10% each FAILED exit 3, TIMEOUT, NODE_FAIL), node lists and GPU counts, ended over the
6 hours before today: one ``INSERT ... SELECT`` from MariaDB's ``seq_1_to_N`` table, a second or
two. Scheduling the jobs for real would take far longer on four 2-CPU slurmd (every job costs
slurmctld, slurmd and slurmdbd work; a 1,001-task array at 8 at a time runs for minutes), and what
the pull reads is the same: slurmdbd's job rows through ``sacct``. Then ``sources.pull.pull``
of that window into a fresh warehouse, timed: ``sacct`` (``--parsable2``, what ``auto`` picks on
22.05), the parse, the warehouse commit. Target: < 30 s. The same pull with ``--json`` is
printed beside it, without a target.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path

from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sources import kinds
from sources.base import source_config
from sources.pull import pull
from tests.servers.slurm import missing_binaries
from tests.servers.slurm import poll
from tests.servers.slurm import start_cluster
from warehouse.store import Warehouse

TARGET_S = 30.0
SPAN = timedelta(hours=6)

# column -> SQL for the copies (``t`` is the template row, ``seq`` 1..N); other columns are copied
_STATE = "ELT(1 + (seq % 10 >= 7) + (seq % 10 >= 8) + (seq % 10 >= 9), 3, 5, 6, 7)"  # CD, F, TO, NF
_VARIED = {
    "id_job": "100000 + seq",
    "job_name": "CONCAT('train-', seq % 97)",
    "time_submit": "{base} + seq * {step} - 600",
    "time_eligible": "{base} + seq * {step} - 600",
    "time_start": "{base} + seq * {step} - 300 - seq % 200",
    "time_end": "{base} + seq * {step}",
    "mod_time": "{base} + seq * {step}",
    "state": _STATE,
    "exit_code": "IF(seq % 10 = 7, 768, 0)",  # exit 3 (a wait status: code << 8)
    "nodes_alloc": "1 + (seq % 10 = 9)",
    "nodelist": "IF(seq % 10 = 9, 'gpu[003-004]', CONCAT('gpu00', 1 + seq % 4))",
    "tres_alloc": (
        "CONCAT('1=', 1 + (seq % 10 = 9), ',4=', 1 + (seq % 10 = 9), ',1001=', 8 * (1 + "
        "(seq % 10 = 9)))"
    ),
}


def fill(cluster, jobs: int, base: int, step: float) -> float:
    """Copy the one real job row ``jobs`` times; seconds taken."""
    sql = [
        "mariadb",
        "--no-defaults",
        f"--socket={cluster.root}/run/mysql.sock",
        "-uroot",
        "-N",
        "slurm_acct_db",
    ]
    table = f"{cluster.name}_job_table"
    query = (
        "SELECT column_name FROM information_schema.columns WHERE table_schema = 'slurm_acct_db' "
        f"AND table_name = '{table}' AND column_name != 'job_db_inx' ORDER BY ordinal_position"
    )
    cols = subprocess.run(
        [*sql, "-e", query], check=True, capture_output=True, text=True
    ).stdout.split()
    exprs = [_VARIED[c].format(base=base, step=step) if c in _VARIED else f"t.`{c}`" for c in cols]
    insert = (
        f"INSERT INTO {table} ({', '.join(f'`{c}`' for c in cols)}) SELECT {', '.join(exprs)} "
        f"FROM seq_1_to_{jobs} JOIN {table} AS t ON t.id_job = 1"
    )
    t0 = time.perf_counter()
    subprocess.run([*sql, "-e", insert], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    args = ap.parse_args()
    if missing_binaries() or os.geteuid() != 0:
        print(
            "cannot start the Slurm cluster: root and "
            f"{', '.join(missing_binaries()) or 'the binaries'} needed"
        )
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    work = Path(tempfile.mkdtemp(prefix="bench-slurm-wh-"))
    t0 = time.perf_counter()
    c = start_cluster(root)
    try:
        print(f"cluster up in {time.perf_counter() - t0:.1f} s ({root})")
        c.sbatch("--gres=gpu:2", "--wrap", "true")
        poll(
            "template job in slurmdbd",
            lambda: "COMPLETED" in c.run("sacct", "-n", "-X", "-j", "1", "-o", "State").stdout,
        )
        until = datetime.now(UTC).replace(tzinfo=None, hour=0, minute=0, second=0, microsecond=0)
        since = until - SPAN
        base = int(since.replace(tzinfo=UTC).timestamp())
        step = int(SPAN.total_seconds()) // (args.jobs + 1)
        print(
            f"{args.jobs:,} job rows copied into slurmdbd's job table in "
            f"{fill(c, args.jobs, base, step):.1f} s"
        )
        counts = {}
        for mode in ("auto", "json"):
            wh = Warehouse(work / mode)
            src = source_config(
                {
                    "name": "bench",
                    "kind": "slurm",
                    "cluster": "bench",
                    "mode": mode,
                    "timeout_s": 300,
                    "command_prefix": ["env", f"SLURM_CONF={c.conf}"],
                },
                kinds(),
            )
            t0 = time.perf_counter()
            reports = pull(wh, [src], since=since, until=until)
            took = time.perf_counter() - t0
            att = wh.read("job_attempts")
            counts[mode] = att.group_by("state").len().sort("state").rows()
            ok = all(r.status == "ok" for r in reports) and att.height == args.jobs
            line = (
                f"{att.height:,} jobs stored, {sum(r.bytes for r in reports) / 1e6:.1f} MB of "
                f"sacct output, {len(reports)} window(s), {took:.1f} s"
            )
            if mode == "auto":
                target(
                    f"{args.jobs:,} Slurm jobs pulled (sacct --parsable2) in < {TARGET_S:g} s",
                    ok and took < TARGET_S,
                    line,
                )
            else:
                print(f"same pull with sacct --json: {line}")
        print("states stored:", counts["auto"])
        assert counts["auto"] == counts["json"], counts
    finally:
        c.stop_all()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    run_benchmark(main)
