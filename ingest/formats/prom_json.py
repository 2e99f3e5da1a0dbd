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
point of the same series (a response saved twice into JSON lines, a series an answer repeats) is
an ordinary row here: the warehouse stores it once and counts it as a duplicate
(``rows_duplicate``), or quarantines it as a conflict when its value differs.
"""

from __future__ import annotations

import io
import json

import numpy as np
import orjson
import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import normalize_pci
from ingest.base import stand_ins
from ingest.base import whole_file_quarantine
from ingest.gpu_labels import FOLDED_LABELS
from ingest.gpu_labels import NO_GPU_NO_HOST
from ingest.gpu_labels import folded_metric
from ingest.gpu_labels import host_from_path
from ingest.gpu_labels import is_str_blank
from ingest.gpu_labels import sentinel_to_null
from ingest.prom_series import LABEL_SCHEMA
from ingest.prom_series import RAW_LABELS
from ingest.prom_series import label_columns
from ingest.prom_series import label_exprs
from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import conform
from warehouse.schemas import quarantine_frame

SOURCE = "prometheus"


def _documents(data: bytes) -> tuple[list[tuple[int, object]], list[tuple[int, str, str]]]:
    """The (number, response object)s in a file (one object, a JSON array of them, or JSON
    lines; numbered by array position or line) and
    the JSON lines that do not parse, as (line, raw, error). Raises ``JSONDecodeError`` when
    nothing in the file is JSON. A well-formed response is read by orjson (several times faster);
    anything it refuses (NaN literals, invalid UTF-8, JSON lines) by the standard library."""
    try:
        doc = orjson.loads(data)
        return list(enumerate(doc if isinstance(doc, list) else [doc], start=1)), []
    except orjson.JSONDecodeError:
        pass
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


def _points(series: dict, key: str) -> tuple[list, list, list]:
    """One series' points as (seconds, time text, value text) lists. A well-formed series
    (every point a [number, string] pair, as Prometheus writes them) is taken whole, with no
    per-point Python work and no time text (written from the seconds where a quarantine row
    needs it); otherwise point by point, where a point that is not a [time, value] pair keeps
    its JSON text as its value text (and no time) for its quarantine row."""
    points = (series.get("values") if key == "values" else [series.get("value")]) or []
    if points and set(map(type, points)) <= {list, tuple} and set(map(len, points)) == {2}:
        t, raw = zip(*points, strict=True)
        if set(map(type, t)) <= {int, float} and set(map(type, raw)) == {str}:
            return list(t), [None] * len(t), list(raw)
    pairs = [
        (_text(p[0]), _text(p[1]))
        if isinstance(p, (list, tuple)) and len(p) == 2
        else ("", json.dumps(p))
        for p in points
    ]
    t_text, raw = zip(*pairs, strict=True) if pairs else ((), ())
    return [None] * len(pairs), list(t_text), list(raw)


def _text(v) -> str:
    """A JSON scalar as the text Prometheus would have written (strings as they are)."""
    return "" if v is None else v if isinstance(v, str) else json.dumps(v)


_OUT_OF_RANGE = "timestamp out of range"  # written with the time text on the quarantined rows only

# the per-series columns ``_series_points`` gives every point: its labels, and where it stands
_SERIES_SCHEMA = {"metric": pl.Utf8, **LABEL_SCHEMA, "doc": pl.Int32, "series": pl.Int32}


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    read = _matrix(data)
    if read is not None:
        (points, series), bad_docs = read, []
    else:
        try:
            docs, bad_docs = _documents(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return ParseResult({}, whole_file_quarantine(data, f"not JSON: {exc}"), 1)
        points, series, bad_series = _series_points(docs)
        bad_docs += bad_series
    fallback_host = ctx.host or host_from_path(ctx.path)
    pts = _checked(_with_series(points, series, ctx, fallback_host), ctx)
    good = pts.filter(pl.col("error").is_null())
    samples = _samples(good, ctx)
    guessed = bool(fallback_host) and good["host"].is_null().any()
    return ParseResult(
        tables={"gpu_samples": conform("gpu_samples", samples)},
        quarantine=_quarantine(pts.filter(pl.col("error").is_not_null()), bad_docs),
        records=pts.height + len(bad_docs),
        stand_ins=stand_ins(ctx, samples, guessed),
    )


def _result(doc) -> tuple[str, list | None, str | None]:
    """A matrix or vector response's point key and series, or why it is not one (one record)."""
    if not isinstance(doc, dict) or doc.get("status", "success") != "success":
        err = doc.get("error", "unknown error") if isinstance(doc, dict) else "not an object"
        return "", None, f"Prometheus response is not a success: {err}"
    body = doc.get("data", doc)
    kind = body.get("resultType") if isinstance(body, dict) else None
    if kind not in ("matrix", "vector"):
        return "", None, f"resultType {kind!r} is not matrix or vector"
    result = body.get("result")
    if not isinstance(result, list):
        return "", None, f"{kind} result is not a JSON array"
    return ("values" if kind == "matrix" else "value"), result, None


