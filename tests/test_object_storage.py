"""The Parquet warehouse on object storage (s3:// through s3fs), against moto's S3 server.

Ingest, derived tables, reads, catalog queries and asset checks on an S3 warehouse must give
what they give on a local one; crash recovery, idempotence and user errors are checked on S3."""

import warnings
from datetime import datetime
from pathlib import Path

import boto3
import dagster as dg
import polars as pl
import pytest
import s3fs
from moto.server import ThreadedMotoServer

from analysis.checks.bounds import fits_converged
from analysis.checks.bounds import goodput_bounds
from analysis.telemetry import counters
from analysis.telemetry import rollups
from ingest.runner import ingest_paths
from pipelines import checks
from pipelines.assets import ingested_sources
from pipelines.cli import main
from pipelines.resources import Settings
from tests.conftest import FIXTURES
from tests.conftest import table_snapshot
from warehouse import batch
from warehouse import checks as warehouse_checks
from warehouse.schemas import TABLES
from warehouse.store import Batch
from warehouse.store import Warehouse
from warehouse.store import WarehouseError

SOURCES = [
    FIXTURES / p
    for p in (
        "slurm/xdmod__accounting-logs.log",
        "slurm/SARC__slurm_23_11_5.json",
        "kernel/real_xid_kernel_lines_from_issues.log",
        "dcgm/dcgm-exporter_readme_sample_metrics.prom",
        "bmc/ipmitool_sel_list_examples_from_docs.txt",
        "kubernetes/is-healthy__Pod_oomkilled-unhealthy.yaml",
    )
]


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_ENDPOINT_URL", f"http://{host}:{port}")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        s3fs.S3FileSystem.clear_instance_cache()  # a cached client would keep another endpoint
        yield f"http://{host}:{port}"
        s3fs.S3FileSystem.clear_instance_cache()
    server.stop()


def _bucket(endpoint: str, name: str) -> str:
    """A new bucket; the warehouse lives under a prefix in it."""
    bucket = "wh-" + name.lower().replace("_", "-")[:50].strip("-")
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/fleet/parquet"


@pytest.fixture
def uri(s3_endpoint, request) -> str:
    return _bucket(s3_endpoint, request.node.name)


@pytest.fixture(scope="module")
def pair(s3_endpoint, tmp_path_factory) -> tuple[Warehouse, Warehouse]:
    """(S3 warehouse, local warehouse), each with its own local home, both holding SOURCES.
    Tests that change them leave both in the same state."""
    home = tmp_path_factory.mktemp("pair")
    s3, local = (
        Warehouse(home / "s3home", _bucket(s3_endpoint, "pair")),
        Warehouse(home / "localhome"),
    )
    reports = [ingest_paths(wh, SOURCES) for wh in (s3, local)]
    assert [(r.format, r.rows_ok, r.rows_quarantined) for r in reports[0]] == [
        (r.format, r.rows_ok, r.rows_quarantined) for r in reports[1]
    ]
    return s3, local


def _objects(wh: Warehouse) -> dict[str, str]:
    """Every object under the root with its ETag: equal before and after means nothing written."""
    return {k: v["ETag"] for k, v in wh.fs.find(wh.parquet, detail=True).items()}


def test_ingested_tables_match_a_local_warehouse(pair):
    s3, local = pair
    assert s3.parquet.startswith("s3://") and not s3.local and local.local
    assert table_snapshot(s3) == table_snapshot(local)
    manifest = s3.read("ingest_manifest")
    assert sorted(manifest["path"]) == sorted(map(str, SOURCES))
    primary = ("job_attempts", "hw_events", "gpu_samples", "node_events")
    assert manifest["rows_ok"].sum() == sum(s3.read(t).height for t in primary) > 0
    # files are URIs in their hive partitions
    sample_files = s3.files("gpu_samples")
    assert len(sample_files) == 1 and sample_files[0].startswith(f"{s3.parquet}/gpu_samples/date=")
    assert s3.files("hw_events", partition="kernel")[0].startswith(
        f"{s3.parquet}/hw_events/source=kernel/"
    )


def test_reingest_writes_nothing(pair):
    s3, _ = pair
    before = _objects(s3)
    again = ingest_paths(s3, SOURCES)
    assert len(again) == len(SOURCES) and all(r.skipped for r in again)
    assert _objects(s3) == before and not any("/_staging/" in k for k in before)


