"""A refactor's behaviour check: digest every warehouse table of a home row for row, then compare
two digests (before and after a change).

    python -m benchmarks.warehouse_digest digest --home H --out before.json
    (change the code, build the same data into another home)
    python -m benchmarks.warehouse_digest digest --home H2 --out after.json
    python -m benchmarks.warehouse_digest compare before.json after.json

What a digest leaves out, so that two builds of the same data compare equal:
- the clocks of the build itself (``CLOCK_COLUMNS``: when a batch was ingested, an analysis ran);
- the checkout and the home: every string has them replaced by ``<repo>`` and ``<home>``;
- identifiers hashed from paths or build batches (``ID_COLUMNS``): only whether each is set;
- float noise below 9 significant digits, in float columns and in JSON documents' numbers.
Rows are sorted before hashing, so a table's row order does not matter; each column is also
hashed alone, so a difference names its columns. Exit 0 when the digests are equal, 1 when not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import polars as pl

from warehouse.schemas import TABLES
from warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[1]
SIGNIFICANT = 9
CLOCK_COLUMNS = {"ingested_at", "at", "started_at", "finished_at"}
# hashed from file paths or batch contents: equal data from another folder gives other values
ID_COLUMNS = {"event_id", "caused_by", "cause_event"}
BATCH_TABLES = {"ingest_manifest", "pull_log", "quarantine"}  # their `batch` is a build id


def _normalised(name: str, df: pl.DataFrame, home: Path) -> pl.DataFrame:
    exprs = []
    for col, dtype in df.schema.items():
        if col in CLOCK_COLUMNS and dtype.is_temporal():
            continue
        if col in ID_COLUMNS or (col == "batch" and name in BATCH_TABLES):
            exprs.append(pl.col(col).is_not_null().alias(col))
        elif dtype.is_float():
            exprs.append(pl.col(col).round_sig_figs(SIGNIFICANT))
        elif dtype == pl.String:
            text = (
                pl.col(col)
                .str.replace_all(str(home), "<home>", literal=True)
                .str.replace_all(str(REPO), "<repo>", literal=True)
            )
            if df[col].str.starts_with("{").any():  # a JSON document: round its numbers too
                text = text.map_elements(_rounded_json, return_dtype=pl.String)
            exprs.append(text)
        else:
            exprs.append(pl.col(col))
    return df.select(exprs)


def _rounded_json(text: str) -> str:
    try:
        doc = json.loads(text, parse_float=lambda v: float(f"{float(v):.{SIGNIFICANT}g}"))
    except ValueError:
        return text
    return json.dumps(doc, sort_keys=True)


def _sha(lines: pl.Series) -> str:
    return hashlib.sha256("\n".join(lines.sort().fill_null("").to_list()).encode()).hexdigest()


def digest(home: Path) -> dict[str, dict]:
    """Per table: its row count, one hash of its sorted rows, one hash per column."""
    home = home.resolve()
    wh = Warehouse(home, read_only=True)
    out: dict[str, dict] = {}
    for name in sorted(TABLES):
        df = _normalised(name, wh.read(name), home)
        text = df.select(
            (pl.struct(c).struct.json_encode() if t.is_nested() else pl.col(c).cast(pl.String))
            .fill_null("\u2205")
            .alias(c)
            for c, t in df.schema.items()
        )
        rows = text.select(pl.concat_str(pl.all(), separator="\x1f").alias("row"))["row"]
        out[name] = {
            "rows": df.height,
            "sha": _sha(rows),
            "columns": {c: _sha(text[c]) for c in text.columns},
        }
    return out


def compare(before: dict, after: dict) -> list[str]:
    """One line per difference; none when the digests are equal."""
    lines = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if a is None or b is None:
            lines.append(f"{name}: only in {'after' if a is None else 'before'}")
        elif a["sha"] != b["sha"]:
            cols = sorted(
                c
                for c in set(a["columns"]) | set(b["columns"])
                if a["columns"].get(c) != b["columns"].get(c)
            )
            lines.append(f"{name}: rows {a['rows']} -> {b['rows']}; columns differ: {cols}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("digest", help="digest a home's tables into a JSON file")
    d.add_argument("--home", type=Path, required=True)
    d.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare", help="compare two digests")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.command == "digest":
        args.out.write_text(json.dumps(digest(args.home), indent=1, sort_keys=True))
        print(f"{len(TABLES)} tables digested into {args.out}")
        return 0
    diffs = compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()))
    print("\n".join(diffs) if diffs else "equal: every table, row for row")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
