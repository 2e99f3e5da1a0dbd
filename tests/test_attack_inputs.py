"""Hostile and half-written inputs (issue 32): nothing lost, doubled or invented, memory bounded,
and every rejected record or skipped byte range has a reason. The large inputs of the same
attacks are in benchmarks/bench_attack_inputs.py."""

import polars as pl

from ingest.base import ParseContext
from ingest.sacct import parse as parse_sacct
from ingest.slurmctld import parse as parse_slurmctld

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
