"""The reading commands that answer a leader's questions without SQL: `whatif` (the report's
what-if ranking as a table), and one projection everywhere: `project`, `nodes`, `whatif` and the
report's first screen give the same goodput and MTTI for the same inputs, written alike."""

from __future__ import annotations

import json
from datetime import datetime

import polars as pl
import pytest

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import RESTART_S
from analysis.assumptions import TARGET_GPUS
from analysis.numbers import mean_time
from analysis.numbers import pct
from analysis.rate_sources import llama3_rates
from analysis.whatif import refresh_projections
from analysis.whatif import sensitivity_frame
from dashboards.report import build_sections
from dashboards.section import projection_at
from pipelines.cli import main
from tests.conftest import llama3_fits
from warehouse.schemas import conform
from warehouse.store import Warehouse

LLAMA = llama3_rates()


def _fitted(home) -> Warehouse:
    """A warehouse whose fits are Llama 3's rates (exponential, with CIs), with node scores
    (one lemon) and the report's standard projections made by a build."""
    wh = Warehouse(home)
    wh.replace_table("failure_rates", llama3_fits())
    wh.replace_table("node_health", conform("node_health", pl.DataFrame({
        "host": ["n1", "n2"], "node_hours": [1000.0, 1000.0], "failures": [9, 1],
        "expected_failures": [5.0, 5.0], "excess_failures": [4.0, -4.0],
        "test": ["exact Poisson"] * 2, "p_value": [0.07, 0.99], "p_adjusted": [0.01, 0.99],
        "alpha": [0.05] * 2, "lemon": [True, False],
    })))  # fmt: skip
    refresh_projections(wh, replicas=20, spares_grid=(0, 4))
    wh.refresh_catalog()
    return wh


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> Warehouse:
    return _fitted(tmp_path_factory.mktemp("answers") / "home")


def _run(capsys, wh, *argv) -> str:
    assert main(["--home", str(wh.home), *argv]) == 0
    return capsys.readouterr().out


def test_whatif_prints_the_reports_ranking(fitted, capsys):
    stored = sensitivity_frame(fitted.read("goodput_projections"))
    got = json.loads(_run(capsys, fitted, "whatif", "--json"))
    assert got["n_gpus"] == TARGET_GPUS
    assert [r["change"] for r in got["rows"]] == stored["change"].to_list()
    assert [r["gain_pp"] for r in got["rows"]] == pytest.approx(stored["gain_pp"].to_list())
    gains = [r["gain_pp"] for r in got["rows"]]
    assert gains == sorted(gains, reverse=True)
    # Llama 3: GPUs cause most interruptions, so halving their rate buys most among the classes
    classes = [r for r in got["rows"] if r["knob"].startswith("rate:")]
    assert classes[0]["knob"] == "rate:gpu"
    for r in got["rows"]:
        assert r["goodput_ci_low"] <= r["goodput"] <= r["goodput_ci_high"]
    text = _run(capsys, fitted, "whatif")
    top = got["rows"][0]
    line = next(ln for ln in text.splitlines() if ln.startswith(top["change"]))
    assert f"{top['gain_pp']:+.1f} points" in line and pct(top["goodput"]) in line
    assert f"{pct(top['goodput_ci_low'])} - {pct(top['goodput_ci_high'])}" in line
    # the report's what-if section names the same first lever with the same gain
    section = next(s for s in build_sections(fitted) if s.key == "sensitivity")
    assert (
        f"the biggest lever is {top['change']}: {top['gain_pp']:+.2f} percentage points"
        in section.reading
    )
    csv = _run(capsys, fitted, "whatif", "--format", "csv").splitlines()
    assert csv[0].startswith("change,knob,gain_pp,") and len(csv) == len(got["rows"]) + 1


def test_whatif_at_another_size_computes_the_same_ranking_anew(fitted, capsys):
    got = json.loads(_run(capsys, fitted, "whatif", "--gpus", "4096", "--json"))
    proj = json.loads(_run(capsys, fitted, "project", "--gpus", "4096", "--json"))
    assert got["baseline"]["goodput"] == pytest.approx(proj["goodput"], rel=1e-12)
    assert got["baseline"]["mtti_hours"] == pytest.approx(proj["mtti_hours"], rel=1e-12)
    assert got["rows"][0]["gain_pp"] > 0
    # nothing was stored by a reader
    assert 4096 not in fitted.read("goodput_projections").filter(
        pl.col("scenario") == "sensitivity")["n_gpus"].to_list()  # fmt: skip


