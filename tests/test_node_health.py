"""Lemon nodes (``node_health``): planted 10x nodes are flagged and healthy ones not, the false
positive rate on null fleets stays under the level, p values match scipy, the gain matches a hand
computation, and the per-node counts come from the right tables."""

import json
import math
from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from scipy.stats import binom
from scipy.stats import nbinom
from scipy.stats import poisson

from analysis.assumptions import LEMON_ALPHA
from analysis.node_health import SCREEN_ALPHA
from analysis.node_health import TEST
from analysis.node_health import UNTESTED
from analysis.node_health import build_node_health
from analysis.node_health import lemon_gain
from analysis.node_health import refresh_node_health
from analysis.node_health import score
from analysis.node_health import summary
from dashboards.section import ReportContext
from dashboards.sections import node_health as node_health_section
from pipelines.cli import main
from warehouse.schemas import TABLES
from warehouse.schemas import conform
from warehouse.store import Warehouse

T0 = datetime(2026, 1, 5)


def empty(table: str) -> pl.DataFrame:
    return TABLES[table].empty()


def fleet(failures: np.ndarray, hours: np.ndarray) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(node_failures, windows) of nodes n000.. with these failure counts and observed hours."""
    hosts = [f"n{i:03d}" for i in range(len(failures))]
    fails = pl.DataFrame(
        {"host": np.repeat(hosts, failures)}, schema={"host": pl.Utf8}
    ).with_columns(time=pl.lit(T0, pl.Datetime("us")))
    win = pl.DataFrame(
        {
            "host": hosts,
            "start": [T0] * len(hosts),
            "end": [T0 + timedelta(hours=float(h)) for h in hours],
        }
    )
    return fails, win


def health_of(failures, hours, **kw) -> pl.DataFrame:
    f, w = fleet(np.asarray(failures), np.asarray(hours))
    return build_node_health(
        f,
        w,
        empty("interruptions"),
        empty("hw_events"),
        empty("component_history"),
        empty("job_attempts"),
        **kw,
    )


def test_planted_lemons_are_flagged_and_healthy_nodes_are_not():
    rng = np.random.default_rng(7)
    n, base = 300, 0.002  # 2 failures expected per healthy node over 1,000 h
    hours = rng.uniform(500, 1500, n)
    rate = np.full(n, base)
    planted = {3, 50, 120, 201, 299}
    rate[list(planted)] *= 10
    h = health_of(rng.poisson(rate * hours), hours)
    flagged = {int(x[1:]) for x in h.filter(pl.col("lemon"))["host"]}
    assert flagged == planted
    assert h["lemon"].head(len(planted)).all()  # lemons listed first
    assert h["test"][0].startswith(TEST) and h["test"][0].endswith(
        "Benjamini-Hochberg over 300 nodes"
    )
    assert (h["alpha"] == LEMON_ALPHA).all()


def test_false_positive_rate_on_null_fleets_is_under_the_level():
    flagged_nodes, fleets_with_a_flag, n, seeds = 0, 0, 200, 200
    for seed in range(seeds):  # every node fails at the same rate, over different exposures
        rng = np.random.default_rng(seed)
        hours = rng.uniform(200, 2000, n)
        nodes = pl.DataFrame({"host": [f"n{i}" for i in range(n)], "node_hours": hours,
                              "failures": rng.poisson(0.003 * hours)})  # fmt: skip
        k = int(score(nodes)["lemon"].sum())
        flagged_nodes += k
        fleets_with_a_flag += k > 0
    # Benjamini-Hochberg under the complete null holds the chance of any flag at alpha
    assert fleets_with_a_flag / seeds < LEMON_ALPHA
    assert flagged_nodes / (n * seeds) < LEMON_ALPHA / 10


def test_nodes_that_slow_jobs_repeatedly_are_flagged_by_the_same_test():
    """The episodes a node slowed jobs in, tested as failures are: a node named in 9 among 40
    that each had 0-2 is flagged; the overlapping periods of one throttled GPU under two jobs
    count once."""
    rng = np.random.default_rng(3)
    hosts = [f"n{i:03d}" for i in range(40)]
    counts = {h: int(rng.integers(0, 3)) for h in hosts}
    counts["n007"] = 9
    rows = []
    for h, k in counts.items():
        for e in range(k):
            start = T0 + timedelta(days=2 * e)
            for job in ("a", "b"):  # one throttled GPU under two jobs at once
                rows.append(
                    {
                        "cluster": "c", "job_id": f"{h}-{e}-{job}", "period": 1,
                        "start_time": start, "end_time": start + timedelta(hours=1),
                        "slow_gpu_hours": 4.0, "culprit_host": h,
                    }
                )  # fmt: skip
    periods = conform("slow_periods", pl.DataFrame(rows))
    failures, windows = fleet(np.zeros(40, int), np.full(40, 1000.0))
    h = build_node_health(
        failures.clear(), windows, empty("interruptions"), empty("hw_events"),
        empty("component_history"), empty("job_attempts"), slow_periods=periods,
    )  # fmt: skip
    by_host = {r["host"]: r for r in h.iter_rows(named=True)}
    assert by_host["n007"]["slow_episodes"] == 9 and by_host["n007"]["slow_gpu_hours"] == 72.0
    assert [r["host"] for r in h.iter_rows(named=True) if r["slow_lemon"]] == ["n007"]
    assert h["host"][0] == "n007"  # the worst first
    assert not h["lemon"].any()  # nothing failed: no fail-stop lemon
    s = summary(h)
    assert (s["slow_lemons"], s["slow_episodes"]) == (1, sum(counts.values()))


def test_p_values_match_scipy_and_benjamini_hochberg_by_hand():
    """Each node against the others: the larger p of the exact binomial (its share of the
    failures vs its share of the node-hours) and the negative binomial around the other
    nodes' rate with the moment-estimated overdispersion of the nodes the exact test keeps."""
    k, t = np.array([6, 1, 1, 4]), np.array([100, 100, 200, 100])
    h = health_of(k, t).sort("host")
    exact = binom.sf(k - 1, 12, t / 500)
    assert not (adjust_bh(exact) < SCREEN_ALPHA).any()  # none screened out of the dispersion
    e_pool = t * 12 / 500
    phi = max(0.0, ((k - e_pool) ** 2 - k).sum() / (e_pool**2).sum())
    expected = t * (12 - k) / (500 - t)  # the other nodes' rate
    n = 1 / phi
    p = np.maximum(exact, nbinom.sf(k - 1, n, n / (n + expected)))
    assert phi > 0 and f"dispersion {phi:.3g}" in h["test"][0]
    assert h["expected_failures"].to_list() == pytest.approx(expected.tolist())
    assert h["p_value"].to_list() == pytest.approx(p.tolist(), rel=1e-12)
    assert h["p_adjusted"].to_list() == pytest.approx(adjust_bh(p).tolist(), rel=1e-12)
    assert h["excess_failures"].to_list() == pytest.approx((k - expected).tolist())
    assert h["rate_ratio"][0] == pytest.approx(6 / expected[0])


