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

The units come from ``analysis.lifetime_units`` (inventory, telemetry, observed units), the
failure that ends each from ``analysis.lifetime_failures``; this module sets the window, joins
them and writes the rows.
"""

from __future__ import annotations

from datetime import datetime
from datetime import timedelta

import duckdb
import polars as pl

from analysis.gpu_identity import fill_gpu_index
from analysis.hw_evidence import read_hw_evidence
from analysis.lifetime_covariates import CovariateSQL
from analysis.lifetime_covariates import covariate_sql
from analysis.lifetime_covariates import unit_covariates
from analysis.lifetime_failures import failure_events
from analysis.lifetime_failures import with_failures
from analysis.lifetime_units import history_units
from analysis.lifetime_units import observed_unit_rows
from analysis.lifetime_units import observed_units
from analysis.lifetime_units import telemetry_units
from analysis.observation import refresh_observation_window
from analysis.status import MissingInputs
from analysis.telemetry.replacements import REPLACEMENT_SOURCE
from analysis.telemetry.rollups import gpu_presence
from analysis.telemetry.rollups import refresh_gpu_hourly
from warehouse.schemas import conform

HOUR = timedelta(hours=1)


def _hours(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return (b - a).dt.total_microseconds() / 3.6e9


def data_span(
    component_history: pl.DataFrame, gpu_hourly: pl.DataFrame, hw_events: pl.DataFrame
) -> tuple[datetime | None, datetime | None]:
    """The data's own (first, last) time, the defaults of (``data_start``, ``as_of``) described
    in the module docstring; None where the data has no time."""
    # telemetry is continuous; BMC logs keep entries from before collection started
    firsts = (
        gpu_hourly["hour"].min(),
        hw_events["time"].min(),
        component_history["installed_at"].min(),
    )
    first = next((f for f in firsts if f is not None), None)
    last_hour = gpu_hourly["hour"].max()
    lasts = [
        hw_events["time"].max(),
        last_hour + HOUR if last_hour is not None else None,
        component_history["installed_at"].max(),
        component_history["removed_at"].max(),
    ]
    return first, max((t for t in lasts if t is not None), default=None)


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
    first, last = data_span(component_history, gpu_hourly, hw_events)
    data_start = first if data_start is None else data_start
    as_of = (last or data_start) if as_of is None else as_of
    if data_start is None or as_of is None:
        raise ValueError("no times in the data: pass data_start and as_of")
    hist = history_units(component_history, data_start, as_of).with_columns(
        _telemetry=pl.lit(False), population=pl.lit("inventory")
    )
    tele = telemetry_units(gpu_hourly, hist, data_start, as_of).with_columns(
        population=pl.lit("telemetry")
    )
    tele = tele.with_columns(batch=pl.lit(None, pl.Utf8))
    units = pl.concat([hist, tele.select(hist.columns)], how="vertical_relaxed")
    events = failure_events(fill_gpu_index(hw_events, gpu_hourly))
    units = with_failures(units, events)
    has_inventory = (component_history["source"].fill_null("") != REPLACEMENT_SOURCE).any()
    if observed_hosts is not None and not has_inventory:
        seen = observed_units(
            observed_hosts, events, {"gpu"} if tele.height else set(), data_start, as_of
        )
        obs = observed_unit_rows(seen)
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
