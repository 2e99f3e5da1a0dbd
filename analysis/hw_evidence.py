"""Hardware events as evidence of a failure, shared by interruption attribution, component
lifetimes and node failures: which events are evidence and how strong (``PRECEDENCE``, ranked by
``rank_expr``), the initiating event of each ``caused_by`` chain (``resolve_chains``), and the
warehouse read that leaves out the counter increments that are never evidence
(``read_hw_evidence``).
"""

from __future__ import annotations

import polars as pl

from analysis.telemetry.counters import COUNTER_SOURCE

GPU_CLASSES = ("gpu", "gpu_memory", "gpu_sram")
LINK_CLASSES = ("nvlink", "nvswitch", "ib_link", "nic")
HOST_CLASSES = ("psu", "host_memory", "cpu", "cooling", "storage", "bmc")
HW_CLASSES = GPU_CLASSES + LINK_CLASSES + HOST_CLASSES
HARD = ("fatal", "critical")

# (rank, name, confidence, description) -- the predicates live in rank_expr, in this order.
PRECEDENCE = (
    (1, "gpu_fatal", 0.95, "fatal GPU / HBM / SRAM event"),
    (2, "interconnect", 0.90, "fatal/critical NVLink, NVSwitch, IB link, NIC event"),
    (
        3,
        "host_hw_critical",
        0.90,
        "fatal/critical PSU, DIMM, CPU, cooling, storage, BMC; critical GPU",
    ),
    (4, "counter_critical", 0.80, "fatal/critical DCGM counter increment"),
    (5, "other_critical", 0.70, "fatal/critical host_os or unclassified hardware event"),
    (6, "hw_warning", 0.60, "hardware warning"),
    (7, "node_event", 0.70, "node down / not responding / killed job / unplanned drain"),
    (8, "software_event", 0.70, "software-class event (application XID)"),
)
HARD_RANK = 5  # ranks 1..HARD_RANK are hardware evidence that overrides workload / planned reasons


def rank_expr(cls: pl.Expr, sev: pl.Expr, counter: pl.Expr) -> pl.Expr:
    """Precedence rank of a hardware event (see PRECEDENCE); null = not evidence."""
    hard = sev.is_in(HARD)
    return (
        pl.when(sev.is_null() | (sev == "info"))
        .then(None)
        .when(cls == "software")
        .then(8)
        .when(cls.is_in(GPU_CLASSES) & (sev == "fatal") & ~counter)
        .then(1)
        .when(cls.is_in(LINK_CLASSES) & hard & ~counter)
        .then(2)
        .when((cls.is_in(HOST_CLASSES) | cls.is_in(GPU_CLASSES)) & hard & ~counter)
        .then(3)
        .when(cls.is_in(HW_CLASSES) & hard & counter)
        .then(4)
        .when(hard)
        .then(5)
        .when(counter)
        .then(None)  # warning-level counter increments (NVLink CRC ...) are background noise
        .when(sev == "warning")
        .then(6)
        .otherwise(None)
        .cast(pl.Int32)
    )


def resolve_chains(hw_events: pl.DataFrame, max_depth: int = 8) -> pl.DataFrame:
    """hw_events plus ``root_id`` / ``root_class`` / ``root_severity`` / ``root_counter``: the
    initiating event of each ``caused_by`` chain (the event itself when it has no parent or the
    parent was never ingested)."""
    ev = hw_events.select(
        "event_id",
        "time",
        "host",
        "component_class",
        "severity",
        "caused_by",
        counter=(pl.col("source") == COUNTER_SOURCE) | (pl.col("event_type") == "counter"),
    ).with_columns(pl.col("counter").fill_null(False))
    referenced = ev["caused_by"].drop_nulls().unique()
    parents = (
        ev.filter(pl.col("event_id").is_in(referenced.implode()))
        .select(
            pid="event_id",
            pcaused="caused_by",
            pclass="component_class",
            psev="severity",
            pcounter="counter",
        )
        .unique("pid", keep="first")
    )
    cur = ev.with_columns(
        root_id=pl.col("event_id"),
        root_class=pl.col("component_class"),
        root_severity=pl.col("severity"),
        root_counter=pl.col("counter"),
        nxt=pl.col("caused_by"),
    )
    done = cur.filter(pl.col("nxt").is_null())
    cur = cur.filter(pl.col("nxt").is_not_null())
    for _ in range(max_depth):
        if cur.height == 0:
            break
        cur = cur.join(parents, left_on="nxt", right_on="pid", how="left")
        found = (
            pl.col("pclass").is_not_null()
            | pl.col("psev").is_not_null()
            | pl.col("pcounter").is_not_null()
        )
        cur = cur.with_columns(
            root_id=pl.when(found).then(pl.col("nxt")).otherwise(pl.col("root_id")),
            root_class=pl.when(found).then(pl.col("pclass")).otherwise(pl.col("root_class")),
            root_severity=pl.when(found).then(pl.col("psev")).otherwise(pl.col("root_severity")),
            root_counter=pl.when(found).then(pl.col("pcounter")).otherwise(pl.col("root_counter")),
            nxt=pl.when(found & (pl.col("pcaused") != pl.col("nxt")))
            .then(pl.col("pcaused"))
            .otherwise(None),
        ).drop("pcaused", "pclass", "psev", "pcounter")
        done = pl.concat([done, cur.filter(pl.col("nxt").is_null())])
        cur = cur.filter(pl.col("nxt").is_not_null())
    return pl.concat([done, cur]).drop("nxt")


def read_hw_evidence(wh) -> pl.DataFrame:
    """hw_events as the analyses of failures need it (``resolve_chains``, the precedence ranks,
    component lifetimes, node failures): every row except the info- and warning-level counter
    increments that no event names in ``caused_by``. Those are never evidence (PRECEDENCE) and
    at fleet scale nearly all the rows (an NVLink CRC counter rises a few times a GPU-day:
    736 k of 750 k events on a simulated 512-node, 54-day fleet), so the whole history is read
    without them; a referenced one stays, as the root of its chain."""
    counter = f"coalesce(source = '{COUNTER_SOURCE}' OR event_type = 'counter', false)"
    hard = ", ".join(f"'{s}'" for s in HARD)
    view = wh.view_sql("hw_events")
    return wh.read(
        "hw_events",
        where=f"NOT ({counter} AND coalesce(lower(severity) NOT IN ({hard}), true)) "
        f"OR event_id IN (SELECT caused_by FROM ({view}) WHERE caused_by IS NOT NULL)",
    )
