"""Interruption causes: a Pareto of this fleet's unexpected interruptions by class beside the Llama
3 published mix."""

from __future__ import annotations

import altair as alt
import polars as pl

from analysis.taxonomy import LLAMA3_TABLE
from analysis.taxonomy import WORKLOAD_DOMAIN
from analysis.taxonomy import shown_cause
from dashboards import charts
from dashboards.section import NO_DATA
from dashboards.section import ReportContext
from dashboards.section import Section
from dashboards.section import html_table
from dashboards.section import pct

KEY = "causes"
TITLE = "Interruption causes, beside the Llama 3 published mix"
TABLES = ("interruptions",)


def cause_mix_frame(interruptions: pl.DataFrame) -> pl.DataFrame:
    """Unexpected (unplanned) interruptions by cause class: count, share, cumulative share."""
    df = interruptions.filter(~pl.col("planned").fill_null(False))
    mix = (
        df.group_by(pl.col("cause_class").fill_null("unknown"))
        .agg(pl.len().alias("count"), pl.col("lost_gpu_hours").sum().alias("lost_gpu_hours"))
        .sort(["count", "cause_class"], descending=[True, False])
    )
    total = mix["count"].sum()
    return mix.with_columns(
        (pl.col("count") / total).alias("share"),
        (pl.col("count").cum_sum() / total).alias("cum_share"),
    )


# What the comparison with Llama 3 leaves out on both sides, so that both shares have the same
# denominator: class software (Llama 3's software bugs, NCCL watchdog and dependency failures
# are its own code and stack; a fleet's are mostly the jobs' own failures).
NOT_COMPARED = ("software",)
COMPARED = "interruptions outside class software"


def llama3_frame() -> pl.DataFrame:
    """The Llama 3 reference mix per class of our taxonomy: count, and share of the compared
    interruptions (``COMPARED``; classes in ``NOT_COMPARED`` have a null share)."""
    raw = pl.DataFrame(
        {
            "published": [r[0] for r in LLAMA3_TABLE],
            "count": [r[1] for r in LLAMA3_TABLE],
            "cause_class": [r[2] for r in LLAMA3_TABLE],
        }
    )
    agg = raw.group_by("cause_class").agg(pl.col("count").sum(), pl.col("published").str.join(", "))
    return comparable_mix(agg).sort(["count", "cause_class"], descending=[True, False])


SOURCES = ["this fleet", "Llama 3 (published)"]


def comparable_mix(mix: pl.DataFrame) -> pl.DataFrame:
    """``mix`` (cause_class, count) with ``share`` = count over the compared interruptions
    (``COMPARED``): null for the classes in ``NOT_COMPARED``. Applied to this fleet and to
    Llama 3 alike, so the two shares of a class have the same denominator."""
    kept = ~pl.col("cause_class").is_in(NOT_COMPARED)
    total = pl.col("count").filter(kept).sum()
    return mix.with_columns(pl.when(kept).then(pl.col("count") / total).alias("share"))


def causes_chart(mix: pl.DataFrame, ref: pl.DataFrame) -> alt.HConcatChart:
    """Pareto of unexpected interruptions by class (``cause_mix_frame``, the jobs' own failures
    included), beside this fleet's mix vs Llama 3's (``llama3_frame``), both as shares of the
    compared interruptions (``COMPARED``: class software left out on both sides)."""
    # the Pareto colours classes, the comparison its two sources: two colour scales
    return alt.hconcat(pareto_chart(mix), comparison_chart(mix, ref), spacing=40).resolve_scale(
        color="independent"
    )


