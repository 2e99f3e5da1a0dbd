"""One fact, one place: the taxonomy, the Llama 3 table and the default assumptions are written
once and every user (projection, report, simulator, CLI, Dagster resource) reads them."""

import json
from pathlib import Path

import polars as pl
import pytest

from analysis import assumptions
from analysis import taxonomy
from analysis.goodput_measured import measure
from analysis.job import Job
from analysis.projection import interruption_rate
from analysis.rate_sources import llama3_rates
from analysis.rate_sources import rates_from_table
from dashboards.sections import causes
from ingest import xid_catalog
from pipelines.cli import main
from pipelines.cli.sample import llama3_cause_mix
from sample_data import model
from warehouse.schemas import COMPONENT_CLASSES

LLAMA_CSV = Path(__file__).resolve().parent.parent / "analysis" / "data" / "llama3_rates.csv"


def test_llama3_table_is_the_published_one_with_one_folding():
    assert sum(n for _, n, _ in taxonomy.LLAMA3_TABLE) == 419
    assert len(taxonomy.LLAMA3_TABLE) == 18
    mix = taxonomy.llama3_mix()
    # GSP and SDC are GPU faults, network switch/cable is the IB fabric, NCCL + dependency are
    # software
    assert mix["gpu"] == 148 + 17 + 6 and mix["ib_link"] == 35 and mix["software"] == 54 + 7 + 2
    assert mix["gpu_sram"] == 19 and mix["unknown"] == 2 + 2 and sum(mix.values()) == 419
    assert set(mix) <= set(taxonomy.CLASSES)
    # the report's reference mix is the same table and folding
    ref = dict(causes.llama3_frame().select("cause_class", "count").iter_rows())
    assert ref == mix
    # the simulator reads its counts from the same published table
    sim = llama3_cause_mix()
    assert model.class_counts(sim)["gpu"] == 148 + 17 + 19
    assert model.software_rate_per_node_hour(sim) == pytest.approx((54 + 7) / (2048 * 54 * 24))


def test_class_list_is_declared_once():
    assert xid_catalog.CLASSES is COMPONENT_CLASSES is taxonomy.CLASSES
    assert set(taxonomy.UNITS) - {taxonomy.WORKLOAD} == set(COMPONENT_CLASSES)


def test_default_assumptions_are_one_set():
    """The resource, the projections, Monte Carlo and measured goodput default to the values
    of analysis/assumptions.py (measured goodput's restart was once 300 s, not 600 s)."""
    from pipelines.resources import Settings

    a = assumptions
    cfg = Settings()
    assert (
        cfg.restart_s,
        cfg.ckpt_cost_s,
        cfg.ckpt_interval_s,
        cfg.target_gpus,
        cfg.gpus_per_node,
    ) == (a.RESTART_S, a.CKPT_COST_S, a.CKPT_INTERVAL_S, a.TARGET_GPUS, a.GPUS_PER_NODE)
    job = Job()
    assert (job.restart_s, job.ckpt_cost_s, job.n_gpus) == (
        a.RESTART_S,
        a.CKPT_COST_S,
        a.TARGET_GPUS,
    )
    # measured goodput's defaults: a restart after the failed attempt, with no checkpoint log
    att = pl.DataFrame(
        {
            "cluster": "c",
            "scheduler": "slurm",
            "job_id": "1",
            "attempt": [1, 2],
            "name": "x",
            "user": "u",
            "state": ["NODE_FAIL", "COMPLETED"],
            "n_gpus": 8,
            "start_time": [0, 7200],
            "end_time": [3600, 14400],
        }
    ).with_columns(
        *(pl.from_epoch(pl.col(c), "s") for c in ("start_time", "end_time")),
    )
    row = measure(att).row(0, named=True)
    assert row["restart_hours"] == pytest.approx(a.RESTART_S / 3600)
    assert (row["restart_s"], row["ckpt_cost_s"], row["ckpt_interval_s"], row["method"]) == (
        a.RESTART_S,
        a.CKPT_COST_S,
        a.CKPT_INTERVAL_S,
        "assumed",
    )


def test_shipped_llama3_csv_is_derived_from_the_taxonomy():
    shipped = pl.read_csv(LLAMA_CSV)
    assert shipped.equals(taxonomy.llama3_rates_frame())
    assert shipped["events"].sum() == 419


@pytest.mark.parametrize("gpus,expected", [(16_384, 54 * 24 / 419), (131_072, 54 * 24 / 419 / 8)])
def test_rates_file_with_the_llama3_table_gives_its_mtti(wh, capsys, gpus, expected):
    code = main(
        [
            "--home",
            str(wh.home),
            "project",
            "--rates",
            str(LLAMA_CSV),
            "--gpus",
            str(gpus),
            "--json",
        ]
    )
    assert code == 0
    obj = json.loads(capsys.readouterr().out)
    assert obj["mtti_hours"] == pytest.approx(expected, rel=1e-9)
    assert round(obj["mtti_hours"], 2) == (3.09 if gpus == 16_384 else 0.39)
    by = {c["component_class"]: c for c in obj["classes"]}
    assert by["host_os"]["unit"] == "node" and by["host_os"]["events"] == 32
    assert by["gpu"]["unit"] == "gpu" and by["gpu"]["source"] == "file"
    assert sum(c["events"] for c in obj["classes"]) == 419
    # the built-in Llama 3 rates are the same table spread over physical units
    assert 1 / float(interruption_rate(llama3_rates(), gpus, 8)[0]) == pytest.approx(expected)


def test_rates_file_mistakes_are_one_line(wh, tmp_path, capsys):
    bad = tmp_path / "r.csv"
    bad.write_text("component_class,events,exposure_hours,unit\ngpu,3,100,rack\n")
    assert main(["--home", str(wh.home), "project", "--rates", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unit one of gpu|node|job" in err
    bad.write_text("component_class,events\ngpu,3\n")
    assert main(["--home", str(wh.home), "project", "--rates", str(bad)]) == 2
    assert "lacks column(s) exposure_hours, unit" in capsys.readouterr().err
    assert main(["--home", str(wh.home), "project", "--rates", str(tmp_path / "none.csv")]) == 2
    assert "cannot read rates file" in capsys.readouterr().err


def test_rates_table_job_unit_counts_once_per_job():
    r = rates_from_table(
        pl.DataFrame(
            {"component_class": ["software", "scheduler"], "events": [10, 5],
             "exposure_hours": [1000.0, 50.0], "unit": ["gpu", "job"]}
        )
    )  # fmt: skip
    lam = interruption_rate(r, [8, 80], 8)
    assert lam.tolist() == pytest.approx([10 / 1000 * 8 + 5 / 50, 10 / 1000 * 80 + 5 / 50])
