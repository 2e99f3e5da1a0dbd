"""Hostile and half-written inputs (issue 32): nothing lost, doubled or invented, memory bounded,
and every rejected record or skipped byte range has a reason. The large inputs of the same
attacks are in benchmarks/bench_attack_inputs.py."""

import gzip
import hashlib
import os
import threading
import time
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest
import zstandard

from ingest import chunks
from ingest import parsing
from ingest import runner
from ingest.base import ParseContext
from ingest.files import BOM
from ingest.formats.sacct import parse as parse_sacct
from ingest.formats.slurmctld import parse as parse_slurmctld
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from warehouse.store import Warehouse

HEADER = "JobID|State|Start|End|Elapsed|NNodes|NodeList|AllocTRES\n"


def _sacct(lines: str, **ctx):
    res = parse_sacct((HEADER + lines).encode(), ParseContext(**ctx))
    ok = res.tables.get("job_attempts", pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height + res.duplicates
    return ok, res.quarantine


def test_hostlist_of_ten_million_hosts_is_one_quarantined_record_not_an_oom():
    ok, q = _sacct(
        "1|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|n[0-99999]x[0-99]|node=2\n"
        "2|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|gpu[1-2]|node=2\n"
    )
    assert ok["job_id"].to_list() == ["2"] and ok["nodes"][0].to_list() == ["gpu1", "gpu2"]
    assert q["line"].to_list() == [2] and "10,000,000 hosts" in q["error"][0]


def test_hostlist_longer_than_nnodes_is_quarantined_not_a_bigger_fleet():
    ok, q = _sacct(
        "1|FAILED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|n[0-999]x[0-9]|node=2\n"
    )
    assert ok.height == 0
    assert q["error"].to_list() == [
        "hostlist n[0-999]x[0-9] names 10000 hosts but the record has NNodes 2"
    ]


def test_malformed_hostlist_is_quarantined_not_a_host_named_with_brackets():
    ok, q = _sacct(
        "1|FAILED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|3|gpu[1-2],,gpu[[3]]|node=3\n"
    )
    assert ok.height == 0 and "hostlist" in q["error"][0]
    res = parse_slurmctld(
        b"[2026-01-01T00:00:00.000] update_node: node gpu[[3]] reason set to: x\n"
        b"[2026-01-01T00:00:01.000] error: Nodes gpu[[3]] not responding, setting DOWN\n",
        ParseContext(),
    )
    nodes = res.tables.get("node_events", pl.DataFrame({"host": []}))
    assert "gpu[3]" not in nodes["host"].to_list() and "nested" in res.quarantine["error"][0]


def _ingest(wh, *paths, **kw):
    return ingest_paths(wh, [str(p) for p in paths], jobs=1, **kw)


@pytest.mark.parametrize("fmt", ["auto", "sacct"])
def test_sacct_with_a_utf8_bom_is_detected_and_parsed(tmp_path, fmt):
    dump = tmp_path / "bom.txt"
    dump.write_bytes(
        BOM + (FIXTURES / "slurm/sacct_parsable2_with_header_examples.txt").read_bytes()
    )
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, dump, fmt=fmt)
    assert (r.format, r.records, r.rows_ok, r.rows_quarantined) == ("sacct", 4, 4, 0)


@pytest.mark.parametrize("suffix", ["zst", "gz"])
def test_truncated_compressed_file_is_quarantined_as_truncated_and_not_marked_done(
    tmp_path, suffix
):
    text = (FIXTURES / "slurm/xdmod__accounting-logs.log").read_bytes() * 50
    whole = zstandard.ZstdCompressor().compress(text) if suffix == "zst" else gzip.compress(text)
    f = tmp_path / "in" / f"acct.log.{suffix}"
    f.parent.mkdir()
    f.write_bytes(whole[: len(whole) // 2])
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, f.parent)
    assert not r.done and r.rows_ok == 0
    q = wh.read("quarantine")
    assert q.height == 1 and ("truncated" in q["error"][0] or "end-of-stream" in q["error"][0])
    assert wh.read("ingest_manifest").height == 0
    f.write_bytes(whole)  # the complete copy arrives: read, and the stale row is gone
    (r,) = _ingest(wh, f.parent)
    assert (
        r.done and (r.rows_ok, r.rows_duplicate) == (4, 196) and wh.read("quarantine").height == 0
    )


XID_OK = (
    "2026-01-05T10:00:00+00:00 node-a kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, "
    "off bus\n"
)
XID_CUT = "2026-01-05T11:00:00+00:00 node-a kernel: NVRM: Xid (PCI:0000:5d:00): 11"
XID_REST = "9, pid=2, name=y, channel error\n"


def test_kernel_line_cut_inside_an_xid_code_is_held_back_then_read_whole(tmp_path):
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text(XID_OK + XID_CUT)
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log)
    assert (r.records, r.held_back, r.bytes) == (1, len(XID_CUT), len(XID_OK))
    manifest = wh.read("ingest_manifest")
    assert manifest["bytes"].to_list() == [len(XID_OK)]
    assert manifest["sha256"][0] == hashlib.sha256(XID_OK.encode()).hexdigest()  # the bytes parsed
    assert wh.read("hw_events")["code"].to_list() == ["79"]
    (again,) = _ingest(wh, log)  # unchanged: nothing read twice
    assert again.skipped
    with log.open("a") as fh:
        fh.write(XID_REST)
    (r,) = _ingest(wh, log)
    assert (r.rows_ok, r.rows_duplicate, r.held_back) == (1, 1, 0)
    assert sorted(wh.read("hw_events")["code"].to_list()) == ["119", "79"]  # no invented XID 11


