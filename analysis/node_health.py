"""Lemon nodes: per node, its exposure, failures, interruptions, hardware events, repairs and lost
GPU-hours, whether it fails significantly more often than the fleet, and the projected goodput of
a large job once the lemons' excess failures are gone (the ``node_health`` table); and, by the
same test, whether it slows jobs significantly more often than the fleet (``slow_lemon``: the
episodes ``slow_periods`` name it the culprit of, ``slow_by_node``).

Takes ``node_failures`` (failure episodes per node, ``analysis.repairable``) with the same
per-node observation windows, and aggregates ``interruptions``, ``hw_events``,
``component_history`` and ``job_attempts`` per host in DuckDB.

Test (``TEST``): a node observed ``t_i`` node-hours with ``k_i`` failures is compared with the
*other* nodes (a lemon does not raise the rate it is judged against), two ways, and its p value
is the larger of the two:

* exact: given the failures of node and rest, ``k_i ~ Binomial(K, t_i / T)`` under equal rates
  (``K``, ``T``: the tested nodes' failures and node-hours); exact even when the rest had few;
* overdispersed: nodes differ even when none is a lemon (unit ages, temperature, load), so
  ``k_i`` is negative binomial with mean ``E_i = t_i (K - k_i) / (T - t_i)`` and variance
  ``E_i + phi E_i^2`` (node rates gamma-distributed around the fleet's). ``phi`` is the
  method-of-moments estimate ``sum((k - E)^2 - k) / sum(E^2)`` (0 when negative: Poisson) over
  the nodes the exact test does not reject at ``SCREEN_ALPHA`` (BH-adjusted), so gross lemons
  do not widen the spread that would hide them.

One-sided, P(X >= k_i). The p values of all tested nodes are adjusted with Benjamini-Hochberg
(``CORRECTION``; false discovery rate), and a node is a lemon when its adjusted p is below
``alpha`` (``assumptions.LEMON_ALPHA``). ``expected_failures`` is ``E_i``. A node with no
observed node-hours is not tested: its row says so and it counts in ``untested``. Measured on
clean fleets whose node rates vary (gamma, coefficient of variation 0.25 / 0.33; seeds 0-199,
tests/test_node_health.py): P(any false lemon) 1.5% / 2% at 16 nodes and 2% / 4.5% at 128,
where the Poisson test against the pooled rate gave 9% / 15% and 16% / 40%; three planted 8x
nodes among 128 are all found, and nothing else, in 95% / 80% of fleets.

Gain (``lemon_gain``): the projection ``goodput project`` makes (the same rates, the same
function, so ``goodput nodes``, ``goodput project`` and the report's headline agree), beside the
same projection with the hardware classes' rates scaled by the fleet's node failure rate refitted
without the lemon nodes (their failures and node-hours left out: each lemon replaced by a typical
node) over the rate with every node kept. With no fitted rates, the node failure rate (and its
refit) is the one class, counted once per node. Node-hours are the observation windows
(``repairable.node_windows``), repair downtime included.
"""

from __future__ import annotations

import duckdb
import numpy as np
import polars as pl

from analysis.assumptions import CKPT_COST_S
from analysis.assumptions import GPUS_PER_NODE
from analysis.assumptions import LEMON_ALPHA
from analysis.assumptions import RESTART_S
from analysis.taxonomy import DEFAULT_SCOPE
from analysis.taxonomy import NON_HARDWARE
from analysis.taxonomy import WORKLOAD
from warehouse.schemas import TABLES
from warehouse.schemas import conform

TEST = (
    "one-sided test of failures vs the other nodes' rate x node-hours (the larger p of the exact "
    "binomial and the negative binomial with the fleet's overdispersion)"
)
CORRECTION = "Benjamini-Hochberg"
UNTESTED = "not tested: no observed node-hours"
SCREEN_ALPHA = 1e-3  # nodes the exact test rejects at this level stay out of the dispersion
NODE_CLASS = "node"  # the projection's one class: a node failure, counted once per node

