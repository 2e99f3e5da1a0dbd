"""Tables with a Dedupe (job_attempts, metric_metadata) store their merged, canonical rows in
their own folder and every source's row apart (``_sources/<table>/``): the canonical files
follow each ingest and forget in the same commit, a crash leaves the old or the new table, and
a warehouse of the older layout (source rows in the table's folder) is upgraded once."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from ingest.runner import ingest_paths
from tests.conftest import REPO
from tests.conftest import SAMPLE_FLEET
from warehouse.store import FAULT_ENV
from warehouse.store import SOURCES_MARKER
from warehouse.store import Warehouse

TXT = SAMPLE_FLEET / "slurm" / "sacct.txt"
JSON = SAMPLE_FLEET / "slurm" / "sacct.json"
SLURM_ATTEMPTS = 1589  # the sample fleet's Slurm attempts; each file records every one
SCRAPES = sorted((SAMPLE_FLEET / "dcgm" / "gpu-node-001").iterdir())[:2]


def ordered(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort([c for c, t in df.schema.items() if not isinstance(t, pl.List)], nulls_last=True)


def canonical(wh: Warehouse, name: str = "job_attempts") -> pl.DataFrame:
    """The table's files as any engine reads them, in a stable order."""
    files = wh.files(name)
    return ordered(pl.read_parquet(files)) if files else pl.DataFrame()


def ingest_each(home: Path, files) -> Warehouse:
    """Each file in a batch of its own, in this order."""
    wh = Warehouse(home)
    for f in files:
        ingest_paths(wh, [f])
    return wh


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict[str, pl.DataFrame]:
    """The canonical job_attempts of each sacct file ingested alone."""
    base = tmp_path_factory.mktemp("alone")
    return {f.suffix: canonical(ingest_each(base / f.suffix[1:], [f])) for f in (TXT, JSON)}


def test_text_then_json_and_json_then_text_give_the_same_canonical_files(tmp_path, alone):
    one = ingest_each(tmp_path / "one", [TXT, JSON, *SCRAPES])
    other = ingest_each(tmp_path / "other", [JSON, TXT, *SCRAPES[::-1]])
    first, second = canonical(one), canonical(other)
    assert first.height == SLURM_ATTEMPTS and first.equals(second)
    assert first.select("job_id", "attempt").is_unique().all()
    # the files are exactly what the view shows, and the source rows are all kept apart
    view = one.read("job_attempts")
    assert view.height == SLURM_ATTEMPTS
    assert pl.read_parquet(one.record_files("job_attempts")).height == 2 * SLURM_ATTEMPTS
    # the preferred row's provenance (sacct.json sorts first), its values: the same as the text's
    # (the JSON's signal is 0 where nothing killed the job, as the text's rc:0 says)
    assert set(first["source_file"]) == {str(JSON)}
    assert first.equals(alone[".json"])
    assert alone[".json"]["signal"].null_count() == 0 and first["signal"].null_count() == 0
    # metric_metadata: every scrape repeats its HELP/TYPE lines, stored once (record key), from
    # the file ingested first
    for wh, first_scrape in ((one, SCRAPES[0]), (other, SCRAPES[1])):
        meta = canonical(wh, "metric_metadata")
        assert meta.height == 12 and set(meta["source_file"]) == {str(first_scrape)}
        assert meta.equals(ordered(wh.read("metric_metadata")))
        assert pl.read_parquet(wh.record_files("metric_metadata")).height == 12


def test_a_value_the_preferred_source_lacks_comes_from_another_source(tmp_path):
    # a JSON whose first job has a return code but no status (its signal unknown): the merged row
    # keeps the JSON's provenance and values (equally complete rows: the first file by path wins),
    # and takes the signal from the text's rc:0
    doc = json.loads(JSON.read_bytes())
    doc["jobs"][0]["exit_code"] = {"return_code": doc["jobs"][0]["exit_code"]["return_code"]}
    lacking, text = tmp_path / "a" / "sacct.json", tmp_path / "b" / "sacct.txt"
    lacking.parent.mkdir(), text.parent.mkdir()
    lacking.write_text(json.dumps(doc))
    shutil.copy(TXT, text)
    alone = canonical(ingest_each(tmp_path / "alone", [lacking])).filter(pl.col("signal").is_null())
    assert alone.height == 1
    keys = alone.select("job_id", "attempt")
    merged = canonical(ingest_each(tmp_path / "both", [lacking, text])).join(
        keys, on=["job_id", "attempt"]
    )
    assert merged["signal"].to_list() == [0]
    assert merged["source_file"].to_list() == [str(lacking)]


