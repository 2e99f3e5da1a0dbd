"""Analysis assets: interruptions and their causes, lifetimes and failure fits, repairable
systems and lemon nodes, MTBF and availability, measured and projected goodput, breakdowns and
trends; each a thin wrapper (``table_asset``) over a plain function of ``analysis/``, and the
checks of the analyses' invariants beside them (``analysis.checks.BUILD_CHECKS``).
"""

import dagster as dg
import polars as pl

from analysis import attribution
from analysis import availability
from analysis import breakdown
from analysis import goodput_measured
from analysis import lifetimes
from analysis import node_health
from analysis import repairable
from analysis import survival
from analysis import system_mtbf
from analysis import trend
from analysis import whatif
from analysis.headline import fleet_headline
from analysis.headline import selected_rates
from analysis.job import Job
from analysis.slowness import rates as fail_slow_rates
from analysis.slowness.signals import gpu_spans
from analysis.status import MissingInputs
from pipelines.assets.factory import DUCKDB
from pipelines.assets.factory import md
from pipelines.assets.factory import row_count
from pipelines.assets.factory import table_asset
from pipelines.checks import invariant_checks


@table_asset(
    "interruptions",
    needs=("job_attempts",),
    reads=("hw_events", "node_events"),
    describe=lambda df, wh, settings: {
        "unexpected": int((~df["planned"]).sum()) if df.height else 0,
        "mix": dg.MetadataValue.md(md(attribution.interruption_mix(df))),
    },
)
def interruptions(wh, settings):
    """Every job attempt that did not end normally, with its attributed root cause, domain and
    lost GPU-hours."""
    return attribution.refresh_interruptions(
        wh,
        window_before_s=settings.window_before_s,
        window_after_s=settings.window_after_s,
        ckpt_interval_s=settings.ckpt_interval_s,
    )


def _lifetimes_meta(df, wh, settings) -> dict:
    populations = df.group_by("population").len().sort("population").rows()
    return {
        "failures": int(df["event"].sum()),
        "populations": dg.MetadataValue.json(dict(populations)),
    }


@table_asset(
    "component_lifetimes",
    reads=("gpu_hourly", "component_history", "interruptions"),
    describe=_lifetimes_meta,
)
def component_lifetimes(wh, settings):
    """One survival row per unit installation: entry age (left truncation), exit age, failed or
    censored, covariates."""
    observed_from, observed_to = settings.window_bounds()
    return lifetimes.refresh_component_lifetimes(
        wh,
        as_of=observed_to,
        data_start=observed_from,
        nodes_per_rack=settings.nodes_per_rack or None,
        gpus_per_node=settings.gpus_per_node,
    )


@table_asset(
    "node_failures",
    "node_mcf",
    name="repairable_systems",
    needs=("interruptions", "hw_events"),
    any_of=True,
    reads=("node_events",),
    rows=lambda out: out[0].height,
    describe=lambda out, wh, settings: {"mcf_points": out[1].height},
)
def repairable_systems(wh, settings):
    """Per-node failures, times between them, and the mean cumulative function across nodes."""
    return repairable.refresh_repairable(wh)


def _node_health_meta(df, wh, settings) -> dict:
    s = node_health.summary(df)
    lemons = df.filter(pl.col("lemon").fill_null(False)).select(
        "host", "failures", "expected_failures", "p_adjusted"
    )
    return {
        "lemons": s["lemons"],
        "slow_lemons": s["slow_lemons"],
        "untested": s["untested"],
        "test": s["test"] or "none",
        "lemon_nodes": dg.MetadataValue.md(md(lemons)),
    }


@table_asset(
    "node_health",
    kinds=DUCKDB,
    any_of=True,
    needs=("job_attempts", "hw_events", "node_events", "component_history"),
    reads=("node_failures", "slow_periods"),
    describe=_node_health_meta,
)
def node_health_asset(wh, settings):
    """Lemon nodes: per node its exposure, failures, interruptions, hardware events, repairs and
    lost GPU-hours, and whether it fails, or slows jobs, significantly more than the fleet
    (one-sided exact Poisson, Benjamini-Hochberg)."""
    return node_health.refresh_node_health(wh)


def _mtbf_meta(df, wh, settings) -> dict:
    series = df.select("source", "system").unique().sort("source", "system").rows()
    return {
        "series": dg.MetadataValue.json([list(r) for r in series]),
    }


@table_asset(
    "system_mtbf", reads=("failures", "interruptions", "node_failures"), describe=_mtbf_meta
)
def system_mtbf_asset(wh, settings):
    """System MTBF per month and quarter (exact Poisson 95% CI), overall, per root cause and per
    component class, for each series of failures: failure records, job interruptions, node
    failure episodes."""
    return system_mtbf.refresh_system_mtbf(wh, *settings.window_bounds())


AVAILABILITY = {
    "availability": "Per system and node: failures, MTBF, MTTR, availability (with nines) and "
    "normalised rates with 95% CIs, from failure records and node down/resume events.",
    "repair_fits": "Every registered lifetime model fitted to the repair times (open ones "
    "censored) and times between failures per system; the AIC winner is selected.",
    "root_causes": "Failures and downtime per root cause per system and overall.",
}