def test_dcgm_sample_cut_inside_its_value_is_not_stored_as_a_smaller_value(tmp_path):
    scrape = tmp_path / "node-a" / "dcgm.prom"
    scrape.parent.mkdir()
    first = 'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 300.5 1767610800000\n'
    scrape.write_text(first + 'DCGM_FI_DEV_POWER_USAGE{gpu="1"} 61')
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, scrape)
    assert r.records == 1 and wh.read("gpu_samples")["value"].to_list() == [300.5]
    with scrape.open("a") as fh:
        fh.write("2.5 1767610800000\n")
    _ingest(wh, scrape)
    assert sorted(wh.read("gpu_samples")["value"].to_list()) == [300.5, 612.5]


def test_file_rotated_between_hashing_and_parsing_is_recorded_against_the_bytes_parsed(
    tmp_path, monkeypatch
):
    old = "".join(XID_OK.replace("2026-01-05", f"2026-01-{d:02d}") for d in range(1, 29))
    new = XID_OK.replace("2026-01-05", "2026-02-05")
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text(old)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1024)  # a large file: hashed, then streamed
    real = runner._ingest_large

    def rotate_then_parse(wh, it, *args):
        log.rename(log.with_suffix(".log.1"))  # logrotate runs between hashing and reading
        log.write_text(new)
        return real(wh, it, *args)

    monkeypatch.setattr(runner, "_ingest_large", rotate_then_parse)
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log)
    assert r.sha256 == hashlib.sha256(old.encode()).hexdigest() and r.rows_ok == 28
    monkeypatch.setattr(runner, "_ingest_large", real)
    rotated, current = _ingest(wh, log.with_suffix(".log.1"), log)
    assert rotated.skipped and current.rows_ok == 1  # neither file lost
    assert wh.read("hw_events").height == 29


def test_a_file_still_being_written_is_skipped_with_a_reason_until_it_settles(tmp_path):
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text(XID_OK)
    quiet = tmp_path / "node-b" / "kern.log"
    quiet.parent.mkdir()
    quiet.write_text(XID_OK.replace("node-a", "node-b"))
    os.utime(quiet, (time.time() - 3600, time.time() - 3600))  # written an hour ago
    stop = threading.Event()

    def writer():
        while not stop.wait(0.05):
            with log.open("a") as fh:
                fh.write(XID_OK)

    t = threading.Thread(target=writer)
    t.start()
    wh = Warehouse(tmp_path / "home")
    try:
        busy, calm = _ingest(wh, log, quiet, settle_s=1.0)
    finally:
        stop.set()
        t.join()
    assert not busy.done and "still being written" in busy.error and calm.rows_ok == 1
    q = wh.read("quarantine")
    assert q["source_file"].to_list() == [str(log)] and "settle" in q["error"][0]
    busy, calm = _ingest(wh, log, quiet, settle_s=0.0)
    assert busy.done and busy.rows_ok == 1 and calm.skipped
    assert wh.read("quarantine").height == 0  # the stale row is cleared


DST_HEADER = "JobID|State|Submit|Start|End|Elapsed|NNodes|NodeList\n"


