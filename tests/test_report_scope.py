"""The report names the interruption scope of its MTTI and projections, gives the
infrastructure and all-causes MTTI side by side, separates the jobs' own failures, and states
the assumptions of measured goodput beside the badput chart."""

from datetime import datetime

import polars as pl

from dashboards.report import build_sections
from tests.test_report import fixture_warehouse
from warehouse.schemas import conform


def _reading(sections, key):
    return next(s for s in sections if s.key == key).reading


def test_headline_gives_infrastructure_and_all_causes_mtti_and_names_the_scope(tmp_path):
    wh = fixture_warehouse(tmp_path / "home")
    intr = wh.read("interruptions")
    own = conform(
        "interruptions",
        pl.DataFrame(
            {
                "cluster": "c1",
                "scheduler": "slurm",
                "job_id": ["901", "902", "903", "904"],
                "attempt": 1,
                "end_time": datetime(2026, 1, 5, 5),
                "n_gpus": 8,
                "state": "FAILED",
                "cause_class": "software",
                "failure_domain": "workload",
                "planned": False,
            }
        ),
    )
    wh.replace_table("interruptions", pl.concat([intr, own]))
    proj = wh.read("goodput_projections").with_columns(pl.lit("infrastructure").alias("scope"))
    wh.replace_table("goodput_projections", proj)
    jobs = wh.read("goodput_jobs").with_columns(
        pl.Series("method", ["measured"] + ["assumed"] * (wh.read("goodput_jobs").height - 1)),
        pl.lit(1800.0).alias("ckpt_interval_s"), pl.lit(60.0).alias("ckpt_cost_s"),
        pl.lit(600.0).alias("restart_s"),
    )  # fmt: skip
    wh.replace_table("goodput_jobs", jobs)
    secs = build_sections(wh)
    head = _reading(secs, "headline")
    att = wh.read("job_attempts").drop_nulls(["start_time", "end_time"])
    span = (att["end_time"].max() - att["start_time"].min()).total_seconds() / 3600
    unplanned = intr.filter(~pl.col("planned")).height  # all infrastructure in the fixture
    assert f"{unplanned + 4:,} unexpected interruptions (4 the jobs' own failures)" in head
    infra_h, all_h = span / unplanned, span / (unplanned + 4)
    assert f"one every {infra_h:.1f} h across the fleet from infrastructure" in head
    assert f"one every {all_h:.1f} h from all causes" in head
    assert (
        "(scope infrastructure: everything but the job's own failures, the same as the time "
        "between interruptions above; fail-slow not included (no fail_slow rate in "
        "failure_rates))" in head
    )
    causes = _reading(secs, "causes")
    assert (
        f"4 were the jobs' own failures (failure domain workload: exit codes, OOM; class "
        f"software) and {unplanned} the fleet's." in causes
    )
    assert "Llama 3: " in causes.split("the fleet's.", 1)[1]  # compared on one denominator
    assert "Interruption scope: infrastructure" in _reading(secs, "goodput_scale")
    good = _reading(secs, "goodput_measured")
    assert good.endswith(
        f"Badput split: 1 job chains from their own checkpoint times, {jobs.height - 1} assuming "
        "a checkpoint every 30 min costing 60 s and a restart of 10 min after each failure "
        "(goodput build --ckpt-interval / --ckpt-cost / --restart)."
    )
