"""Node failures (episodes, gaps) and Nelson's MCF with the Lawless-Nadeau variance."""

from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from analysis.repairable import build_node_failures
from analysis.repairable import mean_cumulative_function
from analysis.repairable import refresh_repairable
from tests.conftest import table
from warehouse.schemas import TABLES
from warehouse.schemas import conform

T0 = datetime(2026, 1, 5)


def at(h: float) -> datetime:
    return T0 + timedelta(hours=h)


def hw(*rows) -> pl.DataFrame:
    out = [
        {
            "event_id": r.get("event_id", f"e{i}"),
            "source": "kernel",
            **{k: v for k, v in r.items() if k != "h"},
            "time": at(r["h"]),
        }
        for i, r in enumerate(rows)
    ]
    return conform("hw_events", pl.DataFrame(out, infer_schema_length=None))


def intr(*rows) -> pl.DataFrame:
    out = [
        {
            "cluster": "c",
            "scheduler": "slurm",
            "job_id": str(i),
            "attempt": 1,
            "end_time": at(r.pop("h")),
            "planned": False,
            "failure_domain": "infrastructure",
            **r,
        }
        for i, r in enumerate(rows)
    ]
    return conform("interruptions", pl.DataFrame(out, infer_schema_length=None))


def nev(*rows) -> pl.DataFrame:
    out = [{"time": at(r.pop("h")), "source": "slurmctld", **r} for r in rows]
    return conform("node_events", pl.DataFrame(out, infer_schema_length=None))


def windows(lengths: dict) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "host": list(lengths),
            "start": [T0] * len(lengths),
            "end": [at(v) for v in lengths.values()],
        }
    )


def test_episodes_gaps_and_causes():
    he = hw(
        {"h": 10, "host": "n1", "component_class": "gpu", "severity": "fatal", "event_id": "x79"},
        {
            "h": 10.01,
            "host": "n1",
            "component_class": "gpu",
            "severity": "critical",
            "caused_by": "x79",
        },
        {"h": 50, "host": "n1", "component_class": "psu", "severity": "critical"},
        {
            "h": 51,
            "host": "n1",
            "component_class": "cooling",
            "severity": "critical",
        },  # same outage
        {"h": 20, "host": "n2", "component_class": "ib_link", "severity": "critical"},
        {"h": 22, "host": "n2", "component_class": "nvlink", "severity": "fatal"},  # after a repair
        {
            "h": 30,
            "host": "n3",
            "component_class": "cooling",
            "severity": "warning",
        },  # not a failure
        {
            "h": 31,
            "host": "n3",
            "component_class": "software",
            "severity": "critical",
        },  # not a failure
    )
    it = intr(
        {"h": 10.02, "cause_host": "n1", "cause_class": "gpu", "cause_event": "x79"},
        {"h": 70, "cause_host": "n3", "cause_class": "unknown", "cause_event": "node_events:n3@x"},
        {"h": 80, "cause_host": "n3", "cause_class": "host_os", "planned": True},
        {"h": 81, "cause_host": "n3", "cause_class": "software", "failure_domain": "workload"},
    )
    ne = nev({"h": 21, "host": "n2", "event": "resume"}, {"h": 40, "host": "n1", "event": "resume"})
    f = build_node_failures(it, he, ne, windows({"n1": 100, "n2": 100, "n3": 100}))
    got = [
        (r["host"], r["failure_index"], round(r["gap_hours"], 3), r["cause_class"], r["source"])
        for r in f.iter_rows(named=True)
    ]
    assert got == [
        ("n1", 1, 10.0, "gpu", "hw_events"),
        ("n1", 2, 40.0, "psu", "hw_events"),
        ("n2", 1, 20.0, "ib_link", "hw_events"),
        ("n2", 2, 2.0, "nvlink", "hw_events"),
        ("n3", 1, 70.0, "unknown", "interruptions"),
    ]
    assert f.columns == list(TABLES["node_failures"].columns)
    # a short dedup window splits n1's PSU + cooling outage in two
    f2 = build_node_failures(
        it, he, ne, windows({"n1": 100, "n2": 100, "n3": 100}), dedup_window_s=1800
    )
    assert f2.filter(pl.col("host") == "n1").height == 3


def test_an_episode_picks_one_cause_whatever_the_order_of_tied_events():
    """Two GPU XIDs of one rank in the same second on one host: the episode's cause is the same
    event in every row order (it was the first of the group in whatever order rows came)."""
    he = hw(
        {"h": 10, "host": "n1", "component_class": "gpu", "severity": "fatal", "event_id": "b"},
        {"h": 10, "host": "n1", "component_class": "gpu", "severity": "fatal", "event_id": "a"},
    )
    ne, win = TABLES["node_events"].empty(), windows({"n1": 100})
    picks = {build_node_failures(intr(), h, ne, win)["cause_event"][0] for h in (he, he.reverse())}
    assert picks == {"a"}


