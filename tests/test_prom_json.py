"""Prometheus query_range / query JSON: values, sentinels, errors, conservation, fuzz."""

import json
from datetime import datetime
from unittest.mock import patch

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from ingest.base import ParseContext
from ingest.formats import prom_json
from ingest.formats.prom_json import detect
from ingest.formats.prom_json import parse
from ingest.runner import ingest_paths

MATRIX = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {
                "metric": {
                    "__name__": "DCGM_FI_DEV_GPU_TEMP",
                    "gpu": "0",
                    "UUID": "GPU-1",
                    "Hostname": "n1",
                    "instance": "10.0.0.1:9400",
                    "modelName": "NVIDIA A100-SXM4-80GB",
                },
                "values": [[1714564800, "41"], [1714564815.5, "42"], [1714564830, "x"]],
            },
            {
                "metric": {
                    "__name__": "DCGM_FI_DEV_MEMORY_TEMP",
                    "gpu": "1",
                    "instance": "10.0.0.2:9400",
                },
                "values": [[1714564800, "9223372036854775794"]],
            },
        ],
    },
}


def test_matrix_values_and_quarantine():
    r = parse(json.dumps(MATRIX).encode(), ParseContext())
    s = r.tables["gpu_samples"]
    assert r.records == 4 and s.height == 3
    assert s["time"].to_list() == [
        datetime(2024, 5, 1, 12, 0),
        datetime(2024, 5, 1, 12, 0, 15, 500000),
        datetime(2024, 5, 1, 12, 0),
    ]
    assert s["value"].to_list() == [41.0, 42.0, None]
    assert s["host"].to_list() == ["n1", "n1", "10.0.0.2"]  # Hostname, else instance without port
    assert s["model"][0] == "NVIDIA A100-SXM4-80GB" and s["gpu"].to_list() == [0, 0, 1]
    assert r.quarantine["error"].to_list() == ["non-numeric sample value: x"]
    assert detect(json.dumps(MATRIX).encode(), "q.json") == 90


def test_vector_list_and_error_response():
    vec = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {
                    "metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "2"},
                    "value": [1714564800, "301.5"],
                }
            ],
        },
    }
    err = {"status": "error", "errorType": "bad_data", "error": "invalid parameter"}
    scalar = {"status": "success", "data": {"resultType": "scalar", "result": [1714564800, "1"]}}
    r = parse(json.dumps([vec, err, scalar]).encode(), ParseContext(host="h1"))
    assert r.records == 3 and r.tables["gpu_samples"]["value"].to_list() == [301.5]
    assert r.tables["gpu_samples"]["host"].to_list() == ["h1"]
    assert r.quarantine["line"].to_list() == [2, 3]
    assert "invalid parameter" in r.quarantine["error"][0] and "scalar" in r.quarantine["error"][1]
    bad = parse(b"{not json", ParseContext())
    assert bad.records == 1 and bad.quarantine["error"][0].startswith("not JSON")


def test_json_lines_response_saved_twice_is_stored_once_and_counted_as_duplicate(wh, tmp_path):
    vec = {
        "status": "success",
        "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0", "Hostname": "h1"},
             "value": [1714564800, "301.5"]},
        ]},
    }  # fmt: skip
    p = tmp_path / "twice.jsonl"
    p.write_text(json.dumps(vec) + "\n" + json.dumps(vec) + "\n")
    (rep,) = ingest_paths(wh, [p], fmt="prom-json")
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (2, 1, 0, 1)
    assert wh.read("gpu_samples")["value"].to_list() == [301.5]
    assert wh.read("quarantine").height == 0


def test_runner_idempotent(wh, tmp_path):
    p = tmp_path / "range.json"
    p.write_text(json.dumps(MATRIX))
    (rep,) = ingest_paths(wh, [p])
    assert rep.format == "prom-json" and (rep.records, rep.rows_ok, rep.rows_quarantined) == (
        4,
        3,
        1,
    )
    ingest_paths(wh, [p])
    assert wh.read("gpu_samples").height == 3


_point = st.tuples(
    st.one_of(st.integers(0, 2**33), st.floats(0, 2**33), st.text(max_size=4)),
    st.one_of(st.integers().map(str), st.floats().map(repr), st.text(max_size=5)),
)
_series = st.fixed_dictionaries(
    {
        "metric": st.dictionaries(
            st.sampled_from(["__name__", "gpu", "UUID", "Hostname"]), st.text(max_size=5)
        ),
        "values": st.lists(st.one_of(_point.map(list), st.just([1]), st.just("x")), max_size=6),
    }
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_series, max_size=4))
def test_fuzz_conservation(series):
    doc = {"status": "success", "data": {"resultType": "matrix", "result": series}}
    r = parse(json.dumps(doc).encode(), ParseContext())
    assert r.tables["gpu_samples"].height + r.quarantine.height == r.records
    assert r.records == sum(len(s["values"]) for s in series)


def _matrix(*series):
    return {"status": "success", "data": {"resultType": "matrix", "result": list(series)}}


def test_one_bad_json_line_loses_only_that_line():
    good = json.dumps(MATRIX)
    r = parse((good + "\n{truncated\n").encode(), ParseContext())
    assert r.tables["gpu_samples"].height == 3 and r.records == 5
    assert r.quarantine.filter(r.quarantine["line"] == 2)["error"][0].startswith(
        "JSON line is not JSON"
    )


