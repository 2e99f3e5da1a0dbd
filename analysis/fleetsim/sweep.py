"""What-if studies of a fleet scenario: the baseline, each knob sweep, the spare-sizing curve,
a ranking of the sweep points by fleet-goodput gain, and the ``fleetsim_results`` rows.

Every point runs the same replication seeds as the baseline (common random numbers), so a
gain is the knob's effect, not noise: its CI is the paired one (``run.paired``), stored as the
metric ``fleet_goodput_gain`` of each sweep and spare-curve point. The ranking has the shape of
``analysis.whatif.sensitivity``: item, kind, change, goodput_base, goodput, gain, plus the
gain's CI.
"""

from __future__ import annotations

import polars as pl

from analysis.fleetsim.run import Estimates
from analysis.fleetsim.run import Inputs
from analysis.fleetsim.run import paired
from analysis.fleetsim.run import simulate
from analysis.fleetsim.scenario import with_knob
from warehouse.schemas import conform

SPARES_KNOB = "fleet.hot_spares"
GOODPUT = "fleet_goodput"
GAIN = "fleet_goodput_gain"  # a point's paired gain over the baseline


def study(spec: dict, inputs: Inputs, progress=None, workers: int | None = None) -> dict:
    """{'baseline': Estimates, 'sweeps': [(knob, value, Estimates)], 'spare_curve':
    [(spares, Estimates)]} for a validated scenario. A sweep of ``fleet.hot_spares`` turns
    nodes of the fleet into spares; a spare-curve point of K spares keeps the other nodes and
    buys K spares (fleet.nodes grows), so it shows what spares cost against what they buy."""

    def point(s):
        return simulate(s, inputs.for_spec(s), progress, workers)

    out = {"baseline": simulate(spec, inputs, progress, workers), "sweeps": [], "spare_curve": []}
    for sw in spec["sweeps"]:
        for v in sw["values"]:
            out["sweeps"].append((sw["knob"], v, point(with_knob(spec, sw["knob"], v))))
    f = spec["fleet"]
    for k in spec["spare_curve"]:  # spares bought on top of the fleet's other nodes
        grown = with_knob(spec, "fleet.nodes", f["nodes"] - f["hot_spares"] + k)
        out["spare_curve"].append((k, point(with_knob(grown, SPARES_KNOB, k))))
    for e in [e for *_, e in out["sweeps"]] + [e for _, e in out["spare_curve"]]:
        e.mean[GAIN], e.ci_low[GAIN], e.ci_high[GAIN] = paired(e, out["baseline"], GOODPUT)
    return out


def ranking(res: dict) -> pl.DataFrame:
    """Sweep points ranked by fleet-goodput gain over the baseline, largest first."""
    b: Estimates = res["baseline"]
    rows = []
    for knob, v, e in res["sweeps"]:
        rows.append({
            "item": knob,
            "kind": "class" if knob.startswith("rate:") else "knob",
            "change": f"{knob} = {v}",
            "knob_value": None if v is None else float(v),
            "goodput_base": b.mean[GOODPUT],
            "goodput": e.mean[GOODPUT],
            "gain": e.mean[GAIN],
            "gain_ci_low": e.ci_low[GAIN],
            "gain_ci_high": e.ci_high[GAIN],
        })  # fmt: skip
    schema = {"item": pl.Utf8, "kind": pl.Utf8, "change": pl.Utf8, "knob_value": pl.Float64,
              **{c: pl.Float64 for c in ("goodput_base", "goodput", "gain", "gain_ci_low",
                                         "gain_ci_high")}}  # fmt: skip
    return pl.DataFrame(rows, schema=schema).sort("gain", descending=True)


def result_rows(name: str, res: dict) -> pl.DataFrame:
    """``fleetsim_results`` rows: one per scenario, study point and metric."""
    points = [("baseline", None, None, res["baseline"])]
    points += [("sweep", k, v, e) for k, v, e in res["sweeps"]]
    points += [("spare_curve", SPARES_KNOB, k, e) for k, e in res["spare_curve"]]
    rows = []
    for st, knob, v, e in points:
        for metric, m in e.mean.items():
            rows.append({
                "scenario": name, "study": st, "knob": knob,
                "knob_value": None if v is None else float(v),
                "metric": metric, "mean": m, "ci_low": e.ci_low[metric],
                "ci_high": e.ci_high[metric], "halfwidth_fit": e.fit_half.get(metric, 0.0),
                "halfwidth_sim": e.sim_half.get(metric, 0.0), "replications": e.replications,
                "converged": e.converged,
            })  # fmt: skip
    return conform("fleetsim_results", pl.DataFrame(rows, infer_schema_length=None))


