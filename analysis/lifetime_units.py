"""The units a lifetime table follows, by where they are known from: the inventory
(``component_history``), telemetry alone (each UUID seen in a GPU slot), or neither (per host seen,
the class's units per GPU or node, renewed at each failure: ``population='observed_units'``)."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from analysis.class_rates import UNIT_COUNTS
from analysis.lifetime_failures import GPU_FAMILY
from analysis.telemetry.replacements import REPLACEMENT_SOURCE

OBSERVED_SEVERITIES = ("fatal", "critical")  # no removal confirms a warning without an inventory


def history_units(ch: pl.DataFrame, data_start: datetime, as_of: datetime) -> pl.DataFrame:
    ch = ch.filter(
        (pl.col("source").fill_null("") != REPLACEMENT_SOURCE)
        & pl.col("installed_at").is_not_null()
    )
    ch = ch.unique(
        ["component_class", "serial", "slot", "installed_at"], keep="last", maintain_order=True
    )
    pos = pl.coalesce(pl.col("position"), pl.col("slot").str.extract(r"/(.*)$"))
    host = pl.coalesce(pl.col("host"), pl.col("slot").str.extract(r"^([^/]+)/"))
    idx = pos.str.extract(r"(\d+)").cast(pl.Int32)
    removed = pl.col("removed_at")
    df = ch.with_columns(
        host=host,
        idx=idx,
        gpu=pl.when(pl.col("component_class").is_in(GPU_FAMILY)).then(idx),
        observed_from=pl.max_horizontal(pl.col("installed_at"), pl.lit(data_start)),
        _end=pl.when(removed.is_not_null() & (removed <= as_of))
        .then(removed)
        .otherwise(pl.lit(as_of)),
        _failed=pl.col("failed").fill_null(False) & removed.is_not_null() & (removed <= as_of),
        _reason=pl.col("removal_reason"),
        batch=pl.col("installed_at")
        .min()
        .over(["component_class", "serial"])
        .dt.year()
        .cast(pl.Utf8),
    ).filter(pl.col("_end") > pl.col("observed_from"))
    df = df.sort("installed_at").with_columns(
        _k=pl.int_range(pl.len()).over(["component_class", "serial"]),
        _n=pl.len().over(["component_class", "serial"]),
    )
    unit_id = (
        pl.when(pl.col("_n") > 1)
        .then(pl.format("{}#{}", "serial", pl.col("_k") + 1))
        .otherwise(pl.col("serial"))
    )
    return df.select(
        "component_class",
        "host",
        "slot",
        "model",
        "installed_at",
        "observed_from",
        "_end",
        "_failed",
        "_reason",
        "gpu",
        "idx",
        "batch",
        unit_id=unit_id,
    )


def telemetry_units(
    hourly_all: pl.DataFrame, history: pl.DataFrame, data_start: datetime, as_of: datetime
) -> pl.DataFrame:
    """GPU units seen only in telemetry (slots with no GPU row in component history)."""
    covered = history.filter(pl.col("component_class") == "gpu").select("host", "gpu").unique()
    seen = (
        hourly_all.filter(
            pl.col("uuid").is_not_null()
            & pl.col("gpu").is_not_null()
            & pl.col("host").is_not_null()
        )
        .group_by("host", "gpu", "uuid")
        .agg(first=pl.col("hour").min())
        .join(covered, on=["host", "gpu"], how="anti")
        .sort("host", "gpu", "first")
        .with_columns(nxt=pl.col("first").shift(-1).over("host", "gpu"))
    )
    return seen.select(
        component_class=pl.lit("gpu"),
        host="host",
        slot=pl.format("{}/gpu{}", "host", "gpu"),
        model=pl.lit(None, pl.Utf8),
        installed_at=pl.max_horizontal("first", pl.lit(data_start)),
        observed_from=pl.max_horizontal("first", pl.lit(data_start)),
        _end=pl.min_horizontal(pl.coalesce("nxt", pl.lit(as_of)), pl.lit(as_of)),
        _failed=pl.col("nxt").is_not_null(),  # confirmed by a matching event below
        _reason=pl.when(pl.col("nxt").is_not_null()).then(
            pl.lit("replaced (UUID changed in telemetry)")
        ),
        gpu=pl.col("gpu").cast(pl.Int32),
        idx=pl.col("gpu").cast(pl.Int32),
        unit_id="uuid",
        _telemetry=pl.lit(True),
    ).filter(pl.col("_end") > pl.col("observed_from"))


_OBSERVED_SCHEMA = {
    "component_class": pl.Utf8,
    "host": pl.Utf8,
    "idx": pl.Int32,
    "start": pl.Datetime("us"),
    "end": pl.Datetime("us"),
    "failed": pl.Boolean,
}


def observed_units(
    hosts: pl.DataFrame, events: pl.DataFrame, skip: set[str], data_start: datetime, as_of: datetime
) -> pl.DataFrame:
    """Without an inventory: every host seen (``hosts``: host, n_gpus) carries the units of each
    class that failed anywhere (``UNIT_COUNTS``: per GPU or per node), observed over the window.

    A fatal or critical event ends a unit's life in its slot (the GPU's index for per-GPU
    classes, else the host's slots in turn) and a replacement starts at age 0; ages at the
    window start are unknown and taken as 0 (entry 0), as for telemetry-only GPUs. The exposure
    (hosts x units x window) and the event count are what the rate rests on."""
    ev = events.filter(
        pl.col("ev_sev").is_in(OBSERVED_SEVERITIES)
        & ~pl.col("ev_counter")
        & (pl.col("ev_time") >= data_start)
        & (pl.col("ev_time") < as_of)
        & ~pl.col("ev_class").is_in(list(skip))
        & pl.col("host").is_in(hosts["host"].implode())
    )
    if ev.height == 0 or hosts.height == 0:
        return pl.DataFrame(schema=_OBSERVED_SCHEMA)
    units = _unit_slots(hosts, ev["ev_class"].unique().sort())
    ev = _slotted_events(ev, units)
    slot = ["component_class", "host", "idx"]
    failed = ev.select(
        *slot,
        start=pl.col("ev_time").shift(1).over(slot).fill_null(pl.lit(data_start)),
        end="ev_time",
        failed=pl.lit(True),
    )
    last = ev.group_by(slot).agg(start=pl.col("ev_time").max())
    censored = units.join(last, on=slot, how="left").select(
        *slot,
        start=pl.col("start").fill_null(pl.lit(data_start)),
        end=pl.lit(as_of),
        failed=pl.lit(False),
    )
    return (
        pl.concat([failed, censored], how="vertical_relaxed")
        .cast(_OBSERVED_SCHEMA)
        .filter(pl.col("end") > pl.col("start"))
    )


def _unit_slots(hosts: pl.DataFrame, classes: pl.Series) -> pl.DataFrame:
    """One row per (class, host, slot index) of the given classes on every host: ``n`` slots
    of ``k`` units per GPU (``scope`` gpu) or per node (``UNIT_COUNTS``)."""
    scope = classes.map_elements(lambda c: UNIT_COUNTS.get(c, ("node", 1))[0], return_dtype=pl.Utf8)
    per = classes.map_elements(lambda c: UNIT_COUNTS.get(c, ("node", 1))[1], return_dtype=pl.Int64)
    cls = pl.DataFrame({"component_class": classes, "scope": scope, "k": per})
    return (
        hosts.join(cls, how="cross")
        .with_columns(
            n=pl.when(pl.col("scope") == "gpu")
            .then(pl.col("n_gpus") * pl.col("k"))
            .otherwise(pl.col("k"))
        )
        .with_columns(idx=pl.int_ranges(0, "n", dtype=pl.Int32))
        .explode("idx")
        .select("component_class", "host", "idx", "scope", "k", "n")
    )


def _slotted_events(ev: pl.DataFrame, units: pl.DataFrame) -> pl.DataFrame:
    """The events (``component_class``) with the slot each one ends (``idx``): a per-GPU
    class's event at its GPU's slot, any other at the host's slots in turn, by time."""
    n_slots = units.group_by("component_class", "host").agg(
        n=pl.col("n").first(), k=pl.col("k").first(), scope=pl.col("scope").first()
    )
    return (
        ev.rename({"ev_class": "component_class"})
        .join(n_slots, on=["component_class", "host"])
        .sort("ev_time", "ev_id")
        .with_columns(_r=pl.int_range(pl.len()).over("component_class", "host"))
        .with_columns(
            idx=(
                pl.when((pl.col("scope") == "gpu") & pl.col("ev_gpu").is_not_null())
                .then(pl.col("ev_gpu").cast(pl.Int64) * pl.col("k"))
                .otherwise(pl.col("_r"))
                % pl.col("n")
            ).cast(pl.Int32)
        )
        .sort("ev_time", "ev_id")
    )


def observed_unit_rows(seen: pl.DataFrame) -> pl.DataFrame:
    """``observed_units`` rows in the columns of the inventory and telemetry units."""
    per_gpu = [c for c, (scope, _) in UNIT_COUNTS.items() if scope == "gpu"]
    return seen.select(
        "component_class",
        "host",
        slot=pl.format("{}/{}{}", "host", "component_class", "idx"),
        model=pl.lit(None, pl.Utf8),
        installed_at="start",
        observed_from="start",
        _end="end",
        _failed="failed",
        _reason=pl.lit(None, pl.Utf8),
        batch=pl.lit(None, pl.Utf8),
        gpu=pl.when(pl.col("component_class").is_in(per_gpu)).then("idx"),
        idx="idx",
        unit_id=pl.format(
            "{}/{}{}@{}",
            "host",
            "component_class",
            "idx",
            pl.col("start").dt.strftime("%Y-%m-%dT%H:%M:%S"),
        ),
        _telemetry=pl.lit(False),
        population=pl.lit("observed_units"),
        fail_time=pl.when("failed").then("end"),
        fail_cause=pl.when("failed").then("component_class"),
    )