_AGG_SQL = {
    "interruptions": """
        SELECT cause_host AS host, count(*) AS interruptions, sum(lost_gpu_hours) AS lost_gpu_hours
        FROM {src}
        WHERE failure_domain = 'infrastructure' AND NOT coalesce(planned, false)
          AND cause_host IS NOT NULL
        GROUP BY cause_host""",
    "hw_events": """
        SELECT host,
               count(*) FILTER (WHERE lower(severity) IN ('warning', 'critical', 'fatal'))
                   AS hw_events,
               count(*) FILTER (WHERE lower(severity) IN ('critical', 'fatal'))
                   AS hw_events_critical,
               min(cluster) AS hw_cluster
        FROM {src} WHERE host IS NOT NULL GROUP BY host""",
    "component_history": """
        SELECT h AS host, count(*) FILTER (WHERE removed_at IS NOT NULL) AS repairs,
               count(*) FILTER (WHERE coalesce(failed, false)) AS failed_parts
        FROM (SELECT *, coalesce(host, nullif(split_part(slot, '/', 1), '')) AS h FROM {src})
        WHERE h IS NOT NULL GROUP BY h""",
    "job_attempts": """
        SELECT host, sum(share * hours) AS gpu_hours_scheduled, min(cluster) AS job_cluster
        FROM (
            SELECT unnest(nodes) AS host, coalesce(n_gpus, 0)::DOUBLE / len(nodes) AS share,
                   epoch(end_time - start_time) / 3600.0 AS hours, cluster
            FROM {src}
            WHERE start_time IS NOT NULL AND end_time > start_time AND len(nodes) > 0
        )
        WHERE host IS NOT NULL GROUP BY host""",
}
_AGG_SCHEMA = {
    "interruptions": {"host": pl.Utf8, "interruptions": pl.Int64, "lost_gpu_hours": pl.Float64},
    "hw_events": {
        "host": pl.Utf8,
        "hw_events": pl.Int64,
        "hw_events_critical": pl.Int64,
        "hw_cluster": pl.Utf8,
    },
    "component_history": {"host": pl.Utf8, "repairs": pl.Int64, "failed_parts": pl.Int64},
    "job_attempts": {"host": pl.Utf8, "gpu_hours_scheduled": pl.Float64, "job_cluster": pl.Utf8},
}


def _aggregates(con, sources: dict[str, str]) -> dict[str, pl.DataFrame]:
    """Per-host aggregates of each table, ``sources`` naming the relation to read it from."""
    out = {}
    for name, sql in _AGG_SQL.items():
        df = con.sql(sql.format(src=sources[name])).pl()
        out[name] = (
            df.cast(_AGG_SCHEMA[name]) if df.height else pl.DataFrame(schema=_AGG_SCHEMA[name])
        )
    return out


def poisson_test(failures, expected, phi: float = 0.0) -> np.ndarray:
    """One-sided p values P(X >= failures): X ~ Poisson(expected), or for ``phi`` > 0 negative
    binomial with that mean and variance expected + phi * expected^2."""
    from scipy.stats import nbinom
    from scipy.stats import poisson

    k = np.asarray(failures, float)
    mu = np.asarray(expected, float)
    if phi > 0:
        n = 1.0 / phi
        return np.where(k <= 0, 1.0, nbinom.sf(k - 1, n, n / (n + mu)))
    return np.where(k <= 0, 1.0, poisson.sf(k - 1, mu))


def exact_test(failures, hours) -> np.ndarray:
    """One-sided exact p values of each node against the rest: P(X >= k_i) for
    X ~ Binomial(sum k, t_i / sum t) (equal rates, conditional on the total)."""
    from scipy.stats import binom

    k = np.asarray(failures, float)
    t = np.asarray(hours, float)
    return np.where(k <= 0, 1.0, binom.sf(k - 1, k.sum(), t / t.sum()))


def dispersion(failures, expected) -> float:
    """Method-of-moments overdispersion phi of counts around ``expected``: sum((k - E)^2 - k) /
    sum(E^2), 0 when the counts vary no more than Poisson."""
    k = np.asarray(failures, float)
    mu = np.asarray(expected, float)
    den = float((mu**2).sum())
    return max(0.0, float(((k - mu) ** 2 - k).sum()) / den) if den > 0 else 0.0


def adjust(p) -> np.ndarray:
    """Benjamini-Hochberg adjusted p values (``CORRECTION``)."""
    from scipy.stats import false_discovery_control

    p = np.asarray(p, float)
    return p if p.size == 0 else false_discovery_control(p, method="bh")


