"""BMC sensor types and event texts to component classes and severities (IPMI and Redfish).

One table serves ``ipmitool sel`` (sensor type strings of ipmitool's ``sensor_type_desc``, IPMI
2.0 table 42-3) and Redfish ``LogEntry.SensorType`` (the same IPMI types, spelled
``Drive Slot/Bay``, ``Power Supply / Converter``, ``OS Stop/Shutdown`` ...): keys are compared
lower-cased with everything but letters and digits removed, so both spellings meet in one row.

Decisions a reader may question:

- ``Temperature`` / ``Fan`` / ``Cooling Device`` -> ``cooling``: an over-temperature SEL entry is
  a thermal event of the node (Llama 3's "thermal" bucket), whatever device the sensor sits on.
- ``Voltage`` / ``Current`` -> ``psu``: the power delivery path. ``Power Unit`` entries are mostly
  the host's power state (``Power off/down``, ``Power cycle``: maintenance, ``host_os``); only its
  failure texts (``Power Unit Failure detected``, ``AC lost``, ``Predictive failure``, soft power
  control failure) are ``psu`` (``POWER_UNIT_FAILURE``).
- ``System Firmware Progress``, boot, OS stop, watchdog and ACPI state -> ``host_os``: the host's
  boot / firmware / OS path ("host maintenance" in the Llama taxonomy), not the BMC.
- ``Event Logging Disabled``, ``System Event``, ``Management Subsys Health``, ``Battery`` (the
  CMOS/BMC battery), session / version / platform alerts -> ``bmc``: housekeeping of the
  management controller itself.
- ``Critical Interrupt`` (PCI SERR/PERR, bus errors, NMI), ``Module / Board``, ``Add-in Card``,
  ``Slot / Connector``, ``Cable / Interconnect``, ``Chassis`` and OEM types -> ``unknown``
  unless the sensor name (or Redfish message / origin) names the device (``GPU``, ``NIC``,
  ``DIMM``, ``PSU`` ...; see ``NAME_HINTS``): a PCIe bus error names the bus, not the GPU or NIC
  behind it, and a kernel XID/AER line at the same host and time does that job better.
"""

from __future__ import annotations

import re

import polars as pl

# ipmitool spelling (or Redfish spelling) -> component class.
SENSOR_TYPE_CLASS: dict[str, str] = {
    "Temperature": "cooling",
    "Voltage": "psu",
    "Current": "psu",
    "Fan": "cooling",
    "Physical Security": "unknown",
    "Physical Chassis Security": "unknown",
    "Platform Security": "bmc",
    "Platform Security Violation": "bmc",
    "Platform Security Violation Attempt": "bmc",
    "Processor": "cpu",
    "Power Supply": "psu",
    "Power Supply / Converter": "psu",
    "Power Unit": "host_os",
    "Cooling Device": "cooling",
    "Other": "unknown",
    "Other Units-based Sensor": "unknown",
    "Memory": "host_memory",
    "Drive Slot / Bay": "storage",
    "Drive Slot (Bay)": "storage",
    "Drive Slot": "storage",
    "Drive Bay": "storage",
    "POST Memory Resize": "host_memory",
    "System Firmwares": "host_os",
    "System Firmware": "host_os",
    "System Firmware Progress": "host_os",
    "Event Logging Disabled": "bmc",
    "Watchdog1": "host_os",
    "Watchdog 1": "host_os",
    "Watchdog2": "host_os",
    "Watchdog 2": "host_os",
    "Watchdog": "host_os",
    "System Event": "bmc",
    "Critical Interrupt": "unknown",
    "Button": "host_os",
    "Button/Switch": "host_os",
    "Module / Board": "unknown",
    "Microcontroller": "bmc",
    "Microcontroller/Coprocessor": "bmc",
    "Add-in Card": "unknown",
    "Chassis": "unknown",
    "Chip Set": "unknown",
    "Other FRU": "unknown",
    "Cable / Interconnect": "unknown",
    "Terminator": "unknown",
    "System Boot Initiated": "host_os",
    "System Boot / Restart Initiated": "host_os",
    "SystemBoot/Restart": "host_os",
    "Boot Error": "host_os",
    "OS Boot": "host_os",
    "Base OS Boot/Installation Status": "host_os",
    "BaseOSBoot/InstallationStatus": "host_os",
    "OS Critical Stop": "host_os",
    "OS Stop/Shutdown": "host_os",
    "Slot / Connector": "unknown",
    "System ACPI Power State": "host_os",
    "System ACPI PowerState": "host_os",
    "Platform Alert": "bmc",
    "Entity Presence": "unknown",
    "Monitor ASIC": "unknown",
    "Monitor ASIC/IC": "unknown",
    "LAN": "nic",
    "Management Subsys Health": "bmc",
    "Management Subsystem Health": "bmc",
    "Battery": "bmc",
    "Session Audit": "bmc",
    "Version Change": "bmc",
    "FRU State": "unknown",
    "OEM": "unknown",
    "OEM reserved": "unknown",
    "reserved": "unknown",
    "Unknown": "unknown",
}

