"""Inputs as they come: every scheduler sample ingests through the runner with per-file
conservation and idempotence, formats are detected by content (not name), ``--format``
overrides, ``.gz`` / ``.zst`` files and nested directories work."""

import gzip
import shutil

import polars as pl
import pytest
import zstandard
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.runner import ingest_paths
from tests.conftest import FIXTURES

# file -> (format, records, rows_ok, rows_quarantined)
EXPECTED = {
    "slurm/SARC__slurm_21_8_8.json": ("sacct-json", 1, 1, 0),
    "slurm/SARC__slurm_23_11_5.json": ("sacct-json", 1, 1, 0),
    "slurm/clockwork__sacct_1.json": ("sacct-json", 2, 2, 0),
    "slurm/aws-parallelcluster_issue5670_slurmctld.log": ("slurmctld", 2, 2, 0),
    "slurm/SARC__slurm_22_5_9.json": ("sacct-json", 1, 1, 0),
    "slurm/SARC__slurm_23_2_6.json": ("sacct-json", 1, 1, 0),
    "slurm/aws-eda-slurm-cluster_issue267_slurmctld.log": ("slurmctld", 1, 1, 0),
    "slurm/ArjunaUsers_issue137_slurmctld.log": ("slurmctld", 0, 0, 0),
    # headerless 27 fields: without --fields every line says so (tests/test_sacct.py reads it with
    # them)
    "slurm/rug-cit-hpc_slurm-jobinfo__sacct.txt": ("sacct", 13, 0, 13),
    "kubernetes/kuard__kubectl_get_pods_list.json": ("k8s", 1, 1, 0),
    "slurm/xdmod__accounting-logs.log": ("sacct", 4, 4, 0),
    "slurm/xdmod__non-ended-job-state.log": ("sacct", 2, 2, 0),
    "slurm/sacct_parsable2_with_header_examples.txt": ("sacct", 4, 4, 0),
    # a TRES-string -> GPU-count table from xdmod's tests, not a scheduler export
    "slurm/xdmod__alloc-tres-gpu-count.json": ("unknown", 1, 0, 1),
    "kubernetes/hyperpod_pytorchjob_status_doc.json": ("k8s", 1, 0, 1),
    # its Ready condition carries no time: counted, as a quarantine row that says so
    "kubernetes/is-healthy__Node_healthy.yaml": ("k8s", 1, 0, 1),
    "kubernetes/is-healthy__Pod_crashloopbackoff.yaml": ("k8s", 1, 1, 0),
    "kubernetes/is-healthy__Pod_evicted.yaml": ("k8s", 1, 1, 0),
    "kubernetes/is-healthy__Pod_oomkilled-unhealthy.yaml": ("k8s", 2, 2, 0),
    "kubernetes/kubeflow-trainer_issue2044_operator_log.txt": (
        "k8s",
        1,
        0,
        1,
    ),  # no start in the log
}


def _snapshot(wh):
    return {
        t: wh.read(t)
        .drop("ingested_at", strict=False)
        .sort(pl.all().exclude(pl.List(pl.Utf8)))
        .to_dicts()
        for t in ("job_attempts", "node_events", "quarantine", "ingest_manifest")
    }


@pytest.fixture
def shuffled(tmp_path):
    """The samples under meaningless names in nested folders, half of them compressed."""
    root = tmp_path / "drop"
    names = {}
    for i, rel in enumerate(sorted(EXPECTED)):
        data = (FIXTURES / rel).read_bytes()
        sub = root / f"d{i % 3}" / ("deep" if i % 2 else "")
        sub.mkdir(parents=True, exist_ok=True)
        if i % 3 == 1:
            path, data = sub / f"file{i}.gz", gzip.compress(data)
        elif i % 3 == 2:
            path, data = sub / f"file{i}.zst", zstandard.ZstdCompressor().compress(data)
        else:
            path = sub / f"file{i}.dat"
        path.write_bytes(data)
        names[str(path)] = rel
    return root, names


def test_every_sample_by_content_compressed_and_nested(wh, shuffled):
    root, names = shuffled
    reports = ingest_paths(wh, [root])
    assert len(reports) == len(EXPECTED)
    for r in reports:
        fmt, records, ok, bad = EXPECTED[names[r.path]]
        assert (r.format, r.records, r.rows_ok, r.rows_quarantined) == (fmt, records, ok, bad), (
            names[r.path]
        )
        assert r.records == r.rows_ok + r.rows_quarantined
    manifest = wh.read("ingest_manifest")
    assert manifest.height == len(EXPECTED)
    assert (manifest["records_read"] == manifest["rows_ok"] + manifest["rows_quarantined"]).all()
    q = wh.read("quarantine")
    vendor = q.filter(pl.col("format") == "k8s")
    assert sorted(vendor["error"].to_list()) == [
        (
            "PyTorchJobRestarting at 2024-04-05T15:12:25 ends an attempt of default/kfto-01 "
            "(exit code 1) "
            "whose start an operator log does not show: the job's pod events or pods (kubectl get "
            "events/pods -o json) give it"
        ),
        "invalid JSON at line 46 column 144: Invalid control character",
        (
            "object 1: Node gk3-infra-cluster-pool-2-be3fcd50-lzd5 Ready=True has no "
            "lastTransitionTime or "
            "lastHeartbeatTime: its state cannot be placed in time"
        ),
    ]


