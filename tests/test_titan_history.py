"""Titan's GPU installation export (OLCF gc_full.csv): the insert/remove layout of
component-history, its event rows, service-node exclusion, location covariates and the
existing analyses on a real extract (tests/fixtures/titan, see PROVENANCE.md)."""

import csv
from collections import Counter

import polars as pl

from analysis.lifetimes import build_component_lifetimes
from analysis.survival import hazard_ratios
from ingest.base import ParseContext
from ingest.formats.component_history import layout
from ingest.formats.component_history import parse
from ingest.registry import detect
from pipelines.cli import main
from pipelines.cli.intake import host_list
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES

TITAN = FIXTURES / "titan" / "gc_sample.csv"
HEADER = "SN,location,insert,remove,duration,out,event\n"


def _parse(data: bytes, **ctx):
    res = parse(data, ParseContext(path="gc_full.csv", cluster="titan", **ctx))
    ch = res.tables.get("component_history", pl.DataFrame())
    assert res.records == ch.height + res.quarantine.height + res.duplicates
    return res, ch


def test_told_apart_by_content():
    head = TITAN.read_bytes()[:65536]
    assert layout(head) == "insert-remove"
    assert detect(head, "anything.csv").name == "component-history"


def test_fixture_every_row_accounted_for():
    rows = list(csv.DictReader(TITAN.open()))
    res, ch = _parse(TITAN.read_bytes())
    installs = [r for r in rows if r["insert"]]
    event_only = [r for r in rows if not r["insert"]]
    assert res.quarantine.height == 0
    assert ch.height == len(installs)
    # every DBE / OTB row is a failure of the system, installation row or not
    fails = res.tables["failures"]
    assert fails.height == sum(1 for r in rows if r["event"])
    assert fails.height - sum(1 for r in installs if r["event"]) == len(event_only)
    assert Counter(fails["sub_cause"]) == Counter(r["event"] for r in rows if r["event"])
    assert set(fails["component_class"]) == {"gpu_memory", "gpu"}
    assert not fails["repair_known"].any() and fails["end_time"].null_count() == fails.height
    assert (
        set(ch["component_class"]) == {"gpu"}
        and (ch["host"] == ch["slot"].str.split("/").list.first()).all()
    )


def test_installation_semantics():
    text = HEADER + (
        # ended by its event
        "A,c1-0c0s1n0,2014-01-01 00:00:00,2016-06-01 00:00:00,1,TRUE,DBE\n"
        "A,c1-0c0s1n0,,2015-03-01 00:00:00,,,OTB\n"  # an event of A's installation above
        "B,c1-0c0s1n1,2014-01-01 00:00:00,2016-06-01 00:00:00,1,TRUE,\n"  # proactively replaced
        "B,c1-0c0s1n1,,2015-01-01 00:00:00,,,DBE\n"  # ... after an event: failed
        # in service at the end
        "C,c1-0c0s1n2,2014-01-01 00:00:00,2019-08-01 20:07:33,1,FALSE,\n"
        # survived a DBE: still in service, not failed
        "C,c1-0c0s1n2,,2016-01-01 00:00:00,,,DBE\n"
        # moved elsewhere: censored
        "D,c1-0c0s1n3,2014-01-01 00:00:00,2017-01-01 00:00:00,1,FALSE,\n"
        # an event at a location D never was: still a failure
        "D,c2-0c0s1n3,,2016-01-01 00:00:00,,,OTB\n"
        "D,c2-0c0s1n3,,,,,\n"  # nothing: quarantined
    )
    res, ch = _parse(text.encode())
    got = {
        r["serial"]: (r["failed"], r["removal_reason"], r["removed_at"] is None)
        for r in ch.iter_rows(named=True)
    }
    assert got == {
        "A": (True, "DBE", False),
        "B": (True, "DBE", False),
        "C": (False, "DBE", True),
        "D": (False, None, False),
    }
    assert res.quarantine["error"].to_list() == [
        "neither an installation (no insert time) nor an event (no event)"
    ]
    assert res.tables["failures"]["sub_cause"].to_list() == ["DBE", "OTB", "DBE", "DBE", "OTB"]