def test_catalog_queries_match_a_local_warehouse(pair):
    s3, local = pair
    queries = [
        "SELECT count(*) AS n, count(DISTINCT job_id) AS jobs FROM job_attempts",
        "SELECT source, count(*) AS n FROM hw_events GROUP BY 1 ORDER BY 1",
        "SELECT job_id, attempts, final_state FROM job_chains ORDER BY job_id",
        "SELECT format, sum(rows_quarantined) AS q FROM ingest_manifest GROUP BY 1 ORDER BY 1",
    ]
    for wh in pair:
        wh.refresh_catalog()
    for q in queries:
        assert s3.query(q).equals(local.query(q)), q
    jobs = s3.read("job_attempts")
    assert (
        s3.query(queries[0]).row(0) == (jobs.height, jobs["job_id"].n_unique()) and jobs.height > 0
    )
    assert s3.sql("SELECT count(*) FROM quarantine").fetchone() == (s3.read("quarantine").height,)


def test_checks_pass_on_object_storage(pair):
    s3, local = pair
    res = warehouse_checks.conservation(s3, checks.primary_tables())
    assert (res.passed, res.metadata) == (
        True,
        {"files": len(SOURCES), "violations": 0, "first": ""},
    )
    res = warehouse_checks.schema(s3)
    assert (res.passed, res.metadata) == (
        True,
        {"violations": 0, "first": "", "tables": len(TABLES)},
    )
    assert warehouse_checks.duplicate_keys(s3).passed
    assert fits_converged(s3).passed and goodput_bounds(s3).passed
    res = warehouse_checks.quarantine_ratio(s3, 1.0)
    ok, meta = res.passed, res.metadata
    assert (
        ok
        and meta == warehouse_checks.quarantine_ratio(local, 1.0).metadata
        and 0 < meta["quarantined"] < meta["records_read"]
    )
    assert (
        warehouse_checks.raw_counts(s3, "hw_events")
        == warehouse_checks.raw_counts(local, "hw_events")
        != {}
    )


def test_derived_tables_match_a_local_warehouse(pair):
    s3, local = pair
    # the incremental rollup: partition listing, modification times, reads of one partition
    done = {wh.parquet: rollups.refresh_gpu_hourly(wh) for wh in pair}
    assert done[s3.parquet] == done[local.parquet] and len(done[s3.parquet]) == 1
    assert rollups.stale_dates(s3) == []  # the rollup is newer than its samples
    assert s3.read("gpu_hourly").sort(pl.all()).equals(local.read("gpu_hourly").sort(pl.all()))
    assert s3.read("gpu_hourly")["n"].sum() == s3.read("gpu_samples")["value"].is_not_nan().sum()

    # a partition written, then dropped by a rewrite that finds no counter events
    counter = pl.DataFrame(
        {
            "time": [datetime(2026, 1, 1)],
            "host": ["h1"],
            "source": [counters.COUNTER_SOURCE],
            "event_id": ["c1"],
        }
    )
    where = f"source = '{counters.COUNTER_SOURCE}'"
    for wh in pair:
        wh.replace_table("hw_events", counter, partitions="touched")
        assert wh.read("hw_events", where=where).height == 1
        assert counters.refresh_counter_events(wh) == 0
        assert wh.read("hw_events", where=where).height == 0

    # replaced whole, then only the touched partitions
    hourly = s3.read("gpu_hourly")
    later = hourly.with_columns(date=pl.col("date") + pl.duration(days=1), n=pl.lit(7, pl.Int64))
    for wh in pair:
        wh.replace_table("gpu_hourly", pl.concat([hourly, later]))
        wh.replace_table(
            "gpu_hourly", later.with_columns(n=pl.lit(9, pl.Int64)), partitions="touched"
        )
    got = s3.read("gpu_hourly").group_by("date").agg(pl.col("n").unique().sort()).sort("date")
    assert got["n"].to_list() == [sorted(hourly["n"].unique()), [9]]
    assert s3.read("gpu_hourly").sort(pl.all()).equals(local.read("gpu_hourly").sort(pl.all()))
    for wh in pair:
        wh.replace_table("gpu_hourly", hourly)
    assert s3.read("gpu_hourly").sort(pl.all()).equals(hourly.sort(pl.all()))
    assert len(s3.files("gpu_hourly")) == 1


def test_schema_check_catches_a_tampered_file_on_object_storage(tmp_path, uri):
    wh = Warehouse(tmp_path / "home", uri)
    ingest_paths(wh, SOURCES[:1])
    assert warehouse_checks.schema(wh).passed
    with wh.fs.open(f"{wh.parquet}/job_attempts/part-bogus.parquet", "wb") as fh:
        pl.DataFrame({"job_id": ["1"], "surprise": [1]}).write_parquet(fh)
    res = warehouse_checks.schema(wh)
    assert (
        not res.passed
        and res.metadata["first"] == "job_attempts/part-bogus.parquet: undeclared ['surprise']"
    )


