"""Lifetimes with known truth for the tests and benchmarks that check the survival fits: as
``component_lifetimes`` rows, Weibull laws with left truncation, removals and health checks
(``simulate_lifetimes``), constant hazards that change on a calendar date
(``simulate_calendar_rates``) and a simulated fleet's units as they lived (``fleet_lifetimes``:
what ``analysis.lifetimes`` must rebuild from the fleet's files); as the inputs
``analysis.lifetimes`` reads, a simulated fleet's inventory and hourly GPU telemetry
(``fleet_inputs``: the planted temperature effect of ``sample_data.simulation.build_fleet`` to
find, or none)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

import numpy as np
import polars as pl

from sample_data.model import Fleet
from sample_data.writers.component_history import HEADER
from sample_data.writers.component_history import installations
from sample_data.writers.dcgm import gpu_readings
from sample_data.writers.dcgm import node_load
from warehouse.schemas import conform

TELEMETRY = {"DCGM_FI_DEV_GPU_TEMP": 1, "DCGM_FI_DEV_POWER_USAGE": 3, "DCGM_FI_DEV_GPU_UTIL": 0}
# metric -> its position in ``gpu_readings``' (util, temp, memory temp, power)


def fleet_inputs(
    f: Fleet, rng: np.random.Generator, hour_s: float = 3600.0
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(component_history, gpu_hourly) of a built fleet without writing or parsing its files:
    the inventory rows of its component history export, and one reading per GPU and hour (the
    dcgm-exporter model: load from the scheduled attempts, each slot's temperature offset) of
    the temperature, power and utilisation metrics, as ``gpu_hourly`` rows."""

    def ts(c):
        return pl.col(c).str.to_datetime("%Y-%m-%dT%H:%M:%S", time_unit="us")

    history = pl.DataFrame(installations(f), schema=list(HEADER), orient="row").with_columns(
        ts("installed_at"),
        pl.when(pl.col("removed_at") != "").then(ts("removed_at")).alias("removed_at"),
        pl.col("failed") == "true",
        source=pl.lit("simulated"),
    )
    by_node = defaultdict(list)
    for a in f.attempts:
        for n in a.nodes:
            by_node[n].append(a)
    tt = np.arange(0.0, f.horizon, hour_s)
    start = np.datetime64(datetime.strptime(f.start, "%Y-%m-%dT%H:%M:%S"), "us")
    hours = start + (tt * 1e6).astype("timedelta64[us]")
    G = f.gpus_per_node
    frames = []
    for n in range(f.nodes):
        busy, _ = node_load(f, n, tt, by_node[n], {"": 0})
        readings = gpu_readings(busy, f.gpu_temp_offset[n], rng)
        for metric, i in TELEMETRY.items():
            v = readings[i].astype(float).ravel()
            frames.append(
                pl.DataFrame(
                    {
                        "hour": np.repeat(hours, G),
                        "host": f.hosts[n],
                        "gpu": np.tile(np.arange(G, dtype=np.int32), tt.size),
                        "metric": metric,
                        "n": 1,
                        "mean": v,
                        "min": v,
                        "max": v,
                        "last": v,
                    }
                )
            )
    hourly = pl.concat(frames)
    return conform("component_history", history), conform("gpu_hourly", hourly)


def fleet_lifetimes(f: Fleet) -> pl.DataFrame:
    """A built fleet's units over its window as ``component_lifetimes`` rows (class, serial,
    host, ages in hours at entry and exit, failed or not): every installation at risk during
    the window, from the window start or its install to its failure, removal or the window end;
    the exposure and failures ``ground_truth.json``'s laws count."""
    H = f.horizon
    rows = []
    for inst in f.inst:
        t0 = max(inst["install"], 0.0)
        failed = bool(inst.get("failed")) and inst["fail"] < H
        t1 = min(inst["fail"] if inst.get("failed") else inst.get("removed", H), H)
        if t1 <= t0:
            continue
        s = inst["slot"]
        rows.append(
            (f.slot_class[s], inst["serial"], f.hosts[f.slot_node[s]],
             (t0 - inst["install"]) / 3600.0, (t1 - inst["install"]) / 3600.0, failed, t0, t1)
        )  # fmt: skip
    cols = ["component_class", "unit_id", "host", "entry", "duration", "event", "t0", "t1"]
    df = pl.DataFrame(rows, schema=cols, orient="row")
    start = np.datetime64(datetime.strptime(f.start, "%Y-%m-%dT%H:%M:%S"), "us")

    def at(c):
        return pl.lit(start) + pl.duration(microseconds=(pl.col(c) * 1e6).round().cast(pl.Int64))

    return conform(
        "component_lifetimes",
        df.with_columns(
            observed_from=at("t0"), observed_to=at("t1"), population=pl.lit("inventory")
        ).drop("t0", "t1"),
    )


