"""Redfish pull throughput: many BMCs read concurrently, then parsed and committed as a pull does.

    .venv/bin/python -m benchmarks.bench_pull_redfish [--bmcs 200] [--servers 4] [--concurrency N]

Starts ``--servers`` sushy-static processes serving the gpu001 mockup of
tests/fixtures/redfish_mockup (two log services, one of three pages with link-only members, a
Sensors collection of five link-only members: 23 requests per BMC) and addresses them under
``--bmcs`` host names, round robin. Times ``sources.redfish.fetch`` with ``--concurrency`` and
with one BMC at a time (on a tenth of the BMCs), then the whole pull (``sources.pull.pull``:
fetch, every document through its parser, one warehouse batch with its ``pull_log`` rows). The
servers share this machine's cores with the client, so the rate is a floor for the client alone.

Target: >= 3.5 BMCs/s for the whole pull, i.e. the 12,500 BMCs of a 100k-GPU
fleet (8 GPUs a node) read by one hourly pull within the hour, on this 2-core machine. Real BMCs
answer in 0.1-1 s a request rather than in milliseconds; the concurrency (``concurrency`` BMCs
in flight) is what covers that latency, and the printed projection says what it gives.
"""

from __future__ import annotations

import os
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks.targets import options
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from sources import kinds
from sources.base import Document
from sources.base import Failure
from sources.base import SourceConfig
from sources.base import Window
from sources.base import source_config
from sources.pull import pull
from sources.redfish import OPTIONS
from tests.servers.redfish import MOCKUP
from tests.servers.redfish import start_static
from tests.servers.redfish import stop
from warehouse.store import Warehouse

REQUESTS_PER_BMC = 23  # the gpu001 mockup's walk (see tests/test_pull_redfish.py)
FLEET_BMCS = 12_500  # 100k GPUs, 8 a node
TARGET_RATE = FLEET_BMCS / 3600
WINDOW = Window(datetime(2026, 1, 1), datetime(2026, 1, 2))


def source(urls: list[str], concurrency: int) -> SourceConfig:
    return source_config(
        {"name": "bench", "kind": "redfish", "auth": "none", "retries": 1, "timeout_s": 30,
         "concurrency": concurrency, "bmc_timeout_s": 300,
         "bmcs": [{"host": f"gpu{i:05d}", "url": u} for i, u in enumerate(urls)]},
        kinds(),
    )  # fmt: skip


def fetch(urls: list[str], concurrency: int) -> tuple[list[Document], list[Failure], float]:
    t0 = time.perf_counter()
    out = list(kinds()["redfish"].fetch(source(urls, concurrency), WINDOW))
    took = time.perf_counter() - t0
    docs = [d for d in out if isinstance(d, Document)]
    return docs, [f for f in out if isinstance(f, Failure)], took


def main() -> int:
    args = options(bmcs=200, servers=4, concurrency=OPTIONS["concurrency"])
    with tempfile.TemporaryDirectory() as tmp:
        servers = []
        try:
            for _ in range(args.servers):
                servers.append(start_static(MOCKUP / "gpu001", Path(tmp)))
            urls = [servers[i % len(servers)].url for i in range(args.bmcs)]
            fetch(urls[: args.servers], args.concurrency)  # warm-up: imports, first connections
            serial = urls[: max(1, args.bmcs // 10)]
            _, failed_1, took_1 = fetch(serial, 1)
            cpu0 = time.process_time()
            docs, failed, took = fetch(urls, args.concurrency)
            cpu = time.process_time() - cpu0
            wh = Warehouse(Path(tmp) / "home")
            t0 = time.perf_counter()
            reports = pull(wh, [source(urls, args.concurrency)], WINDOW.start, WINDOW.end)
            took_pull = time.perf_counter() - t0
        finally:
            for s in servers:
                stop(s)
    load = os.getloadavg()[0]
    n = args.bmcs
    rate = n / took_pull
    print(f"{n} BMCs over {args.servers} sushy-static servers, load average {load:.1f}")
    print(f"one at a time : {len(serial) / took_1:7.1f} BMCs/s "
          f"({len(serial)} BMCs, {took_1:.2f} s)")  # fmt: skip
    print(f"concurrency {args.concurrency:2d}: {n / took:7.1f} BMCs/s, "
          f"{n * REQUESTS_PER_BMC / took:.0f} requests/s ({took:.2f} s, client CPU {cpu:.2f} s, "
          f"{1000 * cpu / (n * REQUESTS_PER_BMC):.2f} ms a request)")  # fmt: skip
    whole = reports[0]
    print(f"whole pull    : {rate:7.1f} BMCs/s ({took_pull:.2f} s: {whole.documents} documents, "
          f"{whole.rows_ok} rows; fetch alone {took:.2f} s)")  # fmt: skip
    for latency in (0.1, 0.5, 1.0):
        per_bmc = REQUESTS_PER_BMC * latency  # the walk is sequential within a BMC
        print(f"projection at {latency:.1f} s a request: {args.concurrency / per_bmc:.1f} BMCs/s "
              f"with {args.concurrency} in flight; {FLEET_BMCS} BMCs in "
              f"{FLEET_BMCS * per_bmc / args.concurrency / 60:.0f} min")  # fmt: skip
    ok = not failed and not failed_1 and len(docs) == 5 * n
    ok = ok and [(r.status, r.documents) for r in reports] == [("ok", 5 * n)]
    failures = len(failed) + len(failed_1) + len(reports) - 1
    target("every BMC read whole", ok, f"{len(docs)} documents, {failures} failures")
    target(f"whole pull >= {TARGET_RATE:.1f} BMCs/s (12,500 BMCs an hour)",
           rate >= TARGET_RATE, f"{rate:.1f} BMCs/s")  # fmt: skip


if __name__ == "__main__":
    run_benchmark(main)
