"""Opening the warehouse a command works on: the whole fleet's, or a scope's, with the resource
settings of its flags; and removing a home that a failed command created."""

from __future__ import annotations

import os
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from pathlib import Path

from pipelines.cli.errors import CliError
from pipelines.cli.values import parse_duration
from pipelines.cli.values import parse_time


def open_warehouse(args, existing: bool = False, read_only: bool = False):
    """The warehouse of --home. ``existing``: for commands that only read it, a home that does not
    exist (a typo) is an error instead of a new, empty warehouse. ``read_only``: a reader's
    handle (works on a read-only home, never takes the writer lock)."""
    from warehouse.store import Warehouse
    from warehouse.store import resolve_home

    if existing and not has_warehouse(args):
        raise CliError(
            f"no warehouse at {resolve_home(args.home)}; check --home / $GOODPUT_HOME, or create "
            "one with `goodput ingest PATH...` or `goodput demo`"
        )
    wait = getattr(args, "wait", None)
    return Warehouse(
        args.home,
        args.warehouse_uri,
        wait=True if wait is None else parse_duration(wait),
        read_only=read_only,
    )


def has_warehouse(args) -> bool:
    """Whether the command's home holds a warehouse (a Parquet root elsewhere: taken as so)."""
    from warehouse.store import resolve_home

    if args.warehouse_uri or os.environ.get("GOODPUT_WAREHOUSE_URI"):
        return True
    home = resolve_home(args.home)
    return home.is_dir() and any(home.iterdir())


def reading_warehouse(args):
    """The warehouse a reading command reads, opened as a reader (a read-only home works): the
    whole fleet's, or with scope flags the whole fleet's tables filtered to the scope
    (``analysis.scope.filtered``). Answering never rebuilds anything."""
    from analysis.scope import filtered

    wh = open_warehouse(args, existing=True, read_only=True)
    scope = checked_scope(wh, args)
    return wh if scope.whole else filtered(wh, scope)


def scope_asked(args) -> bool:
    """Whether the command was given a scope (a cluster, partition, account, user or period)."""
    return not args_scope(args).whole


def checked_scope(wh, args):
    """The scope of the flags, checked against the data of ``wh`` (one line when it cannot
    answer: an unknown cluster, an empty slice)."""
    from analysis.scope import ScopeError
    from analysis.scope import check_scope

    scope = args_scope(args)
    if not scope.whole:
        try:
            check_scope(wh, scope)
        except ScopeError as exc:
            raise CliError(str(exc)) from None
    return scope


def args_scope(args):
    """The ``analysis.scope.Scope`` of the scope flags (whole fleet when none is given); a
    relative period (``--last``) is resolved against now."""
    from analysis.scope import DIMENSIONS
    from analysis.scope import Scope
    from analysis.scope import ScopeError

    start = parse_time(getattr(args, "scope_from", None))
    end = parse_time(getattr(args, "scope_to", None))
    last = getattr(args, "scope_last", None)
    if last is not None:
        if start is not None or end is not None:
            raise CliError("give --last or --from/--to, not both")
        start, end = last_period(last, datetime.now(UTC).replace(tzinfo=None))
        # resolved once: every later reading of the flags sees the same [from, to)
        args.scope_from, args.scope_to, args.scope_last = start.isoformat(), end.isoformat(), None
    try:
        return Scope(start, end, *(getattr(args, f"scope_{k}", None) or None for k in DIMENSIONS))
    except ScopeError as exc:
        raise CliError(str(exc)) from None


CALENDAR = ("day", "week", "month", "quarter", "year")


def last_period(text: str, now: datetime) -> tuple[datetime, datetime]:
    """``--last``: a duration back from ``now`` (``30d``: [now - 30 days, now)), or the last
    complete calendar day, week (Monday first), month, quarter or year before ``now``."""
    import polars as pl

    if text in CALENDAR:
        every = {"day": "1d", "week": "1w", "month": "1mo", "quarter": "1q", "year": "1y"}[text]
        end = pl.Series([now]).dt.truncate(every)[0]
        start = pl.Series([end]).dt.offset_by(f"-{every}")[0]
        return start, end
    try:
        seconds = parse_duration(text)
    except CliError:
        raise CliError(
            f"--last {text!r}: a duration (30d, 12h) or one of {', '.join(CALENDAR)}"
        ) from None
    if seconds <= 0:
        raise CliError("--last must be a positive duration")
    return now - timedelta(seconds=seconds), now


def scope_settings(args) -> dict[str, str]:
    """The scope flags as ``Settings`` fields (empty: not given)."""
    from analysis.scope import DIMENSIONS

    scope = args_scope(args)
    out = {
        "scope_from": scope.start.isoformat() if scope.start else "",
        "scope_to": scope.end.isoformat() if scope.end else "",
    }
    for key in DIMENSIONS:
        out[f"scope_{key}"] = getattr(scope, key) or ""
    return out