def test_reingest_is_a_no_op(wh, shuffled):
    root, _ = shuffled
    ingest_paths(wh, [root])
    before = _snapshot(wh)
    again = ingest_paths(wh, [root])
    assert all(r.skipped for r in again)
    assert _snapshot(wh) == before


def test_format_override_beats_detection(wh, tmp_path):
    src = tmp_path / "slurmctld.log"
    shutil.copy(FIXTURES / "slurm" / "SARC__slurm_21_8_8.json", src)
    (r,) = ingest_paths(wh, [src], fmt="sacct-json")
    assert (r.format, r.rows_ok) == ("sacct-json", 1)
    src2 = tmp_path / "weird.txt"
    shutil.copy(FIXTURES / "slurm" / "aws-parallelcluster_issue5670_slurmctld.log", src2)
    (r2,) = ingest_paths(wh, [src2], fmt="k8s")  # wrong on purpose: nothing matches, nothing breaks
    assert (r2.format, r2.records, r2.rows_ok) == ("k8s", 1, 0)
    assert wh.read("node_events").height == 0


def test_name_alone_does_not_decide(wh, tmp_path):
    """A k8s pod list named like a sacct dump is still read as k8s."""
    src = tmp_path / "sacct.json"
    shutil.copy(FIXTURES / "kubernetes" / "is-healthy__Pod_evicted.yaml", src)
    (r,) = ingest_paths(wh, [src])
    assert r.format == "k8s" and wh.read("job_attempts")["job_id"].to_list() == [
        "default/evicted-pod"
    ]


def test_xdmod_tres_gpu_table_agrees_with_the_sacct_parser():
    """The one Slurm sample that is not an export: xdmod's AllocTRES -> GPU count cases."""
    import json

    from ingest.base import ParseContext
    from ingest.formats.sacct import parse

    cases = json.loads((FIXTURES / "slurm" / "xdmod__alloc-tres-gpu-count.json").read_text())
    lines = ["JobID|State|AllocTRES"] + [
        f"{i + 1}|COMPLETED|{tres}" for i, (tres, _) in enumerate(cases)
    ]
    res = parse("\n".join(lines).encode(), ParseContext())
    got = res.tables["job_attempts"]["n_gpus"].fill_null(0).to_list()
    assert got == [gpus for _, gpus in cases] and len(got) == 9


@pytest.mark.parametrize("tail", [b"", b"no final newline"])
def test_chunks_cut_at_line_ends(tmp_path, monkeypatch, tail):
    """pread chunks of a plain file end after the last newline within CHUNK_BYTES (a longer
    line stays whole); a decompressing stream is cut at newlines too. Either way the blocks
    are the file and each comes with its newline count."""
    import io

    from ingest import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 100)
    monkeypatch.setattr(chunks, "_PROBE", 16)
    lines = [b"x" * n for n in (10, 0, 95, 99, 250, 3, 40, 180, 7)]
    data = b"\n".join(lines) + b"\n" + tail
    p = tmp_path / "f.log"
    p.write_bytes(data)
    with open(p, "rb") as fh:
        from_file = list(chunks.line_blocks(fh, plain=True))
    assert [len(b) for b, _ in from_file] == [12, 96, 100, 251, 45, 181, 8 + len(tail)]
    for cut in (from_file, list(chunks.line_blocks(io.BytesIO(data), plain=False))):
        blocks = [b for b, _ in cut]
        assert b"".join(blocks) == data
        assert [n for _, n in cut] == [b.count(b"\n") for b in blocks]
        assert all(b.endswith(b"\n") for b in blocks[: -1 if tail else None])


