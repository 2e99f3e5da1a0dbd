"""The evidence an interruption's cause is chosen from: per ended attempt, the hardware events
(chain roots) and node events on its nodes in the window around its end, joined in DuckDB on
(host, hour bucket) plus the range test, and the maintenance that covers it; a node event's class
from the reason text when it names one (``REASON_CLASS``). ``analysis.attribution`` ranks them."""

from __future__ import annotations

import duckdb
import polars as pl

from analysis.hw_evidence import rank_expr
from analysis.hw_evidence import resolve_chains

NODE_FAILURE_EVENTS = (
    "down",
    "not_responding",
    "not_ready",
    "reboot",
    "job_killed",
    "job_requeue",
    "drain",
)


PLANNED_NODE_EVENTS = ("drain", "down", "reboot", "not_ready")
# Administrative drains: maintenance windows, upgrades, Kubernetes cordons.


# Administrative drains: maintenance windows, upgrades, Kubernetes cordons.
PLANNED_REASON = (
    r"(?i)maint|planned|upgrade|cordon|notschedulable|scheduled (?:work|reboot)|firmware update"
)
# Node-event reason text -> component class (first match wins).


# Node-event reason text -> component class (first match wins).
REASON_CLASS = (
    (r"(?i)hbm|ecc|dbe|row.?remap|uncorrectable.*gpu", "gpu_memory"),
    (r"(?i)nvswitch|sxid", "nvswitch"),
    (r"(?i)nvlink", "nvlink"),
    (r"(?i)\bxid\b|gpu|fallen off|nvidia", "gpu"),
    (r"(?i)\bib\b|infiniband|mlx|\blink\b|\bhca\b|\bnic\b", "ib_link"),
    (r"(?i)\bpsu\b|power supply", "psu"),
    (r"(?i)\bfan\b|thermal|overheat|temperature", "cooling"),
    (r"(?i)dimm|memory|\bmce\b|edac", "host_memory"),
    (r"(?i)\bcpu\b|processor", "cpu"),
    (r"(?i)nvme|disk|ssd|storage|\bdrive\b", "storage"),
    (r"(?i)\bbmc\b|ipmi", "bmc"),
    (r"(?i)kernel|panic|driver|\bos\b|kill task failed", "host_os"),
)


BUCKET_S = 3600  # time bucket of the window join


def _reason_class(reason: pl.Expr) -> pl.Expr:
    expr = pl.when(pl.lit(False)).then(pl.lit(None, pl.Utf8))
    for pattern, cls in REASON_CLASS:
        expr = expr.when(reason.str.contains(pattern)).then(pl.lit(cls))
    return expr.otherwise(pl.lit("unknown"))


def _hw_candidates(hw_events: pl.DataFrame) -> pl.DataFrame:
    ev = resolve_chains(hw_events)
    sev = pl.col("root_severity").str.to_lowercase()
    return (
        ev.with_columns(
            rank=rank_expr(
                pl.col("root_class").fill_null("unknown"),
                sev,
                pl.col("root_counter").fill_null(False),
            )
        )
        .filter(
            pl.col("rank").is_not_null()
            & pl.col("host").is_not_null()
            & pl.col("time").is_not_null()
        )
        .select(
            "host",
            "time",
            "rank",
            cls=pl.col("root_class").fill_null("unknown"),
            ref=pl.col("root_id"),
            fatal=(sev == "fatal").fill_null(False),
        )
    )


def _node_ref(host: pl.Expr, time: pl.Expr) -> pl.Expr:
    return pl.concat_str(
        [pl.lit("node_events:"), host, pl.lit("@"), time.dt.strftime("%Y-%m-%dT%H:%M:%S")]
    )


