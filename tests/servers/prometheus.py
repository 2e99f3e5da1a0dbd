"""A real Prometheus holding a fleet's DCGM history, for tests of the ``prometheus`` source, and
what the same telemetry ingested from the files and pulled from it must agree on (``differences``).

The fleet's dcgm-exporter scrapes (``dcgm/<host>/<day>.prom[.gz]``, millisecond timestamps) are
rewritten as one OpenMetrics file (seconds, one HELP/TYPE per family, each family's samples
together in time order, ``# EOF``), turned into TSDB blocks by ``promtool tsdb
create-blocks-from openmetrics`` (cached under the temp dir, keyed by the input's hash), and
served by ``prometheus`` on a free loopback port with no scrape targets. Without the binaries a
test is skipped, or fails when ``CI`` is set.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

from tests.servers.faultproxy import Rewrite

START_TIMEOUT_S = 120  # a loaded machine opens the blocks slowly
BLOCK_DURATION = "744h"  # a month per block: a few blocks, not one per 2 h


def binaries() -> tuple[str, str]:
    """The prometheus and promtool paths, or skip (fail under CI) when they are missing."""
    found = shutil.which("prometheus"), shutil.which("promtool")
    if not all(found):
        msg = "prometheus / promtool not installed (Debian package prometheus)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return found  # type: ignore[return-value]


def scrape_files(fleet: Path, hosts: list[str] | None = None) -> list[Path]:
    files = sorted((fleet / "dcgm").glob("*/*.prom*"))
    return [f for f in files if hosts is None or f.parent.name in hosts]


def openmetrics(files: list[Path]) -> bytes:
    """The samples of dcgm-exporter scrape files as one OpenMetrics exposition."""
    text = b"".join(
        gzip.decompress(f.read_bytes()) if f.suffix == ".gz" else f.read_bytes() for f in files
    )
    lines = pl.DataFrame({"raw": text.decode().split("\n")})  # a label value may hold \r or \x0b
    helps = (
        lines.filter(pl.col("raw").str.starts_with("# HELP "))
        .select(
            pl.col("raw").str.extract(r"^# HELP (\S+) (.*)$", 1).alias("family"),
            pl.col("raw").str.extract(r"^# HELP (\S+) (.*)$", 2).alias("help"),
        )
        .unique("family", keep="first")
    )
    samples = (
        lines.filter(~pl.col("raw").str.starts_with("#") & (pl.col("raw").str.strip_chars() != ""))
        .select(
            pl.col("raw")
            .str.extract_groups(
                r"^(?P<key>(?P<family>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{.*\})?) "
                r"(?P<value>\S+) (?P<ms>\d+)$"
            )
            .alias("s")
        )
        .unnest("s")
    )
    samples = samples.with_columns(
        sec=pl.format(
            "{}.{}",
            pl.col("ms").str.slice(0, pl.col("ms").str.len_chars() - 3),
            pl.col("ms").str.slice(-3),
        )
    ).sort("family", "ms", maintain_order=True)
    out = []
    for (family,), part in samples.group_by("family", maintain_order=True):
        help_text = helps.filter(pl.col("family") == family)["help"]
        out.append(
            f"# HELP {family} {help_text[0] if len(help_text) else family}\n# TYPE {family} gauge\n"
        )
        out.append(
            "\n".join(part.select(pl.format("{} {} {}", "key", "value", "sec")).to_series()) + "\n"
        )
    out.append("# EOF\n")
    return "".join(out).encode()


def blocks(files: list[Path]) -> Path:
    """TSDB blocks of ``files``' samples, built once per distinct input and kept in the temp
    dir (building a 60-day fleet takes a while on a loaded machine)."""
    _, promtool = binaries()
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + f.parent.name.encode() + f.read_bytes())
    cache = Path(tempfile.gettempdir()) / f"goodput-prom-blocks-{digest.hexdigest()[:16]}"
    if cache.exists():
        return cache
    work = Path(tempfile.mkdtemp(prefix="prom-build-"))
    try:
        (work / "fleet.om").write_bytes(openmetrics(files))
        subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                f"--max-block-duration={BLOCK_DURATION}",
                str(work / "fleet.om"),
                str(work / "data"),
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
        try:
            (work / "data").rename(cache)
        except OSError:  # another process built it meanwhile
            pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return cache


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve(data: Path, tmp: Path) -> Iterator[str]:
    """A Prometheus serving a copy of the blocks in ``data``; yields its base URL and stops it
    on exit."""
    prometheus, _ = binaries()
    store = tmp / "tsdb"
    shutil.copytree(data, store, copy_function=os.link)  # blocks are immutable: links suffice
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\nscrape_configs: []\n")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={store}",
            "--storage.tsdb.retention.time=10y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"prometheus exited {proc.returncode}: "
                    f"{(tmp / 'prometheus.log').read_text()[-2000:]}"
                )
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready within {START_TIMEOUT_S} s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


PARTIAL_WARNING = 'partial response: store 10.0.0.7:10901 (labels: [zone="b"]) unavailable'


def partial_response(host: str) -> Rewrite:
    """A Thanos Query answer while the store holding ``host`` is down (for the fault proxy): its
    series, or its value in a label-values answer, missing, and a warning saying so. An answer
    that is not JSON passes unchanged."""

    def rewrite(body: bytes) -> bytes:
        zipped = body[:2] == b"\x1f\x8b"  # the client asked for gzip
        try:
            doc = json.loads(gzip.decompress(body) if zipped else body)
        except ValueError:
            return body
        if not isinstance(doc, dict):
            return body
        data = doc.get("data")
        if isinstance(data, list):
            doc["data"] = [v for v in data if v != host]
        elif isinstance(data, dict) and isinstance(data.get("result"), list):
            data["result"] = [
                s
                for s in data["result"]
                if not (isinstance(s, dict) and s.get("metric", {}).get("Hostname") == host)
            ]
        doc["warnings"] = [PARTIAL_WARNING]
        out = json.dumps(doc).encode()
        return gzip.compress(out) if zipped else out

    return Rewrite(rewrite)


HOURLY_KEYS = ["hour", "cluster", "host", "gpu", "uuid", "pci_bus", "metric"]
RELATIVE = 1e-9  # how far a TSDB's float rollup may stand from the same one over the files


def differences(ingested, pulled) -> list[str]:
    """What differs between a fleet's scrape files ingested (warehouse ``ingested``) and the
    same telemetry pulled from a TSDB holding them (``pulled``), each with its daily tables and
    counter events built: the metric families of gpu_hourly, its rows (keys and ``n`` exactly;
    mean, min, max and last within ``RELATIVE``), the counter events and the node events. Empty
    when they agree."""
    from analysis.telemetry.counters import COUNTER_SOURCE

    out = []
    fams = "SELECT DISTINCT regexp_replace(metric, '\\{.*$', '') AS m FROM gpu_hourly ORDER BY 1"
    want, got = ingested.query(fams)["m"].to_list(), pulled.query(fams)["m"].to_list()
    if want != got:
        out.append(f"metric families: files {want}, pulled {got}")
    a = ingested.read("gpu_hourly").select(*HOURLY_KEYS, "n", "mean", "min", "max", "last")
    b = pulled.read("gpu_hourly").select(*HOURLY_KEYS, "n", "mean", "min", "max", "last")
    both = a.join(b, on=HOURLY_KEYS, how="full", nulls_equal=True, suffix="_pulled")
    close = [
        (pl.col(c) - pl.col(f"{c}_pulled")).abs() <= RELATIVE * pl.col(c).abs().clip(lower_bound=1)
        for c in ("mean", "min", "max", "last")
    ]
    bad = both.filter(
        ~(pl.col("n").eq_missing(pl.col("n_pulled")) & pl.all_horizontal(close)).fill_null(False)
    )
    if bad.height:
        first = bad.row(0, named=True)
        out.append(
            f"gpu_hourly: {bad.height} of {a.height} series-hours differ (pulled {b.height}), "
            f"e.g. {first}"
        )
    events = (
        "SELECT time, host, component_id, component_class, code, count, severity "
        f"FROM hw_events WHERE source = '{COUNTER_SOURCE}' ORDER BY ALL"
    )
    if not ingested.query(events).equals(pulled.query(events)):
        out.append(
            f"counter events: files {ingested.query(events).height}, "
            f"pulled {pulled.query(events).height}"
        )
    nodes = "SELECT time, host, event, reason FROM node_events ORDER BY ALL"
    if not ingested.query(nodes).equals(pulled.query(nodes)):
        out.append("node events differ")
    return out
