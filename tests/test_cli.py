"""The goodput command line: answers, formats, and one-line errors for user mistakes."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from pipelines.cli import main
from pipelines.cli.errors import EXIT_REJECTED
from pipelines.cli.errors import CliError
from pipelines.cli.values import parse_duration
from tests.conftest import FIXTURES
from tests.conftest import REPO
from tests.conftest import llama3_fits


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90s", 90),
        ("10m", 600),
        ("1.5h", 5400),
        ("2d", 172800),
        ("1h30m", 5400),
        ("1d 12h", 129600),
        ("PT1H30M", 5400),
        ("P1DT2H", 93600),
        ("pt90s", 90),
        ("PT0.5H", 1800),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["ten minutes", "1h30", "P", "PT", "", "h"])
def test_bad_duration(text):
    with pytest.raises(CliError, match="cannot read duration"):
        parse_duration(text)


def test_bare_number_is_an_error_naming_the_units(capsys):
    with pytest.raises(CliError, match="has no unit.*s, m, h, d"):
        parse_duration("1.5")
    assert main(["project", "--mtti", "1.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'1.5' has no unit" in err


def test_version_names_the_commit_of_a_git_checkout(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    git = (
        subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
        if (REPO / ".git").exists() and shutil.which("git")
        else None
    )
    if git is None or git.returncode:  # not a checkout (an sdist, a copy): the version alone
        assert out == f"goodput {version('fleet-goodput')}\n"
    else:
        assert out.startswith(f"goodput {version('fleet-goodput')} (commit {git.stdout.strip()}")


def test_ingest_then_sql_in_every_format(tmp_path, capsys):
    home = str(tmp_path / "h")
    assert (
        main(["--home", home, "ingest", str(FIXTURES / "slurm" / "xdmod__accounting-logs.log")])
        == 0
    )
    assert "ingested 1 file(s), 4 rows, 0 quarantined" in capsys.readouterr().out
    assert (
        main(
            [
                "sql",
                "--home",
                home,
                "select state, count(*) n from job_attempts group by 1 order by 1",
                "--format",
                "json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out) == [
        {"state": "CANCELLED", "n": 1},
        {"state": "COMPLETED", "n": 2},
        {"state": "TIMEOUT", "n": 1},
    ]
    assert (
        main(
            [
                "sql",
                "--home",
                home,
                "select job_id from job_attempts order by 1 limit 2",
                "--format",
                "csv",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines() == ["job_id", "4103947", "4107166"]
    assert (
        main(["--home", home, "ingest", str(FIXTURES / "slurm" / "xdmod__accounting-logs.log")])
        == 0
    )
    assert "1 already ingested (unchanged)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["ingest", "/definitely/missing"], "no such file or directory"),
        (["ingest", "--format", "bogus", "."], "unknown format 'bogus'"),
        (["ingest", "--tz", "Mars/Olympus", "."], "unknown time zone"),
        (["ingest", "--time", "yesterday", "."], "cannot read time"),
        (["sql", "select * from no_such_table"], "no_such_table"),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, argv, message):
    from warehouse.store import Warehouse

    Warehouse(tmp_path / "h")  # an existing, empty warehouse: read-only commands accept it
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--home", str(tmp_path / "h"), *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_bad_records_warn_and_exit_0(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("JobID|State\n1|COMPLETED|extra\n2|COMPLETED\n")
    assert main(["--home", str(tmp_path / "h"), "ingest", str(bad)]) == 0
    captured = capsys.readouterr()
    assert (
        "ingested 1 file(s), 1 rows, 1 quarantined\n" in captured.out and "warning:" in captured.err
    )


@pytest.mark.parametrize("command", [["sql", "select 1"], ["fit"], ["report"], ["project"]])
def test_read_only_commands_refuse_a_missing_home(tmp_path, capsys, command):
    home = tmp_path / "typo"
    assert main(["--home", str(home), *command]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no warehouse at {home}" in err
    assert not home.exists()  # nothing created behind the user's back


LLAMA3_RATES = str(Path(__file__).resolve().parents[1] / "analysis" / "data" / "llama3_rates.csv")


@pytest.mark.parametrize(
    "command, said",
    [
        (["project", "--mtti", "24h"], "MTTI                  24.0 h"),
        (["project", "--rates", LLAMA3_RATES, "--format", "csv"], ",3.093078758949"),
        (["whatif", "--rates", LLAMA3_RATES], "MTTI 3.1 h; each change alone"),
        # the scenario's rates: the Llama 3 rates file
        (["fleetsim", "--workers", "1", "--scenario"], "scenario example-100k: 2 replications"),
    ],
    ids=["project-mtti", "project-rates", "whatif-rates", "fleetsim-rates"],
)
def test_given_rates_run_without_a_warehouse_and_make_none(tmp_path, capsys, command, said):
    from test_fleetsim import small_example

    if command[0] == "fleetsim":
        command = [*command, str(small_example(tmp_path))]
    home = tmp_path / "nowhere"
    assert main(["--home", str(home), *command]) == 0
    assert said in capsys.readouterr().out
    assert not home.exists()


def test_zero_needs_no_unit():
    assert parse_duration("0") == 0.0


def test_wrong_options_that_reject_every_record_say_so_with_the_fix(tmp_path, capsys):
    dump = FIXTURES / "slurm" / "xdmod__accounting-logs.log"
    assert (
        main(["--home", str(tmp_path / "h"), "ingest", "--fields", "jobid,state", str(dump)])
        == EXIT_REJECTED
    )
    line, nothing = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: {dump}: every record rejected (4): ")
    assert "--fields" in line and "has 2" in line
    assert nothing.startswith("goodput: error: nothing readable")
    assert not (tmp_path / "h").exists()  # the home it would have made is not left behind


@pytest.mark.parametrize(
    "flag, value",
    [("--fault-scale", "0"), ("--nodes", "0"), ("--days", "-1"), ("--scrape-interval", "0")],
)
def test_simulate_refuses_non_positive_settings_in_one_line(tmp_path, capsys, flag, value):
    assert main(["simulate", "--out", str(tmp_path / "f"), flag, value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and flag in err and not (tmp_path / "f").exists()


def _actions(parser, path=("goodput",)):
    """(command path, action) for every argument of every (sub)command; commands too."""
    import argparse

    for action in parser._actions:
        yield path, action
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), argparse.Action([], name, help=helps.get(name))
                yield from _actions(sub, (*path, name))


def test_every_command_and_option_has_help():
    import argparse

    from pipelines.cli import build_parser

    parser = build_parser()
    assert (
        "warehouse" in parser.description and "``" not in parser.format_help()
    )  # no docstring markup
    found = list(_actions(parser))
    missing = [
        f"{' '.join(p)} {'/'.join(a.option_strings) or a.dest}"
        for p, a in found
        if not a.help or a.help == argparse.SUPPRESS
    ]
    assert missing == []
    assert {"goodput ingest", "goodput project", "goodput completion"} <= {
        " ".join(p) for p, _ in found
    }


def _complete(line: str) -> list[str]:
    """What bash offers for ``line`` + TAB, through the script `goodput completion bash` prints."""
    import os
    from pathlib import Path

    words = line.split(" ")
    script = (
        'eval "$(goodput completion bash)"\n'
        f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); "
        f"COMP_CWORD={len(words) - 1}\n"
        '_python_argcomplete goodput; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, cwd=REPO, check=True
    )
    return sorted(w.strip() for w in out.stdout.splitlines() if w.strip())


def test_shell_completion_offers_commands_options_and_choices():
    for shell in ("bash", "zsh", "fish"):
        out = subprocess.run(
            [sys.executable, "-m", "pipelines.cli", "completion", shell],
            capture_output=True,
            text=True,
            cwd=REPO,
            check=True,
        ).stdout
        assert "goodput" in out and "_ARGCOMPLETE" in out
    assert _complete("goodput pro") == ["project"]
    assert _complete("goodput project --fleet") == ["--fleet-age"]
    assert _complete("goodput sql --format ") == ["csv", "json", "table"]


HEAVY = ("lifelines", "dagster", "altair", "pandas")
ANALYSES = ("analysis.trend", "analysis.breakdown", "numpy")
_IMPORTED = """
import json, sys
from pipelines.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


