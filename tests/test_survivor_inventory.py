"""A survivor-only inventory export (units in service at the window start + units installed and
removed since) gives the true rates once the window is given: units installed before it enter
left-truncated at its start (benchmarks/validate_survivor_inventory.py runs 20 seeds)."""

import contextlib
import io

import polars as pl

from analysis import survival as sv
from benchmarks.validate_survivor_inventory import LAWS
from benchmarks.validate_survivor_inventory import WINDOW_START
from benchmarks.validate_survivor_inventory import survivor_inventory
from benchmarks.validate_survivor_inventory import true_rate_per_1k_unit_days
from pipelines.cli import main
from warehouse.store import Warehouse


def test_survivor_only_export_with_observed_from_recovers_the_psu_rate(tmp_path):
    inv = survivor_inventory(LAWS, 3000, seed=3)
    csv = tmp_path / "cmdb_export.csv"
    inv.select(
        "component_class",
        "serial",
        "slot",
        *(pl.col(c).dt.strftime("%Y-%m-%dT%H:%M:%S") for c in ("installed_at", "removed_at")),
        "removal_reason",
        "failed",
    ).write_csv(csv)
    home = tmp_path / "home"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--home", str(home), "ingest", str(csv)]) == 0
        assert (
            main(
                [
                    "--home",
                    str(home),
                    "fit",
                    "--observed-from",
                    WINDOW_START.isoformat(),
                    "--observed-to",
                    "2026-01-01T00:00:00",
                ]
            )
            == 0
        )
    fr = (
        Warehouse(home)
        .read("failure_rates")
        .filter(
            (pl.col("stratum") == "all")
            & (pl.col("window") == "all")
            & (pl.col("component_class") == "psu")
        )
    )
    exp = fr.filter(pl.col("model") == "exponential").row(0, named=True)
    truth = true_rate_per_1k_unit_days(*LAWS["psu"])
    assert exp["rate_ci_low"] <= truth <= exp["rate_ci_high"]
    assert (
        0.75 < exp["rate_per_1k_unit_days"] / truth < 1.33
    )  # was 3.2x too low from the earliest install
    assert not sv.age_reading(fr.filter("selected").row(0, named=True)).startswith(
        "increasing"
    )  # constant hazard, not wear-out
    assert set(fr["population"]) == {"inventory"}
    assert (
        "observation window: 2025-01-01 00:00 .. 2026-01-01 00:00 UTC (365.0 days, explicit)"
        in out.getvalue()
    )
