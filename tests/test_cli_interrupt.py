"""Ctrl-C at any moment: a real `goodput ingest` / `build` process gets SIGINT in its whole
process group (as a terminal sends it) when it shows a given progress marker; it says so in one
line, exits 130, leaves no batch half-written, and a re-run completes."""

import os
import signal
import subprocess
import sys
import time

import pytest

from pipelines.cli import main
from pipelines.cli.errors import EXIT_INTERRUPTED
from tests.conftest import REPO
from tests.conftest import SACCT_JOB_MIX
from tests.conftest import ingest_with_cli
from warehouse.store import Warehouse

DEADLINE_S = 300  # a loaded machine is slow; polled, never slept through
FILES, JOBS_PER_FILE = 21, 40  # progress is shown per file above 20 files
HEADER = (
    "JobID|Cluster|Partition|Account|User|JobName|Submit|Start|End|Elapsed|State|ExitCode|"
    "NNodes|AllocTRES|NodeList\n"
)


def sacct_files(folder) -> None:
    folder.mkdir()
    for f in range(FILES):
        lines = [
            f"{f * JOBS_PER_FILE + j + 1}|c1|gpu|a|u|train|2026-01-05T00:00:00|2026-01-05T00:00:00|"
            f"2026-01-05T01:00:00|01:00:00|COMPLETED|0:0|1|gres/gpu=8,node=1|n{f:03d}\n"
            for j in range(JOBS_PER_FILE)
        ]
        (folder / f"{f:03d}.txt").write_text(HEADER + "".join(lines))