GPU_SHAPE, GPU_SCALE_H = 0.8, 2.0e5  # the stored fit the project commands read


@pytest.mark.parametrize(
    "argv, heavy",
    [
        ([], HEAVY),  # the import alone
        # building the parser imports no analysis (the choices of losses, trend and compare)
        (["--help"], (*HEAVY, "scipy", *ANALYSES)),
        (["--version"], (*HEAVY, "scipy", *ANALYSES)),
        (["sql", "select 1"], (*HEAVY, "scipy", *ANALYSES)),
        (["fit"], (*HEAVY, "scipy")),
        (["project", "--mtti", "3h", "--json"], (*HEAVY, "scipy")),
        (["project", "--json"], (*HEAVY, "scipy")),  # the stored fits and their posterior draws
        (["project"], (*HEAVY, "scipy")),
        (
            ["nodes"],
            (*HEAVY, "scipy.stats", "scipy.optimize"),
        ),  # the stored scores; Garwood CI only
        (["nodes", "--json"], (*HEAVY, "scipy.stats", "scipy.optimize")),
    ],
)
def test_quick_commands_import_only_what_they_need(tmp_path, argv, heavy):
    """`goodput fit` printing the stored table once spent ~10 s importing lifelines, and
    `project` / `nodes` a second on scipy: the quick commands load no Dagster, lifelines, Altair
    or pandas, and reading stored fits or node scores loads no scipy.stats / optimize (nor any
    scipy where no special function is needed) (timed in benchmarks/bench_cli_start.py)."""
    import polars as pl

    from warehouse.schemas import conform
    from warehouse.store import Warehouse

    wh = Warehouse(tmp_path / "h")
    params = json.dumps({"shape": {"value": GPU_SHAPE}, "scale_hours": {"value": GPU_SCALE_H}})
    own = 24_000 / (GPU_SCALE_H * math.gamma(1 + 1 / GPU_SHAPE))
    wh.replace_table(
        "failure_rates",
        conform(
            "failure_rates",
            pl.DataFrame(
                {
                    "component_class": ["gpu"],
                    "window": ["all"],
                    "stratum": ["all"],
                    "model": ["weibull"],
                    "selected": [True],
                    "n_units": [256],
                    "n_events": [7],
                    "exposure_hours": [7 / 1.25 * 24_000],
                    # the Weibull row's rate, here the law's long-run rate 1 / mean
                    "rate_per_1k_unit_days": [own],
                    "rate_ci_low": [own * 0.4],
                    "rate_ci_high": [own * 2.1],
                    "params": [params],
                    "method": ["per-unit"],
                    "population": ["inventory"],
                }
            ),
        ),
    )
    wh.replace_table(
        "node_health",
        conform(
            "node_health",
            pl.DataFrame(
                {
                    "host": ["n1", "n2", "n3"],
                    "node_hours": [1000.0, 1000.0, 0.0],
                    "failures": [9, 1, 0],
                    "expected_failures": [5.0, 5.0, None],
                    "excess_failures": [4.0, -4.0, None],
                    "test": ["exact Poisson", "exact Poisson", "not tested"],
                    "p_value": [0.07, 0.99, None],
                    "p_adjusted": [0.01, 0.99, None],
                    "alpha": [0.05] * 3,
                    "lemon": [True, False, None],
                }
            ),
        ),
    )
    args = ["--home", str(wh.home), *argv] if argv else []
    code = (
        _IMPORTED.format(heavy=heavy)
        if argv
        else (
            f"import json, sys, pipelines.cli\nprint(json.dumps(sorted(m for m in {heavy} if m "
            "in sys.modules)))"
        )
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=REPO, check=True
    )
    *printed, loaded = out.stdout.splitlines()
    assert json.loads(loaded) == []
    if argv[:1] == ["fit"]:
        assert any(line.split()[:2] == ["gpu", "weibull"] for line in printed)
    # a job on 16,384 GPUs carries 16,384 GPUs at the row's rate (the law's 1 / mean)
    fitted_mtti = GPU_SCALE_H * math.gamma(1 + 1 / GPU_SHAPE) / 16_384
    if argv == ["project", "--mtti", "3h", "--json"]:
        assert json.loads(printed[-1])["mtti_hours"] == 3.0
    elif argv == ["project", "--json"]:
        res = json.loads(printed[-1])
        assert res["mtti_hours"] == pytest.approx(fitted_mtti)
        assert res["goodput_ci_low"] < res["goodput"] < res["goodput_ci_high"]
    elif argv == ["project"]:
        assert any(f"{fitted_mtti:.3g}" in line for line in printed)
    # nodes projects from the same fitted rates as project (one number); 10 failures in 2,000
    # node-hours, refitted without the lemon n1 1 in 1,000: the gpu rate x 0.2
    if argv == ["nodes", "--json"]:
        res = json.loads(printed[-1])
        assert res["summary"]["lemons"] == 1 and res["nodes"][0]["host"] == "n1"
        assert res["gain"]["basis"] == "fitted rates"
        assert res["gain"]["baseline"]["mtti_hours"] == pytest.approx(fitted_mtti)
        assert res["gain"]["without_lemons"]["mtti_hours"] == pytest.approx(fitted_mtti / 0.2)
    elif argv == ["nodes"]:
        assert printed[0].startswith("nodes: 3, tested: 2, lemons: 1")
        assert f"fitted rates: MTTI {fitted_mtti:.3g} h" in printed[-1]


