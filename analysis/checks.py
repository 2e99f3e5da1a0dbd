"""The analyses' invariants as plain checks: the limits physics and bookkeeping put on the
numbers (no job holds more GPUs than its nodes carry, no node more GPUs than it has, jobs use at
most the installed GPU-hours, lost work at most the work done, fractions in [0, 1], every
slicing of the fleet adds up to the fleet, one cause vocabulary), and every failing class has a
converged selected fit, the sources' time spans agree.

Each takes a :class:`~warehouse.store.Warehouse` (and the settings it names) and returns a
:class:`~warehouse.checks.CheckResult` whose metadata holds ``violations`` (how many rows break
it) and ``examples`` (a few of them, in words). ``BUILD_CHECKS`` lists every check a build runs
and the asset each sits beside: ``pipelines/`` wraps them as Dagster asset checks, the report
evaluates them for its first screen (``evaluate``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from analysis.assumptions import GPUS_PER_NODE
from analysis.headline import fleet_headline
from analysis.headline import selected_rates
from analysis.numbers import MINUTE
from analysis.numbers import num
from analysis.observation import source_spans
from analysis.observation import spans_disagree
from analysis.taxonomy import CLASSES
from analysis.trend import PERIODS
from analysis.trend import data_window
from analysis.trend import window_figures
from warehouse import checks as warehouse_checks
from warehouse.checks import CheckResult
from warehouse.checks import invariant
from warehouse.checks import query_tables
from warehouse.store import Warehouse

EXAMPLES = 3  # offending rows named in a failed check's metadata (and the report's banner)
REL = 1e-9  # two sums of the same floats in another order agree to this (relative)


def violations(
    rows: pl.DataFrame,
    example: Callable[[dict], str],
    alike: tuple[str, ...] = (),
    **measured,
) -> tuple[bool, dict]:
    """(passed, metadata) of a check whose offending rows are ``rows``: how many, the first
    ``EXAMPLES`` in words (``example(row)``), and what else it ``measured``. Rows equal in the
    columns ``alike`` make one example (one job's attempts, the hosts of one instant), whose
    other columns are lists."""
    grouped = rows.group_by(alike, maintain_order=True).agg(pl.all()) if alike else rows
    shown = [example(r) for r in grouped.head(EXAMPLES).iter_rows(named=True)]
    return rows.height == 0, {"violations": rows.height, "examples": shown, **measured}


def _some(values: list, most: int = 3) -> str:
    """A few of ``values``, then how many more."""
    more = len(values) - most
    return ", ".join(map(str, values[:most])) + (f" and {more:,} more" if more > 0 else "")


def _job(r: dict) -> str:
    return f"job {r['job_id']} attempt {r['attempt']} ({r['cluster']})"


# GPUs per host where the data shows them: telemetry's highest GPU index + 1, the GPU slots an
# inventory source lists on the host (per source: sources name one slot differently, "gpu1" and
# "1"); the largest where several do (a GPU that never reported still holds jobs)
_HOST_GPUS = """
    SELECT host, max(gpus)::BIGINT AS gpus FROM (
        SELECT host, max(gpu) + 1 AS gpus FROM gpu_daily
        WHERE host IS NOT NULL AND gpu IS NOT NULL GROUP BY host
        UNION ALL
        SELECT host, count(DISTINCT coalesce(position, slot)) FROM component_history
        WHERE component_class = 'gpu' AND host IS NOT NULL GROUP BY host, source
    ) GROUP BY host"""

_HELD_TABLES = ("job_attempts", "gpu_daily", "component_history")  # what _HELD and _HOST_GPUS read

# attempts that held GPUs over a positive time, with their chain's GPUs where they name none
# (``analysis.goodput_measured.chain_gpus``, as the headline's GPU-hours count them)
_RAN = """
    SELECT * EXCLUDE (n_gpus), coalesce(n_gpus, max(n_gpus) OVER (
        PARTITION BY cluster, scheduler, job_id)) AS n_gpus
    FROM job_attempts"""
_HELD = f"""
    SELECT cluster, scheduler, job_id, attempt, start_time, end_time, n_gpus, n_nodes, nodes
    FROM ({_RAN}) WHERE n_gpus > 0 AND start_time IS NOT NULL AND end_time > start_time"""


@invariant("No job attempt holds more GPUs than its nodes carry.")
def attempt_gpus(wh: Warehouse, gpus_per_node: int = GPUS_PER_NODE) -> tuple[bool, dict]:
    """Every attempt's GPUs at most the GPUs of the nodes it ran on (per host as telemetry or
    the inventory show them, else ``gpus_per_node``; nodes counted but not named at
    ``gpus_per_node``). An attempt naming no node and no node count is not checked."""
    rows = query_tables(
        wh,
        f"""
        WITH hg AS ({_HOST_GPUS}),
        a AS (SELECT * FROM ({_HELD}) WHERE len(nodes) > 0 OR n_nodes > 0),
        named AS (
            SELECT cluster, scheduler, job_id, attempt, unnest(nodes) AS host FROM a
        ),
        carried AS (
            SELECT cluster, scheduler, job_id, attempt,
                sum(coalesce(hg.gpus, {int(gpus_per_node)})) AS gpus
            FROM named LEFT JOIN hg USING (host) GROUP BY ALL
        )
        SELECT a.cluster, a.scheduler, a.job_id, a.attempt, a.n_gpus,
            greatest(len(a.nodes), coalesce(a.n_nodes, 0)) AS nodes,
            coalesce(c.gpus, 0) + (greatest(coalesce(a.n_nodes, 0), len(a.nodes)) - len(a.nodes))
                * {int(gpus_per_node)} AS carried
        FROM a LEFT JOIN carried c USING (cluster, scheduler, job_id, attempt)
        WHERE a.n_gpus > coalesce(c.gpus, 0)
            + (greatest(coalesce(a.n_nodes, 0), len(a.nodes)) - len(a.nodes)) * {int(gpus_per_node)}
        ORDER BY a.n_gpus - carried DESC, a.cluster, a.job_id, a.attempt""",
        *_HELD_TABLES,
    )
    return violations(
        rows,
        lambda r: (
            f"job {r['job_id']} ({r['cluster']}) attempt {_some(r['attempt'])}: {r['n_gpus']:,} "
            f"GPUs on {r['nodes']:,} node(s) carrying {r['carried']:,}"
        ),
        alike=("cluster", "scheduler", "job_id", "n_gpus", "nodes", "carried"),
        gpus_per_node=int(gpus_per_node),
    )


@invariant("No node holds more GPUs at once than it has (overlapping attempts included).")
def node_gpus(wh: Warehouse, gpus_per_node: int = GPUS_PER_NODE) -> tuple[bool, dict]:
    """At every instant, the GPUs the attempts running on a host hold there at most its GPUs.
    An attempt holds on each of its nodes at least what its other nodes cannot carry (all of
    them on a single node): a bound, since sacct does not say how a job's GPUs spread, so an
    uneven spread is never mistaken for over-subscription. Ends before starts at one instant."""
    g = int(gpus_per_node)
    rows = query_tables(
        wh,
        f"""
        WITH hg AS ({_HOST_GPUS}),
        a AS (SELECT * FROM ({_HELD}) WHERE len(nodes) > 0),
        on_host AS (
            SELECT a.*, h.host, coalesce(hg.gpus, {g}) AS host_gpus
            FROM a, unnest(list_distinct(a.nodes)) AS h(host) LEFT JOIN hg ON hg.host = h.host
        ),
        held AS (
            SELECT *, greatest(0, n_gpus - (sum(host_gpus) OVER (
                PARTITION BY cluster, scheduler, job_id, attempt) - host_gpus)) AS gpus
            FROM on_host
        ),
        ev AS (
            SELECT host, host_gpus, start_time AS t, gpus AS d FROM held WHERE gpus > 0
            UNION ALL SELECT host, host_gpus, end_time, -gpus FROM held WHERE gpus > 0
        ),
        run AS (
            SELECT host, host_gpus, t, sum(d) OVER (
                PARTITION BY host ORDER BY t, d ROWS UNBOUNDED PRECEDING) AS total
            FROM ev
        ),
        worst AS (
            SELECT host, host_gpus, max(total) AS total, arg_max(t, total) AS t
            FROM run GROUP BY host, host_gpus HAVING max(total) > host_gpus
        )
        SELECT w.host, w.host_gpus, w.total, w.t,
            list(DISTINCT h.job_id ORDER BY h.job_id) AS jobs
        FROM worst w JOIN held h ON h.host = w.host AND h.start_time <= w.t AND h.end_time > w.t
            AND h.gpus > 0
        GROUP BY w.host, w.host_gpus, w.total, w.t
        ORDER BY any_value(w.total - w.host_gpus) DESC, w.host""",
        *_HELD_TABLES,
    )
    return violations(
        rows,
        lambda r: (
            f"{_some(r['host'])} at {r['t']:{MINUTE}}: {r['total']:,} GPUs held of "
            f"{r['host_gpus']:,} (job {_some(r['jobs'])})"
        ),
        alike=("t", "total", "host_gpus", "jobs"),
        gpus_per_node=g,
    )


@invariant("Jobs use at most the installed GPU-hours, per cluster and day.")
def capacity(wh: Warehouse, gpus_per_node: int = GPUS_PER_NODE) -> tuple[bool, dict]:
    """Per cluster and UTC day: the GPU-hours its attempts held that day (as the headline counts
    them) at most 24 h x the GPUs of every host the cluster shows (its attempts' nodes, and
    hosts of the same cluster in node events, hardware events and telemetry), per host as
    telemetry or the inventory show them, else ``gpus_per_node``. Every host counts every day:
    an upper bound, so a host that joined late never makes a day fail. A cluster whose
    attempts name no host is not checked (``unchecked``)."""
    g = int(gpus_per_node)
    rows = query_tables(
        wh,
        f"""
        WITH hg AS ({_HOST_GPUS}),
        a AS ({_HELD}),
        hosts AS (
            SELECT DISTINCT cluster, unnest(nodes) AS host FROM a
            UNION SELECT cluster, host FROM node_events
            UNION SELECT cluster, host FROM hw_events
            UNION SELECT cluster, host FROM gpu_daily
        ),
        installed AS (
            SELECT cluster, count(*) AS hosts, sum(coalesce(hg.gpus, {g})) AS gpus
            FROM hosts LEFT JOIN hg USING (host)
            WHERE host IS NOT NULL AND cluster IN (SELECT cluster FROM a) GROUP BY cluster
        ),
        days AS (
            SELECT cluster, n_gpus, start_time, end_time, unnest(generate_series(
                date_trunc('day', start_time), end_time - INTERVAL 1 MICROSECOND,
                INTERVAL 1 DAY)) AS day
            FROM a
        ),
        used AS (
            SELECT cluster, day, sum(n_gpus * epoch(least(end_time, day + INTERVAL 1 DAY)
                - greatest(start_time, day)) / 3600) AS gpu_hours
            FROM days GROUP BY ALL
        )
        SELECT u.cluster, u.day, u.gpu_hours, i.hosts, i.gpus, 24.0 * i.gpus AS installed
        FROM used u LEFT JOIN installed i USING (cluster)
        ORDER BY u.gpu_hours / (24.0 * i.gpus) DESC NULLS LAST, u.cluster, u.day""",
        *_HELD_TABLES,
        "node_events",
        "hw_events",
    )
    unchecked = rows.filter(pl.col("gpus").is_null())["cluster"].unique().sort().to_list()
    checked = rows.filter(pl.col("gpus").is_not_null())
    over = checked.filter(pl.col("gpu_hours") > pl.col("installed") * (1 + REL))
    worst = (checked["gpu_hours"] / checked["installed"]).max() if checked.height else None
    return violations(
        over,
        lambda r: (
            f"{r['cluster']} {r['day']:%Y-%m-%d}: {num(r['gpu_hours'])} GPU-hours used of "
            f"{num(r['installed'])} installed ({r['hosts']:,} hosts, {r['gpus']:,} GPUs)"
        ),
        cluster_days=checked.height,
        highest_use=round(worst, 4) if worst is not None else None,
        unchecked=", ".join(unchecked),
        gpus_per_node=g,
    )


@invariant("No interruption loses more GPU-hours than its attempt held.")
def lost_within_used(wh: Warehouse) -> tuple[bool, dict]:
    """Every interruption's lost GPU-hours between 0 and the GPU-hours of the attempt it ended
    (n_gpus x its run time); an interruption without both times is not checked."""
    rows = query_tables(
        wh,
        """
        SELECT cluster, scheduler, job_id, attempt, lost_gpu_hours,
            coalesce(n_gpus, 0) * epoch(end_time - start_time) / 3600 AS used
        FROM interruptions
        WHERE lost_gpu_hours IS NOT NULL AND start_time IS NOT NULL AND end_time IS NOT NULL
            AND (lost_gpu_hours < 0 OR isnan(lost_gpu_hours) OR lost_gpu_hours
                > (coalesce(n_gpus, 0) * epoch(end_time - start_time) / 3600) * (1 + 1e-9) + 1e-9)
        ORDER BY lost_gpu_hours - used DESC, cluster, job_id, attempt""",
        "interruptions",
    )
    return violations(
        rows,
        lambda r: f"{_job(r)}: {num(r['lost_gpu_hours'])} GPU-hours lost of {num(r['used'])} held",
    )


@invariant("Every interruption's cause is a class of the one taxonomy.")
def cause_taxonomy(wh: Warehouse) -> tuple[bool, dict]:
    """Every interruption's ``cause_class`` is one of ``analysis.taxonomy.CLASSES`` (the
    classes of docs/design.md); a missing class is a violation too (unknown is a class)."""
    known = ", ".join(f"'{c}'" for c in CLASSES)
    rows = query_tables(
        wh,
        f"""
        SELECT coalesce(cause_class, '(null)') AS cause, count(*) AS n FROM interruptions
        WHERE cause_class IS NULL OR cause_class NOT IN ({known})
        GROUP BY 1 ORDER BY 2 DESC, 1""",
        "interruptions",
    )
    return violations(rows, lambda r: f"{r['cause']!r} on {r['n']:,} interruption(s)")


@invariant("Every slice of the fleet adds up to the fleet (per cluster, partition, account).")
def breakdown_sums(wh: Warehouse) -> tuple[bool, dict]:
    """Per dimension of ``goodput_breakdown`` (cluster, partition, account), the slices' sums
    of attempts, GPU-hours, unexpected interruptions and their lost GPU-hours equal the fleet
    headline's (``analysis.headline.fleet_headline``), to ``REL``."""
    head = fleet_headline(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs")
    )
    total = {
        "attempts": head["attempts"],
        "gpu_hours": head["gpu_hours"],
        "interruptions": head["unexpected"],
        "infrastructure": head["infrastructure"],
        "lost_gpu_hours": head["lost_gpu_hours"],
    }
    sums = (
        wh.read("goodput_breakdown")
        .group_by("dimension")
        .agg(pl.col(*total).fill_null(0).sum())
        .sort("dimension")
    )
    return violations(
        _disagree(sums, "dimension", total),
        lambda r: (
            f"{r['dimension']}: {r['figure']} sums to {num(r['sum'])}, the fleet has "
            f"{num(r['total'])}"
        ),
        dimensions=sums.height,
    )


