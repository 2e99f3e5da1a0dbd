"""Availability, MTTR and repair laws against known truth: outages generated node by node as
alternating up and down times of known means (availability = mean up / (mean up + mean down)),
repairs still open at the end of the window, a failure stream observed over a whole fleet
window, and every registered lifetime model fitted wherever laws are fitted."""

from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest

from analysis import lifetime_models
from analysis.availability import availability
from analysis.availability import refresh_availability
from analysis.outages import OUTAGE_COLUMNS
from warehouse.schemas import TABLES

T0 = datetime(2024, 1, 1)


def _alternating(rng, systems, nodes, hours, up_mean, repair, warm_up=5000.0):
    """Outages of ``systems`` x ``nodes`` nodes over [0, ``hours``]: exponential up times of
    ``up_mean``, repair times drawn by ``repair(rng)``; the nodes run from ``-warm_up`` so the
    window starts at a random point of their cycles (an outage under way at 0 is carried in); a
    repair not done by the end is open (no end, no repair time)."""
    rows = []
    for s in range(systems):
        for n in range(nodes):
            t = -warm_up
            while True:
                t += rng.exponential(up_mean)
                if t >= hours:
                    break
                end = t + repair(rng)
                if end >= 0:
                    rows.append((f"s{s}", f"s{s}n{n}", t, end))
                t = end
    df = pl.DataFrame(rows, schema=["system", "host", "a", "b"], orient="row")

    def at(h):
        return pl.lit(T0) + pl.duration(microseconds=(h * 3.6e9).round().cast(pl.Int64))

    done = pl.col("b") < hours
    return df.select(
        source=pl.lit("failures"),
        system="system",
        host="host",
        start=at(pl.col("a")),
        end=pl.when(done).then(at(pl.col("b"))),
        downtime_hours=pl.when(done).then(pl.col("b") - pl.col("a")),
        cause=pl.lit("hardware"),
        system_nodes=pl.lit(nodes),
        system_processors=pl.lit(None),
        open=~done,
    ).cast(OUTAGE_COLUMNS)


def _lognormal(mean, sigma=1.0):
    mu = np.log(mean) - sigma**2 / 2
    return lambda rng: rng.lognormal(mu, sigma)


def _covered(rows: pl.DataFrame, truth: float) -> float:
    return float(
        ((rows["availability_ci_low"] <= truth) & (truth <= rows["availability_ci_high"])).mean()
    )


def _in_bounds(a: pl.DataFrame) -> None:
    lo, est, hi = (
        a[c].to_numpy() for c in ("availability_ci_low", "availability", "availability_ci_high")
    )
    assert ((0 <= lo) & (lo <= est) & (est <= hi) & (hi <= 1)).all()


def test_availability_cis_lie_in_0_1_around_the_estimate_and_cover_the_truth():
    """Coverage over 100 systems of 8 nodes (lognormal repairs, heavier-tailed than the
    exponential): about 95% of the systems' and of the nodes' CIs hold the true availability.
    Nodes down most of the time (true availability 0.2) keep their CIs in [0, 1]: a
    compound-Poisson bootstrap of the downtime over fixed node-hours reached -1.7."""
    rng = np.random.default_rng(5)
    hours, up, down = 1000.0, 60.0, 4.0
    o = _alternating(rng, 100, 8, hours, up, _lognormal(down))
    a = availability(o, T0, T0 + timedelta(hours=hours), fit_laws=False)[0]
    truth = up / (up + down)
    systems, nodes = a.filter(pl.col("level") == "system"), a.filter(pl.col("level") == "node")
    assert systems.height == 100 and nodes.height == 800
    _in_bounds(a)
    assert 0.9 <= _covered(systems, truth) <= 0.99
    assert 0.92 <= _covered(nodes, truth) <= 0.995
    assert systems["availability"].mean() == pytest.approx(truth, abs=0.003)
    # few outages per node (about 3 in the window): the count's uncertainty is in the CI
    few = _alternating(rng, 40, 4, hours, 300.0, _lognormal(20.0))
    b = availability(few, T0, T0 + timedelta(hours=hours), fit_laws=False)[0]
    _in_bounds(b)
    assert _covered(b.filter(pl.col("level") == "node"), 300 / 320) >= 0.93
    # nodes down 80% of the time
    bad = _alternating(rng, 10, 2, 336.0, 5.0, _lognormal(20.0))
    c = availability(bad, T0, T0 + timedelta(hours=336), fit_laws=False)[0]
    _in_bounds(c)
    assert c["availability"].mean() == pytest.approx(0.2, abs=0.1)


