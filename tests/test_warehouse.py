"""Warehouse core: schemas, atomic batches, crash recovery, idempotent ingest, catalog views."""

import gzip
import os
from datetime import UTC
from datetime import date
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
import zstandard

from ingest.files import UserError
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import table_snapshot
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse
from warehouse.store import resolve_home

SACCT = (
    "JobID|State|Start|End|NodeList|AllocTRES\n"
    "1|COMPLETED|2026-01-01T00:00:00|2026-01-01T01:00:00|n1|gres/gpu=8\n"
    "2|BROKEN\n"
)


def test_every_design_table_is_declared_with_its_key_columns():
    required = {
        "job_attempts": {
            "cluster",
            "scheduler",
            "job_id",
            "attempt",
            "state",
            "raw_state",
            "nodes",
            "n_gpus",
        },
        "hw_events": {
            "time",
            "host",
            "component_class",
            "component_id",
            "event_type",
            "code",
            "severity",
        },
        "failure_rates": {
            "model",
            "selected",
            "params",
            "aic",
            "rate_ci_low",
            "rate_ci_high",
            "mtbf_hours",
        },
        "goodput_projections": {
            "mtti_hours",
            "optimal_interval_hours",
            "goodput",
            "goodput_ci_low",
        },
        "ingest_manifest": {"path", "sha256", "bytes", "format", "rows_ok", "rows_quarantined"},
        "quarantine": {"source_file", "line", "raw", "error", "ingested_at"},
    }
    for name, cols in required.items():
        assert cols <= set(TABLES[name].columns), name
    design = [
        "node_events",
        "gpu_samples",
        "gpu_hourly",
        "bmc_sensors",
        "component_history",
        "interruptions",
        "component_lifetimes",
        "survival_curves",
        "hazard_ratios",
        "goodput_jobs",
    ]
    assert set(design) <= set(TABLES)


def test_conform_rejects_invented_columns():
    with pytest.raises(ValueError, match="not in the schema"):
        conform("quarantine", pl.DataFrame({"bogus": [1]}))


def test_home_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("GOODPUT_HOME", str(tmp_path / "env"))
    assert resolve_home(tmp_path / "flag") == tmp_path / "flag"
    assert resolve_home(None) == tmp_path / "env"
    monkeypatch.delenv("GOODPUT_HOME")
    monkeypatch.chdir(tmp_path)
    assert resolve_home(None) == tmp_path / "goodput_home"


def test_ingest_conserves_records_and_reingest_changes_nothing(wh, tmp_path):
    src = tmp_path / "dump.txt"
    src.write_text(SACCT)
    first = ingest_paths(wh, [src])
    assert (first[0].records, first[0].rows_ok, first[0].rows_quarantined) == (2, 1, 1)
    before = table_snapshot(wh)
    again = ingest_paths(wh, [src])
    assert again[0].skipped
    # the same bytes under another name are the same file
    (tmp_path / "copy.txt").write_text(SACCT)
    assert ingest_paths(wh, [tmp_path / "copy.txt"])[0].skipped
    assert table_snapshot(wh) == before
    q = wh.read("quarantine").row(0, named=True)
    assert q["line"] == 3 and "expected 6 fields" in q["error"] and q["raw"] == "2|BROKEN"


def test_conservation_on_every_slurm_text_fixture(wh):
    reports = ingest_paths(wh, [FIXTURES / "slurm"], fmt="sacct")
    manifest = wh.read("ingest_manifest")
    for r in reports:
        rows = wh.read("job_attempts", where=f"source_file = '{r.path}'").height
        quarantined = wh.read("quarantine", where=f"source_file = '{r.path}'").height
        assert r.records == rows + quarantined, r.path
        m = manifest.filter(pl.col("sha256") == r.sha256).row(0, named=True)
        assert (m["rows_ok"], m["rows_quarantined"]) == (rows, quarantined)


@pytest.mark.parametrize(
    "compress", [gzip.compress, lambda b: zstandard.ZstdCompressor().compress(b)]
)
def test_compressed_inputs_are_read_by_magic_bytes(wh, tmp_path, compress):
    src = tmp_path / "dump.bin"
    src.write_bytes(compress(SACCT.encode()))
    r = ingest_paths(wh, [src])[0]
    assert (r.format, r.rows_ok, r.rows_quarantined) == ("sacct", 1, 1)


