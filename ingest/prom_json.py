"""Prometheus HTTP API JSON (``/api/v1/query_range`` matrix, ``/api/v1/query`` vector) to
``gpu_samples``.

One record = one (timestamp, value) point of one series. Accepts one response object, a list
of them, or JSON lines of them. Labels map to columns as for dcgm-exporter text (``Hostname``,
``gpu``, ``UUID``, ``modelName``, MIG, pod labels); the host falls back to ``--host``, then to
the ``instance`` label without its port. DCGM blank sentinels become null values. Quarantined,
per record, with the reason: values that are not numbers, ``NaN`` / ``+Inf`` / ``-Inf`` (not
measurements), timestamps that are unreadable or outside the plausible window, points of a series
that names no GPU and no host (no ``gpu`` / ``UUID`` / ``pci_bus_id`` / ``Hostname`` /
``instance`` label and no ``--host``), a series or point of the wrong JSON shape, and, in JSON
lines, each line that is not JSON. An ``"status": "error"`` response or a ``scalar`` / ``string``
result is one quarantined record with Prometheus' own error text. An exact repeat of an earlier
point of the same series (a response saved twice into JSON lines) is an ordinary row here: the
warehouse stores it once and counts it as a duplicate (``rows_duplicate``).
"""

from __future__ import annotations

import json

import polars as pl

from ingest.base import (
    FormatSpec,
    ParseContext,
    ParseResult,
    implausible_time,
    normalize_pci,
    stand_ins,
    whole_file_quarantine,
)
from ingest.gpu_labels import (
    LABEL_COLUMNS,
    host_from_path,
    is_str_blank,
    sentinel_to_null,
    xid_metric,
)
from warehouse.schemas import QUARANTINE_COLUMNS, conform, quarantine_frame

SOURCE = "prometheus"


def _documents(data: bytes) -> tuple[list[tuple[int, object]], list[tuple[int, str, str]]]:
    """The (number, response object)s in a file (one object, a JSON array of them, or JSON
    lines; numbered by array position or line) and
    the JSON lines that do not parse, as (line, raw, error). Raises ``JSONDecodeError`` when
    nothing in the file is JSON."""
    text = data.decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
        return list(enumerate(doc if isinstance(doc, list) else [doc], start=1)), []
    except json.JSONDecodeError:
        docs, bad = [], []
        for n, ln in enumerate(text.splitlines(), start=1):
            if not ln.strip():
                continue
            try:
                docs.append((n, json.loads(ln)))
            except json.JSONDecodeError as exc:
                bad.append((n, ln[:500], f"JSON line is not JSON: {exc.msg} (column {exc.colno})"))
        if not docs:
            raise
        return docs, bad


def _series_shape_error(series, key: str) -> str | None:
    """Why a result entry is not a series this parser can read, else None."""
    if not isinstance(series, dict):
        return "not a JSON object"
    if not isinstance(series.get("metric", {}), dict):
        return "its metric is not an object of labels"
    if key == "values" and not isinstance(series.get("values", []), list):
        return "its values are not an array"
    return None


def _series_frame(series: dict, key: str) -> pl.DataFrame:
    """One series' points as (t, raw) text columns; a point that is not a [time, value] pair
    keeps its JSON text as ``raw`` (and no time) for its quarantine row."""
    points = series.get("values") if key == "values" else [series.get("value")]
    pairs = [
        (_text(p[0]), _text(p[1])) if isinstance(p, (list, tuple)) and len(p) == 2 else ("", json.dumps(p))
        for p in points or []
    ]
    t, raw = zip(*pairs, strict=True) if pairs else ((), ())
    return pl.DataFrame({"t": list(t), "raw": list(raw)}, schema={"t": pl.Utf8, "raw": pl.Utf8})


