"""nvidia-smi --query-gpu CSV: units, blanks, noheader/nounits, time, conservation, fuzz."""

from datetime import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.nvidia_smi import detect
from ingest.formats.nvidia_smi import parse
from tests.conftest import FIXTURES

MTIME = datetime(2024, 5, 1)


def test_docs_examples_pinned():
    data = (FIXTURES / "dcgm" / "nvidia-smi_query_csv_examples.txt").read_bytes()
    r = parse(data, ParseContext(mtime=MTIME))
    s = r.tables["gpu_samples"]
    # (A) is the only uncommented block; (B)/(C)/(D) are '#'-prefixed doc text
    assert r.records == 4 and r.quarantine.height == 0
    assert dict(zip(s["metric"], s["value"])) == {
        "temperature.gpu": 38.0,
        "utilization.gpu": 5.0,
        "memory.used": 1420.0,
        "memory.total": 81920.0,
    }
    assert (
        set(s["model"]) == {"NVIDIA A100-SXM4-80GB"}
        and set(s["gpu"]) == {0}
        and set(s["time"]) == {MTIME}
    )
    assert detect(data, "x.txt") == 90


def test_units_blanks_timestamp_and_tz():
    data = (
        b"timestamp, index, uuid, power.draw [W], pstate, clocks_throttle_reasons.active, "
        b"ecc.errors.uncorrected.volatile.total, driver_version\n"
        b"2024/05/01 10:00:00.123, 0, GPU-abc, 250.00 W, P0, 0x0000000000000004, [Not "
        b"Supported], 535.104.05\n"
        b"2024/05/01 10:00:00.123, 1, GPU-def, N/A, P8, 0x0, [Unknown Error], 535.104.05\n"
        b"2024/05/01 10:00:00.123, 2, GPU-ghi, lots, P0\n"
    )
    r = parse(data, ParseContext(tz="America/Chicago", host="n1"))
    s = r.tables["gpu_samples"]
    assert r.records == 8 + 1 and s.height == 8
    assert set(s["time"]) == {datetime(2024, 5, 1, 15, 0, 0, 123000)}
    assert set(s["host"]) == {"n1"} and "driver_version" not in set(s["metric"])
    got = {(row["gpu"], row["metric"]): row["value"] for row in s.iter_rows(named=True)}
    assert got[(0, "power.draw")] == 250.0 and got[(1, "power.draw")] is None
    assert got[(0, "pstate")] == 0.0 and got[(1, "pstate")] == 8.0
    assert got[(0, "clocks_throttle_reasons.active")] == 4.0
    assert got[(0, "ecc.errors.uncorrected.volatile.total")] is None
    assert r.quarantine["error"][0] == "expected 8 comma-separated fields, found 5"


def test_noheader_nounits_needs_fields():
    line = b"0, NVIDIA GeForce RTX 3080, 62, 79, 268.12\n"
    r = parse(line, ParseContext(time=MTIME))
    assert r.records == 1 and "pass --fields" in r.quarantine["error"][0]
    r = parse(
        line,
        ParseContext(
            time=MTIME, fields=("index", "name", "temperature.gpu", "utilization.gpu", "power.draw")
        ),
    )
    assert dict(zip(r.tables["gpu_samples"]["metric"], r.tables["gpu_samples"]["value"])) == {
        "temperature.gpu": 62.0,
        "utilization.gpu": 79.0,
        "power.draw": 268.12,
    }


def test_non_numeric_value_quarantined():
    r = parse(b"index, temperature.gpu\n0, hot\n1, 40\n", ParseContext(time=MTIME))
    assert r.records == 2 and r.tables["gpu_samples"]["value"].to_list() == [40.0]
    assert r.quarantine["error"].to_list() == ["non-numeric value for temperature.gpu: hot"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["0", "5 %", "N/A", "[Not Supported]", "x", "250.00 W", "P2", ""]),
            min_size=1,
            max_size=4,
        ),
        max_size=10,
    )
)
def test_fuzz_conservation(rows):
    text = "index, temperature.gpu, utilization.gpu [%]\n" + "\n".join(", ".join(r) for r in rows)
    r = parse(text.encode(), ParseContext(time=MTIME))
    assert r.tables["gpu_samples"].height + r.quarantine.height == r.records


def test_runner_conservation_and_idempotence(wh, tmp_path):
    from ingest.runner import ingest_paths

    p = tmp_path / "smi.csv"
    p.write_bytes(b"index, temperature.gpu, power.draw [W]\n0, 40, 250.00 W\n1, hot, N/A\n")
    (rep,) = ingest_paths(wh, [p])
    assert rep.format == "nvidia-smi" and (rep.records, rep.rows_ok, rep.rows_quarantined) == (
        4,
        3,
        1,
    )
    assert wh.read("gpu_samples").sort("gpu", "metric")["value"].to_list() == [250.0, 40.0, None]
    (again,) = ingest_paths(wh, [p])
    assert again.skipped and wh.read("gpu_samples").height == 3


