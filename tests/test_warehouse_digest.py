"""The refactor check (benchmarks/warehouse_digest.py) says equal only when the tables are, and
names what differs otherwise."""

from __future__ import annotations

import polars as pl

from benchmarks.warehouse_digest import compare
from benchmarks.warehouse_digest import digest
from tests.test_report import fixture_warehouse


def test_two_homes_of_the_same_data_digest_equal_and_a_changed_value_is_named(tmp_path):
    a = fixture_warehouse(tmp_path / "a")
    fixture_warehouse(tmp_path / "b")
    before = digest(tmp_path / "a")
    assert compare(before, digest(tmp_path / "b")) == []  # another home, the same data
    rates = a.read("failure_rates")
    assert rates.height > 0
    # float noise below 9 significant digits is not a difference
    rate = pl.col("rate_per_1k_unit_days")
    a.replace_table("failure_rates", rates.with_columns(rate * (1 + 1e-12)))
    assert compare(before, digest(tmp_path / "a")) == []
    a.replace_table("failure_rates", rates.with_columns(rate * 1.001))
    n = rates.height
    assert compare(before, digest(tmp_path / "a")) == [
        f"failure_rates: rows {n} -> {n}; columns differ: ['rate_per_1k_unit_days']"
    ]