def test_ingest_is_recorded_as_a_run_in_the_homes_dagster_instance(tmp_path, capsys):
    """`dagster dev` on HOME/.dagster shows what `goodput ingest` materialized (run, asset
    metadata, telemetry days as gpu_hourly partitions), like demo and build."""
    import dagster as dg

    from pipelines.assets import TELEMETRY_DAYS
    from pipelines.run import instance_for

    home = tmp_path / "h"
    sacct = FIXTURES / "slurm" / "xdmod__accounting-logs.log"
    scrape = REPO / "sample_data" / "fleet" / "dcgm" / "gpu-node-001" / "2026-01-05.prom.gz"
    assert main(["--home", str(home), "ingest", str(sacct)]) == 0
    assert main(["--home", str(home), "ingest", str(sacct), str(scrape)]) == 0
    capsys.readouterr()
    with instance_for(home) as instance:
        runs = instance.get_runs()
        assert [r.job_name for r in runs] == ["ingest", "ingest"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        events = instance.fetch_materializations(dg.AssetKey("ingested_sources"), limit=10).records
        assert len(events) == 2 and {e.run_id for e in events} == {r.run_id for r in runs}
        latest = events[0].asset_materialization.metadata  # newest first
        first = events[1].asset_materialization.metadata
        assert (first["files_new"].value, first["rows"].value, first["telemetry_days"].value) == (
            1,
            4,
            0,
        )
        assert (latest["files_new"].value, latest["files_already_ingested"].value) == (1, 1)
        assert set(latest["by_format"].value) == {"dcgm"} and latest["rows"].value > 0
        days = instance.get_dynamic_partitions(TELEMETRY_DAYS.name)
        assert len(days) == latest["telemetry_days"].value >= 1


def test_ui_launched_jobs_fork_their_steps_from_the_preloaded_definitions():
    """A fresh interpreter per step re-imported the code location for each of the build's steps: a
    UI run took 1.6x the CLI's (benchmarks/bench_ui_vs_cli.py). Every job of the definitions, the
    UI's ad hoc asset materializations included, forks its step processes from a forkserver that
    imported the definitions once."""
    from pipelines.definitions import PRELOAD
    from pipelines.definitions import defs
    from pipelines.definitions import preloaded_multiprocess

    jobs = {name: defs.resolve_job_def(name) for name in ("build", "ingest")}
    jobs["materialize"] = defs.resolve_implicit_global_asset_job_def()
    assert {name: job.executor_def.name for name, job in jobs.items()} == {
        name: "preloaded_multiprocess" for name in jobs
    }
    resolved = preloaded_multiprocess.config_schema.resolve_config(
        {"config": {"max_concurrent": 2}}
    ).value["config"]
    assert (resolved["max_concurrent"], resolved["start_method"]) == (
        2,
        PRELOAD,
    )  # per-run concurrency still set
    assert PRELOAD["forkserver"]["preload_modules"] == ["pipelines.definitions"]


@pytest.mark.parametrize("columns", [None, "80", "160"])
def test_fit_keeps_to_the_width_and_lists_classes_by_rate(wh, capsys, monkeypatch, columns):
    """``goodput fit`` fits 100 characters (or $COLUMNS): columns that do not fit are left out
    and named; the classes come highest rate first."""
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    fits = llama3_fits().with_columns(
        n_units=pl.lit(2048), n_events=pl.lit(1), method=pl.lit("exposure-table")
    )
    wh.replace_table("failure_rates", fits)
    assert main(["--home", str(wh.home), "fit"]) == 0
    out = capsys.readouterr().out.splitlines()
    width = int(columns or 100)
    assert max(map(len, out)) <= width
    assert ("left out to fit" in "\n".join(out)) == (width < 160)
    head = next(i for i, line in enumerate(out) if line.startswith("class "))
    classes = [line.split()[0] for line in out[head + 2 : head + 2 + fits.height]]
    by_rate = fits.sort("rate_per_1k_unit_days", "component_class", descending=[True, False])
    assert classes == by_rate["component_class"].to_list()
