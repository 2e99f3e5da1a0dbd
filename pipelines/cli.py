# PYTHON_ARGCOMPLETE_OK  (argcomplete's marker: tab completion, see `goodput completion`)
"""The ``goodput`` command line (DESIGN.md, command-line section).

Every command takes ``--home`` and ``--warehouse-uri``. A user's mistake (missing path, unknown
format, bad duration, bad SQL, unreachable bucket) is one line on stderr and exit status 2, never
a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

SAMPLE_FLEET = Path(__file__).resolve().parent.parent / "sample_data" / "fleet"
SETTLE = os.environ.get("GOODPUT_SETTLE", "2s")  # ingest --settle and the landing sensor


class CliError(Exception):
    pass


_SIZE = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+))(k|K|Ki|M|Mi|G|Gi)?")
_SIZE_UNITS = {
    None: 1,
    "k": 10**3,
    "K": 10**3,
    "Ki": 2**10,
    "M": 10**6,
    "Mi": 2**20,
    "G": 10**9,
    "Gi": 2**30,
}
COUNT_FORMS = "a whole number like 32768, or with a suffix: 32k = 32,000, 32Ki = 32,768, 1M, 1Mi"


def parse_count(text: str) -> int:
    """A count of GPUs, nodes, rows ...: ``32768``, ``32k`` (32,000), ``32Ki`` (32,768), ``1.5M``.
    The type of every integer option (``build_parser``)."""
    m = _SIZE.fullmatch((text or "").strip().replace(",", "").replace("_", ""))
    value = Fraction(m.group(1)) * _SIZE_UNITS[m.group(2)] if m else None
    if value is None or value.denominator != 1:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} as a count; write {COUNT_FORMS}")
    return int(value)


_UNIT_S = {
    "s": 1,
    "sec": 1,
    "m": 60,
    "min": 60,
    "h": 3600,
    "hr": 3600,
    "d": 86400,
    "day": 86400,
    "w": 604800,
}
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_COMPOUND = re.compile(rf"(?:({_NUM})(d|day|h|hr|min|m|sec|s|w))+")
_ISO = re.compile(rf"P(?:({_NUM})W)?(?:({_NUM})D)?(?:T(?:({_NUM})H)?(?:({_NUM})M)?(?:({_NUM})S)?)?")


def parse_duration(text: str) -> float:
    """``90s``, ``10m``, ``1h30m``, ``1.5h``, ``2d`` or ISO-8601 ``PT1H30M`` to seconds. A bare
    number is an error: ``--mtti 1.5`` would be 1.5 seconds or 1.5 hours depending on who reads
    it."""
    t = (text or "").strip().replace(" ", "")
    if t == "0":  # zero needs no unit (--wait 0, --no-wait)
        return 0.0
    if _COMPOUND.fullmatch(t):
        return sum(
            float(n) * _UNIT_S[u] for n, u in re.findall(rf"({_NUM})(day|d|hr|h|min|m|sec|s|w)", t)
        )
    iso = _ISO.fullmatch(t.upper())
    if iso and t.upper() not in ("P", "PT") and any(iso.groups()):
        weeks, days, hours, minutes, seconds = (float(g or 0) for g in iso.groups())
        return weeks * 604800 + days * 86400 + hours * 3600 + minutes * 60 + seconds
    hint = "add a unit: s, m, h, d (e.g. 90s, 10m, 1h30m, 1.5h, 2d) or ISO-8601 like PT1H30M"
    if re.fullmatch(_NUM, t):
        raise CliError(f"duration {text!r} has no unit; {hint}")
    raise CliError(f"cannot read duration {text!r}; {hint}")


def parse_time(text: str | None) -> datetime | None:
    """ISO-8601; a zone is converted to UTC, a zone-less time is taken as UTC."""
    if text is None:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise CliError(
            f"cannot read time {text!r}; use ISO-8601 like 2026-01-05T10:00:00Z"
        ) from None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _parse_map(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    out = {}
    for item in text.split(","):
        canonical, sep, theirs = item.partition("=")
        if not sep or not canonical.strip() or not theirs.strip():
            raise CliError(f"--map wants canonical=theirs pairs, got {item!r}")
        out[canonical.strip()] = theirs.strip()
    return out


def _check_tz(tz: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise CliError(
            f"unknown time zone {tz!r}; use an IANA name like UTC or America/Chicago"
        ) from None
    return tz


def _warehouse(args, existing: bool = False, read_only: bool = False):
    """The warehouse of --home. ``existing``: for commands that only read it, a home that does not
    exist (a typo) is an error instead of a new, empty warehouse. ``read_only``: a reader's
    handle (works on a read-only home, never takes the writer lock)."""
    from warehouse.store import Warehouse, resolve_home

    if existing and not (args.warehouse_uri or os.environ.get("GOODPUT_WAREHOUSE_URI")):
        home = resolve_home(args.home)
        if not home.is_dir() or not any(home.iterdir()):
            raise CliError(
                f"no warehouse at {home}; check --home / $GOODPUT_HOME, or create one "
                "with `goodput ingest PATH...` or `goodput demo`"
            )
    wait = getattr(args, "wait", None)
    return Warehouse(
        args.home,
        args.warehouse_uri,
        wait=True if wait is None else parse_duration(wait),
        read_only=read_only,
    )


def add_scope_options(parser: argparse.ArgumentParser) -> None:
    """The scope flags (analysis/scope.py), the same on every command that takes them."""
    g = parser.add_argument_group(
        "scope",
        "analyse a slice of the fleet (default: the whole fleet); the slice's results are kept in "
        "HOME/scopes/<slug>/ and reused while the data is unchanged",
    )
    g.add_argument(
        "--from",
        dest="scope_from",
        metavar="ISO",
        help=(
            "start (inclusive, ISO-8601 UTC): job attempts overlapping [from, to) kept whole; "
            "events, telemetry and the observation window cut to it"
        ),
    )
    g.add_argument("--to", dest="scope_to", metavar="ISO", help="end (exclusive, ISO-8601 UTC)")
    g.add_argument(
        "--cluster",
        dest="scope_cluster",
        metavar="NAME",
        help="jobs of this cluster, hardware of its hosts",
    )
    g.add_argument(
        "--partition",
        dest="scope_partition",
        metavar="NAME",
        help="jobs of this partition, hardware of the hosts that ran them in the window",
    )
    g.add_argument(
        "--account",
        dest="scope_account",
        metavar="NAME",
        help="jobs of this account, hardware of the hosts that ran them in the window",
    )


def scope_settings(args) -> dict[str, str]:
    """The scope flags as ``GoodputConfig`` fields (empty: not given); checks from < to."""
    from analysis.scope import Scope, ScopeError

    start, end = (
        parse_time(getattr(args, "scope_from", None)),
        parse_time(getattr(args, "scope_to", None)),
    )
    try:
        Scope(start, end)
    except ScopeError as exc:
        raise CliError(str(exc)) from None
    out = {
        "scope_from": start.isoformat() if start else "",
        "scope_to": end.isoformat() if end else "",
    }
    for key in ("cluster", "partition", "account"):
        out[f"scope_{key}"] = getattr(args, f"scope_{key}", None) or ""
    return out


def _scoped(wh, config):
    """The warehouse a command reads: ``wh`` itself, or the scope's (built or reused)."""
    from analysis.scope import ScopeError
    from pipelines.run import PipelineError, build_scope

    if config.scope().whole:
        return wh
    try:
        with wh.writer():
            return build_scope(config)
    except (ScopeError, PipelineError) as exc:
        raise CliError(str(exc)) from None


# ----------------------------------------------------------------------------- commands
def llama3_cause_mix():
    """The simulator's fault mix: the published Llama 3 interruption table and its folding
    (``analysis.taxonomy``), injected because sample_data does not import analysis."""
    from analysis.taxonomy import LLAMA3_HOURS, LLAMA3_NODES, LLAMA3_TABLE
    from sample_data.model import CauseMix

    return CauseMix(LLAMA3_TABLE, LLAMA3_NODES, LLAMA3_HOURS)


def cmd_simulate(args) -> int:
    from sample_data.simulation import simulate, source_folders

    if args.nodes < 1 or args.gpus_per_node < 1 or args.days <= 0 or args.fault_scale <= 0:
        raise CliError("--nodes, --gpus-per-node, --days and --fault-scale must be positive")
    if parse_duration(args.scrape_interval) < 1:
        raise CliError("--scrape-interval must be at least 1s")
    summary = simulate(
        Path(args.out),
        llama3_cause_mix(),
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        days=args.days,
        seed=args.seed,
        fault_scale=args.fault_scale,
        scrape_interval_s=int(parse_duration(args.scrape_interval)),
    )
    out = Path(args.out).resolve()
    print(f"wrote synthetic fleet to {out}")
    for k, v in summary.items():
        print(f"  {k}: {v}")
    folders = " ".join(shlex.quote(str(p)) for p in source_folders(out))
    print(f"next: goodput ingest {folders} --cluster {summary.get('cluster', 'simfleet')}")
    return 0


def ingest_context(args):
    from ingest.base import ParseContext

    return ParseContext(
        cluster=args.cluster,
        tz=_check_tz(args.tz),
        host=args.host,
        time=parse_time(args.time),
        fields=tuple(f.strip() for f in args.fields.split(",")) if args.fields else None,
        delimiter=args.delimiter,
        column_map=_parse_map(args.map),
        options={"exclude_hosts": _host_list(args.exclude_hosts)}
        if getattr(args, "exclude_hosts", None)
        else {},
        **(
            {"not_before": parse_time(args.not_before)} if getattr(args, "not_before", None) else {}
        ),
    )


def _host_list(path: str) -> tuple[str, ...]:
    """Every whitespace-separated word of a file: a plain host list, or a node table whose
    rows name the host among other columns (Titan's titan.service.txt)."""
    try:
        return tuple(sorted(set(Path(path).read_text(errors="replace").split())))
    except OSError as exc:
        raise CliError(f"--exclude-hosts {path}: {exc.strerror or exc}") from None


