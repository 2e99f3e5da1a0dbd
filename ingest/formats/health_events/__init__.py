"""Health-event streams (``--format health-events``) to ``health_events``: one row per event (a
fault starting or ending, a condition's new status), paired into ``failures`` rows (source
``health-events``) by the build (``analysis/health_events.py``), so availability, MTTR, repair
fits, system MTBF and root causes read them as any failure log.

One record = one event: an element of a JSON array, a line of JSON lines, or a CSV row under its
header. Layouts recognised by content (``sniff.layout``):

- ``nvsentinel``: NVIDIA NVSentinel ``HealthEvent``s as its store exports them (``mongoexport``
  of ``HealthEvents``: ``healthevent.nodename``, ``generatedtimestamp.{seconds,nanos}``,
  ``createdAt``; the PostgreSQL store's camel case) or bare. Fatal unhealthy: start; healthy:
  ends the check's fault (its entities', or all the check's); non-fatal: information.
- ``gpud``: leptonai gpud's ``/v1/events`` answer. ``Fatal`` / ``Critical``: start of its
  component's fault; ``SetHealthy``: ends them; ``reboot``: ends every fault of the machine.
  The machine is ``--host``, else the file's name (a stand-in, announced).
- ``k8s``: ``kubectl get nodes -o json`` (every condition: the kubelet's ``Ready`` and pressures,
  node-problem-detector's and NVSentinel's; the bad status starts the condition's fault, the good
  one says healthy) and node ``Event`` lists (``NodeNotReady`` / ``NodeReady`` and the pressure
  pairs). Sniffed as health events when a health agent's conditions (or node-pressure events
  only) are present; a plain node list is the ``k8s`` format's (``node_events``).
- ``events``: any other stream, by field names (``mapped.ALIASES``: ``node_id``, ``event_time``,
  ``event_type``, ``ticket`` ...) or ``--map canonical=theirs`` with dotted paths into nested JSON
  (``--map host=node_id,time=event_time,kind=event_type,cause=fault_type.Level,``
  ``component=fault_type.Class,sub_cause=fault_type.Desc``) and the kind's values
  (``start=fault_start,end=fault_end``; several with ``|``; the usual words otherwise: start,
  open, down, new, in progress ... / end, closed, resolved, up ...). Fields: ``system`` (else
  ``--cluster``), ``host``, ``time``, ``kind``, ``fault`` (what the start and its end both name:
  a ticket or incident id; else the cause, component and sub-cause joined), ``cause``,
  ``component``, ``sub_cause``, ``code``, ``severity``, ``action``, ``message``. A ticket
  state-change export (``number``, ``cmdb_ci``, ``state``, ``sys_updated_on``) is read here.

Times: ISO-8601 (a zone-less time in ``--tz``), the export forms of ``ingest.times``, epoch
seconds or milliseconds; ``--time-origin ISO --time-unit days|hours|minutes|s|ms`` reads every
time as a number of units after the origin (a published trace's relative times). ``kind`` is
``start`` | ``end`` | ``healthy`` (a status saying so: ends an open fault, else is a plain
observation) | ``info``. ``fault`` is general to specific, joined by `` / ``; an end names the
fault it ends, or a more general one (every open fault under it ends), or none (every open fault
of the node ends: a reboot). ``cause`` is lower case with ``_`` (``GpuXidError`` ->
``gpu_xid_error``); ``component_class`` the layout's, else the component's common name
(``ingest.component_names``), else the component as given.

Pairing (in the build, over every stored event, so a start in one file or pull and its end in the
next pair): per node and fault, in time order (ties: the file's order, then end before start); a
start while its fault is open repeats it (merged: one failure from the first start to the first
end after it); an end after the close repeats it; an end with no start before it makes no failure
(``health_event_pairs`` says so, with the reason); a start never closed is a failure still
``open`` at the end of the data. Every stored event has one ``health_event_pairs`` row.

Quarantined per record, with the reason: invalid JSON (a JSON line; a JSON document as a whole is
one record), a record that is not an object, a CSV row with the wrong field count, no host, no
time, an unreadable, non-relative number or implausible time, a kind value that means nothing,
a node without conditions, a condition without a transition time, an object of another kind than
Node or Event. Events about other objects than nodes are not records. An exact repeat of an event
(the same pull twice) is stored once (record key of ``health_events``).
"""

from __future__ import annotations

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import whole_file_quarantine

from . import gpud
from . import kubernetes
from . import mapped
from . import nvsentinel
from .finish import finish
from .records import Records
from .records import Unreadable
from .records import read_records
from .sniff import layout


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    if not data.strip():
        return ParseResult({}, ParseResult.empty_quarantine(), 0)
    name = "events" if ctx.column_map else (layout(data[:65536])[0] or "events")
    try:
        records = read_records(data, ctx)
        return _read(name, records, ctx)
    except Unreadable as exc:
        return ParseResult({}, whole_file_quarantine(data, str(exc)), 1)


def _read(name: str, records: Records, ctx: ParseContext) -> ParseResult:
    """The records read by their layout; ``source`` of the rows is the layout's name."""
    if name == "nvsentinel":
        return finish(nvsentinel.read(records), ctx, name)
    if name == "gpud":
        frame, guessed = gpud.read(records, ctx)
        return finish(frame, ctx, name, host_guessed=guessed)
    if name == "k8s":
        return finish(kubernetes.read(records), ctx, name)
    return finish(mapped.read(records, ctx), ctx, name)


def detect(head: bytes, name: str) -> int:
    return layout(head)[1]


FORMAT = FormatSpec.declare(
    globals(),
    primary="health_events",
    description=(
        "health-event streams (NVSentinel, gpud, Kubernetes node conditions, tickets, fault "
        "traces): one event per record, paired into failures"
    ),
)
