"""Finding the candidate lines of a chunk (those holding a fault literal) at grep speed,
without splitting the chunk into lines; lines damaged by NUL bytes separately."""

import re

import numpy as np
import polars as pl

from ingest.base import ParseContext
from ingest.base import text_pieces

from .patterns import CANDIDATE_LITERALS

_BLOCK = 1 << 20  # the candidate search runs over newline-aligned blocks of about this size
_CANDIDATE_RE = "|".join(re.escape(lit) for lit in CANDIDATE_LITERALS)


def candidate_lines(data: bytes, ctx: ParseContext) -> pl.DataFrame:
    """Candidate lines (line number, text), found without splitting the chunk into lines.

    One regex pass over newline-aligned ~1 MiB blocks (the literal alternation runs as a SIMD
    multi-literal search) prefixes each hit with a byte the chunk does not contain; a literal
    search for that byte then gives the hit offsets. Only the lines around hits are cut out, and
    their numbers come from counting newlines between consecutive candidate lines. This keeps
    extraction near ``grep -c`` speed (benchmarks/bench_kernel.py)."""
    buf = data  # valid UTF-8 (``valid_utf8``): offsets index these bytes
    blocks = _blocks(buf)
    hits = _hit_offsets(blocks, buf)
    if len(hits) == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "raw": pl.Utf8})
    rfind, find, n = buf.rfind, buf.find, len(buf)
    starts = np.unique(
        np.fromiter((rfind(b"\n", 0, h) + 1 for h in hits.tolist()), np.int64, len(hits))
    )
    ends = [find(b"\n", s) for s in starts.tolist()]
    raw = [buf[s : (e if e >= 0 else n)].decode("utf-8") for s, e in zip(starts.tolist(), ends)]
    # newlines before each candidate line: counted over the line-aligned stretches between them
    seg = np.concatenate(([0], starts)).astype(np.int64)
    gaps = text_pieces(buf, seg).str.count_matches("\n").cast(pl.Int64).cum_sum()
    return pl.DataFrame({"line": gaps + (ctx.line_offset + 1), "raw": raw}).with_columns(
        pl.col("raw").str.strip_suffix("\r")
    )


def nul_lines(buf: bytes, ctx: ParseContext) -> pl.DataFrame:
    """Lines holding NUL bytes (a crash leaves them in logs) that hold a candidate literal once
    the NULs are removed: (line, raw without the NULs, nul_raw: the text with each NUL shown
    as ``\\0``). A NUL can split a literal (``NV\\0RM``) or a code (``7\\09``): such a line
    is a damaged record, not a record and not nothing."""
    a = np.frombuffer(buf, np.uint8)
    newlines = np.flatnonzero(a == 10)
    before = np.searchsorted(newlines, np.flatnonzero(a == 0))  # newlines before each NUL
    idx = np.unique(before)
    starts = np.concatenate(([0], newlines + 1))[idx]
    ends = np.concatenate((newlines, [len(buf)]))[idx]
    text = [
        buf[s:e].decode("utf-8").removesuffix("\r")
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    df = pl.DataFrame(
        {"line": pl.Series(idx + 1 + ctx.line_offset, dtype=pl.Int64), "nul_raw": text}
    )
    return (
        df.with_columns(raw=pl.col("nul_raw").str.replace_all("\x00", "", literal=True))
        .filter(pl.col("raw").str.contains(_CANDIDATE_RE))
        .with_columns(pl.col("nul_raw").str.replace_all("\x00", "\\0", literal=True))
        .select("line", "raw", "nul_raw")
    )


def _blocks(buf: bytes) -> pl.DataFrame:
    """(block text, byte offset of the block) over newline-aligned ~_BLOCK-byte pieces of
    ``buf`` (valid UTF-8) without copying it."""
    cuts, find, p = [0], buf.find, _BLOCK
    while p < len(buf) and (nl := find(b"\n", p)) >= 0:
        cuts.append(nl + 1)
        p = nl + 1 + _BLOCK
    if cuts[-1] != len(buf):
        cuts.append(len(buf))
    cuts = np.array(cuts, dtype=np.int64)
    return pl.DataFrame({"block": text_pieces(buf, cuts), "base": cuts[:-1]})


def _hit_offsets(blocks: pl.DataFrame, buf: bytes) -> np.ndarray:
    """Byte offsets of candidate-literal matches (at least one in every line that holds one)."""
    marker = next((chr(c) for c in range(32) if buf.find(bytes([c])) < 0), None)
    if marker is None:  # every control byte occurs: search the literals directly (slower)
        hits = blocks.select(h=pl.col("block").str.find_many(CANDIDATE_LITERALS) + pl.col("base"))[
            "h"
        ]
        return hits.explode().drop_nulls().to_numpy()
    marked = blocks.select(
        h=pl.col("block").str.replace_all(_CANDIDATE_RE, marker + "$0").str.find_many([marker]),
        base="base",
    ).with_row_index("b")
    # the k-th marker of a block sits k bytes after its hit
    hits = (
        marked.explode("h")
        .drop_nulls("h")
        .select(pl.col("h") - pl.int_range(pl.len()).over("b") + pl.col("base"))
    )
    return hits["h"].to_numpy()
