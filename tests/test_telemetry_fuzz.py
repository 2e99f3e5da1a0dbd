"""Hypothesis over the telemetry and BMC parsers: real captures, mutated the ways files really get
damaged (truncated, spliced, lines repeated, bytes flipped, garbage inserted), and arbitrary
bytes never raise, always conserve (records = primary rows + quarantine rows), and produce the
declared schemas. Repeating every record of a file adds nothing but duplicate quarantine rows."""

from dataclasses import replace
from datetime import datetime

import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats import dcgm
from ingest.formats import ipmi_sdr
from ingest.formats import ipmi_sel
from ingest.formats import nvidia_smi
from ingest.formats import prom_json
from ingest.formats import redfish
from ingest.formats import redfish_sensors
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES
from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import TABLES
from warehouse.store import Warehouse

CTX = ParseContext(
    path="/fuzz/node1.x", time=datetime(2024, 5, 1, 12), not_after=datetime(2025, 1, 1)
)

PARSERS = {
    "dcgm": (
        dcgm.FORMAT,
        [
            "dcgm/dcgm-exporter_readme_sample_metrics.prom",
            "dcgm/datadog-integrations-core__dcgm_metrics.txt",
            "dcgm/nvidia-cloud-native-docs__dcgm-exporter_mig_a100.prom",
        ],
    ),
    "prom-json": (
        prom_json.FORMAT,
        [
            "prometheus/prometheus-docs__api_query_range_up.json",
            "prometheus/prometheus-docs__api_query_vector_up.json",
        ],
    ),
    "nvidia-smi": (
        nvidia_smi.FORMAT,
        [
            "nvidia-smi/nvidia_gpu_exporter__h100-80gb-hbm3_590.48.01_query_gpu_all_fields.csv",
            "dcgm/nvidia-smi_query_csv_examples.txt",
        ],
    ),
    "ipmi-sel": (
        ipmi_sel.FORMAT,
        [
            "bmc/ipmitool_sel_list_examples_from_docs.txt",
            "bmc/collegeboreal__hp-dl360-g7_sel_list.txt",
        ],
    ),
    "ipmi-sdr": (
        ipmi_sdr.FORMAT,
        [
            "bmc/telegraf_ipmi_sensor_test__sdr_v1.txt",
            "bmc/collegeboreal__hp-dl360-g7_sdr_elist_full.txt",
        ],
    ),
    "redfish": (
        redfish.FORMAT,
        [
            "bmc/redfish-mockup__Systems_437XR1138R2_LogServices_Log1_Entries.json",
            "bmc/openbmc-docs__redfish-postcodes_Entries.json",
        ],
    ),
    "redfish-sensors": (
        redfish_sensors.FORMAT,
        ["bmc/redfish-mockup__Chassis_1U_Thermal.json", "bmc/sushy__json_samples_power.json"],
    ),
}


def _check(spec, data: bytes):
    result = spec.parse(data, CTX)
    primary = result.tables.get(spec.primary)
    rows = 0 if primary is None else primary.height
    assert rows + result.quarantine.height == result.records
    for name, table in result.tables.items():
        assert table.schema == TABLES[name].schema, name
    assert dict(result.quarantine.schema) == QUARANTINE_COLUMNS
    return result


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        j = draw(st.integers(i, min(len(data), i + 200)))
        op = draw(
            st.sampled_from(["truncate", "delete", "repeat", "flip", "insert", "splice_line"])
        )
        if op == "truncate":
            del data[i:]
        elif op == "delete":
            del data[i:j]
        elif op == "repeat":
            data[j:j] = data[i:j]
        elif op == "flip":
            data[i] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[i:i] = draw(st.sampled_from([
                b"NaN", b"-Inf", b"\n", b"|", b",", b'"', b"{", b"}", b"\x00",
                b"9223372036854775807", b"99999999999999999999", b"\xff\xfe", b"1e999", b"null",
                b"[]", b"  ",
            ]))  # fmt: skip
        else:  # a line of the file repeated elsewhere
            lines = bytes(data).splitlines(keepends=True)
            if lines:
                data[i:i] = draw(st.sampled_from(lines))
    return bytes(data)


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_mutated_real_captures_never_raise_and_conserve(fmt):
    spec, names = PARSERS[fmt]
    seeds = [(FIXTURES / n).read_bytes() for n in names]

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(seeds))
    def run(data):
        _check(spec, data)

    run()


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_arbitrary_bytes_never_raise_and_conserve(fmt):
    spec, _ = PARSERS[fmt]

    @settings(max_examples=30, deadline=None)
    @given(st.binary(max_size=300))
    def run(data):
        _check(spec, data)

    run()


