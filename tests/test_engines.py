"""Parquet is the truth for every engine: pyarrow and Polars read each table's files to the rows
and values the DuckDB catalog shows, with times as instants in UTC; the catalog survives
moving the home; the `duckdb` command the install provides opens it (README, warehouse)."""

import contextlib
import io
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from pipelines.cli import main
from tests.conftest import SAMPLE_FLEET
from warehouse.schemas import STORED_TS
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

DUCKDB_CLI = Path(sys.executable).parent / "duckdb"
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def _with_declared_types(name: str, df: pl.DataFrame) -> pl.DataFrame:
    """Columns in schema order; the hive partition column (a path segment, read as text)
    back to its declared type."""
    spec = TABLES[name]
    if spec.partition in df.columns:
        part = pl.col(spec.partition).cast(pl.Utf8)
        part = pl.when(part != NULL_PARTITION).then(part)
        dtype = spec.columns[spec.partition]
        df = df.with_columns(part.str.to_date() if dtype == pl.Date else part.cast(dtype))
    return df.select(list(spec.columns))


def read_pyarrow(wh: Warehouse, name: str) -> pl.DataFrame:
    """pyarrow.dataset over the table's folder, hive-partitioned, with the files' unified
    schema (a file older than a column lacks it)."""
    part = TABLES[name].partition
    schema = pa.unify_schemas([ds.dataset(f, format="parquet").schema for f in wh.files(name)])
    partitioning = None
    if part:
        partitioning = ds.partitioning(pa.schema([(part, pa.string())]), flavor="hive")
        schema = schema.append(pa.field(part, pa.string()))
    table = ds.dataset(
        f"{wh.parquet}/{name}", format="parquet", partitioning=partitioning, schema=schema
    ).to_table()
    return _with_declared_types(name, pl.from_arrow(table))


def read_polars(wh: Warehouse, name: str) -> pl.DataFrame:
    """Polars scan_parquet over the table's files, hive-partitioned."""
    lazy = pl.scan_parquet(
        f"{wh.parquet}/{name}/**/*.parquet",
        hive_partitioning=True,
        missing_columns="insert",
        hive_schema={TABLES[name].partition: pl.Utf8} if TABLES[name].partition else None,
    )
    return _with_declared_types(name, lazy.collect())


def read_catalog(con: duckdb.DuckDBPyConnection, name: str) -> pl.DataFrame:
    return con.sql(f'SELECT * FROM "{name}"').pl()


def assert_same_table(name: str, *frames: pl.DataFrame) -> None:
    """Same rows (order-free), same values, every time column an instant in UTC."""
    spec = TABLES[name]
    times = [c for c, t in spec.columns.items() if isinstance(t, pl.Datetime)]
    plain = [c for c, t in spec.columns.items() if not isinstance(t, pl.List)]
    first = None
    for df in frames:
        assert df.columns == list(spec.columns), name
        for c in times:
            assert df.schema[c] == STORED_TS, (name, c, df.schema[c])
        df = df.sort(plain, nulls_last=True)
        if first is None:
            first = df
        else:
            assert df.height == first.height, name
            assert df.equals(first), name


def catalog(home: Path) -> duckdb.DuckDBPyConnection:
    """warehouse.duckdb opened the way a plain DuckDB client would, in a session whose zone is
    not UTC (its TIMESTAMPTZ values are the same instants), with the home as search path."""
    con = duckdb.connect(str(home / "warehouse.duckdb"), read_only=True)
    con.execute("SET TimeZone = 'America/Chicago'")
    con.execute(f"SET file_search_path = '{home}'")
    return con


def compare_every_table(wh: Warehouse, con: duckdb.DuckDBPyConnection) -> int:
    """Returns how many tables have files."""
    n = 0
    for name, spec in TABLES.items():
        if not wh.files(name):
            assert read_catalog(con, name).height == 0, name
            continue
        n += 1
        view = read_catalog(con, name).with_columns(
            pl.col(c).dt.convert_time_zone("UTC")
            for c, t in spec.columns.items()
            if isinstance(t, pl.Datetime)
        )
        # Dedupe tables too: their folder holds the merged rows, the source rows live apart
        assert_same_table(name, read_pyarrow(wh, name), read_polars(wh, name), view)
    return n


