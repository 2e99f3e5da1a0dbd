"""Attacks on ``sources.toml``: values of the wrong type or out of range, a file nested past
Python's recursion limit, two sources of one name. Each is refused when the file is read, in
one line naming the source and the option, by ``goodput pull`` and its dry run alike (exit 2),
never a traceback, never a pull that runs on a value it cannot use."""

from __future__ import annotations

import contextlib
import io

import pytest

from pipelines.cli import main

PROM = '[[source]]\nname = "tsdb"\nkind = "prometheus"\nurl = "http://127.0.0.1:9"\nretries = 0\n'
CMD = '[[source]]\nname = "dump"\nkind = "command"\ncommand = ["true"]\n'


def run_cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(map(str, argv)))
    return code, out.getvalue(), err.getvalue()


CASES = {  # attack: (sources.toml, what the one line says)
    "timeout_s nan": (
        CMD + "timeout_s = nan\n",
        "(dump): timeout_s is a number of seconds above 0",
    ),
    "timeout_s negative": (CMD + "timeout_s = -5\n", "(dump): timeout_s is a number of seconds"),
    "retries -1": (CMD + "retries = -1\n", "(dump): retries is a whole number from 0 to 100"),
    "retries 2.5": (CMD + "retries = 2.5\n", "(dump): retries is a whole number"),
    "concurrency many": (PROM + 'concurrency = "many"\n', "concurrency is a whole number, not a"),
    "hosts_per_query negative": (PROM + "hosts_per_query = -6\n", "hosts_per_query is a whole"),
    "metrics a string": (PROM + 'metrics = "DCGM_FI_DEV_GPU_TEMP"\n', "(tsdb): metrics is a list"),
    "metrics numbers": (PROM + "metrics = [1, 2]\n", "(tsdb): metrics: every item is a string"),
    "verify_tls 1": (PROM + "verify_tls = 1\n", "(tsdb): verify_tls is true or false or a string"),
    "url a number": (PROM.replace('"http://127.0.0.1:9"', "9"), "(tsdb): url is a string"),
    "cluster a list": (CMD + 'cluster = ["a"]\n', "(dump): cluster is a name"),
    "bmc_timeout_s inf": (
        '[[source]]\nname = "b"\nkind = "redfish"\nbmc_timeout_s = inf\n',
        "(b): bmc_timeout_s is a finite number above 0",
    ),
    "events a string": (
        '[[source]]\nname = "s"\nkind = "slurm"\nevents = "no"\n',
        "(s): events is true or false, not a string",
    ),
    "kind a list": ('[[source]]\nname = "k"\nkind = ["command"]\n', "(k): kind of type list"),
    "two sources one name": (
        CMD + CMD.replace('["true"]', '["false"]'),
        "sources 1 and 2 are both named 'dump'; each needs its own name",
    ),
    "nested too deeply": ("x = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply to read"),
    "sources not tables": ("source = [1, 2]\n", "sources.toml: sources are [[source]] tables"),
}


@pytest.mark.parametrize("attack", CASES)
def test_a_bad_value_in_sources_toml_is_one_line_naming_source_and_option(tmp_path, attack):
    text, said = CASES[attack]
    home = tmp_path / "home"
    home.mkdir()
    (home / "sources.toml").write_text(text)
    for dry in (["--dry-run"], []):
        code, out, err = run_cli("--home", home, "pull", *dry, "--since", "2026-01-01")
        assert (code, out) == (2, ""), (code, out, err)
        assert err.count("\n") == 1 and said in err, err
        assert "Traceback" not in err
