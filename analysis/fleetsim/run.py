"""Run a fleet scenario: resolve its inputs (failure laws, repair and triage laws, job mix,
estimated keys) from the warehouse or the scenario itself, repeat replications until every
target metric's simulation error is within the scenario's relative half-width (or the maximum
count), and return the estimates.

Fit uncertainty (``replications.fit_uncertainty``, on when the rates carry any): replications
come in pairs, each pair at its own draw of the failure rates (``ClassRates.sample``, the
draws ``goodput project`` builds its band from), the two replications of a pair at different
seeds. Per metric, the one-way analysis of variance of that nested design splits the
replications' variance into the simulation's (within pairs: half the mean squared
difference) and the fits' (the rest, at least 0). The 95% interval for the fleet's value at
the true rates is mean +- sqrt(fit^2 + sim^2), fit = 1.96 sqrt(fit variance) (where the
true rates may lie) and sim = the Student-t half-width of the mean over the replications (the
Monte Carlo error); both halves are reported (``Estimates.fit_half``, ``sim_half``). Without
draws, fit = 0 and the interval is the Student-t one of the replications.

Stopping rule (as AIReSim's): after ``replications.min`` runs, stop as soon as the simulation
half-width of fleet goodput, of every job size's ETTR and of every fixed-work job size's wall
time is within ``replications.rel_halfwidth`` of its mean (the fits' part does not shrink
with more replications); never beyond ``replications.max``. Replication ``i`` uses seed
``(scenario seed, i)`` and rate draw ``i // 2``, so a scenario's estimates are reproducible
and two scenarios of a sweep share their random numbers (common random numbers: their
difference is not drowned in noise).
"""

from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import dataclass
from dataclasses import field
from dataclasses import replace

import numpy as np
import polars as pl

from analysis.fleet_age import DEFAULT_FLEET_AGE
from analysis.fleetsim import engine
from analysis.fleetsim.scenario import ESTIMATED
from analysis.fleetsim.scenario import ScenarioError
from analysis.fleetsim.scenario import validate
from analysis.rate_sources import JOB_SIZE_EDGES

# metrics (or key prefixes) the stopping rule watches
TARGETS = ("fleet_goodput", "ettr:", "wall_hours:")
PER_JOB = ("wall_hours:", "queue_wait_hours:")  # means over the jobs that finished / started
Z95 = 1.959963984540054
# scenario keys that may be 'estimated', each with the estimate that fills it
ESTIMATED_KEYS = {
    ("bad_nodes", "share"): "bad_share",
    ("bad_nodes", "multiplier"): "bad_multiplier",
    ("repair", "silent_fail_prob"): "silent_fail_prob",
    ("triage", "refail_hours"): "refail_hours",
}
MEASURED_LOAD = 0.9  # a measured mix fills this share of the nodes outside the spare pools


@dataclass
class Inputs:
    rates: object  # class_rates.ClassRates with the scenario's multipliers applied
    repair_law: object  # a lifetime_models distribution (hours)
    jobs: list[dict]
    base_rates: object = None  # the rates before the multipliers (what-if sweeps rescale)
    triage_law: object = None  # a lifetime_models distribution (hours); None: fixed time
    filled: dict = field(default_factory=dict)  # estimate name -> value (ESTIMATED_KEYS)

    def for_spec(self, spec: dict) -> Inputs:
        """The inputs of a variant of the scenario (``scenario.with_knob``): its rate
        multipliers, its listed jobs, its repair and triage laws unless fitted / fixed."""
        base = self.base_rates if self.base_rates is not None else self.rates
        unknown = [c for c in spec["rate_multipliers"] if c not in base.classes]
        if unknown:
            raise ScenarioError(
                f"rate:{unknown[0]}: no such class in the rates (known: {', '.join(base.classes)})"
            )
        law = self.repair_law
        if spec["repair"]["model"] != "fitted":
            law = repair_law(spec)
        jobs = spec["jobs"] if isinstance(spec["jobs"], list) else self.jobs
        return Inputs(base.scaled(spec["rate_multipliers"]), law, jobs, base, triage_law(spec),
                      self.filled)  # fmt: skip

    def apply(self, spec: dict) -> dict:
        """``spec`` with its 'estimated' keys replaced by the estimates."""
        out = {k: dict(v) if isinstance(v, dict) else v for k, v in spec.items()}
        for (section, key), name in ESTIMATED_KEYS.items():
            if out[section][key] == ESTIMATED:
                if name not in self.filled:
                    raise ScenarioError(f"{section}.{key}: 'estimated' needs the warehouse")
                out[section][key] = self.filled[name]
        return out

    def draws(self, spec: dict) -> bool:
        """Whether replications draw the rates from their fits (module docstring)."""
        return bool(spec["replications"]["fit_uncertainty"] and self.rates.has_uncertainty())


