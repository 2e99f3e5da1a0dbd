"""DCGM telemetry from a Prometheus-compatible TSDB (Prometheus, Thanos Query, Mimir,
VictoriaMetrics: the same HTTP API), with the hourly rollups computed by the TSDB.

Per time chunk, the metric families ``metrics`` names (names or RE2 patterns: by default every
``DCGM_`` family, what a file ingest of dcgm-exporter's scrapes stores) among those the TSDB
holds, then per group of hosts (at most ``hosts_per_query``, so each answer stays under the
server's sample limits, and at least ``concurrency`` groups, pulled that many at a time so the
TSDB answers on several cores; split further while a group's longest query is over
``query_bytes``, and a host whose name alone is over it is a ``Failure``), first a density
probe: each metric's samples and series in ``PROBE`` windows over the chunk and at least the
``DENSITY_SPAN`` before its end. A group whose
series hold at most ``raw_per_hour`` samples per series-hour (a 1 h scrape) is pulled raw, in
one range selector over every metric (``prom-json``, table gpu_samples, exactly the samples a
file ingest stores): its rollups would be no fewer points. Otherwise one ``query_range`` (step
1 h, evaluated at the last millisecond of each hour) asks for count / min / max / avg / last
``_over_time`` of every metric over its hour, the last three only where the hour's min != max
(a constant hour, most hours of an error counter, is its count and its min): raw samples never
cross the wire, 2 to 5 points per series-hour do (document format ``prom-rollup``, table
gpu_rollups). Then, at scrape resolution and only where needed, the raw samples (``prom-json``,
table gpu_samples) of:

- the changes of an error counter or the XID count. An hour changed where min != max, where
  its min differs from the last value before it (the previous hour's ``last``, or for the
  chunk's first hour an instant ``last_over_time`` over ``counter_lookback_h``), or where its
  label set is not the one before it (the increment across a new ``pod`` label is only in the
  samples; the hour is pulled whole with the sample before, from the old set). Before the
  chunk, the sets a record had in its last hour with samples are found as inside it, so a
  pull starting at any hour stores what a longer one does (``_baseline``). Such an hour is
  searched the same way in ``ZOOM`` windows (one ``query_range`` of min, and max and last where
  they differ), and each changed window's samples are pulled with the sample just before it,
  so the increments between consecutive stored samples are exactly those between consecutive
  samples in the TSDB: counter events keep their exact times;
- the series-hours whose rollup cannot stand for its samples (``ingest.tsdb.unusable``: NaN,
  DCGM blanks, an hour the GPU's metric spends under several label sets, as when a job's
  ``pod`` label comes or goes), which gpu_hourly then takes from the samples, as from a file.
  The rollups of such a split hour are left out of the document (a job starting is no bad
  input); the others are quarantined by the parser with their reason.

Only whole hours that ended ``settle_s`` before now (the TSDB's ``clock``) are pulled
(``settled``): the window a pull records ends there, and the next pull's overlap starts from
it. A range selector covers [t - r, t] on Prometheus 2 and (t - r, t] on 3 and later
(``/api/v1/status/buildinfo``; ``range_closed`` overrides), so each hour is exactly its
samples. An answer with ``warnings`` (Thanos' partial response) is tried again, and fails the
window when the retries are spent. Label values
go into PromQL escaped by the exposition's rule (``gpu_labels.quoted``), whatever characters
they hold. A series without the host label is not pulled. What a TSDB's rollup cannot tell: a
NaN sample inside an hour whose min equals its max (its mean is not asked for) is counted in n,
where a file ingest would quarantine it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC
from datetime import datetime
from datetime import timedelta
from urllib.parse import quote_plus

import orjson
import polars as pl

from analysis.telemetry.metrics import COUNTER_METRICS
from ingest.gpu_labels import quoted
from ingest.tsdb import CONSTANT_FILLED
from ingest.tsdb import HOUR_S
from ingest.tsdb import ROLLUP_FUNCTIONS
from ingest.tsdb import ROLLUP_LABEL
from ingest.tsdb import record_series
from ingest.tsdb import rollup_label
from ingest.tsdb import rollup_rows
from ingest.tsdb import series_key
from ingest.tsdb import series_points
from ingest.tsdb import several_label_sets
from ingest.tsdb import unusable
from sources.base import REQUIRED
from sources.base import Document
from sources.base import Failure
from sources.base import SourceConfig
from sources.base import SourceError
from sources.base import Window
from sources.http_client import HttpError
from sources.http_client import request
from sources.http_client import session as http_session
from warehouse.schemas import XID_COUNT_METRIC

KIND = "prometheus"
DCGM = "DCGM_"
COUNTERS = [m for m in COUNTER_METRICS if m.startswith(DCGM)]  # the XID count is one of them
OPTIONS = {
    "url": REQUIRED,  # base URL of the Prometheus HTTP API (Thanos Query, Mimir's prefix, ...)
    # the metric families: names or RE2 patterns of names (every family dcgm-exporter exports, as
    # a file ingest of its scrapes stores them)
    "metrics": [f"{DCGM}.*"],
    "counters": COUNTERS,  # of metrics: cumulative counts whose changes become events
    "selector": "",  # extra label matchers for every query, e.g. 'job="dcgm-exporter"'
    "host_label": "Hostname",  # the label naming the host (dcgm-exporter's; renamed to it if other)
    "hosts_per_query": 64,
    "query_bytes": 1_000_000,  # the longest query (form-encoded) a request sends
    "raw_per_hour": 2,  # sparser series (samples per series-hour) are pulled raw, not rolled up
    "concurrency": 4,  # requests in flight (host groups pulled at once)
    "counter_lookback_h": 24,  # how far back the value before a chunk's first hour is looked for
    "settle_s": 600,  # hours ending later than this before now are left to the next pull
    "range_closed": "auto",  # true: Prometheus 2 range selectors [t - r, t]; false: (t - r, t]
    "token_env": "",
    "username_env": "",
    "password_env": "",
    "verify_tls": True,  # or the path of a CA bundle
}
OPTION_TYPES = {"url": (str,), "verify_tls": (bool, str), "range_closed": (bool, str)}
CHUNK = timedelta(days=7)  # a backfill's commit: series labels cross the wire once a chunk
OVERLAP = timedelta(hours=2)  # late scrapes, and the hours left unsettled by the last pull
HOST = "Hostname"  # the label the parsers read the host from (ingest.gpu_labels.LABEL_COLUMNS)
NEAR = timedelta(minutes=1)  # where a series scraped every few seconds has its sample before
ZOOM = timedelta(minutes=5)  # the windows a counter's changed hour is searched in
PROBE = timedelta(hours=6)  # the windows a host group's samples per series-hour are counted in
DENSITY_SPAN = timedelta(days=1)  # the least span before a chunk's end they are counted over
FEW = 16  # samples of the span before a changed hour read whole rather than searched
_MS = 0.001
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")  # a metric name (``metrics`` may hold patterns)
_SUCCESS = b'{"status":"success"'  # how Prometheus, Thanos, Mimir and VictoriaMetrics begin one


def plan(src: SourceConfig, window: Window) -> list[str]:
    url = _base(src)
    metrics = src.options["metrics"]
    shown = replace(
        src,
        options={
            **src.options,
            "metrics": metrics if all(map(_NAME.fullmatch, metrics)) else ["<metric>"],
        },
    )
    out = []
    for chunk in _hour_chunks(window, datetime.now(UTC).replace(tzinfo=None), src):
        first, last = _eval_times(chunk)
        group = f'{src.options["host_label"]}=~"<up to {src.options["hosts_per_query"]} hosts>"'
        span = f"start={chunk.start.isoformat()} end={chunk.end.isoformat()}"
        out += [
            (
                f"GET {url}/api/v1/label/__name__/values match[]={_any_metric(src)} {span} (the "
                "metric families to pull)"
            ),
            (
                f"GET {url}/api/v1/label/{src.options['host_label']}/values "
                f"match[]={_any_metric(shown)} {span}"
            ),
            (
                f"POST {url}/api/v1/query_range step={PROBE.total_seconds():g} (density probe over "
                f"the chunk and at least {DENSITY_SPAN.days} day before its end, per host group) "
                f"query={_density_query(shown, group, '<probe>')}"
            ),
            (
                f"POST {url}/api/v1/query time={last} (a group at most "
                f"{src.options['raw_per_hour']} samples per series-hour: its raw samples) "
                f"query={_any_metric(shown, group)}[<chunk>]"
            ),
            (
                f"POST {url}/api/v1/query_range start={first} end={last} step={HOUR_S} (other "
                f"groups) query={_rollup_query(shown, group, '<range>')}"
            ),
        ]
        if _counters(shown):
            out.append(
                f"POST {url}/api/v1/query time={first - HOUR_S} "
                f"query={_baseline_query(shown, group)} (then, for a counter seen under several "
                f"label sets there, POST {url}/api/v1/query_range step={HOUR_S} of count_over_time "
                "of those series: the sets of its last hour with samples)"
            )
        if src.options["counters"]:
            out.append(
                f"POST {url}/api/v1/query_range step={ZOOM.total_seconds():g} (min, max, last) for "
                f"each hour whose counter changed, then POST {url}/api/v1/query "
                "(range selectors, raw samples) for its changed windows and for each hour whose "
                "rollup is unusable"
            )
    return out


def fetch(src: SourceConfig, window: Window) -> Iterator[Document | Failure]:
    """Per chunk, the metric families ``metrics`` names there, then its host groups pulled
    ``concurrency`` at a time (each group's requests one after another), their documents
    yielded in group order; a host whose name alone would make a query longer than
    ``query_bytes`` is a ``Failure``, not pulled."""
    chunks = _hour_chunks(window, datetime.now(UTC).replace(tzinfo=None), src)
    if not chunks:
        return
    session = http_session(src, verify=_verify(src.options["verify_tls"]))
    closed = _range_closed(src, session)
    with ThreadPoolExecutor(max(int(src.options["concurrency"]), 1)) as pool:
        for chunk in chunks:
            span = {"start": _epoch(chunk.start), "end": _epoch(chunk.end)}
            names = _label_values(src, session, "__name__", {"match[]": _any_metric(src), **span})
            if not names:
                continue
            named = replace(src, options={**src.options, "metrics": sorted(names)})
            hosts = _label_values(
                named,
                session,
                src.options["host_label"],
                {"match[]": _any_metric(named), **span},
            )
            groups, too_long = _host_groups(named, hosts)
            for host in too_long:
                yield Failure(
                    f"host {_shown(host)}",
                    f"its name of {len(host):,} characters makes a query longer than "
                    f"query_bytes ({int(src.options['query_bytes']):,}): not pulled",
                )
            tags = [f"{chunk}/hosts{i + 1}" for i in range(len(groups))]
            pulled = [
                pool.submit(_group_documents, named, session, chunk, g, closed, t)
                for g, t in zip(groups, tags, strict=True)
            ]
            try:
                for done in pulled:
                    yield from done.result()
            finally:
                for p in pulled:
                    p.cancel()


def _label_values(src: SourceConfig, session, label: str, params: dict) -> list[str]:
    values = _get(src, session, f"/api/v1/label/{label}/values", params)
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise SourceError(f"{src.name}: the values of label {label} are not a list of strings")
    return values


def _host_groups(src: SourceConfig, hosts: list[str]) -> tuple[list[str], list[str]]:
    """Matchers of ``hosts`` in groups of at most ``hosts_per_query`` and in at least
    ``concurrency`` groups (of about equal size) where there are that many hosts, so the TSDB
    answers on as many cores; a group whose longest query (its rollups, form-encoded) would pass
    ``query_bytes`` is halved until it fits (servers refuse long forms: Prometheus and Thanos at
    10 MB, VictoriaMetrics at ``-search.maxQueryLen``). And the hosts whose name alone passes it."""
    limit = int(src.options["query_bytes"])
    probe = "\0"  # where the group's matcher goes: the query's length without it, and how often
    query = _rollup_query(src, probe, _range(timedelta(hours=1), True))
    fixed, copies = len(quote_plus(query.replace(probe, ""))) + 100, query.count(probe)
    label = src.options["host_label"]

    def fits(part: list[str]) -> bool:
        return fixed + copies * len(quote_plus(_any_of(label, part))) <= limit

    too_long = [h for h in hosts if not fits([h])]
    hosts = [h for h in hosts if h not in set(too_long)]
    size = max(int(src.options["hosts_per_query"]), 1)
    n = max(-(-len(hosts) // size), min(max(int(src.options["concurrency"]), 1), len(hosts)))

    def halved(part: list[str]) -> list[list[str]]:
        if fits(part):
            return [part]
        return halved(part[: len(part) // 2]) + halved(part[len(part) // 2 :])

    parts = [hosts[i * len(hosts) // n : (i + 1) * len(hosts) // n] for i in range(n)]
    return [_any_of(label, p) for part in parts for p in halved(part)], too_long


def _shown(value: str) -> str:
    """A label value as one short line: quoted (a line feed escaped), cut to 60 characters."""
    text = quoted(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _group_documents(
    src, session, chunk: Window, group: str, closed: bool, tag: str
) -> list[Document]:
    return list(_fetch_group(src, session, chunk, group, closed, tag))


def _fetch_group(
    src, session, chunk: Window, group: str, closed: bool, tag: str
) -> Iterator[Document]:
    """The group's documents: its raw samples when its series are sparse (``_sparse``), else its
    rollups and the raw samples the rollups need (see the module's docstring)."""
    if _sparse(src, session, chunk, group, closed):
        body = _raw_samples(src, session, chunk, group, closed)
        yield Document(f"{src.name}/samples/{tag}", body, "prom-json")
        return
    first, last = _eval_times(chunk)
    rng = _range(timedelta(hours=1), closed)
    body = _post(
        src,
        session,
        "/api/v1/query_range",
        {"query": _rollup_query(src, group, rng), "start": first, "end": last, "step": HOUR_S},
    )
    answer = _json(src, body)
    points, labels, _ = series_points(answer["data"]["result"])
    rows = (
        rollup_rows(points, labels)
        .with_columns(bad=unusable().is_not_null(), split=several_label_sets())
        .filter(pl.col("copy") == 0)  # a series the answer repeats is stored (or refused) once
    )
    yield Document(
        f"{src.name}/rollups/{tag}", _without_split_hours(body, answer, rows), "prom-rollup"
    )
    baseline = _baseline(src, session, chunk, group, closed) if _counters(src) else None
    series: dict[str, dict] = {}  # key -> {"metric": labels, "values": {t: value}}
    targets = _raw_targets(rows, baseline, set(_counters(src)), chunk, src)
    for metric, before, hour, zoom, keys, priors, counts in targets:
        if zoom:
            spans = _zoomed(src, session, metric, keys, priors, counts, before, hour, closed)
        else:
            spans = [(before, hour, keys, counts)]
        length = ZOOM if zoom else timedelta(hours=1)
        for span, start, keys_w, counts_w in spans:
            for labels, values in _raw_series(
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


def _baseline(src, session, chunk: Window, group: str, closed: bool) -> pl.DataFrame:
    """Per counter record series, what the chunk's first hour is compared with, as a later hour
    is with the hour before it (``_changes``): the label sets of its last hour with samples
    within ``counter_lookback_h`` before the chunk (``before_keys``) and, where that hour held
    one set, its last value (``before``). One instant query gives each series' last value in
    the lookback. A record found there under several label sets (a job's pod label came or
    went) has its series' hours counted (``_last_hours``): its last hour (``before_hour``, with
    its samples ``before_n``) is where the sample before the chunk is looked for, as it is for a
    later hour. So the chunk's first hour is pulled as it would be inside a longer chunk: what
    is stored does not depend on the hour a pull starts at."""
    t = _epoch(chunk.start) - _MS
    result = _json(
        src, _post(src, session, "/api/v1/query", {"query": _baseline_query(src, group), "time": t})
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
        hours = _last_hours(src, session, chunk, several["key"].to_list(), closed)
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


def _last_hours(src, session, chunk: Window, keys: list[str], closed: bool) -> pl.DataFrame:
    """(key, hour, n) of the series ``keys``: the last hour of the lookback before the chunk in
    which each has samples, and how many, from one ``query_range`` of their samples per hour
    (a point only for an hour that has some)."""
    by_metric: dict[str, list[str]] = {}
    for key in keys:
        by_metric.setdefault(json.loads(key)["__name__"], []).append(key)
    rng = _range(timedelta(hours=1), closed)
    query = _either(
        [
            _host_renamed(
                src,
                _named(
                    _named(
                        f"count_over_time({m}{{{', '.join(_series_matchers(src, ks))}}}[{rng}])",
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
    end = _epoch(chunk.start) - _MS
    lookback = int(src.options["counter_lookback_h"]) * HOUR_S
    form = {"query": query, "start": end - lookback + HOUR_S, "end": end, "step": HOUR_S}
    result = _json(src, _post(src, session, "/api/v1/query_range", form))["data"]["result"]
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


def _without_split_hours(body: bytes, answer: dict, rows: pl.DataFrame) -> bytes:
    """The rollup answer without the points of the hours a GPU's metric spent under several
    label sets (``split``): no one set's rollup is the hour's, and the hour's raw samples are
    pulled and stored instead (a job starting is not bad input to quarantine)."""
    split = rows.filter("split").group_by("key").agg("hour")
    if not split.height:
        return body
    hours = {k: {_epoch(h) // HOUR_S for h in hs} for k, hs in split.iter_rows()}
    for series in answer["data"]["result"]:
        drop = hours.get(series_key(series["metric"]))
        if drop:
            series["values"] = [p for p in series["values"] if float(p[0]) // HOUR_S not in drop]
    return orjson.dumps(answer)


def _sparse(src, session, chunk: Window, group: str, closed: bool) -> bool:
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
        "query": _density_query(src, group, _range(PROBE, closed)),
        "start": _epoch(chunk.end) - _MS - (windows - 1) * step,
        "end": _epoch(chunk.end) - _MS,
        "step": step,
    }
    answer = _json(src, _post(src, session, "/api/v1/query_range", form))["data"]["result"]
    total = {"samples": 0.0, "series": 0.0}
    for s in answer:
        total[s["metric"][ROLLUP_LABEL].rpartition(":")[2]] += sum(float(v) for _, v in s["values"])
    return 0 < total["samples"] <= most * total["series"] * PROBE / timedelta(hours=1)


def _raw_samples(src, session, chunk: Window, group: str, closed: bool) -> bytes:
    """The group's raw samples of the chunk: one range selector over every metric, evaluated at
    the chunk's last millisecond (a ``prom-json`` answer). The host label is copied to
    ``Hostname`` where it is another, as ``label_replace`` does for the rollups."""
    rng = _range(chunk.end - chunk.start, closed)
    body = _post(
        src,
        session,
        "/api/v1/query",
        {"query": f"{_any_metric(src, group)}[{rng}]", "time": _epoch(chunk.end) - _MS},
    )
    host = src.options["host_label"]
    if host == HOST:
        return body
    doc = _json(src, body)
    for series in doc["data"]["result"]:
        if host in series["metric"]:
            series["metric"][HOST] = series["metric"][host]
    return orjson.dumps(doc)


def _raw_targets(
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
    rows = _changes(rows.with_columns(metric=pl.col("key").str.json_path_match("$.__name__")))
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


def _changes(rows: pl.DataFrame) -> pl.DataFrame:
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


def _zoomed(
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
    rng = _range(ZOOM, closed)
    sel = f"{metric}{{{', '.join(_series_matchers(src, keys))}}}[{rng}]"
    constant = f"(max_over_time({sel}) == min_over_time({sel}))"
    parts = [
        _named(f"({fn}_over_time({sel})" + ("" if col == "min" else f" unless {constant}") + ")",
               ROLLUP_LABEL, rollup_label(metric, col))
        for col, fn in (("min", "min"), ("max", "max"), ("last", "last"))
    ]  # fmt: skip
    step = ZOOM.total_seconds()
    body = _post(src, session, "/api/v1/query_range", {
        "query": _host_renamed(src, _named(_either(parts), "__name__", metric)),
        "start": _epoch(hour) + step - _MS, "end": _epoch(hour) + HOUR_S - _MS, "step": step,
    })  # fmt: skip
    points, labels, _ = series_points(_json(src, body)["data"]["result"])
    prior = pl.DataFrame(
        {"key": keys, "before": priors, "count": counts},
        schema={"key": pl.Utf8, "before": pl.Float64, "count": pl.Int64},
    )
    windows = rollup_rows(points, labels, period_s=int(step)).join(prior, on="key")
    prev = pl.col("prev_hour")
    picked = _changes(windows).filter("changed").select(
        "key",
        "hour",
        span=pl.when(prev.is_not_null()).then(pl.concat_list(prev, prev + ZOOM))
        .otherwise(pl.lit(list(before), pl.List(pl.Datetime("us")))),
        count=pl.when(prev.is_null()).then("count"),
    )  # fmt: skip
    groups = picked.group_by("span", "hour", maintain_order=True).agg("key", "count").sort("hour")
    return [(tuple(span), h, k, c) for span, h, k, c in groups.iter_rows()]


def _raw_series(
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
    missing = [k for k in dense if k not in got or min(map(float, got[k][1])) >= _epoch(start)]
    if missing and hi > lo and start - NEAR > lo:
        for key, (labels, last) in _last_before(
            src, session, metric, missing, lo, hi, closed
        ).items():
            got.setdefault(key, (labels, {}))[1].update(last)
    for labels, values in got.values():
        times = sorted(values, key=float)
        kept = next((i for i, ts in enumerate(times) if float(ts) >= _epoch(start)), len(times))
        yield labels, {ts: values[ts] for ts in times[max(kept - 1, 0) :]}


def _last_before(
    src, session, metric: str, keys: list[str], since: datetime, until: datetime, closed: bool
) -> dict[str, tuple[dict, dict]]:
    """key -> (labels, {time: value}) of the last sample of each series ``keys`` in [since,
    until) (none for a series without one): each series' span is halved while its later half
    holds samples or its earlier half must, down to ``NEAR``, whose samples are then read.
    Series whose spans agree (scraped alike) share each step's ``count_over_time`` query."""

    def holding(group: list[str], a: datetime, b: datetime) -> set[str]:
        t = _epoch(b) - _MS
        rng = round((t - _epoch(a)) * 1000) + (0 if closed else 1)
        sel = f"{metric}{{{', '.join(_series_matchers(src, group))}}}[{rng}ms]"
        answer = _post(
            src, session, "/api/v1/query", {"query": f"count_over_time({sel})", "time": t}
        )
        found = {_key_of(src, s["metric"], metric) for s in _json(src, answer)["data"]["result"]}
        return found & set(group)

    spans = {k: (since, until) for k in holding(keys, since, until)}
    while wide := {k: v for k, v in spans.items() if v[1] - v[0] > NEAR}:
        for (lo, hi), group in _by_value(wide).items():
            mid = lo + (hi - lo) / 2
            later = holding(group, mid, hi)
            spans.update({k: (mid, hi) if k in later else (lo, mid) for k in group})
    out = {}
    for (lo, hi), group in _by_value(spans).items():
        for key, (labels, values) in _samples(src, session, metric, group, lo, hi, closed).items():
            last = max(values, key=float)
            out[key] = (labels, {last: values[last]})
    return out


def _by_value(d: dict) -> dict:
    out: dict = {}
    for k, v in d.items():
        out.setdefault(v, []).append(k)
    return out


def _key_of(src: SourceConfig, labels: dict, metric: str) -> str:
    """The series key of an answer's labels (a function's answer has lost ``__name__``)."""
    got = {**labels, "__name__": metric}
    host = src.options["host_label"]
    if host != HOST and host in got:
        got[HOST] = got[host]  # as label_replace names it in the rollups
    return series_key(got)


def _samples(
    src, session, metric: str, keys: list[str], since: datetime, until: datetime, closed: bool
) -> dict[str, tuple[dict, dict]]:
    """key -> (labels, {time: value}) of the samples in [since, until) of the series ``keys``,
    from one range selector."""
    wanted = set(keys)
    t = _epoch(until) - _MS
    range_ms = round((t - _epoch(since)) * 1000) + (0 if closed else 1)
    query = f"{metric}{{{', '.join(_series_matchers(src, keys))}}}[{range_ms}ms]"
    answer = _json(src, _post(src, session, "/api/v1/query", {"query": query, "time": t}))
    out = {}
    for s in answer["data"]["result"]:
        if (key := _key_of(src, s["metric"], metric)) in wanted:
            out[key] = (json.loads(key), {str(ts): v for ts, v in s["values"]})
    return out


def _series_matchers(src: SourceConfig, keys: list[str]) -> list[str]:
    """Label matchers that select at least the series ``keys`` (each label they all have, with
    any of their values: exact for one series, and in practice for GPUs told apart by UUID)."""
    labels = [json.loads(k) for k in keys]
    names = sorted(set.intersection(*(set(x) for x in labels)) - {"__name__"})
    host = src.options["host_label"]
    if host != HOST:
        names = [n for n in names if n != HOST]  # renamed from the host label, not stored as such
    return [_any_of(n, sorted({x[n] for x in labels})) for n in names]


def _range(length: timedelta, closed: bool) -> str:
    """A range selector's duration covering exactly ``length`` before an evaluation instant one
    millisecond before a boundary: [t - r, t] on Prometheus 2, (t - r, t] on 3."""
    return f"{round(length.total_seconds() * 1000) - (1 if closed else 0)}ms"


def _rollup_query(src: SourceConfig, group: str, rng: str) -> str:
    """Every metric's five rollups over ``rng`` in one vector: ``__name__`` kept and the rollup
    named by ``ROLLUP_LABEL`` (``label_replace``), joined by ``or``."""
    parts = []
    for metric in src.options["metrics"]:
        sel = f"{metric}{{{_matchers(src, group)}}}[{rng}]"
        constant = f"(max_over_time({sel}) == min_over_time({sel}))"
        for column, fn in ROLLUP_FUNCTIONS.items():
            expr = f"{fn}({sel})" + (f" unless {constant}" if column in CONSTANT_FILLED else "")
            named = _named(
                _named(f"({expr})", "__name__", metric), ROLLUP_LABEL, rollup_label(metric, column)
            )
            parts.append(_host_renamed(src, named))
    return _either(parts)


def _either(parts: list[str]) -> str:
    """``parts`` joined by ``or`` as a balanced tree: a chain makes each step of the query
    match an ever larger left side (quadratic in the parts)."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return f"({_either(parts[:half])}) or ({_either(parts[half:])})"


def _baseline_query(src: SourceConfig, group: str) -> str:
    """Each counter series' last value within ``counter_lookback_h`` before an instant."""
    rng = f"{int(src.options['counter_lookback_h'])}h"
    return _either(
        [
            _host_renamed(
                src,
                _named(
                    _named(f"last_over_time({m}{{{_matchers(src, group)}}}[{rng}])", "__name__", m),
                    ROLLUP_LABEL,
                    rollup_label(m, "last"),
                ),
            )  # ``or`` ignores __name__
            for m in _counters(src)
        ]
    )


def _named(expr: str, label: str, value: str) -> str:
    return f'label_replace({expr}, "{label}", {quoted(value)}, "", "")'


def _host_renamed(src: SourceConfig, expr: str) -> str:
    host = src.options["host_label"]
    return expr if host == HOST else f'label_replace({expr}, "{HOST}", "$1", "{host}", "(.*)")'


def _matchers(src: SourceConfig, group: str) -> str:
    return ", ".join(m for m in (group, src.options["selector"]) if m)


def _any_metric(src: SourceConfig, group: str = "") -> str:
    """A selector of every series of ``metrics`` (names, or RE2 patterns of names)."""
    names = f"__name__=~{quoted('|'.join(src.options['metrics']))}"
    return "{" + ", ".join(m for m in (names, _matchers(src, group)) if m) + "}"


def _density_query(src: SourceConfig, group: str, rng: str) -> str:
    """Per metric, the samples over ``rng`` summed over its series, and the series that have
    any, in one vector (told apart by ``ROLLUP_LABEL``: ``or`` matches series without their
    ``__name__``)."""
    parts = []
    for m in src.options["metrics"]:
        counts = f"count_over_time({m}{{{_matchers(src, group)}}}[{rng}])"
        parts += [_named(f"sum({counts})", ROLLUP_LABEL, f"{m}:samples"),
                  _named(f"count({counts})", ROLLUP_LABEL, f"{m}:series")]  # fmt: skip
    return _either(parts)


def _counters(src: SourceConfig) -> list[str]:
    return [m for m in src.options["metrics"] if m in set(src.options["counters"])]


def settled(src: SourceConfig, window: Window, now: datetime) -> Window:
    """What of ``window`` a pull stores whole at ``now``: every hour it reaches into, from the
    start of its first (a rollup is of a whole hour; a backfill ending mid-hour leaves that hour
    to the next, which starts there), up to the last hour that ended ``settle_s`` before
    ``now`` (a later pull's overlap takes the rest once complete). Empty (start >= end) when no
    such hour is left."""
    settle = timedelta(seconds=float(src.options["settle_s"]))
    return Window(_floor_hour(window.start), _floor_hour(min(window.end, now - settle)))


def clock(src: SourceConfig) -> datetime:
    """The TSDB's now (naive UTC): what ``time()`` evaluates to there."""
    session = http_session(src, verify=_verify(src.options["verify_tls"]))
    answer = _get(src, session, "/api/v1/query", {"query": "time()"})
    try:
        return datetime(1970, 1, 1) + timedelta(seconds=float(answer["result"][0]))
    except (KeyError, IndexError, TypeError, ValueError, OverflowError):
        raise SourceError(f"{src.name}: time() answered {str(answer)[:100]}") from None


def _hour_chunks(window: Window, now: datetime, src: SourceConfig) -> list[Window]:
    """The settled hours of ``window`` (``settled``) in chunks of ``CHUNK``."""
    span = settled(src, window, now)
    return span.chunks(CHUNK) if span.end > span.start else []


def _eval_times(chunk: Window) -> tuple[float, float]:
    """The first and last evaluation instants: the last millisecond of the chunk's first and
    last hour."""
    return _epoch(chunk.start) + HOUR_S - _MS, _epoch(chunk.end) - _MS


def _range_closed(src: SourceConfig, session) -> bool:
    given = src.options["range_closed"]
    if isinstance(given, bool):
        return given
    try:
        version = _get(src, session, "/api/v1/status/buildinfo", {})["version"]
        return int(str(version).split(".")[0]) < 3
    except (SourceError, KeyError, TypeError, ValueError):
        return True  # a store that does not say: Prometheus 2 semantics


def _get(src, session, path: str, params: dict):
    data = _json(src, _request(src, session, "GET", path, params)).get("data")
    if not isinstance(data, (list, dict)):  # {"status":"success","data":null}
        raise SourceError(f"{src.name}: {_base(src)}{path}: an answer without data ({data!r:.40})")
    return data


def _post(src, session, path: str, form: dict) -> bytes:
    return _request(src, session, "POST", path, form)


def _request(src: SourceConfig, session, method: str, path: str, params: dict) -> bytes:
    """The body of a successful answer, else SourceError with Prometheus' own reason. A redirect
    is not followed (credentials go only to ``url``); an answer that says it may lack data is
    tried again (``_incomplete``)."""
    url = _base(src) + path
    try:
        r = request(
            src,
            session,
            method,
            url,
            partial=_incomplete,
            **({"params": params} if method == "GET" else {"data": params}),
        )
    except HttpError as exc:
        raise SourceError(f"{src.name}: {url}: {exc}") from None
    if r.status_code < 400 and r.content.startswith(_SUCCESS):
        return r.content  # not decoded twice: the caller or the parser reads it
    if 300 <= r.status_code < 400:
        raise SourceError(
            f"{src.name}: {url}: HTTP {r.status_code} redirects to "
            f"{r.headers.get('Location', '(nowhere)')}: not followed (set url to where it points)"
        )
    try:
        doc = r.json()
    except ValueError:
        doc = None
    if r.status_code >= 400 or not isinstance(doc, dict) or doc.get("status") != "success":
        reason = (
            doc.get("error") if isinstance(doc, dict) and doc.get("error") else r.text[:200].strip()
        )
        hint = " (lower hosts_per_query)" if "too many samples" in str(reason) else ""
        raise SourceError(f"{src.name}: {url}: HTTP {r.status_code}: {reason}{hint}")
    return r.content


def _incomplete(answer) -> str | None:
    """Why a successful answer may lack data, or None: any ``warnings`` (Thanos Query and Mimir
    answer with the stores they could reach and "partial response: ..." when one is down; no
    warning says the answer is whole). Such an answer is tried again as a store that did not
    answer may the next time; when the retries are spent the window fails and the next pull
    pulls it. A ``"warnings"`` inside a label value costs only a decode."""
    body = answer.content
    if b'"warnings"' not in body:
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # not JSON: reading it says so
    warnings = doc.get("warnings") if isinstance(doc, dict) else None
    if not warnings or doc.get("status") != "success":
        return None
    said = "; ".join(map(str, warnings if isinstance(warnings, list) else [warnings]))
    return f"the answer may be incomplete: {said[:300]}"


def _json(src: SourceConfig, body: bytes):
    """A successful answer decoded, or SourceError when it is not a JSON object (cut short,
    say)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise SourceError(f"{src.name}: an answer is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{src.name}: an answer is not a JSON object")
    return doc


def _base(src: SourceConfig) -> str:
    return str(src.options["url"]).rstrip("/")


def _verify(value) -> bool | str:
    return value if isinstance(value, (bool, str)) else bool(value)


def _epoch(t: datetime) -> float:
    return (t - datetime(1970, 1, 1)).total_seconds()


def _floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def _any_of(label: str, values: list[str]) -> str:
    """A matcher of ``label`` to exactly any of ``values``, whatever characters they hold."""
    return f"{label}=~{quoted('|'.join(map(_regex_literal, values)))}"


def _regex_literal(text: str) -> str:
    """``text`` matched literally by an RE2 regex (PromQL's)."""
    special = set(".^$*+?()[]{}|\\")
    return "".join("\\" + c if c in special else c for c in text)
