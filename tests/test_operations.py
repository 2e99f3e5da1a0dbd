"""Operations that must neither lose nor double data (issue #32, part B): the landing sensor,
forget, home paths with glob characters, ``ingest --replace``, conflicting records,
environment errors and readers on a read-only home."""

from __future__ import annotations

import shutil

import polars as pl
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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["fit", "--window", "banana"], "--window 'banana': use 'all' or a month YYYY-MM"),
        (["fit", "--window", "2026-13"], "--window '2026-13': use 'all' or a month YYYY-MM"),
        (["fit", "--window", "2031-01"], "no fits for --window 2031-01; fitted: all"),
        (["fit", "--observed-from", "0001-01-01"], "--observed-from 0001-01-01 is outside"),
        (["build", "--observed-to", "9999-01-01"], "--observed-to 9999-01-01 is outside"),
    ],
)
def test_fit_window_and_observation_bounds_are_checked(tmp_path, capsys, argv, message):
    wh = Warehouse(tmp_path / "home")
    rates = pl.DataFrame({"component_class": ["gpu"], "window": ["all"], "model": ["exponential"],
                          "selected": [True], "n_events": [3]})
    wh.replace_table("failure_rates", rates)
    before = wh.read("failure_rates")
    assert main(["--home", str(wh.home), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert wh.read("failure_rates").equals(before)  # nothing refitted or saved
