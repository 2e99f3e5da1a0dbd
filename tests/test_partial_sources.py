"""Every subset of sources builds: each analysis runs on what exists, the others are skipped with
a reason in ``analysis_status``, the catalog is refreshed, the report says what is missing, and a
real failure still fails with its cause in one line."""

import contextlib
import io
from pathlib import Path

import pytest
from test_report import readings

from pipelines.cli import main
from tests.conftest import SAMPLE_FLEET
from warehouse.store import Warehouse

SACCT = SAMPLE_FLEET / "slurm" / "sacct.txt"
KERNEL = SAMPLE_FLEET / "kernel"
SEL = SAMPLE_FLEET / "ipmi"
INVENTORY = SAMPLE_FLEET / "components" / "component_history.csv"
DCGM = [SAMPLE_FLEET / "dcgm" / "gpu-node-001", SAMPLE_FLEET / "dcgm" / "gpu-node-002"]


def run(home: Path, *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--home", str(home), *argv])
    return code, out.getvalue(), err.getvalue()


def status(wh: Warehouse) -> dict[str, tuple[str, str | None]]:
    return {
        a: (s, r)
        for a, s, r in wh.query("SELECT analysis, status, reason FROM analysis_status").rows()
    }


@pytest.fixture(scope="module")
def growing(tmp_path_factory):
    """One warehouse grown source by source: sacct, + kernel, + SEL (never an inventory)."""
    home = tmp_path_factory.mktemp("partial") / "home"
    builds = {}
    for name, paths in (("sacct", [SACCT]), ("kernel", [KERNEL]), ("sel", [SEL])):
        assert run(home, "ingest", *map(str, paths))[0] == 0
        code, out, err = run(home, "build")
        builds[name] = (
            code,
            out,
            err,
            status(Warehouse(home)),
            Warehouse(home).query("SELECT count(*) n FROM interruptions")["n"][0],
        )
        REPORTS[name] = (Warehouse(home).reports / "goodput_report.html").read_text()
    return Warehouse(home), builds


REPORTS: dict[str, str] = {}  # each build's report, by the sources it had


def assert_every_section_built(page: str, lacking: dict[str, str]) -> None:
    """No section of the report failed to build; those given say what they lack."""
    from dashboards.section import NO_DATA

    assert "could not be built" not in page and "Traceback" not in page
    got = readings(page)
    for key, missing in lacking.items():
        assert got[key].startswith(NO_DATA) and missing in got[key], (key, got[key])


def test_sacct_only_builds_skips_what_needs_hardware_data_and_keeps_the_catalog_fresh(growing):
    _, builds = growing
    code, out, _, st, interruptions = builds["sacct"]
    assert code == 0
    assert interruptions > 1000 / 10  # attributed interruptions are queryable right after the build
    assert st["interruptions"][0] == "ok" and st["goodput_jobs"][0] == "ok"
    for skipped in ("component_lifetimes", "failure_fits", "goodput_projections", "gpu_hourly"):
        assert st[skipped][0] == "skipped", skipped
        assert f"skipped: {skipped} (" in out
    assert "no units to follow" in st["component_lifetimes"][1]
    assert st["leadership_report"][0] == "ok"


def test_every_report_section_builds_on_sacct_alone_and_says_what_it_lacks(growing):
    growing  # noqa: B018 - the builds
    page = REPORTS["sacct"]
    assert readings(page)["summary"].startswith("From 2026-01-05")  # not a TypeError
    assert_every_section_built(page, {"failure_rates": "failure_rates"})
    for later in ("kernel", "sel"):
        assert_every_section_built(REPORTS[later], {})


def test_sacct_and_kernel_without_inventory_fit_rates_from_observed_units(growing):
    _, builds = growing
    code, out, _, st, _ = builds["kernel"]
    assert code == 0 and st["failure_fits"][0] == "ok" and st["goodput_projections"][0] == "ok"
    assert "observation window: 2026-01-05" in out


def test_sel_added_rates_use_observed_hosts_times_units_over_the_window(growing):
    wh, builds = growing
    code, _, _, st, _ = builds["sel"]
    # no telemetry (gpu_hourly), neither failure records nor down/resume node events
    # (availability), no training logs (slow_periods)
    skipped = ("gpu_hourly", "availability", "slow_periods")
    assert code == 0 and all(s == "ok" for a, (s, _) in st.items() if a not in skipped)
    fr = wh.query(
        "SELECT component_class, population, n_units, n_events, exposure_hours FROM failure_rates "
        "WHERE selected AND \"window\" = 'all' AND stratum = 'all'"
    )
    assert set(fr["population"]) == {"observed_units"}
    hosts = wh.query(
        "SELECT count(DISTINCT host) n FROM (SELECT unnest(nodes) host FROM job_attempts "
        "UNION SELECT host FROM hw_events)"
    )["n"][0]
    w = wh.query(
        "SELECT observed_from, observed_to FROM observation_window WHERE source = 'window'"
    ).row(0)
    window_h = (w[1] - w[0]).total_seconds() / 3600
    psu = fr.filter(fr["component_class"] == "psu").row(0, named=True)
    # two PSUs per host (the projection's unit count), each at risk over the whole window
    assert psu["exposure_hours"] == pytest.approx(2 * hosts * window_h, rel=1e-6)
    gpu = fr.filter(fr["component_class"] == "gpu").row(0, named=True)
    assert gpu["exposure_hours"] == pytest.approx(8 * hosts * window_h, rel=1e-6)
    assert gpu["n_events"] > 20
    fit = run(wh.home, "fit")[1]
    assert "units from observed_units: " in fit
    report = (wh.reports / "goodput_report.html").read_text()
    assert "Analyses run and skipped" in report and "observed_units" in report


def test_inventory_only_builds_and_flags_the_window_it_could_not_infer(tmp_path):
    home = tmp_path / "home"
    assert run(home, "ingest", str(INVENTORY))[0] == 0
    code, out, _ = run(home, "build")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("observation window:"))
    assert "earliest_record" in line and "pass --observed-from" in line
    wh = Warehouse(home)
    lacks_jobs = {"summary": "job_attempts", "goodput_measured": "goodput_jobs"}
    assert_every_section_built((wh.reports / "goodput_report.html").read_text(), lacks_jobs)
    st = status(wh)
    assert st["interruptions"] == ("skipped", "interruptions: no rows in job_attempts")
    assert st["failure_fits"][0] == "ok"
    assert wh.query("SELECT flagged FROM observation_window WHERE source = 'window'")["flagged"][0]
    assert set(wh.query("SELECT DISTINCT population FROM failure_rates")["population"]) == {
        "inventory"
    }
    # an explicit window re-fits: units installed before it enter left-truncated at its start
    code, out, _ = run(
        home, "fit", "--observed-from", "2026-01-05", "--observed-to", "2026-03-05T23:00:00Z"
    )
    assert (
        code == 0
        and "observation window: 2026-01-05 00:00 .. 2026-03-05 23:00 UTC (60.0 days, explicit)"
        in out
    )
    lt = wh.query("SELECT min(observed_from) a, max(observed_to) b FROM component_lifetimes").row(0)
    assert str(lt[0]) == "2026-01-05 00:00:00" and str(lt[1]) == "2026-03-05 23:00:00"


