"""``goodput sql``: a read-only query of the warehouse, as a table, CSV or JSON."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pipelines.cli.errors import CliError
from pipelines.cli.home import reading_warehouse
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.options import output_format
from pipelines.cli.output import print_scope


def cmd_sql(args) -> int:
    """Print a read-only query's result as the DuckDB CLI does: a box table with "N rows (M shown)"
    (DuckDB's own renderer, which escapes terminal control characters and prints every DuckDB
    type), or every row as CSV / JSON, streamed. Nested values in CSV are JSON text."""
    import duckdb

    for d in args.allow_files:
        if not Path(d).is_dir():
            raise CliError(f"--allow-files {d}: not a directory")
    if args.max_rows < 1:
        raise CliError(f"--max-rows must be at least 1, not {args.max_rows}")
    wh = reading_warehouse(args)  # a scope: its views show only its rows
    try:
        with wh.readonly_relation(args.query, allow_files=args.allow_files) as rel:
            if rel is None:
                return 0
            if args.format == "table":
                print_scope(wh)
                rel.show(max_rows=args.max_rows, max_width=_terminal_width())
            else:  # the rows are the query's own: the scope is named on stderr
                if hasattr(wh, "scope"):
                    print(f"goodput: scope: {wh.scope.describe()}", file=sys.stderr)
                _write_rows(rel, args.format)
    except duckdb.Error as exc:
        raise CliError(str(exc).strip().splitlines()[0]) from None
    return 0


def _terminal_width() -> int:
    """The terminal's width; piped or redirected, wide enough for every column (as DuckDB's CLI)."""
    import shutil

    if not sys.stdout.isatty():
        return 100_000
    return max(80, shutil.get_terminal_size((160, 24)).columns)


def _write_rows(rel, fmt: str) -> None:
    """Every row of ``rel`` on stdout as CSV (header first) or one JSON array of row objects, in
    batches (memory does not grow with the result). Values are DuckDB's own text (CSV) or JSON
    (``to_json``): every type prints. On a terminal, control characters in CSV are escaped."""
    import csv

    names = rel.columns
    quoted = ['"' + c.replace('"', '""') + '"' for c in names]
    if fmt == "json":
        row = "to_json(struct_pack(" + ", ".join(f"{q} := {q}" for q in quoted) + "))::VARCHAR"
        reader = rel.project(row).to_arrow_reader(10_000)
        out, first = sys.stdout, True
        out.write("[")
        for batch in reader:
            for value in batch.column(0).to_pylist():
                out.write(("" if first else ",\n") + value)
                first = False
        out.write("]\n")
        return
    cols = [
        f"(CASE WHEN typeof({q}) SIMILAR TO '.*(\\[\\]|STRUCT|MAP|UNION).*' THEN "
        f"to_json({q})::VARCHAR ELSE {q}::VARCHAR END)"
        for q in quoted
    ]
    tty = sys.stdout.isatty()
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(names)
    for batch in rel.project(", ".join(cols)).to_arrow_reader(10_000):
        for row in zip(*(c.to_pylist() for c in batch.columns), strict=True):
            writer.writerow([_escape_controls(v) if tty and v else v for v in row])


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape_controls(text: str) -> str:
    """Terminal control characters (ESC, OSC, BEL ...) as \\xNN, so log content cannot drive the
    terminal; tab and newline are kept."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def add_sql(sub) -> None:
    command(
        sub,
        cmd_sql,
        option(
            "query", help="one SELECT (or EXPLAIN) statement over the warehouse's tables and views"
        ),
        option(
            "--allow-files",
            action="append",
            default=[],
            metavar="DIR",
            help="also let the query read files under DIR (repeatable)",
        ),
        output_format(
            "output: table (default, as the DuckDB CLI prints it), csv, or json (one array of "
            "row objects); csv and json print every row"
        ),
        option(
            "--max-rows",
            type=int,
            default=40,
            help="rows the table shows (default %(default)s; the count of all is printed)",
        ),
        scope=True,
        examples=(
            (
                'goodput sql "select cause_class, count(*) n from interruptions group by 1 order '
                'by 2 desc"'
            ),
            'goodput sql "select * from quarantine" --format csv > quarantine.csv',
        ),
        help="query the warehouse with DuckDB SQL (read-only)",
    )
