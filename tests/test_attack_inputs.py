"""Hostile and half-written inputs (issue 32): nothing lost, doubled or invented, memory bounded,
and every rejected record or skipped byte range has a reason. The large inputs of the same
attacks are in benchmarks/bench_attack_inputs.py."""

import gzip

import polars as pl
import pytest
import zstandard

from ingest.base import ParseContext
from ingest.runner import BOM, ingest_paths
from ingest.sacct import parse as parse_sacct
from ingest.slurmctld import parse as parse_slurmctld
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
    ok, q = _sacct("1|FAILED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|2|n[0-999]x[0-9]|node=2\n")
    assert ok.height == 0
    assert q["error"].to_list() == ["hostlist n[0-999]x[0-9] names 10000 hosts but the record has NNodes 2"]


def test_malformed_hostlist_is_quarantined_not_a_host_named_with_brackets():
    ok, q = _sacct("1|FAILED|2026-01-01T00:00:00|2026-01-01T01:00:00|01:00:00|3|gpu[1-2],,gpu[[3]]|node=3\n")
    assert ok.height == 0 and "hostlist" in q["error"][0]
    res = parse_slurmctld(b"[2026-01-01T00:00:00.000] update_node: node gpu[[3]] reason set to: x\n"
                          b"[2026-01-01T00:00:01.000] error: Nodes gpu[[3]] not responding, setting DOWN\n",
                          ParseContext())
    nodes = res.tables.get("node_events", pl.DataFrame({"host": []}))
    assert "gpu[3]" not in nodes["host"].to_list() and "nested" in res.quarantine["error"][0]


def _ingest(wh, *paths, **kw):
    return ingest_paths(wh, [str(p) for p in paths], jobs=1, **kw)


@pytest.mark.parametrize("fmt", ["auto", "sacct"])
def test_sacct_with_a_utf8_bom_is_detected_and_parsed(tmp_path, fmt):
    dump = tmp_path / "bom.txt"
    dump.write_bytes(BOM + (FIXTURES / "slurm/sacct_parsable2_with_header_examples.txt").read_bytes())
    wh = Warehouse(tmp_path / "home")
    (r,) = _ingest(wh, dump, fmt=fmt)
    assert (r.format, r.records, r.rows_ok, r.rows_quarantined) == ("sacct", 4, 4, 0)


@pytest.mark.parametrize("suffix", ["zst", "gz"])
def test_truncated_compressed_file_is_quarantined_as_truncated_and_not_marked_done(tmp_path, suffix):
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
    assert r.done and (r.rows_ok, r.rows_duplicate) == (4, 196) and wh.read("quarantine").height == 0
