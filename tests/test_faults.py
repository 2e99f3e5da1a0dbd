"""Fault injection with real processes: two writers at once, an open read-only DuckDB client,
a crash between two commit renames (issue 19). Nothing doubled, nothing stale, no half state."""

import os
import shutil
import subprocess
import sys

import duckdb

from ingest.runner import ingest_paths
from tests.conftest import REPO
from tests.conftest import SAMPLE_FLEET
from warehouse.store import FAULT_ENV
from warehouse.store import Warehouse

GOODPUT = [sys.executable, "-m", "pipelines.cli"]


def goodput(home, *args: str, fault: str | None = None) -> subprocess.CompletedProcess:
    """``goodput ARGS --home HOME`` in a process of its own, its output captured as text; with
    ``fault``, the warehouse's fault injection (FAULT_ENV) crashes it at that point."""
    env = None if fault is None else {**os.environ, FAULT_ENV: fault}
    argv = [*GOODPUT, *args, "--home", str(home)]
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False)


def _counts(wh: Warehouse) -> dict[str, int]:
    return {t: wh.read(t).height for t in ("hw_events", "ingest_manifest", "quarantine")}


def test_two_ingests_of_the_same_files_in_other_orders_store_each_once(tmp_path):
    files = (
        sorted((SAMPLE_FLEET / "kernel").iterdir())[:12]
        + sorted((SAMPLE_FLEET / "ipmi").iterdir())[:12]
    )
    alone = Warehouse(tmp_path / "alone")
    ingest_paths(alone, files)
    home = str(tmp_path / "home")
    runs = [
        subprocess.Popen(
            [*GOODPUT, "ingest", *map(str, order), "--home", home],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for order in (files, files[::-1])
    ]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    wh = Warehouse(home)
    assert _counts(wh) == _counts(alone) and _counts(wh)["ingest_manifest"] == 24
    assert len(wh.files("hw_events")) > 0
    # the Parquet itself, not only the views, holds each event once
    assert duckdb.sql(f"select count(*) from read_parquet({wh.files('hw_events')})").fetchall() == [
        (alone.read("hw_events").height,)
    ]
    # one of them waited for the other, and said so in one line
    assert sum("waiting for the writer" in err for _, err in outs) <= 1


def test_an_open_read_only_client_breaks_nothing_and_sql_is_never_stale(tmp_path):
    home = tmp_path / "home"
    kernel = sorted((SAMPLE_FLEET / "kernel").iterdir())
    assert goodput(home, "ingest", str(kernel[0])).returncode == 0
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import duckdb, sys, time\n"
                "con = duckdb.connect(sys.argv[1], read_only=True)\n"
                "print(con.sql('select count(*) from hw_events').fetchall()[0][0], flush=True)\n"
                "time.sleep(900)"
            ),
            "warehouse.duckdb",
        ],  # killed below; outlives ingest + report under load
        stdout=subprocess.PIPE,
        text=True,
        cwd=home,  # the catalog names the Parquet relative to the home
    )
    try:
        first = int(reader.stdout.readline())
        assert first == Warehouse(home).read("hw_events").height > 0
        for cmd in (["ingest", str(kernel[1])], ["report"]):
            out = goodput(home, *cmd)
            assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        out = goodput(home, "sql", "select count(*) n from hw_events", "--format", "csv")
        both = Warehouse(home).read("hw_events").height
        assert out.stdout == f"n\n{both}\n" and both > first
        assert reader.poll() is None  # the reader was never disturbed
    finally:
        reader.kill()
        reader.wait()
    with duckdb.connect(
        str(home / "warehouse.duckdb"), read_only=True, config={"file_search_path": str(home)}
    ) as con:
        assert con.sql("select count(*) from hw_events").fetchall() == [(both,)]


def test_a_crash_between_commit_renames_shows_before_then_after(tmp_path):
    home = tmp_path / "home"
    sel = SAMPLE_FLEET / "ipmi" / "gpu-node-001.sel.txt"
    assert goodput(home, "ingest", str(sel)).returncode == 0
    before = _counts(Warehouse(home))
    kernel = tmp_path / "gpu-node-002.log"
    shutil.copy(SAMPLE_FLEET / "kernel" / kernel.name, kernel)
    crashed = goodput(home, "ingest", str(kernel), fault="1")
    assert crashed.returncode == 70
    moved = list((home / "parquet" / "hw_events" / "source=kernel").glob("*.parquet"))
    assert moved and list((home / "parquet" / "_staging").glob("*/COMMIT"))  # half moved, for real
    # a reader that does not recover (a DuckDB client on the catalog) sees the state before
    with duckdb.connect(
        str(home / "warehouse.duckdb"), read_only=True, config={"file_search_path": str(home)}
    ) as con:
        got = {t: con.sql(f"select count(*) from {t}").fetchall()[0][0] for t in before}
    assert got == before
    # the next writer (here: opening the warehouse) rolls the batch forward: the state after
    after = _counts(Warehouse(home))
    assert after["ingest_manifest"] == 2 and after["hw_events"] > before["hw_events"]
    assert not list((home / "parquet" / "_staging").glob("*"))


def test_a_crash_in_forget_leaves_before_or_after(tmp_path):
    home = tmp_path / "home"
    kernel = sorted((SAMPLE_FLEET / "kernel").iterdir())[:2]
    assert goodput(home, "ingest", *map(str, kernel)).returncode == 0
    wh = Warehouse(home)
    total, first = (
        wh.read("hw_events").height,
        wh.read("hw_events", f"source_file = '{kernel[0]}'").height,
    )
    crashed = goodput(home, "forget", str(kernel[0]), fault="0")
    assert crashed.returncode == 70
    assert Warehouse(home).read("hw_events").height == total - first  # rolled forward: after
    assert Warehouse(home).read("ingest_manifest")["path"].to_list() == [str(kernel[1])]
