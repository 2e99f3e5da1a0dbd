"""Fail-slow GPUs in the fleet simulator (analysis/fleetsim/slow.py) against the closed forms of
analysis/slowness/at_scale.py: the share of a 16k-GPU job's compute time lost running slow and
its replacements at detection, for straggler detection in 5 minutes and in 1 hour."""

import math
from dataclasses import replace

import numpy as np
import pytest

from analysis import lifetime_models
from analysis.class_rates import ClassRates
from analysis.fleetsim import engine
from analysis.fleetsim.run import fail_slow
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import validate
from analysis.fleetsim.scenario import with_knob
from analysis.lifetime_models.lognormal import LogNormal
from analysis.slowness import at_scale
from analysis.slowness.at_scale import FailSlow
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS

FS = FailSlow(2.0 / HOURS_PER_1K_UNIT_DAYS, LogNormal(mu_log_hours=math.log(1.5), sigma=1.0))
GPUS, DAYS, RESTART_S = 16_384, 40, 600


def spec_of(detect: float, **over) -> dict:
    return validate({
        "horizon_days": DAYS, "idle_failure_factor": 0.0,
        "fleet": {"nodes": GPUS // 8},
        "triage": {"hours": 0.0, "detect_prob": 1.0},
        "repair": {"model": "exponential", "params": {"scale_hours": 1.0}},
        "jobs": [{"gpus": GPUS, "checkpoint_interval_hours": 0.5, "checkpoint_cost_s": 60,
                  "restart_s": RESTART_S}],
        "fail_slow": {"detect_hours": detect}, **over,
    })  # fmt: skip


def _runs(detect: float, n: int = 6) -> list[dict]:
    # no fail-stop failures: every interruption is a slow GPU replaced
    rates = replace(ClassRates(("psu",), np.zeros(1), counts={"psu": ("node", 1)}), fail_slow=FS)
    spec = spec_of(detect)
    law = lifetime_models.get("exponential")(scale_hours=1.0)
    return [engine.run(spec, rates, law, spec["jobs"], seed) for seed in range(n)]


@pytest.mark.parametrize("detect", [5 / 60, 1.0])
def test_running_slow_and_replacements_match_the_closed_forms(detect):
    runs = _runs(detect)
    held = GPUS * DAYS * 24.0
    swaps = np.array([m["interruptions"] for m in runs])
    want = float(at_scale.replacements_per_hour(GPUS, FS, detect)) * DAYS * 24
    # Poisson counts: the mean of 6 within 3.5 of its standard errors
    assert abs(swaps.mean() - want) < 3.5 * math.sqrt(want / len(runs))
    # the share of compute time (all but the restarts) lost running slow
    lost = np.array([
        m["lost_gpu_hours:fail_slow"] / (held - m["interruptions"] * RESTART_S / 3600 * GPUS)
        for m in runs
    ])  # fmt: skip
    share = float(at_scale.lost_share(GPUS, FS, detect))
    assert abs(lost.mean() - share) < 3.5 * lost.std(ddof=1) / math.sqrt(lost.size) + 1e-3
    # every GPU-hour productive or lost to a named cause
    m = runs[0]
    named = sum(v for k, v in m.items() if k.startswith("lost_gpu_hours:"))
    assert m[f"goodput:{GPUS}"] * held + named == pytest.approx(held, rel=1e-9)
    if detect < 0.1:  # few minutes slow before a replacement: the goodput is the closed form's
        g = np.array([m[f"goodput:{GPUS}"] for m in runs])
        closed = at_scale.goodput(GPUS, FS, detect, math.inf, 0.5, 60 / 3600, RESTART_S / 3600)
        assert abs(g.mean() - float(closed)) < 3.5 * g.std(ddof=1) / math.sqrt(g.size) + 2e-3


def test_detection_sooner_trades_time_slow_for_replacements():
    soon, late = _runs(5 / 60, 3), _runs(1.0, 3)
    assert np.mean([m["lost_gpu_hours:fail_slow"] for m in soon]) < 0.2 * np.mean(
        [m["lost_gpu_hours:fail_slow"] for m in late]
    )
    assert np.mean([m["interruptions"] for m in soon]) > np.mean([m["interruptions"] for m in late])


def test_a_scenarios_fail_slow_keys_and_detection_knob():
    spec = spec_of(1.0, fail_slow={"rate_per_1k_gpu_days": 4.0, "model": "exponential",
                                   "params": {"scale_hours": 2.0}, "factor": 1.5})  # fmt: skip
    fs = fail_slow(spec, FS)
    assert fs.rate == pytest.approx(4.0 / HOURS_PER_1K_UNIT_DAYS) and fs.factor == 1.5
    assert fs.duration.mean() == pytest.approx(2.0)
    assert fail_slow(spec_of(1.0), FS) is FS and fail_slow(spec_of(1.0), None) is None
    assert fail_slow(spec_of(1.0, fail_slow={"rate_per_1k_gpu_days": 0}), FS) is None
    with pytest.raises(ScenarioError, match="needs fail_slow.model"):
        fail_slow(spec_of(1.0, fail_slow={"rate_per_1k_gpu_days": 1.0}), FS)
    assert (
        with_knob(spec_of(1.0), "fail_slow.detect_hours", 0.25)["fail_slow"]["detect_hours"] == 0.25
    )
    assert math.isinf(spec_of(math.inf)["fail_slow"]["detect_hours"])