def test_open_repairs_are_censored_in_mttr_and_the_repair_fits():
    """Repairs under way at the end of the window are counted down until then, right-censored
    in MTTR and the repair-time fits, and counted (``repairs_open``, ``n_censored``); counted as
    complete repairs they pull MTTR and the fitted repair law far below the truth (exponential
    repairs of mean 50 h, a 150-h window: a third of the repairs still open)."""
    rng = np.random.default_rng(7)
    o = _alternating(rng, 1, 400, 150.0, 100.0, lambda r: r.exponential(50.0), warm_up=0.0)
    n_open = int(o["open"].sum())
    assert n_open > 50
    a, fits, _ = availability(o, T0, T0 + timedelta(hours=150))
    s = a.filter(pl.col("level") == "system").row(0, named=True)
    assert s["repairs_open"] == n_open and s["failures"] == o.height
    assert s["mttr_ci_low"] <= 50 <= s["mttr_ci_high"]
    assert s["mttr_hours"] == pytest.approx(50, rel=0.12)
    node = a.filter(pl.col("host") == o.filter("open")["host"][0]).row(0, named=True)
    assert node["repairs_open"] == 1 and node["availability"] < 1
    rep = fits.filter((pl.col("quantity") == "repair") & (pl.col("model") == "exponential"))
    assert rep["n_censored"][0] == n_open
    p = rep["params"].str.json_decode()[0]["scale_hours"]
    assert p["ci_low"] <= 50 <= p["ci_high"]
    # down until the window's end: every node's hours down, open ones included
    end = T0 + timedelta(hours=150)
    down = (
        o.select(
            pl.min_horizontal(pl.coalesce("end", pl.lit(end)), pl.lit(end))
            - pl.max_horizontal("start", pl.lit(T0))
        )
        .to_series()
        .dt.total_microseconds()
        .sum()
        / 3.6e9
    )
    assert s["availability"] == pytest.approx(1 - down / (400 * 150), rel=1e-9)


def _table(name: str, rows: list[dict]) -> pl.DataFrame:
    return pl.concat([TABLES[name].empty(), pl.DataFrame(rows)], how="diagonal_relaxed")


def test_a_failure_stream_is_observed_over_the_fleet_window_on_the_hosts_it_watches(wh):
    """A health-event stream with two outages in a 14-day fleet window (a simulated 64-node
    fleet read 48% available, one node 9%, with CIs down to -1.7): its span is the window the
    scheduler's node events cover, not its first failure to its last repair, and its nodes the
    hosts it names."""
    day = timedelta(days=1)
    wh.replace_table(
        "node_events",
        _table(
            "node_events",
            [
                {"time": T0 + d * day, "cluster": "c", "host": h, "event": "resume"}
                for d in (0, 14)
                for h in ("n1", "n2", "n3", "n4")
            ],
        ),
    )
    start = T0 + 12.5 * day
    wh.replace_table(
        "failures",
        _table(
            "failures",
            [
                {
                    "system": "c",
                    "host": "n4",
                    "start_time": start,
                    "end_time": start + timedelta(hours=16),
                    "downtime_hours": 16.0,
                    "open": False,
                    "source": "health-events",
                },
                {
                    "system": "c",
                    "host": "n4",
                    "start_time": start + timedelta(hours=17),
                    "end_time": None,
                    "downtime_hours": None,
                    "open": True,
                    "source": "health-events",
                },
            ],
        ),
    )
    wh.replace_table(
        "health_events",
        _table(
            "health_events",
            [
                {"time": T0 + 3 * day, "system": "c", "host": h, "kind": "info"}
                for h in ("n3", "n4")
            ],
        ),
    )
    avail = refresh_availability(wh)[0]
    s = avail.filter((pl.col("source") == "failures") & (pl.col("level") == "system")).row(
        0, named=True
    )
    # open from 12.5 d + 17 h to the window's end (14 d): 19 h down, censored
    assert s["span_hours"] == 336 and s["nodes"] == 2 and s["repairs_open"] == 1
    assert s["availability"] == pytest.approx(1 - (16 + 19) / (2 * 336))
    assert 0 <= s["availability_ci_low"] <= s["availability"] <= s["availability_ci_high"] <= 1
    n4 = avail.filter((pl.col("source") == "failures") & (pl.col("host") == "n4")).row(
        0, named=True
    )
    assert n4["availability"] == pytest.approx(1 - 35 / 336)
    assert s["mttr_hours"] == pytest.approx((16 + 19) / 1)  # one repair done, one censored


THROWAWAY = """
from analysis.lifetime_models.weibull import Weibull


class Throwaway(Weibull):
    name = "throwaway"
    age_trend_parameter = None


MODEL = Throwaway
"""


@pytest.fixture
def throwaway_model(tmp_path, monkeypatch):
    """A lifetime model file added to the registry's package (a directory on its path)."""
    import sys

    (tmp_path / "throwaway.py").write_text(THROWAWAY)
    monkeypatch.setattr(lifetime_models, "__path__", [*lifetime_models.__path__, str(tmp_path)])
    lifetime_models.models.cache_clear()
    yield
    monkeypatch.undo()
    sys.modules.pop("analysis.lifetime_models.throwaway", None)
    lifetime_models.models.cache_clear()


def test_a_lifetime_model_file_is_fitted_wherever_laws_are_fitted(throwaway_model):
    """Repair times and times between failures (``repair_fits``) and component failure rates
    (``failure_rates``) fit every registered model: a new module is a new candidate in both."""
    from analysis.survival import failure_rates
    from sample_data.lifetimes import simulate_lifetimes

    assert "throwaway" in lifetime_models.names()
    rng = np.random.default_rng(3)
    o = _alternating(rng, 1, 6, 2000.0, 100.0, _lognormal(5.0))
    fits = availability(o, T0, T0 + timedelta(hours=2000))[1]
    fitted = fits.filter(pl.col("model") == "throwaway")
    assert sorted(fitted["quantity"]) == ["repair", "tbf"] and fitted["converged"].all()
    assert set(fits["model"]) == set(lifetime_models.names())
    lt = simulate_lifetimes({"gpu": (0.8, 5000.0)}, 300, rng)
    rates = failure_rates(lt, window=None)
    assert "throwaway" in set(rates["model"])