def test_chunks_are_parsed_in_order_with_line_numbers(wh, tmp_path, monkeypatch):
    """Chunks parse concurrently; every record arrives, with its file-wide line number."""
    from ingest import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 256)
    lines = [
        f"[Thu May  1 10:{i // 60:02d}:{i % 60:02d} 2025] NVRM: Xid "
        f"(PCI:0000:{i % 200:02x}:00): 79, "
        "pid=1, name=python3, GPU has fallen off the bus."
        if i % 3 == 0
        else (
            f"[Thu May  1 10:{i // 60:02d}:{i % 60:02d} 2025] docker0: port {i} "
            "entered blocking state"
        )
        for i in range(600)
    ]
    p = tmp_path / "node7.log"
    p.write_text("\n".join(lines) + "\n")
    (rep,) = ingest_paths(wh, [p], fmt="kernel")
    ev = wh.read("hw_events").sort("source_line")
    assert rep.records == ev.height == 200
    assert ev["source_line"].to_list() == list(range(1, 601, 3))
    assert ev["pci_bus"].to_list() == [f"0000:{i % 200:02x}:00.0" for i in range(0, 600, 3)]


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=300)
    | st.lists(st.sampled_from([b"a", b"\n", b"\r", b"\xff", "é".encode(), b"x" * 20])).map(
        b"".join
    )
)
def test_numbered_lines_splits_like_python(data):
    """Zero-copy line views equal decoding with replacement and splitting at newlines (a final
    newline adds no line; one trailing CR is dropped)."""
    from ingest.base import ParseContext
    from ingest.base import numbered_lines

    want = data.decode("utf-8", "replace").split("\n")
    if want[-1] == "":
        want.pop()
    got = numbered_lines(data, ParseContext(line_offset=5))
    assert got["raw"].to_list() == [w.removesuffix("\r") for w in want]
    assert got["line"].to_list() == list(range(6, 6 + len(want)))


# ----------------------------------------------------------------------------- nothing readable
def test_ingest_of_an_empty_folder_is_an_error_and_makes_no_home(tmp_path, capsys):
    from pipelines.cli import main

    (tmp_path / "drop").mkdir()
    (tmp_path / "drop" / ".hidden").write_text("JobID|State\n1|COMPLETED\n")  # skipped
    home = tmp_path / "home"
    assert main(["--home", str(home), "ingest", str(tmp_path / "drop")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no file to read in" in err
    assert not home.exists()


def test_ingest_of_nothing_readable_is_an_error_and_makes_no_home(tmp_path, capsys):
    """Files none of which gives a record (no format recognises them): exit 5, each file's
    reason on stderr, and the home the command would have made is not left behind."""
    from pipelines.cli import main

    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "notes.txt").write_text("hello\n")
    (drop / "blob.bin").write_bytes(b"\x00\x01\x02\n")
    home = tmp_path / "home"
    assert main(["--home", str(home), "ingest", str(drop)]) == 5
    err = capsys.readouterr().err
    assert err.count("format not recognised") == 2 and "nothing readable" in err
    assert not home.exists()
    # a home that existed keeps what it had
    assert main(["--home", str(home), "ingest", str(FIXTURES / SACCT)]) == 0
    assert main(["--home", str(home), "ingest", str(drop)]) == 5
    assert (home / "warehouse.duckdb").exists()


SACCT = "slurm/xdmod__accounting-logs.log"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "chunked"])
def test_a_forced_format_that_finds_no_record_rejects_the_file_until_its_own_is_given(
    tmp_path, capsys, monkeypatch, streamed
):
    """A sacct dump read as kernel log lines gives no record at all: the file is rejected
    (exit 5, the reason on stderr, nothing in the manifest) and read again, without --replace,
    by an ingest with its own format or none; the quarantine row of the wrong try goes."""
    from ingest import chunks
    from pipelines.cli import main
    from warehouse.store import Warehouse

    if streamed:  # a large file: streamed in chunks into a batch of its own
        monkeypatch.setattr(chunks, "CHUNK_BYTES", 256)
    home, dump = tmp_path / "home", FIXTURES / SACCT
    other = FIXTURES / "slurm/sacct_parsable2_with_header_examples.txt"
    assert main(["--home", str(home), "ingest", str(other)]) == 0  # the home exists
    assert main(["--home", str(home), "ingest", "--format", "kernel", str(dump)]) == 5
    err = capsys.readouterr().err
    assert "--format kernel found no record in this file" in err and "no --replace" in err
    wh = Warehouse(home)
    assert str(dump) not in wh.read("ingest_manifest")["path"].to_list()
    assert wh.read("quarantine").filter(pl.col("source_file") == str(dump)).height == 1
    assert main(["--home", str(home), "ingest", str(dump)]) == 0  # detected: sacct
    m = wh.read("ingest_manifest").filter(pl.col("path") == str(dump)).row(0, named=True)
    assert (m["format"], m["rows_ok"]) == ("sacct", 4)
    assert wh.read("quarantine").filter(pl.col("source_file") == str(dump)).height == 0
