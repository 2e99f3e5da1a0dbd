"""Scenario keys estimated from the warehouse (a key given as ``estimated``).

- Bad nodes (``bad_nodes.share``, ``bad_nodes.multiplier``): the per-node failure counts and
  node-hours of ``node_health`` (the lemon analysis's inputs) fitted as a two-point Poisson
  mixture by EM: a node fails at rate r with probability 1 - s or m r with probability s,
  k_i ~ Poisson(t_i r (1 or m)). The mixture is kept only when it beats one common rate by the
  likelihood-ratio test at ``ALPHA`` (chi-square, 2 degrees of freedom; a boundary test, so
  conservative); else s = 0, m = 1. The lemon model's overdispersion (``node_health.
  dispersion``: the variance of node rates beyond Poisson, phi) is the moment a fitted
  mixture must reproduce: phi = s (1 - s) (m - 1)^2 / (1 + s (m - 1))^2 (``mixture_phi``).
- Silent repairs (``repair.silent_fail_prob``, ``triage.refail_hours``): the time from each
  repair's end to the node's next failure (``availability.outages``, censored at the end of
  the data) fitted by maximum likelihood as a mixture: with probability p the repair left the
  fault and the node fails at rate r + 1/mu, else at the fleet's rate r (re-failure soon after
  a repair is the signature of a repair that did not fix). p is the silent-failure
  probability, mu the mean time a fault left in place takes to fail again.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from analysis.fleetsim.scenario import ScenarioError

ALPHA = 0.05
CHI2_2DF_95 = 5.991464547107979  # chi-square(2) 95% quantile


def poisson_mixture(k, t, iters: int = 2000) -> dict:
    """Two-point Poisson mixture of counts ``k`` over exposures ``t`` (module docstring):
    {share, multiplier, rate, loglik, loglik_one, kept}."""
    k, t = np.asarray(k, float), np.asarray(t, float)
    keep = t > 0
    k, t = k[keep], t[keep]
    if k.sum() <= 0:
        return {"share": 0.0, "multiplier": 1.0, "rate": 0.0, "kept": False}
    r0 = k.sum() / t.sum()

    def ll(rate):  # Poisson log-likelihood without the k! term
        mu = t * rate
        return k * np.log(np.maximum(mu, 1e-300)) - mu

    s, rg, rb = 0.1, r0 * 0.8, r0 * 3.0
    prev = -np.inf
    for _ in range(iters):
        a, b = np.log1p(-s) + ll(rg), np.log(s) + ll(rb)
        top = np.maximum(a, b)
        tot = top + np.log(np.exp(a - top) + np.exp(b - top))
        w = np.exp(b - tot)
        s = float(np.clip(w.mean(), 1e-9, 1 - 1e-9))
        rg = float(((1 - w) * k).sum() / max(((1 - w) * t).sum(), 1e-300))
        rb = float((w * k).sum() / max((w * t).sum(), 1e-300))
        cur = float(tot.sum())
        if cur - prev < 1e-10:
            break
        prev = cur
    if rb < rg:  # label the faster component bad
        s, rg, rb = 1 - s, rb, rg
    one = float(ll(r0).sum())
    kept = 2 * (prev - one) > CHI2_2DF_95 and rg > 0
    return {
        "share": s if kept else 0.0,
        "multiplier": rb / rg if kept else 1.0,
        "rate": rg if kept else r0,
        "loglik": prev,
        "loglik_one": one,
        "kept": bool(kept),
    }


def mixture_phi(share: float, multiplier: float) -> float:
    """Overdispersion (squared coefficient of variation of node rates) of a two-point mix."""
    x = multiplier - 1.0
    return share * (1 - share) * x * x / (1 + share * x) ** 2


def bad_nodes(health: pl.DataFrame) -> dict:
    """The bad-node share and multiplier of ``node_health`` rows (module docstring)."""
    tested = health.filter(pl.col("node_hours") > 0)
    if tested.height < 2 or tested["failures"].sum() == 0:
        raise ScenarioError(
            "bad_nodes: 'estimated' needs node_health with failures on at least two nodes: "
            "run `goodput build` on failure evidence, or give share and multiplier"
        )
    return poisson_mixture(tested["failures"].to_numpy(), tested["node_hours"].to_numpy())


def refailures(outages: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(hours from each repair's end to the node's next failure, whether one followed: False =
    censored at the end of the data) of outage records with a known end."""
    o = outages.filter(pl.col("host").is_not_null() & pl.col("start").is_not_null())
    if o.height == 0:
        return np.zeros(0), np.zeros(0, bool)
    data_end = o.select(pl.max_horizontal(pl.col("end").max(), pl.col("start").max())).item()
    g = (
        o.sort("system", "host", "start")
        .with_columns(nxt=pl.col("start").shift(-1).over("system", "host"))
        .filter(pl.col("end").is_not_null())
        .with_columns(
            gap=(pl.coalesce("nxt", pl.lit(data_end)) - pl.col("end")).dt.total_microseconds()
            / 3.6e9,
            event=pl.col("nxt").is_not_null(),
        )
        .filter(pl.col("gap") > 0)
    )
    return g["gap"].to_numpy(), g["event"].to_numpy()


def silent_repairs(gaps, events) -> dict:
    """ML fit of the re-failure mixture (module docstring): {silent_fail_prob, refail_hours,
    rate, repairs, refailures}."""
    from scipy.optimize import minimize
    from scipy.special import expit

    x, d = np.asarray(gaps, float), np.asarray(events, bool)
    if d.sum() < 5:
        raise ScenarioError(
            "repair.silent_fail_prob: 'estimated' needs at least 5 repairs followed by another "
            "failure of the node in failures / node_events; give it and triage.refail_hours"
        )
    r0 = d.sum() / x.sum()

    def nll(theta):
        p, r, q = expit(theta[0]), math.exp(theta[1]), math.exp(theta[2])
        fast, slow = r + q, r
        f_fast, f_slow = np.exp(-fast * x), np.exp(-slow * x)
        dens = np.where(
            d, p * fast * f_fast + (1 - p) * slow * f_slow, p * f_fast + (1 - p) * f_slow
        )
        return -np.log(np.maximum(dens, 1e-300)).sum()

    best = None
    for q0 in (10 * r0, 100 * r0, 1000 * r0):
        res = minimize(nll, [0.0, math.log(r0), math.log(q0)], method="Nelder-Mead",
                       options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})  # fmt: skip
        if best is None or res.fun < best.fun:
            best = res
    p, r, q = expit(best.x[0]), math.exp(best.x[1]), math.exp(best.x[2])
    if q < r:  # the 'fast' component must be the faster one to be a left fault
        p, q = 0.0, r
    return {"silent_fail_prob": float(p), "refail_hours": float(1.0 / q), "rate": float(r),
            "repairs": int(x.size), "refailures": int(d.sum())}  # fmt: skip


def for_scenario(wh, keys: list[str]) -> dict:
    """The estimates a scenario's 'estimated' keys need (names of ``run.ESTIMATED_KEYS``)."""
    out = {}
    if any(k.startswith("bad_nodes.") for k in keys):
        fit = bad_nodes(wh.read("node_health"))
        out["bad_share"], out["bad_multiplier"] = fit["share"], fit["multiplier"]
    if {"repair.silent_fail_prob", "triage.refail_hours"} & set(keys):
        from analysis.outages import outages

        fit = silent_repairs(*refailures(outages(wh.read("failures"), wh.read("node_events"))))
        out["silent_fail_prob"], out["refail_hours"] = fit["silent_fail_prob"], fit["refail_hours"]
    return out