@invariant("The periods of the trend add up to the whole span (weeks and months).")
def trend_sums(wh: Warehouse) -> tuple[bool, dict]:
    """Per period kind of ``goodput_trend`` (week, month), the periods' sums of GPU-hours,
    unexpected interruptions and lost GPU-hours equal the same figures over the span they cover
    (``analysis.trend.window_figures``), to ``REL``."""
    att = wh.read("job_attempts")
    span = data_window(att)
    sums = (
        wh.read("goodput_trend")
        .group_by("period")
        .agg(pl.col("gpu_hours", "interruptions", "lost_gpu_hours").fill_null(0).sum())
        .sort("period")
    )
    if span is None or sums.height == 0:
        return violations(sums.clear(), str, periods=0)
    f = window_figures(att, wh.read("interruptions"), wh.read("goodput_jobs"), *span)
    total = {
        "gpu_hours": f["gpu_hours"],
        "interruptions": f["unexpected"],
        "lost_gpu_hours": f["lost_gpu_hours"],
    }
    missing = sorted(set(PERIODS) - set(sums["period"]))
    rows = _disagree(sums, "period", total)
    return violations(
        rows,
        lambda r: (
            f"{r['period']}s: {r['figure']} sums to {num(r['sum'])}, the span has {num(r['total'])}"
        ),
        periods=sums.height,
        missing_periods=", ".join(missing),
    )


