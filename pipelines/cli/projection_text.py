"""The readable projection ``goodput project`` prints (``analysis.scenario.project_one``'s
result)."""

from __future__ import annotations

from analysis.fleet_age import DEFAULT_FLEET_AGE
from analysis.numbers import mean_time
from analysis.numbers import pct
from analysis.slowness.at_scale import running_slow_note


def share(x: float | None) -> str:
    """A goodput as a percentage, with two significant digits below 0.1% (not a bare 0.0%)."""
    return pct(x) if x is None or x == 0 or abs(x) >= 0.001 else f"{100 * x:.2g}%"


def spare_pool(res: dict) -> str:
    """Whether a Monte Carlo projection's spare pool ran out, when, and why (its hardware
    failures per repair time against its spares)."""
    need = (
        f"the job meets {res['hardware_failures_per_repair']:,.1f} hardware failures per "
        f"{res['repair_hours']:g} h repair time, against {res['spares']} spares"
    )
    if not res["spares_ran_out"]:
        return f"never ran out in the simulated jobs ({need})"
    return (
        f"RAN OUT in {pct(res['spares_ran_out'], 0)} of simulated jobs, after "
        f"{mean_time(res['spares_ran_out_hours'])} (median): the job waited for a repaired node "
        f"{pct(res['wait_share'], 0)} of its time ({need})"
    )


def format_projection(res: dict) -> list[str]:
    """The readable table ``goodput project`` prints."""

    def dur(h):
        return f"{h * 60:.1f} min" if h < 2 else f"{h:.2f} h"

    nodes = -(-res["n_gpus"] // res["gpus_per_node"])
    src = res["rates_source"] + f" ({len(res['classes'])} classes)"
    if res.get("scope"):
        src += f", scope {res['scope']}"
    spares = (
        "unlimited (a replacement node is always ready)"
        if res["spares"] is None
        else f"{res['spares']} hot spare nodes, repair {res['repair_hours']:g} h"
        + ("" if res["method"] == "mc" else " (spares only matter with --method mc)")
    )
    window = f", {res['mc_wall_hours']:g} h simulated window" if res["method"] == "mc" else ""
    lines = [
        f"goodput projection ({res['method']}{window})",
        (
            f"  {'job':<22}{res['n_gpus']:,} GPUs on {nodes:,} nodes ({res['gpus_per_node']} "
            "GPUs/node)"
        ),
        f"  {'rates':<22}{src}",
        f"  {'checkpoint cost':<22}{res['ckpt_cost_s']:g} s",
        f"  {'restart':<22}{dur(res['restart_s'] / 3600)}",
        f"  {'spares':<22}{spares}",
        (
            f"  {'fleet age':<22}{res.get('fleet_age', DEFAULT_FLEET_AGE)} at job start, "
            f"{res.get('horizon_hours', res['mc_wall_hours']):g} h job horizon"
        ),
        f"  {'MTTI':<22}{mean_time(res['mtti_hours'])}"
        + (
            f"  (95% {mean_time(res['mtti_ci_low'])} - {mean_time(res['mtti_ci_high'])})"
            if res["mtti_ci_low"] != res["mtti_ci_high"]
            else ""
        ),
        f"  {'Daly interval':<22}{dur(res['optimal_interval_hours'])} (optimal_interval_hours)",
        f"  {'Young interval':<22}{dur(res['young_interval_hours'])}",
        f"  {'chosen interval':<22}{dur(res['interval_hours'])} ({res['interval_source']})",
        (
            f"  {'goodput':<22}{share(res['goodput'])}  (95% {share(res['goodput_ci_low'])} - "
            f"{share(res['goodput_ci_high'])})"
        ),
        f"  {'band':<22}{res['band'].removeprefix('band: ')}",
        f"  {'running slow':<22}{running_slow_note(res)}",
    ]
    if res.get("goodput_spread_low") is not None:
        lines.append(
            f"  {'single-job spread':<22}{share(res['goodput_spread_low'])} - "
            f"{share(res['goodput_spread_high'])}"
        )
    if res.get("spares_ran_out") is not None:
        lines.append(f"  {'spare pool':<22}{spare_pool(res)}")
    lines.append(f"  {'class rates':<22}per unit-hour (unit, source, events; model, fleet age)")
    for c in res["classes"]:
        ev = "" if c["events"] is None else f", {c['events']:,} events"
        lines.append(
            f"    {c['component_class']:<18}{c['rate_per_unit_hour']:.3e} per unit-hour, "
            f"{c['units_per_scope']} per {c['unit']} ({c['source']}{ev}; "
            f"{c['model']}, {c['fleet_age']})"
        )
    if "analytic_goodput" in res:
        lines.append(
            f"  {'analytic goodput':<22}{pct(res['analytic_goodput'])}  (no spare waits, mean "
            "rates)"
        )
    return lines
