"""A projection's rates at a fleet age: the unit ages at job start (``analysis.fleet_age``)
turned into each class's per-unit-hour rate over the job horizon, and the ages observed in
``component_lifetimes`` at the end of the observation window."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC

import numpy as np
import polars as pl

from analysis.class_rates import ClassRates
from analysis.fleet_age import DEFAULT_FLEET_AGE
from analysis.fleet_age import FLEET_AGES
from analysis.fleet_age import AgeGroups
from analysis.fleet_age import expected_failures


def observed_ages(wh, classes=None) -> dict[str, AgeGroups]:
    """Per class, the ages (hours) of the units in service at the end of the observation
    window, from ``component_lifetimes``: units without a failure whose observation reaches
    the window end (``observation.stored_window``, else the class's latest ``observed_to``)
    within a day, aged on to that end; summarised as ``fleet_age.AgeGroups`` (quantiles).
    Classes with no such unit are absent (projected stationary)."""
    from analysis.observation import stored_window

    lt = wh.read("component_lifetimes")
    if lt.height == 0:
        return {}
    win = stored_window(wh)
    if win is not None and win.observed_to is not None:
        t = win.observed_to
        tz = lt.schema["observed_to"].time_zone  # naive timestamps are UTC
        if tz is None and t.tzinfo is not None:
            t = t.astimezone(UTC).replace(tzinfo=None)
        elif tz is not None and t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        end = pl.lit(t).cast(lt.schema["observed_to"])
    else:
        end = pl.col("observed_to").max().over("component_class")
    alive = lt.filter(
        ~pl.col("event").fill_null(False)
        & pl.col("observed_to").is_not_null()
        & pl.col("duration").is_not_null()
        & (pl.col("observed_to") >= end - pl.duration(days=1))
    ).select(
        "component_class",
        (pl.col("duration") + (end - pl.col("observed_to")).dt.total_microseconds() / 3.6e9).alias(
            "age"
        ),
    )
    if classes is not None:
        alive = alive.filter(pl.col("component_class").is_in(list(classes)))
    return {
        c: AgeGroups.from_ages(g["age"].to_numpy())
        for (c,), g in alive.group_by("component_class")
        if g.height
    }


def with_fleet_age(
    rates: ClassRates,
    fleet_age: str = DEFAULT_FLEET_AGE,
    horizon_hours: float | None = None,
    ages: dict[str, AgeGroups] | None = None,
) -> ClassRates:
    """Rates of a job of ``horizon_hours`` whose units start at ``fleet_age``
    (``fleet_age.FLEET_AGES``): per class, expected failures per unit position over the
    horizon (renewal with replacement by new units, ``fleet_age.expected_failures``) / horizon.
    'stationary' keeps the class's rate; 'new' starts every unit at age 0; 'observed' takes each
    class's ``ages`` (``observed_ages``), and a class without ages stays stationary (said in
    ``fleet_age``). Exponential classes have no age effect. The CI and draws move with the
    rate (same relative uncertainty); the Monte Carlo then draws the same process."""
    if fleet_age not in FLEET_AGES:
        raise ValueError(f"unknown fleet age {fleet_age!r}; use one of {', '.join(FLEET_AGES)}")
    ages = ages or {}
    n = len(rates.classes)
    if fleet_age != "stationary" and not (horizon_hours and horizon_hours > 0):
        raise ValueError("a fleet age other than stationary needs a positive job horizon")
    laws, law_rate = list(rates.laws), rates.law_rate.copy()
    ratio, starts, labels = np.ones(n), [], []
    for i, c in enumerate(rates.classes):
        r = float(rates.rate[i])
        if fleet_age != "stationary" and rates.age_laws[i] is not None:
            laws[i], law_rate[i] = rates.age_laws[i]
        start = fleet_age
        if fleet_age == "observed":
            start = ages.get(c, "stationary")
        label = start if isinstance(start, str) else "observed"
        if fleet_age == "observed" and not isinstance(start, AgeGroups):
            label = "stationary (no observed ages)"
        if start != "stationary" and not laws[i].memoryless and r > 0:
            f = r / law_rate[i]  # speed-up of the law by what-ifs: time runs f times faster
            if isinstance(start, AgeGroups):
                start = AgeGroups(start.ages * f, start.weights)
            eff = expected_failures(laws[i], horizon_hours * f, start) / horizon_hours
            ratio[i] = eff / r
            law_rate[i] = eff / f
        starts.append(start if not isinstance(start, AgeGroups) else ages[c])
        labels.append(label)
    return replace(
        rates.scaled(dict(zip(rates.classes, ratio, strict=True))),
        laws=tuple(laws),
        law_rate=law_rate,
        starts=tuple(starts),
        fleet_age=tuple(labels),
        horizon_hours=horizon_hours,
    )
