"""The runner's process pool: small files parsed in worker processes, several per task, and
committed here in file order, give exactly the tables, manifest batches and reports of a serial
run, with every guarantee kept (conservation, idempotence, retries, crash safety, progress)."""

import shutil
from pathlib import Path

import pytest

from ingest import parallel
from ingest import runner
from ingest.files import UserError
from ingest.files import iter_files
from ingest.runner import ingest_paths
from tests.conftest import SAMPLE_FLEET
from tests.conftest import table_snapshot
from warehouse.store import Warehouse


def _mixed_fleet(root: Path) -> Path:
    """A slice of the committed fleet (every source type) plus the quirks a real drop holds: a
    copy of a file under another name, a corrupt gzip, an empty file, an unrecognised one."""
    src = root / "src"
    for sub, n in (
        ("slurm", None),
        ("k8s", None),
        ("components", None),
        ("kernel", 2),
        ("ipmi", 2),
        ("redfish", 2),
    ):
        for p in sorted((SAMPLE_FLEET / sub).iterdir())[:n]:
            (src / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy(p, src / sub / p.name)
    for node in ("gpu-node-001", "gpu-node-002"):
        (src / "dcgm" / node).mkdir(parents=True)
        for p in sorted((SAMPLE_FLEET / "dcgm" / node).iterdir())[:4]:
            shutil.copy(p, src / "dcgm" / node / p.name)
    first = min((src / "dcgm" / "gpu-node-001").iterdir())
    shutil.copy(first, src / "dcgm" / "zz-copy-of-first.prom.gz")
    (src / "odd").mkdir()
    (src / "odd" / "corrupt.prom.gz").write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 40)
    (src / "odd" / "empty.txt").write_bytes(b"")
    (src / "odd" / "notes.bin").write_bytes(b"\x00\x01 nothing anyone exports\n" * 10)
    return src


def _reports(reports) -> list[tuple]:
    return [
        (
            r.path,
            r.format,
            r.sha256,
            r.records,
            r.rows_ok,
            r.rows_quarantined,
            r.rows_duplicate,
            r.skipped,
            r.error,
            r.done,
        )
        for r in reports
    ]


