"""One host group of one chunk pulled: its rollups, or its raw samples when sparse, then the
raw samples the rollups need, searched hour by hour and window by window."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from datetime import timedelta

import orjson
import polars as pl

from ingest.tsdb import HOUR_S
from ingest.tsdb import ROLLUP_LABEL
from ingest.tsdb import record_series
from ingest.tsdb import rollup_label
from ingest.tsdb import rollup_rows
from ingest.tsdb import series_key
from ingest.tsdb import series_points
from ingest.tsdb import several_label_sets
from ingest.tsdb import unusable
from sources.base import Document
from sources.base import Window
from sources.prometheus.client import decoded
from sources.prometheus.client import post
from sources.prometheus.hours import MS
from sources.prometheus.hours import epoch
from sources.prometheus.hours import eval_times
from sources.prometheus.queries import HOST
from sources.prometheus.queries import any_metric
from sources.prometheus.queries import baseline_query
from sources.prometheus.queries import counters
from sources.prometheus.queries import either
from sources.prometheus.queries import host_renamed
from sources.prometheus.queries import key_of
from sources.prometheus.queries import labelled
from sources.prometheus.queries import range_ms
from sources.prometheus.queries import rollup_query
from sources.prometheus.queries import series_matchers
from sources.prometheus.targets import FEW
from sources.prometheus.targets import NEAR
from sources.prometheus.targets import ZOOM
from sources.prometheus.targets import changes
from sources.prometheus.targets import raw_targets
from sources.prometheus.targets import sparse


def group_documents(
    src, session, chunk: Window, group: str, closed: bool, tag: str
) -> list[Document]:
    return list(fetch_group(src, session, chunk, group, closed, tag))


def fetch_group(
    src, session, chunk: Window, group: str, closed: bool, tag: str
) -> Iterator[Document]:
    """The group's documents: its raw samples when its series are sparse (``sparse``), else its
    rollups and the raw samples the rollups need (see the module's docstring)."""
    if sparse(src, session, chunk, group, closed):
        body = raw_samples(src, session, chunk, group, closed)
        yield Document(f"{src.name}/samples/{tag}", body, "prom-json")
        return
    first, last = eval_times(chunk)
    rng = range_ms(timedelta(hours=1), closed)
    body = post(
        src,
        session,
        "/api/v1/query_range",
        {"query": rollup_query(src, group, rng), "start": first, "end": last, "step": HOUR_S},
    )
    answer = decoded(src, body)
    points, labels, _ = series_points(answer["data"]["result"])
    rows = (
        rollup_rows(points, labels)
        .with_columns(bad=unusable().is_not_null(), split=several_label_sets())
        .filter(pl.col("copy") == 0)  # a series the answer repeats is stored (or refused) once
    )
    yield Document(
        f"{src.name}/rollups/{tag}", without_split_hours(body, answer, rows), "prom-rollup"
    )
    baseline = counter_baseline(src, session, chunk, group, closed) if counters(src) else None
    series: dict[str, dict] = {}  # key -> {"metric": labels, "values": {t: value}}
    targets = raw_targets(rows, baseline, set(counters(src)), chunk, src)
    for metric, before, hour, zoom, keys, priors, counts in targets:
        if zoom:
            spans = zoomed(src, session, metric, keys, priors, counts, before, hour, closed)
        else:
            spans = [(before, hour, keys, counts)]
        length = ZOOM if zoom else timedelta(hours=1)
        for span, start, keys_w, counts_w in spans:
            for labels, values in raw_series(
                src, session, metric, keys_w, counts_w, span, start, length, closed
            ):
                got = series.setdefault(series_key(labels), {"metric": labels, "values": {}})
                got["values"].update(values)
    if series:
        result = [
            {
                "metric": s["metric"],
                "values": sorted(s["values"].items(), key=lambda p: float(p[0])),
            }
            for s in series.values()
        ]
        doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
        yield Document(f"{src.name}/samples/{tag}", orjson.dumps(doc), "prom-json")


def counter_baseline(src, session, chunk: Window, group: str, closed: bool) -> pl.DataFrame:
    """Per counter record series, what the chunk's first hour is compared with, as a later hour
    is with the hour before it (``changes``): the label sets of its last hour with samples
    within ``counter_lookback_h`` before the chunk (``before_keys``) and, where that hour held
    one set, its last value (``before``). One instant query gives each series' last value in
    the lookback. A record found there under several label sets (a job's pod label came or
    went) has its series' hours counted (``last_hours``): its last hour (``before_hour``, with
    its samples ``before_n``) is where the sample before the chunk is looked for, as it is for a
    later hour. So the chunk's first hour is pulled as it would be inside a longer chunk: what
    is stored does not depend on the hour a pull starts at."""
    t = epoch(chunk.start) - MS
    result = decoded(
        src, post(src, session, "/api/v1/query", {"query": baseline_query(src, group), "time": t})
    )["data"]["result"]
    keys = pl.DataFrame(
        {
            "key": [series_key(s["metric"]) for s in result],
            "record": [record_series(s["metric"]) for s in result],
            "before": [float(s["value"][1]) for s in result],
        },
        schema={"key": pl.Utf8, "record": pl.Utf8, "before": pl.Float64},
    ).unique("key", keep="first", maintain_order=True)
    hours = pl.DataFrame(schema={"key": pl.Utf8, "hour": pl.Datetime("us"), "n": pl.Int64})
    several = keys.filter(pl.len().over("record") > 1)
    if several.height:
        hours = last_hours(src, session, chunk, several["key"].to_list(), closed)
    # a record whose hours were not found (none counted) keeps every set it was seen under
    keys = (
        keys.join(hours, on="key", how="left")
        .with_columns(last=pl.col("hour").max().over("record"))
        .filter(pl.col("last").is_null() | (pl.col("hour") == pl.col("last")))
    )
    return keys.group_by("record").agg(
        before=pl.when(pl.len() == 1).then(pl.col("before").first()),
        before_keys=pl.col("key").sort(),
        before_hour=pl.col("last").first(),
        before_n=pl.col("n").sum().cast(pl.Int64),
    )


def last_hours(src, session, chunk: Window, keys: list[str], closed: bool) -> pl.DataFrame:
    """(key, hour, n) of the series ``keys``: the last hour of the lookback before the chunk in
    which each has samples, and how many, from one ``query_range`` of their samples per hour
    (a point only for an hour that has some)."""
    by_metric: dict[str, list[str]] = {}
    for key in keys:
        by_metric.setdefault(json.loads(key)["__name__"], []).append(key)
    rng = range_ms(timedelta(hours=1), closed)
    query = either(
        [
            host_renamed(
                src,
                labelled(
                    labelled(
                        f"count_over_time({m}{{{', '.join(series_matchers(src, ks))}}}[{rng}])",
                        "__name__",
                        m,
                    ),
                    ROLLUP_LABEL,  # ``or`` matches series without their __name__
                    rollup_label(m, "n"),
                ),
            )
            for m, ks in by_metric.items()
        ]
    )
    end = epoch(chunk.start) - MS
    lookback = int(src.options["counter_lookback_h"]) * HOUR_S
    form = {"query": query, "start": end - lookback + HOUR_S, "end": end, "step": HOUR_S}
    result = decoded(src, post(src, session, "/api/v1/query_range", form))["data"]["result"]
    last = [max(s["values"], key=lambda p: float(p[0])) for s in result if s["values"]]
    return (
        pl.DataFrame(
            {
                "key": [series_key(s["metric"]) for s in result if s["values"]],
                "t": [float(p[0]) for p in last],
                "n": [int(float(p[1])) for p in last],
            },
            schema={"key": pl.Utf8, "t": pl.Float64, "n": pl.Int64},
        )
        .select(
            "key",
            hour=pl.from_epoch(
                ((pl.col("t") // HOUR_S) * HOUR_S).cast(pl.Int64), time_unit="s"
            ).cast(pl.Datetime("us")),
            n="n",
        )
        .filter(pl.col("key").is_in(keys))
    )


def without_split_hours(body: bytes, answer: dict, rows: pl.DataFrame) -> bytes:
    """The rollup answer without the points of the hours a GPU's metric spent under several
    label sets (``split``): no one set's rollup is the hour's, and the hour's raw samples are
    pulled and stored instead (a job starting is not bad input to quarantine)."""
    split = rows.filter("split").group_by("key").agg("hour")
    if not split.height:
        return body
    hours = {k: {epoch(h) // HOUR_S for h in hs} for k, hs in split.iter_rows()}
    for series in answer["data"]["result"]:
        drop = hours.get(series_key(series["metric"]))
        if drop:
            series["values"] = [p for p in series["values"] if float(p[0]) // HOUR_S not in drop]
    return orjson.dumps(answer)


def raw_samples(src, session, chunk: Window, group: str, closed: bool) -> bytes:
    """The group's raw samples of the chunk: one range selector over every metric, evaluated at
    the chunk's last millisecond (a ``prom-json`` answer). The host label is copied to
    ``Hostname`` where it is another, as ``label_replace`` does for the rollups."""
    rng = range_ms(chunk.end - chunk.start, closed)
    body = post(
        src,
        session,
        "/api/v1/query",
        {"query": f"{any_metric(src, group)}[{rng}]", "time": epoch(chunk.end) - MS},
    )
    host = src.options["host_label"]
    if host == HOST:
        return body
    doc = decoded(src, body)
    for series in doc["data"]["result"]:
        if host in series["metric"]:
            series["metric"][HOST] = series["metric"][host]
    return orjson.dumps(doc)


def zoomed(
    src,
    session,
    metric: str,
    keys: list[str],
    priors: list,
    counts: list,
    before: tuple,
    hour: datetime,
    closed: bool,
) -> list[tuple]:
    """(before, window start, keys, counts) of the ``ZOOM`` windows of ``hour`` in which the
    series ``keys`` (with their values before the hour, ``priors``) changed: one
    ``query_range`` of their min (and max and last where they differ) per window finds them, so
    only those windows' samples are pulled raw. A window's sample before is in the window
    before it, or for the hour's first, in the hour's ``before`` span."""
    rng = range_ms(ZOOM, closed)
    sel = f"{metric}{{{', '.join(series_matchers(src, keys))}}}[{rng}]"
    constant = f"(max_over_time({sel}) == min_over_time({sel}))"
    parts = [
        labelled(f"({fn}_over_time({sel})" + ("" if col == "min" else f" unless {constant}") + ")",
               ROLLUP_LABEL, rollup_label(metric, col))
        for col, fn in (("min", "min"), ("max", "max"), ("last", "last"))
    ]  # fmt: skip
    step = ZOOM.total_seconds()
    body = post(src, session, "/api/v1/query_range", {
        "query": host_renamed(src, labelled(either(parts), "__name__", metric)),
        "start": epoch(hour) + step - MS, "end": epoch(hour) + HOUR_S - MS, "step": step,
    })  # fmt: skip
    points, labels, _ = series_points(decoded(src, body)["data"]["result"])
    prior = pl.DataFrame(
        {"key": keys, "before": priors, "count": counts},
        schema={"key": pl.Utf8, "before": pl.Float64, "count": pl.Int64},
    )
    windows = rollup_rows(points, labels, period_s=int(step)).join(prior, on="key")
    prev = pl.col("prev_hour")
    picked = changes(windows).filter("changed").select(
        "key",
        "hour",
        span=pl.when(prev.is_not_null()).then(pl.concat_list(prev, prev + ZOOM))
        .otherwise(pl.lit(list(before), pl.List(pl.Datetime("us")))),
        count=pl.when(prev.is_null()).then("count"),
    )  # fmt: skip
    groups = picked.group_by("span", "hour", maintain_order=True).agg("key", "count").sort("hour")
    return [(tuple(span), h, k, c) for span, h, k, c in groups.iter_rows()]


def raw_series(
    src,
    session,
    metric: str,
    keys: list[str],
    counts: list,
    before: tuple,
    start: datetime,
    length: timedelta,
    closed: bool,
) -> Iterator[tuple[dict, dict]]:
    """(labels, {time: value}) of each of the series ``keys`` of ``metric``: its samples in
    [start, start + length) and the last one in the span ``before`` (samples ``counts`` there,
    where known). Raw samples with their exact times, from range selectors matching at least
    those series: first from ``NEAR`` before ``start`` (where a series scraped every few
    seconds has its sample before), or from the span's start when it holds few samples (a short
    span, or at most ``FEW``); for a series with none near, the span's last sample, found by
    halving the span with ``count_over_time`` (a point per step, not the span's samples)."""
    lo, hi = before
    count = dict(zip(keys, counts, strict=True))
    few = [k for k in keys if hi - lo <= ZOOM or (count[k] is not None and count[k] <= FEW)]
    dense = [k for k in keys if k not in few]
    got = _samples(src, session, metric, few, lo, start + length, closed) if few else {}
    if dense:
        got.update(
            _samples(src, session, metric, dense, max(lo, start - NEAR), start + length, closed)
        )
    # a series with no sample near (or none at all since: a label set the hour no longer has)
    missing = [k for k in dense if k not in got or min(map(float, got[k][1])) >= epoch(start)]
    if missing and hi > lo and start - NEAR > lo:
        for key, (labels, last) in last_before(
            src, session, metric, missing, lo, hi, closed
        ).items():
            got.setdefault(key, (labels, {}))[1].update(last)
    for labels, values in got.values():
        times = sorted(values, key=float)
        kept = next((i for i, ts in enumerate(times) if float(ts) >= epoch(start)), len(times))
        yield labels, {ts: values[ts] for ts in times[max(kept - 1, 0) :]}


def last_before(
    src, session, metric: str, keys: list[str], since: datetime, until: datetime, closed: bool
) -> dict[str, tuple[dict, dict]]:
    """key -> (labels, {time: value}) of the last sample of each series ``keys`` in [since,
    until) (none for a series without one): each series' span is halved while its later half
    holds samples or its earlier half must, down to ``NEAR``, whose samples are then read.
    Series whose spans agree (scraped alike) share each step's ``count_over_time`` query."""

    def holding(group: list[str], a: datetime, b: datetime) -> set[str]:
        t = epoch(b) - MS
        rng = round((t - epoch(a)) * 1000) + (0 if closed else 1)
        sel = f"{metric}{{{', '.join(series_matchers(src, group))}}}[{rng}ms]"
        answer = post(
            src, session, "/api/v1/query", {"query": f"count_over_time({sel})", "time": t}
        )
        found = {key_of(src, s["metric"], metric) for s in decoded(src, answer)["data"]["result"]}
        return found & set(group)

    spans = {k: (since, until) for k in holding(keys, since, until)}
    while wide := {k: v for k, v in spans.items() if v[1] - v[0] > NEAR}:
        for (lo, hi), group in by_value(wide).items():
            mid = lo + (hi - lo) / 2
            later = holding(group, mid, hi)
            spans.update({k: (mid, hi) if k in later else (lo, mid) for k in group})
    out = {}
    for (lo, hi), group in by_value(spans).items():
        for key, (labels, values) in _samples(src, session, metric, group, lo, hi, closed).items():
            last = max(values, key=float)
            out[key] = (labels, {last: values[last]})
    return out


def by_value(d: dict) -> dict:
    out: dict = {}
    for k, v in d.items():
        out.setdefault(v, []).append(k)
    return out


def _samples(
    src, session, metric: str, keys: list[str], since: datetime, until: datetime, closed: bool
) -> dict[str, tuple[dict, dict]]:
    """key -> (labels, {time: value}) of the samples in [since, until) of the series ``keys``,
    from one range selector."""
    wanted = set(keys)
    t = epoch(until) - MS
    range_ms = round((t - epoch(since)) * 1000) + (0 if closed else 1)
    query = f"{metric}{{{', '.join(series_matchers(src, keys))}}}[{range_ms}ms]"
    answer = decoded(src, post(src, session, "/api/v1/query", {"query": query, "time": t}))
    out = {}
    for s in answer["data"]["result"]:
        if (key := key_of(src, s["metric"], metric)) in wanted:
            out[key] = (json.loads(key), {str(ts): v for ts, v in s["values"]})
    return out