def _text(v) -> str:
    """A JSON scalar as the text Prometheus would have written (strings as they are)."""
    return "" if v is None else v if isinstance(v, str) else json.dumps(v)


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    try:
        docs, bad_docs = _documents(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return ParseResult({}, whole_file_quarantine(data, f"not JSON: {exc}"), 1)
    frames = []
    for n, doc in docs:
        if not isinstance(doc, dict) or doc.get("status", "success") != "success":
            err = doc.get("error", "unknown error") if isinstance(doc, dict) else "not an object"
            bad_docs.append(
                (n, json.dumps(doc)[:500], f"Prometheus response is not a success: {err}")
            )
            continue
        body = doc.get("data", doc)
        kind = body.get("resultType") if isinstance(body, dict) else None
        if kind not in ("matrix", "vector"):
            bad_docs.append(
                (n, json.dumps(doc)[:500], f"resultType {kind!r} is not matrix or vector")
            )
            continue
        key = "values" if kind == "matrix" else "value"
        result = body.get("result")
        if not isinstance(result, list):
            bad_docs.append((n, json.dumps(doc)[:500], f"{kind} result is not a JSON array"))
            continue
        for s_idx, series in enumerate(result):
            shape = _series_shape_error(series, key)
            if shape:
                bad_docs.append((n, json.dumps(series)[:500], f"series {s_idx}: {shape}"))
                continue
            labels = {str(k): str(v) for k, v in (series.get("metric") or {}).items()}
            f = _series_frame(series, key)
            cols = {col: labels.get(lab) for lab, col in LABEL_COLUMNS.items()}
            instance_host = labels.get("instance", "").rsplit(":", 1)[0] or None
            frames.append(
                f.with_columns(
                    metric=pl.lit(labels.get("__name__") or None, dtype=pl.Utf8),
                    **{c: pl.lit(v if v != "" else None, dtype=pl.Utf8) for c, v in cols.items()},
                    instance_host=pl.lit(instance_host, dtype=pl.Utf8),
                    xid=pl.lit(labels.get("xid"), dtype=pl.Utf8),
                    doc=pl.lit(n, dtype=pl.Int32),
                    series=pl.lit(s_idx, dtype=pl.Int32),
                    series_key=pl.lit(json.dumps(labels, sort_keys=True)),
                )
            )
    if frames:
        pts = pl.concat(frames, how="vertical").with_row_index("point", offset=1)
    else:
        pts = pl.DataFrame(
            schema={"point": pl.UInt32, "t": pl.Utf8, "raw": pl.Utf8, "metric": pl.Utf8,
                    **{c: pl.Utf8 for c in LABEL_COLUMNS.values()}, "instance_host": pl.Utf8, "xid": pl.Utf8,
                    "doc": pl.Int32, "series": pl.Int32, "series_key": pl.Utf8}
        )  # fmt: skip
    num = pl.col("raw").str.strip_chars().str.replace(r"^\+", "").cast(pl.Float64, strict=False)
    given_secs = pl.col("t").cast(pl.Float64, strict=False)
    secs = pl.when(given_secs.abs() < 1e12).then(given_secs)  # beyond: not a clock, overflows
    pts = pts.with_columns(
        value=num,
        time=pl.from_epoch((secs * 1e6).round().cast(pl.Int64, strict=False), time_unit="us"),
        identified=pl.any_horizontal(
            pl.col(c).is_not_null() for c in ("host", "gpu", "uuid", "pci_bus", "instance_host")
        )
        | pl.lit(ctx.host is not None),
    )
    value = pl.col("value")
    pts = pts.with_columns(
        error=pl.when(pl.col("metric").is_null())
        .then(pl.lit("series has no __name__ label"))
        .when(pl.col("time").is_null() & given_secs.is_not_null())
        .then(pl.format("timestamp {} s is out of range", "t"))
        .when(pl.col("time").is_null())
        .then(pl.lit("point has no numeric timestamp"))
        .when(value.is_null() & ~is_str_blank(pl.col("raw")))
        .then(pl.lit("non-numeric sample value: ") + pl.col("raw"))
        .when(value.is_infinite() | value.is_nan())
        .then(pl.lit("non-finite sample value (not a measurement): ") + pl.col("raw"))
        .when(~pl.col("identified"))
        .then(pl.lit("series names no GPU and no host (no gpu, UUID, pci_bus_id, Hostname or instance label); pass --host"))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )  # fmt: skip
    bad = pts.filter(pl.col("error").is_not_null())
    good = pts.filter(pl.col("error").is_null())
    fallback_host = ctx.host or host_from_path(ctx.path)
    samples = good.with_columns(
        metric=xid_metric(pl.col("metric"), pl.col("xid")),
        host=pl.coalesce(
            pl.col("host"), pl.lit(fallback_host, dtype=pl.Utf8), pl.col("instance_host")
        ),
        gpu=pl.col("gpu").cast(pl.Int32, strict=False),
        pci_bus=normalize_pci(pl.col("pci_bus")),
        value=sentinel_to_null(pl.col("value")),
        date=pl.col("time").dt.date(),
        cluster=pl.lit(ctx.cluster),
        source=pl.lit(SOURCE),
        source_file=pl.lit(ctx.path),
    ).drop(
        "point", "t", "raw", "instance_host", "xid", "doc", "series", "error", "series_key",
        "identified",
    )  # fmt: skip
    q_rows = bad.select(
        line=pl.col("point").cast(pl.Int64),
        raw=pl.format("doc {} series {}: {} {} = {}", "doc", "series", "metric", "t", "raw"),
        error="error",
    )
    quarantine = (
        pl.concat(
            [
                q_rows.cast(QUARANTINE_COLUMNS),
                quarantine_frame(
                    [n for n, _, _ in bad_docs],
                    [r for _, r, _ in bad_docs],
                    [e for _, _, e in bad_docs],
                ),
            ]
        )
        if bad_docs or q_rows.height
        else pl.DataFrame(schema=QUARANTINE_COLUMNS)
    )
    guessed = bool(fallback_host) and good["host"].is_null().any()
    return ParseResult(
        tables={"gpu_samples": conform("gpu_samples", samples)},
        quarantine=quarantine,
        records=pts.height + len(bad_docs),
        stand_ins=stand_ins(ctx, samples, guessed),
    )


def detect(head: bytes, name: str) -> int:
    text = head[:4096].decode("utf-8", errors="replace")
    if '"resultType"' in text and ('"matrix"' in text or '"vector"' in text):
        return 90
    if '"resultType"' in text:
        return 60
    return 0


FORMAT = FormatSpec(
    name="prom-json",
    primary="gpu_samples",
    parse=parse,
    detect=detect,
    description="Prometheus HTTP API query_range (matrix) / query (vector) JSON",
)