def _disagree(sums: pl.DataFrame, by: str, total: dict) -> pl.DataFrame:
    """The (``by``, figure) rows of ``sums`` whose sum differs from ``total[figure]``."""
    rows = [
        {by: r[by], "figure": k, "sum": float(r[k]), "total": float(v or 0)}
        for r in sums.iter_rows(named=True)
        for k, v in total.items()
        if abs(r[k] - (v or 0)) > REL * max(abs(v or 0), 1.0)
    ]
    schema = {by: pl.Utf8, "figure": pl.Utf8, "sum": pl.Float64, "total": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


@invariant("Every class with failures has a converged, AIC-selected model.")
def fits_converged(wh: Warehouse) -> tuple[bool, dict]:
    """Every selected model converged, and every class with lifetimes has a selected model."""
    rates = wh.read("failure_rates")
    lt = wh.read("component_lifetimes")
    classes = set(lt.filter(lt["event"])["component_class"].unique()) if lt.height else set()
    sel = selected_rates(rates)
    missing = (
        sorted(classes - set(sel["component_class"].to_list())) if sel.height else sorted(classes)
    )
    unconverged = (
        sorted(sel.filter(~sel["converged"])["component_class"].unique().to_list())
        if sel.height
        else []
    )
    bad = [f"{c}: no selected model" for c in missing]
    bad += [f"{c}: selected model did not converge" for c in unconverged]
    return not bad, {
        "classes": len(classes),
        "missing": ", ".join(missing),
        "unconverged": ", ".join(unconverged),
        "violations": len(bad),
        "examples": bad[:EXAMPLES],
    }


_GOODPUTS = {  # table -> (row in words, its goodput columns): measured and projected goodput
    "goodput_jobs": ("'job ' || job_id", ("goodput",)),
    "goodput_breakdown": ("dimension || ' ' || coalesce(value, '(none)')", ("goodput",)),
    "goodput_trend": ("period || ' from ' || strftime(period_start, '%Y-%m-%d')", ("goodput",)),
    "goodput_projections": (
        "concat_ws(' ', scenario, method, knob, n_gpus::VARCHAR || ' GPUs')",
        ("goodput", "goodput_ci_low", "goodput_ci_high"),
    ),
}


@invariant("Goodput (measured and projected) lies in [0, 1] with its CI around it.")
def goodput_bounds(wh: Warehouse) -> tuple[bool, dict]:
    """No job chain's measured goodput missing or outside [0, 1], no slice's or period's outside
    it, no projection (nor its CI bounds) outside it, and every projection's CI contains its
    estimate."""
    parts = []
    for table, (label, cols) in _GOODPUTS.items():
        out = " OR ".join(f"{c} < 0 OR {c} > 1 OR isnan({c})" for c in cols)
        if table == "goodput_jobs":
            out += " OR goodput IS NULL"
        if "goodput_ci_low" in cols:
            out += " OR goodput_ci_low > goodput + 1e-9 OR goodput_ci_high < goodput - 1e-9"
        shown = " || ', ' || ".join(
            f"'{c} ' || coalesce(round({c}, 4)::VARCHAR, 'null')" for c in cols
        )
        parts.append(
            f"SELECT '{table}' AS \"table\", {label} AS row, {shown} AS value "
            f"FROM {table} WHERE {out}"
        )
    rows = query_tables(wh, " UNION ALL ".join(parts), *_GOODPUTS)
    counts = rows.group_by("table").len()
    per = dict(counts.rows())
    return violations(
        rows,
        lambda r: f"{r['table']} {r['row']}: {r['value']}",
        jobs_out_of_bounds=per.get("goodput_jobs", 0),
        projections_out_of_bounds=per.get("goodput_projections", 0),
    )


@invariant("Availability and its CI lie in [0, 1], with the CI around the estimate.")
def availability_bounds(wh: Warehouse) -> tuple[bool, dict]:
    """Every system's and node's availability (where known) and its CI bounds in [0, 1], the
    CI containing the estimate."""
    rows = query_tables(
        wh,
        """
        SELECT source, system, level, host, availability, availability_ci_low AS lo,
            availability_ci_high AS hi
        FROM availability WHERE availability IS NOT NULL AND (
            availability < 0 OR availability > 1 OR isnan(availability)
            OR availability_ci_low < 0 OR availability_ci_high > 1
            OR availability_ci_low > availability + 1e-9
            OR availability_ci_high < availability - 1e-9)
        ORDER BY system, host NULLS FIRST""",
        "availability",
    )
    return violations(
        rows,
        lambda r: (
            f"{r['source']} {r['system']} {r['host'] or r['level']}: "
            f"{r['availability']:.4g} [{r['lo']}, {r['hi']}]"
        ),
    )


@invariant(
    "The sources' time spans agree (e.g. telemetry does not end a month after everything else)."
)
def spans_agree(wh: Warehouse) -> tuple[bool, dict]:
    """Every dated source's robust span agrees with the others' (no source starting or ending
    a week, and a quarter of the window, apart from all the rest)."""
    spans = source_spans(wh)
    bad = spans_disagree(spans)
    return not bad, {
        "sources": spans.height,
        "disagree": "; ".join(bad),
        "outlying_times": int(spans["outliers"].sum()),
        "violations": len(bad),
        "examples": bad[:EXAMPLES],
    }


ERROR, WARN = "error", "warn"


@dataclass(frozen=True)
class Invariant:
    """A check a build runs: its name (the Dagster check's), the asset it sits beside, the plain
    function, the tables it reads (it runs after their writers), the settings it takes (names
    of the build's configuration, passed as keywords), whether it blocks the assets after its
    asset, and its severity (a failed ``error`` check fails ``goodput build``)."""

    name: str
    asset: str
    check: Callable[..., CheckResult]
    reads: tuple[str, ...] = ()
    settings: tuple[str, ...] = ()
    blocking: bool = False
    severity: str = ERROR

    @property
    def description(self) -> str:
        return self.check.description

    def run(self, wh: Warehouse, **settings) -> CheckResult:
        return self.check(wh, **{k: settings[k] for k in self.settings if k in settings})


_JOBS = ("job_attempts", "gpu_hourly", "component_history")  # gpu_hourly's asset writes gpu_daily
_OUTCOMES = ("job_attempts", "interruptions", "goodput_jobs")
BUILD_CHECKS: tuple[Invariant, ...] = (
    Invariant(
        "hourly_samples_check", "gpu_hourly", warehouse_checks.hourly_samples, ("gpu_samples",)
    ),
    Invariant("attempt_gpus_check", "goodput_jobs", attempt_gpus, _JOBS, ("gpus_per_node",)),
    Invariant("node_gpus_check", "goodput_jobs", node_gpus, _JOBS, ("gpus_per_node",)),
    Invariant(
        "capacity_check",
        "goodput_breakdown",
        capacity,
        (*_JOBS, "node_events", "hw_events"),
        ("gpus_per_node",),
    ),
    Invariant("lost_within_used_check", "interruptions", lost_within_used),
    Invariant("cause_taxonomy_check", "interruptions", cause_taxonomy),
    Invariant("breakdown_sums_check", "goodput_breakdown", breakdown_sums, _OUTCOMES),
    Invariant("trend_sums_check", "goodput_trend", trend_sums, _OUTCOMES),
    Invariant("fits_converged_check", "failure_rates", fits_converged, blocking=True),
    Invariant(
        "goodput_bounds_check",
        "goodput_projections",
        goodput_bounds,
        ("goodput_jobs", "goodput_breakdown", "goodput_trend"),
    ),
    Invariant("availability_bounds_check", "availability", availability_bounds),
    Invariant("source_spans_check", "component_lifetimes", spans_agree, severity=WARN),
    Invariant("duplicate_keys_check", "warehouse_catalog", warehouse_checks.duplicate_keys),
)


@dataclass(frozen=True)
class Evaluated:
    """One invariant evaluated: its result, or the error that kept it from running."""

    invariant: Invariant
    result: CheckResult | None
    error: str = ""

    @property
    def failed(self) -> bool:
        return self.result is None or not self.result.passed


def evaluate(wh: Warehouse, **settings) -> list[Evaluated]:
    """Every ``BUILD_CHECKS`` invariant on ``wh`` with ``settings`` (e.g. gpus_per_node); a
    check that cannot run (a table it reads is unreadable) is reported as such, never as
    passed."""
    out = []
    for inv in BUILD_CHECKS:
        try:
            out.append(Evaluated(inv, inv.run(wh, **settings)))
        except Exception as exc:  # noqa: BLE001 - a check that cannot run is shown, not passed
            out.append(Evaluated(inv, None, f"{type(exc).__name__}: {exc}".splitlines()[0]))
    return out
