"""Every interruption class in projections: measured per-class rates from ``interruptions``
join the hardware fits, by scope (hardware | infrastructure | all)."""

import json
from datetime import datetime, timedelta

import polars as pl
import pytest

from analysis.projection import daly_interval
from analysis.whatif import refresh_projections
from pipelines.cli import main
from warehouse.schemas import TABLES, conform

T0 = datetime(2026, 1, 1)
R_GPU = 2e-6  # fitted gpu failures per GPU-hour


@pytest.fixture
def fleet_wh(wh):
    # 10 one-node attempts of 8 GPUs for 100 h: 8,000 GPU-hours, 1,000 node-hours
    att = [
        {"cluster": "c", "scheduler": "slurm", "job_id": str(i), "attempt": 1, "state": "COMPLETED",
         "n_gpus": 8, "n_nodes": 1, "start_time": T0, "end_time": T0 + timedelta(hours=100)}
        for i in range(10)
    ]  # fmt: skip
    wh.replace_table("job_attempts", conform("job_attempts", pl.DataFrame(att)))

    def intr(n, cls, domain, planned=False):
        return [
            {"cluster": "c", "scheduler": "slurm", "job_id": f"{cls}{domain}{i}", "attempt": 1,
             "end_time": T0, "n_gpus": 8, "cause_class": cls, "failure_domain": domain,
             "planned": planned}
            for i in range(n)
        ]  # fmt: skip

    rows = (
        intr(4, "software", "infrastructure")  # NCCL hang attributed to the fabric side
        + intr(2, "host_os", "infrastructure")
        + intr(1, None, "unknown")
        + intr(6, "software", "workload")  # the job's own exit codes / OOM
        + intr(
            3, "host_os", "infrastructure", planned=True
        )  # maintenance: not an interruption rate
        + intr(5, "gpu", "infrastructure")  # has a hardware fit: counted there, not twice
    )
    wh.replace_table("interruptions", conform("interruptions", pl.DataFrame(rows)))
    fr = pl.DataFrame(
        {"component_class": ["gpu"], "stratum": "all", "window": "all", "model": "exponential",
         "selected": True, "params": "{}", "rate_per_1k_unit_days": [R_GPU * 24_000],
         "rate_ci_low": [R_GPU * 24_000 * 0.8], "rate_ci_high": [R_GPU * 24_000 * 1.25]}
    )  # fmt: skip
    wh.replace_table("failure_rates", conform("failure_rates", fr))
    return wh


def _project(wh, capsys, *extra):
    assert main(["--home", str(wh.home), "project", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_scopes_add_measured_classes_to_the_hardware_fits(fleet_wh, capsys):
    n, nodes = 16_384, 2048
    hw = _project(fleet_wh, capsys, "--scope", "hardware")
    infra = _project(fleet_wh, capsys)  # the default scope
    every = _project(fleet_wh, capsys, "--scope", "all")
    lam_hw = R_GPU * n
    lam_infra = lam_hw + 4 / 8000 * n + 2 / 1000 * nodes + 1 / 1000 * nodes
    lam_all = lam_infra + 6 / 8000 * n
    assert hw["mtti_hours"] == pytest.approx(1 / lam_hw)
    assert infra["mtti_hours"] == pytest.approx(1 / lam_infra)
    assert every["mtti_hours"] == pytest.approx(1 / lam_all)
    assert (hw["scope"], infra["scope"], every["scope"]) == ("hardware", "infrastructure", "all")
    by = {c["component_class"]: c for c in every["classes"]}
    assert by["gpu"]["source"] == "fit"
    assert by["software"] == {
        **by["software"],
        "source": "interruptions",
        "events": 4,
        "unit": "gpu",
    }
    assert by["host_os"]["events"] == 2 and by["host_os"]["unit"] == "node"
    assert by["unknown"]["events"] == 1 and by["workload"]["events"] == 6
    assert {c["component_class"] for c in infra["classes"]} == {
        "gpu",
        "software",
        "host_os",
        "unknown",
    }
    assert by["software"]["rate_per_unit_hour"] == pytest.approx(4 / 8000)


def test_projections_table_records_its_scope(fleet_wh):
    out = refresh_projections(fleet_wh, replicas=20, samples=50, spares_grid=(0, 4))
    assert set(out["scope"].unique()) == {"infrastructure"}
    base = out.filter((pl.col("scenario") == "sensitivity") & (pl.col("knob") == "baseline")).row(
        0, named=True
    )
    assert base["mtti_hours"] == pytest.approx(
        1 / (R_GPU * 16_384 + 4 / 8000 * 16_384 + 3 / 1000 * 2048)
    )
    # Daly's optimum is optimal_interval_hours, Young's sits beside it under its own name
    m, d = base["mtti_hours"], 60 / 3600
    assert base["optimal_interval_hours"] == pytest.approx(float(daly_interval(d, m)))
    assert base["young_interval_hours"] == pytest.approx((2 * d * m) ** 0.5)
    assert base["optimal_interval_hours"] != pytest.approx(base["young_interval_hours"])


def test_without_any_fit_the_measured_classes_still_project(fleet_wh, capsys):
    fleet_wh.replace_table("failure_rates", TABLES["failure_rates"].empty())
    obj = _project(fleet_wh, capsys)
    # gpu now comes from interruptions too (5 events in 8,000 GPU-hours)
    by = {c["component_class"]: c for c in obj["classes"]}
    assert by["gpu"]["source"] == "interruptions" and by["gpu"]["events"] == 5
    assert main(["--home", str(fleet_wh.home), "project", "--scope", "hardware"]) == 2