@dataclass
class Estimates:
    """Per metric: mean, 95% CI with its halves from the fits and from simulation, and the
    replications behind it (``values``: per replication, in seed order, for paired
    comparisons of two scenarios)."""

    mean: dict[str, float]
    ci_low: dict[str, float]
    ci_high: dict[str, float]
    replications: int
    converged: bool
    values: dict[str, np.ndarray]
    fit_half: dict[str, float] = field(default_factory=dict)
    sim_half: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            k: {"mean": self.mean[k], "ci_low": self.ci_low[k], "ci_high": self.ci_high[k],
                "halfwidth_fit": self.fit_half.get(k, 0.0),
                "halfwidth_sim": self.sim_half.get(k, 0.0)}
            for k in self.mean
        }  # fmt: skip


def repair_law(spec: dict, wh=None):
    """The manual repair-time law: the scenario's model and params, or the selected
    ``repair_fits`` row (quantity repair) of the system with the most repairs."""
    from analysis import lifetime_models

    rp = spec["repair"]
    if rp["model"] != "fitted":
        return lifetime_models.get(rp["model"])(**(rp["params"] or {}))
    fits = wh.read("repair_fits") if wh is not None else None
    if fits is not None and fits.height:
        sel = fits.filter(
            (pl.col("quantity") == "repair") & pl.col("selected").fill_null(False)
        ).sort("n", descending=True)
        if sel.height:
            row = sel.row(0, named=True)
            return lifetime_models.get(row["model"]).from_params(row["params"])
    raise ScenarioError(
        "repair.model is 'fitted' but repair_fits has no repair-time fit: run "
        "`goodput build` on failure logs / node events, or give repair.model "
        "and repair.params"
    )