def to_json(name: str, res: dict) -> dict:
    """The study as one JSON-able object (``goodput fleetsim --json``)."""

    def est(e: Estimates) -> dict:
        return {"replications": e.replications, "converged": e.converged, "metrics": e.as_dict()}

    return {
        "scenario": name,
        "baseline": est(res["baseline"]),
        "sweeps": [{"knob": k, "value": v, **est(e)} for k, v, e in res["sweeps"]],
        "spare_curve": [{"hot_spares": k, **est(e)} for k, e in res["spare_curve"]],
        "ranking": ranking(res).to_dicts(),
    }


def format_study(name: str, res: dict) -> list[str]:
    """The study as text (``goodput fleetsim``): headline metrics with CIs, ETTR and goodput
    per job size, lost GPU-hours by cause, the ranked knobs and the spare-sizing curve."""
    b = res["baseline"]

    def ci(e: Estimates, k: str, fmt: str = "{:.2%}") -> str:
        return f"{fmt.format(e.mean[k])} [{fmt.format(e.ci_low[k])}, {fmt.format(e.ci_high[k])}]"

    def fits(e: Estimates, k: str) -> str:
        f, s = e.fit_half.get(k, 0.0), e.sim_half.get(k, 0.0)
        return f" (fits {f * f / (f * f + s * s):.0%} of the width)" if f > 0 else ""

    state = "converged" if b.converged else "NOT converged (raise replications.max)"
    drawn = any(v > 0 for v in b.fit_half.values())
    how = ("; the CIs carry the fits' uncertainty (rate draws) and the simulation's" if drawn
           else "; CIs over replications at the point rates")  # fmt: skip
    out = [f"scenario {name}: {b.replications} replications, {state}; 95% CIs in brackets{how}",
           f"  fleet goodput      {ci(b, GOODPUT)}{fits(b, GOODPUT)}",
           f"  node availability  {ci(b, 'node_availability', '{:.3%}')}",
           (f"  repair queue       {ci(b, 'repair_queue_mean', '{:.2f}')} nodes, wait "
           f"{ci(b, 'repair_wait_hours', '{:.2f}')} h"),
           (f"  spare utilisation  {ci(b, 'spare_utilisation')}, requests finding no hot spare "
           f"{ci(b, 'spare_blocking')}"),
           (f"  failures {b.mean['failures']:,.0f}, interruptions {b.mean['interruptions']:,.0f}, "
           f"retired nodes {b.mean['retired_nodes']:,.1f} (means per replication)"),
           "  job size (GPUs)    ETTR                        goodput"]  # fmt: skip
    sizes = sorted(int(k.split(":")[1]) for k in b.mean if k.startswith("ettr:"))
    for g in sizes:
        out.append(f"  {g:>15,}    {ci(b, f'ettr:{g}'):<28}{ci(b, f'goodput:{g}')}")
    for g in sorted(int(k.split(":")[1]) for k in b.mean if k.startswith("wall_hours:")):
        k = f"wall_hours:{g}"
        out.append(
            f"  fixed-work jobs of {g:,} GPUs: wall clock {ci(b, k, '{:,.1f}')} h"
            f"{fits(b, k)}, queue wait {b.mean.get(f'queue_wait_hours:{g}', 0):,.2f} h"
        )
    if b.mean.get("unfinished_jobs", 0) > 0:
        out.append(
            f"  {b.mean['unfinished_jobs']:.1f} fixed-work jobs per replication unfinished "
            "at the horizon (raise horizon_days)"
        )
    if b.mean.get("systematic_failures", 0) > 0:
        out.append(
            f"  bad nodes: {b.mean['systematic_failures']:,.0f} excess failures, "
            f"{b.mean['cures']:,.0f} cured, {b.mean['bad_nodes']:,.1f} still bad at the end"
        )
    lost = sorted(((k.split(":", 1)[1], v) for k, v in b.mean.items()
                   if k.startswith("lost_gpu_hours:")), key=lambda kv: -kv[1])  # fmt: skip
    out.append("  lost GPU-hours by cause: " + ", ".join(f"{c} {v:,.0f}" for c, v in lost))
    rank = ranking(res)
    if rank.height:
        out.append("what-if, ranked by fleet-goodput gain (percentage points, 95% CI):")
        for r in rank.iter_rows(named=True):
            out.append(
                f"  {r['change']:<40} {r['gain'] * 100:+.2f} "
                f"[{r['gain_ci_low'] * 100:+.2f}, {r['gain_ci_high'] * 100:+.2f}]"
            )
    if res["spare_curve"]:
        out.append("spare sizing: hot spares -> fleet goodput, largest job's ETTR")
        for k, e in res["spare_curve"]:
            out.append(f"  {k:>6}  {ci(e, GOODPUT)}  {ci(e, f'ettr:{sizes[-1]}')}")
    return out
