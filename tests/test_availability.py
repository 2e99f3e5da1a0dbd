"""Availability and repair: node outages from down/drain -> resume, per-system and per-node
MTBF / MTTR / availability with CIs, repair and TBF fits, root causes, the CLI and the report
section, on hand-made records with known answers and on the LANL extract."""

from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl
import pytest
from scipy import stats

from analysis.availability import availability
from analysis.availability import refresh_availability
from analysis.outages import node_outages
from analysis.outages import outages
from dashboards.report import build_sections
from ingest.base import ParseContext
from ingest.runner import ingest_paths
from pipelines.cli import main
from tests.conftest import FIXTURES
from warehouse.schemas import TABLES

T0 = datetime(2024, 1, 1)


def _events(rows):
    df = pl.DataFrame(
        [
            {"time": T0 + timedelta(hours=h), "cluster": "c", "host": host, "event": e, "reason": r}
            for h, host, e, r in rows
        ]
    )
    return pl.concat([TABLES["node_events"].empty(), df], how="diagonal_relaxed")


def test_node_outages_from_state_changes():
    ev = _events(
        [
            (1, "n1", "resume", None),  # up already: no outage
            (2, "n1", "drain", "Kill task failed"),
            (3, "n1", "down", "not responding"),  # one outage
            (5, "n1", "resume", None),
            (6, "n2", "down", "GPU fell off the bus"),  # still down at the end of the data
            (8, "n3", "reboot", None),  # not a state this reads
            (10, "n1", "down", "ECC"),
            (11, "n1", "ready", None),
        ]
    )
    o = node_outages(ev).sort("host", "start")
    assert o.select("host", "cause", "downtime_hours").rows() == [
        ("n1", "Kill task failed", 3.0),
        ("n1", "ECC", 1.0),
        ("n2", "GPU fell off the bus", 5.0),
    ]
    assert (
        node_outages(ev, observed_to=T0 + timedelta(hours=30)).filter(pl.col("host") == "n2")[
            "downtime_hours"
        ][0]
        == 24
    )


def _failures(rows, nodes=None):
    df = pl.DataFrame(
        [
            {
                "system": s,
                "host": h,
                "start_time": T0 + timedelta(hours=a),
                "downtime_hours": d,
                "end_time": None if d is None else T0 + timedelta(hours=a + d),
                "cause": c,
                "system_nodes": nodes,
            }
            for s, h, a, d, c in rows
        ],
        schema_overrides={"system_nodes": pl.Int32},
    )
    return pl.concat([TABLES["failures"].empty(), df], how="diagonal_relaxed")


def test_system_and_node_numbers():
    f = _failures(
        [
            ("A", "a1", 0, 2.0, "hardware"),
            ("A", "a2", 50, 1.0, "software"),
            ("A", "a1", 98, 2.0, "hardware"),
            ("B", "b1", 0, None, "hardware"),
            ("B", "b1", 10, None, None),
        ],
        nodes=4,
    )
    avail, fits, causes = availability(outages(f, TABLES["node_events"].empty()))
    a = avail.filter((pl.col("system") == "A") & (pl.col("level") == "system")).row(0, named=True)
    # span 0 .. 100 h (the last repair ends at 100), 4 nodes
    assert a["span_hours"] == 100 and a["nodes"] == 4 and a["failures"] == 3
    assert a["mtbf_hours"] == pytest.approx(100 / 3)
    assert a["mtbf_ci_low"] == pytest.approx(100 / (stats.chi2.ppf(0.975, 8) / 2))
    assert a["mttr_hours"] == pytest.approx(5 / 3)
    assert a["availability"] == pytest.approx(1 - 5 / 400) and a["nines"] == pytest.approx(
        -np.log10(5 / 400)
    )
    assert a["availability_ci_low"] <= a["availability"] <= a["availability_ci_high"]
    assert a["failures_per_node_year"] == pytest.approx(3 / 400 * 8760)
    node = avail.filter((pl.col("system") == "A") & (pl.col("host") == "a1")).row(0, named=True)
    assert node["failures"] == 2 and node["availability"] == pytest.approx(1 - 4 / 100)
    b = avail.filter((pl.col("system") == "B") & (pl.col("level") == "system")).row(0, named=True)
    assert (
        b["repairs_known"] == 0 and b["availability"] is None and b["mttr_hours"] is None
    )  # never invented
    assert b["mtbf_hours"] == pytest.approx(5.0)  # span 0 .. 10 h, 2 failures
    share = {
        (r["system"], r["cause"]): (r["share"], r["downtime_share"])
        for r in causes.iter_rows(named=True)
    }
    assert share[("A", "hardware")] == (pytest.approx(2 / 3), pytest.approx(4 / 5))
    assert share[(None, "hardware")][0] == pytest.approx(3 / 5) and share[("B", None)][0] == 0.5
    assert fits.height == 0  # under MIN_FIT durations: no fits


