"""One answer per question on the demo fleet: a scoped reading command equals the whole fleet's
stored table filtered to the scope (by cluster, partition, account, user and a month), and the
CLI, `goodput sql` and the report print the same fleet goodput, lost GPU-hours by cause and
MTBF of a month."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest

from analysis.numbers import pct
from analysis.trend import data_window
from pipelines.cli import main

FEB, MAR = datetime(2026, 2, 1), datetime(2026, 3, 1)
KEYS = ["cluster", "scheduler", "job_id", "attempt"]
SCOPES = {  # flags -> (dimension, value) of job_attempts, or None for the month
    ("--cluster", "simfleet"): ("cluster", "simfleet"),
    ("--partition", "train"): ("partition", "train"),
    ("--account", "llm"): ("account", "llm"),
    ("--user", "alice"): ("user", "alice"),
    ("--from", "2026-02-01", "--to", "2026-03-01"): None,
}


def _json(capsys, wh, *argv) -> dict | list:
    assert main(["--home", str(wh.home), *argv]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _scope_rows(wh, dim):
    """The whole fleet's unplanned interruptions filtered to the scope by hand, and the hours
    its MTBF is counted over (the fleet's job window, or February's 672 h)."""
    intr = wh.read("interruptions").filter(~pl.col("planned"))
    att = wh.read("job_attempts")
    lo, hi = data_window(att)
    if dim is None:
        return intr.filter(pl.col("end_time").is_between(FEB, MAR, closed="left")), 672.0
    keys = att.filter(pl.col(dim[0]) == dim[1]).select(KEYS)
    return intr.join(keys, on=KEYS, how="semi"), (hi - lo).total_seconds() / 3600


@pytest.mark.parametrize("flags", list(SCOPES), ids=lambda f: "-".join(f).strip("-"))
def test_scoped_losses_are_the_fleets_interruptions_filtered(demo, capsys, flags):
    wh, _ = demo
    mine, hours = _scope_rows(wh, SCOPES[flags])
    assert mine.height  # the scope holds interruptions to compare
    got = _json(capsys, wh, "losses", "--by", "cause", "--json", *flags)
    want = (
        mine.group_by(pl.col("cause_class").alias("cause"))
        .agg(n=pl.len(), lost=pl.col("lost_gpu_hours").fill_null(0).sum())
        .sort("cause")
    )
    rows = sorted(got["rows"], key=lambda r: r["cause"])
    assert [r["cause"] for r in rows] == want["cause"].to_list()  # the stored class names
    assert [r["interruptions"] for r in rows] == want["n"].to_list()
    assert [r["lost_gpu_hours"] for r in rows] == pytest.approx(want["lost"].to_list(), rel=1e-9)
    assert [r["mtbf_hours"] for r in rows] == pytest.approx(
        [hours / n for n in want["n"]], rel=1e-9
    )
    assert got["scope"]["description"] and all(
        got["scope"][f.removeprefix("--")] is not None for f in flags if f.startswith("--")
    )


def test_a_month_scope_has_the_months_hours_and_the_period_rows_figures(demo, capsys):
    """`--from/--to` of February == `--period month`'s February row: same causes, lost
    GPU-hours and MTBF over February's 672 h (not the 768 h its jobs' span would give), and an
    interruption ending exactly at `to` is outside."""
    wh, _ = demo
    month = ("--from", "2026-02-01", "--to", "2026-03-01")
    scoped = _json(capsys, wh, "losses", "--json", *month)["rows"]
    feb = [
        r
        for r in _json(capsys, wh, "losses", "--period", "month", "--json")["rows"]
        if r["period_start"].startswith("2026-02-01")
    ]
    assert len(scoped) == len(feb)
    for mine, row in zip(
        *(sorted(x, key=lambda r: r["cause"]) for x in (scoped, feb)), strict=True
    ):
        assert mine["cause"] == row["cause"] and mine["interruptions"] == row["interruptions"]
        for key in ("lost_gpu_hours", "share", "mtbf_hours"):
            assert mine[key] == pytest.approx(row[key], rel=1e-9), key
    gpu = next(r for r in scoped if r["cause"] == "gpu")
    assert gpu["mtbf_hours"] == pytest.approx(672 / gpu["interruptions"])
    trend = _json(capsys, wh, "trend", "--period", "month", "--json", *month)["rows"]
    whole = _json(capsys, wh, "trend", "--period", "month", "--json")["rows"]
    row = next(r for r in whole if r["period_start"].startswith("2026-02-01"))
    assert len(trend) == 1 and trend[0]["hours"] == 672.0
    for key in ("gpu_hours", "goodput", "lost_gpu_hours", "interruptions", "mtbf_hours"):
        assert trend[0][key] == pytest.approx(row[key], rel=1e-9), key
    # `to` is exclusive: a scope ending at the last interruption's end leaves that one out
    last = wh.read("interruptions").filter(~pl.col("planned")).sort("end_time")[-1]
    end = last["end_time"][0].isoformat()
    got = _json(capsys, wh, "losses", "--json", "--from", "2026-03-01", "--to", end)["rows"]
    n = (
        wh.read("interruptions")
        .filter(~pl.col("planned") & pl.col("end_time").is_between(MAR, last["end_time"][0]))
        .height
    )
    assert sum(r["interruptions"] for r in got) == n - 1


def test_compare_in_a_month_counts_the_months_own_gpu_hours(demo, capsys):
    wh, _ = demo
    got = _json(capsys, wh, "compare", "--by", "cluster", "--json", "--from", "2026-02-01",
                "--to", "2026-03-01")["rows"]  # fmt: skip
    whole = _json(capsys, wh, "trend", "--period", "month", "--json")["rows"]
    feb = next(r for r in whole if r["period_start"].startswith("2026-02-01"))
    assert len(got) == 1 and got[0]["gpu_hours"] == pytest.approx(feb["gpu_hours"], rel=1e-9)
    assert got[0]["goodput"] == pytest.approx(feb["goodput"], rel=1e-9)


def test_every_scoped_output_names_its_scope(demo, capsys):
    wh, _ = demo
    flags = ("--partition", "train", "--from", "2026-02-01", "--to", "2026-03-01")
    name = "partition train, 2026-02-01 to 2026-03-01"
    for command in (["losses"], ["trend"], ["compare", "--by", "account"]):
        assert main(["--home", str(wh.home), *command, *flags]) == 0
        assert capsys.readouterr().out.splitlines()[0] == f"scope: {name}"
        assert main(["--home", str(wh.home), *command, "--format", "csv", *flags]) == 0
        csv = pl.read_csv(capsys.readouterr().out.encode())
        assert set(csv["scope"]) == {name}
        obj = _json(capsys, wh, *command, "--json", *flags)
        assert obj["scope"] == {"from": "2026-02-01T00:00:00", "to": "2026-03-01T00:00:00",
                                "cluster": None, "partition": "train", "account": None,
                                "user": None, "description": name}  # fmt: skip
    # unscoped: no scope line and no column; JSON says the whole fleet
    assert main(["--home", str(wh.home), "losses", "--format", "csv"]) == 0
    assert "scope" not in capsys.readouterr().out.splitlines()[0]
    assert _json(capsys, wh, "losses", "--json")["scope"]["description"] == "whole fleet"


def test_sql_over_a_scope_shows_its_rows_and_refuses_the_fleets_aggregates(demo, capsys):
    wh, _ = demo
    flags = ("--partition", "train", "--from", "2026-02-01", "--to", "2026-03-01")
    got = _json(capsys, wh, "sql", "--format", "json", *flags,
                "select cause_class, count(*) n, sum(lost_gpu_hours) lost from interruptions "
                "where not planned group by 1 order by 1")  # fmt: skip
    cli = _json(capsys, wh, "losses", "--json", *flags)["rows"]
    assert {r["cause_class"]: r["n"] for r in got} == {r["cause"]: r["interruptions"] for r in cli}
    assert {r["cause_class"]: r["lost"] for r in got} == pytest.approx(
        {r["cause"]: r["lost_gpu_hours"] for r in cli}, rel=1e-9
    )
    assert main(["--home", str(wh.home), "sql", *flags, "select * from failure_rates"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "failure_rates is computed over the whole fleet" in err


def test_cli_sql_and_report_print_one_goodput_one_loss_mix_and_one_month_mtbf(demo, capsys):
    from dashboards.report import build_sections

    wh, _ = demo
    # fleet goodput, GPU-hour weighted
    query = (
        "select sum(productive_hours * n_gpus) / sum(wall_hours * n_gpus) g from goodput_jobs "
        "where wall_hours > 0"
    )
    sql = _json(capsys, wh, "sql", "--format", "json", query)[0]["g"]
    cli = _json(capsys, wh, "compare", "--by", "cluster", "--json")["rows"]
    assert len(cli) == 1 and cli[0]["goodput"] == pytest.approx(sql, rel=1e-9)
    sections = {s.key: s for s in build_sections(wh)}
    assert f"measured goodput is {pct(sql)}" in sections["headline"].reading
    # lost GPU-hours by cause
    query = (
        "select cause_class, sum(lost_gpu_hours) lost from interruptions where not planned "
        "group by 1"
    )
    sql = _json(capsys, wh, "sql", "--format", "json", query)
    cli = _json(capsys, wh, "losses", "--json")["rows"]
    by_sql = {r["cause_class"]: r["lost"] for r in sql}
    assert {r["cause"]: r["lost_gpu_hours"] for r in cli} == pytest.approx(by_sql, rel=1e-9)
    causes = sections["causes"].spec
    pareto = causes["datasets"][causes["hconcat"][0]["data"]["name"]]
    assert {r["cause_class"]: r["lost_gpu_hours"] for r in pareto} == pytest.approx(by_sql)
    # MTBF of February: its 672 h over its unexpected interruptions
    query = (
        "select count(*) n from interruptions where not planned "
        "and end_time >= '2026-02-01' and end_time < '2026-03-01'"
    )
    n = _json(capsys, wh, "sql", "--format", "json", query)[0]["n"]
    feb = next(
        r
        for r in _json(capsys, wh, "trend", "--period", "month", "--json")["rows"]
        if r["period_start"].startswith("2026-02-01")
    )
    stored = wh.read("goodput_trend").filter(
        (pl.col("period") == "month") & (pl.col("period_start") == FEB)
    )
    assert feb["mtbf_hours"] == pytest.approx(672 / n, rel=1e-9)
    assert stored["mtbf_hours"][0] == pytest.approx(672 / n, rel=1e-9)
