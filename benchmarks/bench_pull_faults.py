"""Live pulls under injected faults end where clean pulls do: a week of hourly pulls from a real
Prometheus through the fault proxy, and a day of pulls from Redfish BMCs through it.

    python -m benchmarks.bench_pull_faults [--nodes 4] [--gpus 4] [--days 7] [--scrape-s 60]
                                           [--rate 0.05] [--seed 0] [--bmc-pulls 24]

Prometheus: a simulated fleet (``--nodes`` x ``--gpus``, one of the nodes on Kubernetes, whose
GPUs' ``pod`` label comes and goes; scrapes every ``--scrape-s``; cached under
``benchmarks/out/faults-fleet-...``) is served by a real Prometheus (``tests/servers/
prometheus.py``) behind ``tests/servers/faultproxy.py``, which answers a share ``--rate`` of the
requests, drawn with a seeded generator, with one of the fault classes of ``FAULTS``: a 503, a
429 with ``Retry-After``, an answer dripped a byte a second past ``timeout_s``, a body cut short,
a connection reset mid-body, a Thanos partial response (a warning, one host's series or label
value dropped) and a redirect to an off-host ``Listener``. The source sends a bearer token from
``token_env``. ``--days`` of hourly pulls (``sources.pull.pull`` with this machine's clock set to
a quarter past each hour, so each pull's window ends at the hour; the first with ``since``),
then pulls at the last hour until the cursor reaches it (a pull that failed at the end of the
week is tried again, as the next hourly pull would). Then one pull of the same span straight
from Prometheus (no proxy), and both warehouses' daily tables and counter events built.

Redfish: three BMCs, each behind its own fault proxy (two ``sushy-static`` servers of the
committed gpu001 mockup: log entries over three pages, link-only members; and ``sushy-emulator``
enforcing basic auth), pulled ``--bmc-pulls`` times with basic auth under the same fault classes,
the Thanos one replaced by answers whose links (link-only members, navigation links, nextLinks,
the session link) point at the listener; then until a pull reads every BMC; then one pull
straight from the BMCs.

TARGET lines: every fault class injected, on about ``--rate`` of the requests; every table the
pulls fill, and the daily tables and counter events built from them, row for row the same as the
clean pull's (the columns saying where a row was read from aside; DuckDB's float aggregates of
gpu_hourly and gpu_daily within 1e-9 relative, as they differ in the last bits with the order
the samples are summed in), for the BMCs the log entries and the sensor readings (without the
time they were read); every failed window covered by a later ok one and the cursor at the week's
end, every failed BMC read whole by a later pull; the listener sent nothing holding the token or
the BMC password (while the servers got them).
"""

from __future__ import annotations

import argparse
import base64
import gzip
import json
import os
import tempfile
import time
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import polars as pl

from analysis.telemetry.counters import refresh_counter_events
from benchmarks.targets import run_benchmark
from benchmarks.targets import target
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulated
from sources import kinds
from sources import pull as pulling
from sources.base import source_config
from sources.pull import cursors
from sources.pull import pull
from tests.servers import prometheus as server
from tests.servers.faultproxy import Cut
from tests.servers.faultproxy import Drip
from tests.servers.faultproxy import FaultProxy
from tests.servers.faultproxy import Listener
from tests.servers.faultproxy import Reset
from tests.servers.faultproxy import Rewrite
from tests.servers.faultproxy import Status
from tests.servers.faultproxy import random_faults
from tests.servers.redfish import MOCKUP
from tests.servers.redfish import start_emulator
from tests.servers.redfish import start_static
from tests.servers.redfish import stop
from warehouse.schemas import PROVENANCE
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

OUT = Path(__file__).resolve().parent / "out"
START = datetime(2026, 1, 5)  # the fleet's first day: the week's lookback
HOUR = timedelta(hours=1)
PAST_HOUR = timedelta(minutes=15)  # each pull's clock: the hour's data settled (settle_s 600)
TIMEOUT_S = 3  # each try's deadline: a drip a byte a second outlives it
RELATIVE = server.RELATIVE  # DuckDB's float aggregates, summed in another order
AGGREGATED = {"gpu_hourly", "gpu_daily"}  # derived tables holding such sums
BOOKKEEPING = {"pull_log", "ingest_manifest"}  # per request and window, not records
# a quarantined record's line in the document it came in: a window's, not the clean pull's
POSITION = {"quarantine": ("line",)}
MAX_CATCH_UP = 20  # pulls at the week's end until the cursor reaches it
TOKEN_ENV, TOKEN = "FAULTS_BENCH_TOKEN", "bench-bearer-7c41d9e0b2"
USER, PASSWORD = "bmc-admin", "Bench-BMC-pw-5521"