@pytest.mark.parametrize("fmt", ["dcgm", "ipmi-sel", "nvidia-smi"])
def test_a_file_repeated_is_stored_once(fmt, tmp_path):
    """Two dumps of one log (or one scrape saved twice) concatenated: the same rows, and every
    repeated record counted as a duplicate (not quarantined: a repeat of a bad line is bad
    again)."""
    spec, names = PARSERS[fmt]
    ctx = replace(CTX, path="<memory>", not_after=None)  # the H100 capture is dated 2026
    for i, name in enumerate(names):
        data = (FIXTURES / name).read_bytes()
        data = data if data.endswith(b"\n") else data + b"\n"
        homes = []
        for copies in (1, 2):
            f = tmp_path / f"{i}-{copies}" / "node1.txt"  # the same name: the host comes from it
            f.parent.mkdir()
            f.write_bytes(data * copies)
            w = Warehouse(tmp_path / f"wh-{i}-{copies}")
            (rep,) = ingest_paths(w, [f], fmt=fmt, ctx=ctx)
            homes.append((rep, w))
        (once, w1), (twice, w2) = homes
        assert once.rows_ok > 0, name
        # the second copy: its good records (and their own repeats) are duplicates
        assert (twice.records, twice.rows_ok, twice.rows_quarantined, twice.rows_duplicate) == (
            2 * once.records,
            once.rows_ok,
            2 * once.rows_quarantined,
            once.rows_ok + 2 * once.rows_duplicate,
        ), name
        cols = [c for c in TABLES[spec.primary].record_columns if c != "source_file"] or None
        first, second = (
            w.read(spec.primary).select(cols).sort(cols, nulls_last=True) for w in (w1, w2)
        )
        assert first.equals(second), name


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_labels = st.dictionaries(
    st.sampled_from(["__name__", "gpu", "UUID", "Hostname", "instance", "xid"]),
    _json | st.text(max_size=6),
)
_series = st.fixed_dictionaries(
    {
        "metric": _labels | _json,
        "values": st.lists(st.lists(_json, max_size=3) | _json, max_size=4) | _json,
    }
)
_entry = st.dictionaries(
    st.sampled_from(
        [
            "@odata.type",
            "Created",
            "Severity",
            "Message",
            "MessageId",
            "EntryType",
            "EntryCode",
            "SensorType",
            "SensorNumber",
            "Links",
            "Name",
        ]
    ),
    _json | st.text(max_size=30),
    max_size=8,
)
_reading = st.dictionaries(
    st.sampled_from(
        ["Name", "ReadingCelsius", "Reading", "ReadingUnits", "Status", "ReadingRPM", "MemberId"]
    ),
    _json,
    max_size=6,
)
STRUCTURED = {
    "prom-json": st.fixed_dictionaries(
        {
            "status": st.just("success"),
            "data": st.fixed_dictionaries(
                {
                    "resultType": st.sampled_from(["matrix", "vector"]),
                    "result": st.lists(_series | _json, max_size=3) | _json,
                }
            ),
        }
    ),
    "redfish": st.fixed_dictionaries(
        {
            "@odata.type": st.just("#LogEntryCollection.LogEntryCollection"),
            "Members": st.lists(_entry | _json, max_size=4),
        }
    ),
    "redfish-sensors": st.fixed_dictionaries(
        {
            "@odata.type": st.just("#Thermal.v1_7_0.Thermal"),
            "Temperatures": st.lists(_reading | _json, max_size=3) | _json,
            "Fans": st.lists(_reading, max_size=2) | _json,
        }
    ),
}


@pytest.mark.parametrize("fmt", sorted(STRUCTURED))
def test_any_json_in_the_documents_shape_never_raises_and_conserves(fmt):
    import json

    spec, _ = PARSERS[fmt]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(STRUCTURED[fmt])
    def run(doc):
        _check(spec, json.dumps(doc).encode())

    run()


def test_every_real_capture_is_detected_as_its_format():
    from ingest.registry import detect

    for fmt, (_, names) in PARSERS.items():
        for name in names:
            path = FIXTURES / name
            assert detect(path.read_bytes()[:65536], path.name).name == fmt, name
    extra = {
        "nvidia-smi/nvidia_gpu_exporter__windows_rtx-2080-super_591.86_query_gpu_all_fields.csv": "nvidia-smi",  # noqa: E501
        "bmc/gengwg-cheatsheets__sel_list.txt": "ipmi-sel",
        "bmc/white-raven-poweredge-shutup__idrac_sdr_type_temperature.txt": "ipmi-sdr",
        "bmc/intel-bmc-psu-manager__EventLog_entries_clock_1970.json": "redfish",
        "bmc/redfish-mockup__Chassis_1U_Sensors_CPU1Temp.json": "redfish-sensors",
    }
    for name, fmt in extra.items():
        path = FIXTURES / name
        assert detect(path.read_bytes()[:65536], path.name).name == fmt, name
