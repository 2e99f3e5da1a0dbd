"""dcgm-exporter text scrapes: real samples pinned, edge cases, conservation, idempotence, fuzz."""

from datetime import datetime

import polars as pl
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.dcgm import detect
from ingest.formats.dcgm import parse
from ingest.formats.dcgm import parse_many
from ingest.gpu_labels import host_from_path
from ingest.registry import detect as detect_format
from ingest.runner import ingest_paths
from tests.conftest import FIXTURES

D = FIXTURES / "dcgm"
MTIME = datetime(2024, 5, 1, 12, 0)
UUID0 = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"


def _parse(data: bytes, **kw):
    kw.setdefault("mtime", MTIME)
    return parse(data, ParseContext(**kw))


def test_readme_sample_pinned():
    r = _parse((D / "dcgm-exporter_readme_sample_metrics.prom").read_bytes())
    s = r.tables["gpu_samples"]
    assert r.records == 6 and s.height == 6 and r.quarantine.height == 0
    assert s["metric"].to_list()[:3] == [
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP",
    ]
    assert s["value"].to_list() == [139.0, 405.0, None, 139.0, 405.0, None]  # sentinel -> null
    assert set(s["uuid"]) == {UUID0} and set(s["gpu"]) == {0}
    assert s["pod"].null_count() == 6  # empty pod labels are null, not ""
    assert set(s["time"]) == {MTIME} and set(s["date"]) == {MTIME.date()}
    meta = r.tables["metric_metadata"].sort("metric")
    assert meta.height == 3
    assert meta.filter(pl.col("metric") == "DCGM_FI_DEV_MEMORY_TEMP").row(0, named=True) | {
        "source_file": None
    } == {
        "metric": "DCGM_FI_DEV_MEMORY_TEMP",
        "type": "gauge",
        "help": "Memory temperature (in C).",
        "unit": "C",
        "source": "dcgm",
        "source_file": None,
    }


def test_counters_csv_is_metadata_only():
    for name in ("dcgm-exporter__default-counters.csv", "dcgm-exporter__dcp-metrics-included.csv"):
        r = _parse((D / name).read_bytes())
        assert r.records == 0 and r.tables["gpu_samples"].height == 0 and r.quarantine.height == 0
        meta = r.tables["metric_metadata"]
        assert meta.height == 26
        row = meta.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE").row(0, named=True)
        assert (row["type"], row["unit"]) == ("gauge", "W")
        assert detect((D / name).read_bytes(), name) == 80


def test_dcgmi_diag_is_not_dcgm():
    data = (D / "dcgmi_diag_examples.txt").read_bytes()
    assert detect(data, "dcgmi_diag_examples.txt") == 0
    r = _parse(data)  # forced --format dcgm: every table line is quarantined with a reason
    assert r.tables["gpu_samples"].height == 0
    assert r.records == r.quarantine.height == 24
    assert set(r.quarantine["error"]) == {"not a Prometheus sample line"}


def test_labels_times_hosts_and_errors():
    text = (
        b"# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-a",Hostname="dgx-07",'
        b'modelName="NVIDIA H100 80GB HBM3",'
        b'GPU_I_PROFILE="1g.10gb",GPU_I_ID="3",pod="p-0",namespace="ml",container="c",'
        b'pci_bus_id="00000000:CB:00.0"} 41 1714564800123\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="2", UUID="GPU-b"} 42\r\n'
        b'DCGM_FI_DEV_FB_USED{gpu="2",note="a b} c"} 7\n'
        b'DCGM_FI_DEV_POWER_USAGE{gpu="3"} NaN 1714564800000\n'
        b'DCGM_FI_DEV_CLOCK{gpu="3"} 140737488355328\n'
        b'DCGM_FI_DEV_X{gpu="3"} 2147483632\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="3"} n/a\n'
        b"| garbage here |\n"
        b"up 1\n"
    )
    r = _parse(text, path="/data/dcgm/node042/2024-05-01.prom", line_offset=100)
    s = r.tables["gpu_samples"]
    assert r.records == 9 and s.height == 5
    first = s.row(0, named=True)
    assert first["time"] == datetime(2024, 5, 1, 12, 0, 0, 123000)
    assert (first["host"], first["gpu"], first["uuid"], first["model"], first["pci_bus"]) == (
        "dgx-07",
        1,
        "GPU-a",
        "NVIDIA H100 80GB HBM3",
        "0000:cb:00.0",  # the kernel's spelling of the bus id
    )
    assert (
        first["mig_profile"],
        first["mig_instance"],
        first["pod"],
        first["namespace"],
        first["container"],
    ) == ("1g.10gb", "3", "p-0", "ml", "c")
    second = s.row(1, named=True)
    assert (second["host"], second["uuid"], second["time"]) == (
        "node042",
        "GPU-b",
        MTIME,
    )  # host from path
    assert s["value"].to_list()[2] == 7.0  # label value with "} " inside
    vals = s["value"].to_list()
    assert vals[3] is None and vals[4] is None  # FP64 and INT32 blanks
    assert r.quarantine["line"].to_list() == [105, 108, 109, 110]
    assert r.quarantine["error"].to_list() == [
        "non-finite sample value (not a measurement): NaN",
        "non-numeric sample value: n/a",
        "not a Prometheus sample line",
        (
            "sample names no GPU and no host (no gpu, UUID, pci_bus_id or Hostname label); "
            "pass --host if the file is one host's scrape"
        ),
    ]