def test_bus_id_is_kept_in_the_kernel_spelling():
    data = b"index, pci.bus_id, temperature.gpu\n0, 00000000:CB:00.0, 41\n1, 00000000:DB:00.0, 43\n"
    s = parse(data, ParseContext(time=datetime(2024, 5, 1), host="n1")).tables["gpu_samples"]
    assert s.select("gpu", "pci_bus", "metric", "value").rows() == [
        (0, "0000:cb:00.0", "temperature.gpu", 41.0),
        (1, "0000:db:00.0", "temperature.gpu", 43.0),
    ]


S = FIXTURES / "nvidia-smi"


def test_all_212_fields_of_driver_590_parse():
    """A real 590.48.01 capture of every --query-gpu field: names with digits and capitals
    (c2c.mode, pci.baseClass, fabric.cliqueId), units in headers, text attributes."""
    data = (
        S / "nvidia_gpu_exporter__h100-80gb-hbm3_590.48.01_query_gpu_all_fields.csv"
    ).read_bytes()
    r = parse(data, ParseContext(tz="UTC", host="h100-node"))
    s = r.tables["gpu_samples"]
    assert r.quarantine.height == 0 and r.records == s.height == 165
    got = dict(zip(s["metric"], s["value"]))
    assert got["c2c.mode"] == 0.0 and got["gsp.mode.current"] == 1.0
    assert got["temperature.gpu"] == 41.0 and got["temperature.memory"] == 48.0
    assert got["power.draw.instant"] == 69.62 and got["memory.reserved"] == 479.0
    assert got["remapped_rows.histogram.max"] == 2560.0 and got["edpp_multiplier"] == 100.0
    assert got["clocks_event_reasons.supported"] == 511.0  # 0x1FF
    assert got["module.power.draw.average"] is None  # [N/A]
    # text attributes are not samples
    assert not {"fabric.state", "platform.peer_type", "hostname", "pci.baseclass"} & set(got)
    assert s.select("time", "host", "gpu", "uuid", "pci_bus", "model").unique().rows() == [
        (datetime(2026, 7, 14, 8, 12, 38, 696000), "h100-node", 0,
         "GPU-00000000-0000-0000-0000-000000000000", "0000:00:09.0", "NVIDIA H100 80GB HBM3")
    ]  # fmt: skip


def test_windows_591_capture_parses():
    data = (
        S / "nvidia_gpu_exporter__windows_rtx-2080-super_591.86_query_gpu_all_fields.csv"
    ).read_bytes()
    r = parse(data, ParseContext(tz="UTC"))
    s = r.tables["gpu_samples"]
    assert r.quarantine.height == 0 and s.height == 165
    got = dict(zip(s["metric"], s["value"]))
    assert (got["fan.speed"], got["pstate"], got["power.draw"]) == (37.0, 8.0, 38.92)
    assert got["clocks_event_reasons_counters.sw_power_cap"] == 5451018134.0
    assert got["power.draw.average"] is None and got["ecc.mode.current"] is None


def test_hostname_field_names_the_host_unless_host_given():
    data = b"timestamp, index, hostname, temperature.gpu\n2024/05/01 10:00:00.000, 0, gpu-a17, 40\n"
    s = parse(data, ParseContext()).tables["gpu_samples"]
    assert s["host"].to_list() == ["gpu-a17"]
    s = parse(data, ParseContext(host="given")).tables["gpu_samples"]
    assert s["host"].to_list() == ["given"]


def test_field_queried_twice_keeps_first_column():
    r = parse(b"index, temperature.gpu, temperature.gpu\n0, 40, 40\n", ParseContext(time=MTIME))
    assert r.quarantine.height == 0
    assert r.tables["gpu_samples"].select("metric", "value").rows() == [("temperature.gpu", 40.0)]


def test_bad_or_implausible_timestamp_is_quarantined_not_redated():
    data = (
        b"timestamp, index, temperature.gpu\n"
        b"2024/05/01 10:00:00.000, 0, 40\n"
        b"yesterday, 1, 41\n"
        b"2099/01/01 00:00:00.000, 2, 42\n"
        b"1970/01/01 00:00:00.000, 3, 43\n"
    )
    r = parse(data, ParseContext(mtime=MTIME))
    assert r.tables["gpu_samples"]["gpu"].to_list() == [0]
    assert r.quarantine["line"].to_list() == [3, 4, 5]
    errors = r.quarantine["error"].to_list()
    assert errors[0].startswith("unreadable timestamp 'yesterday'")
    assert "clock in the future" in errors[1] and "implausible clock" in errors[2]


def test_exact_duplicate_line_stored_once_and_counted_as_duplicate(wh, tmp_path):
    from ingest.runner import ingest_paths

    p = tmp_path / "node1.csv"
    p.write_bytes(b"index, temperature.gpu\n0, 40\n0, 40\n1, 41\n")
    (rep,) = ingest_paths(wh, [p], fmt="nvidia-smi", ctx=ParseContext(time=MTIME))
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (3, 2, 0, 1)
    assert wh.read("gpu_samples").sort("gpu").select("gpu", "value").rows() == [
        (0, 40.0),
        (1, 41.0),
    ]
    assert wh.read("quarantine").height == 0