def adjust_bh(p: np.ndarray) -> np.ndarray:
    """BH by hand: p_(i) * m / i, made monotone from the largest down."""
    m = len(p)
    order = np.argsort(p)
    adj = np.minimum.accumulate((p[order] * m / np.arange(1, m + 1))[::-1])[::-1].clip(max=1)
    out = np.empty(m)
    out[order] = adj
    return out


def test_false_lemons_stay_rare_on_heterogeneous_clean_fleets_and_planted_ones_are_found():
    """Node rates that differ without any lemon (gamma, coefficient of variation 0.25: unit
    ages, temperature) at 16 and 128 nodes: the Poisson test against the pooled rate flags a
    false lemon in 9% / 16% of such clean fleets (the issue measured 6% / 10% on the
    simulator's); this test stays under the level, and three planted 8x nodes among 128 are
    found, with nothing else flagged, in most fleets (rates over 200 seeds in the module doc)."""
    seeds, false_any, found, pooled = 60, {16: 0, 128: 0}, 0, {16: 0, 128: 0}
    for n in (16, 128):
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            hours = rng.uniform(800, 1500, n)
            rate = 0.004 * rng.gamma(16.0, 1 / 16.0, n)  # CV 0.25
            k = rng.poisson(rate * hours)
            nodes = pl.DataFrame(
                {"host": [f"n{i}" for i in range(n)], "node_hours": hours, "failures": k}
            )
            false_any[n] += bool(score(nodes)["lemon"].any())
            e = hours * k.sum() / hours.sum()
            pooled[n] += bool(
                (adjust_bh(np.where(k > 0, poisson.sf(k - 1, e), 1.0)) < LEMON_ALPHA).any()
            )
            if n == 128:
                rate[:3] *= 8
                planted = nodes.with_columns(failures=pl.Series(rng.poisson(rate * hours)))
                flags = score(planted)["lemon"].to_numpy()
                found += bool(flags[:3].all() and not flags[3:].any())
    assert false_any[16] / seeds <= LEMON_ALPHA and false_any[128] / seeds <= LEMON_ALPHA
    assert pooled[128] / seeds > 2 * LEMON_ALPHA  # the old test on the same fleets
    assert found / seeds >= 0.8, found


