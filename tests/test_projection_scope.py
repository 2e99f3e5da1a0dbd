"""Every interruption class in projections: measured per-class rates from ``interruptions``
join the hardware fits, by scope (hardware | infrastructure | all)."""

import json
from datetime import datetime
from datetime import timedelta

import polars as pl
import pytest

from analysis.projection import daly_interval
from analysis.whatif import refresh_projections
from pipelines.cli import main
from warehouse.schemas import TABLES
from warehouse.schemas import conform

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
    # the jobs' own failures: 6 in 1,000 job-hours of 8-GPU jobs (the size class nearest a
    # 16,384-GPU job that ran), once per job, not 6 per 8,000 GPU-hours times 16,384 GPUs
    lam_all = lam_infra + 6 / 1000
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
    assert (by["workload"]["unit"], by["workload"]["source"]) == (
        "job",
        "interruptions, jobs of 1-8 GPUs",
    )
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


def test_workload_failures_are_measured_per_job_in_the_projected_jobs_size_class(wh):
    """Small jobs fail often on their own (9 failures in 100 one-GPU job-hours), large ones
    rarely (1 in 100 job-hours of 1,024 GPUs): a 16,384-GPU projection takes the large jobs'
    rate per job-hour, an 8-GPU one the small jobs'; pooled per GPU-hour (10 in 102,500
    GPU-hours) a 16,384-GPU job would have had 1.6 own failures an hour instead of 0.01."""
    from analysis.rate_sources import interruption_class_rates

    att = [
        {"cluster": "c", "scheduler": "slurm", "job_id": f"{size}-{i}", "attempt": 1,
         "n_gpus": size, "start_time": T0, "end_time": T0 + timedelta(hours=10)}
        for size in (1, 1024) for i in range(10)
    ]  # fmt: skip
    own = [
        {"cluster": "c", "scheduler": "slurm", "job_id": f"{size}-{i}", "attempt": 1,
         "end_time": T0, "n_gpus": size, "cause_class": "software", "failure_domain": "workload"}
        for size, k in ((1, 9), (1024, 1)) for i in range(k)
    ]  # fmt: skip
    attempts = conform("job_attempts", pl.DataFrame(att))
    intr = conform("interruptions", pl.DataFrame(own))
    for n, rate, label in ((16_384, 1 / 100, "513-4096"), (8, 9 / 100, "1-8")):
        r = interruption_class_rates(intr, attempts, "all", n_gpus=n)
        i = r.classes.index("workload")
        assert r.rate[i] == pytest.approx(rate)
        assert r.origins[i] == f"interruptions, jobs of {label} GPUs"
        assert r.counts["workload"] == ("job", 1)
    assert interruption_class_rates(intr, attempts, "infrastructure") is None
