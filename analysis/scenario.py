"""One job projected: the analytic projection and the Monte Carlo of a job at given rates
(``evaluate``), as ``goodput project`` computes it (``project_one``: its rates from a rates
file, an MTTI, or the warehouse's of a scope, at the fleet age asked), and its
``goodput_projections`` rows (``rows``, ``append_projection``)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from analysis.class_rates import ClassRates
from analysis.class_rates import rate_rows
from analysis.fleet_age import DEFAULT_FLEET_AGE
from analysis.fleet_age_rates import observed_ages
from analysis.fleet_age_rates import with_fleet_age
from analysis.job import Job
from analysis.montecarlo import simulate
from analysis.projection import RATE_DRAWS
from analysis.projection import interruption_rate
from analysis.projection import project
from analysis.projection import running_slow
from analysis.projection import unit_counts
from analysis.projection import useful_fraction
from analysis.rate_sources import scoped_rates
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.taxonomy import NON_HARDWARE
from analysis.taxonomy import WORKLOAD
from warehouse.schemas import TABLES
from warehouse.schemas import conform


def scaled_rates(rates: ClassRates, sc: Job) -> ClassRates:
    mult = dict(sc.rate_multipliers)
    if "all" in mult and "all" not in rates.classes:
        every = mult.pop("all")
        mult = {c: mult.get(c, 1.0) * every for c in rates.classes}
    return rates.scaled(mult) if mult else rates


def evaluate(
    rates: ClassRates,
    sc: Job,
    method: str = "analytic",
    samples: int = RATE_DRAWS,
    replicas: int = 300,
    seed: int = 0,
) -> dict:
    """One job -> a dict of ``goodput_projections`` values plus band notes: the analytic
    projection, and with ``method`` 'mc' the Monte Carlo's point and band (``_simulated``)."""
    r = scaled_rates(rates, sc)
    p = project(r, sc, samples=samples, seed=seed)
    out = {
        "method": method,
        "rates_source": rates.source,
        "n_gpus": int(sc.n_gpus),
        "gpus_per_node": int(sc.gpus_per_node),
        "ckpt_cost_s": float(sc.ckpt_cost_s),
        "restart_s": float(sc.restart_s),
        "interval_hours": float(p.interval_hours[0]),
        "spares": sc.spares,
        "mtti_hours": float(p.mtti_hours[0]),
        "mtti_ci_low": float(p.mtti_ci_low[0]),
        "mtti_ci_high": float(p.mtti_ci_high[0]),
        "optimal_interval_hours": float(p.daly_hours[0]),  # Daly
        "young_interval_hours": float(p.young_hours[0]),
        "goodput": float(p.goodput[0]),
        "goodput_ci_low": float(p.goodput_ci_low[0]),
        "goodput_ci_high": float(p.goodput_ci_high[0]),
        "goodput_spread_low": None,
        "goodput_spread_high": None,
        "goodput_fail_stop": float(
            p.goodput[0] if p.goodput_fail_stop is None else p.goodput_fail_stop[0]
        ),
        "slow_lost_share": None if p.slow_lost_share is None else float(p.slow_lost_share[0]),
        "slow_detect_hours": p.slow_detect_hours,
        "band": p.notes["band"],
        # the analytic goodput of each rate draw: paired with another job's of the same seed
        "goodput_draws": None if p.goodput_draws is None else p.goodput_draws[:, 0],
    }
    if method == "mc":
        out.update(_simulated(r, replace(sc, interval_hours=out["interval_hours"]), out,
                              samples, replicas, seed))  # fmt: skip
    return out


MC_EVENTS = 1_000_000  # failures a Monte Carlo projection draws, at most (memory and time)


