"""Slurm accounting (slurmdbd) as a live source: job attempts from ``sacct``, node state history
from ``sacctmgr show event``, run on this host or through ``command_prefix`` (``["ssh",
"login1"]``). Documents are ``sacct`` (``--parsable2`` with a random ``--delimiter``: see
``delimiter``), ``sacct-json`` and ``sacctmgr-events`` text, read by the same parsers as files.

Only attempts that have ENDED are pulled, so a stored record never changes: ``-s`` lists every
terminal state (``TERMINAL_STATES``), and with states given slurmdbd selects a job record by its
end time (``time_end BETWEEN -S AND -E``). Checked on Slurm 22.05.8 (tests/test_pull_slurm.py):
a running job is in no window until the one in which it ends; a ``--requeue`` job's NODE_FAIL
attempt and its next run are each selected by their own end; a pending job (also one requeued
and waiting to run again) has no end and is in no window. BETWEEN includes both ends, so ``-E``
is the window's end less one second: a job ending on a chunk boundary is in one window only.
``env TZ=UTC`` makes sacct read ``-S``/``-E`` and print times in UTC wherever it runs.

Two sacct queries per window: the JobIDs with an attempt that ended in it, then every ended
attempt of those jobs up to the window's end (``--jobs`` with ``--duplicates``: from the job's
first run, however old). The parsers number a job's attempts within a document, so this gives a
run the same attempt number in every window that reads it (a requeued job's first run ended
yesterday, its rerun today: today's document holds both, numbered 1 and 2, and the first is an
exact repeat of what yesterday stored); with the window alone the rerun would be attempt 1 today
and a second row of the same run. Records that reach slurmdbd late (slurmctld queues them while
slurmdbd is away) are caught by ``OVERLAP``.

``mode``: ``json`` (``sacct --json``), ``parsable`` (``--parsable2`` with ``SACCT_FIELDS``), or
``auto``: ask ``sacct --version`` once per fetch and use ``--json`` from Slurm 23.02 on
(data_parser v0.0.39), ``--parsable2`` before. Slurm 22.05.8's ``--json`` (openapi/dbv0.0.38)
prints ``exit_code`` ``{"status": "SUCCESS", "return_code": 0}`` for a job that ran ``exit 3``
(its text: ``3:0``); 23.02 and later are not tried here (only 22.05.8 installs on this machine,
and the 23.x captures in tests/fixtures hold no failed job). The text is also the lighter one:
10,000 jobs are 2 MB of ``--parsable2`` against 31 MB of ``--json`` (benchmarks/
bench_pull_slurm.py). Node events: ``sacctmgr show event event=node`` returns every event that
overlaps the window (an open one in each window until it ends); its start and end rows are the
same records each time, stored once. slurmrestd is not a mode: the 22.05.8 slurmrestd that runs
here (``slurmrestd -a rest_auth/jwt`` with ``SLURM_JWT=daemon``, a token from ``scontrol token``)
answers ``GET /slurmdb/v0.0.38/jobs`` with the same lost exit codes, and that query has no
parameter for requeued attempts (its OpenAPI lists submit_time, start_time, end_time, account,
association, cluster, constraints, cpus_max/min, skip_steps, disable_wait_for_result, exit_code,
format, group, job_name, nodes_max/min, partition, qos, reason, reservation, state, step, node,
wckey; no duplicates), so every requeue before a job's last attempt would be missing.

With ``clusters`` a list, each fetch first checks with ``sacctmgr show cluster`` that slurmdbd
knows every name (``sacct -M`` with an unknown name prints no job and exits 0: a typo would pull
nothing, silently). A command that fails (non-zero exit, timeout) is retried ``src.retries``
times with exponential backoff, then raises ``SourceError`` with its first stderr line; a
missing command (not found here, or exit 126/127 through the prefix) fails at once.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Iterator
from datetime import timedelta

from ingest.formats import sacct_json
from ingest.formats.sacctmgr_events import EVENT_FIELDS
from ingest.job_checks import STATES
from sources.base import Document
from sources.base import SourceConfig
from sources.base import SourceError
from sources.base import Window
from sources.base import run_command

KIND = "slurm"
OPTIONS: dict[str, object] = {
    "command_prefix": [],  # argv before each command: ["ssh", "login1"], ["env", "SLURM_CONF=..."]
    "clusters": "all",  # "all" (--allclusters) or a list of cluster names (-M a,b)
    "mode": "auto",  # auto | json | parsable
    "events": True,  # also pull node state history (sacctmgr show event)
}
OPTION_TYPES = {"clusters": (str, list)}
CHUNK = timedelta(hours=6)
OVERLAP = timedelta(hours=1)

MODES = ("auto", "json", "parsable")
JSON_FROM = (23, 2)  # auto uses --json from this release on (see the docstring)
# A job's last state once it ended: every state but those of a job that is still queued or running.
TERMINAL_STATES = tuple(sorted(STATES - {"PENDING", "RUNNING", "RESIZING", "SUSPENDED"}))
# What ingest/formats/sacct/ reads into job_attempts.
SACCT_FIELDS = (
    "JobID",
    "Cluster",
    "Partition",
    "Account",
    "User",
    "JobName",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "State",
    "ExitCode",
    "NNodes",
    "AllocCPUS",
    "AllocTRES",
    "ReqTRES",
    "Reason",
    "NodeList",  # last: no user's text (a job name may hold a newline)
)
_TIME = "%Y-%m-%dT%H:%M:%S"


def _options(src: SourceConfig) -> tuple[list[str], str, str]:
    prefix, mode, clusters = (
        src.options["command_prefix"],
        src.options["mode"],
        src.options["clusters"],
    )
    if not isinstance(prefix, list) or not all(isinstance(a, str) for a in prefix):
        raise SourceError(f"{src.name}: command_prefix must be a list of strings, not {prefix!r}")
    if mode not in MODES:
        raise SourceError(f"{src.name}: mode must be one of {', '.join(MODES)}, not {mode!r}")
    if clusters != "all" and not (
        isinstance(clusters, list) and clusters and all(isinstance(c, str) for c in clusters)
    ):
        raise SourceError(
            f'{src.name}: clusters must be "all" or a list of cluster names, not {clusters!r}'
        )
    return prefix, mode, clusters


def _bounds(window: Window) -> tuple[str, str]:
    """sacct's inclusive -S/-E for the half-open window (whole seconds)."""
    return window.start.strftime(_TIME), (window.end - timedelta(seconds=1)).strftime(_TIME)


