"""Survival curves (``survival_curves``): Kaplan-Meier and Nelson-Aalen per class (lifelines,
with ``entry``), plus the Aalen-Johansen curves of ``analysis.survival.competing``; each point
flagged ``small_risk_set`` under ``MIN_AT_RISK`` units at risk, with null CI bounds where the
interval is undefined (never a zero-width CI)."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from analysis.survival.common import clean_lifetimes
from analysis.survival.common import lifetime_sample
from analysis.survival.common import thin
from analysis.survival.competing import competing_risks
from warehouse.schemas import TABLES
from warehouse.schemas import conform

MIN_AT_RISK = 10  # curve points with fewer units at risk are flagged ``small_risk_set``


def survival_curves(lifetimes: pl.DataFrame, notes: list[str] | None = None) -> pl.DataFrame:
    """KM and NA per class with left truncation, plus Aalen-Johansen by cause for nodes."""
    from lifelines import KaplanMeierFitter
    from lifelines import NelsonAalenFitter
    from lifelines.exceptions import StatError

    notes = notes if notes is not None else []

    df = clean_lifetimes(lifetimes)
    frames = []
    for (cls,), cdf in df.partition_by(
        "component_class", as_dict=True, maintain_order=True
    ).items():
        s = lifetime_sample(cdf)
        km = None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # smoothing off: lifelines' tie smoothing adds jumps at pure entry times (wrong
            # with delayed entry); plain Nelson-Aalen is sum d/n over the truncated risk sets
            na = NelsonAalenFitter(nelson_aalen_smoothing=False).fit(
                s.upper, s.event, entry=s.entry
            )
            try:
                km = KaplanMeierFitter().fit(s.upper, s.event, entry=s.entry)
            except StatError:
                # delayed entry emptied the risk set at an event (KM would stay 0 for later
                # entrants); exp(-Nelson-Aalen) (Breslow-Fleming-Harrington) stays meaningful
                notes.append(
                    f"{cls}: Kaplan-Meier undefined after the risk set emptied (few early "
                    "entries); survival curve is Breslow-Fleming-Harrington exp(-NA) instead"
                )
        if km is not None:
            estimator, curve = "kaplan_meier", km.survival_function_
            at_risk = km.event_table["at_risk"].to_numpy()
            ci = km.confidence_interval_.to_numpy()
        else:
            estimator, curve = "breslow_fleming_harrington", np.exp(-na.cumulative_hazard_)
            at_risk = na.event_table["at_risk"].to_numpy()
            ci = np.exp(-na.confidence_interval_.to_numpy()[:, ::-1])
        t = curve.index.to_numpy()
        idx = thin(len(t))
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "estimator": estimator,
                    "t": t[idx],
                    "survival": curve.to_numpy()[idx, 0],
                    "ci_low": ci[idx, 0],
                    "ci_high": ci[idx, 1],
                    "at_risk": at_risk[idx].astype(np.int64),
                }
            )
        )
        nci = na.confidence_interval_.to_numpy()
        idx = thin(len(na.cumulative_hazard_))
        frames.append(
            pl.DataFrame(
                {
                    "component_class": cls,
                    "estimator": "nelson_aalen",
                    "t": na.cumulative_hazard_.index.to_numpy()[idx],
                    "cumulative_hazard": na.cumulative_hazard_.to_numpy()[idx, 0],
                    "ci_low": nci[idx, 0],
                    "ci_high": nci[idx, 1],
                    "at_risk": na.event_table["at_risk"].to_numpy()[idx].astype(np.int64),
                }
            )
        )
    frames.append(competing_risks(df, notes))
    frames = [conform("survival_curves", _flag_small(f)) for f in frames if f.height]
    return pl.concat(frames) if frames else TABLES["survival_curves"].empty()


def _flag_small(curve: pl.DataFrame) -> pl.DataFrame:
    """``small_risk_set`` where fewer than ``MIN_AT_RISK`` units are at risk (the estimate
    rests on a handful of units: the report stops its curves there), and no zero-width CI: at a
    survival of 0 or 1 (or an incidence of 0) the log-log interval is undefined, so its bounds
    are null rather than a certainty the data do not give."""
    width = pl.col("ci_high") - pl.col("ci_low")
    return curve.with_columns(
        small_risk_set=pl.col("at_risk") < MIN_AT_RISK,
        ci_low=pl.when(width > 0).then(pl.col("ci_low")),
        ci_high=pl.when(width > 0).then(pl.col("ci_high")),
    )
