"""Nodes as repairable systems: failure times per node, times between failures, and Nelson's
mean cumulative function (MCF) across nodes, so a node that keeps failing stands out.

Failure evidence per host: unexpected infrastructure interruptions (``cause_host``, at the
attempt's end) and initiating fatal/critical hardware events (``caused_by`` chains collapsed to
their root; warning-level counters and software-class events excluded). Evidence closer than
``dedup_window_s`` to the previous piece of evidence on the same host is the same failure (one
outage logs an XID, a drain, killed jobs and a counter increment) unless the node was returned to
service (node event ``resume`` / ``ready``) in between. The failure's time is its first
evidence; its class the best-ranked hardware event of the episode (attribution precedence),
else the interruption's class.

``gap_hours`` is the time since the node's previous failure, or, for its first failure, since the
start of its observation window (a left-censored gap: the time since the failure before the data
is unknown).

MCF: time axis = hours since each node's own observation start; at each distinct failure time
t_j with d_j failures and r_j nodes still observed, MCF(t) = sum_{t_j <= t} d_j / r_j (Nelson
2003). Variance: the robust Lawless-Nadeau estimator sum_i (sum_{t_j <= t} delta_i(t_j)
(d_ij - d_j / r_j) / r_j)^2, which does not assume Poisson counts; the CI is log-transformed
(mcf * exp(+-z se / mcf)) so it stays positive. Nodes with no failures count in the risk set.
Observation windows: a (host, start, end) frame when given, else per host the first to the last
hour of its GPU telemetry (end + 1 h), else the span of all evidence.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import numpy as np
import polars as pl

from analysis.hw_evidence import rank_expr
from analysis.hw_evidence import read_hw_evidence
from analysis.hw_evidence import resolve_chains
from warehouse.schemas import TABLES
from warehouse.schemas import conform

Z95 = 1.959963984540054


def failure_evidence(interruptions: pl.DataFrame, hw_events: pl.DataFrame) -> pl.DataFrame:
    """(host, time, rank, cause_class, cause_event, source) rows that say a node failed."""
    it = interruptions.filter(
        (pl.col("failure_domain") == "infrastructure")
        & ~pl.col("planned").fill_null(False)
        & pl.col("cause_host").is_not_null()
        & pl.col("end_time").is_not_null()
    ).select(
        host="cause_host",
        time="end_time",
        rank=pl.lit(99, pl.Int32),
        cause_class="cause_class",
        cause_event="cause_event",
        source=pl.lit("interruptions"),
    )
    ev = resolve_chains(hw_events).filter(pl.col("event_id") == pl.col("root_id"))
    sev = pl.col("severity").str.to_lowercase()
    ev = ev.with_columns(
        rank=rank_expr(pl.col("component_class").fill_null("unknown"), sev, pl.col("counter"))
    )
    hw = ev.filter(
        sev.is_in(["fatal", "critical"])
        & pl.col("rank").is_not_null()
        & (pl.col("rank") <= 5)
        & pl.col("host").is_not_null()
        & pl.col("time").is_not_null()
    ).select(
        "host",
        "time",
        "rank",
        cause_class=pl.col("component_class").fill_null("unknown"),
        cause_event="event_id",
        source=pl.lit("hw_events"),
    )
    return pl.concat([it, hw], how="vertical_relaxed")


def build_node_failures(
    interruptions: pl.DataFrame,
    hw_events: pl.DataFrame,
    node_events: pl.DataFrame,
    windows: pl.DataFrame,
    dedup_window_s: float = 4 * 3600,
) -> pl.DataFrame:
    """The ``node_failures`` table: one row per node failure episode."""
    ev = failure_evidence(interruptions, hw_events).join(
        windows.select("host", "start", "end"), on="host", how="inner"
    )
    ev = ev.filter((pl.col("time") >= pl.col("start")) & (pl.col("time") <= pl.col("end"))).sort(
        "host", "time", "rank"
    )
    if ev.height == 0:
        return TABLES["node_failures"].empty()
    back = (
        node_events.filter(
            pl.col("event").is_in(["resume", "ready"]) & pl.col("host").is_not_null()
        )
        .select("host", back=pl.col("time"))
        .sort("host", "back")
    )
    ev = (
        ev.join_asof(
            back,
            left_on="time",
            right_on="back",
            by="host",
            strategy="backward",
            check_sortedness=False,
        )
        if back.height
        else (ev.with_columns(back=pl.lit(None, pl.Datetime("us"))))
    )
    prev = pl.col("time").shift(1).over("host")
    new = (
        prev.is_null()
        | ((pl.col("time") - prev).dt.total_microseconds() > dedup_window_s * 1e6)
        | (pl.col("back").is_not_null() & (pl.col("back") > prev))
    )
    ev = ev.with_columns(_new=new).with_columns(
        episode=pl.col("_new").cast(pl.Int32).cum_sum().over("host")
    )
    episodes = (
        # the episode's cause: the most severe evidence, then the earliest, then by class and
        # source, then the lowest event id (two events of one rank in one second: the same
        # pick on every build; the class and source the same wherever the files were read
        # from, as ids hash the file's path)
        ev.sort(
            "host",
            "episode",
            "rank",
            "time",
            "cause_class",
            "source",
            "cause_event",
            nulls_last=True,
        )
        .group_by("host", "episode", maintain_order=True)
        .agg(
            time=pl.col("time").min(),
            start=pl.col("start").first(),
            cause_class=pl.col("cause_class").first(),
            cause_event=pl.col("cause_event").first(),
            source=pl.col("source").first(),
        )
        .sort("host", "time")
    )
    prev_t = pl.coalesce(pl.col("time").shift(1).over("host"), pl.col("start"))
    out = episodes.with_columns(
        failure_index=pl.int_range(1, pl.len() + 1).over("host").cast(pl.Int32),
        gap_hours=(pl.col("time") - prev_t).dt.total_microseconds() / 3.6e9,
    )
    return conform("node_failures", out.drop("episode", "start"))


def mean_cumulative_function(failures: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """The ``node_mcf`` table from node failures and (host, start, end) windows."""
    w = windows.select(
        "host", L=(pl.col("end") - pl.col("start")).dt.total_microseconds() / 3.6e9
    ).filter(pl.col("L") > 0)
    if w.height == 0:
        return TABLES["node_mcf"].empty()
    f = (
        failures.join(windows.select("host", "start"), on="host", how="inner")
        .select("host", t=(pl.col("time") - pl.col("start")).dt.total_microseconds() / 3.6e9)
        .join(w, on="host", how="inner")
        .filter(pl.col("t") <= pl.col("L"))
    )
    if f.height == 0:
        return TABLES["node_mcf"].empty()
    times = np.unique(f["t"].to_numpy())
    L = np.sort(w["L"].to_numpy())
    r = (L.size - np.searchsorted(L, times, side="left")).astype(float)  # nodes with L >= t_j
    d = np.bincount(np.searchsorted(times, f["t"].to_numpy()), minlength=times.size).astype(float)
    mcf = np.cumsum(d / r)
    B = np.cumsum(d / r**2)  # expected-share term, B(t_j) = sum_{k<=j} d_k / r_k^2
    # failing nodes: explicit rows of the Lawless-Nadeau sum
    hosts = f["host"].unique().sort().to_list()
    var = np.zeros(times.size)
    Lh = dict(zip(w["host"], w["L"]))
    for h in hosts:  # per failing node (few), vectorized over times
        own = np.bincount(
            np.searchsorted(times, f.filter(pl.col("host") == h)["t"].to_numpy()),
            minlength=times.size,
        )
        at_risk = times <= Lh[h]
        s = np.cumsum(at_risk * (own - d / r) / r)
        var += s**2
    # nodes without failures: S_i(t) = -B(min(t, L_i))
    quiet = np.sort(np.array([v for k, v in Lh.items() if k not in set(hosts)], dtype=float))
    if quiet.size:
        idx = np.searchsorted(times, quiet, side="right") - 1  # last t_j <= L_i
        b_at_L = np.where(idx >= 0, B[np.maximum(idx, 0)], 0.0)
        n_ge = quiet.size - np.searchsorted(
            quiet, times, side="left"
        )  # quiet nodes with L_i >= t_j
        cum_lt = np.concatenate([[0.0], np.cumsum(b_at_L**2)])[
            np.searchsorted(quiet, times, side="left")
        ]
        var += n_ge * B**2 + cum_lt
    se = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        fac = np.exp(Z95 * np.where(mcf > 0, se / mcf, 0.0))
    return conform(
        "node_mcf",
        pl.DataFrame(
            {
                "t_hours": times,
                "n_failures": d.astype(np.int64),
                "n_at_risk": r.astype(np.int64),
                "mcf": mcf,
                "se": se,
                "ci_low": mcf / fac,
                "ci_high": mcf * fac,
            }
        ),
    )


def observation_windows(
    hosts: list[str], start: datetime, end: datetime, presence: pl.DataFrame | None = None
) -> pl.DataFrame:
    """(host, start, end) per host: its telemetry presence when known, else [start, end]."""
    base = pl.DataFrame({"host": sorted(set(hosts))}, schema={"host": pl.Utf8}).with_columns(
        start=pl.lit(start, pl.Datetime("us")), end=pl.lit(end, pl.Datetime("us"))
    )
    if presence is None or presence.height == 0:
        return base
    p = presence.select(
        "host", p_start=pl.col("first_hour"), p_end=pl.col("last_hour") + timedelta(hours=1)
    )
    return base.join(p, on="host", how="left").select(
        "host", start=pl.coalesce("p_start", "start"), end=pl.coalesce("p_end", "end")
    )


def node_windows(wh) -> pl.DataFrame:
    """(host, start, end) observation window per node: its GPU telemetry presence, else the span
    of all evidence. Nodes are those of the inventory (component_history), the telemetry, the
    event logs and the scheduler (hosts jobs ran on). Aggregates in DuckDB over the views."""
    hosts_sql = " UNION ".join(
        f"SELECT DISTINCT {col} AS host FROM ({wh.view_sql(t)})"
        for t, col in (
            ("component_history", "host"),
            ("job_attempts", "unnest(nodes)"),
            ("hw_events", "host"),
            ("node_events", "host"),
        )
    )
    with wh.connect() as con:
        pres = con.sql(
            # gpu_daily: the first and last hour of gpu_hourly per GPU and day, 24x fewer rows
            "SELECT host, min(first_hour) AS first_hour, max(last_hour) AS last_hour FROM "
            f"({wh.view_sql('gpu_daily')}) "
            f"WHERE host IS NOT NULL GROUP BY host"
        ).pl()
        others = con.sql(f"SELECT host FROM ({hosts_sql}) WHERE host IS NOT NULL").pl()
        spans = con.execute(
            " UNION ALL ".join(
                f"SELECT min({lo})::TIMESTAMP, max({hi})::TIMESTAMP FROM ({wh.view_sql(t)})"
                for t, lo, hi in (
                    ("hw_events", "time", "time"),
                    ("node_events", "time", "time"),
                    ("interruptions", "start_time", "end_time"),
                )
            )
        ).fetchall()
    hosts = set(others["host"]) | set(pres["host"])
    times = [lo for lo, _ in spans if lo is not None]
    ends = [hi for _, hi in spans if hi is not None]
    if pres.height:
        times.append(pres["first_hour"].min())
        ends.append(pres["last_hour"].max() + timedelta(hours=1))
    if not times or not hosts:
        return pl.DataFrame(
            schema={"host": pl.Utf8, "start": pl.Datetime("us"), "end": pl.Datetime("us")}
        )
    return observation_windows(
        sorted(hosts),
        min(times),
        max(ends),
        pres.cast({"first_hour": pl.Datetime("us"), "last_hour": pl.Datetime("us")}),
    )


def refresh_repairable(
    wh, dedup_window_s: float = 4 * 3600, windows: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rebuild ``node_failures`` and ``node_mcf`` from interruptions, hw_events, node_events,
    component_history (the host inventory), job_attempts (hosts jobs ran on) and gpu_daily
    (presence)."""
    interruptions, hw, ne = wh.read("interruptions"), read_hw_evidence(wh), wh.read("node_events")
    if windows is None:
        windows = node_windows(wh)
    failures = build_node_failures(interruptions, hw, ne, windows, dedup_window_s)
    mcf = mean_cumulative_function(failures, windows)
    wh.replace_table("node_failures", failures)
    wh.replace_table("node_mcf", mcf)
    return failures, mcf