def test_gain_of_removing_lemons_equals_a_hand_computation():
    # ten nodes of 1,000 h: nine fail once, one fails 30 times
    h = health_of([30] + [1] * 9, [1000] * 10)
    assert h.filter(pl.col("lemon"))["host"].to_list() == ["n000"]
    g = lemon_gain(h, target_gpus=1024, gpus_per_node=8, ckpt_cost_s=60, restart_s=600)
    lam = 39 / 10_000
    excess = 30 - 9 / 9000 * 1000  # against the other nodes' rate
    lam_without = 9 / 9_000  # refitted on the nine other nodes

    def goodput(rate):
        m = 1 / (rate * 1024 / 8)
        d, r = 60 / 3600, 600 / 3600
        x = d / (2 * m)
        tau = math.sqrt(2 * d * m) * (1 + math.sqrt(x) / 3 + x / 9) - d  # Daly
        return m, 1 / (m * math.exp(r / m) * math.expm1((tau + d) / m) / tau)

    m0, g0 = goodput(lam)
    m1, g1 = goodput(lam_without)
    assert g["lemons"] == 1 and g["excess_failures"] == pytest.approx(excess)
    assert g["baseline"]["mtti_hours"] == pytest.approx(m0)
    assert g["without_lemons"]["mtti_hours"] == pytest.approx(m1)
    assert g["baseline"]["goodput"] == pytest.approx(g0)
    assert g["without_lemons"]["goodput"] == pytest.approx(g1)
    assert g["goodput_gain"] == pytest.approx(g1 - g0)
    assert g["without_lemons"]["goodput_ci_low"] < g1 < g["without_lemons"]["goodput_ci_high"]


def test_no_failures_gives_no_gain_and_no_lemon():
    h = health_of([0, 0], [100, 100])
    assert lemon_gain(h, 1024) is None
    assert h["p_value"].to_list() == [1.0, 1.0] and not h["lemon"].any()


