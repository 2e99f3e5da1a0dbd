"""The invariant checks as plain functions (warehouse/checks.py, analysis/checks.py): each on a
small warehouse where it must hold and one where it must not, with no Dagster involved; and the
Dagster checks are exactly these, under their old names."""

import subprocess
import sys

import polars as pl
import pytest

from analysis import checks as analysis_checks
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import REPO
from warehouse import checks as warehouse_checks
from warehouse.checks import CheckResult

PRIMARY = {"sacct": "job_attempts"}
SACCT = FIXTURES / "slurm" / "xdmod__accounting-logs.log"


def test_the_plain_checks_import_without_dagster():
    code = "import sys, warehouse.checks, analysis.checks; print('dagster' in sys.modules)"
    run = subprocess.run(
        [sys.executable, "-c", code], check=True, cwd=REPO, capture_output=True, text=True
    )
    assert run.stdout.strip() == "False"


def test_conservation_holds_after_ingest_and_fails_when_rows_go_missing(wh):
    ingest_paths(wh, [SACCT])
    ok = warehouse_checks.conservation(wh, PRIMARY)
    assert ok == CheckResult(
        True,
        "Records read = rows written + rows quarantined, per ingested file.",
        {"files": 1, "violations": 0, "first": ""},
    )
    rows_ok = int(wh.read("ingest_manifest")["rows_ok"][0])
    (part,) = wh.record_files("job_attempts")  # the file's source rows (job_attempts has a Dedupe)
    pl.read_parquet(part).head(rows_ok - 1).write_parquet(part)
    bad = warehouse_checks.conservation(wh, PRIMARY)
    assert not bad.passed and bad.metadata["violations"] == 1
    assert bad.metadata["first"].endswith(f", table {rows_ok - 1}, quarantine 0")
    # a format the registry does not name has no table to hold its rows
    assert not warehouse_checks.conservation(wh, {}).passed


def test_schema_names_the_file_with_an_undeclared_column(wh):
    ingest_paths(wh, [SACCT])
    assert warehouse_checks.schema(wh).passed
    pl.DataFrame({"job_id": ["1"], "surprise": [1]}).write_parquet(
        f"{wh.parquet}/job_attempts/part-bogus.parquet"
    )
    res = warehouse_checks.schema(wh)
    assert not res.passed and res.metadata["violations"] >= 1
    assert res.metadata["first"].startswith(
        "job_attempts/part-bogus.parquet: undeclared ['surprise']"
    )


def test_duplicate_keys_counts_repeated_keys_per_table(wh):
    jobs = pl.DataFrame(
        {"cluster": "c", "scheduler": "slurm", "job_id": ["1", "1", "2", "3", "3"], "goodput": 0.5}
    )
    wh.replace_table("goodput_jobs", jobs.unique("job_id"))
    assert warehouse_checks.duplicate_keys(wh) == CheckResult(
        True, "No table has two rows with the same key.", {"tables_with_duplicates": {}}
    )
    wh.replace_table("goodput_jobs", jobs)
    res = warehouse_checks.duplicate_keys(wh)
    assert not res.passed and res.metadata == {"tables_with_duplicates": {"goodput_jobs": 2}}


def test_quarantine_ratio_is_quarantined_over_read(wh, tmp_path):
    (tmp_path / "good.txt").write_text("JobID|State\n1|COMPLETED\n2|FAILED\n")
    (tmp_path / "bad.txt").write_text("JobID|State\n" + "x|y|z\n" * 5)
    ingest_paths(wh, [tmp_path / "good.txt", tmp_path / "bad.txt"])
    res = warehouse_checks.quarantine_ratio(wh, 0.5)
    assert not res.passed and res.metadata == {
        "records_read": 7,
        "quarantined": 5,
        "ratio": pytest.approx(5 / 7),
        "limit": 0.5,
    }
    assert warehouse_checks.quarantine_ratio(wh, 0.75).passed


def _rates(cls: str, converged: bool, selected: bool = True) -> dict:
    return {
        "component_class": cls,
        "stratum": "all",
        "window": "all",
        "model": "weibull",
        "selected": selected,
        "converged": converged,
    }