def _fleet(nodes: int, gpus: int, days: int, scrape_s: int, seed: int) -> Path:
    """The fleet, with a day of lookback before the week and the day it ends in."""
    return simulated(
        OUT / f"faults-fleet-{nodes}n-{gpus}g-{days}d-{scrape_s}s-seed{seed}",
        llama3_cause_mix(),
        nodes=nodes, gpus_per_node=gpus, days=days + 2, seed=seed, fault_scale=20.0,
        scrape_interval_s=scrape_s, k8s_nodes=1, start=START.isoformat(),
    )  # fmt: skip


def _faults(listener: str, partial) -> list[tuple[str, object]]:
    """(name, fault) of each class, ``partial`` the class a TSDB or BMC answer is corrupted by."""
    return [
        ("503", Status(503, {"Content-Type": "text/plain"}, b"Service Unavailable")),
        ("429 Retry-After 1 s", Status(429, {"Retry-After": "1"}, b"slow down")),
        (f"drip 1 B/s past timeout_s {TIMEOUT_S} s", Drip(1.0)),
        ("body cut after 10 bytes", Cut(10)),
        ("connection reset after 10 bytes", Reset(10)),
        partial,
        ("302 to the off-host listener", Status(302, {"Location": f"{listener}/"})),
    ]


def _json_rewrite(edit):
    """A Rewrite applying ``edit`` to a JSON answer (gzip kept); other answers pass unchanged."""

    def rewrite(body: bytes) -> bytes:
        zipped = body[:2] == b"\x1f\x8b"
        try:
            doc = json.loads(gzip.decompress(body) if zipped else body)
        except ValueError:
            return body
        edit(doc)
        out = json.dumps(doc).encode()
        return gzip.compress(out) if zipped else out

    return Rewrite(rewrite)


def _off_host_links(listener: str):
    """A rogue BMC's answer: every link the client follows (a top-level navigation link,
    ``Links.Sessions``, a link-only member, a nextLink) pointing at ``listener``."""

    def moved(obj) -> None:
        link = isinstance(obj, dict) and set(obj) <= {"@odata.id", "@odata.type"}
        if link and str(obj.get("@odata.id", "")).startswith("/"):
            obj["@odata.id"] = listener + obj["@odata.id"]

    def edit(doc) -> None:
        if not isinstance(doc, dict):
            return
        for value in doc.values():
            moved(value)
        for member in doc.get("Members") or []:
            moved(member)
        if isinstance(doc.get("Links"), dict):
            moved(doc["Links"].get("Sessions"))
        for key in ("Members@odata.nextLink", "@odata.nextLink"):
            if str(doc.get(key, "")).startswith("/"):
                doc[key] = listener + doc[key]

    return ("links pointing at the off-host listener", _json_rewrite(edit))


def _rule(faults: list[tuple[str, object]], rate: float, seed: int):
    return random_faults(rate, [f for _, f in faults], seed)


def _injected(faults: list[tuple[str, object]], proxies: list[FaultProxy]) -> dict[str, int]:
    counts = dict.fromkeys((name for name, _ in faults), 0)
    for proxy in proxies:
        for _, fault in proxy.faults:
            counts[next(name for name, f in faults if f is fault)] += 1
    return counts


def _covered(log: pl.DataFrame) -> tuple[int, list[str]]:
    """(failed windows, those no later ok window covers) of a source's ``pull_log``."""
    ok = log.filter(pl.col("status") == "ok")
    failed = log.filter(pl.col("status") == "failed")
    uncovered = []
    for start, end, at in failed.select("window_start", "window_end", "started_at").iter_rows():
        later = ok.filter(pl.col("started_at") > at).sort("window_start")
        reach = start
        for a, b in later.select("window_start", "window_end").iter_rows():
            if a <= reach < b:
                reach = b
        if reach < end:
            uncovered.append(f"{start}..{end} (covered to {reach})")
    return failed.height, uncovered