def _node_candidates(node_events: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(failure evidence rows ranked 7, planned-drain rows)."""
    ne = node_events.filter(
        pl.col("host").is_not_null() & pl.col("time").is_not_null()
    ).with_columns(reason=pl.col("reason").fill_null(""))
    # reason texts repeat: classify each distinct one once
    reasons = (
        ne.select("reason")
        .unique()
        .with_columns(
            _planned=pl.col("reason").str.contains(PLANNED_REASON),
            _cls=_reason_class(pl.col("reason")),
        )
    )
    ne = ne.join(reasons, on="reason", how="left")
    planned = pl.col("event").is_in(PLANNED_NODE_EVENTS) & pl.col("_planned")
    fail = ne.filter(pl.col("event").is_in(NODE_FAILURE_EVENTS) & ~planned).select(
        "host",
        "time",
        rank=pl.lit(7, pl.Int32),
        cls="_cls",
        ref=_node_ref(pl.col("host"), pl.col("time")),
        fatal=pl.lit(False),
    )
    maint = ne.filter(planned).select("host", "time", ref=_node_ref(pl.col("host"), pl.col("time")))
    return fail, maint


_PICK_SQL = """
WITH pairs AS (
    SELECT a._i, c.rank, c.cls, c.ref, c.host, c.time,
           c.time <= a.end_time + to_microseconds({skew_us}) AS pre
    FROM att_b a JOIN cand c
      ON a.host = c.host AND a.bucket = c.bucket AND c.time >= a.lo AND c.time <= a.hi
     AND (c.time >= a.near_lo OR c.fatal)
), ranked AS (
    SELECT *,
        row_number() OVER (PARTITION BY _i ORDER BY rank, time, cls, host, ref) AS rn_all,
        row_number() OVER (PARTITION BY _i, pre ORDER BY rank, time, cls, host, ref) AS rn_pre
    FROM pairs
)
SELECT _i,
    max(rank) FILTER (WHERE rn_all = 1) AS all_rank, max(cls) FILTER (WHERE rn_all = 1) AS all_cls,
    max(ref) FILTER (WHERE rn_all = 1) AS all_ref, max(host) FILTER (WHERE rn_all = 1) AS all_host,
    max(rank) FILTER (WHERE rn_pre = 1 AND pre) AS pre_rank,
    max(cls) FILTER (WHERE rn_pre = 1 AND pre) AS pre_cls,
    max(ref) FILTER (WHERE rn_pre = 1 AND pre) AS pre_ref,
    max(host) FILTER (WHERE rn_pre = 1 AND pre) AS pre_host
FROM ranked GROUP BY _i
"""


_MAINT_SQL = """
SELECT a._i, min(m.ref) AS maint_ref, min(m.host) AS maint_host
FROM att a JOIN maint m
  ON a.host = m.host AND m.time <= a.hi
 AND m.time >= greatest(coalesce(a.start_time, a.end_time - to_microseconds({lookback_us})),
                        a.end_time - to_microseconds({lookback_us}))
GROUP BY a._i
"""


def attempt_evidence(
    cand_att: pl.DataFrame,
    node_events: pl.DataFrame,
    hw_events: pl.DataFrame,
    before_s: float,
    after_s: float,
    maint_lookback_s: float,
    skew_s: float,
) -> pl.DataFrame:
    """Per attempt index: best evidence over the whole window and before end + skew, and a
    planned drain reference."""
    att = (
        cand_att.select("_i", "nodes", "start_time", "end_time", "state")
        .explode("nodes")
        .rename({"nodes": "host"})
        .filter(pl.col("host").is_not_null())
        .with_columns(
            lo=pl.when((pl.col("state") == "TIMEOUT") & pl.col("start_time").is_not_null())
            .then(
                pl.min_horizontal(
                    pl.col("start_time"), pl.col("end_time") - pl.duration(seconds=before_s)
                )
            )
            .otherwise(pl.col("end_time") - pl.duration(seconds=before_s)),
            hi=pl.col("end_time") + pl.duration(seconds=after_s),
            near_lo=pl.col("end_time") - pl.duration(seconds=before_s),
        )
        .unique(["_i", "host"])
    )
    hw = _hw_candidates(hw_events)
    fail, maint = _node_candidates(node_events)
    cand = pl.concat([hw, fail.select(hw.columns)], how="vertical_relaxed")
    # equi-join on (host, hour bucket) before the range test: without it every attempt meets
    # every event of its host; a window lists each bucket it touches, an event sits in one
    cand = cand.with_columns(bucket=pl.col("time").dt.epoch("s") // BUCKET_S)
    att_b = att.with_columns(
        bucket=pl.int_ranges(
            pl.col("lo").dt.epoch("s") // BUCKET_S, pl.col("hi").dt.epoch("s") // BUCKET_S + 1
        )
    ).explode("bucket")
    with duckdb.connect() as con:
        con.register("att", att)
        con.register("att_b", att_b)
        con.register("cand", cand)
        con.register("maint", maint)
        picks = con.sql(_PICK_SQL.format(skew_us=int(skew_s * 1e6))).pl()
        maints = con.sql(_MAINT_SQL.format(lookback_us=int(maint_lookback_s * 1e6))).pl()
    schema = {
        "_i": pl.UInt32,
        "all_rank": pl.Int32,
        "all_cls": pl.Utf8,
        "all_ref": pl.Utf8,
        "all_host": pl.Utf8,
        "pre_rank": pl.Int32,
        "pre_cls": pl.Utf8,
        "pre_ref": pl.Utf8,
        "pre_host": pl.Utf8,
    }
    picks = (
        picks.cast({c: t for c, t in schema.items()})
        if picks.height
        else pl.DataFrame(schema=schema)
    )
    mschema = {"_i": pl.UInt32, "maint_ref": pl.Utf8, "maint_host": pl.Utf8}
    maints = maints.cast(mschema) if maints.height else pl.DataFrame(schema=mschema)
    return cand_att.select("_i").join(picks, on="_i", how="left").join(maints, on="_i", how="left")
