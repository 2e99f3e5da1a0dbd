"""``goodput fit``: the fitted failure rates per component class."""

from __future__ import annotations

import re

from pipelines.cli.errors import CliError
from pipelines.cli.home import open_warehouse
from pipelines.cli.home import rebuilt_scope
from pipelines.cli.home import scope_settings
from pipelines.cli.home import window_config
from pipelines.cli.home import window_fields
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.output import output_format
from pipelines.cli.output import print_frame
from pipelines.cli.output import print_scope

_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def cmd_fit(args) -> int:
    import textwrap

    import polars as pl

    from analysis.headline import unit_populations
    from analysis.observation import stored_window
    from pipelines.cli.fit_table import format_fit_table
    from pipelines.cli.fit_table import table_width

    if args.window != "all" and not _MONTH.fullmatch(args.window):
        raise CliError(f"--window {args.window!r}: use 'all' or a month YYYY-MM, e.g. 2026-01")
    scope = scope_settings(args)
    refits = any(scope.values()) or args.observed_from or args.observed_to
    wh = open_warehouse(args, existing=True, read_only=not refits)
    if any(scope.values()):  # the scope's fits (with its window, if given)
        wh = rebuilt_scope(args, "fits", **window_fields(args))
        with wh.connect() as con:
            units = con.execute(
                f"SELECT count(*) FROM ({wh.view_sql('component_lifetimes')})"
            ).fetchall()[0][0]
        wh.note = f"refit on the scope's {units:,} units, cached in {wh.home}"
    elif args.observed_from or args.observed_to:  # a new window: refit over it
        from pipelines.run import PipelineError
        from pipelines.run import refit

        try:
            refit(window_config(args))
        except PipelineError as exc:
            raise CliError(str(exc)) from None
        finally:
            wh.refresh_catalog()
    fr = wh.read("failure_rates")
    if fr.height == 0:
        raise CliError(
            "failure_rates is empty: run `goodput build` (or `goodput demo`) to fit the lifetimes "
            "first"
        )
    fitted = sorted(set(fr["window"].drop_nulls().to_list()))
    if args.window not in fitted:
        raise CliError(f"no fits for --window {args.window}; fitted: {', '.join(fitted)}")
    window = stored_window(wh)
    if output_format(args) != "table":
        rows = fr.filter(pl.col("window") == args.window)
        print_frame(
            rows if args.all_models else rows.filter(pl.col("selected")),
            output_format(args),
            meta={"window": args.window},
            wh=wh,
        )
        return 0
    print_scope(wh)
    if window is not None:
        print(window.line())
    for pop, classes in unit_populations(fr):
        line = f"units from {pop or 'unknown'}: {classes}"
        print("\n".join(textwrap.wrap(line, table_width(), subsequent_indent="  ")))
    print(format_fit_table(fr, all_models=args.all_models, window=args.window))
    return 0


def add_fit(sub) -> None:
    command(
        sub,
        cmd_fit,
        option(
            "--all-models",
            action="store_true",
            help="every candidate model, not only the AIC winner",
        ),
        option("--window", default="all", help="'all' (default) or a month YYYY-MM"),
        window=True,
        formats=True,
        scope=True,
        examples=("goodput fit", "goodput fit --all-models --window 2026-01"),
        help="print the fitted failure rates per component class (refit over a window given)",
    )