def _differences(faulty: Warehouse, clean: Warehouse, only: set[str] | None = None):
    """(table, rows, what differs or None) for every record table either warehouse holds."""
    out = []
    for name, table in TABLES.items():
        if name in BOOKKEEPING or (only is not None and name not in only):
            continue
        if not faulty.files(name) and not clean.files(name):
            continue
        drop = set(PROVENANCE) | set(POSITION.get(name, ()))
        cols = [c for c in table.schema if c not in drop]
        a, b = faulty.read(name).select(cols), clean.read(name).select(cols)
        out.append((name, b.height, _rows_differ(a, b, name in AGGREGATED)))
    return out


def _rows_differ(a: pl.DataFrame, b: pl.DataFrame, aggregated: bool) -> str | None:
    """What differs between two tables' rows (None: nothing): each row of ``a`` matched by one
    of ``b`` on every column, floats of an ``aggregated`` table within ``RELATIVE``."""
    if a.height != b.height:
        return f"{a.height:,} rows against {b.height:,}"
    floats = [c for c, t in a.schema.items() if t.is_float()] if aggregated else []
    keys = [c for c in a.columns if c not in floats]
    both = a.join(b, on=keys, how="inner", nulls_equal=True, suffix="_clean")
    if both.height != a.height:
        lone = a.join(b, on=keys, how="anti", nulls_equal=True)
        first = lone.row(0, named=True) if lone.height else None
        return f"{lone.height:,} rows without their like, e.g. {first}"
    close = [
        (pl.col(c) - pl.col(f"{c}_clean")).abs() <= RELATIVE * pl.col(c).abs().clip(lower_bound=1)
        for c in floats
    ]
    bad = both.filter(~pl.all_horizontal(close).fill_null(False)) if close else both.clear()
    return f"{bad.height:,} rows differ, e.g. {bad.row(0, named=True)}" if bad.height else None


def _hourly(wh: Warehouse, src, start: datetime, hours: int) -> tuple[int, float]:
    """``hours`` hourly pulls from ``start``, then pulls at the last hour until the cursor is
    there: (the pulls made, seconds taken)."""
    t0, pulls = time.perf_counter(), 0
    end = start + hours * HOUR
    for i in range(hours):
        now = start + (i + 1) * HOUR + PAST_HOUR
        pulling.now = lambda now=now: now
        pull(wh, [src], since=start if i == 0 else None)
        pulls += 1
    while cursors(wh).get(src.name) != (end, True) and pulls < hours + MAX_CATCH_UP:
        pull(wh, [src])
        pulls += 1
    return pulls, time.perf_counter() - t0


