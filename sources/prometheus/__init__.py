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

- the changes of an error counter or the XID count, and of a state (the clock-event reasons,
  the PCIe link's width and generation; ``counters`` names them all). An hour changed where
  min != max, where its min differs from the last value before it (the previous hour's
  ``last``, or for the
  chunk's first hour an instant ``last_over_time`` over ``counter_lookback_h``), or where its
  label set is not the one before it (the increment across a new ``pod`` label is only in the
  samples; the hour is pulled whole with the sample before, from the old set). Before the
  chunk, the sets a record had in its last hour with samples are found as inside it, so a
  pull starting at any hour stores what a longer one does (``_baseline``). Such an hour is
  searched the same way in ``ZOOM`` windows (one ``query_range`` of min, and max and last where
  they differ), and each changed window's samples are pulled with the sample just before it,
  so the increments between consecutive stored samples are exactly those between consecutive
  samples in the TSDB: counter events keep their exact times, a state's spans their edges;
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

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC
from datetime import datetime
from datetime import timedelta

from analysis.telemetry.metrics import COUNTER_METRICS
from ingest.gpu_labels import quoted
from ingest.tsdb import HOUR_S
from sources.base import REQUIRED
from sources.base import Document
from sources.base import Failure
from sources.base import SourceConfig
from sources.base import Window
from sources.prometheus.client import base_url
from sources.prometheus.client import clock
from sources.prometheus.client import label_values
from sources.prometheus.client import range_closed
from sources.prometheus.client import tsdb_session
from sources.prometheus.group import group_documents
from sources.prometheus.hours import CHUNK
from sources.prometheus.hours import epoch
from sources.prometheus.hours import eval_times
from sources.prometheus.hours import hour_chunks
from sources.prometheus.hours import settled
from sources.prometheus.queries import NAME
from sources.prometheus.queries import any_metric
from sources.prometheus.queries import baseline_query
from sources.prometheus.queries import counters
from sources.prometheus.queries import density_query
from sources.prometheus.queries import rollup_query
from sources.prometheus.targets import DENSITY_SPAN
from sources.prometheus.targets import PROBE
from sources.prometheus.targets import ZOOM
from sources.prometheus.targets import host_groups
from warehouse.signals import STATE_METRICS

# the source kind's contract (sources/base.py), beside plan and fetch
__all__ = [
    "CHUNK",
    "COUNTERS",
    "KIND",
    "OPTIONS",
    "OPTION_TYPES",
    "OVERLAP",
    "clock",
    "fetch",
    "plan",
    "settled",
]

KIND = "prometheus"
DCGM = "DCGM_"
COUNTERS = [m for m in COUNTER_METRICS if m.startswith(DCGM)]  # the XID count is one of them
# pulled at scrape resolution wherever they change: the counters (each rise an event) and the
# states (clock-event reasons, the PCIe link), whose hourly rollup cannot say when they changed
CHANGES = COUNTERS + [m for m in STATE_METRICS if m.startswith(DCGM)]
OPTIONS = {
    "url": REQUIRED,  # base URL of the Prometheus HTTP API (Thanos Query, Mimir's prefix, ...)
    # the metric families: names or RE2 patterns of names (every family dcgm-exporter exports, as
    # a file ingest of its scrapes stores them)
    "metrics": [f"{DCGM}.*"],
    "counters": CHANGES,  # of metrics: those whose every change is pulled at scrape resolution
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
    "compress": False,  # true: gzipped answers (a link slower than about 20 MB/s; tsdb_session)
}
OPTION_TYPES = {"url": (str,), "verify_tls": (bool, str), "range_closed": (bool, str)}
OVERLAP = timedelta(hours=2)  # late scrapes, and the hours left unsettled by the last pull


def plan(src: SourceConfig, window: Window) -> list[str]:
    url = base_url(src)
    metrics = src.options["metrics"]
    shown = replace(
        src,
        options={
            **src.options,
            "metrics": metrics if all(map(NAME.fullmatch, metrics)) else ["<metric>"],
        },
    )
    out = []
    for chunk in hour_chunks(window, datetime.now(UTC).replace(tzinfo=None), src):
        first, last = eval_times(chunk)
        group = f'{src.options["host_label"]}=~"<up to {src.options["hosts_per_query"]} hosts>"'
        span = f"start={chunk.start.isoformat()} end={chunk.end.isoformat()}"
        out += [
            (
                f"GET {url}/api/v1/label/__name__/values match[]={any_metric(src)} {span} (the "
                "metric families to pull)"
            ),
            (
                f"GET {url}/api/v1/label/{src.options['host_label']}/values "
                f"match[]={any_metric(shown)} {span}"
            ),
            (
                f"POST {url}/api/v1/query_range step={PROBE.total_seconds():g} (density probe over "
                f"the chunk and at least {DENSITY_SPAN.days} day before its end, per host group) "
                f"query={density_query(shown, group, '<probe>')}"
            ),
            (
                f"POST {url}/api/v1/query time={last} (a group at most "
                f"{src.options['raw_per_hour']} samples per series-hour: its raw samples) "
                f"query={any_metric(shown, group)}[<chunk>]"
            ),
            (
                f"POST {url}/api/v1/query_range start={first} end={last} step={HOUR_S} (other "
                f"groups) query={rollup_query(shown, group, '<range>')}"
            ),
        ]
        if counters(shown):
            out.append(
                f"POST {url}/api/v1/query time={first - HOUR_S} "
                f"query={baseline_query(shown, group)} (then, for a counter seen under several "
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
    chunks = hour_chunks(window, datetime.now(UTC).replace(tzinfo=None), src)
    if not chunks:
        return
    session = tsdb_session(src)
    closed = range_closed(src, session)
    with ThreadPoolExecutor(max(int(src.options["concurrency"]), 1)) as pool:
        for chunk in chunks:
            span = {"start": epoch(chunk.start), "end": epoch(chunk.end)}
            names = label_values(src, session, "__name__", {"match[]": any_metric(src), **span})
            if not names:
                continue
            named = replace(src, options={**src.options, "metrics": sorted(names)})
            hosts = label_values(
                named,
                session,
                src.options["host_label"],
                {"match[]": any_metric(named), **span},
            )
            groups, too_long = host_groups(named, hosts)
            for host in too_long:
                yield Failure(
                    f"host {_shown(host)}",
                    f"its name of {len(host):,} characters makes a query longer than "
                    f"query_bytes ({int(src.options['query_bytes']):,}): not pulled",
                )
            tags = [f"{chunk}/hosts{i + 1}" for i in range(len(groups))]
            pulled = [
                pool.submit(group_documents, named, session, chunk, g, closed, t)
                for g, t in zip(groups, tags, strict=True)
            ]
            try:
                for done in pulled:
                    yield from done.result()
            finally:
                for p in pulled:
                    p.cancel()


def _shown(value: str) -> str:
    """A label value as one short line: quoted (a line feed escaped), cut to 60 characters."""
    text = quoted(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
