"""The store's promises: each record once (however a log grew, was rotated or re-compressed),
one writer at a time, a read-only SQL surface, forget / --replace, and ingest that survives
unreadable files, odd names, FIFOs and devices (issues 17 and 19)."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import REPO
from tests.conftest import SAMPLE_FLEET
from warehouse.store import Warehouse
from warehouse.store import WarehouseBusy
from warehouse.store import WarehouseError

KERNEL = SAMPLE_FLEET / "kernel" / "gpu-node-001.log"  # `dmesg -T` times: local, read with --tz
SEL = SAMPLE_FLEET / "ipmi" / "gpu-node-001.sel.txt"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _hw(wh: Warehouse) -> pl.DataFrame:
    return wh.read("hw_events").select("time", "code", "message").sort("time", "code", "message")


# ----------------------------------------------------------------- each record once
def test_a_log_that_grew_contributes_each_event_once(wh, tmp_path):
    whole = _hw_of(tmp_path / "whole", [KERNEL])
    log = tmp_path / "kern.log"
    log.write_text("".join(_lines(KERNEL)[:80]))
    first = ingest_paths(wh, [log])[0]
    assert 0 < first.rows_ok < whole.height
    shutil.copy(KERNEL, log)  # the same log, grown
    grown = ingest_paths(wh, [log])[0]
    assert grown.rows_duplicate == first.rows_ok and grown.rows_ok == whole.height - first.rows_ok
    assert _hw(wh).equals(whole)
    # in the Parquet, not only in a view
    assert pl.read_parquet(wh.files("hw_events")).height == whole.height == 11


def test_rotated_and_recompressed_logs_add_nothing(wh, tmp_path):
    whole = _hw_of(tmp_path / "whole", [KERNEL, SEL])
    ingest_paths(wh, [KERNEL, SEL])
    gz = tmp_path / "gpu-node-001.log.1.gz"
    gz.write_bytes(gzip.compress(KERNEL.read_bytes()))  # logrotate / gzip -k
    sel_copy = tmp_path / "rotated" / SEL.name  # the host is read from the name
    sel_copy.parent.mkdir()
    sel_copy.write_text(SEL.read_text() + "\n")  # other bytes, same records
    reports = ingest_paths(wh, [gz, sel_copy])
    assert [r.rows_ok for r in reports] == [0, 0] and all(r.rows_duplicate > 0 for r in reports)
    assert _hw(wh).equals(whole)
    m = wh.read("ingest_manifest")
    assert (m["records_read"] == m["rows_ok"] + m["rows_quarantined"] + m["rows_duplicate"]).all()


def test_exact_duplicate_lines_within_a_file_are_stored_once(wh, tmp_path):
    lines = _lines(SEL)
    doubled = tmp_path / "sel.txt"
    doubled.write_text("".join(lines + lines[:5]))
    rep = ingest_paths(wh, [doubled])[0]
    single = _hw_of(tmp_path / "single", [SEL])
    assert rep.records == len(lines) + 5 and rep.rows_duplicate == 5
    assert _hw(wh).equals(single)


def _hw_of(home: Path, paths) -> pl.DataFrame:
    w = Warehouse(home)
    ingest_paths(w, paths)
    return _hw(w)


# ----------------------------------------------------------------- forget / --replace
def test_forget_then_ingest_with_the_right_zone(wh, tmp_path, capsys):
    home = str(wh.home)
    assert main(["ingest", str(KERNEL), "--tz", "America/Chicago", "--home", home]) == 0
    wrong = _hw(wh)
    assert main(["ingest", str(KERNEL), "--home", home]) == 0  # same bytes: a no-op
    assert _hw(wh).equals(wrong)
    assert main(["forget", str(KERNEL), "--home", home]) == 0
    assert "hw_events 11" in capsys.readouterr().out
    for table in ("hw_events", "ingest_manifest", "quarantine"):
        assert wh.read(table).height == 0, table
    assert main(["ingest", str(KERNEL), "--home", home]) == 0
    right = _hw(wh)
    assert right.height == wrong.height == 11
    # Chicago is 6 h behind UTC in January: the wrong zone put every event 6 h late
    assert (wrong["time"] - right["time"]).dt.total_hours().unique().to_list() == [6]
    assert right["time"][0] == datetime(2026, 1, 14, 11, 12, 49)


def test_ingest_replace_is_forget_plus_ingest_and_forget_by_sha(wh):
    home = str(wh.home)
    assert main(["ingest", str(KERNEL), str(SEL), "--tz", "Asia/Tokyo", "--home", home]) == 0
    sel_rows = wh.read("hw_events", "source_file LIKE '%.sel.txt'")
    assert main(["ingest", "--replace", str(KERNEL), "--home", home]) == 0
    got = wh.read("hw_events")
    assert got.filter(pl.col("source_file").str.ends_with(".log"))["time"].min() == datetime(
        2026, 1, 14, 11, 12, 49
    )
    assert (
        got.filter(pl.col("source_file").str.ends_with(".sel.txt")).height == sel_rows.height
    )  # untouched
    sha = wh.read("ingest_manifest", "path LIKE '%.sel.txt'")["sha256"][0]
    assert main(["forget", sha, "--home", home]) == 0
    assert wh.read("hw_events", "source_file LIKE '%.sel.txt'").height == 0
    assert wh.read("ingest_manifest")["path"].to_list() == [str(KERNEL)]


def test_forget_of_something_never_ingested_is_one_line(wh, tmp_path, capsys):
    assert main(["forget", "0" * 64, "--home", str(wh.home)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not an ingested file" in err


# ----------------------------------------------------------------- one writer
def test_a_second_writer_fails_naming_the_owner_or_waits(wh, tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys,time; from warehouse.store import Warehouse\n"
                "with Warehouse(sys.argv[1]).writer():\n print('held', flush=True); time.sleep(30)"
            ),
            str(wh.home),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with (
            pytest.raises(WarehouseBusy, match=rf"pid {holder.pid} on .*\(.*-c"),
            Warehouse(wh.home, wait=False).writer(),
        ):
            pass
        with pytest.raises(WarehouseBusy, match="being written by"):
            ingest_paths(Warehouse(wh.home, wait=0.3), [KERNEL])
        assert wh.read("hw_events").height == 0
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "--no-wait",
                "ingest",
                str(KERNEL),
                "--home",
                str(wh.home),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert (
            out.returncode == 2
            and out.stderr.count("\n") == 1
            and f"pid {holder.pid}" in out.stderr
        )
    finally:
        holder.kill()
        holder.wait()
    # a dead owner's lock is taken over at once (the OS released it); its record is replaced
    with Warehouse(wh.home, wait=False).writer():
        assert json.loads(wh.lock_path.read_text())["pid"] == os.getpid()
    assert ingest_paths(Warehouse(wh.home, wait=False), [KERNEL])[0].rows_ok == 11


def test_writer_lock_is_reentrant_and_readers_do_not_take_it(wh):
    with wh.writer():
        with wh.writer():
            wh.replace_table("node_mcf", pl.DataFrame({"t_hours": [1.0]}))
        other = Warehouse(wh.home, wait=False)  # opening (a reader) does not wait
        assert other.read("node_mcf").height == 1
    assert wh.lock_path.read_text() == ""


# ----------------------------------------------------------------- read-only SQL
@pytest.mark.parametrize(
    "query",
    [
        "COPY (SELECT 1 AS x) TO '{part}' (FORMAT parquet)",
        "COPY (SELECT 'x') TO '{home}/warehouse.duckdb'",
        "ATTACH '{home}/evil.duckdb' (READ_WRITE)",
        "SELECT * FROM read_text('/etc/passwd')",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "CREATE TABLE t AS SELECT 1",
        "SELECT 1; COPY (SELECT 1) TO '/tmp/x.csv'",
    ],
)
def test_sql_cannot_write_or_read_outside_the_warehouse(wh, capsys, query):
    home = str(wh.home)
    assert main(["ingest", str(KERNEL), "--home", home]) == 0
    part = wh.files("hw_events")[0]
    before = Path(part).read_bytes()
    capsys.readouterr()
    assert main(["sql", query.format(part=part, home=home), "--home", home]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("goodput: error:")
    assert Path(part).read_bytes() == before and not (wh.home / "evil.duckdb").exists()
    assert (
        main(["sql", "select count(*) n from hw_events", "--format", "json", "--home", home]) == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"n": 11}]


def test_sql_allow_files_opts_in_to_reading_a_directory(wh, tmp_path, capsys):
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "a.csv").write_text("x\n1\n2\n")
    q = f"select sum(x)::INT s from read_csv('{extra}/a.csv')"
    assert main(["sql", q, "--home", str(wh.home)]) == 2
    capsys.readouterr()
    assert (
        main(["sql", q, "--allow-files", str(extra), "--format", "json", "--home", str(wh.home)])
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [{"s": 3}]


def test_sql_makes_the_views_a_query_reads_and_every_view_for_the_catalog(wh, capsys):
    """goodput sql makes only the views its query names (each binds its Parquet files), with the
    tables a view reads; a query of the catalog itself still sees every table and view."""
    from warehouse.catalog import named_views
    from warehouse.schemas import TABLES
    from warehouse.schemas import VIEWS

    assert named_views("select 1") == []
    assert named_views("select count(*) from job_chains") == ["job_attempts", "job_chains"]
    assert named_views("SHOW TABLES") is None and named_views("select 1; select 2") is None
    home = str(wh.home)
    assert main(["ingest", str(KERNEL), "--home", home]) == 0
    capsys.readouterr()
    assert main(["sql", "SHOW TABLES", "--format", "json", "--home", home]) == 0
    assert {r["name"] for r in json.loads(capsys.readouterr().out)} == {*TABLES, *VIEWS}
    q = "select (select count(*) from hw_events) > 0 AS events, count(*) AS chains FROM job_chains"
    assert main(["sql", q, "--format", "json", "--home", home]) == 0
    assert json.loads(capsys.readouterr().out) == [{"events": True, "chains": 0}]


def test_connections_share_a_database_but_not_their_views_or_settings(wh):
    """``connect()`` gives cursors of one in-memory database: each its own temporary views and
    session; a connection that sets a global option (the out-of-core memory limit) is a
    database of its own, so the limit does not reach the others."""
    with wh.connect() as a, wh.connect() as b:
        a.execute("CREATE TEMP VIEW mine AS SELECT 1 AS x")
        assert a.sql("select x from mine").fetchall() == [(1,)]
        with pytest.raises(Exception, match="mine"):
            b.sql("select x from mine")
        before = b.execute("select current_setting('memory_limit')").fetchone()[0]
        with wh.connect_out_of_core() as c:
            assert c.execute("select current_setting('memory_limit')").fetchone()[0] != before
        assert a.execute("select current_setting('memory_limit')").fetchone()[0] == before
        assert a.execute("select current_setting('TimeZone')").fetchone()[0] == "UTC"
    assert wh.query("select count(*) AS n from hw_events")["n"][0] == 0  # views come and go


def test_sql_csv_renders_list_columns_as_json(wh, tmp_path, capsys):
    src = tmp_path / "sacct.txt"
    src.write_text(
        "JobID|State|Start|End|NodeList|AllocTRES\n"
        "1|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|n[1-2]|gres/gpu=16\n"
    )
    assert main(["ingest", str(src), "--home", str(wh.home)]) == 0
    capsys.readouterr()
    assert (
        main(
            [
                "sql",
                "select job_id, nodes from job_attempts",
                "--format",
                "csv",
                "--home",
                str(wh.home),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == 'job_id,nodes\n1,"[""n1"",""n2""]"\n'


# ----------------------------------------------------------------- runner robustness
def test_unreadable_file_is_quarantined_not_done_and_siblings_land(
    wh, tmp_path, capsys, monkeypatch
):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(KERNEL, src / "a.log")
    locked = src / "b.log"
    shutil.copy(SEL, locked)
    locked.chmod(0)
    if os.geteuid() == 0:  # root reads whatever the mode: refuse as the kernel would for others
        path_open = Path.open

        def denied(self, *args, **kwargs):
            if self == locked and not self.stat().st_mode & 0o444:
                raise PermissionError(13, "Permission denied")
            return path_open(self, *args, **kwargs)

        monkeypatch.setattr(Path, "open", denied)
    assert main(["ingest", str(src), "--home", str(wh.home)]) == 0
    err = capsys.readouterr().err
    assert f"{locked}: cannot read: Permission denied" in err
    q = wh.read("quarantine")
    assert q.select("source_file", "sha256", "error").rows() == [
        (str(locked), None, "cannot read: Permission denied")
    ]
    assert wh.read("ingest_manifest")["path"].to_list() == [str(src / "a.log")]
    locked.chmod(0o644)
    assert main(["ingest", str(src), "--home", str(wh.home)]) == 0
    assert sorted(wh.read("ingest_manifest")["path"].to_list()) == [str(src / "a.log"), str(locked)]
    assert wh.read("quarantine").height == 0  # the "Permission denied" row is not left behind


def test_parser_failure_is_quarantined_and_retried_later(wh, monkeypatch):
    from ingest import parsing

    real = parsing.parse_file

    def broken(*a, **k):
        raise ValueError("parser bug")

    monkeypatch.setattr(parsing, "parse_file", broken)
    rep = ingest_paths(wh, [KERNEL])[0]
    assert not rep.done and wh.read("ingest_manifest").height == 0
    assert wh.read("quarantine")["error"].to_list() == ["parser error: ValueError('parser bug')"]
    ingest_paths(wh, [KERNEL])  # still broken: the failure is not stored twice
    assert wh.read("quarantine").height == 1
    monkeypatch.setattr(parsing, "parse_file", real)
    rep = ingest_paths(wh, [KERNEL])[0]
    assert rep.done and rep.rows_ok == 11
    assert wh.read("quarantine").height == 0 and wh.read("ingest_manifest").height == 1


def test_corrupt_compression_is_quarantined_not_done_and_retried(wh, tmp_path):
    bad = tmp_path / "node-1.log.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 40)  # gzip magic, then garbage
    for _ in range(2):  # tried again, never stored twice
        (rep,) = ingest_paths(wh, [bad])
        assert not rep.done and not rep.skipped
        assert wh.read("ingest_manifest").height == 0
        (error,) = wh.read("quarantine")["error"].to_list()
        assert error.startswith("cannot decompress:")


def test_fifo_device_and_odd_names_are_one_line_each(wh, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    os.mkfifo(src / "pipe")
    odd = Path(os.fsdecode(bytes(src) + b"/kern-\xff.log"))
    shutil.copy(KERNEL, odd)
    assert main(["ingest", str(src / "pipe"), "/dev/zero", str(odd), "--home", str(wh.home)]) == 0
    out, err = capsys.readouterr()
    assert "ingested 1 file(s), 11 rows" in out
    assert f"{src / 'pipe'}: not a regular file" in err and "/dev/zero: not a regular file" in err
    assert wh.read("ingest_manifest")["path"].to_list() == [str(src) + "/kern-\\xff.log"]


@pytest.mark.parametrize("kind", ["file", "unwritable"])
def test_a_home_that_cannot_be_used_is_one_line(tmp_path, capsys, kind):
    home = tmp_path / "home"
    if kind == "file":
        home.write_text("x")
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        home.mkdir()
        home.chmod(0o500)
    assert main(["ingest", str(KERNEL), "--home", str(home)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"home {home}" in err
    with pytest.raises(WarehouseError):
        Warehouse(home)


# ----------------------------------------------------------------- streamed partitions
def test_replace_partition_streams_chunks_into_one_file_or_keeps_the_old_one(wh):
    """A derived partition written chunk by chunk is one file with every chunk's rows; a
    failure part way leaves the partition as it was (no temp file); no rows drops it."""
    t0 = datetime(2026, 1, 1)

    def chunk(i: int, n: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "event_id": [f"c{i}-{k}" for k in range(n)],
                "time": [t0] * n,
                "host": ["n1"] * n,
                "severity": ["warning"] * n,
            }
        )

    def failing():
        yield chunk(9, 5)
        raise RuntimeError("disk gone")

    assert wh.replace_partition("hw_events", "dcgm_counter", (chunk(i, 3) for i in range(4))) == 12
    files = wh.files("hw_events", partition="dcgm_counter")
    got = wh.read("hw_events")
    assert len(files) == 1 and got.height == 12 and set(got["source"]) == {"dcgm_counter"}
    assert got["time"].to_list() == [t0] * 12 and got["event_id"].n_unique() == 12
    with pytest.raises(RuntimeError, match="disk gone"):
        wh.replace_partition("hw_events", "dcgm_counter", failing())
    assert wh.read("hw_events").sort("event_id").equals(got.sort("event_id"))
    assert os.listdir(Path(files[0]).parent) == ["data.parquet"]
    assert wh.replace_partition("hw_events", "dcgm_counter", iter([chunk(0, 0)])) == 0
    assert wh.read("hw_events").height == 0 and not wh.files("hw_events")


def test_out_of_core_steps_spill_to_goodput_scratch(tmp_path, monkeypatch):
    """A home on a shared volume (Kubernetes) keeps spills on the pod's own disk."""
    assert Warehouse(tmp_path / "a").scratch == tmp_path / "a"  # default: the home
    monkeypatch.setenv("GOODPUT_SCRATCH", str(tmp_path / "scratch"))
    wh = Warehouse(tmp_path / "b")
    assert wh.scratch == tmp_path / "scratch"
    with wh.connect_out_of_core() as con:
        spill = con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0]
    assert Path(spill) == tmp_path / "scratch" / ".duckdb_spill"
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GOODPUT_SCRATCH", str(tmp_path / "file" / "sub"))
    with pytest.raises(
        WarehouseError, match=r"cannot use \$GOODPUT_SCRATCH .*file/sub: Not a directory"
    ):
        Warehouse(tmp_path / "c")