def test_service_nodes_excluded_with_a_reason(tmp_path):
    text = HEADER + (
        "A,c0-0c0s0n0,2014-01-01 00:00:00,2016-06-01 00:00:00,1,TRUE,DBE\n"
        "A,c0-0c0s0n0,,2015-03-01 00:00:00,,,OTB\n"
        "B,c1-0c0s1n1,2014-01-01 00:00:00,2016-06-01 00:00:00,1,TRUE,OTB\n"
    )
    hosts = host_list(str(FIXTURES / "titan" / "service_sample.txt"))
    assert "c0-0c0s0n0" in hosts and "service" in hosts
    res, ch = _parse(text.encode(), options={"exclude_hosts": hosts})
    assert ch["serial"].to_list() == ["B"]
    assert sorted(res.quarantine["error"]) == ["host c0-0c0s0n0 excluded (--exclude-hosts)"] * 2
    assert res.tables["failures"]["host"].to_list() == ["c1-0c0s1n1"]


def test_cli_exclude_hosts(tmp_path, capsys):
    home = tmp_path / "home"
    service = tmp_path / "service.txt"
    first = next(iter(csv.DictReader(TITAN.open())))["location"]
    service.write_text(f"  1  0x1  {first}  service  up  batch\n")
    ingest = ["ingest", str(TITAN), "--home", str(home)]
    assert main([*ingest, "--cluster", "titan", "--exclude-hosts", str(service)]) == 0
    assert "quarantined" in capsys.readouterr().err
    assert main([*ingest, "--exclude-hosts", str(tmp_path / "missing")]) == 2
    assert "--exclude-hosts" in capsys.readouterr().err


def test_location_covariates_batch_and_cox():
    _, ch = _parse(TITAN.read_bytes())
    lt = build_component_lifetimes(ch, TABLES["gpu_hourly"].empty(), TABLES["hw_events"].empty())
    row = (
        lt.filter(pl.col("host") == "c11-2c1s4n1").row(0, named=True)
        if (lt["host"] == "c11-2c1s4n1").any()
        else None
    )
    sample = lt.drop_nulls("cage").row(0, named=True)
    host = sample["host"]
    assert host == (
        f"c{sample['cabinet_column']}-{sample['cabinet_row']}c{sample['cage']}"
        f"s{sample['blade']}n{sample['node_position']}"
    )
    assert row is None or (
        row["cabinet_column"],
        row["cabinet_row"],
        row["cage"],
        row["blade"],
        row["node_position"],
    ) == (11, 2, "1", 4, "1")
    assert lt["cage"].null_count() == 0 and set(lt["cage"]) <= {"0", "1", "2"}
    assert set(lt["batch"]) >= {"2013", "2017"}  # the original GPUs and the replacements
    assert lt["event"].sum() == ch["failed"].sum()
    notes: list[str] = []
    hr = hazard_ratios(lt, notes)
    covs = set(hr["covariate"])
    # three cages and four node positions: each level against the most frequent one
    assert sum(c.startswith("cage=") for c in covs) == 2, (covs, notes)
    assert sum(c.startswith("node_position=") for c in covs) == 3, (covs, notes)
    assert (hr["hr"] > 0).all()


def test_last_time_compared_as_time_not_text():
    # month-first times: '12/31/2018' sorts after '08/01/2019' as text, not as time
    text = HEADER + (
        "A,c1-0c0s1n0,01/01/2014 00:00,08/01/2019 20:00,1,FALSE,\n"  # in service at the end
        "B,c1-0c0s1n1,01/01/2014 00:00,12/31/2018 00:00,1,FALSE,\n"  # moved before the end
    )
    _, ch = _parse(text.encode())
    assert dict(zip(ch["serial"], ch["removed_at"].is_null(), strict=True)) == {
        "A": True,
        "B": False,
    }
