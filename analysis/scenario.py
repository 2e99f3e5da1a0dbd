"""One job projected as ``goodput project`` computes it: its rates (a rates file, an MTTI, or
the warehouse's of a scope, at the fleet age asked), the analytic projection and the Monte Carlo
(``analysis.whatif.evaluate``), and the result appended to ``goodput_projections``."""

from __future__ import annotations

import polars as pl

from analysis.class_rates import ClassRates
from analysis.class_rates import rate_rows
from analysis.fleet_age import DEFAULT_FLEET_AGE
from analysis.fleet_age_rates import observed_ages
from analysis.fleet_age_rates import with_fleet_age
from analysis.job import Job
from analysis.rate_sources import scoped_rates
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.whatif import evaluate
from analysis.whatif import rows


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