def test_every_engine_reads_the_sample_fleet_warehouse_alike(demo):
    wh, _ = demo
    with catalog(wh.home) as con:
        assert compare_every_table(wh, con) >= 20
        # sacct text and --json both record each Slurm job: the files hold each attempt once
        assert (
            read_pyarrow(wh, "job_attempts").height
            == read_polars(wh, "job_attempts").height
            == 1607
        )
        assert (
            pl.read_parquet(wh.record_files("job_attempts")).height == 3206
        )  # every source's row, apart
        # times are TIMESTAMPTZ in the catalog, shown in the client's zone
        kinds = dict(
            con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'job_attempts'"
            ).fetchall()
        )
        assert kinds["start_time"] == "TIMESTAMP WITH TIME ZONE"
    first = wh.query("SELECT min(start_time) AS t FROM job_attempts")["t"][0]
    assert first.tzinfo is None  # the analyses' own reads stay naive UTC


def run(home: Path, *argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["--home", str(home), *argv]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """A warehouse of a partial source set (two nodes' DCGM scrapes, kernel logs and SEL, no
    scheduler, no inventory), built, then its home moved."""
    base = tmp_path_factory.mktemp("partial")
    hosts = ("gpu-node-001", "gpu-node-002")
    run(
        base / "home",
        "ingest",
        *(str(SAMPLE_FLEET / "dcgm" / h) for h in hosts),
        *(str(SAMPLE_FLEET / "kernel" / f"{h}.log") for h in hosts),
        str(SAMPLE_FLEET / "ipmi" / f"{hosts[0]}.sel.txt"),
    )
    run(base / "home", "build")
    shutil.move(base / "home", base / "moved")
    return base / "moved"


def test_the_catalog_survives_moving_the_home_and_engines_agree_on_a_partial_warehouse(
    moved, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)  # nowhere near the home
    wh = Warehouse(moved)
    with catalog(moved) as con:
        assert compare_every_table(wh, con) >= 5
        for (view,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal"
        ).fetchall():
            con.sql(f'SELECT count(*) FROM "{view}"').fetchall()  # every view binds after the move
        assert (
            con.sql("SELECT count(*) FROM gpu_samples").fetchall()[0][0]
            == wh.read("gpu_samples").height
            > 0
        )
    # goodput sql shows what the catalog shows: instants in UTC
    shown = wh.run_readonly("SELECT min(time) AS t FROM hw_events")
    assert (
        shown.schema["t"] == STORED_TS
        and shown["t"][0].replace(tzinfo=None) == wh.read("hw_events")["time"].min()
    )
    # from the home itself, a plain connection needs no setting at all
    monkeypatch.chdir(moved)
    with duckdb.connect("warehouse.duckdb", read_only=True) as con:
        assert con.sql("SELECT uri FROM _parquet_root").fetchall() == [("parquet",)]
        assert (
            con.sql("SELECT count(*) FROM hw_events").fetchall()[0][0]
            == wh.read("hw_events").height
            > 0
        )


def test_the_installed_duckdb_command_opens_the_catalog_as_the_readme_says(moved, tmp_path):
    """README: `cd goodput_home && duckdb warehouse.duckdb`, or from elsewhere with
    `-cmd "SET file_search_path='goodput_home'"`. The CLI (PyPI duckdb-cli) is an older DuckDB
    than the Python one: the catalog is written in a storage version it reads."""
    wh = Warehouse(moved)
    want = str(wh.read("hw_events").height)
    query = "SELECT count(*) FROM hw_events"

    def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run(
            [DUCKDB_CLI, "-csv", "-noheader", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    here = cli("warehouse.duckdb", "-c", query, cwd=moved)
    assert here.returncode == 0 and here.stdout.strip() == want, here.stderr
    away = cli(
        "-cmd",
        f"SET file_search_path='{moved.name}'",
        f"{moved.name}/warehouse.duckdb",
        "-c",
        query,
        cwd=moved.parent,
    )
    assert away.returncode == 0 and away.stdout.strip() == want, away.stderr
    utc_min = "SET TimeZone='UTC'; SELECT min(time) FROM hw_events"
    times = cli("warehouse.duckdb", "-c", utc_min, cwd=moved)
    first = wh.read("hw_events")["time"].min()  # naive UTC
    shown = times.stdout.strip()
    assert shown.startswith(f"{first:%Y-%m-%d %H:%M:%S}") and shown.endswith("+00"), (
        shown,
        times.stderr,
    )
