"""Kernel logs (dmesg, syslog, journald, /dev/kmsg) to ``hw_events``: NVIDIA XID and NVSwitch
SXID lines, plus the host faults the kernel reports (mlx5 IB link down / port module errors,
machine checks, EDAC memory errors, NVMe controller loss).

Stamps (each optionally after ``dmesg --decode``'s ``kern  :warn  : ``): ``dmesg -T/--ctime``
``[Fri Aug 30 11:43:09 2024]`` (local, ``ctx.tz``), also with ``--show-delta``'s ``<  0.000293>``;
``--time-format=iso`` ``2025-01-21T04:41:44,283302+00:00``; ``--time-format=reltime``
``[Jan21 04:41]`` headers and ``[  +0.000123]`` lines (minute precision: a ``+`` line takes the
minute of the header above it, the year as for syslog); syslog RFC 3164 / journald ``short`` /
``short-precise`` ``Nov 20 10:00:00 host kernel:`` (no year: the year that puts the line not
after ``ctx.time``, else the file's mtime); RFC 5424 ``<4>1 2025-...Z host kernel - - -``;
journald ``short-iso[-precise]`` ``2025-05-01T09:58:12+0000 host kernel:``, ``short-unix``
``1737434504.283302 host kernel:`` and ``json`` (one object per line: ``__REALTIME_TIMESTAMP``,
``_HOSTNAME``, ``MESSAGE``). Time since boot (raw dmesg ``[24128.828315]``, journald
``short-monotonic`` ``[24128.828315] host kernel:``, ``/dev/kmsg`` ``6,1234,5678901,-;``, json
``__MONOTONIC_TIMESTAMP`` alone) needs the boot's time: the file's own ``setting system clock to
... (epoch)`` banner of the same boot, else ``ctx.options['boot_time']``, else ``ctx.time``.
Lines with no stamp (``--time-format=notime``) or only ``--time-format=delta``'s gap take
``ctx.time``. Otherwise a line is quarantined with the reason true for it; times outside the
plausible window (``ingest.base.implausible_time``) are quarantined per line.

Records: one row per event. Several lines of one event (same host, device, code and link within
a second, different text: XID 13's per-SM lines, SXID ``Severity``/``Data`` lines) collapse into
one whose severity is the worst its lines state; identical repeats of an event within
``ctx.options['xid_merge_window_s']`` (default 60 s) of the previous one merge into one row whose
``count`` says how many events it holds. NVLink XIDs (144-150 ...) and SXids carry ``link``
(``Link N``; SXid ``Engine instance N``; ``Data`` lines continue the line above): one event per
link. The same line twice (overlapping rotated files) is one record: the repeat is dropped
before repeat merging (it would raise a ``count``) and counted as a duplicate
(``ParseResult.duplicates``); a repeat of a quarantined line is quarantined again. A record is
such a row, so records = rows + quarantined lines + duplicates. Lines that are not faults (boot
banners, ``NVRM: GPU at ...`` identity lines, other drivers) are not records; the identity lines
fill ``uuid``. ``caused by previous Xid N`` links ``caused_by`` to the latest earlier event with
code N on the same GPU, else on the same host. Large files arrive in chunks: the runner has
``extract`` classify each chunk's candidate lines (``FormatSpec.extract``) and ``merge`` finish
them once, as one file, so the events do not depend on chunking or compression.

Host: the syslog/journald host, else ``ctx.host``, else a host-like file name
(``gpu-node-001.log``), else null. ``gpu`` stays null (the kernel names PCI bus ids only):
``analysis.gpu_identity.fill_gpu_index`` maps them to indices downstream.

The package, one module per step: per chunk, ``chunk.extract`` has ``lines`` find the candidate
lines, reads their stamp/host prefix (``patterns``) and has ``classify`` say what each line is;
per file, ``events.finish`` dates them (``stamps``, ``boots``), quarantines what cannot be read,
describes the events (``describe``), merges repeats (``repeats``) and links causes (``causes``).
``sniff`` recognises the format.
"""

from __future__ import annotations

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult

from .chunk import extract
from .events import finish
from .sniff import detect as detect  # FormatSpec.declare finds it by this name


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    return finish(extract(data, ctx), ctx)


def merge(parts: list[pl.DataFrame], ctx: ParseContext) -> ParseResult:
    """One file's chunks (``extract`` of each, in file order) finished as one: collapse, repeat
    merging, exact duplicates, boot banners, reltime headers, UUIDs and cause links then cross
    chunk boundaries, so the events do not depend on how the runner cut the file."""
    return finish(pl.concat(parts, how="diagonal_relaxed"), ctx)


FORMAT = FormatSpec.declare(
    globals(),
    primary="hw_events",
    description=(
        "kernel logs (dmesg, syslog, journald, /dev/kmsg): NVIDIA XID / SXID, mlx5 link, MCE, "
        "EDAC, NVMe"
    ),
    line_oriented=True,
)
