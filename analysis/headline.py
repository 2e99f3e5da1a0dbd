"""The fleet's headline numbers and "the selected rates", each computed in one place.

``BAND_COVERS``: what the goodput band of a projection holds, in words.
``selected_rates(failure_rates)``: per class, the AIC-selected model of the whole window
('all') and stratum ('all'), the rows every summary quotes (or of one month, or of every month
for the rate trend; the projection reads them too). ``fleet_headline(...)``: jobs,
attempts, GPU-hours, unexpected interruptions (infrastructure / the jobs' own), lost GPU-hours,
fleet MTTI and measured goodput, from the warehouse tables. The report's headline section, the
CLI summary (``pipelines/run.py``) and the Dagster asset metadata all read these.
"""

from __future__ import annotations

import polars as pl

from analysis.goodput_measured import chain_gpus
from analysis.goodput_measured import fleet_mtti
from warehouse.schemas import FAIL_SLOW

ALL = "all"
# What a projection's 95% band holds and what it does not, said once (CLI summary, report).
BAND_COVERS = (
    "covers the uncertainty of the fitted rates and of which lifetime model fits them, not that "
    "of the assumed checkpoint cost and restart time"
)
MONTHLY = r"^\d{4}-\d{2}$"  # the monthly windows' names ('YYYY-MM'); as ``window``: every month


def selected_rates(
    failure_rates: pl.DataFrame, window: str = ALL, stratum: str = ALL
) -> pl.DataFrame:
    """The AIC-selected row of each fail-stop class for ``window`` ('all', one month 'YYYY-MM',
    or ``MONTHLY`` for every month) and ``stratum`` (every column); the fail-slow episodes
    (``FAIL_SLOW``) are no interruption rate to project."""
    if failure_rates.height == 0:
        return failure_rates
    in_window = (
        pl.col("window").str.contains(MONTHLY) if window == MONTHLY else pl.col("window") == window
    )
    return failure_rates.filter(
        pl.col("selected").fill_null(False)
        & in_window
        & (pl.col("stratum").fill_null(ALL) == stratum)
        & (pl.col("component_class") != FAIL_SLOW)
    )


def unit_populations(failure_rates: pl.DataFrame) -> list[tuple[str | None, str]]:
    """Where each class's units came from (``population``: inventory, telemetry, events, ...)
    in the whole-period, whole-fleet fits: (population, "class, class, ...") sorted by
    population."""
    if failure_rates.height == 0:
        return []
    whole = failure_rates.filter(
        (pl.col("window") == ALL) & (pl.col("stratum").fill_null(ALL) == ALL)
    )
    pops = whole.group_by("population").agg(
        pl.col("component_class").unique().sort().str.join(", ")
    )
    return sorted(pops.rows(), key=lambda r: r[0] or "")


def gpu_hours(attempts: pl.DataFrame) -> float:
    """GPU-hours the job attempts held: Σ n_gpus × (end − start) over attempts with both times
    (an attempt without a GPU count at its chain's, ``chain_gpus``)."""
    ran = attempts.with_columns(chain_gpus()).filter(
        pl.col("start_time").is_not_null() & pl.col("end_time").is_not_null()
    )
    return float(
        ran.select(
            (
                pl.col("n_gpus").fill_null(0)
                * (pl.col("end_time") - pl.col("start_time")).dt.total_seconds()
            ).sum()
            / 3600
        ).item()
        or 0.0
    )


def weighted_goodput() -> pl.Expr:
    """Measured goodput weighted by GPU-hours over job chains (``goodput_jobs`` rows with wall
    time): Σ n_gpus·productive / Σ n_gpus·wall. Null without wall time."""
    w = pl.col("n_gpus").fill_null(0).cast(pl.Float64)
    ran = pl.col("wall_hours") > 0
    num = (w * pl.col("productive_hours")).filter(ran).sum()
    den = (w * pl.col("wall_hours")).filter(ran).sum()
    return pl.when(den > 0).then(num / den).otherwise(None)


def slow_gpu_hours() -> pl.Expr:
    """The work job chains (``goodput_jobs`` rows) lost running slow, in GPU-hours:
    Σ n_gpus·slow_hours."""
    return (pl.col("n_gpus").fill_null(0) * pl.col("slow_hours").fill_null(0.0)).sum()


def fleet_headline(
    attempts: pl.DataFrame, interruptions: pl.DataFrame, goodput_jobs: pl.DataFrame
) -> dict:
    """The fleet's headline numbers. Keys: attempts, jobs (chains), gpu_hours, interruptions
    (rows), planned, unexpected, infrastructure, workload, lost_gpu_hours (unexpected),
    span_hours, mtti_infrastructure_hours, mtti_all_hours, goodput_gpu_hours (weighted by
    GPU-hours; None without job chains), goodput_mean (mean over the chains' goodput),
    slow_gpu_hours (the chains' work lost running slow, in GPU-hours)."""
    fm = fleet_mtti(attempts, interruptions)
    unplanned = interruptions.filter(~pl.col("planned").fill_null(False))
    jobs = goodput_jobs.filter(pl.col("wall_hours") > 0)
    return {
        "attempts": attempts.height,
        "jobs": attempts.select("cluster", "scheduler", "job_id").n_unique()
        if attempts.height
        else 0,
        "gpu_hours": gpu_hours(attempts),
        "interruptions": interruptions.height,
        "planned": interruptions.height - unplanned.height,
        "lost_gpu_hours": float(unplanned["lost_gpu_hours"].fill_null(0).sum())
        if unplanned.height
        else 0.0,
        **fm,
        "goodput_gpu_hours": jobs.select(weighted_goodput()).item() if jobs.height else None,
        "goodput_mean": goodput_jobs["goodput"].mean() if goodput_jobs.height else None,
        "slow_gpu_hours": float(jobs.select(slow_gpu_hours()).item() or 0.0)
        if jobs.height
        else 0.0,
    }


def read_headline(wh) -> dict:
    """``fleet_headline`` of a warehouse (scoped or not)."""
    return fleet_headline(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs")
    )