def measured_jobs(attempts: pl.DataFrame, spec: dict) -> list[dict]:
    """The job mix of ``job_attempts``: per job-size class (``rate_sources.JOB_SIZE_EDGES``) its
    median GPU count (whole nodes), with slot counts in proportion to the
    class's GPU-hours, filling ``MEASURED_LOAD`` of the nodes outside the spare pools."""
    f = spec["fleet"]
    room = f["nodes"] - f["hot_spares"] - f["warm_standbys"]
    hours = (pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 3.6e9
    ran = attempts.filter(
        (pl.col("end_time") > pl.col("start_time")) & (pl.col("n_gpus") > 0)
    ).with_columns(
        hours.alias("_h"),
        pl.sum_horizontal(*(pl.col("n_gpus") > e for e in JOB_SIZE_EDGES)).alias("_size"),
    )
    if ran.height == 0:
        raise ScenarioError(
            "jobs: 'measured' but job_attempts has no finished job with GPUs; "
            "ingest scheduler logs or list the jobs in the scenario"
        )
    g = f["gpus_per_node"]
    agg = (
        ran.group_by("_size")
        .agg(
            pl.col("n_gpus").median().alias("gpus"),
            (pl.col("_h") * pl.col("n_gpus")).sum().alias("gpu_h"),
        )
        .sort("_size")
    )
    share = agg["gpu_h"].to_numpy() / agg["gpu_h"].sum()
    out = []
    for row, s in zip(agg.iter_rows(named=True), share, strict=True):
        nodes = math.ceil(row["gpus"] / g)
        count = max(1, round(s * MEASURED_LOAD * room / nodes))
        out.append({"gpus": nodes * g, "count": count})
    while sum(j["count"] * j["gpus"] // g for j in out) > room:  # floors of one slot overfill
        more = [j for j in out if j["count"] > 1]
        if not more:
            need = sum(j["count"] * j["gpus"] // g for j in out)
            raise ScenarioError(
                f"jobs: the measured mix (one slot per job size of job_attempts, the largest "
                f"{max(j['gpus'] for j in out)} GPUs) needs {need} nodes but {room} lie outside "
                "the spare pools: raise fleet.nodes or list the jobs"
            )
        max(more, key=lambda j: j["count"] * j["gpus"])["count"] -= 1
    return validate({**spec, "jobs": out})["jobs"]


def triage_law(spec: dict):
    """The triage-time law of a scenario (None: the fixed ``triage.hours``)."""
    from analysis import lifetime_models

    tr = spec["triage"]
    if tr["model"] == "fixed":
        return None
    return lifetime_models.get(tr["model"])(**(tr["params"] or {}))


def estimated(spec: dict) -> list[str]:
    """The scenario keys given as 'estimated'."""
    return [f"{s}.{k}" for (s, k) in ESTIMATED_KEYS if spec[s][k] == ESTIMATED]


def needs_warehouse(spec: dict) -> bool:
    """Whether the scenario reads the warehouse: fitted rates or repair law, measured jobs,
    estimated keys."""
    return (
        spec["rates"] == "warehouse"
        or spec["repair"]["model"] == "fitted"
        or spec["jobs"] == "measured"
        or bool(estimated(spec))
    )


def resolve(spec: dict, wh=None) -> Inputs:
    """Failure laws, repair law and job mix of a validated scenario. ``wh`` (a Warehouse) is
    needed for 'warehouse' rates, a 'fitted' repair law or a 'measured' mix."""
    from analysis.fleet_age_rates import with_fleet_age
    from analysis.rate_sources import read_rates_csv
    from analysis.rate_sources import scoped_rates

    if needs_warehouse(spec) and wh is None:
        raise ScenarioError(
            "this scenario reads the warehouse (rates: warehouse, repair.model: "
            "fitted, jobs: measured or an 'estimated' key) but none was given"
        )
    jobs = (
        measured_jobs(wh.read("job_attempts"), spec) if spec["jobs"] == "measured" else spec["jobs"]
    )
    biggest = max(j["gpus"] for j in jobs)
    try:
        if spec["rates"] == "warehouse":
            rates = scoped_rates(wh, spec["scope"], spec["fleet"]["gpus_per_node"], biggest)
        else:
            rates = read_rates_csv(spec["rates"])
    except ValueError as exc:
        raise ScenarioError(f"rates: {str(exc).splitlines()[0]}") from None
    rates = replace(rates, fail_slow=fail_slow(spec, rates.fail_slow))
    unknown = [c for c in spec["rate_multipliers"] if c not in rates.classes]
    if unknown:
        raise ScenarioError(
            f"rate_multipliers.{unknown[0]}: no such class in the rates "
            f"(known: {', '.join(rates.classes)})"
        )
    base = with_fleet_age(rates, DEFAULT_FLEET_AGE, spec["horizon_days"] * 24.0)
    filled = {}
    if estimated(spec):
        from analysis.fleetsim import estimate

        filled = estimate.for_scenario(wh, estimated(spec))
    return Inputs(base.scaled(spec["rate_multipliers"]), repair_law(spec, wh), jobs, base,
                  triage_law(spec), filled)  # fmt: skip


def fail_slow(spec: dict, measured):
    """The fail-slow process a scenario runs: its ``fail_slow`` rate and law when given (0:
    none), else ``measured`` (the rates' own, from the warehouse's fail_slow row, or None); its
    ``factor`` over the measured one or Alibaba FALCON's."""
    from analysis import lifetime_models
    from analysis.slowness.at_scale import FailSlow
    from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS

    fs, rate = spec["fail_slow"], spec["fail_slow"]["rate_per_1k_gpu_days"]
    out = measured
    if rate is not None:
        if rate == 0:
            return None
        if fs["model"] is None or fs["params"] is None:
            raise ScenarioError("fail_slow.rate_per_1k_gpu_days needs fail_slow.model and params")
        try:
            law = lifetime_models.get(fs["model"]).from_params(fs["params"])
            law.mean()
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"fail_slow.model: {str(exc).splitlines()[0]}") from None
        out = FailSlow(rate / HOURS_PER_1K_UNIT_DAYS, law)
        if measured is not None:
            out = replace(out, factor=measured.factor, factor_source=measured.factor_source)
    if out is not None and fs["factor"] is not None:
        out = replace(out, factor=fs["factor"], factor_source="the scenario")
    return out


def ci(x: np.ndarray) -> tuple[float, float, float]:
    m = float(x.mean())
    h = t_half(x)
    return m, m - h, m + h


def t_half(x: np.ndarray) -> float:
    """Student-t 95% half-width of the mean of ``x``."""
    from scipy import stats

    if x.size < 2:
        return 0.0
    return float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))


