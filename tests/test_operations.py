"""Operations that must neither lose nor double data (issue #32, part B): the landing sensor,
forget, home paths with glob characters, ``ingest --replace``, conflicting records,
environment errors and readers on a read-only home."""

from __future__ import annotations

import shutil

import pytest

from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import FIXTURES
from warehouse.store import Warehouse

SACCT = FIXTURES / "slurm" / "xdmod__accounting-logs.log"  # 4 job attempts


@pytest.mark.parametrize("name", ["hb[1]", "h*"])
def test_home_paths_with_glob_characters_are_literal(tmp_path, capsys, name):
    """A sibling that the name would match as a glob holds other data: neither is read for the
    other, and ingest / sql work without a traceback."""
    sibling = Warehouse(tmp_path / "hb1" if name == "hb[1]" else tmp_path / "hx")
    shutil.copy(FIXTURES / "kernel" / "nvsentinel__syslog_monitor_xid_burst.log", tmp_path / "xid.log")
    ingest_paths(sibling, [tmp_path / "xid.log"], jobs=1)
    home = str(tmp_path / name)
    assert main(["--home", home, "ingest", str(SACCT)]) == 0
    assert "ingested 1 file(s), 4 rows" in capsys.readouterr().out
    assert main(["--home", home, "sql", "select count(*) n, min(path) p from ingest_manifest",
                 "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"1,{SACCT}"
    wh = Warehouse(home)
    assert wh.read("job_attempts").height == 4
    assert wh.read("hw_events").height == 0
    assert wh.committed_stages() == []