def _sacct(src: SourceConfig, shape: list[str], select: list[str]) -> list[str]:
    _, _, clusters = _options(src)
    where = ["--allclusters"] if clusters == "all" else ["-M", ",".join(clusters)]
    return ["env", "TZ=UTC", "sacct", *shape, "--duplicates", *where,
            f"--state={','.join(TERMINAL_STATES)}", *select]  # fmt: skip


def ids_args(src: SourceConfig, window: Window) -> list[str]:
    """The jobs with an attempt that ended in the window (their JobIDs)."""
    start, end = _bounds(window)
    return _sacct(src, ["--parsable2", "--noheader", "--allocations", "--format=JobID"],
                  [f"--starttime={start}", f"--endtime={end}"])  # fmt: skip


# sacct prints a job name as it is, line breaks and '|' included: with the default delimiter a
# user could name a job so that the text holds a whole record of another job. The text's
# delimiter is drawn per fetch, from characters no shell (an ssh command_prefix) treats
# specially: a name cannot hold it, so it can neither end a record nor start one
# (ingest/formats/sacct/ joins the lines of a record a line break cut).
DELIMITER_CHARS = "@%+=:,./-"
# 9**16 (about 51 bits), drawn anew for each pull, after the names were written; each field
# costs its length in transfer (10,000 jobs: 2.9 MB more than with '|')
DELIMITER_LEN = 16


def delimiter() -> str:
    """A random delimiter that does not overlap itself (found once wherever it stands)."""
    while True:
        d = "".join(secrets.choice(DELIMITER_CHARS) for _ in range(DELIMITER_LEN))
        if not any(d[:k] == d[-k:] for k in range(1, len(d))):
            return d


def sacct_args(
    src: SourceConfig, window: Window, json: bool, ids: list[str], delim: str = "|"
) -> list[str]:
    """Every attempt of ``ids`` that ended before the window's end (from the first: with
    ``--jobs`` sacct starts at the epoch), so each document numbers a job's attempts from its
    first run and a run has the same attempt number in every window that reads it; the text
    with ``delim`` between fields."""
    shape = (
        ["--json"]
        if json
        else [
            "--parsable2",
            f"--delimiter={delim}",
            "--allocations",
            f"--format={','.join(SACCT_FIELDS)}",
        ]
    )
    return _sacct(src, shape, [f"--endtime={_bounds(window)[1]}", f"--jobs={','.join(ids)}"])


def events_args(src: SourceConfig, window: Window) -> list[str]:
    _, _, clusters = _options(src)
    where = ["all_clusters"] if clusters == "all" else [f"clusters={','.join(clusters)}"]
    start, end = _bounds(window)
    return [
        "env",
        "TZ=UTC",
        "sacctmgr",
        "--parsable2",
        "show",
        "event",
        "event=node",
        *where,
        f"start={start}",
        f"end={end}",
        f"format={','.join(EVENT_FIELDS)}",
    ]