def test_project_nodes_whatif_and_headline_give_one_projection(fitted, capsys):
    proj = json.loads(_run(capsys, fitted, "project", "--json"))
    nodes = json.loads(_run(capsys, fitted, "nodes", "--json"))["gain"]["baseline"]
    whatif = json.loads(_run(capsys, fitted, "whatif", "--json"))["baseline"]
    head = projection_at(fitted.read("goodput_projections"), TARGET_GPUS)
    for other in (nodes, whatif, head):
        assert other["goodput"] == pytest.approx(proj["goodput"], rel=1e-12)
        assert other["mtti_hours"] == pytest.approx(proj["mtti_hours"], rel=1e-12)
    assert 0.05 < proj["goodput"] < 0.95
    # and every view writes it alike: goodput in percent, MTTI as a mean time for people
    g, m = pct(proj["goodput"]), mean_time(proj["mtti_hours"])
    texts = {
        "project": _run(capsys, fitted, "project"),
        "nodes": _run(capsys, fitted, "nodes"),
        "whatif": _run(capsys, fitted, "whatif"),
    }
    for name, text in texts.items():
        assert g in text and m in text, name
    scale = next(s for s in build_sections(fitted) if s.key == "goodput_scale")
    assert scale.reading.startswith(f"At {TARGET_GPUS:,} GPUs the projected goodput is {g}")