def _dst(*lines: str):
    res = parse_sacct((DST_HEADER + "".join(lines)).encode(), ParseContext(tz="America/New_York"))
    ok = res.tables.get("job_attempts", pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height
    return ok, res.quarantine


def test_job_crossing_the_fall_back_hour_is_resolved_by_its_elapsed():
    # 01:50 EDT -> 01:10 EST is 20 minutes; Elapsed says so
    ok, q = _dst(
        "1|COMPLETED|2026-11-01T01:00:00|2026-11-01T01:50:00|2026-11-01T01:10:00|00:20:00|1|n1\n"
    )
    assert q.height == 0
    row = ok.row(0, named=True)
    assert (row["start_time"], row["end_time"]) == (
        datetime(2026, 11, 1, 5, 50),
        datetime(2026, 11, 1, 6, 10),
    )


def test_job_ending_in_the_repeated_hour_keeps_its_whole_elapsed():
    ok, q = _dst(
        "1|COMPLETED|2026-11-01T00:00:00|2026-11-01T00:30:00|2026-11-01T01:30:00|02:00:00|1|n1\n"
    )
    assert q.height == 0 and ok["end_time"][0] - ok["start_time"][0] == timedelta(hours=2)


def test_submit_in_the_repeated_hour_is_decided_by_the_start_it_precedes():
    ok, q = _dst(
        "1|COMPLETED|2026-11-01T01:40:00|2026-11-01T01:20:00|2026-11-01T02:20:00|01:00:00|1|n1\n"
    )
    assert q.height == 0
    assert ok.row(0)[ok.columns.index("submit_time")] == datetime(2026, 11, 1, 5, 40)
    assert ok["start_time"][0] == datetime(2026, 11, 1, 6, 20)


def test_times_no_evidence_decides_or_that_do_not_exist_are_quarantined_with_the_reason():
    ok, q = _dst(
        "1|COMPLETED|2026-11-01T00:00:00|2026-11-01T01:10:00|2026-11-01T01:30:00|00:20:00|1|n1\n",
        "2|COMPLETED|2026-03-08T01:00:00|2026-03-08T02:30:00|2026-03-08T04:00:00|00:30:00|1|n1\n",
        "3|RUNNING|2026-11-01T00:00:00|2026-11-01T01:10:00|Unknown|00:20:00|1|n1\n",
        "4|COMPLETED|2026-06-01T00:00:00|2026-06-01T01:10:00|2026-06-01T01:30:00|00:20:00|1|n1\n",
    )
    assert ok["job_id"].to_list() == ["4"]
    errors = dict(zip(q["line"].to_list(), q["error"].to_list(), strict=True))
    assert (
        "repeated when DST ends in America/New_York" in errors[2]
        and "Elapsed '00:20:00'" in errors[2]
    )
    assert errors[3] == (
        "Start '2026-03-08T02:30:00' does not exist in America/New_York (the hour skipped when "
        "DST starts)"
    )
    assert "repeated when DST ends" in errors[4]


def test_nul_byte_inside_an_xid_line_is_a_quarantine_row_not_a_lost_or_wrong_event(tmp_path):
    lines = [XID_OK.replace("2026-01-05", f"2026-01-0{d}") for d in range(1, 7)]
    lines[2] = lines[2].replace("79, pid", "7\x009, pid")  # would read as XID 7
    lines[4] = lines[4].replace("NVRM", "NV\x00RM")  # would not be seen at all
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text("".join(lines))
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log)
    assert (r.records, r.rows_ok, r.rows_quarantined) == (6, 4, 2)
    assert wh.read("hw_events")["code"].to_list() == ["79"] * 4
    q = wh.read("quarantine").sort("line")
    assert q["line"].to_list() == [3, 5] and set(q["error"]) == {
        "NUL byte inside the line (a corrupt or crash-damaged log): not read"
    }
    assert "7\\09" in q["raw"][0]


def test_unreadable_subdirectory_is_reported_and_quarantined_then_cleared(tmp_path, monkeypatch):
    src = tmp_path / "src"
    (src / "locked").mkdir(parents=True)
    (src / "a.log").write_text(XID_OK)
    (src / "locked" / "b.log").write_text(XID_OK.replace("node-a", "node-b"))
    real_scandir = os.scandir

    def denied(path="."):  # as the kernel does for a mode-0 directory (root would read it)
        if not isinstance(path, int) and os.fspath(path) == str(src / "locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", denied)
    wh = Warehouse(tmp_path / "home")
    reports = _ingest(wh, src)
    assert [(r.path, r.done) for r in reports] == [
        (str(src / "a.log"), True),
        (str(src / "locked"), False),
    ]
    assert reports[1].error == "cannot list directory: Permission denied: its files were not read"
    assert wh.read("quarantine")["source_file"].to_list() == [str(src / "locked")]
    monkeypatch.setattr(os, "scandir", real_scandir)
    reports = _ingest(wh, src)
    assert [r.path for r in reports if not r.skipped] == [str(src / "locked" / "b.log")]
    assert wh.read("quarantine").height == 0 and wh.read("hw_events").height == 2