@pytest.fixture
def pooled(monkeypatch):
    """Small thresholds: the pool starts for a few files, tasks hold 3 files, batches commit
    every 2,000 rows (so a run has several batches whose boundaries must agree)."""
    started = []

    class Recording(parallel.ProcessPoolExecutor):
        def __init__(self, *args, **kwargs):
            started.append(args[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(parallel, "ProcessPoolExecutor", Recording)
    monkeypatch.setattr(parallel, "POOL_MIN_FILES", 2)
    monkeypatch.setattr(parallel, "TASK_FILES", 3)
    monkeypatch.setattr(runner, "BATCH_ROWS", 2000)
    return started


def test_pooled_ingest_writes_what_a_serial_one_does(tmp_path, pooled):
    src = _mixed_fleet(tmp_path)
    serial, parallel = Warehouse(tmp_path / "serial"), Warehouse(tmp_path / "parallel")
    one = ingest_paths(serial, [src], jobs=1)
    assert pooled == []  # jobs=1 parses here
    seen = []
    two = ingest_paths(parallel, [src], jobs=2, progress=lambda i, n, p: seen.append((i, n, p)))
    assert pooled == [2]
    files = iter_files([src])
    assert seen == [(i, len(files), p) for i, p in enumerate(files)]  # per file, in order
    assert _reports(two) == _reports(one)
    assert table_snapshot(parallel) == table_snapshot(serial)

    manifest = parallel.read("ingest_manifest")
    assert manifest["batch"].n_unique() > 2  # several batches, the same ones as the serial run
    by_path = {r.path.rsplit("/", 1)[-1]: r for r in two}
    assert by_path["zz-copy-of-first.prom.gz"].skipped  # same content as a file met earlier
    bad = by_path["corrupt.prom.gz"]
    assert not bad.done and bad.records == bad.rows_quarantined == 1
    assert by_path["notes.bin"].format == "unknown" and by_path["notes.bin"].rows_quarantined == 1
    assert by_path["empty.txt"].rows_quarantined == 1
    for r in two:
        assert r.records == r.rows_ok + r.rows_quarantined + r.rows_duplicate, r.path
    assert sum(r.rows_ok for r in two) > 5_000
    q = parallel.read("quarantine")
    assert q.filter(q["source_file"].str.ends_with("corrupt.prom.gz"))["error"].str.slice(
        0, 17
    ).to_list() == ["cannot decompress"]

    # again: nothing changes; only the file that could not be read is tried again
    again = ingest_paths(parallel, [src], jobs=2)
    assert [Path(r.path).name for r in again if not r.skipped] == ["corrupt.prom.gz"]
    assert table_snapshot(parallel) == table_snapshot(serial)


def test_a_crash_while_committing_leaves_whole_batches_and_a_rerun_completes(
    tmp_path, pooled, monkeypatch
):
    src = _mixed_fleet(tmp_path)
    serial = Warehouse(tmp_path / "serial")
    ingest_paths(serial, [src], jobs=1)
    wh = Warehouse(tmp_path / "home")
    calls, manifest = [], runner.manifest

    def failing(batch_id, reports):
        calls.append(batch_id)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return manifest(batch_id, reports)

    monkeypatch.setattr(runner, "manifest", failing)
    with pytest.raises(RuntimeError, match="disk full"):
        ingest_paths(wh, [src], jobs=2)
    m = wh.read("ingest_manifest")
    assert (
        m["batch"].n_unique() == 2
    )  # the two batches committed before the crash, nothing of the third
    stored = set(m["path"])
    assert set(wh.read("gpu_samples")["source_file"]) <= stored
    monkeypatch.setattr(runner, "manifest", manifest)
    ingest_paths(wh, [src], jobs=1)
    # the same rows as a serial run; only the manifest's batch ids differ (the rerun's files
    # are grouped afresh)
    got, want = _without_batches(wh), _without_batches(serial)
    assert (
        got == want and len(got["ingest_manifest"]) == len(iter_files([src])) - 2
    )  # a copy skipped, one not done


def _without_batches(wh: Warehouse) -> dict[str, list]:
    snap = table_snapshot(wh)
    m = wh.read("ingest_manifest").drop("batch", "ingested_at")
    return {**snap, "ingest_manifest": sorted(map(str, m.rows()))}


def test_jobs_below_one_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match=r"jobs \(--jobs\) must be at least 1, not 0"):
        ingest_paths(Warehouse(tmp_path / "home"), [tmp_path], jobs=0)


def test_cli_jobs_flag(tmp_path, capsys):
    from pipelines.cli import main

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SAMPLE_FLEET / "slurm" / "sacct.txt", src / "sacct.txt")
    assert main(["ingest", "--home", str(tmp_path / "home"), "--jobs", "0", str(src)]) == 2
    assert capsys.readouterr().err == "goodput: error: jobs (--jobs) must be at least 1, not 0\n"
    assert main(["ingest", "--home", str(tmp_path / "home"), "--jobs", "1", str(src)]) == 0
    assert Warehouse(tmp_path / "home").read("job_attempts").height > 0


