"""`goodput sql` prints like the DuckDB CLI: every DuckDB type, control characters escaped in the
table, "N rows (M shown)", every row in CSV / JSON, a closed pipe is not an error."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.cli import main

EVERY_TYPE = (
    "select interval 3 months + interval 2 hours as iv, "
    "'a' || chr(27) || ']52;c;aGk=' || chr(7) || 'b' as s, "
    "'infinity'::timestamp t, union_value(k := 1) u, '\\xAA'::blob b, [1, 2] l, {{'a': 1}} st, "
    "'101'::bit bits, range r from range({n})"
)


@pytest.fixture
def home(wh):
    wh.refresh_catalog()
    return str(wh.home)


def test_table_prints_every_type_escapes_controls_and_counts_rows(home, capsys):
    assert main(["--home", home, "sql", EVERY_TYPE.format(n=60), "--max-rows", "10"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "a\\e]52;c;aGk=\\ab" in out  # DuckDB's escapes, as its CLI prints them
    assert "3 months 02:00:00" in out and "infinity" in out and "\\xAA" in out
    assert "60 rows (10 shown)" in " ".join(out.split())


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_csv_and_json_print_every_row_of_every_type(home, capsys, fmt):
    assert main(["--home", home, "sql", EVERY_TYPE.format(n=1000), "--format", fmt]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        rows = json.loads(out)
        assert len(rows) == 1000 and rows[-1]["r"] == 999
        assert rows[0] | {"r": 0} == {
            "iv": "3 months 02:00:00",
            "s": "a\x1b]52;c;aGk=\x07b",
            "t": "infinity",
            "u": {"k": 1},
            "b": "\\xAA",
            "l": [1, 2],
            "st": {"a": 1},
            "bits": "101",
            "r": 0,
        }
    else:
        lines = out.splitlines()
        assert lines[0] == "iv,s,t,u,b,l,st,bits,r" and len(lines) == 1001
        assert lines[1] == (
            "3 months 02:00:00,a\x1b]52;c;aGk=\x07b,infinity,"
            '"{""k"":1}",\\xAA,"[1,2]","{""a"":1}",101,0'
        )


def test_a_closed_pipe_ends_quietly(home):
    goodput = Path(sys.executable).parent / "goodput"
    for fmt in ("csv", "table"):
        done = subprocess.run(
            f"'{goodput}' --home '{home}' sql 'select * from range(2000000)' --format {fmt} | "
            "head -1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.stderr == "" and done.stdout.strip()


def test_user_sql_has_a_memory_limit(wh):
    wh.refresh_catalog()
    with wh.readonly_relation("select current_setting('memory_limit') m") as rel:
        limit = rel.fetchall()[0][0]
    assert limit.endswith("GiB") and float(limit.split()[0]) <= 2.0