def test_a_tied_episode_names_its_class_by_class_not_by_the_ids_the_paths_give():
    """Two fatal events of other classes in one second: the class named is the same whatever
    ids the events carry (ids hash the file's path, so the same files read from another folder
    carry others)."""
    ne, win = TABLES["node_events"].empty(), windows({"n1": 100})

    def cause(ids: tuple[str, str]) -> str:
        he = hw(
            {"h": 10, "host": "n1", "component_class": "psu", "severity": "fatal",
             "event_id": ids[0]},
            {"h": 10, "host": "n1", "component_class": "cpu", "severity": "fatal",
             "event_id": ids[1]},
        )  # fmt: skip
        return build_node_failures(intr(), he, ne, win)["cause_class"][0]

    assert cause(("a", "b")) == cause(("b", "a")) == "cpu"


def test_mcf_equal_windows_by_hand():
    f = pl.DataFrame({"host": ["n1", "n1", "n2", "n2"], "time": [at(10), at(50), at(20), at(22)]})
    m = mean_cumulative_function(f, windows({"n1": 100, "n2": 100, "n3": 100}))
    assert m["t_hours"].to_list() == [10.0, 20.0, 22.0, 50.0]
    assert m["n_at_risk"].to_list() == [3, 3, 3, 3]
    assert m["mcf"].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0, 4 / 3])
    # at the end, per-node counts 2, 2, 0 around the mean 4/3: robust var = sum((n_i - 4/3)^2) / 9
    assert m["se"][-1] == pytest.approx(np.sqrt(((2 - 4 / 3) ** 2 * 2 + (4 / 3) ** 2) / 9))
    assert (m["ci_low"] < m["mcf"]).all() and (m["ci_high"] > m["mcf"]).all()


def brute_force(times_by_host: dict, L: dict):
    all_t = np.unique(
        np.concatenate([np.asarray(v, float) for v in times_by_host.values() if len(v)])
    )
    hosts = list(L)
    d_i = np.array(
        [[np.sum(np.isclose(times_by_host.get(h, []), t)) for t in all_t] for h in hosts], float
    )
    risk = np.array([[t <= L[h] for t in all_t] for h in hosts], float)
    d_i *= risk
    r = risk.sum(axis=0)
    d = d_i.sum(axis=0)
    mcf = np.cumsum(d / r)
    var = (np.cumsum(risk * (d_i - d / r) / r, axis=1) ** 2).sum(axis=0)
    return all_t, r, mcf, np.sqrt(var)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mcf_matches_brute_force_with_staggered_windows(seed):
    rng = np.random.default_rng(seed)
    L = {f"n{i}": float(rng.integers(20, 200)) for i in range(25)}
    times = {}
    for h, length in L.items():
        k = int(rng.poisson(1.2))
        times[h] = sorted(rng.integers(1, int(length), k).astype(float).tolist())
    f = pl.DataFrame(
        {
            "host": [h for h, v in times.items() for _ in v],
            "time": [at(t) for v in times.values() for t in v],
        },
        schema={"host": pl.Utf8, "time": pl.Datetime("us")},
    )
    m = mean_cumulative_function(f, windows(L))
    t, r, mcf, se = brute_force(times, L)
    assert m["t_hours"].to_numpy() == pytest.approx(t)
    assert m["n_at_risk"].to_numpy() == pytest.approx(r)
    assert m["mcf"].to_numpy() == pytest.approx(mcf)
    assert m["se"].to_numpy() == pytest.approx(se)


def test_refresh_writes_both_tables(wh):
    he = hw({"h": 10, "host": "n1", "component_class": "gpu", "severity": "fatal"})
    ch = table(
        "component_history",
        component_class="psu",
        serial=["a", "b"],
        host=["n1", "n2"],
        installed_at=at(-1000),
    )
    ne = nev({"h": 0, "host": "n2", "event": "resume"}, {"h": 20, "host": "n1", "event": "resume"})
    with wh.batch("b") as b:
        b.add({"hw_events": he, "component_history": ch, "node_events": ne})
    _, mcf = refresh_repairable(wh)
    assert wh.read("node_failures")["host"].to_list() == ["n1"]
    assert wh.read("node_mcf")["n_at_risk"].to_list() == [2]
    assert mcf["mcf"].to_list() == [0.5]
