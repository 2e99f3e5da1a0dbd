"""The invariant checks as plain functions (warehouse/checks.py, analysis/checks.py): each on a
small warehouse where it must hold and one where it must not, with no Dagster involved; and the
Dagster checks are exactly these, under their old names."""

import subprocess
import sys
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from analysis import checks as analysis_checks
from analysis.checks.accounting import attempt_gpus
from analysis.checks.accounting import capacity
from analysis.checks.accounting import lost_within_used
from analysis.checks.accounting import node_gpus
from analysis.checks.bounds import availability_bounds
from analysis.checks.bounds import fits_converged
from analysis.checks.bounds import goodput_bounds
from analysis.checks.sums import breakdown_sums
from analysis.checks.sums import cause_taxonomy
from analysis.checks.sums import trend_sums
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from tests.conftest import REPO
from tests.conftest import store
from tests.conftest import table
from warehouse import checks as warehouse_checks
from warehouse.checks import CheckResult

PRIMARY = {"sacct": "job_attempts"}
SACCT = FIXTURES / "slurm" / "xdmod__accounting-logs.log"


def failed(res: CheckResult) -> dict:
    """The metadata of a check that must have failed (naming its violations)."""
    assert not res.passed, res.metadata
    return res.metadata


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
        True,
        "No table has two rows with the same key.",
        {"tables_with_duplicates": {}, "violations": 0, "examples": []},
    )
    wh.replace_table("goodput_jobs", jobs)
    assert failed(warehouse_checks.duplicate_keys(wh)) == {
        "tables_with_duplicates": {"goodput_jobs": 2},
        "violations": 2,
        "examples": ["goodput_jobs: 2 keys on more than one row"],
    }


