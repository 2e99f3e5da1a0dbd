"""Component lifetimes: one survival row per unit installation (``component_lifetimes``).

Observation window: ``data_start`` (a parameter, else the first gpu_hourly hour, else the earliest
hw_events time -- SEL logs keep entries from before collection began -- else the earliest
installation) to ``as_of`` (a parameter, else the latest time in the data:
hw_events, the end of the last gpu_hourly hour, installations and removals).

Per installation (``component_history`` rows; ``source='telemetry'`` rows are ignored, see below):
- ``observed_from`` = max(installed_at, data_start); ``entry`` = age in hours then. A unit
  installed before the data starts enters at its age at data start (left truncation).
- a failed unit (``failed`` and removed by ``as_of``) ends at its failure: a matching hardware
  event between ``observed_from`` and the removal (same host; GPU-family units by GPU index,
  filled from UUID / PCI bus by ``fill_gpu_index``, others by class and the number in their
  position; the earliest when the unit's own index matches, else the one nearest the removal;
  log lines before DCGM counter increments), when there is one, else the removal time itself (then
  ``duration_low`` is the age at the unit's last telemetry hour, the last time it was seen
  working, when telemetry covers it). ``failure_cause`` = the class of that event's chain root,
  else the removal reason.
- any other unit is censored at min(removed_at, as_of): a unit still in service is censored at
  ``as_of``, never dropped. Installations never observed (removed before data_start, installed
  after as_of) are left out.
- covariates (temp / power / util) over the unit's first ``COVARIATE_DAYS`` days observed, the
  same window for every unit: ``analysis.lifetime_covariates``.
- ``rack`` from a (host, rack) frame, else from the trailing host number with ``nodes_per_rack``
  (``rack-01`` holds hosts 1..k), else null. Hosts named as Cray cnames (``c11-2c1s4n1``) give
  their place: cabinet column and row, cage, blade slot and node position (``cname_place``).
- ``batch``: the year the unit's serial was first installed (inventory units; its cohort, e.g.
  Titan's 2013 original GPUs against the 2016-2017 replacements).

``refresh_component_lifetimes`` takes the window from ``analysis.observation`` (the robust span
of the data, or explicit bounds) and passes it as ``data_start`` / ``as_of``.

Without an inventory (no ``component_history`` row besides those inferred from telemetry), each
host seen carries, for every class with a fatal/critical event, ``analysis.class_rates.UNIT_COUNTS``
units per GPU or per node, followed over the window and renewed at each failure
(``population='observed_units'``; ages unknown, entry 0 at the window start).

Units known only from telemetry: for a (host, GPU index) slot with no GPU row in
component_history, each UUID seen in ``gpu_hourly`` there is a unit (class gpu, unit_id = UUID)
observed from its first hour to the next UUID's first hour (then it is counted failed if a
fatal/critical GPU-family event hit the slot in between) or to ``as_of``. Its age at first sight
is unknown and taken as 0 (entry = 0): for a unit already in service when the data starts this
understates its age, which biases a fitted hazard toward infant mortality; prefer component
history where it exists. The ``component_history`` rows that ``analysis.telemetry.replacements``
infers from UUID changes carry the same information and are therefore not read a second time.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import duckdb
import polars as pl

from analysis.class_rates import UNIT_COUNTS
from analysis.gpu_identity import fill_gpu_index
from analysis.hw_evidence import read_hw_evidence
from analysis.hw_evidence import resolve_chains
from analysis.lifetime_covariates import CovariateSQL
from analysis.lifetime_covariates import covariate_sql
from analysis.lifetime_covariates import unit_covariates
from analysis.observation import refresh_observation_window
from analysis.status import MissingInputs
from analysis.telemetry.replacements import REPLACEMENT_SOURCE
from analysis.telemetry.rollups import gpu_presence
from analysis.telemetry.rollups import refresh_gpu_hourly
from warehouse.schemas import conform

GPU_FAMILY = ("gpu", "gpu_memory", "gpu_sram", "nvlink")
FAILURE_SEVERITIES = ("fatal", "critical", "warning")
OBSERVED_SEVERITIES = ("fatal", "critical")  # no removal confirms a warning without an inventory
HOUR = timedelta(hours=1)


def _hours(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (b - a).dt.total_microseconds() / 3.6e9


def observation_bounds(
    component_history: pl.DataFrame,
    gpu_hourly: pl.DataFrame,
    hw_events: pl.DataFrame,
    as_of: datetime | None = None,
    data_start: datetime | None = None,
) -> tuple[datetime, datetime]:
    """(data_start, as_of) with the defaults described in the module docstring."""
    if data_start is None:
        # telemetry is continuous; BMC logs keep entries from before collection started
        data_start = gpu_hourly["hour"].min()
        if data_start is None:
            data_start = hw_events["time"].min()
        if data_start is None:
            data_start = component_history["installed_at"].min()
    if as_of is None:
        last_hour = gpu_hourly["hour"].max()
        cands = [
            hw_events["time"].max(),
            last_hour + HOUR if last_hour is not None else None,
            component_history["installed_at"].max(),
            component_history["removed_at"].max(),
        ]
        cands = [c for c in cands if c is not None]
        as_of = max(cands) if cands else data_start
    if data_start is None or as_of is None:
        raise ValueError("no times in the data: pass data_start and as_of")
    return data_start, as_of


CNAME = r"^c(\d+)-(\d+)c(\d+)s(\d+)n(\d+)$"  # Cray XK/XC node: cabinet column-row, cage, slot, node


def cname_place(host: pl.Expr) -> dict[str, pl.Expr]:
    """The location covariates of a Cray cname host (``c11-2c1s4n1``: cabinet column 11, row 2,
    cage 1, blade slot 4, node 1); nulls for any other host name."""
    g = host.str.extract_groups(CNAME)

    def num(i):
        return g.struct.field(str(i)).cast(pl.Int32)

    return {
        "cabinet_column": num(1),
        "cabinet_row": num(2),
        "cage": g.struct.field("3"),
        "blade": num(4),
        "node_position": g.struct.field("5"),
    }


def _rack(df: pl.DataFrame, racks: pl.DataFrame | None, nodes_per_rack: int | None) -> pl.DataFrame:
    if racks is not None:
        return df.join(racks.select("host", "rack").unique("host"), on="host", how="left")
    if nodes_per_rack:
        num = pl.col("host").str.extract(r"(\d+)\D*$").cast(pl.Int64)
        return df.with_columns(
            rack=pl.format("rack-{}", ((num - 1) // nodes_per_rack + 1).cast(pl.Utf8).str.zfill(2))
        )
    return df.with_columns(rack=pl.lit(None, pl.Utf8))


def _failure_events(hw_events: pl.DataFrame) -> pl.DataFrame:
    """Initiating hardware events that can end a unit's life, with their unit index."""
    ev = resolve_chains(hw_events).filter(pl.col("event_id") == pl.col("root_id"))
    ev = ev.join(
        hw_events.select("event_id", "gpu", "component_id", "uuid"), on="event_id", how="left"
    )
    return ev.filter(
        pl.col("severity").str.to_lowercase().is_in(FAILURE_SEVERITIES)
        & pl.col("host").is_not_null()
        & ~(
            (pl.col("counter").fill_null(False))
            & (pl.col("severity").str.to_lowercase() == "warning")
        )
    ).select(
        "host",
        ev_time="time",
        ev_class="component_class",
        ev_id="event_id",
        ev_gpu=pl.col("gpu").cast(pl.Int32),
        ev_idx=pl.col("component_id").str.extract(r"(\d+)").cast(pl.Int32),
        ev_sev=pl.col("severity").str.to_lowercase(),
        ev_counter=pl.col("counter").fill_null(False),
    )


