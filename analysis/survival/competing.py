"""Competing risks: the Aalen-Johansen cumulative incidence of a node's first failure, one curve
per cause (the class that failed first), with a vectorized variance."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from analysis.lifetime_models.base import Z95
from analysis.survival.common import thin

AJ_MAX_NODES = 250_000  # Aalen-Johansen on a random node subsample above this


def node_first_failures(df: pl.DataFrame) -> pl.DataFrame:
    """One row per host: hours from the node's first observation to its first component
    failure (any class; the class is the cause) or to the end of its observation."""
    df = df.filter(
        pl.col("host").is_not_null()
        & pl.col("observed_from").is_not_null()
        & pl.col("observed_to").is_not_null()
    )
    fails = (
        df.filter(pl.col("event"))
        .sort("observed_to")
        .group_by("host")
        .agg(
            pl.col("observed_to").first().alias("fail_at"),
            pl.col("component_class").first().alias("cause"),
        )
    )
    span = df.group_by("host").agg(
        pl.col("observed_from").min().alias("start"), pl.col("observed_to").max().alias("end")
    )
    nodes = span.join(fails, on="host", how="left").with_columns(
        event=pl.col("fail_at").is_not_null(),
        t=((pl.coalesce("fail_at", "end") - pl.col("start")).dt.total_microseconds() / 3.6e9),
    )
    return nodes.filter(pl.col("t") > 0).select("host", "t", "event", "cause").sort("host")


def aalen_johansen_ci(aj) -> np.ndarray:
    """95% CI of a fitted AalenJohansenFitter's CIF, columns (low, high).

    Same estimator as lifelines' ``calculate_variance=True`` (Collett's Greenwood-type
    variance, log(-log) transform) but with the running sums Σa(F_j - F_i)² and Σe(F_j - F_i)
    expanded into cumulative sums: O(T) instead of lifelines' per-row pandas loop, which takes
    minutes on 100k nodes. Tested against lifelines.
    """
    et = aj.event_table
    F = aj.cumulative_density_.iloc[:, 0].to_numpy()
    n = et["at_risk"].to_numpy().astype(float)
    d = et["observed"].to_numpy().astype(float)
    dk = et[aj.label_cmprisk].to_numpy().astype(float)
    surv = np.cumprod(np.where(n > 0, 1 - d / np.where(n > 0, n, 1), 1.0))
    lag_s = np.concatenate([[1.0], surv[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        a = d / n / (n - d)
        c = lag_s**2 * dk * (n - dk) / n**3
        e = lag_s * dk / n**2
        var = (
            F**2 * np.cumsum(a)
            - 2 * F * np.cumsum(a * F)
            + np.cumsum(a * F**2)
            + np.cumsum(c)
            - 2 * (F * np.cumsum(e) - np.cumsum(e * F))
        )
        var = np.clip(var, 0.0, None)
        ft = np.log(-np.log(F))
        se = np.sqrt(var) / (F * np.abs(np.log(F)))
        low = np.exp(-np.exp(ft + Z95 * se))
        high = np.exp(-np.exp(ft - Z95 * se))
    return np.column_stack([low, high])


def competing_risks(df: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """Aalen-Johansen cumulative incidence of a node's first failure, one curve per cause."""
    from lifelines import AalenJohansenFitter

    notes = notes if notes is not None else []
    nodes = node_first_failures(df)
    if nodes.height == 0 or not nodes["event"].any():
        notes.append("competing risks skipped: no node with host, observation times and a failure")
        return pl.DataFrame()
    if nodes.height > AJ_MAX_NODES:
        notes.append(
            f"aalen-johansen on a random subsample of {AJ_MAX_NODES:,} of {nodes.height:,} nodes"
        )
        rng = np.random.default_rng(AJ_MAX_NODES)
        nodes = nodes[np.sort(rng.choice(nodes.height, AJ_MAX_NODES, replace=False))]
    causes = nodes["cause"].drop_nulls().unique().sort().to_list()
    code = {c: i + 1 for i, c in enumerate(causes)}
    t = nodes["t"].to_numpy()
    ev = (
        nodes.select(
            pl.when(pl.col("event"))
            .then(pl.col("cause").replace_strict(code, default=0))
            .otherwise(0)
        )
        .to_series()
        .to_numpy()
    )
    frames = []
    for cause in causes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            aj = AalenJohansenFitter(seed=0, calculate_variance=False).fit(
                t, ev, event_of_interest=code[cause]
            )
        cif = aj.cumulative_density_
        tt = cif.index.to_numpy()
        idx = thin(len(tt))
        ci = aalen_johansen_ci(aj)
        at_risk = aj.event_table["at_risk"].reindex(cif.index).to_numpy()
        frames.append(
            pl.DataFrame(
                {
                    "component_class": "node",
                    "estimator": "aalen_johansen",
                    "cause": cause,
                    "t": tt[idx],
                    "cumulative_incidence": cif.to_numpy()[idx, 0],
                    "ci_low": ci[idx, 0],
                    "ci_high": ci[idx, 1],
                    "at_risk": np.nan_to_num(at_risk[idx]).astype(np.int64),
                }
            )
        )
    return pl.concat(frames)