def split_variance(x: np.ndarray) -> tuple[float, float]:
    """(fit variance, simulation variance of one replication) of replications that come in
    pairs sharing a rate draw (module docstring): one-way ANOVA of the complete pairs."""
    pairs = x[: x.size // 2 * 2].reshape(-1, 2)
    if pairs.shape[0] < 2:
        return 0.0, float(x.var(ddof=1)) if x.size > 1 else 0.0
    sim = float(((pairs[:, 0] - pairs[:, 1]) ** 2).mean() / 2)
    return max(float(x.var(ddof=1)) - sim, 0.0), sim


def estimates(runs: list[dict], drawn: bool = False) -> Estimates:
    """Means and CIs of replications (``drawn``: in pairs at rate draws, module docstring). A
    metric a replication lacks is 0 there (no failure of a class, no lost hours), except the
    means over finished or started jobs (``PER_JOB``), which it leaves out."""
    keys = sorted({k for r in runs for k in r})
    values = {
        k: np.array([r.get(k, math.nan if k.startswith(PER_JOB) else 0.0) for r in runs])
        for k in keys
    }
    mean, lo, hi, fit, sim = {}, {}, {}, {}, {}
    for k in keys:
        x = values[k]
        whole = np.isfinite(x)
        if drawn and not whole.all():  # only the pairs both of whose replications have it
            pairs = whole[: x.size // 2 * 2].reshape(-1, 2).all(axis=1)
            x = x[: x.size // 2 * 2].reshape(-1, 2)[pairs].ravel()
        x = x[np.isfinite(x)]
        if not x.size:
            continue
        mean[k] = float(x.mean())
        sim[k] = t_half(x)
        fit[k] = Z95 * math.sqrt(split_variance(x)[0]) if drawn else 0.0
        h = math.hypot(fit[k], sim[k])
        lo[k], hi[k] = mean[k] - h, mean[k] + h
    return Estimates(mean, lo, hi, len(runs), False, {k: values[k] for k in mean}, fit, sim)


def paired(a: Estimates, b: Estimates, key: str) -> tuple[float, float, float]:
    """Mean and 95% CI of ``a - b`` over the replications both ran (same seeds: common random
    numbers, so the difference's CI is much tighter than the two CIs')."""
    n = min(a.replications, b.replications)
    return ci(a.values[key][:n] - b.values[key][:n])


def converged(est: Estimates, rel: float) -> bool:
    for k, m in est.mean.items():
        watched = any(k == t or (t.endswith(":") and k.startswith(t)) for t in TARGETS)
        if watched and est.sim_half[k] > rel * abs(m):
            return False
    return True


def default_workers() -> int:
    return max(1, min(len(os.sched_getaffinity(0)), 8))


def simulate(spec: dict, inputs: Inputs, progress=None, workers: int | None = None) -> Estimates:
    """Replications until the stopping rule holds (module docstring), ``workers`` processes
    at a time (default: the cores this process may use). Replication i has its own seed and
    results are taken in order, so the estimates do not depend on ``workers``."""
    r = spec["replications"]
    workers = default_workers() if workers is None else workers
    runs: list[dict] = []
    drawn = inputs.draws(spec)
    full = inputs.apply(spec)

    def done(result) -> Estimates | None:
        runs.append(result)
        if progress is not None:
            progress(len(runs))
        if len(runs) < r["min"]:
            return None
        est = estimates(runs, drawn)
        est.converged = converged(est, r["rel_halfwidth"])
        return est if est.converged or len(runs) == r["max"] else None

    args = [(full, rate_draw(spec, inputs.rates, i // 2) if drawn else inputs.rates,
             inputs.repair_law, inputs.jobs, seed_of(spec, i), inputs.triage_law)
            for i in range(r["max"])]  # fmt: skip
    if workers <= 1:
        for a in args:
            est = done(engine.run(*a))
            if est is not None:
                return est
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
        pending = deque()
        nxt = 0
        while True:
            while nxt < len(args) and len(pending) < workers:
                pending.append(ex.submit(engine.run, *args[nxt]))
                nxt += 1
            est = done(pending.popleft().result())
            if est is not None:
                for f in pending:
                    f.cancel()
                return est


def seed_of(spec: dict, i: int) -> int:
    """Replication ``i``'s seed, from the scenario's."""
    return int(np.random.SeedSequence([spec["seed"], i]).generate_state(1)[0])


def rate_draw(spec: dict, rates, k: int):
    """The rates of rate draw ``k`` (``ClassRates.sample``, seeded from the scenario's seed)."""
    seed = int(np.random.SeedSequence([spec["seed"], k, 1]).generate_state(1)[0])
    return replace(rates, rate=rates.sample(1, seed)[0])