def test_bad_inputs_become_quarantine_rows_not_errors(wh, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "garbage.bin").write_bytes(os.urandom(2048))
    (tmp_path / "truncated.gz").write_bytes(gzip.compress(SACCT.encode())[:30])
    reports = {os.path.basename(r.path): r for r in ingest_paths(wh, [tmp_path])}
    assert all(r.rows_quarantined == 1 and r.rows_ok == 0 for r in reports.values())
    errors = dict(wh.read("quarantine").select("source_file", "error").iter_rows())
    by_name = {os.path.basename(k): v for k, v in errors.items()}
    assert by_name["empty.txt"] == "empty file"
    assert "not recognised" in by_name["garbage.bin"]
    assert "decompress" in by_name["truncated.gz"] or "not recognised" in by_name["truncated.gz"]


def test_user_errors(wh, tmp_path):
    with pytest.raises(UserError, match="no such file"):
        ingest_paths(wh, [tmp_path / "missing"])
    with pytest.raises(UserError, match="unknown format"):
        ingest_paths(wh, [tmp_path], fmt="nope")


def test_crash_mid_batch_leaves_nothing_visible_and_committed_batches_roll_forward(wh):
    rows = pl.DataFrame({"error": ["x"], "line": [1]})
    with pytest.raises(RuntimeError), wh.batch("crash") as b:
        b.add({"quarantine": rows})
        raise RuntimeError("power cut")
    assert wh.read("quarantine").height == 0
    # a batch that crashed after its COMMIT marker but before the renames is completed on reopen
    from warehouse.store import Batch

    staged = Batch(wh, "late")
    staged.add({"quarantine": rows})
    (Path(staged.stage) / "COMMIT").write_bytes(b"ok")
    staged._lock.close()  # its writer dies: the OS releases the lock
    # an uncommitted one is discarded
    partial = Batch(wh, "partial")
    partial.add({"quarantine": rows})
    partial._lock.close()
    reopened = Warehouse(wh.home)
    assert reopened.read("quarantine").height == 1
    assert not (Path(wh.parquet) / "_staging" / "partial").exists()


def test_opening_the_warehouse_leaves_a_live_batch_alone(wh):
    """The sensor and parallel runs open the warehouse while an ingest is staging: recovery
    must not take a live writer's stage for a crashed one."""
    rows = pl.DataFrame({"error": ["x", "y"], "line": [1, 2]})
    with wh.batch("live") as b:
        b.add({"quarantine": rows.head(1)})
        Warehouse(wh.home)  # another process opens it meanwhile
        assert (Path(wh.parquet) / "_staging" / "live").exists()
        b.add({"quarantine": rows.tail(1)})
    assert wh.read("quarantine")["line"].sort().to_list() == [1, 2]


def test_partitioned_tables_and_catalog_views(wh):
    samples = pl.DataFrame(
        {
            "time": [datetime(2026, 1, 1, 1), datetime(2026, 1, 2, 1)],
            "host": ["a", "b"],
            "metric": ["t", "t"],
            "value": [1.0, None],
        }
    ).with_columns(date=pl.col("time").dt.date())
    with wh.batch("p") as b:
        b.add({"gpu_samples": samples})
    assert sorted(p.name for p in (Path(wh.parquet) / "gpu_samples").iterdir()) == [
        "date=2026-01-01",
        "date=2026-01-02",
    ]
    wh.refresh_catalog()
    got = wh.sql("select date, value from gpu_samples order by date").fetchall()
    assert [str(d) for d, _ in got] == ["2026-01-01", "2026-01-02"] and got[1][1] is None
    # empty tables still have typed views
    assert wh.sql("select count(*) from failure_rates").fetchone() == (0,)
    # derived tables replace whole, or only the touched partitions
    hourly = samples.rename({"time": "hour", "value": "mean"}).with_columns(n=pl.lit(1))
    wh.replace_table("gpu_hourly", hourly)
    wh.replace_table("gpu_hourly", hourly.head(1).with_columns(n=pl.lit(5)), partitions="touched")
    assert wh.read("gpu_hourly").sort("hour")["n"].to_list() == [5, 1]
    wh.replace_table("gpu_hourly", hourly.tail(1))
    assert wh.read("gpu_hourly")["host"].to_list() == ["b"]