def pareto_chart(mix: pl.DataFrame) -> alt.LayerChart:
    """Interruptions per class, most first, with their cumulative share on a second axis."""
    order = mix["cause_class"].to_list()
    bars = (
        alt.Chart(mix)
        .mark_bar()
        .encode(
            x=alt.X("cause_class:N", sort=order, title="cause class"),
            color=alt.Color("cause_class:N", legend=None),  # charts.class_colors' palette
            y=alt.Y("count:Q", title="unexpected interruptions"),
            tooltip=[
                "cause_class:N",
                "count:Q",
                *charts.share_tips("share", "lost_gpu_hours", "lost GPU-hours"),
            ],
        )
    )
    line = (
        alt.Chart(mix)
        .mark_line(point=True, color="#e45756")
        .encode(
            x=alt.X("cause_class:N", sort=order),
            y=alt.Y(
                "cum_share:Q",
                title="cumulative share",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            tooltip=["cause_class:N", alt.Tooltip("cum_share:Q", format=".1%", title="cumulative")],
        )
    )
    return (
        alt.layer(bars, line)
        .resolve_scale(y="independent")
        .properties(
            width=charts.WIDTH // 2, height=charts.HEIGHT, title="This fleet: Pareto by class"
        )
    )


def compared_frame(mix: pl.DataFrame, ref: pl.DataFrame) -> pl.DataFrame:
    """This fleet's and Llama 3's (``source``) share of the compared interruptions per class
    (``comparable_mix``); the classes left out of the comparison are dropped."""
    return pl.concat(
        [
            comparable_mix(mix)
            .select("cause_class", "share", "count")
            .with_columns(pl.lit("this fleet").alias("source")),
            ref.select("cause_class", "share", "count").with_columns(
                pl.lit("Llama 3 (published)").alias("source")
            ),
        ],
        how="vertical_relaxed",
    ).filter(pl.col("share").is_not_null())


def comparison_chart(mix: pl.DataFrame, ref: pl.DataFrame) -> alt.Chart:
    """This fleet's share of each compared class beside Llama 3's, classes by their larger
    share."""
    both = compared_frame(mix, ref)
    classes = (
        both.group_by("cause_class")
        .agg(pl.col("share").max())
        .sort(["share", "cause_class"], descending=[True, False])
    )
    return (
        alt.Chart(both)
        .mark_bar()
        .encode(
            y=alt.Y("cause_class:N", sort=classes["cause_class"].to_list(), title=None),
            x=alt.X(
                "share:Q",
                title=f"share of {COMPARED} (both sides)",
                axis=alt.Axis(format="%"),
            ),
            yOffset=alt.YOffset("source:N", sort=SOURCES),
            color=alt.Color(
                "source:N",
                scale=alt.Scale(domain=SOURCES, range=["#4c78a8", "#bab0ac"]),
                legend=alt.Legend(orient="bottom", title=None),
            ),
            tooltip=["source:N", "cause_class:N", "count:Q", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(
            width=charts.WIDTH // 2 - 40,
            height=charts.HEIGHT,
            title="Share vs Llama 3, class software left out",
        )
    )


def build(ctx: ReportContext) -> Section:
    t = ctx.t
    s = Section(KEY, TITLE)
    intr = t["interruptions"].with_columns(shown_cause())
    mix = cause_mix_frame(intr)
    ref = llama3_frame()
    s.extra_html = (
        "<details><summary>How the Llama 3 categories map to our classes</summary>"
        + html_table(
            ["Llama 3 category", "interruptions", "our class"], [list(r) for r in LLAMA3_TABLE]
        )
        + "</details>"
    )
    if mix.height == 0:
        s.note = (
            NO_DATA
            if intr.height == 0
            else f"no unexpected interruptions ({intr.height:,} planned ones only)"
        )
        return s
    s.chart = causes_chart(mix, ref)
    total = mix["count"].sum()
    own = intr.filter(
        ~pl.col("planned").fill_null(False) & (pl.col("failure_domain") == WORKLOAD_DOMAIN)
    ).height
    s.reading = (
        f"Of the {total:,} unexpected interruptions, {own:,} were the jobs' own failures "
        f"(failure domain {WORKLOAD_DOMAIN}: exit codes, OOM; class software) and "
        f"{total - own:,} the fleet's."
    )
    # one denominator on both sides: software and the jobs' own failures left out
    compared = comparable_mix(mix).filter(pl.col("share").is_not_null())
    if compared.height:
        top = compared.row(0, named=True)
        ref_share = ref.filter(pl.col("cause_class") == top["cause_class"])["share"]
        llama = pct(ref_share[0], 0) if ref_share.len() else "0%"
        k = min(3, compared.height)
        s.reading += (
            f" Of the {compared['count'].sum():,} {COMPARED} (Llama 3: "
            f"{ref.filter(pl.col('share').is_not_null())['count'].sum():,} of "
            f"{ref['count'].sum():,}), {top['cause_class']} caused {pct(top['share'], 0)} (Llama "
            f"3: {llama})"
            + (
                f"; the top {k} classes account for {pct(compared['share'].head(k).sum(), 0)}."
                if k > 1
                else "."
            )
        )
    return s
