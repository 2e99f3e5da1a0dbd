"""``goodput mtbf`` and ``goodput availability``: system MTBF, availability, repair times and
root causes."""

from __future__ import annotations

from pipelines.cli.errors import CliError
from pipelines.cli.home import rebuilt_scope
from pipelines.cli.options import choice
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.output import cell_text
from pipelines.cli.output import output_format
from pipelines.cli.output import print_data
from pipelines.cli.output import print_frame
from pipelines.cli.output import print_rows
from pipelines.cli.output import print_scope


def cmd_mtbf(args) -> int:
    import polars as pl

    wh = rebuilt_scope(args, "mtbf")
    df = wh.read("system_mtbf")
    if df.height == 0:
        raise CliError(
            "system_mtbf is empty: ingest failure records (or a fleet's logs) and run `goodput "
            "build`"
        )
    df = df.filter((pl.col("period") == args.period) & (pl.col("grouping") == args.by))
    for col, want in (("system", args.system), ("source", args.source)):
        if want is not None:
            known = sorted(set(df[col].drop_nulls()))
            if want not in known:
                raise CliError(
                    f"no {col} {want!r} in system_mtbf (known: {', '.join(known) or 'none'})"
                )
            df = df.filter(pl.col(col) == want)
    df = df.sort("source", "system", "class", "period_start", nulls_last=False)
    if output_format(args) != "table":
        print_frame(df, output_format(args), meta={"period": args.period, "by": args.by}, wh=wh)
        return 0
    print_scope(wh)
    head = (
        "source",
        "system",
        args.period,
        "class",
        "failures",
        "exposure_h",
        "mtbf_h",
        "ci_low",
        "ci_high",
        "partial",
    )
    rows = [head] + [
        (
            r["source"],
            r["system"],
            r["label"],
            r["class"] or "all",
            str(r["failures"]),
            f"{r['exposure_hours']:,.0f}",
            cell_text(r["mtbf_hours"]),
            cell_text(r["mtbf_ci_low"]),
            cell_text(r["mtbf_ci_high"]),
            "partial" if r["partial"] else "",
        )
        for r in df.iter_rows(named=True)
    ]
    print_rows(rows)
    print("MTBF = exposure / failures (simultaneous events once); 95% CI exact Poisson")
    return 0


ROOT_CAUSES_SHOWN = 8


def cmd_availability(args) -> int:
    import polars as pl

    if args.top < 1:
        raise CliError("--top must be >= 1")
    wh = rebuilt_scope(args, "availability")
    rows, fits, causes = _availability_tables(wh, args)
    best = fits.filter(pl.col("selected"))
    value = {
        "availability": rows.to_dicts(),
        "repair_fits": best.to_dicts(),
        "root_causes": causes.to_dicts(),
    }
    if print_data(output_format(args), value, rows, wh):
        return 0
    print_rows([_AVAILABILITY_HEAD, *map(_availability_row, rows.iter_rows(named=True))])
    print(
        "95% CIs: MTBF and rates exact Poisson, MTTR / availability bootstrap; availability only "
        "where every repair is known or still open"
    )
    still = int(rows["repairs_open"].fill_null(0).sum())
    if still:
        print(
            f"{still} repair(s) still open at the end of the window: down until then, "
            "right-censored in MTTR and the repair-time fits"
        )
    for q, word in (("repair", "repair time"), ("tbf", "time between failures")):
        won = best.filter(pl.col("quantity") == q)["model"].value_counts(sort=True)
        if won.height:
            print(
                f"{word}: best by AIC "
                + ", ".join(f"{m} in {n}" for m, n in won.rows())
                + f" of {best.filter(pl.col('quantity') == q).height} system(s)"
            )
    if causes.height:
        print(_root_causes_line(causes))
    return 0


def _availability_tables(wh, args):
    """The availability rows asked for (per system, or the ``--top`` nodes), with the repair
    fits and root causes of the same system(s)."""
    import polars as pl

    avail = wh.read("availability")
    if avail.height == 0:
        raise CliError(
            "availability is empty: ingest failure records (or node events) and run `goodput build`"
        )
    fits, causes = wh.read("repair_fits"), wh.read("root_causes")
    if args.system is not None:
        known = sorted(set(avail["system"].drop_nulls()))
        if args.system not in known:
            raise CliError(f"no system {args.system!r} in availability (known: {', '.join(known)})")
        avail, fits = (df.filter(pl.col("system") == args.system) for df in (avail, fits))
        causes = causes.filter(pl.col("system") == args.system)
    else:
        causes = causes.filter(pl.col("system").is_null())
    if args.level == "node":
        rows = (
            avail.filter(pl.col("level") == "node").sort("failures", descending=True).head(args.top)
        )
    else:
        rows = avail.filter(pl.col("level") == "system")
    return rows, fits, causes


_AVAILABILITY_HEAD = (
    "source",
    "system",
    "host",
    "nodes",
    "failures",
    "open",
    "mtbf_h",
    "mttr_h",
    "availability",
    "nines",
    "per_node_year",
    "tbf_shape",
)


def _availability_row(r: dict) -> tuple[str, ...]:
    def ci(c: str, prefix: str | None = None) -> str:
        return (
            f"{cell_text(r[c])} [{cell_text(r[(prefix or c) + '_ci_low'])}, "
            f"{cell_text(r[(prefix or c) + '_ci_high'])}]"
        )

    return (
        r["source"],
        r["system"],
        r["host"] or "",
        str(r["nodes"]),
        str(r["failures"]),
        str(r["repairs_open"]),
        ci("mtbf_hours", "mtbf"),
        ci("mttr_hours", "mttr"),
        cell_text(r["availability"], ".5f"),
        ci("nines"),
        ci("failures_per_node_year"),
        ci("tbf_shape") if r["tbf_shape"] is not None else "-",
    )


def _root_causes_line(causes) -> str:
    """The first ``ROOT_CAUSES_SHOWN`` root causes, with their shares of failures and downtime."""
    shown = causes.head(ROOT_CAUSES_SHOWN)
    more = (
        f'; {causes.height - shown.height} more (goodput sql "select * from root_causes")'
        if causes.height > shown.height
        else ""
    )
    return (
        "root causes (share of failures / of downtime): "
        + ", ".join(
            f"{r['cause'] or 'not recorded'} {100 * r['share']:.1f}% / "
            f"{100 * (r['downtime_share'] or 0):.1f}%"
            for r in shown.iter_rows(named=True)
        )
        + more
    )


def add_mtbf(sub) -> None:
    command(
        sub,
        cmd_mtbf,
        choice("--period", ("quarter", "month"), "quarter", "calendar period"),
        option(
            "--by",
            choices=["all", "cause", "component_class"],
            default="all",
            help="whole system (default), or per root cause / component class",
        ),
        option("--system", help="one system (cluster)"),
        option(
            "--source",
            choices=["failures", "interruptions", "node_failures"],
            help="one series: failure records, job interruptions or node failure episodes",
        ),
        formats=True,
        scope=True,
        examples=("goodput mtbf --period month --by cause",),
        help="system MTBF per month or quarter (95%% CI), overall or per class",
    )


def add_availability(sub) -> None:
    command(
        sub,
        cmd_availability,
        option("--system", help="one system (cluster): its root causes instead of every system's"),
        choice("--level", ("system", "node"), "system", "rows per system or per node"),
        option(
            "--top",
            type=int,
            default=20,
            help="nodes listed with --level node, most failures first (default %(default)s)",
        ),
        formats=True,
        scope=True,
        examples=("goodput availability --level node --top 10",),
        help="availability, MTBF, MTTR, repair-time fits and root causes per system or node",
    )
