"""Redfish ``Thermal``, ``Power``, ``Sensor`` and expanded ``SensorCollection`` JSON to
``bmc_sensors``; one record = one reading (an array member, or one ``Sensor``).

A separate format from ``redfish`` (LogEntry -> ``hw_events``) because a format has one primary
table; ``detect`` tells them apart by ``@odata.type``.

- Thermal: ``Temperatures[].ReadingCelsius`` (``C``), ``Fans[].Reading`` + ``ReadingUnits``
  (``RPM`` / ``Percent``; old schemas' ``ReadingRPM``).
- Power: ``PowerControl[].PowerConsumedWatts``, ``Voltages[].ReadingVolts``,
  ``PowerSupplies[].LastPowerOutputWatts`` (sensor type ``power_supply``, so a PSU whose
  ``Status.Health`` is ``Warning`` stays visible even when it reports no output).
- Sensor: ``Reading`` + ``ReadingUnits`` (``Cel`` -> ``C``), ``ReadingType`` -> ``sensor_type``
  (``Rotational`` -> ``fan``), else (older schemas have no ``ReadingType``) the unit's type as
  for IPMI; ``ReadingTime`` when present.
- ``status``: ``Status.Health`` lower-cased (``ok`` / ``warning`` / ``critical``) while the sensor
  is enabled, else its ``Status.State`` (``disabled``, ``absent``); a disabled sensor has a null
  value and is still a row. ``Oem`` blocks and ``Redundancy`` sets are ignored.
- Time: ``ReadingTime``, else ``ctx.time`` (``--time``), else the file's modification time;
  a reading with none, or with one outside the plausible window, is quarantined; so is a
  non-finite reading (``NaN`` / ``Infinity``, which Python's JSON accepts) and an array that is
  not a JSON array (one quarantine row for it, the other arrays still read). Host as in
  ``redfish`` (ctx.host, file name, resource id).
"""

from __future__ import annotations

import polars as pl

from ingest import sel_sensor_classes as sc
from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.base import ParseResult
from ingest.base import implausible_time
from ingest.base import split_rejected
from ingest.base import stand_ins
from ingest.base import whole_file_quarantine
from ingest.bmc_common import ODATA_TYPE
from ingest.bmc_common import host_from_path
from ingest.bmc_common import iso_to_utc
from ingest.bmc_common import load
from ingest.bmc_common import odata_type
from ingest.bmc_common import raw_json
from ingest.bmc_common import resource_host
from warehouse.schemas import conform

# resource type -> [(array, value property (first present wins), unit property or fixed unit,
#                    sensor_type)]
ARRAYS: dict[str, list[tuple[str, tuple[str, ...], str, str]]] = {
    "Thermal": [
        ("Temperatures", ("ReadingCelsius",), "=C", "temperature"),
        ("Fans", ("Reading", "ReadingRPM"), "ReadingUnits", "fan"),
    ],
    "Power": [
        ("PowerControl", ("PowerConsumedWatts",), "=W", "power"),
        ("Voltages", ("ReadingVolts",), "=V", "voltage"),
        ("PowerSupplies", ("LastPowerOutputWatts",), "=W", "power_supply"),
    ],
}
READING_TYPES = {"rotational": "fan", "temperature": "temperature", "power": "power",
                 "voltage": "voltage", "current": "current", "airflow": "airflow"}  # fmt: skip


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _status(item: dict) -> str | None:
    st = item.get("Status") if isinstance(item.get("Status"), dict) else {}
    state, health = st.get("State"), st.get("Health")
    if isinstance(state, str) and state.lower() not in ("enabled", ""):
        return state.lower()
    return (
        health.lower()
        if isinstance(health, str)
        else (state.lower() if isinstance(state, str) else None)
    )