def test_goodput_config_ingest_jobs_reaches_the_runner(tmp_path):
    import warnings

    import dagster as dg

    from pipelines.assets import ingested_sources
    from pipelines.resources import Settings

    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SAMPLE_FLEET / "slurm" / "sacct.txt", src / "sacct.txt")
    for jobs, ok in ((-1, False), (1, True)):
        cfg = Settings(home=str(tmp_path / "home"), sources=[str(src)], ingest_jobs=jobs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = dg.materialize(
                [ingested_sources], resources={"settings": cfg}, raise_on_error=False
            )
        assert result.success is ok
        if not ok:
            (failure,) = [e for e in result.all_events if e.is_step_failure]
            assert "jobs (--jobs) must be at least 1, not -1" in str(
                failure.step_failure_data.error
            )


def _dcgm_many(monkeypatch, parse_many):
    """Replace the registered DCGM format's ``parse_many`` (this process only: jobs=1)."""
    from dataclasses import replace

    from ingest.registry import formats

    monkeypatch.setitem(formats(), "dcgm", replace(formats()["dcgm"], parse_many=parse_many))


def test_small_scrapes_are_parsed_together_and_store_what_one_by_one_does(tmp_path, monkeypatch):
    """A task's DCGM files go to one ``parse_many`` call; tables, manifest batches and reports
    are those of parsing each file alone (``parse_many`` off), the odd files included."""
    from ingest.formats import dcgm

    src = _mixed_fleet(tmp_path)
    _dcgm_many(monkeypatch, None)
    one_by_one = Warehouse(tmp_path / "one")
    want = ingest_paths(one_by_one, [src], jobs=1)
    calls = []
    _dcgm_many(
        monkeypatch,
        lambda files: calls.append([c.path for _, c in files]) or dcgm.parse_many(files),
    )
    together = Warehouse(tmp_path / "together")
    got = ingest_paths(together, [src], jobs=1)
    assert _reports(got) == _reports(want)
    assert table_snapshot(together) == table_snapshot(one_by_one)
    # the 8 node scrapes in one call (the copy is skipped, the corrupt file is not readable)
    assert [[Path(p).parent.name for p in c] for c in calls] == [
        ["gpu-node-001"] * 4 + ["gpu-node-002"] * 4
    ]


def test_a_failing_parse_many_falls_back_to_one_file_at_a_time(tmp_path, monkeypatch):
    """A parser bug in the batched call loses nothing: each file is parsed alone, and only a
    file whose own parse fails is quarantined whole (and tried again later)."""
    from ingest.formats import dcgm

    src = _mixed_fleet(tmp_path)
    _dcgm_many(monkeypatch, None)
    want = Warehouse(tmp_path / "one")
    ingest_paths(want, [src], jobs=1)

    def broken(files):
        raise RuntimeError("parser bug")

    _dcgm_many(monkeypatch, broken)
    got = Warehouse(tmp_path / "got")
    ingest_paths(got, [src], jobs=1)
    assert table_snapshot(got) == table_snapshot(want)

    # a file the parser fails on: quarantined whole, not done; the others of its call are stored
    bad = sorted((src / "dcgm" / "gpu-node-002").iterdir())[1]
    real = dcgm.parse_many

    def failing_on_bad(files):
        if any(ctx.path == str(bad) for _, ctx in files):
            raise ZeroDivisionError("division by zero")
        return real(files)

    _dcgm_many(monkeypatch, failing_on_bad)
    monkeypatch.setattr(dcgm, "parse_many", failing_on_bad)  # what dcgm.parse calls for one file
    g2 = Warehouse(tmp_path / "g2")
    reports = {r.path: r for r in ingest_paths(g2, [src], jobs=1)}
    r = reports[str(bad)]
    assert (r.records, r.rows_quarantined, r.done) == (1, 1, False)
    q = g2.read("quarantine")
    assert q.filter(q["source_file"] == str(bad))["error"].to_list() == [
        "parser error: ZeroDivisionError('division by zero')"
    ]
    ok = [x for p, x in reports.items() if p.startswith(str(bad.parent)) and p != str(bad)]
    assert len(ok) == 3 and all(x.done and x.rows_ok > 0 and x.rows_quarantined == 0 for x in ok)


def test_directories_expand_sorted_without_hidden_entries_or_symlinked_dirs(tmp_path):
    for rel in ("b/2.log", "a/1.log", "a/.swp", ".git/x/objects.log", "a/.cache/y.log", "c.log"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "d").symlink_to(tmp_path / "a", target_is_directory=True)
    assert [f.relative_to(tmp_path).as_posix() for f in iter_files([tmp_path])] == [
        "a/1.log",
        "b/2.log",
        "c.log",
    ]
    with pytest.raises(UserError, match="no such file or directory"):
        iter_files([tmp_path / "missing"])


@pytest.mark.parametrize(
    "files, want",
    [
        ({"cpu.max": "200000 100000\n"}, 2),  # cgroup v2: a 2-CPU pod limit
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: rounded up
        ({"cpu.max": "max 100000\n"}, None),  # no limit
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),  # cgroup v1
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),  # no cgroup files (macOS, a bare container)
        ({"cpu.max": "garbage"}, None),
    ],
)
def test_default_jobs_stay_within_the_cgroup_cpu_quota(tmp_path, monkeypatch, files, want):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(
        parallel.os, "sched_getaffinity", lambda _pid: set(range(64)), raising=False
    )
    assert parallel.default_jobs(tmp_path) == (64 if want is None else want)