def _prometheus(args, listener: Listener) -> dict[str, int]:
    fleet = _fleet(args.nodes, args.gpus, args.days, args.scrape_s, args.seed)
    files = server.scrape_files(fleet)
    t = time.perf_counter()
    data = server.blocks(files)
    print(f"TSDB blocks ready in {time.perf_counter() - t:.0f} s ({len(files)} scrape files)")
    host = min(f.parent.name for f in files)
    faults = _faults(
        listener.url, ("Thanos partial response, one host dropped", server.partial_response(host))
    )
    week = START + timedelta(days=1)
    hours = args.days * 24
    options = {"name": "tsdb", "kind": "prometheus", "timeout_s": TIMEOUT_S}
    real_now = pulling.now
    with (
        tempfile.TemporaryDirectory(dir=OUT) as tmp,
        server.serve(data, Path(tmp)) as url,
        FaultProxy(url, _rule(faults, args.rate, args.seed)) as proxy,
    ):
        faulty, clean = Warehouse(Path(tmp) / "faulty"), Warehouse(Path(tmp) / "clean")
        src = source_config({**options, "url": proxy.url, "token_env": TOKEN_ENV}, kinds())
        try:
            pulls, took = _hourly(faulty, src, week, hours)
        finally:
            pulling.now = real_now
        log = faulty.read("pull_log")
        tried = (log["window_start"].min(), log["window_end"].max())
        t = time.perf_counter()
        reports = pull(clean, [source_config({**options, "url": url, "timeout_s": 120}, kinds())],
                       since=tried[0], until=tried[1])  # fmt: skip
        clean_s = time.perf_counter() - t
        filled = {name for name in TABLES if clean.files(name) or faulty.files(name)}
        for wh in (faulty, clean):
            refresh_counter_events(wh)
        differ = _differences(faulty, clean)
        failed, uncovered = _covered(log.filter(pl.col("target").is_null()))
        cursor = cursors(faulty)["tsdb"]
        to_server = sum(TOKEN in r.text() for r in proxy.requests)
        requests = len(proxy.requests)
        injected = _injected(faults, [proxy])
    print(
        f"{pulls} pulls ({hours} hourly and {pulls - hours} at the week's end) in {took:.0f} s "
        f"through the proxy: {requests:,} requests, {failed} windows failed; the clean pull of "
        f"{tried[0]}..{tried[1]} in {clean_s:.0f} s ({', '.join(r.status for r in reports)})"
    )
    for name, rows, diff in differ:
        pulled = "pulled" if name in filled - {"pull_log"} else "built"
        print(f"  {name} ({pulled}): {rows:,} rows, {diff or 'the same'}")
    errors = log.filter(pl.col("status") == "failed")["error"]
    reasons = errors.str.replace(r"^.*?: ", "").str.slice(0, 70).value_counts(sort=True)
    print("failed windows' reasons (most frequent first):")
    for reason, n in reasons.head(8).iter_rows():
        print(f"  {n:4d}  {reason}")
    counter = next(rows for name, rows, _ in differ if name == "hw_events")
    target(
        f"{args.days} days of hourly TSDB pulls under faults: every table the pulls fill and "
        "the daily tables and counter events built from them equal a clean pull's",
        all(diff is None for _, _, diff in differ) and clean_s > 0,
        "; ".join(f"{n}: {d}" for n, _, d in differ if d)
        or ", ".join(f"{n} {r:,}" for n, r, _ in differ)
        + f" rows equal ({counter:,} counter events)",
    )
    target(
        "every failed TSDB window retried: covered by a later ok window, the cursor at the "
        "week's end",
        not uncovered and cursor == (week + hours * HOUR, True),
        f"{failed} failed windows, {len(uncovered)} not covered"
        + (f" (e.g. {uncovered[0]})" if uncovered else "")
        + f"; cursor {cursor[0]} after {pulls - hours} pull(s) at the week's end",
    )
    target(
        "the off-host listener never sent the bearer token (the TSDB was)",
        TOKEN not in listener.seen_text() and to_server > 0,
        f"listener got {len(listener.requests)} requests, none with the token; the token went "
        f"to the TSDB in {to_server:,} of {requests:,} requests",
    )
    return injected | {"requests": requests}