POWER_UNIT_FAILURE = r"(?i)fail|ac lost|input lost|predictive|interlock"

# Device names in a sensor name / message / Redfish origin, tried in order when the sensor type
# alone says ``unknown``.
NAME_HINTS: list[tuple[str, str]] = [
    (r"nvswitch|\bnvsw", "nvswitch"),
    (r"nvlink", "nvlink"),
    (r"\bhbm|gpu.{0,20}memory", "gpu_memory"),
    (r"gpu|\bhgx|\bsxm|\bgraphics", "gpu"),
    (r"\bnic\b|\bhca\b|infiniband|\bib\d*\b|connectx|mellanox|networkadapter|ethernet", "nic"),
    (r"dimm|/memory/|\bmemory\b", "host_memory"),
    (r"\bpsu|\bps\d|powersuppl|power supply", "psu"),
    (r"\bcpu|/processors/cpu|\bprocessor", "cpu"),
    (r"\bfan|thermal|temperature|overheat", "cooling"),
    (r"nvme|\bssd|\bhdd|\bdisk|/drives/|\bm\.2", "storage"),
    (r"\bbmc\b|/managers/", "bmc"),
]


def type_key(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


_KEYED = {type_key(k): v for k, v in SENSOR_TYPE_CLASS.items()}


def key_expr(expr: pl.Expr) -> pl.Expr:
    return expr.str.to_lowercase().str.replace_all(r"[^a-z0-9]", "")


def component_class(sensor_type: pl.Expr, hint: pl.Expr, event: pl.Expr | None = None) -> pl.Expr:
    """Class from the sensor type; where that says ``unknown`` (or nothing), from ``hint``.
    ``event`` (the event text) only matters for ``Power Unit`` (see the module docstring)."""
    key = key_expr(sensor_type)
    by_type = key.replace_strict(_KEYED, default=None, return_dtype=pl.Utf8)
    if event is not None:
        failure = (key == "powerunit") & event.fill_null("").str.contains(POWER_UNIT_FAILURE)
        by_type = pl.when(failure).then(pl.lit("psu")).otherwise(by_type)
    low = hint.str.to_lowercase()
    by_name = pl.lit(None, pl.Utf8)
    for pattern, cls in reversed(NAME_HINTS):  # first hint has priority
        by_name = pl.when(low.str.contains(pattern)).then(pl.lit(cls)).otherwise(by_name)
    return (
        pl.when(by_type.is_null() | (by_type == "unknown"))
        .then(pl.coalesce(by_name, by_type, pl.lit("unknown")))
        .otherwise(by_type)
    )


# Event text -> severity, first match wins. "Non-critical" is tested before "critical".
SEVERITY_PATTERNS: list[tuple[str, str]] = [
    (
        (
            r"non-?recoverable|uncorrectable|\bierr\b|failure detected|\bfault|fatal|thermal trip"
            r"|machine check|critical stop|bus (?:fatal|uncorrect)|pci [ps]err|\bfailed\b"
        ),
        "critical",
    ),
    (r"non-?critical", "warning"),
    (r"critical", "critical"),
    (
        (
            r"predictive|correctable|redundancy (?:lost|degraded)|non-redundant|insufficient"
            r"|ac lost|input lost|out-of-range|configuration error|throttl|hard reset|timer expired"
            r"|going (?:low|high)|limit"
        ),
        "warning",
    ),
    (
        (
            r"presence detected|device present|log area reset|cleared|power off|power down"
            r"|power cycle|power on|clock sync|boot event|initiated|installed|state change"
            r"|transition|enabled|disabled|inserted"
        ),
        "info",
    ),
]


def severity(text: pl.Expr, recovered: pl.Expr, default: str = "warning") -> pl.Expr:
    """Severity from the SEL event text; a deasserted (recovered) entry is ``info``.

    Unrecognised asserted texts are ``default`` (``warning``): the BMC thought them worth
    logging, but nothing says they took the node down.
    """
    low = text.str.to_lowercase()
    out = pl.lit(default)
    for pattern, sev in reversed(SEVERITY_PATTERNS):
        out = pl.when(low.str.contains(pattern)).then(pl.lit(sev)).otherwise(out)
    return pl.when(recovered.fill_null(False)).then(pl.lit("info")).otherwise(out)


def split_sensor(column: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """``Temperature #0x6a`` / ``Temperature Inlet Temp1`` -> (sensor type, sensor id or name).

    The type is the longest known ipmitool type string the column starts with; a column that
    starts with none keeps the whole text as its name and a null type.
    """
    names = sorted(SENSOR_TYPE_CLASS, key=len, reverse=True)
    alt = "|".join(re.escape(n) for n in names)
    m = column.str.strip_chars().str.extract_groups(rf"(?i)^(?P<type>{alt})(?:\s+(?P<name>.*))?$")
    stype = m.struct.field("type")
    name = m.struct.field("name").str.strip_chars().replace("", None)
    return stype, pl.when(stype.is_null()).then(column.str.strip_chars()).otherwise(name)


UNITS = {
    "degrees c": "C", "cel": "C", "celsius": "C", "degrees f": "F", "degrees k": "K",
    "volts": "V", "volt": "V", "v": "V", "amps": "A", "amp": "A", "a": "A",
    "watts": "W", "watt": "W", "w": "W", "rpm": "RPM", "percent": "%", "%": "%",
    "feet": "ft", "cfm": "CFM", "hz": "Hz", "joules": "J", "kwh": "kWh",
}  # fmt: skip
UNIT_SENSOR_TYPE = {"C": "temperature", "F": "temperature", "K": "temperature", "V": "voltage",
                    "A": "current", "W": "power", "RPM": "fan", "CFM": "airflow"}  # fmt: skip


def unit_expr(expr: pl.Expr) -> pl.Expr:
    """ipmitool / Redfish unit spellings to one short form (``degrees C``, ``Cel`` -> ``C``)."""
    s = expr.str.strip_chars()
    return s.str.to_lowercase().replace_strict(UNITS, default=s, return_dtype=pl.Utf8)


def with_class_and_severity(
    df: pl.DataFrame, sensor_type: str, hint: str, event: str, recovered: str
) -> pl.DataFrame:
    """Add ``component_class`` and ``text_severity`` columns, computed once per distinct
    (type, hint, event, recovered): a log has few distinct sensors and texts, and the
    regex cascade is the expensive part."""
    keys = [sensor_type, hint, event, recovered]
    uniq = (
        df.select(keys)
        .unique()
        .with_columns(
            component_class=component_class(
                pl.col(sensor_type).fill_null(""), pl.col(hint).fill_null(""), pl.col(event)
            ),
            text_severity=severity(pl.col(event).fill_null(""), pl.col(recovered)),
        )
    )
    return df.join(uniq, on=keys, how="left", nulls_equal=True, maintain_order="left")