def test_quarantine_ratio_is_quarantined_over_read(wh, tmp_path):
    (tmp_path / "good.txt").write_text("JobID|State\n1|COMPLETED\n2|FAILED\n")
    (tmp_path / "bad.txt").write_text("JobID|State\n" + "x|y|z\n" * 5)
    ingest_paths(wh, [tmp_path / "good.txt", tmp_path / "bad.txt"])
    assert failed(warehouse_checks.quarantine_ratio(wh, 0.5)) == {
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
    assert fits_converged(wh).metadata == {
        "classes": 2,
        "missing": "",
        "unconverged": "",
        "violations": 0,
        "examples": [],
    }
    # psu's only selected model did not converge; gpu's selected model is gone (one not selected)
    wh.replace_table(
        "failure_rates", pl.DataFrame([_rates("gpu", True, selected=False), _rates("psu", False)])
    )
    assert failed(fits_converged(wh)) == {
        "classes": 2,
        "missing": "gpu",
        "unconverged": "psu",
        "violations": 2,
        "examples": ["gpu: no selected model", "psu: selected model did not converge"],
    }


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
    wh.replace_table(
        "goodput_breakdown",
        pl.DataFrame({"dimension": ["cluster"], "value": ["c"], "goodput": [1.5]}),
    )
    assert failed(goodput_bounds(wh)) == {
        "violations": 5,
        "examples": [
            "goodput_jobs job 2: goodput 1.2",
            "goodput_jobs job 3: goodput null",
            "goodput_breakdown cluster c: goodput 1.5",
        ],
        "jobs_out_of_bounds": 2,
        "projections_out_of_bounds": 2,
    }
    wh.replace_table("goodput_breakdown", pl.DataFrame({"dimension": ["cluster"], "value": ["c"]}))
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
    assert goodput_bounds(wh).passed


def test_an_empty_warehouse_passes_every_check(wh):
    results = [
        warehouse_checks.conservation(wh, PRIMARY),
        warehouse_checks.schema(wh),
        warehouse_checks.quarantine_ratio(wh, 0.0),
        warehouse_checks.pull_conservation(wh),
    ] + [e.result for e in analysis_checks.evaluate(wh, gpus_per_node=8)]
    assert all(r is not None and r.passed for r in results), results
    assert len(results) == 4 + len(analysis_checks.BUILD_CHECKS)


def test_dagster_checks_wrap_the_plain_ones_under_their_names():
    from pipelines import checks
    from pipelines.assets import ALL_CHECKS

    specs = {s.name: s for c in ALL_CHECKS for s in c.check_specs}
    plain = {
        "conservation_check": warehouse_checks.conservation,
        "schema_check": warehouse_checks.schema,
        "quarantine_ratio_check": warehouse_checks.quarantine_ratio,
        "pull_conservation_check": warehouse_checks.pull_conservation,
        **{inv.name: inv.check for inv in analysis_checks.BUILD_CHECKS},
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
        "pull_conservation_check": "pulled_sources",
        "hourly_samples_check": "gpu_hourly",
        "attempt_gpus_check": "goodput_jobs",
        "node_gpus_check": "goodput_jobs",
        "capacity_check": "goodput_breakdown",
        "lost_within_used_check": "interruptions",
        "cause_taxonomy_check": "interruptions",
        "breakdown_sums_check": "goodput_breakdown",
        "trend_sums_check": "goodput_trend",
        "fits_converged_check": "failure_rates",
        "goodput_bounds_check": "goodput_projections",
        "availability_bounds_check": "availability",
        "source_spans_check": "component_lifetimes",
        "duplicate_keys_check": "warehouse_catalog",
    }
    # a check runs after the writers of every table it reads, not only after its asset
    after = {d.asset_key.to_user_string() for d in specs["goodput_bounds_check"].additional_deps}
    assert after == {"goodput_jobs", "goodput_breakdown", "goodput_trend"}
    assert checks.primary_tables()["sacct"] == "job_attempts"


# ----------------------------------------------------------------------------- physical limits
T0 = datetime(2026, 1, 5)


def _attempts(*rows, cluster: str = "c") -> pl.DataFrame:
    """job_attempts rows: (job, n_gpus, nodes, start hour, end hour[, n_nodes]) from T0."""
    full = [(*r, None)[:6] for r in rows]
    return table(
        "job_attempts",
        cluster=cluster,
        scheduler="slurm",
        job_id=[r[0] for r in full],
        attempt=1,
        n_gpus=[r[1] for r in full],
        nodes=[r[2] for r in full],
        start_time=[T0 + timedelta(hours=r[3]) for r in full],
        end_time=[T0 + timedelta(hours=r[4]) for r in full],
        n_nodes=[r[5] if r[5] is not None else len(r[2]) for r in full],
    )


def _inventory(host: str, gpus: int) -> pl.DataFrame:
    return table(
        "component_history",
        component_class="gpu",
        serial=[f"{host}-{i}" for i in range(gpus)],
        host=host,
        position=[f"gpu{i}" for i in range(gpus)],
        slot=[f"{host}/gpu{i}" for i in range(gpus)],
        source="component-history",
    )


def test_attempt_gpus_names_attempts_holding_more_than_their_nodes_carry(wh):
    wh.replace_table("component_history", _inventory("n3", 4))  # n3 carries 4 GPUs
    wh.replace_table(
        "job_attempts",
        _attempts(
            ("ok", 16, ["n1", "n2"], 0, 1),  # 8 + 8
            ("doubled", 32, ["n1", "n2"], 2, 3),
            ("small-node", 8, ["n3"], 4, 5),
            ("unnamed-ok", 16, [], 6, 7, 2),  # two nodes counted, not named: 8 each
            ("unnamed", 24, [], 8, 9, 2),
        ),
    )
    assert failed(attempt_gpus(wh, gpus_per_node=8)) == {
        "violations": 3,
        "examples": [
            "job doubled (c) attempt 1: 32 GPUs on 2 node(s) carrying 16",
            "job unnamed (c) attempt 1: 24 GPUs on 2 node(s) carrying 16",
            "job small-node (c) attempt 1: 8 GPUs on 1 node(s) carrying 4",
        ],
        "gpus_per_node": 8,
    }
    # 16 GPUs a node where the data does not say: only the inventory's 4-GPU node is too small
    res = attempt_gpus(wh, gpus_per_node=16)
    assert res.metadata["examples"] == [
        "job small-node (c) attempt 1: 8 GPUs on 1 node(s) carrying 4"
    ]
    wh.replace_table("job_attempts", _attempts(("ok", 16, ["n1", "n2"], 0, 1)))
    assert attempt_gpus(wh, gpus_per_node=8).passed


def test_node_gpus_names_a_node_overlapping_attempts_oversubscribe(wh):
    wh.replace_table(
        "job_attempts",
        _attempts(
            ("a", 6, ["n1"], 0, 10),
            ("b", 4, ["n1"], 5, 12),  # 10 of 8 GPUs on n1 from 05:00 to 10:00
            ("c", 8, ["n2"], 0, 5),
            ("d", 8, ["n2"], 5, 10),  # back to back: the end frees the GPUs first
            ("e", 12, ["n3", "n4"], 0, 10),  # 8 + 4 or 4 + 8: at least 4 on each
            ("f", 4, ["n3"], 0, 10),  # fits beside e's at least 4
            ("g", 12, ["n5", "n6"], 0, 10),
            ("h", 6, ["n5"], 0, 10),  # at least 4 of g's + 6 = 10
        ),
    )
    assert failed(node_gpus(wh, gpus_per_node=8)) == {
        "violations": 2,
        "examples": [
            "n1 at 2026-01-05 05:00: 10 GPUs held of 8 (job a, b)",
            "n5 at 2026-01-05 00:00: 10 GPUs held of 8 (job g, h)",
        ],
        "gpus_per_node": 8,
    }
    wh.replace_table("job_attempts", _attempts(("c", 8, ["n2"], 0, 5), ("d", 8, ["n2"], 5, 10)))
    assert node_gpus(wh, gpus_per_node=8).passed


def test_capacity_holds_a_clusters_use_to_its_hosts_gpu_hours_per_day(wh):
    # two hosts seen by node events: 2 x 8 GPUs, 384 GPU-hours a day; the attempts name no node
    wh.replace_table(
        "node_events",
        table("node_events", time=T0, cluster="c", host=["h1", "h2"], event="down"),
    )
    day = [("j1", 8, [], 0, 24, 1), ("j2", 8, [], 0, 24, 1), ("j3", 8, [], 0, 24, 1)]
    across = [("j4", 16, [], 36, 60, 2)]  # 192 GPU-hours on 01-06 and on 01-07
    wh.replace_table(
        "job_attempts",
        pl.concat([_attempts(*day, *across), _attempts(("x1", 8, [], 0, 1, 1), cluster="x")]),
    )
    assert failed(capacity(wh, gpus_per_node=8)) == {
        "violations": 1,
        "examples": ["c 2026-01-05: 576 GPU-hours used of 384 installed (2 hosts, 16 GPUs)"],
        "cluster_days": 3,
        "highest_use": 1.5,
        "unchecked": "x",  # no host of cluster x is known
        "gpus_per_node": 8,
    }
    wh.replace_table("job_attempts", _attempts(*day[:2], *across))
    res = capacity(wh, gpus_per_node=8)
    assert res.passed and res.metadata["highest_use"] == 1.0


def test_lost_within_used_names_losses_beyond_the_attempt(wh):
    store(
        wh,
        "interruptions",
        cluster="c",
        scheduler="slurm",
        job_id=["ok", "over", "negative"],
        attempt=1,
        n_gpus=8,
        start_time=T0,
        end_time=T0 + timedelta(hours=1),
        lost_gpu_hours=[8.0, 10.0, -1.0],
    )
    assert failed(lost_within_used(wh)) == {
        "violations": 2,
        "examples": [
            "job over attempt 1 (c): 10 GPU-hours lost of 8 held",
            "job negative attempt 1 (c): -1 GPU-hours lost of 8 held",
        ],
    }
    wh.replace_table("interruptions", wh.read("interruptions").filter(pl.col("job_id") == "ok"))
    assert lost_within_used(wh).passed


def test_cause_taxonomy_names_causes_outside_the_classes(wh):
    intr = table(
        "interruptions",
        cluster="c",
        scheduler="slurm",
        job_id=["1", "2", "3", "4"],
        attempt=1,
        cause_class=["gpu", "workload", "workload", None],
    )
    wh.replace_table("interruptions", intr)
    assert failed(cause_taxonomy(wh)) == {
        "violations": 2,
        "examples": ["'workload' on 2 interruption(s)", "'(null)' on 1 interruption(s)"],
    }
    wh.replace_table("interruptions", intr.head(1))
    assert cause_taxonomy(wh).passed


def _outcomes(wh):
    from tests.test_trend import attempts
    from tests.test_trend import goodput_jobs
    from tests.test_trend import interruptions

    att = attempts().with_columns(pl.col("attempt").cast(pl.Int32))
    wh.replace_table("job_attempts", table("job_attempts", **att.to_dict()))
    wh.replace_table("interruptions", table("interruptions", **interruptions().to_dict()))
    wh.replace_table("goodput_jobs", table("goodput_jobs", **goodput_jobs().to_dict()))


def test_breakdown_sums_name_a_dimension_that_does_not_add_up(wh):
    from analysis.breakdown import refresh_breakdown

    _outcomes(wh)
    df = refresh_breakdown(wh)
    assert breakdown_sums(wh).passed
    bad = df.with_columns(
        pl.when((pl.col("dimension") == "partition") & (pl.col("value") == "p1"))
        .then(pl.col("lost_gpu_hours") + 10)
        .otherwise(pl.col("lost_gpu_hours"))
        .alias("lost_gpu_hours")
    )
    wh.replace_table("goodput_breakdown", bad)
    assert failed(breakdown_sums(wh)) == {
        "violations": 1,
        "examples": ["partition: lost_gpu_hours sums to 66, the fleet has 56"],
        "dimensions": 3,
    }


def test_trend_sums_hold_when_an_attempt_without_gpus_lies_in_another_week(wh):
    """An attempt known only from events (no GPU count) takes its chain's GPUs in every week,
    so the weeks add up to the span even when its chain's other attempts lie in another."""
    from analysis.trend import refresh_trend

    _outcomes(wh)
    att = wh.read("job_attempts")
    second = att.filter(pl.col("job_id") == "A").with_columns(
        attempt=pl.lit(2, pl.Int32),
        n_gpus=pl.lit(None, pl.Int32),
        start_time=pl.lit(T0 + timedelta(days=8)),
        end_time=pl.lit(T0 + timedelta(days=8, hours=2)),
    )
    wh.replace_table("job_attempts", pl.concat([att, second]))
    df = refresh_trend(wh)
    assert df.filter(pl.col("period") == "week")["gpu_hours"].sum() == pytest.approx(
        8 * 24 * 2 + 16 * 24 + 16 * 12 + 8 * 2
    )
    res = trend_sums(wh)
    assert res.passed, res.metadata
    wh.replace_table("goodput_trend", df.with_columns(pl.col("interruptions") * 2))
    res = trend_sums(wh)
    assert not res.passed and res.metadata["examples"] == [
        "months: interruptions sums to 6, the span has 3",
        "weeks: interruptions sums to 6, the span has 3",
    ]


def test_availability_bounds_name_values_outside_0_1(wh):
    store(
        wh,
        "availability",
        source="failures",
        system="s",
        level=["system", "node", "node"],
        host=[None, "n1", "n2"],
        availability=[0.99, 1.2, 0.9],
        availability_ci_low=[0.98, 1.1, 0.95],
        availability_ci_high=[1.0, 1.3, 0.97],
    )
    assert failed(availability_bounds(wh)) == {
        "violations": 2,
        "examples": ["failures s n1: 1.2 [1.1, 1.3]", "failures s n2: 0.9 [0.95, 0.97]"],
    }
    wh.replace_table("availability", wh.read("availability").head(1))
    assert availability_bounds(wh).passed


TEMP = "DCGM_FI_DEV_GPU_TEMP"


def _samples(host: str, gpu: int, every_s: int, hours: int, mig: str | None = None):
    n = hours * 3600 // every_s
    return table(
        "gpu_samples",
        time=[T0 + timedelta(seconds=every_s * i) for i in range(n)],
        cluster="c",
        host=host,
        gpu=gpu,
        mig_instance=mig,
        metric="DCGM_FI_DEV_GPU_TEMP",
        value=50.0,
        date=T0.date(),
    )


def test_hourly_samples_hold_n_to_what_the_scrape_interval_allows(wh):
    raw = pl.concat(
        [
            _samples("h1", 0, 60, 2),  # 60 a hour at 60 s: at most 61 (the edge sample)
            _samples("h1", 1, 60, 1, "1"),  # two MIG instances, one row of gpu_hourly
            _samples("h1", 1, 60, 1, "2"),
        ]
    )
    wh.replace_table("gpu_samples", raw)
    wh.replace_table(
        "gpu_rollups",  # gpu 2 pulled as rollups only: its host's interval stands in
        table("gpu_rollups", hour=T0, cluster="c", host="h1", gpu=2, metric="DCGM_FI_DEV_GPU_TEMP",
              n=60, date=T0.date()),
    )  # fmt: skip
    hourly = table(
        "gpu_hourly",
        hour=[T0, T0 + timedelta(hours=1), T0, T0, T0],
        cluster="c",
        host=["h1", "h1", "h1", "h1", "h9"],
        gpu=[0, 0, 1, 2, 0],
        metric="DCGM_FI_DEV_GPU_TEMP",
        n=[60, 61, 120, 60, 60],  # h9: no raw sample of its host, not checked
        date=T0.date(),
    )
    wh.replace_table("gpu_hourly", hourly)
    ok = warehouse_checks.hourly_samples(wh)
    assert ok.passed and ok.metadata == {"violations": 0, "examples": [], "unchecked_hours": 1}
    wh.replace_table(
        "gpu_hourly", hourly.with_columns(n=pl.Series([120, 61, 124, 200, 60], dtype=pl.Int64))
    )
    assert failed(warehouse_checks.hourly_samples(wh)) == {
        "violations": 3,
        "examples": [
            f"h1 GPU 2 {TEMP} 2026-01-05 00:00: 200 samples, at most 61 at one every 60 s",
            f"h1 GPU 0 {TEMP} 2026-01-05 00:00: 120 samples, at most 61 at one every 60 s",
            f"h1 GPU 1 {TEMP} 2026-01-05 00:00: 124 samples, at most 122 at one every 60 s",
        ],
        "unchecked_hours": 1,
    }


def test_a_check_that_cannot_run_is_failed_and_shown_not_passed(wh):
    from dashboards.page import checks_banner

    Path(wh.parquet, "goodput_breakdown").mkdir(parents=True)
    Path(wh.parquet, "goodput_breakdown", "data.parquet").write_bytes(b"not parquet")
    found = {e.invariant.name: e for e in analysis_checks.evaluate(wh, gpus_per_node=8)}
    broken = found["breakdown_sums_check"]
    assert broken.failed and broken.result is None and broken.error
    assert not found["cause_taxonomy_check"].failed
    banner = checks_banner(list(found.values()))
    assert "breakdown_sums_check" in banner and "Could not be evaluated" in banner


def test_the_report_banner_names_each_failed_check_with_its_count_and_examples(wh):
    from dashboards.report import build_report

    wh.replace_table(
        "job_attempts",
        _attempts(("9</td><script>", 32, ["n1", "n2"], 0, 1), ("ok", 8, ["n3"], 0, 1)),
    )
    page = build_report(wh, images=False).read_text()
    banner = page[page.index('<div id="failed-checks"') : page.index("</div>")]
    assert "2 invariant checks failed" in banner  # 32 GPUs on two nodes of 8, so on each too
    assert "attempt_gpus_check" in banner and "node_gpus_check" in banner
    assert "No job attempt holds more GPUs than its nodes carry. 1 violation(s), e.g.:" in banner
    assert (
        "<li>job 9&lt;/td&gt;&lt;script&gt; (c) attempt 1: 32 GPUs on 2 node(s) carrying 16</li>"
        in banner
    )
    assert page.index('id="failed-checks"') < page.index('<section id="summary"')
    wh.replace_table("job_attempts", _attempts(("ok", 8, ["n3"], 0, 1)))
    assert 'id="failed-checks"' not in build_report(wh, images=False).read_text()


# ----------------------------------------------------------------------------- goodput build
SACCT_HEADER = (
    "JobID|JobName|User|Account|Partition|State|Submit|Start|End|NodeList|NNodes|AllocTRES"
)


def _sacct(path: Path) -> Path:
    """Thirty one-node jobs over ten days on node01, node02 and a host whose name holds an
    escape character; job 100 holds 16 GPUs on its one 8-GPU node."""
    rows = [SACCT_HEADER]
    for i in range(30):
        s = T0 + timedelta(days=i // 3, hours=i % 3)
        node = ("node01", "node02", "node\x1b03")[i % 3]
        gpus = 16 if i == 0 else 8
        state = "NODE_FAIL" if i % 4 == 1 else "COMPLETED"
        times = "|".join(f"{t:%Y-%m-%dT%H:%M:%S}" for t in (s, s, s + timedelta(hours=6)))
        rows.append(
            f"{100 + i}|train|alice|ml|gpu|{state}|{times}|{node}|1|cpu=8,gres/gpu={gpus},node=1"
        )
    path.write_text("\n".join(rows) + "\n")
    return path


def test_build_exits_6_on_a_failed_check_names_it_and_survives_an_escape_in_a_host(tmp_path):
    """A failed invariant is a non-zero ``goodput build`` (the report written, its banner naming
    the check); a host named with an escape character is shown as its picture, not a crash of
    the chart renderer (it aborted every build, exit 134)."""
    from pipelines.cli import main

    home = tmp_path / "home"
    assert main(["--home", str(home), "ingest", str(_sacct(tmp_path / "sacct.txt"))]) == 0
    run = subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "--home", str(home), "build"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 6, run.stderr[-2000:]
    assert (
        "check failed: attempt_gpus_check (No job attempt holds more GPUs than its nodes carry.): "
        "1 violation(s), e.g. job 100 (default) attempt 1: 16 GPUs on 1 node(s) carrying 8"
    ) in run.stderr
    assert "--allow-failed-checks exits 0 anyway" in run.stderr
    page = (home / "reports" / "goodput_report.html").read_text()
    assert "\x1b" not in page and "node\u241b03" in page
    banner = page[page.index('<div id="failed-checks"') :]
    assert "attempt_gpus_check" in banner[: banner.index("</div>")]
    svgs = list((home / "reports" / "charts").glob("*.svg"))
    assert svgs and not any("\x1b" in p.read_text() for p in svgs)
    assert main(["--home", str(home), "build", "--allow-failed-checks"]) == 0


def test_a_scoped_build_checks_its_scope_as_the_whole_build_checks_the_fleet(tmp_path, capsys):
    """``goodput build --cluster X`` names the failed checks of the scope's own tables (which it
    recomputes) beside the fleet's, and exits 6 on them unless --allow-failed-checks."""
    from pipelines.cli import main

    home = str(tmp_path / "home")
    assert (
        main(["--home", home, "ingest", str(_sacct(tmp_path / "sacct.txt")), "--cluster", "a"]) == 0
    )
    capsys.readouterr()
    assert main(["--home", home, "build", "--cluster", "a"]) == 6
    err = capsys.readouterr().err
    line = (
        "attempt_gpus_check (No job attempt holds more GPUs than its nodes carry.): "
        "1 violation(s), e.g. job 100 (a) attempt 1: 16 GPUs on 1 node(s) carrying 8"
    )
    assert f"check failed: {line}" in err and f"check failed in scope cluster a: {line}" in err
    failed = [x for x in err.splitlines() if x.startswith("check failed")]
    assert f"goodput build: {len(failed)} invariant check(s) failed" in err
    assert main(["--home", home, "build", "--cluster", "a", "--allow-failed-checks"]) == 0
