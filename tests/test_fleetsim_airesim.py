"""AIReSim's published Table I configuration (tests/fixtures/airesim/config.yaml, its
repository's config.yaml; provenance in tests/fixtures/README.md) reproduced with matching
semantics (``analysis.fleetsim.airesim``): mean wall clock within 2% of its published
9,873 h and ETTR within 1 point of 62.3%, and its finding that removing systematic failures
(no bad servers) saves at most 2.3% of the wall clock. A few replications here;
benchmarks/bench_fleetsim_airesim.py runs 30 beside AIReSim itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from analysis.fleetsim import airesim
from analysis.fleetsim import engine
from analysis.fleetsim.run import repair_law
from analysis.fleetsim.run import seed_of
from analysis.fleetsim.run import t_half
from analysis.fleetsim.run import triage_law
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import with_knob

CONFIG = Path(__file__).parent / "fixtures" / "airesim" / "config.yaml"
PUBLISHED_WALL_HOURS = 9873.0
PUBLISHED_ETTR = 0.623
PUBLISHED_SAVING = 0.023  # removing systematic failures saves at most this share
REPLICATIONS = 3


def runs(spec, rates, n=REPLICATIONS):
    law, tri = repair_law(spec), triage_law(spec)
    return [engine.run(spec, rates, law, spec["jobs"], seed_of(spec, i), tri) for i in range(n)]


@pytest.fixture(scope="module")
def table_one():
    config = yaml.safe_load(CONFIG.read_text())
    spec, rates = airesim.scenario(config)
    g = spec["jobs"][0]["gpus"]
    base = runs(spec, rates)
    clean = runs(with_knob(spec, "bad_nodes.share", 0.0), rates)
    return config, g, base, clean


def test_the_published_configuration_reads_as_published(table_one):
    config, g, base, _ = table_one
    wall = np.array([r[f"wall_hours:{g}"] for r in base])
    ettr = np.array([r[f"ettr:{g}"] for r in base])
    assert abs(wall.mean() / PUBLISHED_WALL_HOURS - 1) < 0.02
    assert abs(ettr.mean() - PUBLISHED_ETTR) < 0.01
    # the work is the job's length; ETTR is work over wall clock, as AIReSim's ETR
    assert ettr == pytest.approx(airesim.ideal_hours(config) / wall)
    assert all(r["unfinished_jobs"] == 0 for r in base)
    # AIReSim's report: 11,146 failures per run of which 689 systematic
    assert np.mean([r["failures"] for r in base]) == pytest.approx(11_146, rel=0.02)
    assert np.mean([r["systematic_failures"] for r in base]) == pytest.approx(689, rel=0.1)


def test_removing_systematic_failures_saves_at_most_what_was_published(table_one):
    _, g, base, clean = table_one
    saving = np.array(
        [1 - c[f"wall_hours:{g}"] / b[f"wall_hours:{g}"] for b, c in zip(base, clean, strict=True)]
    )
    assert all(c["systematic_failures"] == 0 for c in clean)
    # consistent with <= 2.3% (its CI reaches it) and not far below: bad servers do matter
    assert saving.mean() - t_half(saving) <= PUBLISHED_SAVING
    assert saving.mean() > 0.015


def test_a_configuration_it_cannot_map_is_a_one_line_error():
    config = yaml.safe_load(CONFIG.read_text())
    with pytest.raises(ScenarioError, match="only its exponential failure distribution"):
        airesim.scenario({**config, "failure_distribution": "weibull"})