class ReadProgress:
    """How far a large file has been read, on one terminal line rewritten at most twice a
    second (``ingest_paths(reading=...)``)."""

    def __init__(self, every_s: float = 0.5):
        import time

        self.clock, self.every_s, self.last, self.shown = time.monotonic, every_s, 0.0, False

    def __call__(self, path: Path, done: int, size: int | None) -> None:
        if self.clock() - self.last < self.every_s:
            return
        self.last = self.clock()
        of = (
            f" of {size / 2**20:,.0f} MiB ({100 * done / size:.0f}%)" if size else " (decompressed)"
        )
        sys.stderr.write(f"\r\x1b[K  reading {path.name}: {done / 2**20:,.0f} MiB{of}")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def cmd_ingest(args) -> int:
    from ingest.runner import checked_files, ingest_paths

    def progress(i, n, path):
        if n > 20 and (i % max(1, n // 20) == 0):
            print(f"  [{i}/{n}] {path}", file=sys.stderr)

    ctx = ingest_context(args)
    checked_files(args.paths, args.format, args.jobs)  # a mistake fails before Dagster loads
    wh = _warehouse(args)
    from pipelines.run import recorded_ingest

    reading = (
        ReadProgress() if sys.stderr.isatty() else None
    )  # a terminal's, never a pipe's or a log's
    try:
        with wh.writer():
            reports = recorded_ingest(
                wh,
                lambda: ingest_paths(  # the paths: walked again, unreadable dirs reported
                    wh,
                    args.paths,
                    args.format,
                    ctx,
                    progress=progress,
                    replace_existing=args.replace,
                    jobs=args.jobs,
                    settle_s=parse_duration(args.settle),
                    reading=reading,
                ),
            )
            wh.refresh_catalog()
    finally:
        if reading is not None:
            reading.clear()
    failed = [r for r in reports if r.error]
    read = [r for r in reports if not r.skipped and not r.error]

    def gave_nothing(r) -> bool:  # every record rejected, or the file could not be parsed
        return not r.done or bool(r.rows_quarantined and not r.rows_ok and not r.rows_duplicate)

    # an empty file (a log just rotated) has no record to reject: announced, not a failure
    empty = [r for r in read if r.done and r.bytes == 0]
    rejected = [r for r in read if gave_nothing(r) and r not in empty]
    new = [r for r in read if not gave_nothing(r)]
    skipped = sum(r.skipped for r in reports)
    dup = sum(r.rows_duplicate for r in new)
    print(
        f"ingested {len(new)} file(s), {sum(r.rows_ok for r in new):,} rows, "
        f"{sum(r.rows_quarantined for r in new):,} quarantined"
        + (f", {dup:,} already stored" if dup else "")
        + (f"; {len(rejected)} rejected (every record quarantined)" if rejected else "")
        + (f"; {len(empty)} empty" if empty else "")
        + (f"; {skipped} already ingested (unchanged)" if skipped else "")
        + (f"; {len(failed)} not read" if failed else "")
    )
    for r in failed:
        print(f"warning: {r.path}: {r.error}", file=sys.stderr)
    for r in reports:
        if r.held_back:
            print(
                f"warning: {r.path}: its last {r.held_back:,} byte(s) are a line without its "
                "newline yet: not read; read by the ingest after the line is complete",
                file=sys.stderr,
            )
    for r in rejected:
        if not r.done:
            print(
                f"warning: {r.path}: could not be parsed; quarantined, and tried again by the "
                "next ingest",
                file=sys.stderr,
            )
        else:
            # most often the wrong options (--fields, --delimiter, --format, --tz); the parsers'
            # reasons say which, and how to fix it; another --format reads the file again
            errors = wh.read("quarantine", f"sha256 = '{r.sha256}'")["error"].value_counts(
                sort=True
            )
            reason = errors["error"][0] if errors.height else "see the quarantine table"
            print(
                f"warning: {r.path}: every record rejected ({r.rows_quarantined}): {reason}",
                file=sys.stderr,
            )
    for r in empty:
        print(
            f"warning: {r.path}: empty file: nothing to read (recorded; a later version is read)",
            file=sys.stderr,
        )
    for r in new:
        if r.rows_quarantined:
            print(
                f"warning: {r.path}: {r.rows_quarantined} record(s) quarantined "
                f"(goodput sql \"select * from quarantine where sha256='{r.sha256}'\")",
                file=sys.stderr,
            )
    for line in _sacct_gaps(wh, [r.path for r in new if r.format == "sacct" and r.rows_ok]):
        print(line, file=sys.stderr)
    for line in _stand_in_notes(new):
        print(line, file=sys.stderr)
    print(f"warehouse: {wh.db_path}")
    if new:
        print(
            f"next: goodput{f' --home {shlex.quote(args.home)}' if args.home else ''} build   "
            "(then: goodput report)"
        )
    if rejected:
        return EXIT_REJECTED
    return 0


def _stand_in_notes(reports) -> list[str]:
    """One line per kind of stand-in the run's files used (``ingest.base.STAND_INS``), with the
    count of files: once per run, not once per file (a directory of scrapes has thousands)."""
    from ingest.base import STAND_IN_HOST, STAND_IN_TIME

    fix = {
        STAND_IN_TIME: (
            "carry no record times: each one's modification time stands in",
            "--time ISO",
        ),
        STAND_IN_HOST: (
            "name no host: each one's host was taken from its file name",
            "--host NAME",
        ),
    }
    lines = []
    for kind, (what, option) in fix.items():
        files = [r.path for r in reports if kind in r.stand_ins]
        if files:
            lines.append(
                f"note: {len(files)} file(s) {what}, e.g. {files[0]} (give {option} to set it; "
                f"the manifest's stand_ins column lists them)"
            )
    return lines


# the sacct fields attribution and GPU-hours need, by the job_attempts column they fill
SACCT_NEEDS = {"Start": "start_time", "End": "end_time", "NodeList": "nodes", "AllocTRES": "n_gpus"}


def _sacct_gaps(wh, paths: list[str]) -> list[str]:
    """A warning per sacct dump none of whose jobs has a field of ``SACCT_NEEDS`` (a plain
    ``sacct -P`` exports none of them), naming the sacct command that exports every field the
    parser reads (the `slurm` source kind's)."""
    if not paths:
        return []
    import polars as pl

    from sources.slurm import SACCT_FIELDS

    def filled(column: str) -> pl.Expr:  # any row has it (a list: a non-empty one)
        col = pl.col(column)
        return (
            ((col.list.len() > 0) if column == "nodes" else col.is_not_null()).any().alias(column)
        )

    files = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    have = (
        wh.read("job_attempts", f"source_file IN ({files})")
        .group_by("source_file")
        .agg(pl.len().alias("jobs"), *map(filled, SACCT_NEEDS.values()))
    )
    command = (
        f"sacct --parsable2 --allocations --duplicates --format={','.join(SACCT_FIELDS)} -S "
        "START -E END"
    )
    lines = []
    for r in have.sort("source_file").iter_rows(named=True):
        missing = [field for field, column in SACCT_NEEDS.items() if not r[column]]
        if missing:
            lines.append(
                f"warning: {r['source_file']}: none of its {r['jobs']:,} job(s) has "
                f"{', '.join(missing)}: interruptions, nodes and GPU-hours need them; export them "
                f"with: {command}"
            )
    return lines


def cmd_pull(args) -> int:
    """Pull live sources. Exit 0 when every window was pulled, 1 when some source (or one of its
    targets) failed: what the others gave is stored, and the next pull catches up."""
    from pipelines.resources import select_sources
    from sources.pull import cursors, plan, pull

    since, until = parse_time(args.since), parse_time(args.until)
    if since and until and since >= until:
        raise CliError(f"--since {args.since} is not before --until {args.until}")
    wh = _warehouse(args, existing=args.dry_run, read_only=args.dry_run)  # a dry run only reads
    sources = select_sources(wh, args.sources)
    if not sources:
        raise CliError(
            f"no sources configured: write {wh.home / 'sources.toml'} (see docs/connect.md)"
        )
    if args.dry_run:
        got = cursors(wh)
        for src in sources:
            t, pulled = got.get(src.name, (None, False))
            state = (
                f"pulled to {t.isoformat()}"
                if pulled
                else f"failed from {t.isoformat()}"
                if t
                else "never pulled"
            )
            print(f"{src.name} ({src.kind}, cluster {src.cluster}): {state}")
        for src, window, lines in plan(wh, sources, since, until):
            print(f"  {src.name} {window}:")
            for line in lines:
                print(f"    {line}")
        return 0
    from pipelines.run import recorded_pull

    with wh.writer():
        reports = recorded_pull(wh, lambda: pull(wh, sources, since, until))
        wh.refresh_catalog()
    for src in sources:
        mine = [r for r in reports if r.source == src.name]
        ok = [r for r in mine if r.status == "ok"]
        if not ok and mine:
            print(
                f"{src.name}: failed at {mine[-1].window.start:%Y-%m-%d %H:%M}; the next pull "
                "starts there again"
            )
            continue
        span = (
            f"{ok[0].window.start:%Y-%m-%d %H:%M}..{ok[-1].window.end:%Y-%m-%d %H:%M}"
            if ok
            else "nothing"
        )
        print(
            f"{src.name}: pulled {span} ({len(ok)} window(s)): {sum(r.rows_ok for r in ok):,} "
            f"rows, {sum(r.rows_quarantined for r in ok):,} quarantined, "
            f"{sum(r.rows_duplicate for r in ok):,} already stored"
        )
    failed = [r for r in reports if r.status == "failed"]
    for r in failed:
        where = f"{r.source}/{r.target}" if r.target else r.source
        print(f"warning: {where} {r.window}: {r.error}", file=sys.stderr)
    print(f"warehouse: {wh.db_path}")
    return 1 if failed else 0


def cmd_forget(args) -> int:
    wh = _warehouse(args)
    with wh.writer():
        known = wh.read("ingest_manifest")
        targets = []
        for t in args.targets:
            if t in set(known["sha256"].to_list()) or t in set(known["path"].to_list()):
                targets.append(t)
            elif Path(t).exists() and str(Path(t).resolve()) in set(known["path"].to_list()):
                targets.append(str(Path(t).resolve()))
            else:
                from ingest.runner import file_sha256

                sha = file_sha256(Path(t))[0] if Path(t).is_file() else None
                if sha not in set(known["sha256"].to_list()):
                    raise CliError(
                        f'{t}: not an ingested file path or sha256 (see: goodput sql "select '
                        'path, sha256 from ingest_manifest")'
                    )
                targets.append(sha)
        removed = wh.forget(targets)
        wh.refresh_catalog()
    print(
        f"forgot {len(targets)} file(s): "
        + (", ".join(f"{t} {n:,}" for t, n in sorted(removed.items())) or "no rows")
    )
    return 0


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
    wh = _reading_warehouse(args)  # a scope: its views show only its rows
    try:
        with wh.readonly_relation(args.query, allow_files=args.allow_files) as rel:
            if rel is None:
                return 0
            if args.format == "table":
                rel.show(max_rows=args.max_rows, max_width=_terminal_width())
            else:
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


def _config(args, **extra):
    from pipelines.resources import GoodputConfig

    wh = _warehouse(args)
    return GoodputConfig(home=str(wh.home), warehouse_uri=wh.parquet, **extra)


def cmd_demo(args) -> int:
    from pipelines.run import PipelineError, checks_line, run_pipeline, summary_lines
    from sample_data.simulation import source_folders

    if not SAMPLE_FLEET.exists():
        raise CliError(f"sample fleet not found at {SAMPLE_FLEET}")
    wh = _warehouse(args)
    with wh.writer():
        other = _other_data(wh)
    if other:
        raise CliError(
            f"{wh.home} holds other data ({other}): the demo would mix the sample fleet into it; "
            "run it in a home of its own: goodput demo --home DIR"
        )
    sources = source_folders(SAMPLE_FLEET)
    print(f"running the pipeline on the sample fleet ({SAMPLE_FLEET}) ...", file=sys.stderr)
    try:
        with wh.writer():
            checks = run_pipeline(
                wh, sources, cluster="simfleet", nodes_per_rack=4
            )  # sample fleet: racks of 4
    except PipelineError as exc:
        raise CliError(str(exc)) from None
    for line in summary_lines(wh):
        print(line)
    print(checks_line(checks))
    print(f"warehouse: {wh.db_path}")
    report = wh.reports / "goodput_report.html"
    if report.exists():
        print(f"report:    {report}")
    return 0


def _other_data(wh) -> str:
    """What ``wh`` holds besides the sample fleet (files ingested from elsewhere, pulled
    sources), in a few words; empty when nothing."""
    import polars as pl

    files = wh.read("ingest_manifest").filter(
        ~pl.col("path").str.contains(
            f"/{SAMPLE_FLEET.parent.name}/{SAMPLE_FLEET.name}/", literal=True
        )
    )
    pulls = wh.read("pull_log")["source"].unique()
    return ", ".join(
        ([f"{files.height} file(s) ingested, e.g. {files['path'][0]}"] if files.height else [])
        + ([f"pulled from {', '.join(sorted(pulls))}"] if len(pulls) else [])
    )


def _window_config(args, **extra):
    """The resource with the build / fit flags (observation window, as-of)."""
    from analysis.observation import check_bound

    observed_from, observed_to = parse_time(args.observed_from), parse_time(args.observed_to)
    now = datetime.now(UTC).replace(tzinfo=None)
    try:
        check_bound("--observed-from", observed_from, now)
        check_bound("--observed-to", observed_to, now)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.gpus_per_node < 1:
        raise CliError("--gpus-per-node must be >= 1")
    if observed_from and observed_to and observed_to <= observed_from:
        raise CliError(
            f"--observed-to ({observed_to}) must be after --observed-from ({observed_from})"
        )
    return _config(
        args,
        observed_from=observed_from.isoformat() if observed_from else "",
        observed_to=observed_to.isoformat() if observed_to else "",
        gpus_per_node=args.gpus_per_node,
        **extra,
    )


def cmd_build(args) -> int:
    wh = _warehouse(args, existing=True)
    assumed = {
        "ckpt_interval_s": parse_duration(args.ckpt_interval),
        "ckpt_cost_s": parse_duration(args.ckpt_cost),
        "restart_s": parse_duration(args.restart),
    }
    if assumed["ckpt_interval_s"] <= 0:
        raise CliError("--ckpt-interval must be a positive duration")
    if args.gpu_hour_cost < 0:
        raise CliError("--gpu-hour-cost must be >= 0 (0: no cost shown)")
    config = _window_config(
        args, **assumed, gpu_hour_cost=args.gpu_hour_cost, **scope_settings(args)
    )
    if not _holds_data(wh):
        raise CliError(
            f"nothing to build in {wh.home}: no record ingested or pulled yet "
            "(goodput ingest PATH..., goodput pull, or goodput demo)"
        )
    from pipelines.run import PipelineError, build, checks_line, status_lines, summary_lines

    if (
        not config.scope().whole
    ):  # the scope's analyses (the parent's rollups refreshed), its summary
        scoped = _scoped(wh, config)
        for line in [
            f"scope: {config.scope().describe()} ({scoped.home})",
            *status_lines(scoped),
            *summary_lines(scoped),
        ]:
            print(line)
        return 0
    with wh.writer():
        wh.refresh_catalog()
        try:
            result = build(config)
        except PipelineError as exc:
            raise CliError(str(exc)) from None
        finally:
            wh.refresh_catalog()  # what did build stays queryable, even after a failed step
    for line in status_lines(wh) + summary_lines(wh):
        print(line)
    print(checks_line(result.get_asset_check_evaluations()))
    print(f"warehouse: {wh.db_path}")
    if (report := wh.reports / "goodput_report.html").exists():
        print(f"report:    {report}")
    return 0


def cmd_project(args) -> int:
    from analysis.job import Job
    from analysis.whatif import append_projection, format_projection, project_one, read_rates_csv
    from warehouse.store import WarehouseBusy

    if args.gpus < 1 or args.gpus_per_node < 1 or (args.spares is not None and args.spares < 0):
        raise CliError("--gpus and --gpus-per-node must be >= 1 and --spares >= 0")
    if args.rates and args.mtti:
        raise CliError("give --rates FILE or --mtti DUR, not both")
    mtti = None if args.mtti is None else parse_duration(args.mtti) / 3600
    interval = None if args.interval == "auto" else parse_duration(args.interval) / 3600
    if mtti == 0 or interval == 0:
        raise CliError("--mtti and --interval must be positive durations")
    try:
        rates = read_rates_csv(args.rates) if args.rates else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    scope = scope_settings(args)
    wh = _warehouse(args, existing=True, read_only=not any(scope.values()))
    if any(scope.values()):
        wh = _scoped(wh, _config(args, **scope))
    horizon = None if args.horizon is None else parse_duration(args.horizon) / 3600
    if horizon == 0:
        raise CliError("--horizon must be a positive duration")
    try:
        job = Job(
            args.gpus,
            args.gpus_per_node,
            parse_duration(args.ckpt_cost),
            restart_s=parse_duration(args.restart),
            interval_hours=interval,
            spares=args.spares,
            wall_hours=Job.wall_hours if horizon is None else horizon,
        )
        res = project_one(
            wh, job, mtti, args.method, scope=args.scope, rates=rates, fleet_age=args.fleet_age
        )
    except ValueError as exc:
        raise CliError(
            f"no rates to project from ({exc}); run `goodput demo` or `goodput build` first, "
            "or pass --rates FILE.csv or --mtti DUR"
        ) from None
    if wh.writable():  # kept in goodput_projections: a brief write that never waits for a writer
        saver = _warehouse(args) if wh.read_only else wh
        try:
            with saver.writer(wait=0):
                append_projection(saver, res)
        except WarehouseBusy:
            print(
                f"goodput: note: {wh.home} is being written by {saver.lock_owner()}: this "
                "projection is printed, not saved",
                file=sys.stderr,
            )
    else:
        print(
            f"goodput: note: {wh.home} is read-only: this projection is printed, not saved",
            file=sys.stderr,
        )
    if _format(args) == "json":
        print(json.dumps(res, default=str))
    elif _format(args) == "csv":  # the scalar figures as one row (the classes: --json)
        import polars as pl

        _print_frame(
            pl.DataFrame([{k: v for k, v in res.items() if not isinstance(v, dict | list)}]),
            "csv",
            [],
            [],
            {},
        )
    else:
        print("\n".join(format_projection(res)))
    return 0


def cmd_fleetsim(args) -> int:
    from analysis.fleetsim.run import needs_warehouse, resolve
    from analysis.fleetsim.scenario import ScenarioError, load
    from analysis.fleetsim.sweep import format_study, study, to_json

    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be >= 1")
    try:
        spec = load(args.scenario)
        wh = _warehouse(args, existing=True, read_only=True) if needs_warehouse(spec) else None
        inputs = resolve(spec, wh)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None

    def progress(n):
        print(f"\rfleetsim: {spec['name']}: replication {n}", end="", file=sys.stderr, flush=True)

    try:
        res = study(spec, inputs, progress if sys.stderr.isatty() else None, args.workers)
    except ScenarioError as exc:
        raise CliError(str(exc)) from None
    if sys.stderr.isatty():
        print(file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(spec["name"], res), default=str))
    else:
        print("\n".join(format_study(spec["name"], res)))
    return 0


_MONTH = re.compile(r"\d{4}-(0[1-9]|1[0-2])")


def cmd_fit(args) -> int:
    import polars as pl

    from analysis.headline import unit_populations
    from analysis.observation import stored_window
    from pipelines.fit_table import format_fit_table

    if args.window != "all" and not _MONTH.fullmatch(args.window):
        raise CliError(f"--window {args.window!r}: use 'all' or a month YYYY-MM, e.g. 2026-01")
    scope = scope_settings(args)
    refits = any(scope.values()) or args.observed_from or args.observed_to
    wh = _warehouse(args, existing=True, read_only=not refits)
    if any(scope.values()):  # the scope's fits (with its window, if given)
        config = _window_config(args, **scope)
        wh = _scoped(wh, config)
        print(f"scope: {config.scope().describe()}")
    elif args.observed_from or args.observed_to:  # a new window: refit over it
        from pipelines.run import PipelineError, refit

        try:
            refit(_window_config(args))
        except PipelineError as exc:
            raise CliError(str(exc)) from None
        finally:
            wh.refresh_catalog()
    fr = wh.read("failure_rates")
    if fr.height == 0:
        raise CliError(
            "failure_rates is empty: run `goodput build` (or `goodput demo`) to fit the lifetimes "
            "first"
        )
    fitted = sorted(set(fr["window"].drop_nulls().to_list()))
    if args.window not in fitted:
        raise CliError(f"no fits for --window {args.window}; fitted: {', '.join(fitted)}")
    window = stored_window(wh)
    if _format(args) != "table":
        rows = fr.filter(pl.col("window") == args.window)
        _print_frame(
            rows if args.all_models else rows.filter(pl.col("selected")),
            _format(args),
            [],
            [],
            {"window": args.window},
        )
        return 0
    if window is not None:
        print(window.line())
    for pop, classes in unit_populations(fr):
        print(f"units from {pop or 'unknown'}: {classes}")
    print(format_fit_table(fr, all_models=args.all_models, window=args.window))
    return 0


def _print_rows(rows: list[tuple]) -> None:
    """Rows of cells (the first is the heading) as aligned columns."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def _cell(v, digits: str = ".3g") -> str:
    return "-" if v is None else f"{v:{digits}}" if isinstance(v, float) else str(v)


def cmd_mtbf(args) -> int:
    import polars as pl

    wh = _reading_warehouse(args)
    df = wh.read("system_mtbf")
    if df.height == 0:
        raise CliError(
            "system_mtbf is empty: ingest failure records (or a fleet's logs) and run `goodput "
            "build`"
        )
    df = df.filter((pl.col("period") == args.period) & (pl.col("grouping") == args.by))
    for col, want in (("system", args.system), ("source", args.source)):
        if want is not None:
            known = sorted(set(df[col].drop_nulls()))
            if want not in known:
                raise CliError(
                    f"no {col} {want!r} in system_mtbf (known: {', '.join(known) or 'none'})"
                )
            df = df.filter(pl.col(col) == want)
    df = df.sort("source", "system", "class", "period_start", nulls_last=False)
    if _format(args) != "table":
        _print_frame(df, _format(args), [], [], {"period": args.period, "by": args.by})
        return 0
    head = (
        "source",
        "system",
        args.period,
        "class",
        "failures",
        "exposure_h",
        "mtbf_h",
        "ci_low",
        "ci_high",
        "partial",
    )
    rows = [head] + [
        (
            r["source"],
            r["system"],
            r["label"],
            r["class"] or "all",
            str(r["failures"]),
            f"{r['exposure_hours']:,.0f}",
            _cell(r["mtbf_hours"]),
            _cell(r["mtbf_ci_low"]),
            _cell(r["mtbf_ci_high"]),
            "partial" if r["partial"] else "",
        )
        for r in df.iter_rows(named=True)
    ]
    _print_rows(rows)
    print("MTBF = exposure / failures (simultaneous events once); 95% CI exact Poisson")
    return 0


ROOT_CAUSES_SHOWN = 8


def cmd_availability(args) -> int:
    import polars as pl

    if args.top < 1:
        raise CliError("--top must be >= 1")
    wh = _reading_warehouse(args)
    avail = wh.read("availability")
    if avail.height == 0:
        raise CliError(
            "availability is empty: ingest failure records (or node events) and run `goodput build`"
        )
    fits, causes = wh.read("repair_fits"), wh.read("root_causes")
    if args.system is not None:
        known = sorted(set(avail["system"].drop_nulls()))
        if args.system not in known:
            raise CliError(f"no system {args.system!r} in availability (known: {', '.join(known)})")
        avail, fits = (df.filter(pl.col("system") == args.system) for df in (avail, fits))
        causes = causes.filter(pl.col("system") == args.system)
    else:
        causes = causes.filter(pl.col("system").is_null())
    if args.level == "node":
        rows = (
            avail.filter(pl.col("level") == "node").sort("failures", descending=True).head(args.top)
        )
    else:
        rows = avail.filter(pl.col("level") == "system")
    if _format(args) == "json":
        print(
            json.dumps(
                {
                    "availability": rows.to_dicts(),
                    "repair_fits": fits.filter(pl.col("selected")).to_dicts(),
                    "root_causes": causes.to_dicts(),
                },
                default=str,
            )
        )
        return 0
    if (
        _format(args) == "csv"
    ):  # the availability rows; the fits and causes are tables of their own (sql)
        _print_frame(rows, "csv", [], [], {})
        return 0

    def ci(r: dict, c: str, prefix: str | None = None) -> str:
        return (
            f"{_cell(r[c])} [{_cell(r[(prefix or c) + '_ci_low'])}, "
            f"{_cell(r[(prefix or c) + '_ci_high'])}]"
        )

    head = (
        "source",
        "system",
        "host",
        "nodes",
        "failures",
        "mtbf_h",
        "mttr_h",
        "availability",
        "nines",
        "per_node_year",
        "tbf_shape",
    )
    body = [
        (
            r["source"],
            r["system"],
            r["host"] or "",
            str(r["nodes"]),
            str(r["failures"]),
            ci(r, "mtbf_hours", "mtbf"),
            ci(r, "mttr_hours", "mttr"),
            _cell(r["availability"], ".5f"),
            ci(r, "nines"),
            ci(r, "failures_per_node_year"),
            ci(r, "tbf_shape") if r["tbf_shape"] is not None else "-",
        )
        for r in rows.iter_rows(named=True)
    ]
    _print_rows([head, *body])
    print(
        "95% CIs: MTBF and rates exact Poisson, MTTR / availability bootstrap; availability only "
        "where every repair is known"
    )
    best = fits.filter(pl.col("selected"))
    for q, word in (("repair", "repair time"), ("tbf", "time between failures")):
        won = best.filter(pl.col("quantity") == q)["model"].value_counts(sort=True)
        if won.height:
            print(
                f"{word}: best by AIC "
                + ", ".join(f"{m} in {n}" for m, n in won.rows())
                + f" of {best.filter(pl.col('quantity') == q).height} system(s)"
            )
    if causes.height:
        shown = causes.head(ROOT_CAUSES_SHOWN)
        more = (
            f'; {causes.height - shown.height} more (goodput sql "select * from root_causes")'
            if causes.height > shown.height
            else ""
        )
        print(
            "root causes (share of failures / of downtime): "
            + ", ".join(
                f"{r['cause'] or 'not recorded'} {100 * r['share']:.1f}% / "
                f"{100 * (r['downtime_share'] or 0):.1f}%"
                for r in shown.iter_rows(named=True)
            )
            + more
        )
    return 0


COMPLETION_SHELLS = ("bash", "zsh", "fish")


def cmd_completion(args) -> int:
    """argcomplete's script for the shell: it calls ``goodput`` back to complete commands,
    options, choices and paths from this parser, so it never goes stale."""
    import argcomplete

    sys.stdout.write(argcomplete.shellcode(["goodput"], shell=args.shell))
    return 0


def cmd_nodes(args) -> int:
    from analysis.node_health import fleet_rates, lemon_gain, score, summary, worst_first
    from analysis.numbers import change, in_hours, pct

    if args.top < 1 or args.gpus < 1 or args.gpus_per_node < 1:
        raise CliError("--top, --gpus and --gpus-per-node must be >= 1")
    if args.alpha is not None and not 0 < args.alpha < 1:
        raise CliError("--alpha must be between 0 and 1, e.g. 0.01")
    wh = _reading_warehouse(args)
    health = wh.read("node_health")
    if health.height == 0:
        raise CliError("node_health is empty: run `goodput build` (or `goodput demo`) first")
    if args.alpha is not None:  # the stored counts, flagged at another level
        health = worst_first(score(health, args.alpha))
    s = summary(health)
    gain = lemon_gain(
        health,
        args.gpus,
        args.gpus_per_node,
        parse_duration(args.ckpt_cost),
        parse_duration(args.restart),
        rates=fleet_rates(wh, args.gpus_per_node),
    )
    worst = health.head(args.top)
    if _format(args) == "json":
        print(json.dumps({"summary": s, "gain": gain, "nodes": worst.to_dicts()}, default=str))
        return 0
    if _format(args) == "csv":
        _print_frame(worst, "csv", [], [], {})
        return 0
    print(
        f"nodes: {s['nodes']:,}, tested: {s['tested']:,}, lemons: {s['lemons']:,} (adjusted p < "
        f"{s['alpha']:g})"
    )
    if s["untested"]:
        print(f"{s['untested']:,} node(s) not tested (no observed node-hours)")
    if s["test"]:
        rate = s["fleet_rate_per_node_hour"] or 0.0
        print(f"test: {s['test']}")
        print(
            f"fleet: {s['failures']:,} failures in {s['node_hours']:,.0f} node-hours "
            f"({rate * 1000:.3g} per 1,000 node-hours)"
        )
    cols = (
        "host",
        "failures",
        "expected_failures",
        "rate_ratio",
        "interruptions",
        "lost_gpu_hours",
        "hw_events",
        "repairs",
        "node_hours",
        "p_value",
        "p_adjusted",
        "lemon",
    )
    heads = (
        "host",
        "failures",
        "expected",
        "ratio",
        "interrupts",
        "lost_gpu_h",
        "hw_events",
        "repairs",
        "node_h",
        "p",
        "p_adj",
        "lemon",
    )

    def cell(v):
        if v is None:
            return "-"
        if isinstance(v, bool):
            return "yes" if v else "no"
        return (
            f"{v:,.0f}"
            if isinstance(v, float) and abs(v) >= 100
            else f"{v:.3g}"
            if isinstance(v, float)
            else str(v)
        )

    rows = [heads] + [tuple(cell(r[c]) for c in cols) for r in worst.iter_rows(named=True)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(cols))]
    for r in rows:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())
    if gain is not None:
        b, w = gain["baseline"], gain["without_lemons"]
        line = (
            f"job on {gain['target_gpus']:,} GPUs at the fleet's {gain['basis']}: MTTI "
            f"{in_hours(b['mtti_hours'])}, goodput {pct(b['goodput'])}"
        )
        if gain["lemons"] and w is None:
            line += "; without the lemon node(s) no failure is left to refit a rate from"
        elif gain["lemons"]:
            line += (
                f"; rate refitted without the {gain['lemons']} lemon node(s): MTTI "
                f"{in_hours(w['mtti_hours'])}, goodput {pct(w['goodput'])} "
                f"({change(w['goodput'], b['goodput'], 'points')})"
            )
        print(line + ("" if gain["lemons"] else "; no lemon node to remove"))
    return 0


def _reading_warehouse(args):
    """The warehouse a reading command reads: the whole fleet's, opened as a reader (a read-only
    home works), or its scope's (built or reused by a writer)."""
    scope = scope_settings(args)
    wh = _warehouse(args, existing=True, read_only=not any(scope.values()))
    return _scoped(wh, _config(args, **scope)) if any(scope.values()) else wh