@table_asset(
    *AVAILABILITY,
    name="availability_assets",
    analysis="availability",
    # the outages, the hosts each source watches and the observation window's sources
    reads=("failures", "node_events", "health_events", "job_attempts", "hw_events", "gpu_hourly"),
    descriptions=AVAILABILITY,
    rows=lambda out: out[0].height,
    describe=lambda out, wh, settings: {
        key: {"dagster/row_count": df.height} for key, df in zip(AVAILABILITY, out, strict=True)
    },
)
def availability_assets(wh, settings):
    return availability.refresh_availability(wh, *settings.window_bounds())


FITS = {
    "failure_rates": "Every candidate model per component class and window; the AIC winner is "
    "flagged selected. Class fail_slow: GPU fail-slow episodes per 1,000 GPU-days and the law "
    "of their durations, apart from the fail-stop classes.",
    "survival_curves": "Kaplan-Meier, Nelson-Aalen and Aalen-Johansen estimates.",
    "hazard_ratios": "Cox proportional-hazards ratios with the PH check.",
}


def _fits_meta(summary, wh, settings) -> dict:
    meta = {
        k: v if isinstance(v, (int, float, str)) else dg.MetadataValue.json(v)
        for k, v in summary.items()
    }
    return {key: {**meta, **row_count(wh, key)} for key in FITS}


@table_asset(
    *FITS,
    name="failure_fits",
    needs=("component_lifetimes",),
    reads=("gpu_signal_spans", "gpu_daily"),
    descriptions=FITS,
    rows=lambda summary: summary["failure_rates_rows"],
    describe=_fits_meta,
)
def failure_fits(wh, settings):
    summary = survival.refresh_fits(wh)
    slow = fail_slow_rates.refresh_fail_slow_rates(wh, gpu_spans(wh))
    return {**summary, "failure_rates_rows": summary["failure_rates_rows"] + slow.height}


@table_asset(
    "goodput_jobs",
    needs=("job_attempts",),
    reads=("checkpoints", "slow_periods"),
    describe=lambda df, wh, settings: {
        "summary": dg.MetadataValue.md(md(goodput_measured.summarize(df))),
    },
)
def goodput_jobs(wh, settings):
    """Measured goodput per job chain (time at full speed) with badput split into running slow,
    lost work, restart, checkpoint, queue after failure and other."""
    return goodput_measured.refresh_goodput_jobs(
        wh,
        ckpt_interval_s=settings.ckpt_interval_s,
        ckpt_cost_s=settings.ckpt_cost_s,
        restart_s=settings.restart_s,
    )


@table_asset(
    "goodput_projections",
    needs=("failure_rates",),
    reads=("interruptions",),
)
def goodput_projections(wh, settings):
    """Goodput projections: scale sweep with CI bands, sensitivity ranking, joint best
    checkpoint interval and spares."""
    fr = selected_rates(wh.read("failure_rates"))
    if int(fr["n_events"].sum()) == 0:
        raise MissingInputs(
            "goodput_projections: no failure in failure_rates "
            "(a zero rate gives no MTTI to project)"
        )
    job = Job(
        n_gpus=settings.target_gpus,
        gpus_per_node=settings.gpus_per_node,
        ckpt_cost_s=settings.ckpt_cost_s,
        restart_s=settings.restart_s,
    )
    return whatif.refresh_projections(wh, job)


# the inputs of the summaries of job outcomes (breakdown, trend): attempts, their causes, goodput
JOB_OUTCOMES = {"needs": ("job_attempts",), "reads": ("interruptions", "goodput_jobs")}


def _scoped_meta(df, settings, **shown) -> dict:
    """Metadata of a summary of job outcomes: the scope it covers, then ``shown``."""
    return {"scope": settings.scope().describe(), **shown}


def _breakdown_meta(df, wh, settings) -> dict:
    head = fleet_headline(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs")
    )
    return _scoped_meta(
        df,
        settings,
        breakdown=dg.MetadataValue.md(md(df)),
        headline=dg.MetadataValue.json({k: v for k, v in head.items() if v is not None}),
    )


@table_asset("goodput_breakdown", **JOB_OUTCOMES, describe=_breakdown_meta)
def goodput_breakdown(wh, settings):
    """Interruptions, lost GPU-hours and measured goodput per cluster, partition and account."""
    return breakdown.refresh_breakdown(wh)


@table_asset(
    "goodput_trend",
    **JOB_OUTCOMES,
    describe=lambda df, wh, settings: _scoped_meta(
        df, settings, weeks=md(df.filter(pl.col("period") == "week").tail(8))
    ),
)
def goodput_trend(wh, settings):
    """Goodput, lost GPU-hours, interruptions and MTBF per week and month, with the change
    against the period before."""
    return trend.refresh_trend(wh)


# the analyses' invariants (analysis.checks.BUILD_CHECKS) beside the assets they check
checks = invariant_checks(
    interruptions,
    component_lifetimes,
    availability_assets,
    failure_fits,
    goodput_jobs,
    goodput_projections,
    goodput_breakdown,
    goodput_trend,
)
