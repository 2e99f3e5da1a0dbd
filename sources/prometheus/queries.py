"""The PromQL the Prometheus source sends: selectors of the metric families and host groups,
the hourly rollups, the counters' baselines, the density probe; label values escaped whatever
characters they hold."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from ingest.gpu_labels import quoted
from ingest.tsdb import CONSTANT_FILLED
from ingest.tsdb import ROLLUP_FUNCTIONS
from ingest.tsdb import ROLLUP_LABEL
from ingest.tsdb import rollup_label
from ingest.tsdb import series_key
from sources.base import SourceConfig

HOST = "Hostname"  # the label the parsers read the host from (ingest.gpu_labels.LABEL_COLUMNS)
NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")  # a metric name (``metrics`` may hold patterns)


def series_matchers(src: SourceConfig, keys: list[str]) -> list[str]:
    """Label matchers that select at least the series ``keys`` (each label they all have, with
    any of their values: exact for one series, and in practice for GPUs told apart by UUID)."""
    labels = [json.loads(k) for k in keys]
    names = sorted(set.intersection(*(set(x) for x in labels)) - {"__name__"})
    host = src.options["host_label"]
    if host != HOST:
        names = [n for n in names if n != HOST]  # renamed from the host label, not stored as such
    return [any_of(n, sorted({x[n] for x in labels})) for n in names]


def range_ms(length: timedelta, closed: bool) -> str:
    """A range selector's duration covering exactly ``length`` before an evaluation instant one
    millisecond before a boundary: [t - r, t] on Prometheus 2, (t - r, t] on 3."""
    return f"{round(length.total_seconds() * 1000) - (1 if closed else 0)}ms"


def rollup_query(src: SourceConfig, group: str, rng: str) -> str:
    """Every metric's five rollups over ``rng`` in one vector: ``__name__`` kept and the rollup
    named by ``ROLLUP_LABEL`` (``label_replace``), joined by ``or``."""
    parts = []
    for metric in src.options["metrics"]:
        sel = f"{metric}{{{matchers(src, group)}}}[{rng}]"
        constant = f"(max_over_time({sel}) == min_over_time({sel}))"
        for column, fn in ROLLUP_FUNCTIONS.items():
            expr = f"{fn}({sel})" + (f" unless {constant}" if column in CONSTANT_FILLED else "")
            named = labelled(
                labelled(f"({expr})", "__name__", metric),
                ROLLUP_LABEL,
                rollup_label(metric, column),
            )
            parts.append(host_renamed(src, named))
    return either(parts)


def either(parts: list[str]) -> str:
    """``parts`` joined by ``or`` as a balanced tree: a chain makes each step of the query
    match an ever larger left side (quadratic in the parts)."""
    if len(parts) == 1:
        return parts[0]
    half = len(parts) // 2
    return f"({either(parts[:half])}) or ({either(parts[half:])})"


def baseline_query(src: SourceConfig, group: str) -> str:
    """Each counter series' last value within ``counter_lookback_h`` before an instant."""
    rng = f"{int(src.options['counter_lookback_h'])}h"
    return either(
        [
            host_renamed(
                src,
                labelled(
                    labelled(
                        f"last_over_time({m}{{{matchers(src, group)}}}[{rng}])", "__name__", m
                    ),
                    ROLLUP_LABEL,
                    rollup_label(m, "last"),
                ),
            )  # ``or`` ignores __name__
            for m in counters(src)
        ]
    )


def labelled(expr: str, label: str, value: str) -> str:
    return f'label_replace({expr}, "{label}", {quoted(value)}, "", "")'


def host_renamed(src: SourceConfig, expr: str) -> str:
    host = src.options["host_label"]
    return expr if host == HOST else f'label_replace({expr}, "{HOST}", "$1", "{host}", "(.*)")'


def matchers(src: SourceConfig, group: str) -> str:
    return ", ".join(m for m in (group, src.options["selector"]) if m)


def any_metric(src: SourceConfig, group: str = "") -> str:
    """A selector of every series of ``metrics`` (names, or RE2 patterns of names)."""
    names = f"__name__=~{quoted('|'.join(src.options['metrics']))}"
    return "{" + ", ".join(m for m in (names, matchers(src, group)) if m) + "}"


def density_query(src: SourceConfig, group: str, rng: str) -> str:
    """Per metric, the samples over ``rng`` summed over its series, and the series that have
    any, in one vector (told apart by ``ROLLUP_LABEL``: ``or`` matches series without their
    ``__name__``)."""
    parts = []
    for m in src.options["metrics"]:
        counts = f"count_over_time({m}{{{matchers(src, group)}}}[{rng}])"
        parts += [labelled(f"sum({counts})", ROLLUP_LABEL, f"{m}:samples"),
                  labelled(f"count({counts})", ROLLUP_LABEL, f"{m}:series")]  # fmt: skip
    return either(parts)


def counters(src: SourceConfig) -> list[str]:
    return [m for m in src.options["metrics"] if m in set(src.options["counters"])]


def any_of(label: str, values: list[str]) -> str:
    """A matcher of ``label`` to exactly any of ``values``, whatever characters they hold."""
    return f"{label}=~{quoted('|'.join(map(regex_literal, values)))}"


def regex_literal(text: str) -> str:
    """``text`` matched literally by an RE2 regex (PromQL's)."""
    special = set(".^$*+?()[]{}|\\")
    return "".join("\\" + c if c in special else c for c in text)


def key_of(src: SourceConfig, labels: dict, metric: str) -> str:
    """The series key of an answer's labels (a function's answer has lost ``__name__``)."""
    got = {**labels, "__name__": metric}
    host = src.options["host_label"]
    if host != HOST and host in got:
        got[HOST] = got[host]  # as label_replace names it in the rollups
    return series_key(got)
