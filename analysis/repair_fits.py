"""The ``repair_fits`` rows: every registered lifetime model fitted by maximum likelihood to a
system's repair times and times between failures, open ones right-censored, zero durations left
out and counted."""

from __future__ import annotations

import json

import numpy as np
import polars as pl

from analysis import lifetime_models
from analysis.lifetime_models.base import Sample
from analysis.survival import fit_model
from warehouse.schemas import TABLES
from warehouse.schemas import conform

MIN_FIT = 5  # complete (uncensored) positive durations needed to fit


# ----------------------------------------------------------------------------- fits
def fit_durations(
    x: np.ndarray, event: np.ndarray | None = None, engine: str = "numpy"
) -> list[dict]:
    """Every registered lifetime model (``analysis/lifetime_models/``) fitted to positive
    durations (hours), ``event`` False where one is right-censored (a repair still open, the
    time since the last failure), by ``analysis.survival.fit_model`` (engine 'numpy', tested
    to agree with lifelines, or 'lifelines' itself): per model its parameters with 95% CIs
    (JSON), AIC, the fitted median, and its age-trend parameter (the Weibull shape) with its
    CI where it declares one."""
    event = np.ones(x.size, bool) if event is None else np.asarray(event, bool)
    s = Sample(np.zeros_like(x), x, x, event, np.zeros(x.size, bool))
    rows = []
    for model in lifetime_models.models().values():
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a law far off
            fit, _ = fit_model(model, s, engine)
        params = {
            k: {"value": float(v[0]), "ci_low": float(v[1]), "ci_high": float(v[2])}
            for k, v in fit["params"].items()
        }
        ok = bool(fit["converged"]) and bool(params)
        trend = model.age_trend_parameter
        shape = list(params[trend].values()) if trend in params and ok else None
        rows.append(
            {
                "model": model.name,
                "converged": ok,
                "params": json.dumps(params),
                "aic": model.aic(fit) if ok else None,
                "median_hours": float(
                    model.from_params(params).inverse_cumulative_hazard(np.log(2.0))
                )
                if ok
                else None,
                "shape": shape[0] if shape else None,
                "shape_ci_low": shape[1] if shape else None,
                "shape_ci_high": shape[2] if shape else None,
            }
        )
    best = min((r for r in rows if r["converged"]), key=lambda r: r["aic"], default=None)
    for r in rows:
        r["selected"] = r is best
    return rows


def repair_fits(o: pl.DataFrame, engine: str) -> pl.DataFrame:
    """Per (source, system): the repair times (an open repair censored at the span's end) and
    the times between failure starts (the time from the last start to the span's end
    censored), each fitted by every registered model when ``MIN_FIT`` of them are complete."""
    rows = []
    for (source, system), g in o.partition_by(
        "source", "system", as_dict=True, maintain_order=True
    ).items():
        starts = np.sort(g["start"].to_numpy().astype("datetime64[us]").astype(np.int64)) / 3.6e9
        span_to = g["span_to"].to_numpy().astype("datetime64[us]").astype(np.int64)[0] / 3.6e9
        known = g.filter(pl.col("downtime_hours").is_not_null())
        for quantity, x, done in (
            (
                "repair",
                known["downtime_hours"].to_numpy(),
                ~known["open"].fill_null(False).to_numpy(),
            ),
            (
                "tbf",
                np.r_[np.diff(starts), span_to - starts[-1]],
                np.r_[np.ones(starts.size - 1, bool), False],
            ),
        ):
            pos = x > 0
            if (pos & done).sum() < MIN_FIT:
                continue
            base = {
                "source": source,
                "system": system,
                "quantity": quantity,
                "n": int(pos.sum()),
                "n_censored": int((pos & ~done).sum()),
                "n_zero": int((~pos).sum()),
            }
            rows += [{**base, **r} for r in fit_durations(x[pos], done[pos], engine)]
    if not rows:
        return TABLES["repair_fits"].empty()
    return conform(
        "repair_fits", pl.DataFrame(rows, infer_schema_length=None).drop("note", strict=False)
    )