def _print_frame(df, fmt: str, text_rows, header: list[str], meta: dict) -> None:
    """``df`` on stdout: an aligned text table (``text_rows``: its rows as the report formats
    them), CSV (raw values, header first) or one JSON object (``meta`` and ``rows``)."""
    if fmt == "csv":
        sys.stdout.write(df.write_csv(datetime_format="%Y-%m-%dT%H:%M:%S"))
        return
    if fmt == "json":
        print(json.dumps({**meta, "rows": df.to_dicts()}, default=str))
        return
    rows = [header, *text_rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print(
            "  ".join(
                v.rjust(w) if i else v.ljust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
        )


def _format(args) -> str:
    return "json" if args.json else args.format


def cmd_losses(args) -> int:
    from analysis.trend import losses_frame
    from dashboards.section import in_hours, num, pct

    wh = _reading_warehouse(args)
    df = losses_frame(wh.read("job_attempts"), wh.read("interruptions"), args.by, args.period)
    if df.height == 0 and _format(args) == "table":
        print(
            "no unexpected interruptions in the warehouse (run `goodput build` after ingesting "
            "job records)"
        )
        return 0
    header = ([args.period] if args.period else []) + [
        args.by,
        "lost GPU-hours",
        "share",
        "interruptions",
        "MTBF",
    ]
    rows = [
        ([f"{r['period_start']:%Y-%m-%d}"] if args.period else [])
        + [
            r[args.by],
            num(r["lost_gpu_hours"]),
            pct(r["share"]),
            f"{r['interruptions']:,}",
            in_hours(r["mtbf_hours"]),
        ]
        for r in df.iter_rows(named=True)
    ]
    _print_frame(df, _format(args), rows, header, {"by": args.by, "period": args.period})
    return 0


def cmd_trend(args) -> int:
    from analysis.trend import trend_frame
    from dashboards.section import change, in_hours, num, pct

    wh = _reading_warehouse(args)
    df = trend_frame(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"), args.period
    )
    if df.height == 0 and _format(args) == "table":
        print("no job attempts with start and end times in the warehouse")
        return 0
    header = [
        args.period,
        "GPU-hours",
        "goodput",
        "change",
        "lost GPU-hours",
        "change",
        "interruptions",
        "MTBF",
        "change",
    ]
    rows = []
    prev = None
    for r in df.iter_rows(named=True):
        p = prev or {}
        rows.append(
            [
                f"{r['period_start']:%Y-%m-%d}",
                num(r["gpu_hours"]),
                pct(r["goodput"]),
                change(r["goodput"], p.get("goodput"), "points") if prev else "",
                num(r["lost_gpu_hours"]),
                change(r["lost_gpu_hours"], p.get("lost_gpu_hours")) if prev else "",
                f"{r['interruptions']:,}",
                in_hours(r["mtbf_hours"]),
                change(r["mtbf_hours"], p.get("mtbf_hours"), "h") if prev else "",
            ]
        )
        prev = r
    _print_frame(df, _format(args), rows, header, {"period": args.period})
    return 0


def cmd_whatif(args) -> int:
    """The ranked knobs at a job size: the report's what-if section as a table (the same rows:
    ``analysis.whatif.sensitivity_at``, stored by the last build or computed now)."""
    import polars as pl

    from analysis.job import Job
    from analysis.numbers import in_hours, pct
    from analysis.whatif import sensitivity_at, sensitivity_frame

    if args.gpus < 1:
        raise CliError("--gpus must be >= 1")
    wh = _reading_warehouse(args)
    try:
        rows = sensitivity_at(wh, args.gpus)
    except ValueError as exc:
        raise CliError(
            f"no rates to project from ({exc}); run `goodput demo` or `goodput build` first"
        ) from None
    base = rows.filter(pl.col("knob") == "baseline").row(0, named=True)
    ranked = sensitivity_frame(rows).select(
        "change",
        "knob",
        "gain_pp",
        "goodput_base",
        "goodput",
        "goodput_ci_low",
        "goodput_ci_high",
        "mtti_hours",
        "interval_hours",
        "method",
    )
    meta = {
        "n_gpus": args.gpus,
        "baseline": {
            k: base[k]
            for k in (
                "goodput",
                "goodput_ci_low",
                "goodput_ci_high",
                "mtti_hours",
                "interval_hours",
                "spares",
                "scope",
            )
        },
    }
    fmt = _format(args)
    if fmt == "table":
        print(
            f"at {args.gpus:,} GPUs ({base['scope'] or 'infrastructure'} interruptions): goodput "
            f"{pct(base['goodput'])} (95% {pct(base['goodput_ci_low'])} - "
            f"{pct(base['goodput_ci_high'])}), MTTI {in_hours(base['mtti_hours'])}; each change "
            "alone:"
        )
    text = [
        [
            r["change"],
            f"{r['gain_pp']:+.1f} points",
            f"{pct(r['goodput_base'])} -> {pct(r['goodput'])}",
            f"{pct(r['goodput_ci_low'])} - {pct(r['goodput_ci_high'])}",
            in_hours(r["mtti_hours"]),
            r["method"],
        ]
        for r in ranked.iter_rows(named=True)
    ]
    header = ["change", "goodput gain", "goodput", "95% band", "MTTI", "method"]
    _print_frame(ranked, fmt, text, header, meta)
    if fmt == "table" and "mc" in ranked["method"]:
        print(
            f"mc: Monte Carlo against its own baseline of {base['spares']} spare nodes (repair "
            f"{Job.repair_hours:g} h), where waiting for a repaired node also costs goodput"
        )
    return 0


def cmd_compare(args) -> int:
    """Clusters (partitions, accounts) side by side: measured goodput, infrastructure
    interruption rate and MTBF with exact 95% CIs (``analysis.breakdown.compare_frame``)."""
    from analysis.breakdown import compare_frame
    from analysis.numbers import in_hours, num, pct

    wh = _reading_warehouse(args)
    df = compare_frame(
        wh.read("job_attempts"), wh.read("interruptions"), wh.read("goodput_jobs"), args.by
    )
    if df.height == 0 and _format(args) == "table":
        print("no job attempts in the warehouse (ingest job records, then `goodput build`)")
        return 0

    def ci(r, value, key, shown):
        lo, hi = r[f"{key}_ci_low"], r[f"{key}_ci_high"]
        return f"{shown(r[value])} ({shown(lo)} - {shown(hi)})"

    text = [
        [
            r[args.by],
            f"{r['jobs']:,}",
            num(r["gpu_hours"]),
            pct(r["goodput"]),
            f"{r['infrastructure']:,} of {r['interruptions']:,}",
            ci(r, "rate_per_1k_gpu_days", "rate", num),
            ci(r, "mtbf_hours", "mtbf", in_hours),
            num(r["lost_gpu_hours"]),
        ]
        for r in df.iter_rows(named=True)
    ]
    header = [
        args.by,
        "jobs",
        "GPU-hours",
        "goodput",
        "infra. interruptions",
        "per 1,000 GPU-days (95% CI)",
        "MTBF (95% CI)",
        "lost GPU-hours",
    ]
    _print_frame(df, _format(args), text, header, {"by": args.by})
    if _format(args) == "table":
        print(
            "infrastructure interruptions: unexpected, not the jobs' own failures; MTBF: the "
            f"hours the {args.by}'s jobs span / those interruptions; CIs exact Poisson"
        )
    return 0


def cmd_report(args) -> int:
    from dashboards.report import build_report

    if args.gpus < 1:
        raise CliError("--gpus must be >= 1")
    wh = _warehouse(args, existing=True)
    if args.gpu_hour_cost < 0:
        raise CliError("--gpu-hour-cost must be >= 0 (0: no cost shown)")
    config = _config(args, target_gpus=args.gpus, **scope_settings(args))
    wh = _scoped(wh, config)
    with wh.writer():
        wh.refresh_catalog()
        path = build_report(
            wh,
            Path(args.out) if args.out else None,
            target_gpus=args.gpus,
            scope=config.scope().header(),
            gpu_hour_cost=args.gpu_hour_cost,
        )
    print(f"report: {path}")
    return 0


# ----------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse with every error one line (no usage block: ``--help`` shows it) and, for a
    mistyped command or choice, the closest one."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}{_closest_choice(message)}\n")


def _closest_choice(message: str) -> str:
    import difflib

    m = re.search(r"invalid choice: (.+?) \(choose from (.*)\)", message)
    if not m:
        return ""
    close = difflib.get_close_matches(
        m[1].strip("'"), [c.strip(" '") for c in m[2].split(",")], n=1
    )
    return f"; did you mean {close[0]!r}?" if close else ""


class _HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions; keeps text written in lines (the examples) as it is."""

    def _fill_text(self, text, width, indent):
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


class _Version(argparse.Action):
    """``--version``: the package version and, run from a git checkout, its commit."""

    def __init__(
        self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None
    ):
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


REPO = Path(__file__).resolve().parent.parent


def version_line() -> str:
    """``goodput 0.1.0``, with ``(commit abc123def456)`` (``+ changes`` when files differ from
    it) when the code runs from a git checkout and git is installed."""
    import subprocess
    from importlib.metadata import version

    line = f"goodput {version('fleet-goodput')}"
    if not (REPO / ".git").exists():
        return line
    try:
        git = ["git", "-C", str(REPO)]
        sha, dirty = (
            subprocess.run([*git, *cmd], capture_output=True, text=True, timeout=10, check=False)
            for cmd in (
                ["rev-parse", "--short=12", "HEAD"],
                ["status", "--porcelain", "--untracked-files=no"],
            )
        )
    except (OSError, subprocess.TimeoutExpired):
        return line
    if sha.returncode != 0:
        return line
    return f"{line} (commit {sha.stdout.strip()}{' + changes' if dirty.stdout.strip() else ''})"


# ``goodput COMMAND --help`` ends with these (each one is parsed by tests/test_cli_habits.py)
EXAMPLES = {
    "demo": ["goodput demo", "goodput demo --home /tmp/goodput-demo"],
    "simulate": ["goodput simulate --out /tmp/fleet --nodes 64 --days 30 --seed 1"],
    "ingest": [
        "goodput ingest /data/sacct/ /data/dcgm-scrapes/ /var/log/kern.log* --cluster prod",
        "goodput ingest dump.txt --format sacct --fields xdmod",
        (
            "goodput ingest smi.csv --format nvidia-smi --host gpu-node-007 --time "
            "2026-01-05T10:00:00Z"
        ),
    ],
    "pull": ["goodput pull --dry-run", "goodput pull slurmdbd --since 2026-01-01"],
    "forget": ["goodput forget /data/sacct/2026-01.txt"],
    "build": [
        "goodput build",
        "goodput build --as-of 2026-03-01 --ckpt-interval 1h --restart 15m",
        "goodput build --cluster prod --from 2026-01-01",
    ],
    "fit": ["goodput fit", "goodput fit --all-models --window 2026-01"],
    "mtbf": ["goodput mtbf --period month --by cause"],
    "availability": ["goodput availability --level node --top 10"],
    "sql": [
        (
            'goodput sql "select cause_class, count(*) n from interruptions group by 1 order by 2 '
            'desc"'
        ),
        'goodput sql "select * from quarantine" --format csv > quarantine.csv',
    ],
    "project": [
        "goodput project --gpus 32Ki",
        "goodput project --gpus 100k --spares 16 --method mc",
        "goodput project --gpus 16384 --mtti 3h --interval 30m --json",
    ],
    "nodes": ["goodput nodes --top 10", "goodput nodes --alpha 0.01 --json"],
    "report": ["goodput report", "goodput report --out /tmp/report.html --gpu-hour-cost 2.5"],
    "completion": ['eval "$(goodput completion bash)"    # in ~/.bashrc'],
}


def _complete_formats(**_) -> list[str]:
    from ingest.registry import formats

    return ["auto", *sorted(formats())]


def _complete_from_warehouse(column: str):
    """A tab completer: the values of ``job_attempts.<column>`` in the warehouse of the command
    line's --home (nothing when there is none)."""

    def complete(parsed_args=None, **_) -> list[str]:
        from warehouse.store import Warehouse

        try:
            wh = Warehouse(
                getattr(parsed_args, "home", None),
                getattr(parsed_args, "warehouse_uri", None),
                read_only=True,
            )
            if not wh.home.is_dir():
                return []
            query = (
                f"SELECT DISTINCT {column} FROM job_attempts WHERE {column} IS NOT NULL ORDER BY 1"
            )
            return [str(v) for v in wh.run_readonly(query).to_series()]
        except Exception:  # noqa: BLE001 - a completion never fails the shell
            return []

    return complete


# options completed from the warehouse or the format registry, by their destination
COMPLETERS = {
    "scope_cluster": _complete_from_warehouse("cluster"),
    "cluster": _complete_from_warehouse("cluster"),
    "scope_partition": _complete_from_warehouse("partition"),
    "scope_account": _complete_from_warehouse("account"),
    "format": _complete_formats,
}


def _finish(parser: argparse.ArgumentParser) -> None:
    """What every command gets alike: integer options read counts (``parse_count``), one-line
    errors, the examples at the end of its help, and completion of formats, clusters,
    partitions and accounts (``COMPLETERS``)."""
    for action in parser._actions:
        if action.type is int:
            action.type = parse_count
        if action.dest in COMPLETERS and action.choices is None:
            action.completer = COMPLETERS[action.dest]
        for name, sub in _subcommands_of(action).items():
            if name in EXAMPLES and not sub.epilog:
                sub.epilog = "examples:\n" + "\n".join(f"  {e}" for e in EXAMPLES[name])
            sub.formatter_class = _HelpFormatter
            _finish(sub)


def _subcommands_of(action: argparse.Action) -> dict[str, argparse.ArgumentParser]:
    return dict(action.choices) if isinstance(action, argparse._SubParsersAction) else {}


def build_parser() -> argparse.ArgumentParser:
    from analysis.assumptions import (
        CKPT_COST_S,
        CKPT_INTERVAL_S,
        GPU_HOUR_COST,
        GPUS_PER_NODE,
        LEMON_ALPHA,
        RESTART_S,
        TARGET_GPUS,
    )
    from analysis.breakdown import DIMENSIONS
    from analysis.fleet_age import DEFAULT_FLEET_AGE, FLEET_AGES
    from analysis.taxonomy import DEFAULT_SCOPE, SCOPES
    from analysis.trend import LOSS_KEYS, PERIODS

    p = _Parser(
        prog="goodput",
        formatter_class=_HelpFormatter,
        description=(
            "GPU-fleet reliability and goodput: ingest scheduler logs and hardware "
            "telemetry into a Parquet + DuckDB warehouse, fit failure rates, measure and "
            "project goodput."
        ),
    )
    p.add_argument(
        "--version",
        action=_Version,
        help="print the version (and the commit, run from a git checkout)",
    )
    home_help = "warehouse directory (default $GOODPUT_HOME or ./goodput_home)"
    uri_help = (
        "Parquet root: a directory or s3://bucket/prefix (default $GOODPUT_WAREHOUSE_URI "
        "or HOME/parquet)"
    )
    p.add_argument("--home", help=home_help)
    p.add_argument("--warehouse-uri", help=uri_help)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS, help=home_help)
    common.add_argument("--warehouse-uri", default=argparse.SUPPRESS, help=uri_help)
    wait_help = (
        "when another process is writing the warehouse: wait at most this long (e.g. 0, "
        "30s, 10m; default: as long as it takes)"
    )
    p.add_argument("--wait", help=wait_help)
    p.add_argument(
        "--no-wait",
        dest="wait",
        action="store_const",
        const="0",
        help="fail at once if another process is writing",
    )
    common.add_argument("--wait", default=argparse.SUPPRESS, help=wait_help)
    common.add_argument(
        "--no-wait",
        dest="wait",
        action="store_const",
        const="0",
        default=argparse.SUPPRESS,
        help="fail at once if another process is writing",
    )
    sub = p.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="one of the commands below; `goodput COMMAND --help` for its options",
    )

    s = sub.add_parser(
        "demo", parents=[common], help="whole pipeline on the committed sample fleet"
    )
    s.set_defaults(func=cmd_demo)

    cost_help = (
        "$ per GPU-hour: the report's first screen prices the lost GPU-hours (default: no "
        "cost shown)"
    )
    window = argparse.ArgumentParser(add_help=False)
    window.add_argument(
        "--observed-from",
        help="start of the observation window (ISO-8601; default: inferred from the data's span)",
    )
    window.add_argument(
        "--observed-to",
        "--as-of",
        dest="observed_to",
        help=(
            "end of the observation window: units still in service are censored here (ISO-8601; "
            "default: inferred)"
        ),
    )
    window.add_argument(
        "--gpus-per-node",
        type=int,
        default=GPUS_PER_NODE,
        help=f"GPUs per host where the data does not show them (default {GPUS_PER_NODE})",
    )

    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help="table (default), csv (raw values) or json (one object with its rows)",
    )
    fmt.add_argument("--json", action="store_true", help="the same as --format json")

    s = sub.add_parser(
        "build",
        parents=[common, window],
        help="everything downstream of ingest (rollups, attribution, fits, goodput, report)",
    )
    s.add_argument(
        "--ckpt-interval",
        default=f"{CKPT_INTERVAL_S:g}s",
        help="assumed checkpoint interval for measured goodput of jobs without checkpoint evidence",
    )
    s.add_argument(
        "--ckpt-cost", default=f"{CKPT_COST_S:g}s", help="assumed cost of one checkpoint, e.g. 60s"
    )
    s.add_argument(
        "--restart",
        default=f"{RESTART_S:g}s",
        help="assumed restart time after a failure, e.g. 10m",
    )
    s.add_argument(
        "--gpu-hour-cost", type=float, default=GPU_HOUR_COST, metavar="USD", help=cost_help
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_build)

    s = sub.add_parser(
        "simulate", parents=[common], help="write a synthetic fleet with ground truth"
    )
    s.add_argument(
        "--out",
        required=True,
        help="directory to write the fleet's source files and ground_truth.json to",
    )
    s.add_argument("--nodes", type=int, default=32, help="number of nodes (default 32)")
    s.add_argument(
        "--gpus-per-node",
        type=int,
        default=GPUS_PER_NODE,
        help=f"GPUs per node (default {GPUS_PER_NODE})",
    )
    s.add_argument(
        "--days", type=float, default=60, help="length of the simulated period in days (default 60)"
    )
    s.add_argument(
        "--seed",
        type=int,
        default=0,
        help="random seed: the same seed writes the same fleet (default 0)",
    )
    s.add_argument(
        "--fault-scale", type=float, default=20.0, help="multiply the Llama-3-derived fault rates"
    )
    s.add_argument("--scrape-interval", default="1h", help="DCGM scrape interval (e.g. 15m, 1h)")
    s.set_defaults(func=cmd_simulate)

    s = sub.add_parser("ingest", parents=[common], help="parse source files into the warehouse")
    s.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="source files or directories (read recursively; .gz and .zst are decompressed)",
    )
    s.add_argument(
        "--format",
        default="auto",
        help="source format, e.g. sacct, sacct-json, dcgm, kernel, ipmi-sel, component-history "
        "(default auto: detected from each file's content)",
    )
    s.add_argument(
        "--cluster",
        default="default",
        help="cluster name stored with the records (default 'default')",
    )
    s.add_argument("--tz", default="UTC", help="zone of timestamps that carry none")
    s.add_argument("--host", help="host for files that do not name one")
    s.add_argument("--time", help="sample time for scrapes that carry none (ISO-8601)")
    s.add_argument("--fields", help="field order of a headerless sacct dump (or 'xdmod')")
    s.add_argument("--delimiter", help="sacct field delimiter (default: from the header, else |)")
    s.add_argument(
        "--map", help="component history / failure log column mapping canonical=theirs,..."
    )
    s.add_argument(
        "--not-before",
        metavar="ISO",
        help="records dated earlier are implausible and quarantined (default 2000-01-01; "
        "historical logs such as LANL's 1996-2005 release need an earlier one)",
    )
    s.add_argument(
        "--exclude-hosts",
        metavar="FILE",
        help=(
            "component history: quarantine installations on these hosts (every word of FILE is a "
            "host, e.g. a service-node list)"
        ),
    )
    s.add_argument(
        "--replace",
        action="store_true",
        help=(
            "forget what these files produced before (e.g. with a wrong --tz), then ingest them "
            "again"
        ),
    )
    s.add_argument("--jobs", type=int, help="processes that parse files (default: one per core)")
    s.add_argument(
        "--settle",
        default=SETTLE,
        metavar="DUR",
        help="a file is read once its size and mtime have not changed for this long; one still "
        "changing is skipped with a warning (default 2s, or $GOODPUT_SETTLE; 0 reads at once)",
    )
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser(
        "pull",
        parents=[common],
        help="pull live sources (slurmdbd, Prometheus, Redfish BMCs) from HOME/sources.toml",
        description=(
            "Pull every source of HOME/sources.toml (or the ones named) from its cursor "
            "to now. Exit status 1 when a source failed: the others are stored, the next "
            "pull catches up."
        ),
    )
    s.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="source names in sources.toml (default: every source)",
    )
    s.add_argument(
        "--since", metavar="ISO", help="pull from here instead of each source's cursor (a backfill)"
    )
    s.add_argument("--until", metavar="ISO", help="pull up to here (default: now)")
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="print the commands and queries it would run, and run none",
    )
    s.set_defaults(func=cmd_pull)

    s = sub.add_parser(
        "forget",
        parents=[common],
        help="remove every row some ingested files produced, so they can be ingested again",
    )
    s.add_argument(
        "targets",
        nargs="+",
        metavar="PATH|SHA256",
        help="an ingested file's path or sha256 (see the ingest_manifest table)",
    )
    s.set_defaults(func=cmd_forget)

    s = sub.add_parser(
        "fit",
        parents=[common, window, fmt],
        help="print the fitted failure rates per component class (refit over a window given)",
    )
    s.add_argument(
        "--all-models", action="store_true", help="every candidate model, not only the AIC winner"
    )
    s.add_argument("--window", default="all", help="'all' (default) or a month YYYY-MM")
    add_scope_options(s)
    s.set_defaults(func=cmd_fit)

    s = sub.add_parser(
        "mtbf",
        parents=[common, fmt],
        help="system MTBF per month or quarter (95%% CI), overall or per class",
    )
    s.add_argument(
        "--period",
        choices=["quarter", "month"],
        default="quarter",
        help="calendar period (default quarter)",
    )
    s.add_argument(
        "--by",
        choices=["all", "cause", "component_class"],
        default="all",
        help="whole system (default), or per root cause / component class",
    )
    s.add_argument("--system", help="one system (cluster)")
    s.add_argument(
        "--source",
        choices=["failures", "interruptions", "node_failures"],
        help="one series: failure records, job interruptions or node failure episodes",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_mtbf)

    s = sub.add_parser(
        "availability",
        parents=[common, fmt],
        help="availability, MTBF, MTTR, repair-time fits and root causes per system or node",
    )
    s.add_argument(
        "--system", help="one system (cluster): its root causes instead of every system's"
    )
    s.add_argument(
        "--level",
        choices=["system", "node"],
        default="system",
        help="rows per system (default) or per node",
    )
    s.add_argument(
        "--top",
        type=int,
        default=20,
        help="nodes listed with --level node, most failures first (default 20)",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_availability)

    s = sub.add_parser(
        "sql", parents=[common], help="query the warehouse with DuckDB SQL (read-only)"
    )
    s.add_argument(
        "query", help="one SELECT (or EXPLAIN) statement over the warehouse's tables and views"
    )
    s.add_argument(
        "--allow-files",
        action="append",
        default=[],
        metavar="DIR",
        help="also let the query read files under DIR (repeatable)",
    )
    s.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help=(
            "output: table (default, as the DuckDB CLI prints it), csv, or json (one array of "
            "row objects); csv and json print every row"
        ),
    )
    s.add_argument(
        "--max-rows",
        type=int,
        default=40,
        help="rows the table shows (default 40; the count of all is printed)",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser(
        "project",
        parents=[common, fmt],
        help="project goodput for a job size (analytic or Monte Carlo)",
    )
    s.add_argument(
        "--gpus",
        type=int,
        default=TARGET_GPUS,
        help=f"GPUs the job spans (default {TARGET_GPUS:,})",
    )
    s.add_argument(
        "--gpus-per-node",
        type=int,
        default=GPUS_PER_NODE,
        help=f"GPUs per node (default {GPUS_PER_NODE})",
    )
    s.add_argument(
        "--ckpt-cost", default=f"{CKPT_COST_S:g}s", help="checkpoint cost (blocking), e.g. 60s"
    )
    s.add_argument(
        "--restart", default=f"{RESTART_S:g}s", help="restart time after a failure, e.g. 10m"
    )
    s.add_argument(
        "--interval", default="auto", help="checkpoint interval: auto (Daly) or a duration"
    )
    s.add_argument(
        "--spares",
        type=int,
        default=None,
        help="hot spare nodes for --method mc (default: unlimited, never wait for a node)",
    )
    s.add_argument("--mtti", help="override the fitted rates with this MTTI (e.g. 3h)")
    s.add_argument(
        "--scope",
        choices=list(SCOPES),
        default=DEFAULT_SCOPE,
        help="interruption classes projected: hardware fits only; infrastructure (default: "
        "everything but the job's own failures); all",
    )
    s.add_argument(
        "--rates",
        help="project from a rates CSV (component_class,events,exposure_hours,unit "
        "with unit gpu|node|job) instead of the warehouse",
    )
    s.add_argument(
        "--method",
        choices=["analytic", "mc"],
        default="analytic",
        help="analytic (default: Daly's model with CI bands from the fits) or mc (Monte Carlo "
        "simulation of the job, with spares and the fitted lifetime models)",
    )
    s.add_argument(
        "--fleet-age",
        choices=list(FLEET_AGES),
        default=DEFAULT_FLEET_AGE,
        help="age of the job's units at its start: stationary (long-run rate 1/mean of each "
        "class's fitted model), new (all age 0: failures over --horizon by renewal), "
        "observed (each unit's age at the window end from the warehouse; classes "
        "without ages stay stationary)",
    )
    s.add_argument(
        "--horizon",
        help="job length, e.g. 30d: failures of a non-stationary fleet are counted over it, "
        "and --method mc simulates it (default: 54 days, Llama 3's run)",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_project)

    s = sub.add_parser(
        "fleetsim",
        parents=[common],
        help=(
            "simulate a fleet's operations (spares, triage, repair line, retirement, "
            "maintenance) under the fitted failure laws: ETTR, goodput, what-if sweeps "
            "(docs/fleetsim.md)"
        ),
    )
    s.add_argument(
        "--scenario",
        required=True,
        metavar="FILE.yaml",
        help="the scenario (schema: docs/fleetsim.md)",
    )
    s.add_argument(
        "--workers", type=int, help="processes running replications (default: one per core)"
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(func=cmd_fleetsim)

    s = sub.add_parser(
        "nodes",
        parents=[common, fmt],
        help="lemon nodes: the nodes that fail most, with their numbers and the test",
    )
    s.add_argument(
        "--top", type=int, default=20, help="how many nodes to list, worst first (default 20)"
    )
    s.add_argument(
        "--gpus",
        type=int,
        default=TARGET_GPUS,
        help="job size the goodput gain of removing lemons is projected at",
    )
    s.add_argument(
        "--gpus-per-node",
        type=int,
        default=GPUS_PER_NODE,
        help=f"GPUs per node of that job (default {GPUS_PER_NODE})",
    )
    s.add_argument(
        "--ckpt-cost",
        default=f"{CKPT_COST_S:g}s",
        help="checkpoint cost (blocking) of that job, e.g. 60s",
    )
    s.add_argument(
        "--restart", default=f"{RESTART_S:g}s", help="restart time after a failure, e.g. 10m"
    )
    s.add_argument(
        "--alpha",
        type=float,
        help=f"level of the lemon flag on the adjusted p value (default {LEMON_ALPHA:g})",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_nodes)

    s = sub.add_parser(
        "losses",
        parents=[common, fmt],
        help=(
            "lost GPU-hours of unexpected interruptions by cause, cluster, partition, account or "
            "node"
        ),
        epilog="examples:\n  goodput losses\n  goodput losses --by partition --period month\n"
        "  goodput losses --by node --format csv > losses.csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--by", choices=list(LOSS_KEYS), default="cause", help="what to group by (default cause)"
    )
    s.add_argument(
        "--period",
        choices=list(PERIODS),
        help="one group per calendar week or month (default: the whole span)",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_losses)

    s = sub.add_parser(
        "trend",
        parents=[common, fmt],
        help=(
            "goodput, lost GPU-hours, interruptions and MTBF per week or month, against the "
            "period before"
        ),
        epilog="examples:\n  goodput trend\n  goodput trend --period month --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--period", choices=list(PERIODS), default="week", help="calendar week (default) or month"
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_trend)

    s = sub.add_parser(
        "whatif",
        parents=[common, fmt],
        help="which single improvement buys the most goodput at a job size, with 95%% bands",
        description=(
            "The report's what-if ranking: the goodput gained by halving each class's "
            "failure rate, the checkpoint cost or the restart time, or adding spare "
            "nodes, largest first."
        ),
        epilog="examples:\n  goodput whatif\n  goodput whatif --gpus 32768 --format csv",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--gpus",
        type=int,
        default=TARGET_GPUS,
        help=f"GPUs the job spans (default {TARGET_GPUS:,})",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_whatif)

    s = sub.add_parser(
        "compare",
        parents=[common, fmt],
        help=(
            "clusters (or partitions, accounts) side by side: goodput, interruption rate and "
            "MTBF with 95%% CIs"
        ),
        epilog=(
            "examples:\n  goodput compare\n  goodput compare --by partition --cluster prod --json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--by",
        choices=list(DIMENSIONS),
        default="cluster",
        help="what to set side by side (default cluster)",
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_compare)

    s = sub.add_parser(
        "report", parents=[common], help="write the leadership report (HTML + PNG/SVG per chart)"
    )
    s.add_argument("--out", help="HTML file to write (default DIR/reports/goodput_report.html)")
    s.add_argument(
        "--gpus", type=int, default=TARGET_GPUS, help="job scale for the projected-goodput headline"
    )
    s.add_argument(
        "--gpu-hour-cost", type=float, default=GPU_HOUR_COST, metavar="USD", help=cost_help
    )
    add_scope_options(s)
    s.set_defaults(func=cmd_report)

    s = sub.add_parser(
        "completion",
        help="print the shell's tab-completion script: "
        'eval "$(goodput completion bash)" in ~/.bashrc (zsh, fish alike)',
    )
    s.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")
    s.set_defaults(func=cmd_completion)
    _finish(p)
    return p


def _user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that are a user's mistake (one line, exit 2). Imported when an error is
    being handled, so a command that needs neither the ingest runner nor the store starts
    without them."""
    from ingest.runner import UserError
    from sources.base import SourceConfigError
    from warehouse.store import WarehouseError

    return CliError, UserError, WarehouseError, SourceConfigError


# exit statuses of an environment error (disk full, I/O error, permission): whether it struck
# before anything was committed, or after some batches were
EXIT_ENV_NOTHING_COMMITTED = 3
EXIT_ENV_PARTLY_COMMITTED = 4
EXIT_REJECTED = 5  # ingest: some file's every record was rejected (the others are stored)
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports it
_ENV_WORDS = (
    "disk",
    "space",
    "i/o error",
    "file too large",
    "read-only",
    "permission denied",
    "quota",
)


def environment_error(exc: BaseException) -> str | None:
    """One line for an error of the machine, not of the user or the code (disk full, file too
    large, I/O error, permissions), found anywhere in ``exc``'s chain (Dagster and SQLAlchemy
    wrap it); None for anything else."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno is not None:
            where = f": {exc.filename}" if exc.filename else ""
            return f"{exc.strerror or exc}{where}"
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if type(exc).__name__ in ("OperationalError", "IOException") and any(
            w in text.lower() for w in _ENV_WORDS
        ):
            return text
        exc = exc.__cause__ or exc.__context__
    return None


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # while starting, or removing what a failed command created
        return interrupted()


def _main(argv: list[str] | None) -> int:
    import warnings

    import argcomplete

    warnings.filterwarnings("ignore", message=r".*is currently in (beta|preview)")
    parser = build_parser()
    argcomplete.autocomplete(
        parser
    )  # answers a shell's completion request (and exits); else nothing
    args, extra = parser.parse_known_args(argv)
    if extra:
        parser.error(_unrecognized(parser, args, extra))
    from warehouse.store import COMMITS

    COMMITS[0] = 0  # the batches this command commits (main may run several in one process)
    fresh = _fresh_dirs(args)
    code = 1
    try:
        code = _run(args)
    finally:
        if code != 0 and fresh:  # a failed command leaves no home behind that it created
            _remove_fresh(args, fresh)
    return code


def _run(args) -> int:
    """The command's exit status; a user's mistake, an environment error or an interrupt as one
    line on stderr."""
    from warehouse.store import COMMITS

    try:
        return args.func(args) or 0
    except BrokenPipeError:  # `goodput sql ... | head`: the reader has all it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's flush at exit would raise again
        return 0
    except Exception as exc:
        if isinstance(exc, _user_errors()):
            print(f"goodput: error: {exc}", file=sys.stderr)
            return 2
        if type(exc).__name__ == "InterruptException":  # DuckDB's form of Ctrl-C during a query
            return interrupted()
        reason = environment_error(exc)
        if reason is None:
            raise
        print(f"goodput: error: {reason}; {_committed()}", file=sys.stderr)
        return EXIT_ENV_PARTLY_COMMITTED if COMMITS[0] else EXIT_ENV_NOTHING_COMMITTED
    except BaseException as exc:  # Ctrl-C, also as Dagster raises it inside a run
        if not _interrupt(exc):
            raise
        return interrupted()


def interrupted() -> int:
    """Ctrl-C: one line, exit status 130. Every batch and table is whole: each commits at once
    or not at all."""
    from warehouse.store import COMMITS

    done = f" ({COMMITS[0]} batch(es) were committed, each whole)" if COMMITS[0] else ""
    print(
        f"goodput: interrupted; nothing is half-written{done}: run the command again to finish",
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED


def _committed() -> str:
    from warehouse.store import COMMITS

    if COMMITS[0]:
        return (
            f"{COMMITS[0]} batch(es) were committed before it, each whole (run the command "
            "again to finish)"
        )
    return "nothing was committed"


def _interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C: a KeyboardInterrupt, or Dagster's own for a run it interrupted."""
    if isinstance(exc, KeyboardInterrupt):
        return True
    errors = sys.modules.get("dagster._core.errors")
    return errors is not None and isinstance(exc, errors.DagsterExecutionInterruptedError)


def _unrecognized(parser: argparse.ArgumentParser, args, extra: list[str]) -> str:
    """The error for arguments no option takes, with the closest option of the command."""
    import difflib

    command = _subcommands(parser).get(getattr(args, "command", None))
    known = [o for p in (parser, command) if p for a in p._actions for o in a.option_strings]
    hints = []
    for word in (w.split("=")[0] for w in extra if w.startswith("--")):
        # the options that begin with the same word first (--gpu-count: --gpus, not --account)
        first = word[2:].split("-")[0]
        alike = [
            o for o in known if difflib.get_close_matches(first, [o[2:].split("-")[0]], cutoff=0.75)
        ]
        close = difflib.get_close_matches(word, alike, n=1, cutoff=0) or difflib.get_close_matches(
            word, known, n=1
        )
        if close:
            hints.append(f"{word}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (
        f" ({'; '.join(hints)})" if hints else ""
    )


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {name: sub for a in parser._actions for name, sub in _subcommands_of(a).items()}


def _fresh_dirs(args) -> list[Path]:
    """The local home and Parquet root of the command that do not exist yet."""
    from warehouse.store import resolve_home, resolve_parquet_uri

    try:
        home = resolve_home(getattr(args, "home", None))
        root = resolve_parquet_uri(getattr(args, "warehouse_uri", None), home)
    except Exception:  # noqa: BLE001 - a bad URI: the command itself says so
        return []
    dirs = [home] + (
        [Path(root)] if "://" not in root and not Path(root).is_relative_to(home) else []
    )
    return [d for d in dirs if not d.exists()]


def _remove_fresh(args, fresh: list[Path]) -> None:
    """Remove the directories a failed command created, when nothing was stored in them: under
    the writer lock, so another process writing there meanwhile keeps them."""
    import shutil

    from warehouse.store import COMMITS, Warehouse, WarehouseError

    if COMMITS[0] or not any(d.is_dir() for d in fresh):
        return
    try:
        wh = Warehouse(
            getattr(args, "home", None), getattr(args, "warehouse_uri", None), wait=False
        )
        with wh.writer(wait=False):
            if _stored(wh):  # anything at all, a quarantine row included
                return
            for d in fresh:
                shutil.rmtree(d, ignore_errors=True)
    except (WarehouseError, OSError):
        pass


# ingest tables that record what was read, not what the data says
BOOKKEEPING = ("ingest_manifest", "pull_log", "quarantine")


def _stored(wh) -> set[str]:
    """The ingest tables of ``wh`` that have rows (Parquet files): written by ingest, pull or a
    batch of the Python API alike."""
    from warehouse.schemas import TABLES

    return {name for name, spec in TABLES.items() if spec.kind == "ingest" and wh.files(name)}


def _holds_data(wh) -> bool:
    """Whether ``wh`` holds records to build from (not only manifest, pull and quarantine rows)."""
    return bool(_stored(wh) - set(BOOKKEEPING))


if __name__ == "__main__":
    sys.exit(main())
