"""Landing-directory sensor, the daily build schedule and the hourly pull schedule.

Collectors drop files into ``$GOODPUT_HOME/landing/``. The sensor hashes files newer than its
cursor and requests one ingest run per batch of new content: a file whose sha256 is already in
the manifest, or was already requested, is never requested again (so a file dropped twice runs
once). The cursor, kept by Dagster, holds the newest modification time seen and the shas
requested but not yet in the manifest.
"""


import json
import os
from datetime import UTC, timedelta

import dagster as dg

from ingest.runner import file_sha256, iter_files
from pipelines.assets import TELEMETRY_DAYS
from pipelines.resources import GoodputConfig, select_sources

MAX_FILES_PER_RUN = 500


def new_landing_files(goodput: GoodputConfig, cursor: str | None) -> tuple[list[tuple[str, str]], str]:
    """(path, sha256) of files to ingest, and the next cursor. Plain function: testable
    without a Dagster instance."""
    state = json.loads(cursor) if cursor else {"mtime": 0.0, "pending": []}
    wh = goodput.warehouse()
    known = wh.known_sha256()
    pending = [s for s in state["pending"] if s not in known]
    skip = known | set(pending)
    newest = state["mtime"]
    found: list[tuple[str, str]] = []
    for path in iter_files([wh.landing]):
        mtime = os.stat(path).st_mtime
        if mtime <= state["mtime"]:
            continue
        newest = max(newest, mtime)
        sha, _ = file_sha256(path)
        if sha in skip:
            continue
        skip.add(sha)
        found.append((str(path), sha))
    pending += [sha for _, sha in found]
    return found, json.dumps({"mtime": newest, "pending": pending})


def build_sensor(job) -> dg.SensorDefinition:
    @dg.sensor(job=job, minimum_interval_seconds=60, description="Ingest new files dropped in $GOODPUT_HOME/landing/.")
    def landing_sensor(context: dg.SensorEvaluationContext, goodput: GoodputConfig):
        found, cursor = new_landing_files(goodput, context.cursor)
        context.update_cursor(cursor)
        if not found:
            return dg.SkipReason("no new files in the landing directory")
        for i in range(0, len(found), MAX_FILES_PER_RUN):
            chunk = found[i : i + MAX_FILES_PER_RUN]
            yield dg.RunRequest(
                run_key="-".join(sha[:16] for _, sha in chunk[:4]) + f"-{len(chunk)}",
                run_config={"ops": {"ingested_sources": {"config": {"paths": [p for p, _ in chunk]}}}},
                tags={"goodput/files": str(len(chunk))},
            )

    return landing_sensor


def build_schedule(job) -> dg.ScheduleDefinition:
    """Daily at 02:30 UTC: everything downstream of ingest, rolling up the previous day."""

    @dg.schedule(job=job, name="daily_build", cron_schedule="30 2 * * *", execution_timezone="UTC",
                 description="Rebuild everything downstream of ingest once a day (previous day's rollup partition).")
    def daily_build(context: dg.ScheduleEvaluationContext):
        day = (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=1)).date().isoformat()
        if not context.instance.has_dynamic_partition(TELEMETRY_DAYS.name, day):
            return dg.SkipReason(f"no telemetry ingested for {day} (no {TELEMETRY_DAYS.name} partition)")
        return dg.RunRequest(run_key=day, partition_key=day)

    return daily_build


PULL_CRON = os.environ.get("GOODPUT_PULL_CRON", "5 * * * *")  # hourly, 5 minutes past


def pull_schedule(job) -> dg.ScheduleDefinition:
    """Every hour (``$GOODPUT_PULL_CRON``): pull every live source from its cursor. On by default:
    it skips, saying why, while the home has no ``sources.toml``."""

    @dg.schedule(job=job, name="hourly_pull", cron_schedule=PULL_CRON, execution_timezone="UTC",
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="Pull every live source of HOME/sources.toml from its cursor to now.")
    def hourly_pull(context: dg.ScheduleEvaluationContext, goodput: GoodputConfig):
        from sources.base import SourceConfigError

        try:
            sources = select_sources(goodput.warehouse())
        except SourceConfigError as exc:
            return dg.SkipReason(str(exc))
        if not sources:
            return dg.SkipReason(f"no sources in {goodput.warehouse().home / 'sources.toml'}")
        return dg.RunRequest(tags={"goodput/launched_by": "schedule"})

    return hourly_pull
