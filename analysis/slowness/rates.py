"""Fail-slow episodes as a class of ``failure_rates`` (``warehouse.schemas.FAIL_SLOW``), apart
from the fail-stop classes: how often a GPU starts running slow, per 1,000 GPU-days with its
exact Poisson CI, and the law of how long it stays slow.

An episode is a span of one GPU's slowness signal (``signals.gpu_spans``: clock-event
slowdowns, or a PCIe link below its max), busy or idle, lasting at least ``MIN_EPISODE_S``
(shorter spans rest on a sample or two). Its exposure is the GPU-hours the clock-event reasons
were sampled (``gpu_daily``: each GPU's first to last hour of each day). Each registered
lifetime model is fitted to the episodes' durations (one still going at its GPU's last sample is
censored there) and the lowest AIC is selected; the row's ``params`` give that duration law
(``"of": "duration_hours"``), its rate and MTBF the episodes' (the time between episodes of one
GPU), its shape columns nothing (a duration law has no age trend)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from analysis.lifetime_models import Sample
from analysis.lifetime_models import models
from analysis.lifetime_models.exponential import poisson_rate_ci
from analysis.slowness.signals import MIN_EPISODE_S
from analysis.survival.rates import HOURS_PER_1K_UNIT_DAYS
from analysis.telemetry.sql import sql_values
from warehouse.schemas import FAIL_SLOW
from warehouse.schemas import conform
from warehouse.signals import REASON_METRICS

METHOD = f"episodes >= {MIN_EPISODE_S / 60:g} min of the GPU telemetry"
_GPU = ["cluster", "host", "gpu", "uuid"]


def episodes(spans: pl.DataFrame) -> pl.DataFrame:
    """(GPU, signal, start_time, end_time, hours) of every episode: a GPU's spans of one
    signal merged over its busy and idle parts, at least ``MIN_EPISODE_S`` long."""
    key = [*_GPU, "signal"]
    gap = pl.duration(microseconds=(pl.col("spacing_s").fill_null(0) * 1e6).cast(pl.Int64))
    ordered = spans.sort([*key, "start_time"], nulls_last=True)
    reach = pl.col("end_time").cum_max().shift(1).over(key)
    grouped = ordered.with_columns(
        _grp=(reach.is_null() | (pl.col("start_time") > reach + gap)).cum_sum().over(key)
    )
    out = grouped.group_by([*key, "_grp"]).agg(
        pl.col("start_time").min(), pl.col("end_time").max(), pl.col("spacing_s").max()
    )
    out = out.with_columns(
        hours=(pl.col("end_time") - pl.col("start_time")).dt.total_microseconds() / 3.6e9
    )
    return out.filter(pl.col("hours") * 3600 >= MIN_EPISODE_S).drop("_grp")


def exposure(gpu_daily: pl.DataFrame) -> pl.DataFrame:
    """(GPU, hours, first, last) of each GPU whose clock-event reasons were sampled."""
    rows = gpu_daily.filter(pl.col("metric").is_in(REASON_METRICS))
    per_day = rows.group_by([*_GPU, pl.col("first_hour").dt.date().alias("_d")]).agg(
        pl.col("first_hour").min(), pl.col("last_hour").max()
    )
    return per_day.group_by(_GPU).agg(
        hours=(
            (pl.col("last_hour") - pl.col("first_hour")).dt.total_microseconds() / 3.6e9 + 1
        ).sum(),
        first=pl.col("first_hour").min(),
        last=pl.col("last_hour").max() + pl.duration(hours=1),
    )


def fail_slow_rates(spans: pl.DataFrame, gpu_daily: pl.DataFrame) -> pl.DataFrame:
    """``failure_rates`` rows of the fail-slow class (one per model; none without the reasons
    sampled anywhere)."""
    seen = exposure(gpu_daily)
    if seen.height == 0:
        return conform("failure_rates", pl.DataFrame())
    eps = episodes(spans).join(seen.select(*_GPU, "last"), on=_GPU, how="left", nulls_equal=True)
    censored = (pl.col("last") - pl.col("end_time")).dt.total_seconds() <= pl.col(
        "spacing_s"
    ).fill_null(0)
    eps = eps.with_columns(_event=~censored.fill_null(False))
    hours = float(seen["hours"].sum())
    n = eps.height
    rate, low, high = (float(x) for x in poisson_rate_ci(n, hours))
    base = {
        "component_class": FAIL_SLOW,
        "stratum": "all",
        "window": "all",
        "n_units": seen.height,
        "n_events": n,
        "exposure_hours": hours,
        "rate_per_1k_unit_days": rate * HOURS_PER_1K_UNIT_DAYS,
        "rate_ci_low": low * HOURS_PER_1K_UNIT_DAYS,
        "rate_ci_high": high * HOURS_PER_1K_UNIT_DAYS,
        "mtbf_hours": 1 / rate if rate > 0 else None,
        "mtbf_ci_low": 1 / high if high > 0 else None,
        "mtbf_ci_high": 1 / low if low > 0 else None,
        "method": METHOD,
        "population": "telemetry",
        "period_start": seen["first"].min(),
        "period_end": seen["last"].max(),
        "partial": False,
        "low_exposure": False,
        "mean_extrapolated": False,
    }
    rows = [{**base, **fit} for fit in _duration_fits(eps)] or [
        {**base, "model": None, "selected": True, "converged": False, "params": "{}"}
    ]
    out = pl.DataFrame(rows, infer_schema_length=None)
    aic = out["aic"] if "aic" in out.columns else None
    if aic is not None and aic.drop_nulls().len():
        rel = (aic - aic.min()).fill_nan(None)
        w = (-rel / 2).exp()
        out = out.with_columns(
            aic_weight=w / w.sum(), selected=pl.Series(rel.to_numpy() == 0).fill_null(False)
        )
    return conform("failure_rates", out)


def _duration_fits(eps: pl.DataFrame) -> list[dict]:
    """Each registered model fitted to the episodes' durations (hours)."""
    if eps.filter("_event").height < 2:
        return []
    t = eps["hours"].to_numpy()
    event = eps["_event"].to_numpy()
    s = Sample(np.zeros(len(t)), t, t, event, np.zeros(len(t), bool))
    out = []
    for name, model in models().items():
        fit = model.fit(s)
        params = {
            k: {"value": _fin(v[0]), "ci_low": _fin(v[1]), "ci_high": _fin(v[2])}
            for k, v in fit["params"].items()
        }
        aic = model.aic(fit)
        out.append(
            {
                "model": name,
                "params": json.dumps({"of": "duration_hours", **params}),
                "aic": aic if np.isfinite(aic) else None,
                "converged": fit["converged"],
            }
        )
    return out


def _fin(x) -> float | None:
    return float(x) if np.isfinite(x) else None


def refresh_fail_slow_rates(wh, spans: pl.DataFrame) -> pl.DataFrame:
    """``failure_rates`` with its fail-slow rows replaced by those of ``spans`` and the
    warehouse's reason sampling; returns the new rows."""
    rows = fail_slow_rates(spans, wh.read("gpu_daily", f"metric IN ({sql_values(REASON_METRICS)})"))
    kept = wh.read("failure_rates").filter(pl.col("component_class") != FAIL_SLOW)
    wh.replace_table("failure_rates", pl.concat([kept, rows], how="vertical_relaxed"))
    return rows