VERSION_ARGS = ["sacct", "--version"]
IDS_PER_COMMAND = 5000  # JobIDs per --jobs list (~40 kB of command line, also through ssh)
CLUSTERS_ARGS = ["sacctmgr", "--noheader", "--parsable2", "show", "cluster", "format=Cluster"]


def plan(src: SourceConfig, window: Window) -> list[str]:
    prefix, mode, clusters = _options(src)
    lines, delim = [], "<random per pull>"
    for w in window.chunks(CHUNK):
        if clusters != "all":
            lines.append(shlex.join(prefix + CLUSTERS_ARGS))
        lines.append(shlex.join(prefix + ids_args(src, w)))
        ids = ["<JobIDs it prints>"]
        if mode == "auto":
            v = f"{JSON_FROM[0]}.{JSON_FROM[1]:02d}"
            lines += [
                shlex.join(prefix + VERSION_ARGS),
                f"[Slurm >= {v}] " + shlex.join(prefix + sacct_args(src, w, True, ids)),
                f"[Slurm < {v}] " + shlex.join(prefix + sacct_args(src, w, False, ids, delim)),
            ]
        else:
            lines.append(shlex.join(prefix + sacct_args(src, w, mode == "json", ids, delim)))
        if src.options["events"]:
            lines.append(shlex.join(prefix + events_args(src, w)))
    return lines


def fetch(src: SourceConfig, window: Window) -> Iterator[Document]:
    _, mode, clusters = _options(src)
    if clusters != "all":  # sacct -M with a name slurmdbd does not know prints nothing, exit 0
        known = run(src, CLUSTERS_ARGS).decode(errors="replace").split()
        unknown = [c for c in clusters if c not in known]
        if unknown:
            raise SourceError(f"{src.name}: slurmdbd knows no cluster {', '.join(unknown)} "
                              f"(it knows {', '.join(known) or 'none'})")  # fmt: skip
    tag = f"{window.start.isoformat()}..{window.end.isoformat()}"
    ids = sorted(set(run(src, ids_args(src, window)).decode(errors="replace").split()))
    if ids:
        if mode == "auto":
            try:
                version = release(run(src, VERSION_ARGS).decode(errors="replace"))
            except ValueError as exc:
                raise SourceError(f"{src.name}: {exc}") from None
            mode = "json" if version >= JSON_FROM else "parsable"
        as_json, delim = mode == "json", delimiter()
        for i in range(0, len(ids), IDS_PER_COMMAND):  # a job's attempts are all in one part
            part = f"{tag}#{i // IDS_PER_COMMAND + 1}" if len(ids) > IDS_PER_COMMAND else tag
            out = run(src, sacct_args(src, window, as_json, ids[i : i + IDS_PER_COMMAND], delim))
            yield Document(f"pull://{src.name}/sacct{'-json' if as_json else ''}/{part}",
                           whole_json(src, out) if as_json else out,
                           "sacct-json" if as_json else "sacct")  # fmt: skip
    if src.options["events"]:
        yield Document(
            f"pull://{src.name}/sacctmgr-events/{tag}",
            run(src, events_args(src, window)),
            "sacctmgr-events",
        )


def whole_json(src: SourceConfig, out: bytes) -> bytes:
    """``out``, an answer of ``sacct --json``, when the parser reads it as one whole document
    (``sacct_json.document``) with no error in it; else a SourceError: an answer cut short
    (exit 0) fails its window, which the next pull reads again, where as a document it would be
    one quarantined record and its window done."""
    doc, why, _ = sacct_json.document(out)
    what = f"{src.name}: sacct --json answered {len(out):,} bytes"
    if doc is None:
        raise SourceError(f"{what}, not a whole sacct JSON document ({why}): cut short?")
    errors = doc.get("errors")
    if isinstance(errors, list) and errors:
        first = errors[0]
        if isinstance(first, dict):
            first = first.get("description") or first.get("error") or first
        raise SourceError(f"{what} with an error: {str(first)[:300]}")
    return out


def release(version: str) -> tuple[int, int]:
    """(major, minor) of ``sacct --version`` output (``slurm 23.02.7``, ``slurm-wlm 22.05.8``)."""
    m = re.search(r"(\d+)\.(\d+)", version)
    if not m:
        raise ValueError(f"sacct --version printed no release: {version.strip()[:80]!r}")
    return int(m.group(1)), int(m.group(2))


def run(src: SourceConfig, args: list[str]) -> bytes:
    """The stdout of ``command_prefix + args`` (``sources.base.run_command``)."""
    prefix, _, _ = _options(src)
    argv = prefix + args
    return run_command(
        src, argv, shlex.join(argv[: len(prefix) + args.index(_program(args)) + 1]) + " ..."
    )


def _program(args: list[str]) -> str:
    """The Slurm command in ``args`` (after ``env TZ=UTC``)."""
    return next((a for a in args if a in ("sacct", "sacctmgr")), args[0])
