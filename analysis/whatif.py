"""What-if analysis: sweeps over any knob, a sensitivity (tornado) ranking, and the joint best
checkpoint interval and spare count. Results are ``goodput_projections`` rows.

Knobs: ``n_gpus``, ``gpus_per_node``, ``ckpt_cost_s``, ``ckpt_blocking_s``, ``restart_s``,
``interval_hours``, ``spares``, ``repair_hours`` and ``rate:<class>`` (a multiplier on one
class's rate; ``rate:all`` scales every class). Analytic by default; spare counts only matter
in the Monte Carlo (the analytic model never waits for a node), so spare knobs use it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import RESTART_S
from analysis.class_rates import ClassRates
from analysis.job import LLAMA3_RUN_HOURS
from analysis.job import Job
from analysis.montecarlo import simulate
from analysis.projection import RATE_DRAWS
from analysis.projection import daly_interval
from analysis.projection import interruption_rate
from analysis.projection import project
from analysis.projection import projection_rows
from analysis.projection import scale_points
from analysis.rate_sources import scoped_rates
from analysis.scenario import evaluate
from analysis.scenario import rows
from analysis.scenario import scaled_rates
from analysis.scenario import simulated_replicas
from analysis.taxonomy import DEFAULT_SCOPE
from warehouse.schemas import conform

MC_INTERRUPTIONS = 300  # expected interruptions per simulated job in the standard scenario set


def sweep(
    rates: ClassRates,
    base: Job,
    knob: str,
    values,
    method: str = "analytic",
    samples: int = RATE_DRAWS,
    replicas: int = 300,
    seed: int = 0,
    scenario: str | None = None,
) -> pl.DataFrame:
    """Vary one knob over ``values``; ``n_gpus`` sweeps run as one vectorized projection."""
    values = list(values)
    if knob == "n_gpus" and method == "analytic" and base.interval_hours is None:
        r = scaled_rates(rates, base)
        p = project(r, base, np.asarray(values), samples=samples, seed=seed)
        df = projection_rows(
            p,
            scenario or f"sweep:{knob}",
            method,
            rates.source,
            base.gpus_per_node,
            base.ckpt_cost_s,
            base.restart_s,
            base.spares,
            knob,
            p.n_gpus,
        )
        return conform("goodput_projections", df)
    res = [
        evaluate(rates, base.with_knob(knob, v), method, samples, replicas, seed) for v in values
    ]
    return rows(res, scenario or f"sweep:{knob}", knob, values)


def sensitivity_items(rates: ClassRates, base: Job, factor: float = 0.5) -> list[tuple]:
    """The analytic improvements the sensitivity ranks, as (knob, kind, change, job): each
    class's rate, the checkpoint cost and the restart time times ``factor``."""
    items = [
        (
            f"rate:{c}",
            "class",
            base.with_knob(f"rate:{c}", base.rate_multipliers.get(c, 1.0) * factor),
        )
        for c in rates.classes
    ]
    blocking = None if base.ckpt_blocking_s is None else base.ckpt_blocking_s * factor
    items.append(("ckpt_cost_s", "knob", replace(base, ckpt_cost_s=base.ckpt_cost_s * factor,
                                                 ckpt_blocking_s=blocking)))  # fmt: skip
    items.append(("restart_s", "knob", replace(base, restart_s=base.restart_s * factor)))
    return [(k, kind, _change_label(k, factor), job) for k, kind, job in items]