def _frames():
    """Two observed nodes and one seen only by the scheduler (no observation window)."""
    failures, windows = fleet(np.array([2, 0]), np.array([100, 50]))
    intr = conform("interruptions", pl.DataFrame([
        {"job_id": "1", "cause_host": "n000", "failure_domain": "infrastructure", "planned": False,
         "lost_gpu_hours": 12.5, "end_time": T0},
        {"job_id": "2", "cause_host": "n000", "failure_domain": "infrastructure", "planned": False,
         "lost_gpu_hours": 2.5, "end_time": T0},
        {"job_id": "3", "cause_host": "n000", "failure_domain": "workload", "planned": False,
         "lost_gpu_hours": 100.0, "end_time": T0},
        {"job_id": "4", "cause_host": "n001", "failure_domain": "infrastructure", "planned": True,
         "lost_gpu_hours": 100.0, "end_time": T0},
    ]))  # fmt: skip
    hw = conform("hw_events", pl.DataFrame([
        {"host": "n000", "severity": "fatal", "cluster": "east"},
        {"host": "n000", "severity": "warning", "cluster": "east"},
        {"host": "n000", "severity": "info", "cluster": "east"},
        {"host": "n001", "severity": "critical", "cluster": "east"},
    ]))  # fmt: skip
    hist = conform("component_history", pl.DataFrame([
        {"slot": "n000/gpu0", "serial": "a", "removed_at": T0, "failed": True},
        {"host": "n000", "serial": "b", "removed_at": T0, "failed": False},
        {"host": "n000", "serial": "c"},
    ]))  # fmt: skip
    att = conform("job_attempts", pl.DataFrame([
        {"cluster": "east", "job_id": "1", "n_gpus": 16, "nodes": ["n000", "n001"],
         "start_time": T0, "end_time": T0 + timedelta(hours=3)},
        {"cluster": "east", "job_id": "2", "n_gpus": 8, "nodes": ["n999"],
         "start_time": T0, "end_time": T0 + timedelta(hours=1)},
    ]))  # fmt: skip
    return failures, windows, intr, hw, hist, att


def test_per_node_counts_come_from_each_table_and_unobserved_nodes_are_counted_untested():
    h = build_node_health(*_frames())
    rows = {r["host"]: r for r in h.iter_rows(named=True)}
    a, b, c = rows["n000"], rows["n001"], rows["n999"]
    assert (a["interruptions"], a["lost_gpu_hours"]) == (
        2,
        15.0,
    )  # workload / planned ones are not the node's
    assert (a["hw_events"], a["hw_events_critical"], b["hw_events"]) == (2, 1, 1)
    assert (a["repairs"], a["failed_parts"]) == (2, 1)  # slot 'n000/gpu0' names the host too
    assert (a["gpu_hours_scheduled"], b["gpu_hours_scheduled"], c["gpu_hours_scheduled"]) == (
        24.0,
        24.0,
        8.0,
    )
    assert (a["node_hours"], a["failures"], a["cluster"]) == (100.0, 2, "east")
    assert (
        c["node_hours"] == 0
        and c["test"] == UNTESTED
        and c["p_value"] is None
        and c["lemon"] is None
    )
    s = summary(h)
    assert (s["nodes"], s["tested"], s["untested"], s["failures"]) == (3, 2, 1, 2)
    assert s["fleet_rate_per_node_hour"] == pytest.approx(2 / 150)


