"""Shared fixtures: paths to committed fixtures and a throwaway warehouse."""

import contextlib
import io
import json
import os
from pathlib import Path

import polars as pl
import pytest

from warehouse.schemas import TABLES
from warehouse.store import Warehouse

# Tests write a file and ingest it at once: the CLI's settle wait (a file is read once it has
# not changed for a while) would only slow them; tests/test_attack_inputs.py tests it.
os.environ.setdefault("GOODPUT_SETTLE", "0")

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
SAMPLE_FLEET = REPO / "sample_data" / "fleet"


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "home")


@pytest.fixture(scope="session")
def demo(tmp_path_factory) -> tuple[Warehouse, str]:
    """``goodput demo`` on the committed sample fleet, run once for the whole session: the
    warehouse (read it, do not change it) and what the demo printed."""
    from pipelines.cli import main

    home = tmp_path_factory.mktemp("demo") / "home"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--home", str(home), "demo"]) == 0
    return Warehouse(home), out.getvalue()


def table_snapshot(wh: Warehouse) -> dict[str, list]:
    """Every table's rows (without ingest times), order-free: for equality across warehouses."""
    return {
        t: sorted(map(str, wh.read(t).drop("ingested_at", strict=False).rows())) for t in TABLES
    }


def assert_fleet_faults_found(source: str, events: pl.DataFrame) -> None:
    """Every injected fault with ``source`` evidence in the committed fleet's ground truth is
    among ``events`` (asserted BMC events): same host and code within a second, the right
    component class, and fatal faults read as critical."""
    truth = pl.DataFrame(
        [
            {
                "fault_id": f["fault_id"],
                "host": f["host"],
                "cls": f["component_class"],
                "fatal": f["fatal"],
                "code": e["code"],
                "time": e["time"],
            }
            for f in json.loads((SAMPLE_FLEET / "ground_truth.json").read_text())["faults"]
            for e in f["evidence"]
            if e["source"] == source
        ]
    ).with_columns(pl.col("time").str.to_datetime(time_unit="us"))
    assert truth.height, f"the fleet has no {source} evidence to check"
    found = truth.join(events, on=["host", "code"], how="left").filter(
        (pl.col("time_right") - pl.col("time")).dt.total_seconds().abs() <= 1
    )
    found = found.unique("fault_id", keep="first").sort("fault_id")
    assert found.height == truth["fault_id"].n_unique()
    assert (found["component_class"] == found["cls"]).all()
    assert (found.filter("fatal")["severity"] == "critical").all()
