"""``goodput ingest`` and ``goodput forget``: source files into the warehouse, and out again."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import NamedTuple

from pipelines.cli.errors import EXIT_REJECTED
from pipelines.cli.errors import CliError
from pipelines.cli.home import open_warehouse
from pipelines.cli.options import SETTLE
from pipelines.cli.options import command
from pipelines.cli.options import option
from pipelines.cli.values import check_tz
from pipelines.cli.values import parse_duration
from pipelines.cli.values import parse_map
from pipelines.cli.values import parse_time


def ingest_context(args):
    from ingest.base import ParseContext

    options = {}
    if getattr(args, "exclude_hosts", None):
        options["exclude_hosts"] = host_list(args.exclude_hosts)
    options |= relative_times(args)
    return ParseContext(
        cluster=args.cluster or "default",
        cluster_given=args.cluster is not None,
        tz=check_tz(args.tz),
        host=args.host,
        time=parse_time(args.time),
        fields=tuple(f.strip() for f in args.fields.split(",")) if args.fields else None,
        delimiter=args.delimiter,
        column_map=parse_map(args.map),
        options=options,
        **(
            {"not_before": parse_time(args.not_before)} if getattr(args, "not_before", None) else {}
        ),
    )


def relative_times(args) -> dict:
    """``--time-origin`` / ``--time-unit`` as the parse options of relative times (health events
    of a published trace: days after its first event)."""
    from ingest.formats.health_events.finish import TIME_UNITS

    origin, unit = getattr(args, "time_origin", None), getattr(args, "time_unit", None)
    if unit is not None and unit not in TIME_UNITS:
        raise CliError(f"--time-unit {unit!r}: use one of {', '.join(TIME_UNITS)}")
    if unit is not None and origin is None:
        raise CliError("--time-unit needs --time-origin: the time the numbers count from")
    if origin is None:
        return {}
    return {"time_origin": parse_time(origin), "time_unit": unit or "s"}


def host_list(path: str) -> tuple[str, ...]:
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
    """Read the files into the warehouse; exit ``EXIT_REJECTED`` when some file gave nothing."""
    from ingest.runner import checked_files

    ctx = ingest_context(args)
    # a mistake fails before Dagster loads, and before a home is made
    if not checked_files(args.paths, args.format, args.jobs):
        raise CliError(
            f"no file to read in {' '.join(args.paths)} (hidden files and folders are skipped)"
        )
    wh = open_warehouse(args)
    reports = _ingest(args, wh, ctx)
    outcome = _Outcome.of(reports)
    print(outcome.summary())
    for line in _warnings(wh, reports, outcome):
        print(line, file=sys.stderr)
    if outcome.nothing_read:  # a home this made is removed as it fails (pipelines.cli.entry)
        print(
            "goodput: error: nothing readable: no file gave a record (the warnings above say why)",
            file=sys.stderr,
        )
        return EXIT_REJECTED
    print(f"warehouse: {wh.db_path}")
    if outcome.new:
        print(
            f"next: goodput{f' --home {shlex.quote(args.home)}' if args.home else ''} build   "
            "(then: goodput report)"
        )
    if outcome.rejected:
        return EXIT_REJECTED
    return 0


def _ingest(args, wh, ctx) -> list:
    """The files' reports, read under the writer lock (with a progress line on a terminal)."""
    from ingest.runner import ingest_paths
    from pipelines.run import recorded_ingest

    def progress(i, n, path):
        if n > 20 and (i % max(1, n // 20) == 0):
            print(f"  [{i}/{n}] {path}", file=sys.stderr)

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
    return reports


class _Outcome(NamedTuple):
    """The files of an ingest by what came of them."""

    failed: list  # not read (an error)
    empty: list  # an empty file (a log just rotated): announced, not a failure
    rejected: list  # every record rejected, or the file could not be parsed
    new: list  # read, with something stored
    skipped: int  # already ingested, unchanged

    @classmethod
    def of(cls, reports) -> _Outcome:
        read = [r for r in reports if not r.skipped and not r.error]

        def gave_nothing(r) -> bool:  # every record rejected, or the file could not be parsed
            return not r.done or bool(r.rows_quarantined and not r.rows_ok and not r.rows_duplicate)

        # an empty file has no record to reject
        empty = [r for r in read if r.done and r.bytes == 0]
        return cls(
            failed=[r for r in reports if r.error],
            empty=empty,
            rejected=[r for r in read if gave_nothing(r) and r not in empty],
            new=[r for r in read if not gave_nothing(r)],
            skipped=sum(r.skipped for r in reports),
        )

    @property
    def nothing_read(self) -> bool:
        """Every file rejected or not read: none gave a record, none was stored before."""
        return not (self.new or self.empty or self.skipped)

    def summary(self) -> str:
        new, dup = self.new, sum(r.rows_duplicate for r in self.new)
        return (
            f"ingested {len(new)} file(s), {sum(r.rows_ok for r in new):,} rows, "
            f"{sum(r.rows_quarantined for r in new):,} quarantined"
            + (f", {dup:,} already stored" if dup else "")
            + (
                f"; {len(self.rejected)} rejected (every record quarantined)"
                if self.rejected
                else ""
            )
            + (f"; {len(self.empty)} empty" if self.empty else "")
            + (f"; {self.skipped} already ingested (unchanged)" if self.skipped else "")
            + (f"; {len(self.failed)} not read" if self.failed else "")
        )


def _warnings(wh, reports, outcome: _Outcome):
    """The lines on stderr after the summary: each file that was not read, held back, rejected,
    empty or partly quarantined, then the sacct dumps' gaps and the stand-ins used."""
    for r in outcome.failed:
        yield f"warning: {r.path}: {r.error}"
    for r in reports:
        if r.held_back:
            yield (
                f"warning: {r.path}: its last {r.held_back:,} byte(s) are a line without its "
                "newline yet: not read; read by the ingest after the line is complete"
            )
    for r in outcome.rejected:
        yield _rejected(wh, r)
    for r in outcome.empty:
        yield f"warning: {r.path}: empty file: nothing to read (recorded; a later version is read)"
    for r in outcome.new:
        if r.rows_quarantined:
            yield (
                f"warning: {r.path}: {r.rows_quarantined} record(s) quarantined "
                f"(goodput sql \"select * from quarantine where sha256='{r.sha256}'\")"
            )
    new = outcome.new
    yield from _sacct_gaps(wh, [r.path for r in new if r.format == "sacct" and r.rows_ok])
    yield from cluster_warnings(wh, [r.path for r in new if r.rows_ok])
    yield from _stand_in_notes(new)


def _rejected(wh, r) -> str:
    """The warning for a file that gave nothing: why its records were rejected."""
    # most often the wrong options (--fields, --delimiter, --format, --tz); the parsers'
    # reasons say which, and how to fix it; another --format reads the file again
    errors = (
        wh.read("quarantine", f"sha256 = '{r.sha256}'")["error"].value_counts(sort=True)
        if r.sha256
        else None
    )
    reason = errors["error"][0] if errors is not None and errors.height else None
    if not r.done:
        return (
            f"warning: {r.path}: not stored: {reason or 'it could not be parsed'}; read again "
            "by the next ingest (give its own --format, or none: no --replace needed)"
        )
    return (
        f"warning: {r.path}: every record rejected ({r.rows_quarantined}): "
        f"{reason or 'see the quarantine table'}"
    )


def _stand_in_notes(reports) -> list[str]:
    """One line per kind of stand-in the run's files used (``ingest.base.STAND_INS``), with the
    count of files: once per run, not once per file (a directory of scrapes has thousands)."""
    from ingest.base import STAND_IN_HOST
    from ingest.base import STAND_IN_TIME

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
    for kind, (what, flag) in fix.items():
        files = [r.path for r in reports if kind in r.stand_ins]
        if files:
            lines.append(
                f"note: {len(files)} file(s) {what}, e.g. {files[0]} (give {flag} to set it; "
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


def cluster_warnings(wh, paths: list[str], source: str | None = None) -> list[str]:
    """A warning per file of ``paths`` (or per pulled ``source``) whose job records name another
    cluster than the one given, which they are stored under: how many name which
    (``job_attempts.reported_cluster``). Counted over the records as read (both the text and the
    JSON of the same jobs), not the merged table."""
    files = wh.record_files("job_attempts")
    if not files or not (paths or source):
        return []
    where = "source_file LIKE $prefix" if source else "list_contains($paths, source_file)"
    with wh.connect() as con:
        rows = con.execute(
            "SELECT source_file, cluster, reported_cluster, count(*) n FROM (SELECT * FROM "
            "read_parquet($files, union_by_name = true) UNION ALL BY NAME SELECT "
            "NULL::VARCHAR source_file, NULL::VARCHAR cluster, NULL::VARCHAR reported_cluster "
            f"WHERE false) WHERE reported_cluster IS NOT NULL AND {where} GROUP BY ALL "
            "ORDER BY ALL",
            {"files": files, **({"prefix": f"pull://{source}/%"} if source else {"paths": paths})},
        ).fetchall()
    named: dict[tuple[str, str], dict[str, int]] = {}  # (file or source, cluster) -> name: n
    for file, cluster, reported, n in rows:
        counts = named.setdefault((source or file, cluster), {})
        counts[reported] = counts.get(reported, 0) + n
    return [
        f"warning: {where_}: job records whose own Cluster is not the cluster given ("
        + ", ".join(f"{n:,} name '{reported}'" for reported, n in counts.items())
        + f") are stored as cluster '{cluster}' (their own name: job_attempts.reported_cluster)"
        for (where_, cluster), counts in named.items()
    ]


def cmd_forget(args) -> int:
    wh = open_warehouse(args)
    with wh.writer():
        known = wh.read("ingest_manifest")
        targets = []
        for t in args.targets:
            if t in set(known["sha256"].to_list()) or t in set(known["path"].to_list()):
                targets.append(t)
            elif Path(t).exists() and str(Path(t).resolve()) in set(known["path"].to_list()):
                targets.append(str(Path(t).resolve()))
            else:
                from ingest.files import file_sha256

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


def add_ingest(sub) -> None:
    command(
        sub,
        cmd_ingest,
        option(
            "paths",
            nargs="+",
            metavar="PATH",
            help="source files or directories (read recursively; .gz and .zst are decompressed)",
        ),
        option(
            "--format",
            default="auto",
            help="source format, e.g. sacct, sacct-json, dcgm, kernel, ipmi-sel, "
            "component-history (default auto: detected from each file's content)",
        ),
        option(
            "--cluster",
            help="cluster name stored with the records, whatever cluster a record names (default: "
            "the cluster the records name, else 'default')",
        ),
        option("--tz", default="UTC", help="zone of timestamps that carry none"),
        option("--host", help="host for files that do not name one"),
        option("--time", help="sample time for scrapes that carry none (ISO-8601)"),
        option("--fields", help="field order of a headerless sacct dump (or 'xdmod')"),
        option("--delimiter", help="sacct field delimiter (default: from the header, else |)"),
        option(
            "--map",
            help="component history / failure log / health events: their field names, "
            "canonical=theirs,... (health events: dotted paths into nested JSON, and the kind's "
            "values, start=fault_start,end=fault_end)",
        ),
        option(
            "--time-origin",
            metavar="ISO",
            help="health events: times are numbers of --time-unit after this time (a published "
            "trace's relative times)",
        ),
        option(
            "--time-unit",
            metavar="UNIT",
            help="unit of times relative to --time-origin: days, hours, minutes, s (default) or ms",
        ),
        option(
            "--not-before",
            metavar="ISO",
            help="records dated earlier are implausible and quarantined (default 2000-01-01; "
            "historical logs such as LANL's 1996-2005 release need an earlier one)",
        ),
        option(
            "--exclude-hosts",
            metavar="FILE",
            help="component history: quarantine installations on these hosts (every word of "
            "FILE is a host, e.g. a service-node list)",
        ),
        option(
            "--replace",
            action="store_true",
            help="forget what these files produced before (e.g. with a wrong --tz), then ingest "
            "them again",
        ),
        option("--jobs", type=int, help="processes that parse files (default: one per core)"),
        option(
            "--settle",
            default=SETTLE,
            metavar="DUR",
            help="a file is read once its size and mtime have not changed for this long; one "
            "still changing is skipped with a warning (default 2s, or $GOODPUT_SETTLE; 0 reads "
            "at once)",
        ),
        examples=(
            "goodput ingest /data/sacct/ /data/dcgm-scrapes/ /var/log/kern.log* --cluster prod",
            "goodput ingest dump.txt --format sacct --fields xdmod",
            (
                "goodput ingest smi.csv --format nvidia-smi --host gpu-node-007 --time "
                "2026-01-05T10:00:00Z"
            ),
        ),
        help="parse source files into the warehouse",
    )


def add_forget(sub) -> None:
    command(
        sub,
        cmd_forget,
        option(
            "targets",
            nargs="+",
            metavar="PATH|SHA256",
            help="an ingested file's path or sha256 (see the ingest_manifest table)",
        ),
        examples=("goodput forget /data/sacct/2026-01.txt",),
        help="remove every row some ingested files produced, so they can be ingested again",
    )
