"""Landing-directory sensor, the daily build schedule and the hourly pull schedule.

Collectors drop files into ``$GOODPUT_HOME/landing/``. The sensor is keyed by content and
state, never by modification time (``mv``, ``rsync -a`` and ``tar x`` keep old mtimes): every
tick it lists the landing folder, waits until a file is stable (size and mtime unchanged for the
settle time, ``$GOODPUT_SETTLE`` as for ``goodput ingest --settle``), hashes what an ingest
would parse of it (an incomplete last line held back: the sha256 the manifest records), and
requests one ingest run per batch of content that is neither in the manifest nor requested
already (a file dropped twice runs once). A file that is only an incomplete line waits; one
whose held-back last line is completed later changes, so it is hashed and requested again,
and the ingest stores only its new record. A requested sha still missing from the manifest once
no ingest run is active is a failed run: it is requested again after a backoff that doubles
per attempt (``RETRY_FIRST_S`` .. ``RETRY_MAX_S``). A sha leaves the cursor once it is in the
manifest, so a file forgotten and dropped in again is new; every request has its own run key
(a counter in the cursor), as Dagster drops a request whose key it has seen.
"""

import json
import os
import time
from datetime import UTC
from datetime import timedelta

import dagster as dg

from ingest.files import iter_files
from ingest.files import parsed_sha256
from pipelines.assets import TELEMETRY_DAYS
from pipelines.cli.options import SETTLE
from pipelines.cli.values import parse_duration
from pipelines.resources import Settings
from pipelines.resources import select_sources

MAX_FILES_PER_RUN = 500
RETRY_FIRST_S = 300.0  # a failed file is requested again after 5 min, then 10, 20 ...
RETRY_MAX_S = 6 * 3600.0


def new_landing_files(
    settings: Settings,
    cursor: str | None,
    now: float | None = None,
    active: bool = False,
    settle_s: float | None = None,
) -> tuple[list[tuple[str, str]], str]:
    """(path, sha256) of files to ingest, and the next cursor. ``active``: an ingest run this
    sensor launched is still queued or running (its files are not failed yet). Plain function:
    testable without a Dagster instance.

    The cursor: ``pending`` sha -> {tries, next: epoch seconds of the next retry}, ``hashed``
    path -> [size, mtime_ns, sha or null, first seen with this size and mtime] (files are hashed
    again only when they change; null: not stable yet, or nothing but an incomplete line),
    ``seq``: the number of run requests made. ``settle_s``: default ``$GOODPUT_SETTLE``."""
    now = time.time() if now is None else now
    settle_s = parse_duration(SETTLE) if settle_s is None else settle_s
    state = json.loads(cursor) if cursor else {}
    pending: dict[str, dict] = (
        state.get("pending") if isinstance(state.get("pending"), dict) else {}
    )
    hashed: dict[str, list] = state.get("hashed", {})
    known = settings.warehouse().known_sha256()
    seen: dict[str, list] = {}
    found: list[tuple[str, str]] = []
    for path in iter_files([settings.warehouse().landing]):
        try:
            st = os.stat(path)
            entry = hashed.get(str(path))
            if entry is None or len(entry) < 4 or entry[:2] != [st.st_size, st.st_mtime_ns]:
                entry = [st.st_size, st.st_mtime_ns, None, now]
            stable = now - st.st_mtime_ns / 1e9 >= settle_s or now - entry[3] >= settle_s
            if entry[2] is None and stable:
                sha, size, _ = parsed_sha256(path)
                entry[2] = sha if size else None  # only an incomplete line: wait for its newline
        except OSError:  # removed or unreadable between listing and hashing: the next tick sees it
            continue
        seen[str(path)] = entry
        sha = entry[2]
        if sha is None or sha in known or any(sha == s for _, s in found):
            continue
        tried = pending.get(sha)
        if tried is not None and (active or now < tried["next"]):
            continue
        tries = 1 if tried is None else tried["tries"] + 1
        pending[sha] = {
            "tries": tries,
            "next": now + min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (tries - 1)),
        }
        found.append((str(path), sha))
    on_disk = {e[2] for e in seen.values()}
    pending = {s: p for s, p in pending.items() if s not in known and s in on_disk}
    return found, json.dumps({"pending": pending, "hashed": seen, "seq": state.get("seq", 0)})


_ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def build_sensor(job) -> dg.SensorDefinition:
    @dg.sensor(
        job=job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Ingest new files dropped in $GOODPUT_HOME/landing/ (on by default).",
    )
    def landing_sensor(context: dg.SensorEvaluationContext, settings: Settings):
        running = context.instance.get_runs(
            dg.RunsFilter(
                job_name=job.name, statuses=_ACTIVE, tags={"goodput/launched_by": "landing_sensor"}
            ),
            limit=1,
        )
        found, cursor = new_landing_files(settings, context.cursor, active=bool(running))
        if not found:
            context.update_cursor(cursor)
            return dg.SkipReason("no new files in the landing directory")
        state = json.loads(cursor)
        for i in range(0, len(found), MAX_FILES_PER_RUN):
            chunk = found[i : i + MAX_FILES_PER_RUN]
            state["seq"] += 1
            yield dg.RunRequest(
                run_key=f"landing-{state['seq']}-"
                + "-".join(sha[:16] for _, sha in chunk[:4])
                + f"-{len(chunk)}",
                run_config={
                    "ops": {"ingested_sources": {"config": {"paths": [p for p, _ in chunk]}}}
                },
                tags={"goodput/files": str(len(chunk)), "goodput/launched_by": "landing_sensor"},
            )
        context.update_cursor(json.dumps(state))

    return landing_sensor


def build_schedule(job) -> dg.ScheduleDefinition:
    """Daily at 02:30 UTC: everything downstream of ingest, rolling up the previous day. On by
    default: it skips, saying why, when no telemetry was ingested for that day."""

    @dg.schedule(
        job=job,
        name="daily_build",
        cron_schedule="30 2 * * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Rebuild everything downstream of ingest once a day (previous day's "
        "rollup partition; on by default).",
    )
    def daily_build(context: dg.ScheduleEvaluationContext):
        day = (
            (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=1))
            .date()
            .isoformat()
        )
        if not context.instance.has_dynamic_partition(TELEMETRY_DAYS.name, day):
            return dg.SkipReason(
                f"no telemetry ingested for {day} (no {TELEMETRY_DAYS.name} partition)"
            )
        return dg.RunRequest(run_key=day, partition_key=day)

    return daily_build


PULL_CRON = os.environ.get("GOODPUT_PULL_CRON", "5 * * * *")  # hourly, 5 minutes past


def pull_schedule(job) -> dg.ScheduleDefinition:
    """Every hour (``$GOODPUT_PULL_CRON``): pull every live source from its cursor. On by default:
    it skips, saying why, while the home has no ``sources.toml``."""

    @dg.schedule(
        job=job,
        name="hourly_pull",
        cron_schedule=PULL_CRON,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Pull every live source of HOME/sources.toml from its cursor to now.",
    )
    def hourly_pull(context: dg.ScheduleEvaluationContext, settings: Settings):
        from sources.base import SourceConfigError

        try:
            sources = select_sources(settings.warehouse())
        except SourceConfigError as exc:
            return dg.SkipReason(str(exc))
        if not sources:
            return dg.SkipReason(f"no sources in {settings.warehouse().home / 'sources.toml'}")
        return dg.RunRequest(tags={"goodput/launched_by": "schedule"})

    return hourly_pull