def test_fits_converged_names_missing_and_unconverged_classes(wh):
    lifetimes = pl.DataFrame(
        {
            "component_class": ["gpu", "psu", "nic"],
            "unit_id": ["a", "b", "c"],
            "event": [True, True, False],
        }
    )
    wh.replace_table("component_lifetimes", lifetimes)
    wh.replace_table("failure_rates", pl.DataFrame([_rates("gpu", True), _rates("psu", True)]))
    assert analysis_checks.fits_converged(wh).metadata == {
        "classes": 2,
        "missing": "",
        "unconverged": "",
    }
    # psu's only selected model did not converge; gpu's selected model is gone (one not selected)
    wh.replace_table(
        "failure_rates", pl.DataFrame([_rates("gpu", True, selected=False), _rates("psu", False)])
    )
    res = analysis_checks.fits_converged(wh)
    assert not res.passed and res.metadata == {"classes": 2, "missing": "gpu", "unconverged": "psu"}


def test_goodput_bounds_counts_jobs_and_projections_outside_0_1(wh):
    wh.replace_table(
        "goodput_jobs",
        pl.DataFrame(
            {
                "cluster": "c",
                "scheduler": "slurm",
                "job_id": ["1", "2", "3"],
                "goodput": [0.9, 1.2, None],
            }
        ),
    )
    wh.replace_table(
        "goodput_projections",
        pl.DataFrame(
            {
                "scenario": ["a", "b", "c"],
                "goodput": [0.8, 0.8, 0.8],
                "goodput_ci_low": [0.7, 0.85, 0.7],
                "goodput_ci_high": [0.9, 0.9, 1.1],
            }
        ),
    )
    res = analysis_checks.goodput_bounds(wh)
    assert not res.passed and res.metadata == {
        "jobs_out_of_bounds": 2,
        "projections_out_of_bounds": 2,
    }
    wh.replace_table(
        "goodput_jobs",
        pl.DataFrame({"cluster": "c", "scheduler": "slurm", "job_id": ["1"], "goodput": [1.0]}),
    )
    wh.replace_table(
        "goodput_projections",
        pl.DataFrame(
            {"scenario": ["a"], "goodput": [0.8], "goodput_ci_low": [0.7], "goodput_ci_high": [0.9]}
        ),
    )
    assert analysis_checks.goodput_bounds(wh).passed


def test_an_empty_warehouse_passes_every_check(wh):
    results = [
        warehouse_checks.conservation(wh, PRIMARY),
        warehouse_checks.schema(wh),
        warehouse_checks.duplicate_keys(wh),
        warehouse_checks.quarantine_ratio(wh, 0.0),
        analysis_checks.fits_converged(wh),
        analysis_checks.goodput_bounds(wh),
        warehouse_checks.pull_conservation(wh),
    ]
    assert [r.passed for r in results] == [True] * 7


def test_dagster_checks_wrap_the_plain_ones_under_their_names():
    from pipelines import checks
    from pipelines.assets import ALL_CHECKS

    specs = {s.name: s for c in ALL_CHECKS for s in c.check_specs}
    plain = {
        "conservation_check": warehouse_checks.conservation,
        "schema_check": warehouse_checks.schema,
        "quarantine_ratio_check": warehouse_checks.quarantine_ratio,
        "duplicate_keys_check": warehouse_checks.duplicate_keys,
        "fits_converged_check": analysis_checks.fits_converged,
        "goodput_bounds_check": analysis_checks.goodput_bounds,
        "source_spans_check": analysis_checks.spans_agree,
        "pull_conservation_check": warehouse_checks.pull_conservation,
    }
    assert set(specs) == set(plain)
    assert {n: s.description for n, s in specs.items()} == {
        n: f.description for n, f in plain.items()
    }
    assert {n for n, s in specs.items() if s.blocking} == {
        "conservation_check",
        "schema_check",
        "fits_converged_check",
        "pull_conservation_check",
    }
    assert {n: s.asset_key.to_user_string() for n, s in specs.items()} == {
        "conservation_check": "ingested_sources",
        "schema_check": "ingested_sources",
        "quarantine_ratio_check": "ingested_sources",
        "duplicate_keys_check": "warehouse_catalog",
        "fits_converged_check": "failure_rates",
        "goodput_bounds_check": "goodput_projections",
        "source_spans_check": "component_lifetimes",
        "pull_conservation_check": "pulled_sources",
    }
    assert checks.primary_tables()["sacct"] == "job_attempts"