def test_xid_count_series_and_string_blank():
    text = (
        b'DCGM_EXP_XID_ERRORS_COUNT{gpu="0",UUID="GPU-a",xid="79",window_size_in_ms="300000"} '
        b"1 1714564800000\n"
        b'DCGM_EXP_XID_ERRORS_COUNT{gpu="0",UUID="GPU-a",xid="48"} 2 1714564800000\n'
        b'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-a",err_code="0"} 48 1714564800000\n'
        b'DCGM_FI_DEV_SERIAL{gpu="0"} <<<NULL>>> 1714564800000\n'
    )
    r = _parse(text)
    s = r.tables["gpu_samples"]
    assert r.quarantine.height == 0
    assert s["metric"].to_list() == [
        'DCGM_EXP_XID_ERRORS_COUNT{xid="79"}',
        'DCGM_EXP_XID_ERRORS_COUNT{xid="48"}',
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_SERIAL",
    ]
    assert s["value"].to_list() == [1.0, 2.0, 48.0, None]


def test_time_precedence_and_missing_time():
    line = b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40\n'
    t = datetime(2024, 6, 1)
    assert _parse(line, time=t).tables["gpu_samples"]["time"][0] == t  # --time beats mtime
    r = parse(line, ParseContext())
    assert r.records == 1 and r.quarantine["error"][0].startswith("sample has no timestamp")
    assert _parse(line, host="h9").tables["gpu_samples"]["host"][0] == "h9"


def test_host_from_path():
    assert host_from_path("dcgm/node042/2024-05-01.prom.gz") == "node042"
    assert host_from_path("scrapes/gpu-17.prom") == "gpu-17"
    assert host_from_path("dcgm-exporter_readme_sample_metrics.prom") is None
    assert host_from_path("metrics/20240501.prom") is None


def test_runner_conservation_and_idempotence(wh, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.prom").write_bytes(
        (D / "dcgm-exporter_readme_sample_metrics.prom").read_bytes() + b'X{gpu="0"} bad\n'
    )
    (src / "counters.csv").write_bytes((D / "dcgm-exporter__default-counters.csv").read_bytes())
    reports = ingest_paths(wh, [src], fmt="auto")
    assert {r.format for r in reports} == {"dcgm"}
    assert sum(r.records for r in reports) == 7
    # the sample scrape lists its 3 samples twice: exact duplicates are stored once
    assert wh.read("gpu_samples").height == 3 and wh.read("quarantine").height == 1
    assert [(r.rows_ok, r.rows_duplicate) for r in reports if r.path.endswith("a.prom")] == [(3, 3)]
    # one row per (metric, source): the scrape's 3 metrics are among the 26 the counters CSV
    # declares
    meta = wh.read("metric_metadata")
    assert meta.height == 26 and meta.select(pl.struct("metric", "source").is_unique().all()).item()
    again = ingest_paths(wh, [src], fmt="auto")
    assert all(r.skipped for r in again) and wh.read("gpu_samples").height == 3


def test_chunked_file_streams(wh, tmp_path, monkeypatch):
    from ingest import chunks

    monkeypatch.setattr(chunks, "CHUNK_BYTES", 4096)
    lines = [
        f'DCGM_FI_DEV_GPU_TEMP{{gpu="{i % 8}",Hostname="n1"}} {i} {1714564800000 + i}'
        for i in range(2000)
    ]
    p = tmp_path / "big.prom"
    p.write_text("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n" + "\n".join(lines) + "\nbroken line\n")
    (rep,) = ingest_paths(wh, [p], fmt="dcgm")
    s = wh.read("gpu_samples")
    assert (
        rep.records == 2001
        and s.height == 2000
        and sorted(s["value"].to_list()) == [float(i) for i in range(2000)]
    )
    assert wh.read("quarantine")["line"].to_list() == [2002]