def _readings(doc: dict) -> tuple[list[dict], list[tuple[int, str, str]]] | None:
    """One dict per reading, and the records that are not readings; None if no reading resource."""
    kind = odata_type(doc)
    out: list[dict] = []
    bad: list[tuple[int, str, str]] = []
    if kind in ARRAYS:
        for array, value_keys, unit_key, stype in ARRAYS[kind]:
            items = doc.get(array)
            if items is not None and not isinstance(items, list):
                bad.append(
                    (len(out) + len(bad) + 1, raw_json(items), f"{array} is not a JSON array")
                )
                continue
            for item in items or []:
                rec = len(out) + len(bad) + 1
                if not isinstance(item, dict):
                    bad.append((rec, raw_json(item), f"{array} member is not a JSON object"))
                    continue
                value = next((item[k] for k in value_keys if k in item), None)
                unit = unit_key[1:] if unit_key.startswith("=") else item.get(unit_key) or "RPM"
                out.append(_row(rec, item, value, unit, stype))
        return out, bad
    sensors = None
    if kind == "Sensor":
        sensors = [doc]
    elif kind == "SensorCollection" and isinstance(doc.get("Members"), list):
        sensors = doc["Members"]
    if sensors is None:
        return None
    for rec, item in enumerate(sensors, start=1):
        if not isinstance(item, dict) or set(item) <= {"@odata.id", "@odata.type"}:
            bad.append(
                (rec, raw_json(item), "collection member is only a link; fetch with $expand=.")
            )
            continue
        rtype = item.get("ReadingType")
        stype = READING_TYPES.get(rtype.lower(), rtype.lower()) if isinstance(rtype, str) else None
        out.append(
            _row(
                rec,
                item,
                item.get("Reading"),
                item.get("ReadingUnits"),
                stype,
                item.get("ReadingTime"),
            )
        )
    return out, bad


def _row(rec, item, value, unit, stype, reading_time=None) -> dict:
    name = item.get("Name") or item.get("Id") or item.get("MemberId")
    return {
        "rec": rec,
        "raw": raw_json(item),
        "sensor": str(name) if name is not None else None,
        "sensor_type": stype,
        "value": _number(value),
        "unit": unit if isinstance(unit, str) else None,
        "status": _status(item),
        "reading_time": reading_time if isinstance(reading_time, str) else None,
    }


_SCHEMA = {
    "rec": pl.Int64,
    "raw": pl.Utf8,
    "sensor": pl.Utf8,
    "sensor_type": pl.Utf8,
    "value": pl.Float64,
    "unit": pl.Utf8,
    "status": pl.Utf8,
    "reading_time": pl.Utf8,
}


def parse(data: bytes, ctx: ParseContext) -> ParseResult:
    doc, err = load(data)
    found = _readings(doc) if isinstance(doc, dict) else None
    if err is None and found is None:
        err = "not a Redfish Thermal, Power, Sensor or expanded SensorCollection resource"
    if err is not None:
        return ParseResult({}, whole_file_quarantine(data, err), 1)
    rows, bad = found
    df = pl.DataFrame(rows, schema=_SCHEMA)
    fallback = ctx.time or ctx.mtime
    own, dst = iso_to_utc(pl.col("reading_time"), ctx.tz)
    df = df.with_columns(time=pl.coalesce(own, pl.lit(fallback, pl.Datetime("us"))), dst=dst)
    df = df.with_columns(
        error=pl.when(pl.col("dst").is_not_null())
        .then(pl.format("reading time: {}", "dst"))
        .when(pl.col("time").is_null())
        .then(pl.lit("no reading time: pass --time"))
        .when(~pl.col("value").is_finite().fill_null(True))
        .then(pl.format("non-finite reading: {}", pl.col("value").cast(pl.Utf8)))
        .otherwise(implausible_time(pl.col("time"), ctx))
    )
    df, q = split_rejected(df, line="rec", also=bad)
    if not df.height:
        return ParseResult({}, q, q.height)
    out = df.select(
        time=pl.col("time"),
        cluster=pl.lit(ctx.cluster),
        host=pl.lit(resource_host(ctx, doc), pl.Utf8),
        sensor=pl.col("sensor"),
        # older Sensor schemas have no ReadingType: the unit tells (Cel -> temperature)
        sensor_type=pl.coalesce(
            "sensor_type",
            sc.unit_expr(pl.col("unit")).replace_strict(
                sc.UNIT_SENSOR_TYPE, default=None, return_dtype=pl.Utf8
            ),
        ),
        value=pl.col("value"),
        unit=sc.unit_expr(pl.col("unit")),
        status=pl.col("status"),
        source=pl.lit("redfish"),
        source_file=pl.lit(ctx.path),
        source_line=pl.col("rec"),
    )
    return ParseResult(
        {"bmc_sensors": conform("bmc_sensors", out)},
        q,
        out.height + q.height,
        stand_ins=stand_ins(ctx, out, host_from_path(ctx.path) is not None),
    )


def detect(head: bytes, name: str) -> int:
    types = set(ODATA_TYPE.findall(head.decode("utf-8", errors="replace")))
    if types & {"LogEntry", "LogEntryCollection"}:
        return 0
    return CERTAIN if types & {"Thermal", "Power", "Sensor", "SensorCollection"} else 0


FORMAT = FormatSpec.declare(
    globals(),
    primary="bmc_sensors",
    description="Redfish Thermal / Power / Sensor readings JSON",
)