def test_record_key_ranges_bound_the_stored_rows_a_batch_is_matched_against():
    """Each orderable key column without nulls bounds the stored rows read (times, strings,
    integers); a column with a null, a list or a long string bounds nothing."""
    from warehouse.batch import _key_ranges
    from warehouse.schemas import TABLES

    part = pl.DataFrame({
        "time": [datetime(2026, 1, 1, 0, 0, 1), datetime(2026, 1, 1, 23, 59, 59, 5)],
        "host": ["gpu-node-0007", "gpu-node-0003"], "gpu": [7, 0], "uuid": ["GPU-a", None],
        "metric": ["x" * 300, "DCGM_FI_DEV_GPU_TEMP"],
    }, schema_overrides={"gpu": pl.Int32})  # fmt: skip
    assert _key_ranges(part, ("time", "host", "gpu", "uuid", "metric"), TABLES["gpu_samples"]) == [
        (
            "e.\"time\" BETWEEN TIMESTAMP '2026-01-01 00:00:01' AND TIMESTAMP '2026-01-01 "
            "23:59:59.000005'"
        ),
        "e.\"host\" BETWEEN 'gpu-node-0003' AND 'gpu-node-0007'",
        'e."gpu" BETWEEN 0 AND 7',
    ]


def test_write_pieces_routes_each_row_to_its_piece(wh):
    """``write(Series of piece names, df)`` puts each row in its own piece (one conversion for
    the chunk); a piece named with no rows still exists, empty; other pieces are kept."""
    t0 = datetime(2026, 1, 1)
    wh.replace_partition(
        "hw_events", "dcgm_counter", [pl.DataFrame({"event_id": ["old"], "time": [t0]})]
    )
    df = pl.DataFrame(
        {"event_id": [f"e{i}" for i in range(5)], "time": [t0] * 5, "host": list("abcab")}
    )
    with wh.write_pieces("hw_events", "dcgm_counter") as write:
        write("day-3", pl.DataFrame())
        write(pl.Series(["day-1", "day-2", "day-1", "day-1", "day-2"]), df)
    assert set(wh.piece_mtimes("hw_events", "dcgm_counter")) == {"data", "day-1", "day-2", "day-3"}
    by_file = {
        Path(f).stem: pl.read_parquet(f)["event_id"].to_list()
        for f in wh.files("hw_events", partition="dcgm_counter")
    }
    assert by_file == {
        "data": ["old"],
        "day-1": ["e0", "e2", "e3"],
        "day-2": ["e1", "e4"],
        "day-3": [],
    }
    wh.drop_pieces("hw_events", "dcgm_counter", ["data", "day-3"])
    assert wh.read("hw_events").height == 5


def test_connections_draw_no_progress_bar(wh):
    """A long query must not draw DuckDB's progress bar into the CLI's output or step logs."""
    for con in (wh.connect(), wh.connect_out_of_core()):
        with con:
            assert con.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [
                (False,)
            ]
