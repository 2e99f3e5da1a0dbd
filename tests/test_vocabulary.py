"""One vocabulary, one colour, one number: a class keeps its name and its colour in every chart,
a missing partition has one label, and the readings format numbers alike."""

from datetime import datetime

import altair as alt
import polars as pl

from analysis.numbers import in_hours
from analysis.taxonomy import NONE_LABEL
from analysis.taxonomy import WORKLOAD
from dashboards import charts
from dashboards.section import change


def _colours(spec: dict, field: str) -> dict[str, str]:
    """class -> colour of the first colour encoding of ``field`` in a top-level spec."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            enc = node.get("color")
            if isinstance(enc, dict) and enc.get("field") == field and "scale" in enc:
                found.append(dict(zip(enc["scale"]["domain"], enc["scale"]["range"], strict=True)))
            for k, v in node.items():
                if k != "datasets":
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found[0]


def _spec(chart) -> dict:
    return charts.class_colors(chart.to_dict())


def test_a_class_has_one_colour_whatever_else_a_chart_shows():
    a = (
        alt.Chart(pl.DataFrame({"component_class": ["gpu", "psu"], "n": [1, 2]}))
        .mark_bar()
        .encode(x="n:Q", color=alt.Color("component_class:N", scale=alt.Scale(scheme="category10")))
    )
    b = alt.Chart(
        pl.DataFrame({"cause_class": ["nvlink", "gpu", WORKLOAD, "node"], "n": [1, 2, 3, 4]})
    )
    b = b.mark_line().encode(x="n:Q", color="cause_class:N")
    ca, cb = _colours(_spec(a), "component_class"), _colours(_spec(b), "cause_class")
    assert ca == {
        "gpu": charts.CLASS_COLORS["gpu"],
        "psu": charts.CLASS_COLORS["psu"],
    }  # scheme replaced
    assert cb["gpu"] == ca["gpu"] == "#d62728"
    assert cb[WORKLOAD] == charts.CLASS_COLORS[WORKLOAD]
    assert list(cb) == ["gpu", "nvlink", WORKLOAD, "node"]  # palette order; the unknown class last
    assert cb["node"] == charts.OTHER_CLASS_COLOR
    assert len(set(charts.CLASS_COLORS.values())) == len(
        charts.CLASS_COLORS
    )  # no two classes alike


def test_the_causes_pareto_uses_the_class_palette():
    from dashboards.sections.causes import cause_mix_frame
    from dashboards.sections.causes import causes_chart
    from dashboards.sections.causes import llama3_frame

    intr = pl.DataFrame(
        {
            "cause_class": ["gpu", "gpu", "software"],
            "failure_domain": ["infrastructure"] * 2 + ["workload"],
            "planned": [False] * 3,
            "lost_gpu_hours": [1.0, 2.0, 3.0],
        }
    ).with_columns(
        pl.when(pl.col("failure_domain") == "workload")
        .then(pl.lit(WORKLOAD))
        .otherwise(pl.col("cause_class"))
        .alias("cause_class")
    )
    spec = _spec(causes_chart(cause_mix_frame(intr), llama3_frame()))
    colours = _colours(spec, "cause_class")
    assert (colours["gpu"], colours[WORKLOAD]) == ("#d62728", charts.CLASS_COLORS[WORKLOAD])
    # the comparison beside it keeps its own two source colours (not merged with the classes')
    assert spec["resolve"]["scale"]["color"] == "independent"
    compare = spec["hconcat"][1]["encoding"]["color"]
    assert compare["field"] == "source" and compare["scale"]["range"] == ["#4c78a8", "#bab0ac"]


def test_a_missing_partition_is_named_alike_in_explore_and_trend():
    from analysis.trend import losses_frame
    from dashboards.sections.explore import explore_frame

    t = datetime(2026, 1, 5)
    keys = {"cluster": ["c"], "scheduler": ["slurm"], "job_id": ["1"], "attempt": [0]}
    att = pl.DataFrame(
        {
            **keys,
            "partition": [None],
            "account": ["a"],
            "n_gpus": [8],
            "start_time": [t],
            "end_time": [datetime(2026, 1, 6)],
        },
        schema_overrides={"partition": pl.Utf8},
    )
    intr = pl.DataFrame(
        {
            **keys,
            "end_time": [datetime(2026, 1, 6)],
            "cause_class": ["gpu"],
            "failure_domain": ["infrastructure"],
            "cause_host": [None],
            "planned": [False],
            "lost_gpu_hours": [4.0],
        },
        schema_overrides={"cause_host": pl.Utf8},
    )
    assert explore_frame(intr, att)["partition"].to_list() == [NONE_LABEL]
    assert losses_frame(att, intr, "partition")["partition"].to_list() == [NONE_LABEL]
    assert losses_frame(att, intr, "node")["node"].to_list() == [NONE_LABEL]


def test_times_between_events_are_in_hours_and_changes_are_signed():
    assert [in_hours(h) for h in (0.1437, 4.31, 30.6, 1435.2, None)] == [
        "0.14 h",
        "4.3 h",
        "30.6 h",
        "1,435 h",
        "n/a",
    ]
    assert change(0.8889, 0.9375, "points") == "-4.9 points"
    assert change(32.0, 24.0, "GPU-hours") == "+8 GPU-hours, +33%"
    assert change(1, 0, "interruptions") == "+1 interruptions"
    assert change(None, 3.0) == "n/a"


# jargon a reader outside reliability engineering may not know; each found in a section's text
# must be a glossary entry
JARGON = ("MTTI", "MTBF", "Weibull", "Holm", "Cox", "AIC", "Kaplan-Meier", "Daly", "Young", "lemon",
          "hazard ratio", "unit-days", "node-hours", "badput", "goodput", "GPU-hours", "adjusted p",
          "quarantined", "observation window", "spares", "Llama 3", "infant mortality", "wear-out",
          "exposure", "95% band", "sensitivity", "what-if", "scope")  # fmt: skip


def test_every_jargon_term_the_sections_use_is_in_the_glossary():
    from pathlib import Path

    import dashboards.sections as pkg
    from dashboards.sections.glossary import GLOSSARY

    text = "\n".join(
        p.read_text() for p in Path(pkg.__file__).parent.glob("*.py") if p.stem != "glossary"
    )
    used = [t for t in JARGON if t.lower() in text.lower()]
    assert len(used) >= 20  # the list is alive: most of it is in use
    keys = {k.lower() for k in GLOSSARY}
    assert [t for t in used if t.lower() not in keys] == []
    assert WORKLOAD in GLOSSARY  # the class the warehouse stores as software in the workload domain


def test_glossary_section_lists_every_term_once():
    from dashboards.section import ReportContext
    from dashboards.sections import glossary

    s = glossary.build(ReportContext(wh=None, t={}, target_gpus=1))
    assert s.extra_html.count("<dt ") == len(glossary.GLOSSARY)
    assert '<dt id="term-MTBF">MTBF</dt><dd>mean time between failures, in hours' in s.extra_html