def test_a_home_pointed_at_another_root_reads_that_root(tmp_path):
    """The catalog lives in the home; its views follow the Parquet root in use, not the one it
    was first built for."""
    home, src = tmp_path / "home", tmp_path / "s.txt"
    src.write_text(SACCT)
    a = Warehouse(home, tmp_path / "root_a")
    ingest_paths(a, [src])
    a.refresh_catalog()
    count = "select count(*) from job_attempts"
    assert a.sql(count).fetchone()[0] == 1
    assert Warehouse(home, tmp_path / "root_b").sql(count).fetchone()[0] == 0
    assert Warehouse(home, tmp_path / "root_a").query(count).item() == 1


def test_files_written_before_a_column_was_declared_read_it_as_null(wh):
    """The schema grows (gpu_samples gained pci_bus); Parquet written before still reads."""
    old = conform(
        "gpu_samples",
        pl.DataFrame({"time": [datetime(2026, 1, 1)], "metric": ["m"], "value": [1.0]}),
    )
    old = old.drop("pci_bus").with_columns(date=pl.col("time").dt.date())
    folder = Path(wh.parquet) / "gpu_samples" / "date=2026-01-01"
    folder.mkdir(parents=True)
    old.drop("date").write_parquet(folder / "part-old.parquet")
    assert wh.read("gpu_samples")["pci_bus"].to_list() == [None]  # no file has the column yet
    from analysis.telemetry.rollups import refresh_gpu_hourly

    assert refresh_gpu_hourly(wh) == [date(2026, 1, 1)]
    assert wh.read("gpu_hourly").select("pci_bus", "n").rows() == [(None, 1)]
    new = conform(
        "gpu_samples", old.with_columns(pci_bus=pl.lit("0000:07:00.0"), value=pl.lit(2.0))
    )
    with wh.batch("new") as b:
        b.add({"gpu_samples": new})
    got = wh.read("gpu_samples").sort("value")
    assert (
        got["pci_bus"].to_list() == [None, "0000:07:00.0"]
        and got["date"].to_list() == [date(2026, 1, 1)] * 2
    )
    wh.refresh_catalog()
    assert wh.sql("select count(pci_bus), count(*) from gpu_samples").fetchall() == [(1, 2)]


def test_a_warehouse_written_with_naive_times_is_upgraded_once_and_reads_the_same(tmp_path):
    """Older versions stored times not UTC-adjusted (naive, holding UTC). Reads of a root that
    mixes such files with new ones are right, and the next open rewrites them UTC-adjusted so
    that other engines (a DuckDB client in another zone, pyarrow) read the same instants."""
    import duckdb
    import pyarrow.parquet as pq

    from warehouse.store import TIMES_UTC_MARKER

    home = tmp_path / "home"
    wh = Warehouse(home)
    event = {"host": ["n1"], "code": ["79"], "component_class": ["gpu"], "source": ["kernel"]}
    old = conform("hw_events", pl.DataFrame({**event, "time": [datetime(2026, 1, 1, 12)]}))
    folder = Path(wh.parquet) / "hw_events" / "source=kernel"
    folder.mkdir(parents=True)
    old.drop("source").write_parquet(folder / "part-old.parquet")  # naive: the old way
    assert pq.read_schema(folder / "part-old.parquet").field("time").type.tz is None
    with wh.batch("new") as b:
        b.add(
            {
                "hw_events": conform(
                    "hw_events", pl.DataFrame({**event, "time": [datetime(2026, 1, 1, 13)]})
                )
            }
        )
        assert b.add({"hw_events": old}) == {"hw_events": {None: 1}}  # matched against the old file
    times = [datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 13)]
    assert wh.read("hw_events").sort("time")["time"].to_list() == times
    assert wh.query("SELECT time FROM hw_events ORDER BY 1")["time"].to_list() == times

    (Path(wh.parquet) / TIMES_UTC_MARKER).unlink()  # as an older version left the root
    wh = Warehouse(home)
    assert pq.read_schema(folder / "part-old.parquet").field("time").type.tz == "UTC"
    assert wh.read("hw_events").sort("time")["time"].to_list() == times
    wh.refresh_catalog()
    with duckdb.connect(str(wh.db_path), read_only=True) as con:
        con.execute("SET TimeZone = 'Asia/Kolkata'")
        con.execute(f"SET file_search_path = '{home}'")
        got = con.sql("SELECT epoch_us(time) FROM hw_events ORDER BY 1").fetchall()
    assert [t for (t,) in got] == [int(t.replace(tzinfo=UTC).timestamp() * 1e6) for t in times]
