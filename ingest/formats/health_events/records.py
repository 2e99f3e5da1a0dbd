"""The records of a health-event file, whatever holds them: a JSON document (an array of records,
or one object), JSON lines, or CSV with a header. Flat records are read by dotted paths in Arrow
(``Records.get``); nested documents (a node list, gpud's per-component lists) are handed to their
layout as Python objects (``Records.objects``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from dataclasses import field

import orjson
import polars as pl

from ingest.base import ParseContext
from ingest.base import json_error
from ingest.base import numbered_lines
from ingest.csv_records import csv_records

HEADER_SEARCH = 10  # CSV lines looked at for the header


class Unreadable(ValueError):
    """The file as a whole is not JSON or CSV (one quarantined record, with this reason)."""


@dataclass
class Records:
    """One record per row of ``frame``: ``line`` (1-based line, or position in a JSON array),
    ``raw`` (its text) and ``_shape`` (why it is not a record a layout can read, else null).
    ``columns``: a CSV header's names, normalised (``norm``), by field index."""

    frame: pl.DataFrame
    json: bool
    columns: dict[str, int] = field(default_factory=dict)
    document: object = None  # the whole file's JSON value, when it is one document

    def get(self, *paths: str) -> pl.Expr:
        """The first of ``paths`` each record has, as text (null: none). JSON: dotted paths
        into the record (``fault_type.Level``, ``healthevent.nodename``); a value that is an
        object or a list comes back as its JSON text. CSV: a header name (normalised)."""
        if self.json:
            return pl.coalesce(
                [pl.col("raw").str.json_path_match(json_path(p)) for p in paths]
            ).replace("", None)
        found = [self.columns[norm(p)] for p in paths if norm(p) in self.columns]
        if not found:
            return pl.lit(None, pl.Utf8)
        return pl.coalesce(
            [
                pl.col("fields").list.get(i, null_on_oob=True).str.strip_chars().replace("", None)
                for i in found
            ]
        )

    def objects(self) -> list[tuple[int, object]]:
        """(line, decoded value) of every readable JSON record, for layouts whose records nest
        (the unreadable ones: ``rejected``)."""
        if self.document is not None:
            doc = self.document
            return list(enumerate(doc if isinstance(doc, list) else [doc], start=1))
        good = self.frame.filter(pl.col("_shape").is_null())
        return [(line, orjson.loads(raw)) for line, raw in good.select("line", "raw").iter_rows()]

    def rejected(self) -> pl.DataFrame:
        """The records that could not be read (``line``, ``raw``, ``_shape``)."""
        return self.frame.filter(pl.col("_shape").is_not_null()).select("line", "raw", "_shape")


def norm(name: str) -> str:
    """A header or key name compared without case, spaces, punctuation or a parenthesised
    note: ``Event Time (UTC)`` -> ``eventtime``."""
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\(.*?\)", "", name.lower()))


def json_path(dotted: str) -> str:
    """``fault_type.Level`` -> ``$['fault_type']['Level']`` (bracket form: keys may hold ``$``
    or spaces, as MongoDB's ``{"$date": ...}`` does)."""
    return "$" + "".join("['" + k.replace("'", "\\'") + "']" for k in dotted.split("."))


def read_records(data: bytes, ctx: ParseContext) -> Records:
    """The file's records; raises ``Unreadable`` when it is neither JSON nor CSV with a header.
    A JSON document is decoded once by orjson and its array's records re-encoded one by one
    (JSON lines stay Arrow text: the scale path); a line of JSON lines that is not a JSON
    object spoils only itself."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    head = data.lstrip()[:1]
    if head in (b"[", b"{"):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            doc = None
        if doc is not None:
            items = doc if isinstance(doc, list) else [doc]
            raw = pl.Series("raw", [orjson.dumps(x) for x in items], pl.Binary).cast(pl.Utf8)
            frame = pl.DataFrame({"line": pl.int_range(1, len(items) + 1, eager=True), "raw": raw})
            frame = frame.with_columns(
                line=pl.col("line").cast(pl.Int64),
                _shape=pl.when(~pl.col("raw").str.starts_with("{")).then(
                    pl.lit("record is not a JSON object")
                ),
            )
            return Records(frame, True, document=doc)
        if head == b"[":
            try:
                json.loads(data.decode("utf-8", "replace"))
            except json.JSONDecodeError as exc:
                raise Unreadable(json_error(exc)) from None
        return _json_lines(data, ctx)
    return _csv(data, ctx)


def _json_lines(data: bytes, ctx: ParseContext) -> Records:
    lines = numbered_lines(data, ctx).filter(pl.col("raw").str.strip_chars() != "")
    valid = pl.col("raw").str.json_path_match("$").is_not_null()
    frame = lines.with_columns(
        _shape=pl.when(~valid)
        .then(pl.lit("line is not valid JSON"))
        .when(~pl.col("raw").str.strip_chars_start().str.starts_with("{"))
        .then(pl.lit("line is not a JSON object"))
    )
    return Records(frame, True)


def _csv(data: bytes, ctx: ParseContext) -> Records:
    recs = csv_records(numbered_lines(data, ParseContext()), ctx.delimiter or ",")
    if recs.height == 0:
        return Records(
            pl.DataFrame(schema={"line": pl.Int64, "raw": pl.Utf8, "_shape": pl.Utf8}), True
        )
    for i, fields in enumerate(recs["fields"].head(HEADER_SEARCH).to_list()):
        names = [norm(f) for f in fields or []]
        if len([n for n in names if n]) >= 3:  # host, time and what happened, at least
            columns = {n: j for j, n in reversed(list(enumerate(names))) if n}
            body = recs.slice(i + 1).with_columns(
                _shape=pl.coalesce(
                    "_shape",
                    pl.when(pl.col("fields").list.len() != len(names)).then(
                        pl.format(
                            f"expected {len(names)} fields (as the header), found {{}}",
                            pl.col("fields").list.len(),
                        )
                    ),
                )
            )
            return Records(body, False, columns)
    raise Unreadable(
        "health events: neither JSON nor CSV with a header (a node, a time and an event "
        "column) in the first lines"
    )