@pytest.mark.parametrize("compress", [None, "gz"])
@pytest.mark.parametrize("long_bytes", [3 << 20, 30 << 20])  # inside a chunk; longer than a chunk
def test_line_past_the_length_limit_is_one_quarantine_row_and_the_rest_is_read(
    tmp_path, compress, long_bytes
):
    text = (XID_OK + "x" * long_bytes + "\n" + XID_OK.replace("2026-01-05", "2026-01-06")).encode()
    log = tmp_path / "node-a" / ("kern.log.gz" if compress else "kern.log")
    log.parent.mkdir()
    log.write_bytes(gzip.compress(text, 1) if compress else text)
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log)
    assert (r.records, r.rows_ok, r.rows_quarantined) == (3, 2, 1)
    q = wh.read("quarantine")
    assert q["line"].to_list() == [2]
    assert (
        q["error"][0] == f"line of {long_bytes:,} bytes is longer than the limit of 1 MiB: not read"
    )


def test_file_that_is_one_long_line_is_one_quarantine_row(tmp_path):
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_bytes(XID_CUT.encode() + b"x" * (30 << 20) + b"\n")
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log, fmt="kernel")
    assert r.done and (r.records, r.rows_quarantined) == (1, 1)
    assert "is longer than the limit of 1 MiB" in wh.read("quarantine")["error"][0]


def test_json_that_inflates_past_the_limit_is_quarantined_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(parsing, "MAX_WHOLE_BYTES", 1 << 20)
    bomb = tmp_path / "jobs.json.gz"
    bomb.write_bytes(gzip.compress(b'{"jobs": [' + b" " * (4 << 20) + b"]}", 9))
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, bomb, fmt="sacct-json")
    assert not r.done and wh.read("ingest_manifest").height == 0
    assert wh.read("quarantine")["error"].to_list() == [
        "longer than 1 MiB decompressed, the limit for a file read whole: not read"
    ]


def test_file_that_is_one_incomplete_line_is_reported_and_read_once_complete(tmp_path):
    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text(XID_CUT)
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, log)
    assert not r.done and "no newline yet" in r.error and wh.read("ingest_manifest").height == 0
    assert "no newline yet" in wh.read("quarantine")["error"][0]
    log.write_text(XID_CUT + XID_REST)
    (r,) = _ingest(wh, log)
    assert r.done and r.rows_ok == 1 and wh.read("quarantine").height == 0


def test_cli_warns_of_bytes_held_back_and_of_files_still_changing(tmp_path, capsys):
    from pipelines.cli import main

    log = tmp_path / "node-a" / "kern.log"
    log.parent.mkdir()
    log.write_text(XID_OK + XID_CUT)
    assert main(["--home", str(tmp_path / "home"), "ingest", str(log), "--settle", "0"]) == 0
    err = capsys.readouterr().err
    assert f"{log}: its last {len(XID_CUT)} byte(s) are a line without its newline yet" in err
    with log.open("a") as fh:
        fh.write(XID_REST)
    assert (
        main(["--home", str(tmp_path / "home"), "ingest", str(log), "--settle", "1s"]) == 0
    )  # just written
    assert "still being written" not in capsys.readouterr().err  # unchanged while watched: read
    assert Warehouse(tmp_path / "home").read("hw_events").height == 2


def test_sql_cannot_read_duckdbs_temporary_directory_under_the_working_directory(
    tmp_path, monkeypatch, capsys
):
    """DuckDB lets SQL read its temporary directory (default ``.tmp`` under the working
    directory, where another run's spills or anything else can lie): goodput sql gives it a
    private, empty one."""
    from pipelines.cli import main

    home = str(tmp_path / "home")
    assert (
        main(["--home", home, "ingest", str(FIXTURES / "slurm" / "xdmod__accounting-logs.log")])
        == 0
    )
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "other.txt").write_text("not for goodput sql\n")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert (
        main(["--home", home, "sql", f"select content from read_text('{tmp_path}/.tmp/other.txt')"])
        == 2
    )
    out, err = capsys.readouterr()
    assert "not for goodput sql" not in out + err and err.count("\n") == 1
    assert (
        main(["--home", home, "sql", "select count(*) n from job_attempts", "--format", "csv"]) == 0
    )
    assert capsys.readouterr().out.splitlines() == ["n", "4"]
