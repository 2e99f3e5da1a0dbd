"""The command line's habits: no silent damage (a failed command creates nothing, `demo` keeps
to its own home, `build` needs data), one-line argument errors with "did you mean", counts
with suffixes, examples in every main command's help."""

import argparse
import shlex

import pytest

from pipelines.cli import build_parser
from pipelines.cli import main
from pipelines.cli.errors import EXIT_REJECTED
from pipelines.cli.values import COUNT_FORMS
from pipelines.cli.values import parse_count
from tests.conftest import FIXTURES
from tests.conftest import SACCT_JOB_MIX
from tests.conftest import ingest_with_cli

SACCT = FIXTURES / "slurm" / "xdmod__accounting-logs.log"


def one_line_error(capsys, argv: list[str]) -> str:
    """stderr of ``argv``, which must fail with status 2 in one line."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "usage:" not in err, err
    return err


@pytest.mark.parametrize(
    "argv, message",
    [
        (["build"], "no warehouse at"),
        (["build", "--ckpt-interval", "0"], "no warehouse at"),
        (["ingest", "/definitely/missing"], "no such file or directory"),
        (["ingest", "--tz", "Mars/Olympus", str(SACCT)], "unknown time zone"),
        (["pull"], "no sources configured"),
        (["forget", "nothing-like-this"], "not an ingested file path or sha256"),
        (["demo", "--gpus", "1"], "unrecognized arguments"),
    ],
)
def test_a_failed_command_leaves_no_home_behind(tmp_path, capsys, argv, message):
    home = tmp_path / "typo"
    assert message in one_line_error(capsys, ["--home", str(home), *argv])
    assert not home.exists()


def test_a_failed_command_keeps_a_home_that_existed(tmp_path, capsys):
    home = tmp_path / "h"
    assert main(["--home", str(home), "ingest", str(SACCT)]) == 0
    one_line_error(capsys, ["--home", str(home), "ingest", "/definitely/missing"])
    assert (home / "warehouse.duckdb").exists()


def test_build_on_a_home_without_data_is_one_line(tmp_path, capsys):
    from warehouse.store import Warehouse

    home = Warehouse(tmp_path / "h").home  # a warehouse, nothing ingested
    assert "nothing to build in" in one_line_error(capsys, ["--home", str(home), "build"])


def test_demo_refuses_a_home_holding_other_data(tmp_path, capsys):
    home = tmp_path / "h"
    assert main(["--home", str(home), "ingest", str(SACCT)]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, ["--home", str(home), "demo"])
    assert f"{home} holds other data (1 file(s) ingested, e.g. {SACCT})" in err
    assert "goodput demo --home DIR" in err


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["ingset", "x"], "did you mean 'ingest'?"),
        (["sql", "--format", "tabel", "select 1"], "did you mean 'table'?"),
        (["project", "--gpu-count", "5"], "--gpu-count: did you mean --gpus?"),
        (["build", "--ckpt-intervl", "1h"], "--ckpt-intervl: did you mean --ckpt-interval?"),
        (["project", "--gpus", "32q"], COUNT_FORMS),
        (["project", "--gpus"], "expected one argument"),
    ],
)
def test_argument_errors_are_one_line_with_the_closest_choice(capsys, argv, hint):
    assert hint in one_line_error(capsys, argv)


@pytest.mark.parametrize(
    "text, value",
    [
        ("32768", 32768),
        ("32k", 32_000),
        ("32K", 32_000),
        ("32Ki", 32_768),
        ("16Ki", 16_384),
        ("1.5M", 1_500_000),
        ("1Mi", 1 << 20),
        ("100_000", 100_000),
        ("100,000", 100_000),
        ("-1", -1),
    ],
)
def test_counts_read_si_and_binary_suffixes(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["32q", "1.5", "1.0005k", "k", "", "1e3"])
def test_counts_that_are_not_whole_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="as a count"):
        parse_count(text)


def test_every_integer_option_reads_counts():
    args = build_parser().parse_args(["project", "--gpus", "32Ki", "--spares", "1k"])
    assert (args.gpus, args.spares) == (32_768, 1_000)
    assert build_parser().parse_args(["simulate", "--out", "x", "--nodes", "2Ki"]).nodes == 2048


def test_every_main_command_has_examples_that_parse():
    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    # each command declares its examples with its sub-parser: the lines after "examples:"
    examples_of = {
        name: [line[2:] for line in sub.epilog.split("\n")[1:]]
        for name, sub in subs.items()
        if sub.epilog and sub.epilog.startswith("examples:\n")
    }
    missing = {"demo", "ingest", "build", "fit", "project", "nodes", "report", "sql", "pull"} - set(
        examples_of
    )
    assert not missing
    for name, examples in examples_of.items():
        assert "examples:" in subs[name].format_help()
        for example in examples:
            if example.startswith("goodput "):
                words = shlex.split(example.split(" > ")[0].split("    #")[0])[1:]
                assert build_parser().parse_args(words).command == name, example
                assert f"  {example}" in subs[name].format_help()


def test_ingest_counts_ingested_rejected_and_unchanged_files_apart(tmp_path, capsys):
    """A file of records none of which could be read is rejected, not "ingested": the summary
    says so and the exit status is EXIT_REJECTED; what the other files gave is stored."""
    from warehouse.store import Warehouse

    home = str(tmp_path / "h")
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nnot a known format\n")
    assert main(["--home", home, "ingest", str(SACCT)]) == 0
    capsys.readouterr()
    assert main(["--home", home, "ingest", str(SACCT), str(junk)]) == EXIT_REJECTED
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == (
        "ingested 0 file(s), 0 rows, 0 quarantined; 1 rejected (every record quarantined); 1 "
        "already ingested (unchanged)"
    )
    assert f"warning: {junk}: every record rejected (1): format not recognised" in err
    assert Warehouse(home).read("job_attempts").height == 4


def test_an_empty_file_is_announced_not_a_rejection(tmp_path, capsys):
    """A log just rotated is empty: no record was rejected, so the ingest does not fail (a cron
    job over /var/log would otherwise fail every rotation); the summary and stderr say so."""
    home = str(tmp_path / "h")
    empty = tmp_path / "kern.log.1"
    empty.write_bytes(b"")
    assert main(["--home", home, "ingest", str(SACCT), str(empty)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].endswith("; 1 empty")
    assert f"warning: {empty}: empty file" in err


def test_a_file_rejected_in_one_format_is_read_again_in_another_without_replace(tmp_path, capsys):
    from warehouse.store import Warehouse

    home = str(tmp_path / "h")
    dump = (
        tmp_path / "jobs.dat"
    )  # a sacct dump whose header the detector cannot see: comment lines first
    dump.write_text("".join(f"# export {i}\n" for i in range(2000)) + SACCT.read_text())
    assert main(["--home", home, "ingest", str(dump)]) == EXIT_REJECTED
    assert "format not recognised" in capsys.readouterr().err
    assert main(["--home", home, "ingest", "--format", "sacct", str(dump)]) == 0
    assert capsys.readouterr().out.startswith("ingested 1 file(s), 4 rows, 0 quarantined\n")
    wh = Warehouse(home)
    assert wh.read("quarantine").height == 0  # the old rejection is gone with its manifest row
    assert wh.read("ingest_manifest").select("format", "rows_ok").rows() == [("sacct", 4)]
    assert main(["--home", home, "ingest", "--format", "sacct", str(dump)]) == 0  # now unchanged
    assert "1 already ingested (unchanged)" in capsys.readouterr().out


def test_a_sacct_dump_without_times_nodes_or_tres_warns_with_the_command_that_exports_them(
    tmp_path, capsys
):
    from sources.slurm import SACCT_FIELDS

    plain = tmp_path / "plain.txt"  # `sacct -P` with its default fields
    plain.write_text(
        "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode\n1|train|gpu|a|8|COMPLETED|0:0\n"
        "2|train|gpu|a|8|FAILED|1:0\n"
    )
    full = SACCT_JOB_MIX
    assert main(["--home", str(tmp_path / "h"), "ingest", str(plain), str(full)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("ingested 2 file(s), 10 rows, 0 quarantined\n")
    assert f"next: goodput --home {tmp_path / 'h'} build" in out
    (line,) = err.splitlines()  # the complete dump gets no warning
    assert line.startswith(
        f"warning: {plain}: none of its 2 job(s) has Start, End, NodeList, AllocTRES: "
    )
    assert line.endswith(
        f"sacct --parsable2 --allocations --duplicates --format={','.join(SACCT_FIELDS)} "
        "-S START -E END"
    )


def test_tab_completes_formats_and_the_warehouses_clusters_partitions_and_accounts(tmp_path):
    from ingest.registry import formats
    from tests.test_cli import _complete

    home = tmp_path / "h"
    ingest_with_cli(home, SACCT_JOB_MIX)
    assert _complete("goodput ingest --format ") == sorted(["auto", *formats()])
    assert _complete(f"goodput --home {home} fit --cluster ") == ["tb01ebc"]
    assert _complete(f"goodput --home {home} build --account r") == ["root"]
    assert _complete(f"goodput --home {tmp_path / 'none'} fit --cluster ") == []
    assert not (tmp_path / "none").exists()


def test_stand_in_times_and_guessed_hosts_are_announced_once_and_kept_in_the_manifest(
    tmp_path, capsys
):
    import os
    import shutil
    from datetime import datetime

    from ingest.base import STAND_IN_HOST
    from ingest.base import STAND_IN_TIME
    from warehouse.store import Warehouse

    sdr = tmp_path / "node07.sdr"  # ipmitool sdr output carries neither a time nor a host
    shutil.copy(FIXTURES / "bmc" / "collegeboreal__hp-dl360-g7_sdr_elist_full.txt", sdr)
    mtime = datetime(2026, 1, 5, 10, 0, 0, 123456)
    os.utime(sdr, (mtime.timestamp(),) * 2)
    smi = sorted((FIXTURES / "nvidia-smi").glob("*.csv"))  # timestamped rows, no hostname column
    home = str(tmp_path / "h")
    assert main(["--home", home, "ingest", str(sdr), *map(str, smi)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in err] == [
        "note: 1 file(s) carry no record times: each one's modification time stands in",
        "note: 3 file(s) name no host: each one's host was taken from its file name",
    ]
    wh = Warehouse(home)
    assert dict(wh.read("ingest_manifest").select("path", "stand_ins").rows()) == {
        str(sdr): f"{STAND_IN_TIME}, {STAND_IN_HOST}",
        **{str(p): STAND_IN_HOST for p in smi},
    }
    sensors = wh.read("bmc_sensors")
    assert set(sensors["host"]) == {"node07"}
    assert {t.replace(tzinfo=None) for t in sensors["time"]} == {mtime}
    # told what it is, the file stands in for nothing
    assert (
        main(
            [
                "--home",
                home,
                "ingest",
                "--replace",
                "--host",
                "n1",
                "--time",
                "2026-01-05T11:00:00",
                str(sdr),
            ]
        )
        == 0
    )
    assert capsys.readouterr().err == ""
    assert wh.read("ingest_manifest", f"path = '{sdr}'")["stand_ins"].to_list() == [None]