def test_forgetting_one_source_keeps_the_jobs_and_forgetting_both_removes_them(tmp_path, alone):
    wh = ingest_each(tmp_path / "home", [TXT, JSON])
    assert wh.forget([str(JSON)]) == {"job_attempts": SLURM_ATTEMPTS, "ingest_manifest": 1}
    # what is left is exactly the text file's own canonical rows, in the files and the view
    assert canonical(wh).equals(alone[".txt"])
    assert wh.read("job_attempts").height == SLURM_ATTEMPTS
    assert set(wh.read("job_attempts")["source_file"]) == {str(TXT)}
    # ingesting the json again merges with what is stored, as at first
    ingest_paths(wh, [JSON])
    assert (
        set(canonical(wh)["source_file"]) == {str(JSON)} and canonical(wh).height == SLURM_ATTEMPTS
    )
    wh.forget([str(TXT)])
    assert canonical(wh).equals(alone[".json"])
    wh.forget([str(JSON)])
    assert wh.files("job_attempts") == [] and wh.record_files("job_attempts") == []
    assert wh.read("job_attempts").height == 0


CRASH_BEFORE_COMMIT = """
import os, sys
from ingest.runner import ingest_paths
from warehouse import store

staged = store.Batch.stage_canonical

def crash(self):
    staged(self)
    os._exit(70)  # the canonical rows are staged, the COMMIT marker is not written

store.Batch.stage_canonical = crash
ingest_paths(store.Warehouse(sys.argv[1]), [sys.argv[2]])
"""


def test_a_crash_before_the_commit_leaves_the_old_table_and_after_it_rolls_forward(tmp_path, alone):
    home = tmp_path / "home"
    wh = ingest_each(home, [TXT])
    before = (home / "parquet" / "job_attempts" / "data.parquet").read_bytes()
    crashed = subprocess.run(
        [sys.executable, "-c", CRASH_BEFORE_COMMIT, str(home), str(JSON)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert crashed.returncode == 70, crashed.stderr
    staged = list((home / "parquet" / "_staging").glob("*/job_attempts/data.parquet"))
    assert staged and not list((home / "parquet" / "_staging").glob("*/COMMIT"))  # staged for real
    assert (home / "parquet" / "job_attempts" / "data.parquet").read_bytes() == before
    wh = Warehouse(home)  # recovery discards the uncommitted stage
    assert not (home / "parquet" / "_staging").exists() or not list(
        (home / "parquet" / "_staging").iterdir()
    )
    assert canonical(wh).equals(alone[".txt"])
    assert pl.read_parquet(wh.record_files("job_attempts")).height == SLURM_ATTEMPTS
    # a crash after the marker, between the renames (source rows moved, canonical not yet)
    crashed = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "ingest", str(JSON), "--home", str(home)],
        cwd=REPO,
        env={**os.environ, FAULT_ENV: "1"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert crashed.returncode == 70, crashed.stderr
    assert (
        home / "parquet" / "job_attempts" / "data.parquet"
    ).read_bytes() == before  # not switched yet
    wh = Warehouse(home)  # rolls forward: the merged table
    assert canonical(wh).equals(canonical(ingest_each(tmp_path / "both", [TXT, JSON])))
    assert set(canonical(wh)["source_file"]) == {str(JSON)}


def test_a_warehouse_of_the_old_layout_is_upgraded_once_and_reads_the_same(tmp_path):
    home = tmp_path / "home"
    wh = ingest_each(home, [TXT, JSON, *SCRAPES])
    want = {t: ordered(wh.read(t)) for t in ("job_attempts", "metric_metadata")}
    # the older layout: every source row in the table's own folder, no canonical file, no marker
    root = home / "parquet"
    for t in want:
        (root / t / "data.parquet").unlink()
        for part in (root / "_sources" / t).iterdir():
            shutil.move(part, root / t / part.name)
    shutil.rmtree(root / "_sources")
    (root / SOURCES_MARKER).unlink()
    assert pl.read_parquet(str(root / "job_attempts")).height == 2 * SLURM_ATTEMPTS
    wh = Warehouse(home)
    assert (root / SOURCES_MARKER).exists()
    for t, df in want.items():
        assert [p.name for p in (root / t).iterdir()] == ["data.parquet"]
        assert ordered(wh.read(t)).equals(df)
        assert pl.read_parquet(str(root / t / "data.parquet")).height == df.height
    assert pl.read_parquet(wh.record_files("job_attempts")).height == 2 * SLURM_ATTEMPTS
    # and it keeps working: forgetting a source recomputes from the moved source rows
    wh.forget([str(JSON)])
    assert (
        set(wh.read("job_attempts")["source_file"]) == {str(TXT)}
        and wh.read("job_attempts").height == SLURM_ATTEMPTS
    )
