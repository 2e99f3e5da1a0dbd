"""Component installation history (RMA / CMDB exports) CSV to ``component_history``.

Canonical header: ``component_class,serial,slot,installed_at,removed_at,removal_reason,failed``
(optional ``model``; ``host`` + ``position`` may replace ``slot``). One record = one data row.

- Other exports: ``ctx.column_map`` (``--map serial=SN,slot=location,installed_at=InstallDate``,
  canonical -> their header; headers match case- and space-insensitively). A required column
  (``component_class``, ``serial``, ``installed_at``, and ``slot`` or ``host``) still missing
  after mapping quarantines the whole file with one row naming it and the ``--map`` flag.
- CSV records are split per record (``ingest.csv_records``): a quoted field may span lines; a quote
  never closed, a quote inside an unquoted field or a row with another field count than the header
  quarantines that record only, with the reason; the other records land. A record repeating an
  earlier one exactly is an ordinary row here: the warehouse stores the unit once and counts the
  repeat as a duplicate (``rows_duplicate``).
- ``slot`` is ``host/position``: split at the first ``/`` into ``host`` and ``position``.
- Times: ISO-8601 with or without zone, and common export forms (``2024-01-31 10:00``,
  ``01/31/2024 10:00``, ``31.01.2024``, ``2024/01/31``, epoch seconds), tried in that order (first
  that parses wins: a slash date is read month first; pass ``ctx.options['time_format']`` for
  day-first exports). Zone-less times are read in ``ctx.tz``.
- Empty ``removed_at`` = still in service: stays null (lifetimes censor it at ``--as-of`` or at
  the latest time in the data). ``removed_at`` before ``installed_at``, an unreadable time or one
  outside ``ctx``'s plausible window, an empty serial or class, or an unreadable ``failed``
  quarantines the row.
- ``failed``: true/false, 1/0, yes/no, y/n, t/f. Without a ``failed`` column, a removed unit
  counts as failed when its ``removal_reason`` says so (fail, fault, error, dead, RMA, defect).
- ``component_class`` is lower-cased and common names are mapped to the taxonomy of docs/design.md
  (``GPU``, ``HBM`` -> gpu_memory, ``DIMM`` -> host_memory, ``PSU``, ``fan`` -> cooling,
  ``SSD``/``NVMe`` -> storage, ``HCA``/``NIC`` -> nic); other names are kept as given.

Three other layouts real collectors write are recognised by their first line (``layout``):

- **Inventory intervals** (``serial | location | first seen | last seen``), the shape OLCF
  published for Titan's GPUs: one row per contiguous sighting of a serial in a location, a
  blank serial continuing the serial above, and event rows `` | | DBE | time`` marking the
  serial's failure. A record is one interval row; an event row belongs to the serial's latest
  interval starting at or before the event (that unit failed; ``removal_reason`` = the event,
  ``removed_at`` = the later of last seen and the event). The class is not in the file: it comes
  from the file name (``titan.gpu.history.txt`` -> gpu), else the whole file is quarantined
  saying so. ``location`` is the node; ``position`` is the class.
- **HPE ``sat hwhist``** tables (``| xname | FRUID | Timestamp | EventType |`` in either column
  order, ``+---+`` borders): Hardware State Manager events (Added, Removed, Detected, Scanned)
  of each FRU at each location, folded into installations: a record is one FRU's stay at one
  xname, from its first event to its ``Removed`` event (null while still seen). The FRUID
  (``Type.Maker.Part.Serial``) is the serial, its type the class (``NodeAccel`` -> gpu,
  ``Processor`` -> cpu, ``Memory`` -> host_memory, ...), its middle the model. HSM does not
  say why a FRU was removed: ``failed`` is false and the removal is censored, not a failure.
- **Insert / remove with events** (header ``SN,location,insert,remove,...,event``; ``out`` and
  ``duration`` optional), the shape OLCF published for Titan's 37,343 GPU installations
  (``gc_full.csv``). A row with an ``insert`` time is an installation (a record): ``location``
  is the node (Cray cname ``c11-2c1s4n1``, which lifetimes read as cabinet column, row, cage,
  blade slot and node), ``remove`` its last sighting, ``event`` why it ended (``DBE`` double-bit
  ECC -> gpu_memory, ``OTB`` off the bus -> gpu). A row without ``insert`` is an event of the
  serial's installation at that location starting at or before it (the GPU stayed in after a
  reboot). An installation failed when it ended with an event, or was removed after one of its
  events; one not ``out`` whose remove is the file's last time is still in service (removed_at
  null); else its removal is censored. The class comes from the file name (``psu_history.csv``),
  else gpu. Every event row, installation or not, is also a ``failures`` row (the system's
  failure log: start = the event time, no repair time); an event row that is no installation
  is not a component-history record.

Any layout: ``ctx.options['exclude_hosts']`` (``goodput ingest --exclude-hosts FILE``: every
whitespace-separated word of the file is a host name, so a plain list and a node table such as
Titan's ``titan.service.txt`` both work) quarantines each installation on those hosts, saying so:
service nodes are not compute units.

The package, one module per layout: ``canonical`` (the CSV, mapped with ``--map``),
``intervals``, ``hwhist`` and ``insert_remove``; ``normalize`` turns the canonical columns every
layout yields into rows and says why a row is quarantined, and ``sniff`` tells the layouts apart
(``layout``) and recognises the format.
"""

import polars as pl

from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import numbered_lines
from ingest.csv_records import csv_records

from .canonical import parse_csv
from .hwhist import parse_hwhist
from .insert_remove import parse_insert_remove
from .intervals import parse_intervals
from .sniff import BORDER
from .sniff import detect as detect  # FormatSpec.declare finds it by this name
from .sniff import layout


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    data = data.removeprefix(b"\xef\xbb\xbf")  # drop a BOM
    kind = layout(data[:65536])
    if kind == "insert-remove":
        return parse_insert_remove(csv_records(numbered_lines(data, ParseContext()), ","), ctx)
    if kind != "csv":
        lines = numbered_lines(data, ParseContext())
        text = pl.col("raw").str.strip_chars()
        lines = lines.filter((text != "") & ~text.str.starts_with("#") & ~text.str.contains(BORDER))
        return (parse_hwhist if kind == "hwhist" else parse_intervals)(lines, data, ctx)
    return parse_csv(data, ctx)


FORMAT = FormatSpec.declare(
    globals(),
    primary="component_history",
    description=(
        "component installation history: CSV (canonical header or --map), inventory intervals, "
        "HPE sat hwhist"
    ),
)
