"""CSV records of numbered lines, split per record (RFC 4180 quoting), for the parsers of CSV
exports: a malformed record spoils only itself."""

from __future__ import annotations

import re

import polars as pl


def csv_records(lines: pl.DataFrame, delim: str) -> pl.DataFrame:
    """CSV records of numbered lines: ``line`` (first physical line), ``raw`` (the record's
    text), ``fields`` (unquoted values) and ``_shape`` (why the record cannot be split, else
    null). Blank and '#' comment lines are not records.

    A record spans lines only inside a quoted field (RFC 4180). A quote that is never closed
    spoils only its own line: that line is quarantined and the records after it are read as if
    it were absent; a multi-line "record" that does not split into fields (two stray quotes
    pairing up across lines) falls back to one record per line. Vectorized: quote parity per
    line, cumulative sums and one field regex.
    """
    if lines.height == 0:
        return pl.DataFrame(
            schema={"line": pl.Int64, "raw": pl.Utf8, "fields": pl.List(pl.Utf8), "_shape": pl.Utf8}
        )
    lines = lines.with_columns(
        odd=(pl.col("raw").str.count_matches('"', literal=True) % 2).cast(pl.Int64)
    )
    groups, unterminated = [], []
    while lines.height:
        lines = lines.with_columns(
            rec=((pl.col("odd").cum_sum() - pl.col("odd")) % 2 == 0).cum_sum()
        )
        if lines["odd"].sum() % 2 == 0:
            groups.append(lines)
            break
        last = lines.filter(
            pl.col("rec") == lines["rec"].max()
        )  # the record whose quote never closes
        groups.append(lines.filter(pl.col("rec") < last["rec"][0]))
        unterminated.append(last.head(1))
        lines = last.slice(1).drop("rec")
    lines = pl.concat(
        [g.with_columns(rec=pl.col("rec") + 1_000_000_000 * i) for i, g in enumerate(groups)]
    )
    lines = lines.with_columns(n_lines=pl.len().over("rec"))
    multi = (
        lines.filter(pl.col("n_lines") > 1)
        .group_by("rec", maintain_order=True)
        .agg(line=pl.col("line").first(), raw=pl.col("raw").str.join("\n"), n_lines=pl.len())
    )
    recs = split_fields(
        pl.concat([lines.filter(pl.col("n_lines") == 1).select(multi.columns), multi]), delim
    )
    # multi-line records that do not split: back to one record per line
    spoilt = recs.filter((pl.col("n_lines") > 1) & pl.col("_shape").is_not_null())["rec"]
    if spoilt.len():
        single = lines.filter(pl.col("rec").is_in(spoilt.implode())).select(
            "line", "raw", "odd", n_lines=pl.lit(1, pl.UInt32)
        )
        recs = pl.concat(
            [
                recs.filter(~pl.col("rec").is_in(spoilt.implode())).drop("rec"),
                split_fields(single, delim).drop("odd"),
            ]
        ).sort("line")
    else:
        recs = recs.drop("rec")
    tails = (
        pl.concat(unterminated).select("line", "raw")
        if unterminated
        else pl.DataFrame(schema={"line": pl.Int64, "raw": pl.Utf8})
    )
    recs = pl.concat(
        [recs.drop("n_lines"), split_fields(tails, delim).drop("odd", strict=False)],
        how="diagonal_relaxed",
    )
    recs = recs.with_columns(
        _shape=pl.when(
            pl.col("line").is_in(tails["line"].implode())
            | ((pl.col("raw").str.count_matches('"', literal=True) % 2) == 1)
        )
        .then(pl.lit("unterminated quoted field (an odd number of '\"')"))
        .otherwise("_shape")
    ).sort("line")
    stripped = pl.col("raw").str.strip_chars()
    return recs.filter((stripped != "") & ~stripped.str.starts_with("#")).select(
        "line", "raw", "fields", "_shape"
    )


def split_fields(recs: pl.DataFrame, delim: str) -> pl.DataFrame:
    """Add ``fields`` (values, quotes removed) and ``_shape`` (error when the record's text is
    not a sequence of CSV fields) to records with a ``raw`` column."""
    d = re.escape(delim)
    field = (
        rf'(?:"(?:[^"]|"")*"|[^"{d}\r\n]*)'  # a quoted or a plain field (\r\n only inside quotes)
    )
    quoted = recs.filter(pl.col("raw").str.contains('"', literal=True))
    pieces = (pl.lit(delim) + pl.col("raw")).str.extract_all(rf"{d}{field}")
    tiled = pieces.list.eval(pl.element().str.len_chars()).list.sum() == pl.col(
        "raw"
    ).str.len_chars() + len(delim)
    values = pieces.list.eval(
        pl.element()
        .str.slice(len(delim))
        .str.replace(r'^"((?s:.*))"$', "$1")
        .str.replace_all('""', '"', literal=True)
    )
    quoted = quoted.with_columns(
        fields=values,
        _shape=pl.when(~tiled.fill_null(False)).then(
            pl.lit("a quote inside an unquoted field: not a CSV record")
        ),
    )
    plain = recs.filter(~pl.col("raw").str.contains('"', literal=True)).with_columns(
        fields=pl.col("raw").str.split(delim, literal=True), _shape=pl.lit(None, pl.Utf8)
    )  # the common case: no quotes, a plain split
    return pl.concat([plain, quoted])