def test_whatif_without_rates_or_with_a_bad_size_is_one_line(tmp_path, capsys):
    wh = Warehouse(tmp_path / "home")
    wh.refresh_catalog()
    assert main(["--home", str(wh.home), "whatif"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "goodput build" in err
    assert main(["--home", str(wh.home), "whatif", "--gpus", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# ----------------------------------------------------------------------------- compare
def _clusters(wh) -> None:
    """tests/test_trend.py's fleet with jobs C and D moved to cluster c2, and a cluster c3 whose
    one job (8 GPUs, 10 h) was never interrupted."""
    from test_trend import attempts
    from test_trend import goodput_jobs
    from test_trend import interruptions

    def moved(df):
        c = (
            pl.when(pl.col("job_id").is_in(["C", "D"]))
            .then(pl.lit("c2"))
            .otherwise(pl.col("cluster"))
        )
        return df.with_columns(c.alias("cluster"))

    e = {"job_id": "E", "cluster": "c3", "scheduler": "slurm", "attempt": 1, "n_gpus": 8,
         "partition": "p1", "account": "acct3", "start_time": datetime(2026, 1, 20),
         "end_time": datetime(2026, 1, 20, 10)}  # fmt: skip
    att = pl.concat(
        [conform("job_attempts", moved(attempts())), conform("job_attempts", pl.DataFrame([e]))]
    )
    jobs = moved(goodput_jobs())
    jobs = pl.concat(
        [
            jobs,
            pl.DataFrame(
                [
                    {
                        "job_id": "E",
                        "n_gpus": 8,
                        "wall_hours": 10.0,
                        "productive_hours": 9.0,
                        "final_end": e["end_time"],
                        "goodput": 0.9,
                        "cluster": "c3",
                        "scheduler": "slurm",
                    }
                ],
                schema=jobs.schema,
            ),
        ]
    )
    with wh.batch("compare-test") as b:
        b.add({"job_attempts": att})
    wh.replace_table("interruptions", conform("interruptions", moved(interruptions())))
    wh.replace_table("goodput_jobs", conform("goodput_jobs", jobs))
    wh.refresh_catalog()


def _garwood(events: int, exposure: float) -> tuple[float, float]:
    from scipy.stats import chi2

    lo = chi2.ppf(0.025, 2 * events) / 2 / exposure if events else 0.0
    return lo, chi2.ppf(0.975, 2 * events + 2) / 2 / exposure


def test_compare_sets_clusters_side_by_side_with_exact_cis(tmp_path, capsys):
    from test_trend import WEEK1_GOODPUT
    from test_trend import WEEK2_GOODPUT

    wh = Warehouse(tmp_path / "home")
    _clusters(wh)
    got = {r["cluster"]: r for r in json.loads(_run(capsys, wh, "compare", "--json"))["rows"]}
    assert list(got) == ["c2", "c1", "c3"]  # largest GPU-hours first
    # (GPU-hours, span hours, infrastructure interruptions, unexpected, goodput)
    want = {"c1": (384.0, 72.0, 1, 2, WEEK1_GOODPUT), "c2": (576.0, 60.0, 1, 1, WEEK2_GOODPUT),
            "c3": (80.0, 10.0, 0, 0, 0.9)}  # fmt: skip
    for name, (gpu_h, span, infra, unexpected, goodput) in want.items():
        r = got[name]
        assert (r["gpu_hours"], r["span_hours"], r["infrastructure"], r["interruptions"]) == (
            gpu_h,
            span,
            infra,
            unexpected,
        )
        assert r["goodput"] == pytest.approx(goodput)
        gpu_days = gpu_h / 24_000
        assert r["rate_per_1k_gpu_days"] == pytest.approx(infra / gpu_days)
        lo, hi = _garwood(infra, gpu_days)
        assert (r["rate_ci_low"], r["rate_ci_high"]) == pytest.approx((lo, hi))
        lo_h, hi_h = _garwood(infra, span)
        assert r["mtbf_ci_low"] == pytest.approx(1 / hi_h)
        if infra:
            assert r["mtbf_hours"] == pytest.approx(span / infra)
            assert r["mtbf_ci_high"] == pytest.approx(1 / lo_h)
        else:  # no interruption: no MTBF, and no upper bound on it
            assert r["mtbf_hours"] is None and r["mtbf_ci_high"] is None
    text = _run(capsys, wh, "compare").splitlines()
    c1 = next(ln for ln in text if ln.startswith("c1"))
    assert pct(WEEK1_GOODPUT) in c1 and "1 of 2" in c1 and mean_time(72.0) in c1
    assert "n/a" in next(ln for ln in text if ln.startswith("c3"))
    csv = _run(capsys, wh, "compare", "--by", "account", "--format", "csv").splitlines()
    assert csv[0].startswith("account,jobs,gpu_hours,goodput,") and len(csv) == 4


def test_compare_crosses_cluster_and_partition_and_sets_users_side_by_side(tmp_path, capsys):
    wh = Warehouse(tmp_path / "home")
    _clusters(wh)
    rows = json.loads(_run(capsys, wh, "compare", "--by", "cluster,partition", "--json"))["rows"]
    got = {(r["cluster"], r["partition"]): r for r in rows}
    # (GPU-hours, unexpected interruptions, infrastructure ones): A 8 GPUs x 24 h in c1/p1,
    # B in c1 without a partition, C 16 x 24 h in c2/p1, D 16 x 12 h in c2/p2, E 8 x 10 h
    want = {("c2", "p1"): (384.0, 1, 1), ("c1", "p1"): (192.0, 1, 1),
            ("c1", "(none)"): (192.0, 1, 0), ("c2", "p2"): (192.0, 0, 0),
            ("c3", "p1"): (80.0, 0, 0)}  # fmt: skip
    assert {
        k: (r["gpu_hours"], r["interruptions"], r["infrastructure"]) for k, r in got.items()
    } == (want)
    assert rows[0]["gpu_hours"] == max(w[0] for w in want.values())  # largest first
    clusters = json.loads(_run(capsys, wh, "compare", "--json"))["rows"]
    for c in clusters:  # each cluster's partitions add up to the cluster
        parts = [r for (cl, _), r in got.items() if cl == c["cluster"]]
        for key in ("gpu_hours", "jobs", "interruptions", "infrastructure", "lost_gpu_hours"):
            assert sum(r[key] for r in parts) == pytest.approx(c[key]), (c["cluster"], key)
    text = _run(capsys, wh, "compare", "--by", "cluster,partition").splitlines()
    assert text[0].split()[:3] == ["cluster", "partition", "jobs"]
    users = json.loads(_run(capsys, wh, "compare", "--by", "user", "--json"))["rows"]
    assert [u["user"] for u in users] == ["(none)"]  # no record names a user
    assert users[0]["gpu_hours"] == sum(c["gpu_hours"] for c in clusters)


def test_scope_flags_on_reading_commands_sql_views_included(tmp_path, capsys):
    """`--cluster c2` on compare and sql: the scope is built once (HOME/scopes/...) and then
    reused; every view sql sees holds only c2's rows."""
    wh = Warehouse(tmp_path / "home")
    _clusters(wh)
    scoped = json.loads(
        _run(capsys, wh, "compare", "--by", "partition", "--cluster", "c2", "--json")
    )["rows"]
    assert {r["partition"] for r in scoped} == {"p1", "p2"} and sum(r["jobs"] for r in scoped) == 2
    out = _run(capsys, wh, "sql", "--cluster", "c2", "--format", "json",
               "select cluster, count(*) n from job_attempts group by 1")  # fmt: skip
    assert json.loads(out) == [{"cluster": "c2", "n": 2}]
    out = _run(capsys, wh, "sql", "--format", "csv", "select count(*) n from job_attempts")
    assert out.splitlines() == ["n", "5"]  # the whole fleet without the flag
    assert main(["--home", str(wh.home), "sql", "--cluster", "nope", "select 1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown cluster 'nope'" in err and "c1, c2, c3" in err


def test_whatif_weighs_detecting_fail_slow_gpus_from_the_fleets_own_law(tmp_path, capsys):
    """The fail-slow lines: the fleet's ``fail_slow`` row (rate and duration law) through the
    closed forms of ``analysis.slowness.at_scale`` at each --slow-detect time, against the
    ranking's own baseline; a warehouse without the row says so in one line."""
    from analysis.lifetime_models.lognormal import LogNormal
    from analysis.slowness import at_scale
    from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
    from warehouse.schemas import FAIL_SLOW

    text = _run(capsys, _fitted(tmp_path / "none"), "whatif")
    assert "fail-slow GPUs: none measured (no fail_slow law in failure_rates)" in text
    wh = _fitted(tmp_path / "home")
    law = {"of": "duration_hours", "mu_log_hours": {"value": 0.4}, "sigma": {"value": 1.0}}
    row = conform("failure_rates", pl.DataFrame({
        "component_class": [FAIL_SLOW], "stratum": ["all"], "window": ["all"],
        "model": ["lognormal"], "selected": [True], "rate_per_1k_unit_days": [2.0],
        "params": [json.dumps(law)],
    }))  # fmt: skip
    wh.replace_table("failure_rates", pl.concat([wh.read("failure_rates"), row]))
    got = json.loads(_run(capsys, wh, "whatif", "--slow-detect", "5m", "never", "--json"))
    fs = got["fail_slow"]
    assert fs["rate_per_1k_gpu_days"] == pytest.approx(2.0)
    assert fs["slowdown"] == at_scale.FALCON_SLOWDOWN  # no slow period pinned on a GPU
    want = at_scale.detection_rows(
        TARGET_GPUS,
        at_scale.FailSlow(2.0 / HOURS_PER_1K_UNIT_DAYS, LogNormal(mu_log_hours=0.4, sigma=1.0)),
        [5 / 60, None],
        got["baseline"] | {"ckpt_cost_s": CKPT_COST_S, "restart_s": RESTART_S},
    )
    assert [r["goodput"] for r in fs["detections"]] == pytest.approx([r["goodput"] for r in want])
    assert fs["detections"][1]["replacements_per_day"] == 0
    assert fs["detections"][0]["goodput_without_slow"] == got["baseline"]["goodput"]
    text = _run(capsys, wh, "whatif", "--slow-detect", "5m", "never")
    never = fs["detections"][1]
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("never:"))
    assert f"slow {pct(never['slow_share'])} of its compute time" in line
    assert f"-> {pct(never['goodput'])}" in line
    assert main(["--home", str(wh.home), "whatif", "--slow-detect", "5"]) == 2
    assert "has no unit" in capsys.readouterr().err
