"""Every slicing of the fleet adds up to the fleet: interruption causes in one vocabulary, the
goodput breakdown's and the trend's periods summing to the whole."""

from __future__ import annotations

import polars as pl

from analysis.checks._utils import REL
from analysis.checks._utils import violations
from analysis.headline import fleet_headline
from analysis.numbers import num
from analysis.taxonomy import CLASSES
from analysis.trend import PERIODS
from analysis.trend import data_window
from analysis.trend import window_figures
from warehouse.checks import invariant
from warehouse.checks import query_tables
from warehouse.store import Warehouse


@invariant("Every interruption's cause is a class of the one taxonomy.")
def cause_taxonomy(wh: Warehouse) -> tuple[bool, dict]:
    """Every interruption's ``cause_class`` is one of ``analysis.taxonomy.CLASSES`` (the
    classes of docs/design.md); a missing class is a violation too (unknown is a class)."""
    known = ", ".join(f"'{c}'" for c in CLASSES)
    rows = query_tables(
        wh,
        f"""
        SELECT coalesce(cause_class, '(null)') AS cause, count(*) AS n FROM interruptions
        WHERE cause_class IS NULL OR cause_class NOT IN ({known})
        GROUP BY 1 ORDER BY 2 DESC, 1""",
        "interruptions",
    )
    return violations(rows, lambda r: f"{r['cause']!r} on {r['n']:,} interruption(s)")


@invariant("Every slice of the fleet adds up to the fleet (per cluster, partition, account).")
def breakdown_sums(wh: Warehouse) -> tuple[bool, dict]:
    """Per dimension of ``goodput_breakdown`` (cluster, partition, account), the slices' sums
    of attempts, GPU-hours, unexpected interruptions and their lost GPU-hours equal the fleet
    headline's (``analysis.headline.fleet_headline``), to ``REL``."""
    head = fleet_headline(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs")
    )
    total = {
        "attempts": head["attempts"],
        "gpu_hours": head["gpu_hours"],
        "interruptions": head["unexpected"],
        "infrastructure": head["infrastructure"],
        "lost_gpu_hours": head["lost_gpu_hours"],
    }
    sums = (
        wh.read("goodput_breakdown")
        .group_by("dimension")
        .agg(pl.col(*total).fill_null(0).sum())
        .sort("dimension")
    )
    return violations(
        _disagree(sums, "dimension", total),
        lambda r: (
            f"{r['dimension']}: {r['figure']} sums to {num(r['sum'])}, the fleet has "
            f"{num(r['total'])}"
        ),
        dimensions=sums.height,
    )


@invariant("The periods of the trend add up to the whole span (weeks and months).")
def trend_sums(wh: Warehouse) -> tuple[bool, dict]:
    """Per period kind of ``goodput_trend`` (week, month), the periods' sums of GPU-hours,
    unexpected interruptions and lost GPU-hours equal the same figures over the span they cover
    (``analysis.trend.window_figures``), to ``REL``."""
    att = wh.read("job_attempts")
    span = data_window(att)
    sums = (
        wh.read("goodput_trend")
        .group_by("period")
        .agg(pl.col("gpu_hours", "interruptions", "lost_gpu_hours").fill_null(0).sum())
        .sort("period")
    )
    if span is None or sums.height == 0:
        return violations(sums.clear(), str, periods=0)
    f = window_figures(att, wh.read("interruptions"), wh.read("goodput_jobs"), *span)
    total = {
        "gpu_hours": f["gpu_hours"],
        "interruptions": f["unexpected"],
        "lost_gpu_hours": f["lost_gpu_hours"],
    }
    missing = sorted(set(PERIODS) - set(sums["period"]))
    rows = _disagree(sums, "period", total)
    return violations(
        rows,
        lambda r: (
            f"{r['period']}s: {r['figure']} sums to {num(r['sum'])}, the span has {num(r['total'])}"
        ),
        periods=sums.height,
        missing_periods=", ".join(missing),
    )


def _disagree(sums: pl.DataFrame, by: str, total: dict) -> pl.DataFrame:
    """The (``by``, figure) rows of ``sums`` whose sum differs from ``total[figure]``."""
    rows = [
        {by: r[by], "figure": k, "sum": float(r[k]), "total": float(v or 0)}
        for r in sums.iter_rows(named=True)
        for k, v in total.items()
        if abs(r[k] - (v or 0)) > REL * max(abs(v or 0), 1.0)
    ]
    schema = {by: pl.Utf8, "figure": pl.Utf8, "sum": pl.Float64, "total": pl.Float64}
    return pl.DataFrame(rows, schema=schema)
