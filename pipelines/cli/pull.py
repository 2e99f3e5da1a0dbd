"""``goodput pull``: the live sources of HOME/sources.toml into the warehouse."""

from __future__ import annotations

import sys

from pipelines.cli.errors import CliError
from pipelines.cli.home import open_warehouse
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.values import parse_time


def cmd_pull(args) -> int:
    """Pull live sources. Exit 0 when every window was pulled, 1 when some source (or one of its
    targets) failed: what the others gave is stored, and the next pull catches up."""
    from pipelines.resources import select_sources
    from sources.pull import cursors
    from sources.pull import plan
    from sources.pull import pull

    since, until = parse_time(args.since), parse_time(args.until)
    if since and until and since >= until:
        raise CliError(f"--since {args.since} is not before --until {args.until}")
    wh = open_warehouse(args, existing=args.dry_run, read_only=args.dry_run)  # a dry run only reads
    sources = select_sources(wh, args.sources)
    if not sources:
        raise CliError(
            f"no sources configured: write {wh.home / 'sources.toml'} (see docs/connect.md)"
        )
    if args.dry_run:
        got = cursors(wh)
        for src in sources:
            t, pulled = got.get(src.name, (None, False))
            state = (
                f"pulled to {t.isoformat()}"
                if pulled
                else f"failed from {t.isoformat()}"
                if t
                else "never pulled"
            )
            print(f"{src.name} ({src.kind}, cluster {src.cluster}): {state}")
        for src, window, lines in plan(wh, sources, since, until):
            print(f"  {src.name} {window}:")
            for line in lines:
                print(f"    {line}")
        return 0
    from pipelines.run import recorded_pull

    with wh.writer():
        reports = recorded_pull(wh, lambda: pull(wh, sources, since, until))
        wh.refresh_catalog()
    for src in sources:
        mine = [r for r in reports if r.source == src.name]
        ok = [r for r in mine if r.status == "ok"]
        if not ok and mine:
            print(
                f"{src.name}: failed at {mine[-1].window.start:%Y-%m-%d %H:%M}; the next pull "
                "starts there again"
            )
            continue
        span = (
            f"{ok[0].window.start:%Y-%m-%d %H:%M}..{ok[-1].window.end:%Y-%m-%d %H:%M}"
            if ok
            else "nothing"
        )
        print(
            f"{src.name}: pulled {span} ({len(ok)} window(s)): {sum(r.rows_ok for r in ok):,} "
            f"rows, {sum(r.rows_quarantined for r in ok):,} quarantined, "
            f"{sum(r.rows_duplicate for r in ok):,} already stored"
        )
    from pipelines.cli.intake import cluster_warnings

    for src in sources:
        mine = [r for r in reports if r.source == src.name]
        if any(r.rows_ok for r in mine):
            for line in cluster_warnings(wh, [], source=src.name):
                print(line, file=sys.stderr)
        if held := sum(r.held_back for r in mine):
            print(f"warning: {src.name}: the last {held:,} byte(s) of its output are a line "
                  "without its newline yet: not read; a later pull reads the line once it is "
                  "complete", file=sys.stderr)  # fmt: skip
    failed = [r for r in reports if r.status == "failed"]
    for r in failed:
        where = f"{r.source}/{r.target}" if r.target else r.source
        print(f"warning: {where} {r.window}: {r.error}", file=sys.stderr)
    print(f"warehouse: {wh.db_path}")
    return 1 if failed else 0


def add_pull(sub) -> None:
    command(
        sub,
        cmd_pull,
        option(
            "sources",
            nargs="*",
            metavar="SOURCE",
            help="source names in sources.toml (default: every source)",
        ),
        option(
            "--since",
            metavar="ISO",
            help="pull from here instead of each source's cursor (a backfill)",
        ),
        option("--until", metavar="ISO", help="pull up to here (default: now)"),
        option(
            "--dry-run",
            action="store_true",
            help="print the commands and queries it would run, and run none",
        ),
        examples=("goodput pull --dry-run", "goodput pull slurmdbd --since 2026-01-01"),
        help="pull live sources (slurmdbd, Prometheus, Redfish BMCs) from HOME/sources.toml",
        description=(
            "Pull every source of HOME/sources.toml (or the ones named) from its cursor "
            "to now. Exit status 1 when a source failed: the others are stored, the next "
            "pull catches up."
        ),
    )
