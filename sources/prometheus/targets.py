"""What the Prometheus source pulls of a chunk: host groups that keep each query within
``query_bytes``, the density probe that sends sparse groups raw, and the series-hours whose raw
samples the rollups need (counters' changes, unusable rollups)."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote_plus

import polars as pl

from ingest.tsdb import ROLLUP_LABEL
from sources.base import SourceConfig
from sources.base import Window
from sources.prometheus.client import decoded
from sources.prometheus.client import post
from sources.prometheus.hours import MS
from sources.prometheus.hours import epoch
from sources.prometheus.queries import any_of
from sources.prometheus.queries import density_query
from sources.prometheus.queries import range_ms
from sources.prometheus.queries import rollup_query
from warehouse.schemas import XID_COUNT_METRIC

NEAR = timedelta(minutes=1)  # where a series scraped every few seconds has its sample before
ZOOM = timedelta(minutes=5)  # the windows a counter's changed hour is searched in
PROBE = timedelta(hours=6)  # the windows a host group's samples per series-hour are counted in
DENSITY_SPAN = timedelta(days=1)  # the least span before a chunk's end they are counted over
FEW = 16  # samples of the span before a changed hour read whole rather than searched


def host_groups(src: SourceConfig, hosts: list[str]) -> tuple[list[str], list[str]]:
    """Matchers of ``hosts`` in groups of at most ``hosts_per_query`` and in at least
    ``concurrency`` groups (of about equal size) where there are that many hosts, so the TSDB
    answers on as many cores; a group whose longest query (its rollups, form-encoded) would pass
    ``query_bytes`` is halved until it fits (servers refuse long forms: Prometheus and Thanos at
    10 MB, VictoriaMetrics at ``-search.maxQueryLen``). And the hosts whose name alone passes it."""
    limit = int(src.options["query_bytes"])
    probe = "\0"  # where the group's matcher goes: the query's length without it, and how often
    query = rollup_query(src, probe, range_ms(timedelta(hours=1), True))
    fixed, copies = len(quote_plus(query.replace(probe, ""))) + 100, query.count(probe)
    label = src.options["host_label"]

    def fits(part: list[str]) -> bool:
        return fixed + copies * len(quote_plus(any_of(label, part))) <= limit

    too_long = [h for h in hosts if not fits([h])]
    hosts = [h for h in hosts if h not in set(too_long)]
    size = max(int(src.options["hosts_per_query"]), 1)
    n = max(-(-len(hosts) // size), min(max(int(src.options["concurrency"]), 1), len(hosts)))

    def halved(part: list[str]) -> list[list[str]]:
        if fits(part):
            return [part]
        return halved(part[: len(part) // 2]) + halved(part[len(part) // 2 :])

    parts = [hosts[i * len(hosts) // n : (i + 1) * len(hosts) // n] for i in range(n)]
    return [any_of(label, p) for part in parts for p in halved(part)], too_long


def sparse(src, session, chunk: Window, group: str, closed: bool) -> bool:
    """Whether the group's series hold at most ``raw_per_hour`` samples per series-hour: their
    raw samples are then no more points than their rollups (2 to 5 a series-hour) and the TSDB
    computes nothing. Measured in ``PROBE`` windows over the chunk and at least the
    ``DENSITY_SPAN`` before its end (one ``query_range`` of each metric's summed sample count and
    series count per window; a window where a series has no sample does not count for it): a
    scrape interval is the series', not the window's, so an hourly pull's few hours holding the
    last samples before a host went down are not taken for a sparse scrape (and stored raw where
    a longer chunk stores rollups). A span with no samples takes the rollups."""
    most = float(src.options["raw_per_hour"])
    if most <= 0:
        return False
    windows = -(-max(chunk.end - chunk.start, DENSITY_SPAN) // PROBE)
    step = PROBE.total_seconds()
    form = {
        "query": density_query(src, group, range_ms(PROBE, closed)),
        "start": epoch(chunk.end) - MS - (windows - 1) * step,
        "end": epoch(chunk.end) - MS,
        "step": step,
    }
    answer = decoded(src, post(src, session, "/api/v1/query_range", form))["data"]["result"]
    total = {"samples": 0.0, "series": 0.0}
    for s in answer:
        total[s["metric"][ROLLUP_LABEL].rpartition(":")[2]] += sum(float(v) for _, v in s["values"])
    return 0 < total["samples"] <= most * total["series"] * PROBE / timedelta(hours=1)


def raw_targets(
    rows: pl.DataFrame,
    baseline: pl.DataFrame | None,
    counters: set[str],
    chunk: Window,
    src: SourceConfig,
) -> list[tuple]:
    """(metric, before, hour, zoom, series keys, their values before the hour, the sample
    counts of the spans before): the series-hours whose raw samples to pull, by metric, hour
    and ``before``, the span [from, to) whose last sample is the one before the hour (a
    counter's previous hour with samples, in the chunk or, where the baseline found it, before
    it; else the lookback before the chunk; or none). ``zoom``: a
    counter's changed hours, whose changed ``ZOOM`` windows are found first; an unusable
    rollup's hour, and a counter's hour whose label set is not the one before it, are pulled
    whole, the latter with the label sets of the hour before (its sample before is theirs)."""
    lookback = chunk.start - timedelta(hours=float(src.options["counter_lookback_h"]))
    if baseline is not None:
        rows = rows.join(baseline, on="record", how="left")
    else:
        rows = rows.with_columns(
            before=pl.lit(None, pl.Float64),
            before_keys=pl.lit(None, pl.List(pl.Utf8)),
            before_hour=pl.lit(None, pl.Datetime("us")),
            before_n=pl.lit(None, pl.Int64),
        )
    rows = changes(rows.with_columns(metric=pl.col("key").str.json_path_match("$.__name__")))
    counter = pl.col("metric").is_in(list(counters)) | pl.col("metric").str.starts_with(
        XID_COUNT_METRIC
    )
    prev = pl.col("prev_hour")
    own = pl.concat_list("key")
    picked = rows.filter((counter & pl.col("changed")) | pl.col("bad")).select(
        "metric",
        span=pl.when(counter & prev.is_not_null())
        .then(pl.concat_list(prev, prev + timedelta(hours=1)))
        .when(counter & pl.col("before_hour").is_not_null())
        .then(pl.concat_list("before_hour", pl.col("before_hour") + timedelta(hours=1)))
        .when(counter & pl.col("before_keys").is_not_null())
        .then(pl.concat_list(pl.lit(lookback), pl.lit(chunk.start)))
        .otherwise(pl.concat_list("hour", "hour")),
        hour="hour",
        # else the hour is few samples, or not one series throughout
        zoom=counter & ~pl.col("bad") & ~pl.col("relabeled") & (pl.col("n") > 2 * FEW),
        key=pl.when(counter & pl.col("prior_keys").is_not_null())
        .then(pl.concat_list(own, "prior_keys").list.unique(maintain_order=True))
        .otherwise(own),
        prior="prior",
        count=pl.when(prev.is_not_null())
        .then("prev_n")
        .when(counter & pl.col("before_hour").is_not_null())
        .then("before_n"),
    )
    groups = (
        picked.explode("key")
        .unique(["metric", "span", "hour", "zoom", "key"], keep="first", maintain_order=True)
        .group_by("metric", "span", "hour", "zoom", maintain_order=True)
        .agg("key", "prior", "count")
        .sort("hour", "metric")
    )
    return [(m, tuple(span), h, z, k, p, c) for m, span, h, z, k, p, c in groups.iter_rows()]


def changes(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of (key, record, hour, n, min, max, last; ``before``, ``before_keys``: the value and
    label sets of the record series before its first row, or null) with, from the record
    series' hour before (several label sets may share an hour: a job's pod label came or went),
    ``prev_hour``, ``prev_n`` (its samples), ``prior_keys`` (its label sets, or
    ``before_keys``), ``prior`` (its last value, or ``before``; null when several sets held
    it), ``relabeled`` (the row's label set is not the one the value before had) and
    ``changed``: its value changed within the row (min != max), from the one before, or
    its label set did (the increment across it is only seen in the raw samples)."""
    if "before_keys" not in rows.columns:
        rows = rows.with_columns(before_keys=pl.lit(None, pl.List(pl.Utf8)))
    hours = (
        rows.group_by("record", "hour")
        .agg(keys=pl.col("key").unique().sort(), last=pl.col("last").first(), n=pl.col("n").sum())
        .sort("record", "hour")
        .select(
            "record",
            "hour",
            prev_hour=pl.col("hour").shift(1).over("record"),
            prev_keys=pl.col("keys").shift(1).over("record"),
            prev_last=pl.when(pl.col("keys").list.len() == 1).then("last").shift(1).over("record"),
            prev_n=pl.col("n").shift(1).over("record").cast(pl.Int64),
        )
    )
    rows = rows.join(hours, on=["record", "hour"], how="left").sort("key", "hour")
    known = pl.col("prev_hour").is_not_null()
    rows = rows.with_columns(
        prior=pl.when(known).then("prev_last").otherwise("before"),
        prior_keys=pl.when(known).then("prev_keys").otherwise("before_keys"),
    ).with_columns(
        relabeled=pl.col("prior_keys").is_not_null()
        & (
            (pl.col("prior_keys").list.len() != 1)
            | (pl.col("prior_keys").list.first() != pl.col("key"))
        )
    )
    return rows.with_columns(
        changed=(pl.col("min") != pl.col("max"))
        | (pl.col("prior").is_not_null() & (pl.col("min") != pl.col("prior")))
        | pl.col("relabeled")
    )