def test_registry_picks_dcgm():
    data = (D / "dcgm-exporter_readme_sample_metrics.prom").read_bytes()
    assert detect_format(data, "x.prom").name == "dcgm"


_label_value = st.text(
    alphabet=st.characters(blacklist_characters='"\\\n\r', blacklist_categories=("Cs",)), max_size=8
)
_value = st.one_of(
    st.integers(-(10**6), 2**63 - 1).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["NaN", "+Inf", "-Inf", "abc", "", "9223372036854775794"]),
)
_line = st.one_of(
    st.builds(
        lambda m, g, v, ts: f'{m}{{gpu="{g}",UUID="{v}"}} ' + ts,
        st.from_regex(r"[A-Z_][A-Z0-9_]{0,10}", fullmatch=True),
        st.integers(0, 7),
        _label_value,
        st.builds(
            lambda v, t: v + (f" {t}" if t is not None else ""),
            _value,
            st.one_of(st.none(), st.integers(0, 2**41)),
        ),
    ),
    st.text(max_size=30).filter(lambda s: "\n" not in s and "\r" not in s),
    st.just("# HELP X y (in W)"),
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_line, max_size=25))
def test_fuzz_conservation(lines):
    r = _parse("\n".join(lines).encode())
    assert r.tables["gpu_samples"].height + r.quarantine.height == r.records
    assert r.records <= len(lines)
    s = r.tables["gpu_samples"]
    assert s["time"].null_count() == 0 and s["date"].null_count() == 0
    assert s.filter((pl.col("value") >= 9.2e18) & pl.col("value").is_not_nan()).height == 0


def test_sample_without_identity_is_quarantined_unless_host_given():
    text = (
        b'DCGM_FI_DEV_GPU_TEMP 41 1714564800000\nDCGM_FI_DEV_GPU_TEMP{gpu="0"} 40 1714564800000\n'
    )
    r = _parse(text, path="/scrapes/node042.prom")  # a host guessed from the name is not enough
    assert r.tables["gpu_samples"].select("host", "gpu", "value").rows() == [("node042", 0, 40.0)]
    assert r.quarantine["line"].to_list() == [1]
    assert r.quarantine["error"][0].startswith("sample names no GPU and no host")
    r = _parse(text, host="n7")  # --host: the file is n7's, a GPU-less sample is n7's
    assert r.quarantine.height == 0
    assert r.tables["gpu_samples"].select("host", "gpu", "value").rows() == [
        ("n7", None, 41.0),
        ("n7", 0, 40.0),
    ]


def test_value_missing_timestamp_not_taken_as_value():
    text = (
        b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1"}  1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="2"}\n'
    )
    r = _parse(text)
    assert r.tables["gpu_samples"]["gpu"].to_list() == [0]
    assert r.quarantine["error"].to_list() == [
        (
            "sample has no value: its only number, 1714564800000, is a millisecond timestamp like "
            "the other lines'"
        ),
        "sample line has no value",
    ]


def test_out_of_range_timestamps_quarantined_never_mtime():
    text = (
        b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 41 99999999999999999999\n'  # overflows int64
        b'DCGM_FI_DEV_GPU_TEMP{gpu="2"} 42 253402300800000\n'  # year 10000
        b'DCGM_FI_DEV_GPU_TEMP{gpu="3"} 43 631152000000\n'  # 1990
        b'DCGM_FI_DEV_GPU_TEMP{gpu="4"} 44 1717156800000\n'  # 30 days after not_after
    )
    r = _parse(text, not_after=datetime(2024, 5, 2))
    assert r.tables["gpu_samples"].select("gpu", "time").rows() == [(0, datetime(2024, 5, 1, 12))]
    errors = r.quarantine["error"].to_list()
    assert errors[0] == "timestamp 99999999999999999999 ms is out of range"
    assert "clock in the future" in errors[1] and "clock in the future" in errors[3]
    assert errors[2].startswith("time 1990-01-01T00:00:00 is before 2000-01-01")


def test_non_finite_values_rejected_sentinels_kept_as_null():
    text = (
        b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} +Inf 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1"} -Inf 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="2"} NaN 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="3"} 9223372036854775794 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="4"} 9223372036854775807 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="5"} 2147483646 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="6"} 39.5 1714564800000\n'
    )
    r = _parse(text)
    s = r.tables["gpu_samples"]
    assert s.select("gpu", "value").rows() == [(3, None), (4, None), (5, None), (6, 39.5)]
    assert r.quarantine["error"].to_list() == [
        f"non-finite sample value (not a measurement): {v}" for v in ("+Inf", "-Inf", "NaN")
    ]