def test_crash_recovery_on_object_storage(tmp_path, uri, monkeypatch):
    wh = Warehouse(tmp_path / "home", uri)
    rows = pl.DataFrame({"error": ["x"], "line": [1]})
    with pytest.raises(RuntimeError), wh.batch("crash") as b:
        b.add({"quarantine": rows})
        raise RuntimeError("power cut")
    assert wh.read("quarantine").height == 0 and wh.fs.find(f"{wh.parquet}/_staging") == []
    # crashed after its COMMIT marker, before any move: completed on reopen
    late = Batch(wh, "late")
    late.add({"quarantine": rows})
    wh.fs.pipe_file(f"{late.stage}/COMMIT", b"ok")
    late._lock.close()  # its writer dies: the OS releases the lock
    # crashed halfway through the moves (one table copied, not yet deleted): completed once
    mid = Batch(wh, "mid")
    mid.add(
        {
            "quarantine": rows.with_columns(line=pl.lit(2)),
            "node_events": pl.DataFrame({"host": ["n1"]}),
        }
    )
    wh.fs.pipe_file(f"{mid.stage}/COMMIT", b"ok")
    staged = wh.fs.find(f"{mid.stage}/quarantine")
    wh.fs.copy(staged[0], staged[0].replace("/_staging/mid", ""))
    mid._lock.close()
    # never committed: kept while it may be another machine's live batch, discarded once idle
    partial = Batch(wh, "partial")
    partial.add({"quarantine": rows.with_columns(line=pl.lit(3))})
    partial._lock.close()
    assert (
        wh.read("quarantine").height == 0
    )  # the half-moved file is hidden while its COMMIT is staged

    reopened = Warehouse(tmp_path / "home", uri)
    assert sorted(reopened.read("quarantine")["line"]) == [1, 2]
    assert reopened.read("node_events")["host"].to_list() == ["n1"]
    assert [f.rsplit("/", 3)[1] for f in reopened.fs.find(f"{reopened.parquet}/_staging")] == [
        "partial"
    ]
    monkeypatch.setattr(batch, "STALE_STAGE_S", 0)
    assert Warehouse(tmp_path / "home", uri).fs.find(f"{reopened.parquet}/_staging") == []


def test_cli_and_dagster_take_the_same_uri(tmp_path, uri, monkeypatch, capsys):
    home = tmp_path / "home"
    assert main(["--home", str(home), "--warehouse-uri", uri, "ingest", str(SOURCES[0])]) == 0
    assert "ingested 1 file(s), 4 rows" in capsys.readouterr().out
    assert not (home / "parquet").exists()  # the Parquet went to the bucket; the catalog stays home
    assert (home / "warehouse.duckdb").exists()
    monkeypatch.setenv("GOODPUT_WAREHOUSE_URI", uri)
    assert (
        main(["--home", str(home), "sql", "select count(*) n from job_attempts", "--format", "csv"])
        == 0
    )
    assert capsys.readouterr().out.splitlines() == ["n", "4"]
    # the read-only surface holds on object storage too: no file outside the bucket prefix
    assert main(["--home", str(home), "sql", "select * from read_text('/etc/passwd')"]) == 2
    assert "Permission Error" in capsys.readouterr().err

    config = Settings(home=str(home), sources=[str(p) for p in SOURCES[:2]])
    assert config.warehouse().parquet == uri
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = dg.materialize([ingested_sources], resources={"settings": config})
    assert result.success
    assert (
        result.asset_materializations_for_node("ingested_sources")[0].metadata["files_new"].value
        == 1
    )
    manifest = Warehouse(home, uri).read("ingest_manifest")
    assert sorted(manifest["path"]) == sorted(map(str, SOURCES[:2]))


def test_user_errors_are_one_line(tmp_path, uri, monkeypatch, capsys):
    home = str(tmp_path / "home")
    for bad, message in [
        ("gs://bucket/wh", "use a local directory or s3://bucket/prefix"),
        ("s3:///wh", "use a local directory or s3://bucket/prefix"),
        ("s3://no-such-bucket/wh", "bucket 'no-such-bucket' does not exist"),
    ]:
        with pytest.raises(WarehouseError, match=message):
            Warehouse(home, bad)
        assert main(["--home", home, "--warehouse-uri", bad, "fit"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        assert main(["--home", home, "--warehouse-uri", uri, "fit"]) == 2
        err = capsys.readouterr().err
        assert (
            err.count("\n") == 1 and "cannot reach bucket" in err and "credentials" in err.lower()
        )
    finally:
        s3fs.S3FileSystem.clear_instance_cache()


def test_local_uri_forms(tmp_path, monkeypatch):
    assert Warehouse(tmp_path / "home").parquet == str(tmp_path / "home" / "parquet")
    assert Warehouse(tmp_path / "home", f"file://{tmp_path}/elsewhere/").parquet == str(
        tmp_path / "elsewhere"
    )
    monkeypatch.setenv("GOODPUT_WAREHOUSE_URI", str(tmp_path / "env"))
    wh = Warehouse(tmp_path / "home")
    assert wh.parquet == str(tmp_path / "env") and Path(wh.parquet).is_dir()
    assert all(not wh.files(t) for t in TABLES)
