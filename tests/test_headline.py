"""analysis.headline accessors that the report, the CLI and the asset metadata share."""

import polars as pl

from analysis.headline import MONTHLY
from analysis.headline import selected_rates
from analysis.headline import unit_populations


def _rates() -> pl.DataFrame:
    rows = [
        # class, window, stratum, population, selected
        ("gpu", "all", "all", "inventory", True),
        ("gpu", "all", "all", "inventory", False),
        ("psu", "all", "all", "inventory", True),
        ("nic", "all", "all", None, True),
        ("cooling", "all", "all", "observed_units", True),
        ("gpu", "2026-01", "all", "telemetry", True),  # a month: not the whole period
        ("gpu", "all", "sku=H100", "telemetry", True),  # a stratum: not the whole fleet
    ]
    return pl.DataFrame(
        rows,
        schema=["component_class", "window", "stratum", "population", "selected"],
        orient="row",
    )


def test_unit_populations_are_the_whole_period_whole_fleet_rows_per_population():
    assert unit_populations(_rates()) == [
        (None, "nic"),
        ("inventory", "gpu, psu"),
        ("observed_units", "cooling"),
    ]
    assert unit_populations(_rates().clear()) == []


def test_selected_rates_by_window_and_stratum():
    df = _rates()
    assert sorted(selected_rates(df)["component_class"]) == ["cooling", "gpu", "nic", "psu"]
    assert selected_rates(df, window=MONTHLY)["population"].to_list() == ["telemetry"]
    assert selected_rates(df, stratum="sku=H100").height == 1
