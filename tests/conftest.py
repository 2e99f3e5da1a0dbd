"""Shared fixtures: paths to committed fixtures and a throwaway warehouse."""

import contextlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest

from analysis.rate_sources import llama3_rates
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from ingest.base import ParseContext
from ingest.base import ParseResult
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse

# Tests write a file and ingest it at once: the CLI's settle wait (a file is read once it has
# not changed for a while) would only slow them; tests/test_attack_inputs.py tests it.
os.environ.setdefault("GOODPUT_SETTLE", "0")

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
SAMPLE_FLEET = REPO / "sample_data" / "fleet"
SLURM = FIXTURES / "slurm"  # real Slurm dumps and logs (fixtures/slurm/PROVENANCE.md)
# a real sacct dump of 8 jobs ending every way a job ends
SACCT_JOB_MIX = SLURM / "sacct_parsable2_22_05_8_job_mix.txt"
# settings of the simulated fleets tests build (sample_data.simulation.simulate): a small one
# whose faults are scaled up so every class and format shows, and a tiny one whose bytes a test pins
SMALL_FLEET = {
    "nodes": 12,
    "gpus_per_node": 8,
    "days": 20,
    "seed": 3,
    "fault_scale": 150.0,
    "scrape_interval_s": 21600,
    "k8s_nodes": 3,
}
TINY_FLEET = {
    "nodes": 5,
    "gpus_per_node": 4,
    "days": 4,
    "seed": 11,
    "fault_scale": 300.0,
    "scrape_interval_s": 21600,
    "k8s_nodes": 2,
}


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


def parse_rows(
    parse: Callable[[bytes, ParseContext], ParseResult], table: str, data: object, **ctx
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A format's ``parse`` of ``data`` (bytes; text, encoded; a path, its file's bytes; anything
    else, as JSON) with a ParseContext of ``ctx``: its rows of ``table`` and its quarantine, once
    the result is checked to account for every record (a row, a quarantine row or a counted
    duplicate)."""
    if isinstance(data, Path):
        data = data.read_bytes()
    elif isinstance(data, str):
        data = data.encode()
    elif not isinstance(data, bytes):
        data = json.dumps(data).encode()
    res = parse(data, ParseContext(**ctx))
    ok = res.tables.get(table, pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height + res.duplicates  # conservation
    return ok, res.quarantine


def stored_rows(
    parse: Callable[[bytes, ParseContext], ParseResult], table: str, data: object, **ctx
) -> pl.DataFrame:
    """``parse_rows``' rows of ``table``, once checked that no record was quarantined: for
    inputs every record of which a format must store."""
    ok, q = parse_rows(parse, table, data, **ctx)
    assert q.height == 0, q["error"].to_list()
    return ok


def ingest_with_cli(home: Path, *paths: Path) -> Warehouse:
    """``goodput --home HOME ingest PATHS``, which must succeed: a warehouse filled the way a
    user fills one."""
    from pipelines.cli import main

    assert main(["--home", str(home), "ingest", *map(str, paths)]) == 0
    return Warehouse(home)


def simulate_with_cli(out: Path, options: str) -> Path:
    """``goodput simulate --out OUT OPTIONS``: a fleet written the way a user writes one."""
    from pipelines.cli import main

    assert main(["simulate", "--out", str(out), *options.split()]) == 0
    return out


def table(name: str, **columns) -> pl.DataFrame:
    """Rows of warehouse table ``name`` from columns (scalars broadcast), in its schema."""
    return conform(name, pl.DataFrame(columns))


def store(wh: Warehouse, name: str, **columns) -> pl.DataFrame:
    """``table(name, **columns)`` stored in ``wh`` in place of table ``name``'s rows."""
    rows = table(name, **columns)
    wh.replace_table(name, rows)
    return rows


def llama3_fits() -> pl.DataFrame:
    """A ``failure_rates`` table whose selected fits are Llama 3's published class rates
    (exponential, with their CIs): what a build would fit from Llama 3's interruptions."""
    r = llama3_rates()
    return table(
        "failure_rates",
        component_class=list(r.classes),
        stratum="all",
        window="all",
        model="exponential",
        selected=True,
        params="{}",
        rate_per_1k_unit_days=r.rate * HOURS_PER_1K_UNIT_DAYS,
        rate_ci_low=r.ci_low * HOURS_PER_1K_UNIT_DAYS,
        rate_ci_high=r.ci_high * HOURS_PER_1K_UNIT_DAYS,
    )


def table_snapshot(wh: Warehouse) -> dict[str, list]:
    """Every table's rows (without ingest times), order-free: for equality across warehouses."""
    return {
        t: sorted(map(str, wh.read(t).drop("ingested_at", strict=False).rows())) for t in TABLES
    }


def assert_fleet_faults_found(source: str, pattern: str, parse, asserted: str) -> None:
    """The committed fleet's ``source/pattern`` files, each read by ``parse`` (a test's
    (rows, quarantine) helper), quarantine nothing; and every injected fault with ``source``
    evidence in its ground truth is among the events whose action is ``asserted``: same host
    and code within a second, the right component class, and fatal faults read as critical."""
    frames = []
    for f in sorted((SAMPLE_FLEET / source).glob(pattern)):
        ok, q = parse(f.read_bytes(), path=str(f))
        assert q.height == 0, q
        frames.append(ok)
    events = pl.concat(frames).filter(pl.col("action") == asserted)
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