def _series_points(
    docs: list[tuple[int, object]],
) -> tuple[pl.DataFrame, pl.DataFrame, list[tuple[int, str, str]]]:
    """Points, series labels and misshapen entries of the responses: a Python step per series."""
    secs, texts, raws, lengths, per_series, bad = [], [], [], [], [], []
    for n, doc in docs:
        key, result, why = _result(doc)
        if why:
            bad.append((n, json.dumps(doc)[:500], why))
            continue
        for s_idx, series in enumerate(result):
            shape = _series_shape_error(series, key)
            if shape:
                bad.append((n, json.dumps(series)[:500], f"series {s_idx}: {shape}"))
                continue
            labels = {str(k): str(v) for k, v in (series.get("metric") or {}).items()}
            t, t_text, raw = _points(series, key)
            secs.extend(t)
            texts.extend(t_text)
            raws.extend(raw)
            lengths.append(len(t))
            per_series.append({
                "metric": labels.get("__name__") or None,
                **label_columns(labels),
                "doc": n,
                "series": s_idx,
            })  # fmt: skip
    points = pl.DataFrame(
        {"secs": secs, "t": texts, "raw": raws},
        schema={"secs": pl.Float64, "t": pl.Utf8, "raw": pl.Utf8},
    ).with_row_index("point", offset=1)
    series = pl.DataFrame(per_series, schema=_SERIES_SCHEMA).with_columns(
        points=pl.Series(lengths, dtype=pl.Int64)
    )
    return points, series, bad


_MATRIX = {
    "status": pl.Utf8,
    "data": pl.Struct({
        "resultType": pl.Utf8,
        "result": pl.List(pl.Struct({
            "metric": pl.Struct({label: pl.Utf8 for label in RAW_LABELS}),
            "values": pl.List(pl.List(pl.Utf8)),
        })),
    }),
}  # fmt: skip


def _matrix(data: bytes) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """The points and series of one matrix answer, as ``_series_points`` gives them, read by
    polars with no Python object per point (a pull's answers are millions of points): when the
    file is one successful matrix answer whose every series has its labels and values and every
    point is a pair of scalars. Anything else (None) is left to ``_documents`` and
    ``_series_points``, which say per record what is wrong with it. A label value or point that
    is not a JSON string (a TSDB writes none) is taken as polars' text of it, which may write a
    number or boolean otherwise than the point-by-point reading (``5`` for ``5.0``)."""
    if data.lstrip()[:1] != b"{":
        return None
    try:
        doc = pl.read_json(io.BytesIO(data), schema=_MATRIX)
    except pl.exceptions.PolarsError:  # not JSON, or not of this shape: read the slow way
        return None
    body = doc.select("status", pl.col("data").struct.unnest())
    if body.height != 1 or body.select("status", "resultType").row(0) != ("success", "matrix"):
        return None
    series = (
        body.select(pl.col("result").explode())
        .filter(pl.col("result").is_not_null())  # an empty result explodes to one null
        .with_row_index("series")
        .unnest("result")
    )
    if series["metric"].is_null().any() or series["values"].is_null().any():
        return None
    values = series["values"].explode().drop_nulls()  # an empty series explodes to one null
    if (values.list.len() != 2).any() or values.list.contains(None).any():
        return None
    first = values.list.get(0)
    secs = first.cast(pl.Float64, strict=False)
    points = pl.DataFrame(
        {
            "secs": secs,
            "t": pl.select(pl.when(secs.is_null()).then(first)).to_series(),
            "raw": values.list.get(1),
        }
    ).with_row_index("point", offset=1)
    labels = series.select("series", pl.col("metric").struct.unnest(), points="values")
    per_series = labels.select(
        **label_exprs(),
        doc=pl.lit(1, pl.Int32),
        series=pl.col("series").cast(pl.Int32),
        points=pl.col("points").list.len().cast(pl.Int64),
    )
    return points, per_series.cast(_SERIES_SCHEMA | {"points": pl.Int64})