def test_refresh_writes_the_table_and_goodput_nodes_prints_it(tmp_path, capsys):
    wh = Warehouse(tmp_path / "home")
    failures, windows, intr, hw, hist, att = _frames()
    with wh.batch("t") as b:
        b.add(
            {
                "hw_events": hw.with_columns(
                    event_id=pl.Series([f"e{i}" for i in range(hw.height)]),
                    message=pl.Series([f"m{i}" for i in range(hw.height)]),
                    source=pl.lit("kernel"),
                ),
                "component_history": hist.with_columns(source=pl.lit("csv")),
                "job_attempts": att,
            }
        )
    wh.replace_table("interruptions", intr)
    wh.replace_table("node_failures", conform("node_failures", failures))
    df = refresh_node_health(wh, windows=windows)
    assert wh.read("node_health").equals(df)
    wh.refresh_catalog()
    assert main(["--home", str(wh.home), "nodes", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["untested"] == 1 and out["summary"]["tested"] == 2
    assert [n["host"] for n in out["nodes"]][:2] == ["n000", "n001"]
    assert out["nodes"][0]["failures"] == 2 and out["nodes"][0]["lost_gpu_hours"] == 15.0
    assert main(["--home", str(wh.home), "nodes", "--top", "1"]) == 0
    text = capsys.readouterr().out
    assert "Benjamini-Hochberg over 2 nodes" in text and "n000" in text and "n001" not in text
    assert "1 node(s) not tested (no observed node-hours)" in text
    assert text.rstrip().endswith("; no lemon node to remove")


def test_goodput_nodes_on_a_warehouse_without_node_health_is_one_line(tmp_path, capsys):
    home = tmp_path / "home"
    Warehouse(home).replace_table("interruptions", empty("interruptions"))
    assert main(["--home", str(home), "nodes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("goodput: error: node_health is empty") and err.count("\n") == 1


def _section(health: pl.DataFrame, target: int = 1024):
    section = node_health_section
    ctx = ReportContext(wh=None, t={"node_health": health}, target_gpus=target, scope="whole fleet")
    return section, section.build(ctx)


def test_report_section_lists_the_lemons_and_reads_the_gain_from_the_same_numbers():
    h = health_of([30] + [1] * 9, [1000] * 10)
    section, s = _section(h)
    g = lemon_gain(h, 1024)
    assert (section.KEY, section.TABLES) == ("node_health", ("node_health",))
    data = section.worst_frame(h)
    assert (
        data["host"][0] == "n000"
        and data["status"].to_list() == ["lemon"] + ["not significant"] * 9
    )
    assert s.reading.startswith(
        "10 nodes observed for 10,000 node-hours had 39 failures (3.9 per 1,000 node-hours). "
        f"Test: {h['test'][0]}, lemon when the adjusted p is below 0.05. "
        "1 lemon node(s) (n000) had 30 failures where 1 were expected, 0 interruptions"
    )
    b, w = g["baseline"], g["without_lemons"]
    assert (
        "With the fleet's rate refitted without them (each replaced by a typical node), a "
        f"1,024-GPU job's MTTI (node failure rate) goes from "
        f"{b['mtti_hours']:.1f} h to {w['mtti_hours']:.1f} h and its projected goodput from "
        f"{100 * b['goodput']:.1f}% to {100 * w['goodput']:.1f}%"
    ) in s.reading
    assert "<td>n000</td>" in s.extra_html and "<td>n001</td>" not in s.extra_html
    assert s.chart is not None


def test_report_section_without_lemons_names_the_worst_node():
    _, s = _section(health_of([3, 1, 1, 0], [100, 100, 100, 100]))
    assert (
        "No node fails significantly more often than the fleet; the worst, n000, had 3 failure(s) "
        "where 0.667 were expected" in s.reading
    )
    assert "Without" not in s.reading


def test_planted_lemons_found_through_node_failures_from_fatal_xids():
    """Known truth through the real failure definition: fatal GPU XIDs at Poisson times become
    node_failures episodes (repairable), then node_health flags the 10x nodes only."""
    from analysis.repairable import build_node_failures

    rng = np.random.default_rng(11)
    n, horizon = 80, 2000.0
    rate = np.full(n, 0.002)
    planted = [5, 40, 77]
    rate[planted] *= 10
    counts = rng.poisson(rate * horizon)
    hosts = np.repeat([f"n{i:03d}" for i in range(n)], counts)
    at = rng.uniform(0, horizon, counts.sum())
    hw = conform("hw_events", pl.DataFrame({
        "event_id": [f"x{i}" for i in range(counts.sum())], "host": hosts,
        "time": [T0 + timedelta(hours=float(h)) for h in at], "component_class": "gpu",
        "severity": "fatal", "event_type": "xid", "code": "79", "source": "kernel",
    }))  # fmt: skip
    _, windows = fleet(np.zeros(n, int), np.full(n, horizon))
    failures = build_node_failures(empty("interruptions"), hw, empty("node_events"), windows)
    h = build_node_health(
        failures,
        windows,
        empty("interruptions"),
        hw,
        empty("component_history"),
        empty("job_attempts"),
    )
    assert sorted(h.filter(pl.col("lemon"))["host"]) == [f"n{i:03d}" for i in planted]
    assert h["hw_events_critical"].sum() == counts.sum()


def test_goodput_nodes_alpha_reflags_the_stored_counts(tmp_path, capsys):
    wh = Warehouse(tmp_path / "home")
    wh.replace_table("node_health", health_of([9, 1, 1, 1, 1, 1], [100] * 6))
    wh.refresh_catalog()
    assert main(["--home", str(wh.home), "nodes", "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    p = stored["nodes"][0]["p_adjusted"]
    # 9 failures where the other nodes' rate expects 1 (the old pooled rate expected 2.33)
    assert (
        stored["nodes"][0]["host"] == "n000"
        and 1e-4 < p < 0.05
        and stored["summary"]["lemons"] == 1
    )
    assert main(["--home", str(wh.home), "nodes", "--json", "--alpha", "0.0001"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert strict["summary"]["lemons"] == 0 and strict["summary"]["alpha"] == 0.0001
    assert strict["gain"]["lemons"] == 0 and strict["gain"]["goodput_gain"] == 0
    assert main(["--home", str(wh.home), "nodes", "--alpha", "5"]) == 2
    assert capsys.readouterr().err == "goodput: error: --alpha must be between 0 and 1, e.g. 0.01\n"


def test_gain_projects_from_the_rates_goodput_project_uses():
    """Given the fitted rates, the baseline is ``goodput project``'s projection exactly, and the
    lemons' excess share comes off the hardware classes only (software keeps its rate)."""
    from analysis.job import Job
    from analysis.rate_sources import rates_from_table
    from analysis.scenario import project_one

    h = health_of([30] + [1] * 9, [1000] * 10)
    table = pl.DataFrame({"component_class": ["gpu", "software"], "events": [20.0, 10.0],
                          "exposure_hours": [8e6, 8e6], "unit": ["gpu", "gpu"]})  # fmt: skip
    rates = rates_from_table(table, source="test")
    g = lemon_gain(h, 1024, 8, 60, 600, rates=rates)
    assert g["basis"] == "fitted rates"
    want = project_one(None, Job(1024, 8, 60, restart_s=600), rates=rates)
    assert (
        g["baseline"]["goodput"] == want["goodput"]
        and g["baseline"]["mtti_hours"] == want["mtti_hours"]
    )
    left = (39 - g["excess_failures"]) / 39
    cut = project_one(None, Job(1024, 8, 60, restart_s=600), rates=rates.scaled({"gpu": left}))
    assert g["without_lemons"]["goodput"] == pytest.approx(cut["goodput"])
    assert g["without_lemons"]["mtti_hours"] == pytest.approx(cut["mtti_hours"])
    assert g["goodput_gain"] > 0


def test_nodes_project_and_headline_agree_on_the_demo(demo, capsys):
    """One projection, three readers: ``goodput nodes``, ``goodput project`` and the report's
    headline (the stored scale sweep) give the same goodput at the target scale."""
    import json

    from analysis.assumptions import TARGET_GPUS
    from analysis.scenario import project_one
    from dashboards.section import projection_at
    from pipelines.cli import main

    wh, _ = demo
    capsys.readouterr()
    assert main(["--home", str(wh.home), "nodes", "--json"]) == 0
    nodes = json.loads(capsys.readouterr().out)["gain"]["baseline"]
    headline = projection_at(wh.read("goodput_projections"), TARGET_GPUS)
    project = project_one(wh)  # what `goodput project` prints (the CLI would append it to the demo)
    assert nodes["goodput"] == pytest.approx(project["goodput"], rel=1e-12)
    assert headline["goodput"] == pytest.approx(project["goodput"], rel=1e-9)
    assert nodes["mtti_hours"] == pytest.approx(project["mtti_hours"], rel=1e-12)