# each file above 4 KiB is streamed into a batch of its own (chunks.CHUNK_BYTES): one commit per
# file
INGEST = (
    "import sys, ingest.chunks as c; c.CHUNK_BYTES = 4096; from pipelines.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)


def ingest_process(argv: list[str], **popen) -> subprocess.Popen:
    """``python -c INGEST argv`` from the checkout (settle wait off), its stdout discarded."""
    env = {**os.environ, "GOODPUT_SETTLE": "0"}
    return subprocess.Popen(
        [sys.executable, "-c", INGEST, *argv], cwd=REPO, stdout=subprocess.DEVNULL, env=env, **popen
    )


def interrupted_at(argv: list[str], marker: str) -> tuple[int, list[str]]:
    """Run ``python -c INGEST argv`` in a session of its own, send SIGINT to its process group
    once ``marker`` is on stderr; returns the exit status and the stderr lines that are not
    progress."""
    proc = ingest_process(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines, deadline = [], time.monotonic() + DEADLINE_S
    for line in proc.stderr:  # blocks per line: the marker is waited for, not guessed
        lines.append(line.rstrip("\n"))
        if marker in line:
            os.killpg(proc.pid, signal.SIGINT)
            break
        assert time.monotonic() < deadline, "no progress marker before the deadline"
    lines += proc.stderr.read().splitlines()
    code = proc.wait(timeout=DEADLINE_S)
    return code, [ln for ln in lines if not ln.startswith(("  [", "  done: "))]


def assert_whole(wh: Warehouse) -> None:
    """Every file in the manifest has all its rows, and no row belongs to a file not in it."""
    manifest = dict(wh.read("ingest_manifest").select("path", "rows_ok").rows())
    rows = dict(wh.read("job_attempts").group_by("source_file").len().rows())
    assert rows == {p: n for p, n in manifest.items() if n}
    assert wh.committed_stages() == []


@pytest.mark.parametrize("marker", [f"[0/{FILES}]", f"[{FILES // 2}/{FILES}]"])
def test_ctrl_c_during_ingest_is_one_line_and_leaves_whole_batches(tmp_path, marker):
    sacct_files(tmp_path / "in")
    home = tmp_path / "home"
    argv = ["--home", str(home), "ingest", "--jobs", "1", str(tmp_path / "in")]
    code, err = interrupted_at(argv, marker)
    assert code == EXIT_INTERRUPTED
    assert len(err) == 1 and err[0].startswith("goodput: interrupted; nothing is half-written"), err
    if home.exists():  # else nothing was committed, and the fresh home went with it
        assert_whole(Warehouse(home))
    assert (
        main(["--home", str(home), "ingest", "--jobs", "1", str(tmp_path / "in")]) == 0
    )  # a re-run completes
    wh = Warehouse(home)
    assert_whole(wh)
    assert (
        wh.read("ingest_manifest").height == FILES
        and wh.read("job_attempts").height == FILES * JOBS_PER_FILE
    )


def test_ctrl_c_during_build_is_one_line_without_dagster_output(tmp_path, capsys):
    home = tmp_path / "home"
    ingest_with_cli(home, SACCT_JOB_MIX)
    capsys.readouterr()
    code, err = interrupted_at(["--home", str(home), "build"], "  done: ")
    assert code == EXIT_INTERRUPTED
    assert len(err) == 1 and err[0].startswith("goodput: interrupted; nothing is half-written"), err
    wh = Warehouse(home)
    assert wh.committed_stages() == []
    assert wh.read("job_attempts").height == 8  # what ingest stored is untouched


@pytest.mark.parametrize("tty", [True, False])
def test_progress_within_a_large_file_on_a_terminal_only(tmp_path, tty):
    import pty

    big = tmp_path / "big.log"  # a kernel log (read in chunks: a line-oriented format)
    big.write_text(
        "".join(
            f"2026-01-05T{j // 3600:02d}:{j // 60 % 60:02d}:{j % 60:02d}+00:00 gpu-node-001 "
            "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
            for j in range(400)
        )
    )
    argv = ["--home", str(tmp_path / "h"), "ingest", "--jobs", "1", str(big)]
    if not tty:
        proc = ingest_process(argv, stderr=subprocess.PIPE, text=True)
        _, err = proc.communicate(timeout=DEADLINE_S)
        assert proc.returncode == 0 and "reading" not in err and "\r" not in err
        return
    main_fd, term = pty.openpty()
    proc = ingest_process(argv, stderr=term)
    os.close(term)
    seen = b""
    while True:  # until the process closes the terminal
        try:
            piece = os.read(main_fd, 4096)
        except OSError:  # EIO: the other end is closed
            break
        if not piece:
            break
        seen += piece
    os.close(main_fd)
    assert proc.wait(timeout=DEADLINE_S) == 0
    text = seen.decode()
    assert f"\r\x1b[K  reading big.log: 0 MiB of {big.stat().st_size / 2**20:,.0f} MiB (" in text
    assert text.endswith("\r\x1b[K")  # the line is cleared when the file is read


def test_ctrl_c_that_a_query_turns_into_another_exception_is_still_an_interrupt(
    tmp_path, monkeypatch, capsys
):
    """DuckDB runs Python's SIGINT handler during a query (here: while a streamed file is
    stored), drops what it raised and raises ``RuntimeError("Query interrupted")``: the
    file is not quarantined as a parser failure, no batch commits after it, and the command
    exits 130 in one line."""
    import ingest.chunks
    import ingest.runner

    sacct_files(tmp_path / "in")
    monkeypatch.setattr(ingest.chunks, "CHUNK_BYTES", 4096)  # each file streamed, one batch each
    real = ingest.runner.parse_file

    def parse_file(raw, name, *rest, **kw):
        if name == "003.txt":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)  # the handler runs here (Dagster's, within a run)
            except BaseException:  # noqa: BLE001 - what the handler raised, as DuckDB drops it
                raise RuntimeError("Query interrupted") from None
        return real(raw, name, *rest, **kw)

    monkeypatch.setattr(ingest.runner, "parse_file", parse_file)
    home = tmp_path / "home"
    code = main(["--home", str(home), "ingest", "--jobs", "1", str(tmp_path / "in")])
    err = capsys.readouterr().err.splitlines()
    assert code == EXIT_INTERRUPTED
    assert [ln for ln in err if ln.startswith("goodput:")] == [
        ln for ln in err if "interrupted; nothing is half-written" in ln
    ] and len([ln for ln in err if ln.startswith("goodput:")]) == 1, err
    wh = Warehouse(home)
    assert_whole(wh)
    paths = set(wh.read("ingest_manifest")["path"].to_list())
    assert not any(p.endswith(("003.txt", "004.txt")) for p in paths), paths
    quarantine = wh.read("quarantine")
    assert quarantine.height == 0, quarantine


def test_a_ctrl_c_is_forgotten_when_its_command_ends(tmp_path):
    """A Ctrl-C pressed during one command does not stop the next one in the same process (a
    test run, a notebook) from committing."""
    from warehouse.interrupt import pressed
    from warehouse.interrupt import watched

    with watched():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        assert pressed()
    assert not pressed()
    sacct_files(tmp_path / "in")
    assert main(["--home", str(tmp_path / "home"), "ingest", str(tmp_path / "in")]) == 0
    assert Warehouse(tmp_path / "home").read("job_attempts").height == FILES * JOBS_PER_FILE