def test_values_times_identity_and_shapes_quarantined_per_record():
    gpu = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0", "Hostname": "n1"}
    doc = _matrix(
        {
            "metric": gpu,
            "values": [
                [1714564800, "40"],
                [1714564815, "+Inf"],
                [1714564830, "-Inf"],
                [1714564845, "NaN"],
                [1e300, "41"],
                [4102444800, "42"],
                [946000000, "43"],
            ],
        },
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP"}, "values": [[1714564800, "39"]]},
        "not a series",
        {"metric": ["gpu"], "values": []},
    )
    r = parse(json.dumps(doc).encode(), ParseContext(not_after=datetime(2024, 6, 1)))
    s = r.tables["gpu_samples"]
    assert s.select("time", "value").rows() == [(datetime(2024, 5, 1, 12), 40.0)]
    assert r.records == 10 and r.quarantine.height == 9
    errors = r.quarantine["error"].to_list()
    assert errors[:3] == [
        f"non-finite sample value (not a measurement): {v}" for v in ("+Inf", "-Inf", "NaN")
    ]
    assert errors[3] == "timestamp 1e+300 s is out of range"
    assert "clock in the future" in errors[4] and "implausible clock" in errors[5]
    assert errors[6].startswith("series names no GPU and no host")
    assert errors[7:] == [
        "series 2: not a JSON object",
        "series 3: its metric is not an object of labels",
    ]
    # --host places a GPU-less series
    r = parse(json.dumps(_matrix(doc["data"]["result"][1])).encode(), ParseContext(host="n9"))
    assert r.tables["gpu_samples"].select("host", "gpu", "value").rows() == [("n9", None, 39.0)]


def test_prometheus_docs_range_and_instant_examples():
    from tests.conftest import FIXTURES

    P = FIXTURES / "prometheus"
    r = parse((P / "prometheus-docs__api_query_range_up.json").read_bytes(), ParseContext())
    s = r.tables["gpu_samples"]
    assert r.quarantine.height == 0 and r.records == s.height == 6
    assert s.select("host", "metric", "value").rows() == [
        ("localhost", "up", 1.0), ("localhost", "up", 1.0), ("localhost", "up", 1.0),
        ("localhost", "up", 0.0), ("localhost", "up", 0.0), ("localhost", "up", 1.0),
    ]  # fmt: skip
    assert s["time"][0] == datetime(2015, 7, 1, 20, 10, 30, 781000)
    r = parse((P / "prometheus-docs__api_query_vector_up.json").read_bytes(), ParseContext())
    s = r.tables["gpu_samples"]
    assert r.quarantine.height == 0 and s["value"].to_list() == [1.0, 0.0]
    assert set(s["time"]) == {datetime(2015, 7, 1, 20, 10, 51, 781000)}


_label = st.text(max_size=6)  # any characters, the empty label included
_canonical = st.fixed_dictionaries(
    {
        "metric": st.dictionaries(
            st.sampled_from(
                ["__name__", "gpu", "UUID", "Hostname", "instance", "pci_bus_id", "pod", "xid", "x"]
            ),
            _label,
        ),
        "values": st.lists(
            st.tuples(
                st.one_of(st.integers(0, 2**33), st.floats(0, 2**33)),
                st.one_of(
                    st.sampled_from(["NaN", "+Inf", "-Inf", "", " 7", "1e400"]),
                    st.integers().map(str),
                    st.floats().map(repr),
                    st.text(max_size=5),
                ),
            ).map(list),
            max_size=6,
        ),
    }
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_canonical, max_size=4), st.sampled_from([None, "h9"]))
def test_a_well_formed_answer_read_natively_equals_point_by_point(series, host):
    """A matrix answer as Prometheus writes it (every point [number, "text"]) is read by polars
    without a Python object per point; what it gives is what the point-by-point reading gives:
    rows, quarantine rows and their reasons, counts."""
    data = json.dumps(_matrix(*series)).encode()
    ctx = ParseContext(host=host, cluster="c", path="q.json", not_after=datetime(2030, 1, 1))
    assert prom_json._matrix(data) is not None
    fast = parse(data, ctx)
    with patch.object(prom_json, "_matrix", lambda _data: None):
        slow = parse(data, ctx)
    assert_frame_equal(fast.tables["gpu_samples"], slow.tables["gpu_samples"])
    assert_frame_equal(fast.quarantine, slow.quarantine)
    assert (fast.records, fast.stand_ins) == (slow.records, slow.stand_ins)


def test_an_answer_not_read_natively_is_read_point_by_point():
    """A point that is not a pair, an error answer, JSON lines: each record's own reason."""
    gpu = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "gpu": "0", "Hostname": "n1"}
    odd = json.dumps(_matrix({"metric": gpu, "values": [[1714564800, "40"], [1714564815]]}))
    assert prom_json._matrix(odd.encode()) is None
    r = parse(odd.encode(), ParseContext())
    assert r.tables["gpu_samples"]["value"].to_list() == [40.0]
    assert r.quarantine["error"].to_list() == ["point has no numeric timestamp"]
    lines = (json.dumps(MATRIX) + "\n" + json.dumps(MATRIX)).encode()
    assert prom_json._matrix(lines) is None and parse(lines, ParseContext()).records == 8