def simulate_lifetimes(
    laws: dict[str, tuple[float, float]],
    n_units: int,
    rng: np.random.Generator,
    *,
    horizon_hours: float = 8760.0,
    installed_before_hours: float = 17520.0,
    removal_rate_per_hour: float = 0.0,
    check_every_hours: float | None = None,
    start: str = "2025-01-01",
) -> pl.DataFrame:
    """Lifetimes with known Weibull laws {class: (shape, scale_hours)}, as component_lifetimes.

    Units are installed uniformly over [-installed_before_hours, horizon_hours] relative to the
    start of observation (age 0 at install) and observed during [0, horizon_hours]: units
    installed earlier enter at their current age (left truncation) and those that failed before
    observation began are never seen. Censoring: end of observation and random removals.
    ``check_every_hours`` makes failures interval-censored between periodic health checks.
    """
    t0 = np.datetime64(start, "us")
    frames = []
    for cls, (shape, scale) in laws.items():
        install = rng.uniform(-installed_before_hours, horizon_hours, n_units)
        life = scale * rng.weibull(shape, n_units)
        removal = (
            rng.exponential(1 / removal_rate_per_hour, n_units)
            if removal_rate_per_hour > 0
            else np.full(n_units, np.inf)
        )
        entry = np.maximum(0.0, -install)
        end_age = np.minimum(horizon_hours - install, removal)
        seen = (life > entry) & (end_age > entry)
        install, life, entry, end_age = install[seen], life[seen], entry[seen], end_age[seen]
        event = life <= end_age
        duration = np.where(event, life, end_age)
        low = np.full(len(duration), np.nan)
        if check_every_hours:
            # health checks at calendar times k * check_every; failure seen at the next check
            fail_cal = install + duration
            next_check = np.ceil(fail_cal / check_every_hours) * check_every_hours
            prev_check = next_check - check_every_hours
            low = np.where(event, np.maximum(prev_check - install, entry), np.nan)
            duration = np.where(event, next_check - install, duration)
        n = len(duration)
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "unit_id": [f"{cls}-{i}" for i in range(n)],
                    "host": [f"node{i // 8:05d}" for i in rng.permutation(n)],
                    "model": np.where(rng.random(n) < 0.5, "A", "B"),
                    "observed_from": t0 + ((install + entry) * 3.6e9).astype("timedelta64[us]"),
                    "observed_to": t0 + ((install + duration) * 3.6e9).astype("timedelta64[us]"),
                    "entry": entry,
                    "duration": duration,
                    "duration_low": low,
                    "event": event,
                    "temp_mean": 60 + 5 * rng.standard_normal(n),
                }
            )
        )
    return conform("component_lifetimes", pl.concat(frames))


def simulate_calendar_rates(
    classes: dict[str, tuple[int, float]],
    rng: np.random.Generator,
    *,
    days: float = 181.0,
    start: str = "2026-01-01",
    change_day: float | None = None,
    factors: dict[str, float] | None = None,
) -> pl.DataFrame:
    """Lifetimes with constant hazards in age that change on a calendar date, as
    component_lifetimes: per class (units, failures per 1,000 unit-days), every unit watched
    from ``start`` for ``days`` (ages at the start uniform over three years: memoryless, any
    will do), a failed unit leaving; from ``change_day`` on, a class's rate is multiplied by
    its ``factors`` entry (a planted trend)."""
    t0 = np.datetime64(start, "us")
    factors = factors or {}
    frames = []
    for cls, (n, per_1k) in classes.items():
        lam = per_1k / 1000.0  # per unit-day
        after = lam * factors.get(cls, 1.0)
        cut = days if change_day is None else change_day
        e = rng.exponential(1.0, n)  # each unit's cumulative hazard at its failure
        t = np.where(e < lam * cut, e / lam, cut + (e - lam * cut) / after)
        end = np.minimum(t, days)
        age0 = rng.uniform(0, 3 * 365.0, n)
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "unit_id": [f"{cls}-{i}" for i in range(n)],
                    "observed_from": np.full(n, t0),
                    "observed_to": t0 + (end * 8.64e10).astype("timedelta64[us]"),
                    "entry": age0 * 24,
                    "duration": (age0 + end) * 24,
                    "event": t < days,
                }
            )
        )
    return conform("component_lifetimes", pl.concat(frames))