def test_bootstrap_cis_do_not_depend_on_the_order_of_the_outages():
    rows = [("A", f"a{i % 3}", 7.0 * i, 0.5 + (i * 0.37) % 3, "hardware") for i in range(40)]
    o = outages(_failures(rows, nodes=4), TABLES["node_events"].empty())
    first = availability(o)[0].sort("system", "level", "host", nulls_last=True)
    shuffled = availability(o.sample(fraction=1.0, shuffle=True, seed=3))[0]
    assert shuffled.sort("system", "level", "host", nulls_last=True).equals(first)
    assert first["availability_ci_low"].null_count() < first.height


def test_fits_find_the_generating_distributions():
    rng = np.random.default_rng(3)
    gaps = rng.weibull(0.6, 400) * 20  # clustered failures: shape 0.6
    starts = np.cumsum(gaps)
    repairs = rng.lognormal(0.5, 1.0, 400)
    f = _failures(
        [
            ("S", f"n{i % 7}", float(s), float(r), "hardware")
            for i, (s, r) in enumerate(zip(starts, repairs, strict=True))
        ]
    )
    avail, fits, _ = availability(outages(f, TABLES["node_events"].empty()))
    best = dict(fits.filter(pl.col("selected")).select("quantity", "model").rows())
    assert best == {"repair": "lognormal", "tbf": "weibull"}
    w = fits.filter((pl.col("quantity") == "tbf") & (pl.col("model") == "weibull")).row(
        0, named=True
    )
    assert w["shape_ci_low"] < 0.6 < w["shape_ci_high"] and w["shape_ci_high"] < 1
    assert fits.filter(pl.col("quantity") == "repair")["n"][0] == 400
    med = fits.filter((pl.col("quantity") == "repair") & (pl.col("model") == "lognormal"))[
        "median_hours"
    ][0]
    assert med == pytest.approx(np.exp(0.5), rel=0.15)
    sysrow = avail.filter(pl.col("level") == "system").row(0, named=True)
    assert sysrow["tbf_shape"] == pytest.approx(w["shape"]) and sysrow["tbf_reading"].startswith(
        "decreasing hazard"
    )


def test_lanl_extract_cli_and_report(wh, capsys):
    reports = ingest_paths(
        wh,
        [FIXTURES / "lanl" / "lanl_sample.csv"],
        "auto",
        ParseContext(not_before=datetime(1990, 1, 1)),
    )
    assert reports[0].rows_ok == 302
    wh.refresh_catalog()
    avail, fits, causes = refresh_availability(wh)
    systems = avail.filter(pl.col("level") == "system")
    assert (
        systems["failures"].sum() == 302 and (systems["repairs_known"] == systems["failures"]).all()
    )
    assert systems.filter(pl.col("system") == "2")["nodes"][0] == 49  # LANL's own system size
    assert fits.filter(pl.col("selected") & (pl.col("quantity") == "repair")).height > 0
    every = causes.filter(pl.col("system").is_null())
    assert every["failures"].sum() == 302 and every["share"].sum() == pytest.approx(1.0)
    wh.refresh_catalog()
    home = str(wh.home)
    assert main(["availability", "--home", home]) == 0
    out = capsys.readouterr().out
    assert "repair time: best by AIC" in out and "root causes" in out and "hardware" in out
    assert (
        main(["availability", "--home", home, "--system", "20", "--level", "node", "--top", "3"])
        == 0
    )
    assert len(capsys.readouterr().out.splitlines()) >= 4
    assert main(["availability", "--home", home, "--system", "nope"]) == 2
    sections = {s.key: s for s in build_sections(wh, target_gpus=1024)}
    assert (
        sections["availability"].chart is not None
        and "Repair times" in sections["availability"].reading
    )
    assert "root cause" in sections["availability"].extra_html


def test_missing_inputs_and_no_section(wh):
    wh.refresh_catalog()
    from analysis.status import MissingInputs

    with pytest.raises(MissingInputs):
        refresh_availability(wh)
    assert "availability" not in {s.key for s in build_sections(wh, target_gpus=1024)}


def test_a_node_down_for_two_faults_at_once_is_down_once():
    """Two faults of one node overlapping (a health stream's GPU and NVLink faults): each keeps
    its repair time (MTTR, repair fits), but availability counts the node's hours down once."""
    f = _failures(
        [
            ("A", "a1", 0, 2.0, "gpu"),
            ("A", "a1", 1, 3.0, "nvlink"),  # 1 h of it while the first is still down
            ("A", "a1", 5, 1.0, "gpu"),
            ("A", "a1", 5.5, 0.25, "psu"),  # entirely inside the one before
            ("A", "a2", 9, 1.0, "gpu"),
        ],
        nodes=2,
    )
    avail = availability(outages(f, TABLES["node_events"].empty()))[0]
    a = avail.filter(pl.col("level") == "system").row(0, named=True)
    # span 0 .. 10 h x 2 nodes; a1 down 0..4 and 5..6, a2 9..10: 6 node-hours
    assert a["availability"] == pytest.approx(1 - 6 / 20)
    assert a["mttr_hours"] == pytest.approx((2 + 3 + 1 + 0.25 + 1) / 5)
    assert a["downtime_hours"] == pytest.approx(7.25)  # the repair times, each whole
    assert a["availability_ci_low"] <= a["availability"] <= a["availability_ci_high"]
    a1 = avail.filter(pl.col("host") == "a1").row(0, named=True)
    assert a1["availability"] == pytest.approx(1 - 5 / 10)