def _with_series(
    points: pl.DataFrame, series: pl.DataFrame, ctx: ParseContext, fallback_host: str | None
) -> pl.DataFrame:
    """Each point with its series' columns, worked out once a series rather than once a point."""
    labels_of = series.drop("points").with_columns(
        identified=pl.any_horizontal(
            pl.col(c).is_not_null() for c in ("host", "gpu", "uuid", "pci_bus", "instance_host")
        )
        | pl.lit(ctx.host is not None),
        stored_metric=folded_metric(pl.col("metric"), pl.col),
        stored_host=pl.coalesce(
            pl.col("host"), pl.lit(fallback_host, dtype=pl.Utf8), pl.col("instance_host")
        ),
        stored_gpu=pl.col("gpu").cast(pl.Int32, strict=False),
        stored_pci=normalize_pci(pl.col("pci_bus")),
    )
    per_point = labels_of[np.repeat(np.arange(series.height), series["points"].to_numpy())]
    return pl.concat([points, per_point], how="horizontal")


def _checked(pts: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The points with value and time read, and ``error``: the first reason one cannot be stored."""
    num = pl.col("raw").str.strip_chars().str.replace(r"^\+", "").cast(pl.Float64, strict=False)
    given_secs = pl.coalesce("secs", pl.col("t").cast(pl.Float64, strict=False))
    secs = pl.when(given_secs.abs() < 1e12).then(given_secs)  # beyond: not a clock, overflows
    pts = pts.with_columns(
        value=num,
        time=pl.from_epoch((secs * 1e6).round().cast(pl.Int64, strict=False), time_unit="us"),
    )
    value = pl.col("value")
    return pts.with_columns(
        error=pl.when(pl.col("metric").is_null())
        .then(pl.lit("series has no __name__ label"))
        .when(pl.col("time").is_null() & given_secs.is_not_null())
        .then(pl.lit(_OUT_OF_RANGE))
        .when(pl.col("time").is_null())
        .then(pl.lit("point has no numeric timestamp"))
        .when(value.is_null() & ~is_str_blank(pl.col("raw")))
        .then(pl.lit("non-numeric sample value: ") + pl.col("raw"))
        .when(value.is_infinite() | value.is_nan())
        .then(pl.lit("non-finite sample value (not a measurement): ") + pl.col("raw"))
        .when(~pl.col("identified"))
        .then(pl.lit(NO_GPU_NO_HOST + "; pass --host"))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )


def _samples(good: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The good points as ``gpu_samples`` rows: the stored label columns, DCGM blanks as null."""
    return good.with_columns(
        metric="stored_metric",
        host="stored_host",
        gpu="stored_gpu",
        pci_bus="stored_pci",
        value=sentinel_to_null(pl.col("value")),
        date=pl.col("time").dt.date(),
        cluster=pl.lit(ctx.cluster),
        source=pl.lit(SOURCE),
        source_file=pl.lit(ctx.path),
    ).drop(
        "point", "secs", "t", "raw", "instance_host", "doc", "series", "error", "identified",
        "stored_metric", "stored_host", "stored_gpu", "stored_pci", *FOLDED_LABELS.values(),
    )  # fmt: skip


def _quarantine(bad: pl.DataFrame, bad_docs: list[tuple[int, str, str]]) -> pl.DataFrame:
    """Rejected points (numbered by point), then the responses, series, lines not read at all."""
    t_text = pl.coalesce(  # a whole second as JSON writes it (an integer)
        "t",
        pl.when(pl.col("secs") == pl.col("secs").round())
        .then(pl.col("secs").cast(pl.Int64, strict=False).cast(pl.Utf8))
        .otherwise(pl.col("secs").cast(pl.Utf8)),
        pl.col("secs").cast(pl.Utf8),
    )
    q_rows = bad.select(
        line=pl.col("point").cast(pl.Int64),
        raw=pl.format("doc {} series {}: {} {} = {}", "doc", "series", "metric", t_text, "raw"),
        error=pl.when(pl.col("error") == _OUT_OF_RANGE)
        .then(pl.format("timestamp {} s is out of range", t_text))
        .otherwise("error"),
    )
    if not (bad_docs or q_rows.height):
        return pl.DataFrame(schema=QUARANTINE_COLUMNS)
    return pl.concat(
        [
            q_rows.cast(QUARANTINE_COLUMNS),
            quarantine_frame(
                [n for n, _, _ in bad_docs],
                [r for _, r, _ in bad_docs],
                [e for _, _, e in bad_docs],
            ),
        ]
    )


def detect(head: bytes, name: str) -> int:
    text = head[:4096].decode("utf-8", errors="replace")
    if '"resultType"' in text and ('"matrix"' in text or '"vector"' in text):
        return 90
    if '"resultType"' in text:
        return 60
    return 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="gpu_samples",
    description="Prometheus HTTP API query_range (matrix) / query (vector) JSON",
)