def _match_failures(units: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Per failed unit (_u): the earliest best-matching event in [observed_from, end]."""
    failed = units.filter(pl.col("_failed")).select(
        "_u", "host", "component_class", "gpu", "idx", "observed_from", "_end"
    )
    if failed.height == 0 or events.height == 0:
        return pl.DataFrame(
            schema={"_u": pl.UInt32, "fail_time": pl.Datetime("us"), "fail_cause": pl.Utf8}
        )
    j = failed.join(events, on="host", how="inner").filter(
        (pl.col("ev_time") >= pl.col("observed_from")) & (pl.col("ev_time") <= pl.col("_end"))
    )
    gpu_unit = pl.col("component_class").is_in(GPU_FAMILY)
    same = pl.col("ev_class") == pl.col("component_class")
    score = (
        pl.when(
            gpu_unit & pl.col("ev_class").is_in(GPU_FAMILY) & (pl.col("ev_gpu") == pl.col("gpu"))
        )
        .then(pl.when(same).then(3).otherwise(2))
        .when(gpu_unit & pl.col("ev_class").is_in(GPU_FAMILY) & pl.col("ev_gpu").is_not_null())
        .then(None)  # another GPU's event
        .when(~gpu_unit & same & (pl.col("ev_idx") == pl.col("idx")))
        .then(3)
        .when(same)
        .then(1)
        .otherwise(None)
    )
    sev_rank = pl.col("ev_sev").replace_strict({"fatal": 0, "critical": 1, "warning": 2}, default=3)
    return (
        j.with_columns(score=score, sev_rank=sev_rank)
        .filter(pl.col("score").is_not_null())
        # the unit's own index: its first event; index unknown: the event nearest its removal
        # (another unit's fault of the same class is likelier anywhere before than in the repair
        # window); counter increments surface a scrape interval late, so log lines come first
        .with_columns(
            order=pl.when(pl.col("score") == 3)
            .then(pl.col("ev_time").dt.epoch("us"))
            .otherwise(-pl.col("ev_time").dt.epoch("us"))
        )
        .sort(
            ["_u", "ev_counter", "score", "sev_rank", "order", "ev_id"],
            descending=[False, False, True, False, False, False],
        )
        .group_by("_u", maintain_order=True)
        .agg(fail_time=pl.col("ev_time").first(), fail_cause=pl.col("ev_class").first())
    )


def _history_units(ch: pl.DataFrame, data_start: datetime, as_of: datetime) -> pl.DataFrame:
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


def _telemetry_units(
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


def _observed_units(
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


def _observed_unit_rows(seen: pl.DataFrame) -> pl.DataFrame:
    """``_observed_units`` rows in the columns of the inventory and telemetry units."""
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


def build_component_lifetimes(
    component_history: pl.DataFrame,
    gpu_hourly: pl.DataFrame,
    hw_events: pl.DataFrame,
    as_of: datetime | None = None,
    data_start: datetime | None = None,
    racks: pl.DataFrame | None = None,
    nodes_per_rack: int | None = None,
    observed_hosts: pl.DataFrame | None = None,
    hourly_covariates: CovariateSQL | None = None,
    connect=duckdb.connect,
) -> pl.DataFrame:
    """The ``component_lifetimes`` table (pure). ``observed_hosts`` (host, n_gpus): the hosts
    the data saw, for populations without an inventory (used only when ``component_history``
    has no inventory rows). ``hourly_covariates``: the covariate rows as DuckDB SQL for the days
    units enter or leave (``covariate_sql``: whole days from gpu_daily, those days' hours from
    gpu_hourly), joined out of core on ``connect()``, instead of those of ``gpu_hourly`` (which
    then needs no covariate rows)."""
    data_start, as_of = observation_bounds(
        component_history, gpu_hourly, hw_events, as_of, data_start
    )
    hist = _history_units(component_history, data_start, as_of).with_columns(
        _telemetry=pl.lit(False), population=pl.lit("inventory")
    )
    tele = _telemetry_units(gpu_hourly, hist, data_start, as_of).with_columns(
        population=pl.lit("telemetry")
    )
    tele = tele.with_columns(batch=pl.lit(None, pl.Utf8))
    units = pl.concat([hist, tele.select(hist.columns)], how="vertical_relaxed")
    events = _failure_events(fill_gpu_index(hw_events, gpu_hourly))
    units = _with_failures(units, events)
    has_inventory = (component_history["source"].fill_null("") != REPLACEMENT_SOURCE).any()
    if observed_hosts is not None and not has_inventory:
        seen = _observed_units(
            observed_hosts, events, {"gpu"} if tele.height else set(), data_start, as_of
        )
        obs = _observed_unit_rows(seen)
        units = pl.concat(
            [units.drop("_u"), obs.select(units.drop("_u").columns)], how="vertical_relaxed"
        ).with_row_index("_u")
    units = units.with_columns(
        observed_to=pl.when(pl.col("_failed") & pl.col("fail_time").is_not_null())
        .then("fail_time")
        .otherwise("_end"),
    )
    units = unit_covariates(units, hourly_covariates or gpu_hourly, connect)
    units = _rack(units, racks, nodes_per_rack)
    return conform("component_lifetimes", _lifetime_rows(units).sort("component_class", "unit_id"))


def _with_failures(units: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """Units numbered (``_u``) with the event that ended each failed one (``fail_time``,
    ``fail_cause``, ``_match_failures``)."""
    matches = _match_failures(units.with_row_index("_u"), events)
    return (
        units.with_row_index("_u")
        .join(matches, on="_u", how="left")
        .with_columns(
            # a telemetry-only unit counts as failed only when an event explains its replacement
            _failed=pl.col("_failed") & (~pl.col("_telemetry") | pl.col("fail_time").is_not_null()),
        )
    )


def _lifetime_rows(units: pl.DataFrame) -> pl.DataFrame:
    """The ``component_lifetimes`` columns of the units: ages in hours since installation, the
    event and its cause, the covariates and the place."""
    return units.with_columns(**cname_place(pl.col("host"))).select(
        "component_class",
        "unit_id",
        "host",
        "slot",
        "model",
        "rack",
        "observed_from",
        "observed_to",
        entry=_hours(pl.col("installed_at"), pl.col("observed_from")),
        duration=_hours(pl.col("installed_at"), pl.col("observed_to")),
        duration_low=pl.when(
            pl.col("_failed")
            & pl.col("fail_time").is_null()
            & pl.col("last_seen_hour").is_not_null()
        ).then(
            _hours(
                pl.col("installed_at"),
                pl.min_horizontal(pl.col("last_seen_hour") + HOUR, pl.col("observed_to")),
            )
        ),
        event="_failed",
        failure_cause=pl.when(pl.col("_failed")).then(
            pl.coalesce("fail_cause", "_reason", pl.lit("unknown"))
        ),
        population="population",
        temp_mean="temp_mean",
        temp_max="temp_max",
        power_mean="power_mean",
        util_mean="util_mean",
        cabinet_column="cabinet_column",
        cabinet_row="cabinet_row",
        cage="cage",
        blade="blade",
        node_position="node_position",
        batch="batch",
    )


_HOSTS_SQL = """
WITH h AS (
    SELECT unnest(nodes) AS host, NULL::INTEGER AS gpu FROM ({job_attempts})
    UNION ALL SELECT host, NULL FROM ({node_events})
    UNION ALL SELECT host, TRY_CAST(gpu AS INTEGER) FROM ({hw_events})
    UNION ALL SELECT host, gpu FROM ({gpu_daily})
)
SELECT host, greatest(coalesce(max(gpu) + 1, 0), {g})::BIGINT AS n_gpus
FROM h WHERE host IS NOT NULL GROUP BY host ORDER BY host
"""


def observed_hosts(wh, gpus_per_node: int = 8) -> pl.DataFrame:
    """Every host the scheduler, node events, hardware events or telemetry saw, with its GPU
    count: the highest GPU index seen + 1, at least ``gpus_per_node``."""
    views = {t: wh.view_sql(t) for t in ("job_attempts", "node_events", "hw_events", "gpu_daily")}
    with wh.connect() as con:
        return con.sql(_HOSTS_SQL.format(g=int(gpus_per_node), **views)).pl()


def refresh_component_lifetimes(
    wh,
    as_of: datetime | None = None,
    data_start: datetime | None = None,
    racks: pl.DataFrame | None = None,
    nodes_per_rack: int | None = None,
    gpus_per_node: int = 8,
) -> pl.DataFrame:
    """Infer and store the observation window (``data_start`` / ``as_of`` override its bounds),
    rebuild ``component_lifetimes`` over it and replace the table. Raises ``MissingInputs``
    when the data holds no dated record or no unit to follow."""
    refresh_gpu_hourly(wh)  # the compact daily tables read below are up to date
    window, _ = refresh_observation_window(wh, data_start, as_of)
    if window.observed_from is None:
        raise MissingInputs(
            "component_lifetimes: no dated records and no inventory (component_history)"
        )
    df = build_component_lifetimes(
        wh.read("component_history"),
        gpu_presence(wh),
        read_hw_evidence(wh),
        as_of=window.observed_to,
        data_start=window.observed_from,
        racks=racks,
        nodes_per_rack=nodes_per_rack,
        observed_hosts=observed_hosts(wh, gpus_per_node),
        hourly_covariates=covariate_sql(wh),
        connect=wh.connect_out_of_core,
    )
    wh.replace_table("component_lifetimes", df)
    if df.height == 0:
        raise MissingInputs(
            "component_lifetimes: no units to follow (no inventory, no GPU telemetry, no "
            "fatal/critical hardware event)"
        )
    return df