def count_test(counts, hours) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(expected, p, p_adjusted, phi) of each node's count against the other nodes' rate over
    its hours (module docstring; NaN where a node has no hours): the one test of lemons, for
    failures and for the episodes a node slowed jobs alike."""
    k = np.asarray(counts, float)
    t = np.asarray(hours, float)
    on = t > 0
    big_k, big_t = k[on].sum(), t[on].sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = np.where(on & (big_t > t), t * (big_k - k) / (big_t - t), 0.0)
    p = np.full(len(k), np.nan)
    p_adj = np.full(len(k), np.nan)
    phi = 0.0
    if on.any():
        exact = exact_test(k[on], t[on])
        rest = ~(adjust(exact) < SCREEN_ALPHA)
        kr, tr = k[on][rest], t[on][rest]
        if tr.sum() > 0:
            phi = dispersion(kr, tr * kr.sum() / tr.sum())
        p[on] = np.maximum(exact, poisson_test(k[on], expected[on], phi))
        p_adj[on] = adjust(p[on])
    return np.where(on, expected, np.nan), p, p_adj, phi


def score(per_node: pl.DataFrame, alpha: float = LEMON_ALPHA) -> pl.DataFrame:
    """``per_node`` (host, node_hours, failures, slow_episodes, ...) with expected_failures,
    excess_failures, rate_ratio, test, p_value, p_adjusted, alpha and lemon, and the same
    test of the episodes it slowed jobs in (expected_slow, slow_p_value, slow_p_adjusted,
    slow_lemon; see the module's docstring)."""
    tested = per_node["node_hours"].fill_null(0.0) > 0
    k = per_node["failures"].fill_null(0).to_numpy().astype(float)
    t = per_node["node_hours"].fill_null(0.0).to_numpy()
    expected, p, p_adj, phi = count_test(k, t)
    test = f"{TEST}; dispersion {phi:.3g}; {CORRECTION} over {int(tested.sum())} nodes"
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(expected > 0, k / expected, np.nan)
    episodes = per_node.get_column(
        "slow_episodes", default=pl.repeat(0, per_node.height, eager=True)
    )
    slow = episodes.fill_null(0).to_numpy().astype(float)
    slow_expected, slow_p, slow_p_adj, _ = count_test(slow, t)
    return per_node.with_columns(
        expected_failures=pl.Series(expected).fill_nan(None),
        excess_failures=pl.Series(k - expected).fill_nan(None),
        rate_ratio=pl.Series(ratio).fill_nan(None),
        test=pl.when(tested).then(pl.lit(test)).otherwise(pl.lit(UNTESTED)),
        p_value=pl.Series(p).fill_nan(None),
        p_adjusted=pl.Series(p_adj).fill_nan(None),
        alpha=pl.lit(float(alpha)),
        expected_slow=pl.Series(slow_expected).fill_nan(None),
        slow_p_value=pl.Series(slow_p).fill_nan(None),
        slow_p_adjusted=pl.Series(slow_p_adj).fill_nan(None),
    ).with_columns(
        lemon=pl.when(tested).then(pl.col("p_adjusted") < alpha),
        slow_lemon=pl.when(tested).then(pl.col("slow_p_adjusted") < alpha),
    )


def slow_by_node(slow_periods: pl.DataFrame) -> pl.DataFrame:
    """(host, slow_episodes, slow_gpu_hours): per node its evidence names, the episodes it slowed
    jobs in (its periods merged where they overlap in time: one throttled GPU under several
    jobs is one episode) and the GPU-hours they cost."""
    named = slow_periods.filter(pl.col("culprit_host").is_not_null()).select(
        host="culprit_host", s="start_time", e="end_time", g="slow_gpu_hours"
    )
    ordered = named.sort("host", "s", nulls_last=True)
    reach = pl.col("e").cum_max().shift(1).over("host")
    new = pl.col("s").is_null() | reach.is_null() | (pl.col("s") > reach)
    return (
        ordered.with_columns(_ep=new.cum_sum().over("host"))
        .group_by("host")
        .agg(
            slow_episodes=pl.col("_ep").n_unique().cast(pl.Int64),
            slow_gpu_hours=pl.col("g").fill_null(0.0).sum(),
        )
    )


def _assemble(
    failures: pl.DataFrame,
    windows: pl.DataFrame,
    agg: dict[str, pl.DataFrame],
    alpha: float,
    slow_periods: pl.DataFrame | None = None,
) -> pl.DataFrame:
    slow = slow_by_node(
        slow_periods if slow_periods is not None else TABLES["slow_periods"].empty()
    )
    hosts = (
        pl.concat(
            [
                windows.select("host"),
                failures.select("host"),
                *(a.select("host") for a in agg.values()),
                slow.select("host"),
            ]
        )
        .drop_nulls()
        .unique()
    )
    if hosts.height == 0:
        return TABLES["node_health"].empty()
    hours = windows.group_by("host").agg(
        node_hours=((pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9).clip(0).sum()
    )
    count = failures.group_by("host").agg(failures=pl.len().cast(pl.Int64))
    df = hosts.join(hours, on="host", how="left").join(count, on="host", how="left")
    for a in (*agg.values(), slow):
        df = df.join(a, on="host", how="left")
    df = df.with_columns(
        cluster=pl.coalesce("job_cluster", "hw_cluster"),
        node_hours=pl.col("node_hours").fill_null(0.0),
        gpu_hours_scheduled=pl.col("gpu_hours_scheduled").fill_null(0.0),
        lost_gpu_hours=pl.col("lost_gpu_hours").fill_null(0.0),
        slow_gpu_hours=pl.col("slow_gpu_hours").fill_null(0.0),
        **{
            c: pl.col(c).fill_null(0)
            for c in (
                "failures",
                "interruptions",
                "hw_events",
                "hw_events_critical",
                "repairs",
                "failed_parts",
                "slow_episodes",
            )
        },
    ).drop("job_cluster", "hw_cluster")
    return conform("node_health", score(df, alpha).pipe(worst_first))


def worst_first(health: pl.DataFrame) -> pl.DataFrame:
    """Lemons first (failing, then slowing jobs), then by p value (smallest first), failures,
    host; untested nodes last."""
    return health.sort(
        [
            pl.col("lemon").fill_null(False),
            pl.col("slow_lemon").fill_null(False),
            "p_value",
            "failures",
            "host",
        ],
        descending=[True, True, False, True, False],
        nulls_last=True,
    )


def build_node_health(
    failures: pl.DataFrame,
    windows: pl.DataFrame,
    interruptions: pl.DataFrame,
    hw_events: pl.DataFrame,
    component_history: pl.DataFrame,
    job_attempts: pl.DataFrame,
    alpha: float = LEMON_ALPHA,
    slow_periods: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """The ``node_health`` table from frames (pure): ``failures`` as ``node_failures``,
    ``windows`` (host, start, end) the windows they were counted in, ``slow_periods`` the
    periods jobs ran slow (their culprit nodes)."""
    frames = {
        "interruptions": conform("interruptions", interruptions),
        "hw_events": conform("hw_events", hw_events),
        "component_history": conform("component_history", component_history),
        "job_attempts": conform("job_attempts", job_attempts),
    }
    with duckdb.connect() as con:
        for name, df in frames.items():
            con.register(f"_{name}", df)
        agg = _aggregates(con, {name: f"_{name}" for name in frames})
    return _assemble(failures, windows, agg, alpha, slow_periods)


def refresh_node_health(
    wh, alpha: float = LEMON_ALPHA, windows: pl.DataFrame | None = None
) -> pl.DataFrame:
    """Rebuild ``node_health`` from the warehouse (``node_failures`` must be current: it is counted
    in the same windows, ``repairable.node_windows``) and replace the table."""
    from analysis.repairable import node_windows

    if windows is None:
        windows = node_windows(wh)
    with wh.connect() as con:
        agg = _aggregates(con, {name: f"({wh.view_sql(name)})" for name in _AGG_SQL})
    df = _assemble(wh.read("node_failures"), windows, agg, alpha, wh.read("slow_periods"))
    wh.replace_table("node_health", df)
    return df


def fleet_rates(wh, gpus_per_node: int = GPUS_PER_NODE):
    """The rates ``goodput project`` projects from by default (``rate_sources.scoped_rates`` of
    the default interruption scope), or None when the warehouse holds none."""
    from analysis.rate_sources import scoped_rates

    try:
        return scoped_rates(wh, DEFAULT_SCOPE, gpus_per_node)
    except ValueError:
        return None


def lemon_gain(
    health: pl.DataFrame,
    target_gpus: int,
    gpus_per_node: int = GPUS_PER_NODE,
    ckpt_cost_s: float = CKPT_COST_S,
    restart_s: float = RESTART_S,
    rates=None,
) -> dict | None:
    """Projected goodput of a job on ``target_gpus`` GPUs, and with the lemon nodes gone; None
    when no tested node failed (nothing to remove).

    ``rates`` (``analysis.class_rates.ClassRates``): the rates ``goodput project`` and the
    report's headline project from (``rate_sources.scoped_rates``); the baseline is then their
    projection exactly (``scenario.project_one``), and without the lemons every hardware class
    (not ``taxonomy.NON_HARDWARE``, not the jobs' own failures) is scaled by the node failure
    rate refitted without the lemon nodes over the fleet's. Without ``rates`` (no fits stored)
    the fleet's node failure rate, and its refit, is the one class, counted once per node.
    ``without_lemons`` is None when no failure is left once the lemons are gone."""
    from analysis.job import Job
    from analysis.rate_sources import rates_from_table
    from analysis.scenario import project_one

    tested = health.filter(pl.col("node_hours") > 0)
    events = float(tested["failures"].sum())
    exposure = float(tested["node_hours"].sum())
    if events <= 0 or exposure <= 0:
        return None
    lemons = tested.filter(pl.col("lemon").fill_null(False))
    excess = float(lemons["excess_failures"].clip(lower_bound=0).sum())

    def node_rates(n_events: float, hours: float):
        table = pl.DataFrame({"component_class": [NODE_CLASS], "events": [n_events],
                              "exposure_hours": [hours], "unit": ["node"]})  # fmt: skip
        return rates_from_table(table, source="node_health", origin="node_health")

    # the fleet's node failure rate refitted without the lemon nodes (each replaced by a
    # typical node); with no failure left there is no rate to project
    rest_events = events - float(lemons["failures"].sum())
    rest_hours = exposure - float(lemons["node_hours"].sum())
    refit = rest_events > 0 and rest_hours > 0
    if rates is None:
        base_rates = node_rates(events, exposure)
        without_rates = node_rates(rest_events, rest_hours) if refit else None
        basis = "node failure rate"
    else:
        left = (rest_events / rest_hours) / (events / exposure) if refit else None
        hardware = [c for c in rates.classes if c not in NON_HARDWARE and c != WORKLOAD]
        base_rates = rates
        without_rates = rates.scaled(dict.fromkeys(hardware, left)) if refit else None
        basis = "fitted rates"

    def one(r, n_events: float, hours: float) -> dict:
        job = Job(target_gpus, gpus_per_node, ckpt_cost_s, restart_s=restart_s)
        p = project_one(None, job, rates=r)
        keys = ("mtti_hours", "mtti_ci_low", "mtti_ci_high", "interval_hours", "goodput",
                "goodput_ci_low", "goodput_ci_high")  # fmt: skip
        return {"failures": n_events, "rate_per_node_hour": n_events / hours,
                **{k: float(p[k]) for k in keys}}  # fmt: skip

    base = one(base_rates, events, exposure)
    without = one(without_rates, rest_events, rest_hours) if without_rates is not None else None
    return {
        "target_gpus": int(target_gpus),
        "gpus_per_node": int(gpus_per_node),
        "ckpt_cost_s": float(ckpt_cost_s),
        "restart_s": float(restart_s),
        "basis": basis,
        "node_hours": exposure,
        "lemons": lemons.height,
        "excess_failures": excess,
        "baseline": base,
        "without_lemons": without,
        "goodput_gain": None if without is None else without["goodput"] - base["goodput"],
    }


def summary(health: pl.DataFrame) -> dict:
    """Counts a reader needs beside the table: nodes, tested, untested (no exposure), lemons
    (failing, and slowing jobs), the fleet rate, the test and its level."""
    tested = health.filter(pl.col("node_hours") > 0)
    exposure = float(tested["node_hours"].sum())
    tests = tested["test"].unique().to_list()
    return {
        "nodes": health.height,
        "tested": tested.height,
        "untested": health.height - tested.height,
        "lemons": int(tested["lemon"].fill_null(False).sum()),
        "slow_lemons": int(tested["slow_lemon"].fill_null(False).sum()),
        "failures": int(tested["failures"].sum()),
        "slow_episodes": int(tested["slow_episodes"].fill_null(0).sum()),
        "node_hours": exposure,
        "fleet_rate_per_node_hour": float(tested["failures"].sum()) / exposure
        if exposure
        else None,
        "test": tests[0] if tests else None,
        "alpha": float(health["alpha"][0]) if health.height else LEMON_ALPHA,
    }