def rebuilt_scope(args, needs: str, **fields):
    """The warehouse of the scope of the flags with its ``needs`` (``analysis.scope.SCOPE_NEEDS``)
    recomputed from the whole fleet's rows filtered to it, or reused from
    ``HOME/scopes/<slug>/`` while the data and the settings (``fields``: ``Settings``
    fields the command sets) are unchanged; its ``note`` says so. Reuse is checked without
    loading Dagster. Without a scope: the whole fleet's warehouse, as a reader."""
    from analysis.scope import SCOPE_NEEDS
    from analysis.scope import SCOPE_SETTINGS
    from analysis.scope import fresh_tables
    from analysis.scope import scope_warehouse

    fleet = open_warehouse(args, existing=True, read_only=True)
    scope = checked_scope(fleet, args)
    if scope.whole:
        return fleet
    scoped = scope_warehouse(fleet, scope)
    settings = {k: fields.get(k, default) for k, default in SCOPE_SETTINGS.items()}
    if not set(SCOPE_NEEDS[needs]) <= fresh_tables(fleet, scoped, settings):
        from pipelines.run import PipelineError
        from pipelines.run import build_scope

        config = resource_config(args, **fields, **scope_settings(args))
        try:
            with config.warehouse().writer():
                build_scope(config, needs)
        except PipelineError as exc:
            raise CliError(str(exc)) from None
    scoped.note = f"{RECOMPUTED_WHAT[needs]} on the scope's rows, cached in {scoped.home}"
    return scoped


RECOMPUTED_WHAT = {
    "fits": "refit",
    "mtbf": "system MTBF recomputed",
    "availability": "availability recomputed",
    "nodes": "node health and fits recomputed",
    "all": "analyses recomputed",
}


def resource_config(args, **extra):
    from pipelines.resources import Settings

    wh = open_warehouse(args)
    return Settings(home=str(wh.home), warehouse_uri=wh.parquet, **extra)


def window_config(args, **extra):
    """The resource with the build / fit flags (observation window, as-of)."""
    return resource_config(args, **window_fields(args), **extra)


def window_fields(args) -> dict:
    """The build / fit flags (observation window, GPUs per node) as ``Settings`` fields,
    checked."""
    from analysis.observation import check_bound

    observed_from, observed_to = parse_time(args.observed_from), parse_time(args.observed_to)
    now = datetime.now(UTC).replace(tzinfo=None)
    try:
        check_bound("--observed-from", observed_from, now)
        check_bound("--observed-to", observed_to, now)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.gpus_per_node < 1:
        raise CliError("--gpus-per-node must be >= 1")
    if observed_from and observed_to and observed_to <= observed_from:
        raise CliError(
            f"--observed-to ({observed_to}) must be after --observed-from ({observed_from})"
        )
    return {
        "observed_from": observed_from.isoformat() if observed_from else "",
        "observed_to": observed_to.isoformat() if observed_to else "",
        "gpus_per_node": args.gpus_per_node,
    }


def fresh_dirs(args) -> list[Path]:
    """The local home and Parquet root of the command that do not exist yet."""
    from warehouse.store import resolve_home
    from warehouse.store import resolve_parquet_uri

    try:
        home = resolve_home(getattr(args, "home", None))
        root = resolve_parquet_uri(getattr(args, "warehouse_uri", None), home)
    except Exception:  # noqa: BLE001 - a bad URI: the command itself says so
        return []
    dirs = [home] + (
        [Path(root)] if "://" not in root and not Path(root).is_relative_to(home) else []
    )
    return [d for d in dirs if not d.exists()]


def remove_fresh(args, fresh: list[Path]) -> None:
    """Remove the directories a failed command created, when no record was stored in them (the
    manifest, pull log and quarantine rows of a command that stored nothing go with them):
    under the writer lock, so another process writing there meanwhile keeps them."""
    import shutil

    from warehouse.store import Warehouse
    from warehouse.store import WarehouseError

    if not any(d.is_dir() for d in fresh):
        return
    try:
        wh = Warehouse(
            getattr(args, "home", None), getattr(args, "warehouse_uri", None), wait=False
        )
        with wh.writer(wait=False):
            if holds_data(wh):
                return
            for d in fresh:
                shutil.rmtree(d, ignore_errors=True)
    except (WarehouseError, OSError):
        pass


BOOKKEEPING = ("ingest_manifest", "pull_log", "quarantine")


def _stored(wh) -> set[str]:
    """The ingest tables of ``wh`` that have rows (Parquet files): written by ingest, pull or a
    batch of the Python API alike."""
    from warehouse.schemas import TABLES

    return {name for name, spec in TABLES.items() if spec.kind == "ingest" and wh.files(name)}


def holds_data(wh) -> bool:
    """Whether ``wh`` holds records to build from (not only manifest, pull and quarantine rows)."""
    return bool(_stored(wh) - set(BOOKKEEPING))