def simulated_replicas(r: ClassRates, job: Job, replicas: int) -> int:
    """Jobs to simulate: ``replicas``, fewer when each job meets so many failures that all of
    them would exceed ``MC_EVENTS`` (a 32k-GPU job over 54 days meets ~18,000: its goodput is
    already an average over them, so 50 jobs pin the mean down), never under 50."""
    per_job = float(np.asarray(interruption_rate(r, job.n_gpus, job.gpus_per_node)).ravel()[0])
    hours = job.wall_hours if job.work_hours is None else job.work_hours
    events = max(per_job * hours, 1.0)
    return int(min(replicas, max(50, MC_EVENTS // events)))


def _simulated(r: ClassRates, job: Job, analytic: dict, samples, replicas, seed) -> dict:
    """The Monte Carlo's goodput for ``evaluate``: the point from jobs simulated at the
    plug-in rates (a class with no failure at rate 0), never averaged over rate draws; the
    band from rate draws where the rates are uncertain, else the Monte Carlo noise. Jobs with
    many failures each are simulated fewer times (``simulated_replicas``); the band still takes
    the analytic goodput of every one of ``replicas`` rate draws."""
    drawn_replicas, replicas = replicas, simulated_replicas(r, job, replicas)
    res = simulate(r, job, replicas=replicas, seed=seed)
    s = res.summary()
    out = {
        "analytic_goodput": analytic["goodput"],
        "goodput": s["mean"],
        "goodput_spread_low": s["p2_5"],
        "goodput_spread_high": s["p97_5"],
    }
    if s["goodput_fail_stop"] is not None:  # means over the simulated jobs
        out["goodput_fail_stop"] = s["goodput_fail_stop"]
        out["slow_lost_share"] = s["slow_lost_share"]
    draws = r.sample(drawn_replicas, seed) if r.has_uncertainty() and samples > 0 else None
    if draws is not None:
        # the band, as in the analytic model: the expected goodput over rate draws. Jobs
        # simulated one per draw, regressed on the analytic goodput of their draw, give the
        # slope b of the simulation's response; the band is the 2.5-97.5% of point +
        # b·(g_analytic(draw) - g_analytic(point)), so single-job noise stays out of it and
        # a one-sided band (a class with no failure: rate 0 at the point) reaches the point.
        drawn = simulate(r, job, replicas=replicas, seed=seed + 1, rate_draws=draws[:replicas])
        u = unit_counts(r.classes, job.n_gpus, job.gpus_per_node, r.counts)[:, 0]
        fs = r.fail_slow
        if fs is not None:  # its rate drawn as ``simulate`` draws its replicas' (one stream)
            fs = fs.at_rate_draws(len(draws), seed + 1) or fs
        rep, kept = (np.ravel(x) for x in running_slow(fs, job.n_gpus, job.slow_detect_hours))
        ga = kept * useful_fraction(
            job.interval_hours, job.blocking_s / 3600, job.restart_s / 3600, 1.0 / (draws @ u + rep)
        )
        sim = ga[:replicas]  # the draws simulated
        b = np.polyfit(sim, drawn.goodput, 1)[0] if np.ptp(sim) > 0 else 0.0
        # a linear response read far from the point can leave [0, 1] (a job near 0% goodput
        # whose draws are worse still): goodput cannot, so each draw's is clipped to it
        fitted = np.clip(s["mean"] + b * (ga - analytic["goodput"]), 0.0, 1.0)
        lo, hi = np.percentile(fitted, [2.5, 97.5])
        out["goodput_ci_low"] = float(min(lo, s["mean"]))
        out["goodput_ci_high"] = float(max(hi, s["mean"]))
        out["band"] = (
            f"point: {replicas} jobs simulated at the fitted rates; band: expected goodput "
            f"over {drawn_replicas} rate draws from the fits (the point moved by the response "
            f"of {replicas} jobs simulated at drawn rates to the analytic goodput of each "
            f"draw); spread: 2.5-97.5% of single simulated {job.wall_hours:g} h jobs at the "
            "fitted rates"
        )
    else:
        out["goodput_ci_low"] = s["mean"] - 1.96 * s["se"]
        out["goodput_ci_high"] = s["mean"] + 1.96 * s["se"]
        out["band"] = (
            f"band: Monte Carlo noise of the mean only (± 1.96 SE over {replicas} replicas), "
            f"no rate uncertainty; spread: 2.5-97.5% of single simulated {job.wall_hours:g} "
            "h jobs"
        )
    if job.spares is not None:  # the spare pool: did it run dry, and could it have kept up
        units = unit_counts(r.classes, job.n_gpus, job.gpus_per_node, r.counts)[:, 0]
        hardware = np.array([c not in NON_HARDWARE | {WORKLOAD} for c in r.classes])
        out["spares_ran_out"] = s["spares_ran_out"]
        out["spares_ran_out_hours"] = s["spares_ran_out_hours"]
        out["wait_share"] = s["wait_share"]
        out["hardware_failures_per_repair"] = float(
            (r.rate[hardware] @ units[hardware]) * job.repair_hours
        )
    out["mc"] = s
    return out


def rows(
    results: list[dict], scenario: str, knob: str | None = None, knob_values=None
) -> pl.DataFrame:
    """``goodput_projections`` rows from ``evaluate`` outputs."""
    recs = []
    for i, r in enumerate(results):
        rec = {k: v for k, v in r.items() if k in _PROJ_COLUMNS}
        rec["scenario"] = scenario
        rec["knob"] = knob
        rec["knob_value"] = None if knob_values is None else float(knob_values[i])
        recs.append(rec)
    if not recs:
        return conform("goodput_projections", pl.DataFrame())
    return conform("goodput_projections", pl.DataFrame(recs, infer_schema_length=None))


# what a projection stores: the table's columns but those a study sets (its name and knob)
_PROJ_COLUMNS = set(TABLES["goodput_projections"].columns) - {"scenario", "knob", "knob_value"}


def project_one(
    wh,
    job: Job | None = None,
    mtti_hours: float | None = None,
    method: str = "analytic",
    replicas: int = 500,
    seed: int = 0,
    scope: str = DEFAULT_SCOPE,
    rates: ClassRates | None = None,
    fleet_age: str = DEFAULT_FLEET_AGE,
) -> dict:
    """One job as ``goodput project`` shows it. Rates: ``rates`` when given (e.g. a
    ``--rates`` file), else an ``mtti_hours`` override, else the warehouse's rates of
    ``scope`` (``rate_sources.scoped_rates``). Raises ValueError when there is nothing to
    project from.

    ``fleet_age`` (``fleet_age.FLEET_AGES``) is the age of the job's units at its start, for
    both the analytic rates and the Monte Carlo (``fleet_age_rates.with_fleet_age``):
    'observed' takes each class's ages at the window end from the warehouse
    (``observed_ages``); classes without ages (measured interruption classes, rates files)
    stay stationary, as each class's ``fleet_age`` in ``classes`` says. ``job.wall_hours`` is
    the job's length, over which a non-stationary fleet's failures are counted and the Monte
    Carlo runs."""
    job = Job() if job is None else job
    from_warehouse = rates is None and mtti_hours is None
    if rates is None:
        rates = (
            scoped_rates(wh, scope, job.gpus_per_node, job.n_gpus)
            if from_warehouse
            else ClassRates.from_mtti(mtti_hours)
        )
    horizon = float(job.wall_hours)
    ages = observed_ages(wh, rates.classes) if fleet_age == "observed" and from_warehouse else {}
    rates = with_fleet_age(rates, fleet_age, horizon, ages)
    res = evaluate(rates, job, method, replicas=replicas, seed=seed)
    res.pop("goodput_draws")  # the band's raw draws: no figure to print or keep
    res["fleet_age"] = fleet_age
    res["horizon_hours"] = horizon
    res["scope"] = scope if from_warehouse else None
    res["interval_source"] = "auto = Daly" if job.interval_hours is None else "given"
    if mtti_hours is not None and method == "analytic":
        res["band"] = "--mtti override: no fit uncertainty, so the band is the point"
    res["classes"] = rate_rows(rates)
    res["repair_hours"] = job.repair_hours
    res["mc_wall_hours"] = job.wall_hours
    return res


def append_projection(wh, res: dict, scenario: str = "cli") -> pl.DataFrame:
    """Append one ``project_one`` result to ``goodput_projections`` (one atomic rewrite)."""
    new = rows([res], scenario)
    out = pl.concat([wh.read("goodput_projections"), new])
    wh.replace_table("goodput_projections", out)
    return new
