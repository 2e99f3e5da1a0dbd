"""Repeat merging: the lines of one multi-line event collapse into one row, and repeats of an
event within the merge window into one row with a ``count``."""

import polars as pl

DEFAULT_MERGE_WINDOW_S = 60.0
COLLAPSE_S = 1.0  # lines of one multi-line event are printed within this
MESSAGE_LIMIT = 1000
SXID_DEFAULT_SEVERITY = "critical"  # an SXID line that says neither Fatal nor Non-fatal


_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2, "fatal": 3}


def _worst(severity: pl.Expr) -> pl.Expr:
    """The worst severity of a group (an aggregation; nulls do not vote)."""
    rank = severity.replace_strict(_SEVERITY_RANK, default=None, return_dtype=pl.Int8)
    return severity.sort_by(rank, nulls_last=False).last()


_KEY = [
    "hk",
    "event_type",
    "device",
    "code",
    "lk",
]  # one event source: collapse and merge stay within it


def _runs(ev: pl.DataFrame, order: list[str], starts: pl.Expr) -> pl.DataFrame:
    """Sort by ``_KEY`` then ``order`` and number runs of rows: a run starts at a new key or
    where ``starts`` (which may read ``prev_*`` of the previous row) is true. One sort and
    shifts, not windows over four string columns."""
    ev = ev.sort([*_KEY, *order])
    same_key = pl.all_horizontal([(pl.col(k) == pl.col(k).shift(1)).fill_null(False) for k in _KEY])
    ev = ev.with_columns(prev_t=pl.col("time").shift(1), prev_m=pl.col("message").shift(1))
    return ev.with_columns(run=(~same_key | starts.fill_null(True)).cum_sum())


def collapse_multiline(ev: pl.DataFrame) -> pl.DataFrame:
    """Lines of one event -> one row: same host/device/code, within ``COLLAPSE_S`` of the
    previous line and with a different text (an identical text is a repeat, not a continuation)."""
    source = _KEY[:-1]
    # an SXid ``Data`` line names no link: it continues the line above it
    ev = (
        ev.sort([*source, "line"])
        .with_columns(
            link=pl.when(pl.col("event_type") == "sxid")
            .then(pl.col("link").forward_fill().over(source))
            .otherwise("link")
        )
        .with_columns(lk=pl.col("link").fill_null(-1))
    )
    starts = ((pl.col("time") - pl.col("prev_t")).abs() > pl.duration(seconds=COLLAPSE_S)) | (
        pl.col("message") == pl.col("prev_m")
    )
    firsts = [
        *_KEY,
        "time",
        "host",
        "component_class",
        "component_id",
        "pci_bus",
        "uuid",
        "link",
        "action",
        "pid",
        "process",
        "line",
        "raw",
    ]
    return (
        _runs(ev, ["line"], starts)
        .group_by("run")
        .agg(
            *[pl.col(c).first() for c in firsts],
            severity=_worst(pl.col("severity")),
            message=pl.col("message")
            .unique(maintain_order=True)
            .str.join(" | ")
            .str.slice(0, MESSAGE_LIMIT),
        )
        .drop("run")
        .with_columns(pl.col("severity").fill_null(SXID_DEFAULT_SEVERITY))
    )


def merge_repeats(ev: pl.DataFrame, window_s: float) -> pl.DataFrame:
    """Repeats of the same (host, device, code, link) less than ``window_s`` after the previous one
    merge into the first, with ``count`` events."""
    starts = (pl.col("time") - pl.col("prev_t")) > pl.duration(microseconds=int(window_s * 1e6))
    out = (
        _runs(ev, ["time", "line"], starts)
        .group_by("run")
        .agg(
            pl.all().exclude("run", "prev_t", "prev_m", "severity").first(),
            severity=_worst(pl.col("severity")),
            count=pl.len().cast(pl.Int32),
        )
    )
    return out.drop("run").sort("line").rename({"line": "source_line"})
