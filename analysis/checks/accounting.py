"""GPU bookkeeping: no job attempt holds more GPUs than its nodes carry, no node more GPUs than it
has at once, jobs use at most the installed GPU-hours, and lost work is at most the work done."""

from __future__ import annotations

import polars as pl

from analysis.assumptions import GPUS_PER_NODE
from analysis.checks._utils import REL
from analysis.checks._utils import some
from analysis.checks._utils import violations
from analysis.numbers import MINUTE
from analysis.numbers import num
from warehouse.checks import invariant
from warehouse.checks import query_tables
from warehouse.store import Warehouse


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
            f"job {r['job_id']} ({r['cluster']}) attempt {some(r['attempt'])}: {r['n_gpus']:,} "
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
            f"{some(r['host'])} at {r['t']:{MINUTE}}: {r['total']:,} GPUs held of "
            f"{r['host_gpus']:,} (job {some(r['jobs'])})"
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