def _redfish(args, listener: Listener) -> dict[str, int]:
    faults = _faults(listener.url, _off_host_links(listener.url))
    os.environ["BMC_USER"], os.environ["BMC_PASS"] = USER, PASSWORD
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with tempfile.TemporaryDirectory(dir=OUT) as tmp:
        work = Path(tmp)
        servers = []
        proxies: list[FaultProxy] = []
        try:
            servers += [start_static(MOCKUP / "gpu001", work) for _ in range(2)]
            servers.append(start_emulator(work, USER, PASSWORD))
            for i, s in enumerate(servers):
                proxies.append(FaultProxy(s.url, _rule(faults, args.rate, args.seed + 1 + i)))
            hosts = ["bmc-a", "bmc-b", "bmc-emulator"]

            def source(urls: list[str]):
                return source_config(
                    {"name": "bmcs", "kind": "redfish", "auth": "basic", "username_env": "BMC_USER",
                     "password_env": "BMC_PASS", "timeout_s": TIMEOUT_S, "bmc_timeout_s": 60,
                     "bmcs": [{"host": h, "url": u} for h, u in zip(hosts, urls, strict=True)]},
                    kinds(),
                )  # fmt: skip

            faulty, clean = Warehouse(work / "faulty"), Warehouse(work / "clean")
            src = source([p.url for p in proxies])
            t, pulls, real_now = time.perf_counter(), 0, pulling.now
            try:
                while pulls < args.bmc_pulls + MAX_CATCH_UP:
                    now = START + pulls * HOUR + PAST_HOUR  # hourly: each pull has a window
                    pulling.now = lambda now=now: now
                    reports = pull(faulty, [src])
                    pulls += 1
                    if pulls >= args.bmc_pulls and all(r.status == "ok" for r in reports):
                        break
            finally:
                pulling.now = real_now
            took = time.perf_counter() - t
            pull(clean, [source([s.url for s in servers])])
            requests = sum(len(p.requests) for p in proxies)
            to_bmcs = sum(basic in r.text() for p in proxies for r in p.requests)
            injected = _injected(faults, proxies)
        finally:
            for p in proxies:
                p.close()
            for s in servers:
                stop(s)
        log = faulty.read("pull_log").sort("started_at")
        failed = log.filter(pl.col("status") == "failed")
        last = log.filter(pl.col("started_at") == pl.col("started_at").max())
        logs = _differences(faulty, clean, {"hw_events"})
        # a reading's time is when it was read: the same readings, read at other times
        readings = "SELECT DISTINCT * EXCLUDE (time, source_file, source_line) FROM bmc_sensors"
        sensors = [wh.query(readings + " ORDER BY ALL") for wh in (faulty, clean)]
    print(
        f"{pulls} Redfish pulls of {len(hosts)} BMCs in {took:.0f} s through the proxies: "
        f"{requests:,} requests, {failed.height} BMC reads failed"
    )
    for reason, n in (
        failed["error"].str.replace(r"^https?://[^ ]*: ", "").str.slice(0, 70)
        .value_counts(sort=True).head(6).iter_rows()
    ):  # fmt: skip
        print(f"  {n:4d}  {reason}")
    entries = next(rows for _, rows, _ in logs)
    same_sensors = sensors[0].equals(sensors[1])
    target(
        "Redfish pulls under faults: the BMCs' log entries and sensor readings equal a clean "
        "pull's",
        all(d is None for _, _, d in logs) and same_sensors and entries > 0,
        f"{entries} log entries, {sensors[1].height} distinct readings"
        + ("" if same_sensors else f" (faulty {sensors[0].height})")
        + "".join(f"; {d}" for _, _, d in logs if d),
    )
    target(
        "every failed BMC read whole by a later pull",
        last.filter(pl.col("status") == "failed").height == 0 and failed.height > 0,
        f"{failed.height} failed reads; the last of {pulls} pulls read every BMC",
    )
    target(
        "the off-host listener never sent the BMC password or basic auth (the BMCs were)",
        PASSWORD not in listener.seen_text() and basic not in listener.seen_text() and to_bmcs > 0,
        f"listener got {len(listener.requests)} requests, none with a credential; basic auth "
        f"went to the BMCs in {to_bmcs:,} of {requests:,} requests",
    )
    return injected | {"requests": requests}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--gpus", type=int, default=4)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--scrape-s", type=int, default=60)
    ap.add_argument("--rate", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bmc-pulls", type=int, default=24)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    os.environ[TOKEN_ENV] = TOKEN
    t0 = time.perf_counter()
    with Listener() as listener:
        tsdb = _prometheus(args, listener)
        bmcs = _redfish(args, listener)
    for part, injected in (("TSDB", tsdb), ("BMCs", bmcs)):
        requests = injected.pop("requests")
        share = sum(injected.values()) / max(requests, 1)
        target(
            f"{part}: every fault class injected, on about {args.rate:.0%} of the requests",
            all(injected.values()) and abs(share - args.rate) <= args.rate / 2,
            f"{sum(injected.values())} of {requests:,} requests ({share:.1%}): "
            + ", ".join(f"{k} {v}" for k, v in injected.items()),
        )
    print(
        f"wall {time.perf_counter() - t0:.0f} s, of which the faults' waits (drips to timeout_s, "
        f"backoff, Retry-After) are most; this process' CPU {time.process_time():.0f} s"
    )


if __name__ == "__main__":
    run_benchmark(main)
