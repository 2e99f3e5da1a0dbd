"""Opening the warehouse a command works on: the whole fleet's, or a scope's, with the resource
settings of its flags; and removing a home that a failed command created."""

from __future__ import annotations

import os
from datetime import UTC
from datetime import datetime
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
    """The warehouse a reading command reads: the whole fleet's, opened as a reader (a read-only
    home works), or its scope's (built or reused by a writer)."""
    scope = scope_settings(args)
    wh = open_warehouse(args, existing=True, read_only=not any(scope.values()))
    return scoped(wh, resource_config(args, **scope)) if any(scope.values()) else wh


def scope_asked(args) -> bool:
    """Whether the command was given a scope (a cluster, partition, account or period)."""
    return any(scope_settings(args).values())


def scope_settings(args) -> dict[str, str]:
    """The scope flags as ``GoodputConfig`` fields (empty: not given); checks from < to."""
    from analysis.scope import Scope
    from analysis.scope import ScopeError

    start, end = (
        parse_time(getattr(args, "scope_from", None)),
        parse_time(getattr(args, "scope_to", None)),
    )
    try:
        Scope(start, end)
    except ScopeError as exc:
        raise CliError(str(exc)) from None
    out = {
        "scope_from": start.isoformat() if start else "",
        "scope_to": end.isoformat() if end else "",
    }
    for key in ("cluster", "partition", "account"):
        out[f"scope_{key}"] = getattr(args, f"scope_{key}", None) or ""
    return out


def scoped(wh, config):
    """The warehouse a command reads: ``wh`` itself, or the scope's (built or reused)."""
    from analysis.scope import ScopeError
    from pipelines.run import PipelineError
    from pipelines.run import build_scope

    if config.scope().whole:
        return wh
    try:
        with wh.writer():
            return build_scope(config)
    except (ScopeError, PipelineError) as exc:
        raise CliError(str(exc)) from None


def resource_config(args, **extra):
    from pipelines.resources import GoodputConfig

    wh = open_warehouse(args)
    return GoodputConfig(home=str(wh.home), warehouse_uri=wh.parquet, **extra)


def window_config(args, **extra):
    """The resource with the build / fit flags (observation window, as-of)."""
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
    return resource_config(
        args,
        observed_from=observed_from.isoformat() if observed_from else "",
        observed_to=observed_to.isoformat() if observed_to else "",
        gpus_per_node=args.gpus_per_node,
        **extra,
    )


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