def test_telemetry_only_builds_rollups_and_skips_job_analyses(tmp_path):
    home = tmp_path / "home"
    assert run(home, "ingest", *map(str, DCGM))[0] == 0
    code, out, _ = run(home, "build")
    assert code == 0
    st = status(Warehouse(home))
    assert st["gpu_hourly"][0] == "ok" and st["component_lifetimes"][0] == "ok"
    assert st["goodput_jobs"][0] == "skipped" and "skipped: interruptions (" in out
    # two nodes for sixty days show no GPU failure: nothing to project from, said so
    assert st["goodput_projections"] == (
        "skipped",
        "goodput_projections: no failure in failure_rates (a zero rate gives no MTTI to project)",
    )
    page = (Warehouse(home).reports / "goodput_report.html").read_text()
    assert_every_section_built(page, {"summary": "job_attempts", "causes": "interruptions"})


def test_a_real_failure_fails_with_its_cause_in_one_line_and_the_catalog_still_refreshes(
    tmp_path, monkeypatch
):
    from analysis import repairable

    def broken(wh):
        raise RuntimeError("corrupt node_events partition\nsecond line")

    monkeypatch.setattr(repairable, "refresh_repairable", broken)
    home = tmp_path / "home"
    assert run(home, "ingest", str(SACCT))[0] == 0
    code, _, err = run(home, "build")
    assert code == 2
    # the steps' progress lines, then the error as one line, no traceback
    assert err.strip().splitlines()[-1] == (
        "goodput: error: pipeline run failed: repairable_systems: RuntimeError: corrupt "
        "node_events partition"
    )
    assert "  done: interruptions (" in err and "Traceback" not in err
    wh = Warehouse(home)
    assert wh.query("SELECT count(*) n FROM interruptions")["n"][0] > 100
    assert status(wh)["repairable_systems"] == (
        "failed",
        "RuntimeError: corrupt node_events partition",
    )


def test_step_progress_goes_to_the_current_stderr_not_the_first_one():
    """The progress logger outlives one run: each run's redirected stderr gets its own lines
    (it kept the stream it was created with, and a later run wrote into a closed buffer)."""
    from pipelines.run import progress_logger

    seen = []
    for step in ("first", "second"):
        buf = io.StringIO()
        with contextlib.redirect_stderr(buf):
            progress_logger.logger_fn(None).debug(f'Finished execution of step "{step}" in 1.5s.')
        seen.append(buf.getvalue())
        buf.close()
    assert seen == ["  done: first (1.5s)\n", "  done: second (1.5s)\n"]