def test_exact_duplicate_lines_stored_once_and_counted_as_duplicates(wh, tmp_path):
    line = b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40 1714564800000\n'
    other = b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 41 1714564815000\n'
    p = tmp_path / "node1.prom"
    p.write_bytes(line + other + line + line)
    (rep,) = ingest_paths(wh, [p], fmt="dcgm")
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (4, 2, 0, 2)
    assert wh.read("gpu_samples").sort("time")["value"].to_list() == [40.0, 41.0]
    assert wh.read("quarantine").height == 0


def test_datadog_fixture_dummy_unlabelled_samples_quarantined():
    """Datadog's DCGM test scrape (three exporter versions) ends with label-less dummy samples."""
    r = _parse((D / "datadog-integrations-core__dcgm_metrics.txt").read_bytes())
    s = r.tables["gpu_samples"]
    assert r.records == 11 and s.height == 8
    assert r.quarantine["line"].to_list() == [25, 28, 31]
    assert set(r.quarantine["error"].str.slice(0, 30)) == {"sample names no GPU and no hos"}
    got = {(row["host"], row["metric"]): row["value"] for row in s.iter_rows(named=True)}
    assert got[("424773df46e0", "DCGM_FI_DEV_POWER_USAGE")] == 8.969
    assert got[("424773df46e0", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")] == 128996013.0
    assert got[("551bdf382151", "DCGM_FI_DEV_SLOWDOWN_TEMP")] == 93.0
    a10 = s.filter(pl.col("host") == "ip-11111").row(0, named=True)
    assert (a10["model"], a10["pod"], a10["namespace"], a10["container"]) == (
        "NVIDIA A10G", "ray-1111111", "ray-llm", "ray-worker"
    )  # fmt: skip
    meta = r.tables["metric_metadata"]
    assert meta.filter(pl.col("metric") == "DCGM_FI_PROF_DRAM_ACTIVE")["unit"][0] == "%"


def test_nvidia_docs_mig_scrape_keeps_instances_apart():
    r = _parse((D / "nvidia-cloud-native-docs__dcgm-exporter_mig_a100.prom").read_bytes())
    s = r.tables["gpu_samples"]
    assert r.records == s.height == 21 and r.quarantine.height == 0
    gr = s.filter(pl.col("metric") == "DCGM_FI_PROF_GR_ENGINE_ACTIVE").sort(
        "mig_instance", nulls_last=False
    )
    assert gr.select("host", "gpu", "mig_profile", "mig_instance", "value").rows() == [
        ("ub20-a100-k8s", 0, None, None, 0.99563),
        ("ub20-a100-k8s", 0, "1g.5gb", "13", 0.995687),
    ]
    assert s.filter(pl.col("metric") == "DCGM_FI_DEV_POWER_USAGE")["value"].to_list() == [409.692]


def test_parse_many_gives_each_file_what_parse_gives_it_alone():
    """The runner hands many small scrapes to one ``parse_many`` call: each file keeps its own
    path, host from the path, file time, line numbers, metadata, quarantine and the "only
    number is a timestamp" judgement (made within the file, not across the batch)."""
    stamped = (
        b"# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
        b'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 41 1714564800000\n'
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 1714564800000\n'  # value missing: quarantined here
        b"not a sample\n"
    )
    unstamped = (
        b'DCGM_FI_DEV_GPU_TEMP{gpu="1"} 1714564800000\n\nDCGM_FI_DEV_POWER_USAGE{gpu="1"} 300.5'
    )
    files = [
        (stamped, ParseContext(path="/d/nodeA01/2024-05-01.prom", mtime=MTIME)),
        (b"", ParseContext(path="/d/nodeA02/2024-05-01.prom", mtime=MTIME)),
        (
            b"\xef\xbb\xbf" + unstamped,
            ParseContext(path="/d/nodeB07/2024-05-01.prom", mtime=datetime(2024, 5, 2)),
        ),
        (stamped, ParseContext(path="/d/nodeC03/2024-05-01.prom", mtime=MTIME, line_offset=100)),
    ]
    many = parse_many(files)
    alone = [parse(data, ctx) for data, ctx in files]
    for got, want in zip(many, alone, strict=True):
        assert got.records == want.records
        assert got.quarantine.equals(want.quarantine)
        assert set(got.tables) == set(want.tables)
        for name, df in want.tables.items():
            assert got.tables[name].equals(df), name
    a, empty, b, c = many
    assert (a.records, empty.records, b.records, c.records) == (3, 0, 2, 3)
    assert a.quarantine.select("line", "error").rows() == [
        (
            3,
            (
                "sample has no value: its only number, 1714564800000, is a millisecond timestamp "
                "like the other lines'"
            ),
        ),
        (4, "not a Prometheus sample line"),
    ]
    assert c.quarantine["line"].to_list() == [103, 104]
    # the same line in a file without timestamps is a sample at that file's time
    sb = b.tables["gpu_samples"]
    assert sb.select("metric", "value", "time", "host", "source_file").rows() == [
        (
            "DCGM_FI_DEV_GPU_TEMP",
            1714564800000.0,
            datetime(2024, 5, 2),
            "nodeB07",
            "/d/nodeB07/2024-05-01.prom",
        ),
        (
            "DCGM_FI_DEV_POWER_USAGE",
            300.5,
            datetime(2024, 5, 2),
            "nodeB07",
            "/d/nodeB07/2024-05-01.prom",
        ),
    ]
    assert a.tables["gpu_samples"]["host"].to_list() == ["nodeA01"]
    assert a.tables["metric_metadata"].select("metric", "unit", "source_file").rows() == [
        ("DCGM_FI_DEV_GPU_TEMP", "C", "/d/nodeA01/2024-05-01.prom")
    ]
    assert b.tables["metric_metadata"].height == 0 and empty.tables["gpu_samples"].height == 0


def test_two_values_for_one_sample_in_one_scrape_are_a_conflict(wh, tmp_path):
    """One GPU, metric and time at 40 and at 90 in one file: the first is stored, the second
    quarantined naming the first's value, as between two files; an exact repeat is counted."""
    key = 'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1",Hostname="n1"}'
    path = tmp_path / "twice.prom"
    path.write_text(f"{key} 40 1767607200000\n{key} 90 1767607200000\n{key} 40 1767607200000\n")
    [r] = ingest_paths(wh, [path], jobs=1)
    assert (r.records, r.rows_ok, r.rows_quarantined, r.rows_duplicate) == (3, 1, 1, 1)
    assert wh.read("gpu_samples")["value"].to_list() == [40.0]
    [(raw, error)] = wh.read("quarantine").select("raw", "error").rows()
    assert "its own file (value 40.0)" in error and "value 90.0 here" in error and "90" in raw


def test_escaped_label_values_are_stored_as_the_values(tmp_path):
    """The text exposition escapes a backslash, a double quote and a line feed in a label
    value; the host is stored as the pull (JSON) gives it: ``gpu"07`` is one host, not two."""
    text = (
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="gpu\\"07"} 40 1767607200000\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="1",Hostname="a\\\\nb\\nc"} 41 1767607200000\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="2",Hostname="back\\\\",pod="x\\"y"} 42 1767607200000\n'
    )
    rows = parse(text.encode(), ParseContext()).tables["gpu_samples"]
    assert rows["host"].to_list() == ['gpu"07', "a\\nb\nc", "back\\"]
    assert rows["pod"].to_list() == [None, None, 'x"y']


def test_clock_events_count_keeps_one_series_per_reason(wh, tmp_path):
    """dcgm-exporter's DCGM_EXP_CLOCK_EVENTS_COUNT has one series per ``clock_event`` label (a
    real scrape from its pull request #261): three samples of one GPU at one time, each its own
    series (the reason folded into the metric name, as the XID count's code), not one sample
    stored and two quarantined as conflicting values of it."""
    path = tmp_path / "home.prom"
    path.write_bytes((D / "dcgm-exporter_pr261_clock_events_count.prom").read_bytes())
    [r] = ingest_paths(wh, [path], jobs=1)
    assert (r.records, r.rows_ok, r.rows_quarantined, r.rows_duplicate) == (3, 3, 0, 0)
    s = wh.read("gpu_samples").sort("metric")
    assert s.select("metric", "value").rows() == [
        ('DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="gpu_idle"}', 2.0),
        ('DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="hw_thermal"}', 1.0),
        ('DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="sw_thermal"}', 1.0),
    ]


def test_clock_throttle_reasons_of_mig_instances_are_stored_apart():
    """A real A30 scrape (dcgm-exporter issue #317): the reasons bitmask of two MIG instances
    of GPU 0, each its own sample (value 1: GPU idle)."""
    r = _parse((D / "dcgm-exporter_issue317_clock_throttle_reasons_mig_a30.prom").read_bytes())
    s = r.tables["gpu_samples"]
    assert r.records == 2 and r.quarantine.height == 0
    assert s.select("metric", "gpu", "mig_instance", "value").rows() == [
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0, "3", 1.0),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", 0, "4", 1.0),
    ]