def _paired(gain: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(gain, [2.5, 97.5])
    return float(lo), float(hi)


def sensitivity(
    rates: ClassRates,
    base: Job,
    factor: float = 0.5,
    spares_step: int = 8,
    samples: int = RATE_DRAWS,
    replicas: int = 200,
    seed: int = 0,
    results: bool = True,
) -> pl.DataFrame:
    """Tornado ranking: goodput gain from halving each class's rate and from stated knob
    improvements (halve checkpoint cost, halve restart time, and with ``base.spares`` set,
    +``spares_step`` spares), each gain with its own 95% CI (not the band of the improved
    goodput).

    Rate and cost items are analytic (interval re-optimized), the gain's CI over the same rate
    draws as the baseline (paired, 2.5-97.5% of the differences); the spares item runs the
    Monte Carlo for base and improved with the same random numbers, so the gain is not drowned
    in simulation noise (its CI: the mean difference +- 1.96 SE, simulation noise only).
    Columns: item, kind, change, step (the spares added), goodput_base, goodput, gain,
    gain_ci_low, gain_ci_high, and with ``results`` each improved job's ``evaluate`` dict
    (the spares one with its Monte Carlo band); by gain, highest first."""
    b = evaluate(rates, base, "analytic", samples, seed=seed)
    out = []
    for knob, kind, change, sc in sensitivity_items(rates, base, factor):
        e = evaluate(rates, sc, "analytic", samples, seed=seed)
        gain = e["goodput"] - b["goodput"]
        lo, hi = (gain, gain) if b["goodput_draws"] is None else _paired(
            e["goodput_draws"] - b["goodput_draws"])  # fmt: skip
        out.append({"item": knob, "kind": kind, "change": change, "step": None,
                    "goodput_base": b["goodput"], "goodput": e["goodput"], "gain": gain,
                    "gain_ci_low": min(lo, gain), "gain_ci_high": max(hi, gain),
                    "result": e})  # fmt: skip
    if base.spares is not None:
        job = replace(base, interval_hours=b["interval_hours"])
        more = replace(job, spares=base.spares + spares_step)
        r = scaled_rates(rates, job)
        n = simulated_replicas(r, job, replicas)
        g0 = simulate(r, job, replicas=n, seed=seed).goodput
        g1 = simulate(r, more, replicas=n, seed=seed).goodput
        d = g1 - g0
        half = 1.96 * float(d.std(ddof=1)) / np.sqrt(d.size) if d.size > 1 else 0.0
        e = evaluate(rates, more, "mc", samples, replicas, seed) if results else None
        out.append({"item": "spares", "kind": "knob", "change": f"+{spares_step} spare nodes",
                    "step": spares_step, "goodput_base": float(g0.mean()),
                    "goodput": float(g1.mean()), "gain": float(d.mean()),
                    "gain_ci_low": float(d.mean()) - half,
                    "gain_ci_high": float(d.mean()) + half, "result": e})  # fmt: skip
    df = pl.DataFrame(out).sort("gain", descending=True)
    return df if results else df.drop("result")


def sensitivity_rows(table: pl.DataFrame, base_result: dict | None = None) -> pl.DataFrame:
    """Projection rows for a sensitivity table: knob = item, knob_value = gain."""
    res = [r for r in table["result"].to_list()]
    df = rows(res, "sensitivity", None, table["gain"].to_list())
    df = df.with_columns(pl.Series("knob", table["item"].to_list(), dtype=pl.Utf8))
    if base_result is not None:
        df = pl.concat([rows([base_result], "sensitivity", "baseline", [0.0]), df])
    return df


def joint_best(
    rates: ClassRates,
    base: Job,
    intervals_hours=None,
    spares=(0, 2, 4, 8, 16, 32, 64),
    replicas: int = 150,
    seed: int = 0,
) -> pl.DataFrame:
    """Grid search of (checkpoint interval, spare nodes) by Monte Carlo with common random
    numbers. Spares are not free (they hold GPUs idle), so the objective is the fleet goodput
    g·N/(N + K·G): useful GPU-hours per GPU-hour reserved for the job including its spares.
    Returns the grid with columns interval_hours, spares, goodput, fleet_goodput, best."""
    if intervals_hours is None:
        mtti = evaluate(rates, base)["mtti_hours"]
        t0 = float(daly_interval(base.blocking_s / 3600.0, mtti))
        intervals_hours = t0 * np.array([0.5, 0.7, 0.85, 1.0, 1.2, 1.5, 2.0])
    recs = []
    for k in spares:
        for tau in intervals_hours:
            sc = replace(base, interval_hours=float(tau), spares=int(k))
            e = evaluate(rates, sc, "mc", samples=0, replicas=replicas, seed=seed)
            fleet = e["goodput"] * base.n_gpus / (base.n_gpus + k * base.gpus_per_node)
            recs.append(
                {
                    "interval_hours": float(tau),
                    "spares": int(k),
                    "goodput": e["goodput"],
                    "fleet_goodput": fleet,
                    "result": e,
                }
            )
    df = pl.DataFrame(recs)
    best = int(np.argmax(df["fleet_goodput"].to_numpy()))
    return df.with_columns(pl.Series("best", np.arange(df.height) == best))


def joint_rows(grid: pl.DataFrame) -> pl.DataFrame:
    """Grid rows (scenario 'joint_grid', the best also as 'joint_best'); knob_value holds the
    fleet goodput that ranks them."""
    g = rows(
        grid["result"].to_list(), "joint_grid", "fleet_goodput", grid["fleet_goodput"].to_list()
    )
    best = g.filter(pl.Series(grid["best"].to_list())).with_columns(
        pl.lit("joint_best").alias("scenario")
    )
    return pl.concat([g, best])


def base_scenario(rates: ClassRates, job: Job) -> Job:
    """The job the report's projections start from: ``job`` with a Monte Carlo window long
    enough for ~MC_INTERRUPTIONS interruptions per replica (goodput is a time fraction, so a
    longer window only adds work), within a day and Llama 3's 54 days."""
    lam = interruption_rate(rates, job.n_gpus, job.gpus_per_node)
    mtti = 1.0 / float(np.asarray(lam).ravel()[0])
    return replace(job, wall_hours=float(np.clip(MC_INTERRUPTIONS * mtti, 24.0, LLAMA3_RUN_HOURS)))


BASE_SPARES = 8  # spare nodes of the sensitivity's baseline (its spares item adds more)


def sensitivity_set(
    rates: ClassRates,
    base: Job,
    base_spares: int = BASE_SPARES,
    samples: int = RATE_DRAWS,
    replicas: int = 100,
    seed: int = 0,
) -> pl.DataFrame:
    """The ranked knobs at ``base.n_gpus`` as ``goodput_projections`` rows (scenario
    'sensitivity'): the baseline, then each single improvement with its goodput, 95% band and
    gain. What the report's what-if section draws and ``goodput whatif`` prints."""
    b = evaluate(rates, replace(base, spares=base_spares), samples=samples, seed=seed)
    sens = sensitivity(
        rates, replace(base, spares=base_spares), samples=samples, replicas=replicas, seed=seed
    )
    return sensitivity_rows(sens, b)


def sensitivity_at(wh, n_gpus: int, rates: ClassRates | None = None) -> pl.DataFrame:
    """The sensitivity rows at ``n_gpus``: the stored ones (those of the report) when the last
    build made them at that size, else ``sensitivity_set`` computed now from the warehouse's
    rates with the stored projections' settings (GPUs per node, checkpoint cost, restart,
    interruption scope), or the defaults where nothing is stored. Given ``rates`` (a rates
    file), computed from them with the defaults, and ``wh`` may be None. Raises ValueError when
    there is nothing to project from."""
    if rates is not None:
        job = Job(n_gpus=n_gpus)
        return sensitivity_set(rates, base_scenario(rates, job)).with_columns(
            pl.lit(None, pl.Utf8).alias("scope")
        )
    stored = wh.read("goodput_projections").filter(pl.col("scenario") == "sensitivity")
    here = stored.filter(pl.col("n_gpus") == n_gpus)
    if here.filter(pl.col("knob") == "baseline").height:
        return here
    rates, sc, scope = stored_job(wh, n_gpus, stored)
    return sensitivity_set(rates, sc).with_columns(pl.lit(scope).alias("scope"))


def stored_job(wh, n_gpus: int, stored: pl.DataFrame | None = None):
    """(rates, base job, scope) of a projection at ``n_gpus`` with the settings of the stored
    sensitivity's baseline (GPUs per node, checkpoint cost, restart, interruption scope), or the
    defaults where nothing is stored. Raises ValueError when there is nothing to project from."""
    if stored is None:
        stored = wh.read("goodput_projections").filter(pl.col("scenario") == "sensitivity")
    base = stored.filter(pl.col("knob") == "baseline").head(1).to_dicts()
    got = base[0] if base else {}
    scope = got.get("scope") or DEFAULT_SCOPE
    gpus_per_node = got.get("gpus_per_node") or GPUS_PER_NODE
    rates = scoped_rates(wh, scope, gpus_per_node, n_gpus)
    job = Job(
        n_gpus=n_gpus, gpus_per_node=gpus_per_node,
        ckpt_cost_s=got.get("ckpt_cost_s") or CKPT_COST_S,
        restart_s=got.get("restart_s") or RESTART_S,
    )  # fmt: skip
    return rates, base_scenario(rates, job), scope


def action_gains(
    rates: ClassRates,
    base: Job,
    base_spares: int = BASE_SPARES,
    spares_step: int = 8,
    factor: float = 0.5,
    samples: int = RATE_DRAWS,
    replicas: int = 100,
    seed: int = 0,
) -> pl.DataFrame:
    """The sensitivity's improvements at ``base.n_gpus`` with ``base_spares`` spare nodes, each
    with its goodput gain and the gain's own 95% CI (``sensitivity``). Columns: knob, change,
    step, goodput_base, goodput, gain, gain_ci_low, gain_ci_high; by gain, highest first."""
    job = replace(base, spares=base_spares)
    t = sensitivity(rates, job, factor, spares_step, samples, replicas, seed, results=False)
    return t.drop("kind").rename({"item": "knob"})


def refresh_projections(
    wh,
    job: Job | None = None,
    base_spares: int = BASE_SPARES,
    rates: ClassRates | None = None,
    samples: int = RATE_DRAWS,
    replicas: int = 100,
    spares_grid=(0, 2, 4, 8, 16, 32, 64),
    seed: int = 0,
    scope: str = DEFAULT_SCOPE,
) -> pl.DataFrame:
    """The standard scenario set for the report, written to ``goodput_projections``:

    - ``scale_sweep``: knob n_gpus, 8..200k GPUs (analytic, CI bands from the fit, Daly
      interval at each scale in optimal_interval_hours / interval_hours);
    - ``sensitivity`` at ``job.n_gpus``: a ``baseline`` row, then one row per item (knob =
      ``rate:<class>``, ``ckpt_cost_s``, ``restart_s``, ``spares``) with knob_value = goodput
      gain over its baseline (Monte Carlo for spares, analytic otherwise): the tornado chart;
    - ``joint_grid`` / ``joint_best``: Monte Carlo grid of (interval_hours, spares), knob_value
      = fleet goodput g·N/(N + K·G) that picks the best.
    Rates: ``scope`` (``analysis.taxonomy.SCOPES``; default infrastructure: the hardware fits
    plus every non-workload class measured in ``interruptions``), stored in column ``scope``.
    Raises ValueError when there is nothing to project from and no ``rates`` are given."""
    job = Job() if job is None else job
    if rates is None:
        rates = scoped_rates(wh, scope, job.gpus_per_node, job.n_gpus)
    base = base_scenario(rates, job)
    parts = [
        sweep(
            rates,
            base,
            "n_gpus",
            scale_points(gpus_per_node=job.gpus_per_node),
            samples=samples,
            seed=seed,
            scenario="scale_sweep",
        )
    ]
    parts.append(sensitivity_set(rates, base, base_spares, samples, replicas, seed))
    parts.append(
        joint_rows(joint_best(rates, base, spares=spares_grid, replicas=replicas, seed=seed))
    )
    out = pl.concat([conform("goodput_projections", p) for p in parts]).with_columns(
        pl.lit(scope).alias("scope"),
        pl.lit(" + ".join(dict.fromkeys(rates.fleet_age or ("stationary",)))).alias("fleet_age"),
    )
    wh.replace_table("goodput_projections", out)
    return out


def _change_label(knob: str, factor: float | None) -> str:
    f = "" if factor is None else f" x{factor:g}"
    if knob.startswith("rate:"):
        return f"{knob.split(':', 1)[1]} failure rate{f}"
    return {
        "ckpt_cost_s": f"checkpoint cost{f}",
        "ckpt_blocking_s": f"blocking checkpoint time{f}",
        "restart_s": f"restart time{f}",
    }.get(knob, knob)


def sensitivity_frame(projections: pl.DataFrame) -> pl.DataFrame:
    """Sensitivity rows (scenario 'sensitivity'): knob = item, knob_value = goodput gain over
    its baseline (``goodput_base``: the 'baseline' row, or for spares the Monte Carlo one). The
    improvement factor is read back from the checkpoint-cost or restart row against the baseline
    (all items share one factor)."""
    sens = projections.filter(pl.col("scenario") == "sensitivity")
    base = sens.filter(pl.col("knob") == "baseline")
    items = sens.filter((pl.col("knob") != "baseline") & pl.col("knob_value").is_not_null())
    factor = None
    if base.height:
        b = base.row(0, named=True)
        for knob, col in (("ckpt_cost_s", "ckpt_cost_s"), ("restart_s", "restart_s")):
            r = items.filter(pl.col("knob") == knob)
            if r.height and b[col]:
                factor = round(r[col][0] / b[col], 6)
                break
    spares_step = None
    if base.height and base["spares"][0] is not None:
        r = items.filter(pl.col("knob") == "spares")
        if r.height and r["spares"][0] is not None:
            spares_step = int(r["spares"][0] - base["spares"][0])
    labels = [
        (f"+{spares_step} spare nodes" if spares_step is not None else "more spare nodes")
        if k == "spares"
        else _change_label(k, factor)
        for k in items["knob"].to_list()
    ]
    # each item's own baseline: the analytic one, or the Monte Carlo one of the spares item
    return items.with_columns(
        pl.Series("change", labels, dtype=pl.Utf8),
        (pl.col("knob_value") * 100).alias("gain_pp"),
        (pl.col("goodput") - pl.col("knob_value")).alias("goodput_base"),
    ).sort("knob_value", descending=True)
