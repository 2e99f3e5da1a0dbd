"""sacct --json: pinned expectations on real dumps from Slurm 21.08 and 23.11, shapes of 24.x,
and property-based fuzzing (never raises, records = rows + quarantine)."""

from datetime import datetime
from functools import partial

import polars as pl
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import ParseContext
from ingest.formats.sacct_json import detect
from ingest.formats.sacct_json import parse
from tests.conftest import FIXTURES
from tests.conftest import SLURM
from tests.conftest import parse_rows
from tests.conftest import stored_rows

_parse = partial(parse_rows, parse, "job_attempts")  # (rows, quarantine)
_stored = partial(stored_rows, parse, "job_attempts")  # rows; no record quarantined


def _one_job(name: str) -> dict:
    """The one job of the dump ``name`` in fixtures/slurm, stored without a rejected record."""
    ok = _stored(SLURM / name)
    assert ok.height == 1
    return ok.row(0, named=True)


def test_slurm_21_08_plain_numbers_and_string_state():
    job = _one_job("SARC__slurm_21_8_8.json")
    assert job["job_id"] == "55978384" and job["cluster"] == "cedar" and job["scheduler"] == "slurm"
    assert job["state"] == "REQUEUED" and job["raw_state"] == "REQUEUED" and job["reason"] == "None"
    assert job["start_time"] == datetime(2023, 1, 9, 14, 37, 3)  # epoch 1673275023, UTC
    assert job["end_time"] == datetime(2023, 1, 10, 16, 49, 46)
    assert job["n_gpus"] == 1 and job["n_cpus"] == 4 and job["n_nodes"] == 1
    assert job["nodes"] == ["cdr896"] and job["timelimit_s"] == 1440 * 60
    assert job["exit_code"] == 0 and job["user"] == "purah" and job["attempt"] == 1


def test_slurm_23_11_set_number_objects_and_state_list():
    job = _one_job("SARC__slurm_23_11_5.json")
    assert job["job_id"] == "4" and job["state"] == "RUNNING" and job["raw_state"] == "RUNNING"
    assert job["end_time"] is None  # epoch 0 means unset
    assert job["start_time"] == datetime(2021, 2, 19, 9, 0, 9)
    assert job["timelimit_s"] == 7200 * 60 and job["n_gpus"] == 2 and job["nodes"] == ["mila02"]
    assert job["array_job_id"] is None and job["exit_code"] == 0
    assert job["signal"] == 0  # status SUCCESS, signal unset: what the text prints as 0:0


def test_clockwork_array_tasks_and_node_fail():
    ok = _stored(SLURM / "clockwork__sacct_1.json")
    assert ok["job_id"].to_list() == ["1_7", "2_0"]  # array tasks named as sacct text names them
    assert ok["array_job_id"].to_list() == ["1", "2"] and ok["array_task_id"].to_list() == [
        "7",
        "0",
    ]
    assert ok["state"].to_list() == ["NODE_FAIL", "REQUEUED"]
    assert ok["reason"].to_list() == ["Prolog", "Prolog"]
    assert ok["end_time"][0] is None and ok["nodes"].to_list() == [["cdr1"], ["cdr2"]]


def _job(job_id, start, end, state, **extra):
    job = {
        "job_id": job_id,
        "cluster": "c1",
        "name": "train",
        "user": "u",
        "nodes": "gpu[01-02]",
        "allocation_nodes": {"set": True, "infinite": False, "number": 2},
        "state": {"current": state, "reason": "None"},
        "time": {
            "start": start,
            "end": end,
            "submission": start - 10,
            "limit": {"set": True, "infinite": True, "number": 0},
        },
        "exit_code": {
            "status": ["SIGNALED"],
            "return_code": {"set": True, "infinite": False, "number": 0},
            "signal": {"id": {"set": True, "infinite": False, "number": 9}, "name": "KILL"},
        },
        "tres": {
            "allocated": [
                {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 8},
                {"type": "gres", "name": "gpu:h100", "id": 1002, "count": 8},
                {"type": "cpu", "name": "", "id": 1, "count": 64},
            ]
        },
        "steps": [{"step": {"id": f"{job_id}.batch"}}],
    }
    job.update(extra)
    return job


def test_v0_0_41_shapes_requeue_chain_signals_and_typed_gpus():
    doc = {
        "meta": {"plugin": {"data_parser": "data_parser/v0.0.41"}},
        "jobs": [
            _job(7, 1_700_000_500, 1_700_000_900, ["COMPLETED"]),
            _job(7, 1_700_000_000, 1_700_000_400, ["NODE_FAIL", "REQUEUED"]),
            _job(
                8,
                1_700_000_000,
                0,
                ["PENDING"],
                nodes="None assigned",
                array={"job_id": 8, "task": "1-3", "task_id": {"set": False}},
            ),
            _job(
                9,
                1_700_000_000,
                1_700_000_100,
                "FAILED",
                het={"job_id": 9, "job_offset": {"set": True, "number": 1}},
            ),
        ],
    }
    ok = _stored(doc).sort("job_id", "attempt")
    assert ok["job_id"].to_list() == ["7", "7", "8_[1-3]", "9+1"]
    assert ok["attempt"].to_list() == [1, 2, 1, 1]  # requeue chain numbered in time order
    first = ok.row(0, named=True)
    assert first["state"] == "NODE_FAIL" and first["raw_state"] == "NODE_FAIL,REQUEUED"
    assert first["signal"] == 9 and first["n_gpus"] == 16 and first["n_cpus"] == 64
    assert first["nodes"] == ["gpu01", "gpu02"] and first["n_nodes"] == 2
    assert first["timelimit_s"] is None  # infinite limit
    assert ok["nodes"][2].to_list() == [] and ok["state"][2] == "PENDING"


def test_bad_records_are_quarantined_and_good_ones_kept():
    doc = {
        "jobs": [
            _job(1, 1_700_000_000, 1_700_000_100, "COMPLETED"),
            "junk",
            {"name": "no id"},
            _job(2, 1_700_000_000, 1_700_000_100, "COMPLETED", nodes="gpu[01-"),
        ]
    }
    ok, q = _parse(doc)
    assert ok["job_id"].to_list() == ["1"]
    assert q["line"].to_list() == [2, 3, 4]
    assert "not an object" in q["error"][0] and "no usable job_id" in q["error"][1]
    assert "unbalanced" in q["error"][2]


def test_invalid_json_and_missing_jobs_are_one_readable_quarantine_row():
    ok, q = _parse(b'{"jobs": [\n  {"job_id": 1,}\n]}')
    assert ok.height == 0 and q.height == 1
    assert q["error"][0].startswith("invalid JSON at line 2 column") and q["line"][0] == 2
    ok, q = _parse(b'{"meta": {}}')
    assert q["error"].to_list() == ["sacct JSON without a 'jobs' list"]


def test_detect_tells_sacct_json_from_kubernetes_json():
    assert detect((SLURM / "SARC__slurm_21_8_8.json").read_bytes(), "x.json") >= 90
    assert detect((SLURM / "SARC__slurm_23_11_5.json").read_bytes(), "x") >= 90
    assert (
        detect(b'{"apiVersion": "v1", "kind": "List", "items": [{"jobs": [], "job_id": 1}]}', "x")
        == 0
    )
    assert (
        detect((FIXTURES / "kubernetes" / "hyperpod_pytorchjob_status_doc.json").read_bytes(), "x")
        == 0
    )
    assert detect((SLURM / "xdmod__alloc-tres-gpu-count.json").read_bytes(), "x") == 0


REAL = (SLURM / "SARC__slurm_23_11_5.json").read_bytes()


@settings(max_examples=50, deadline=None)
@given(st.integers(0, len(REAL) - 1), st.integers(1, 40), st.binary(max_size=20))
def test_fuzz_mutated_real_dump(pos, cut, insert):
    _parse(REAL[:pos] + insert + REAL[pos + cut :])


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
job_keys = st.sampled_from(
    ["job_id", "time", "state", "array", "het", "tres", "nodes", "exit_code", "allocation_nodes"]
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.dictionaries(job_keys, json_values, max_size=6), max_size=4))
def test_fuzz_structurally_odd_jobs(jobs):
    _parse({"jobs": jobs})


def _plain_job(i, **kw):
    job = {
        "job_id": i,
        "state": {"current": ["COMPLETED"]},
        "time": {"start": 1700000000, "end": 1700003600, "submission": 1699990000},
        "exit_code": {"return_code": {"set": True, "number": 0}, "signal": {"id": {"set": False}}},
        "allocation_nodes": 1,
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 8}]},
    }
    return {**job, **kw}


def test_out_of_range_values_are_quarantined_per_job_not_nulled():
    jobs = [
        _plain_job(1),
        _plain_job(2, tres={"allocated": [{"type": "gres", "name": "gpu", "count": 99999999999}]}),
        _plain_job(3, allocation_nodes=10**40),
        _plain_job(4, time={"start": 1700003600, "end": 1700000000}),
        _plain_job(5, exit_code={"return_code": 300}),
        _plain_job(6, time={"start": 99999999999}),
        _plain_job(7, exit_code={"return_code": "x"}),
        _plain_job(8, time={"start": 900000000}),
    ]
    ok, q = _parse({"jobs": jobs})
    assert ok["job_id"].to_list() == ["1"] and ok["n_gpus"].to_list() == [8]
    assert [e.split(" (")[0] for e in q["error"]] == [
        "job record 2: n_gpus 99999999999 is not in 0..10,000,000",
        "job record 3: allocation_nodes 10000000000000000000000000000000000000000 is out of range",
        "job record 4: end_time 2023-11-14T22:13:20 is before start_time 2023-11-14T23:13:20",
        "job record 5: exit_code 300 is not in 0..255",
        "job record 6: start_time: time 5138-11-16T09:46:39 is after "
        + q["error"][4].split(" is after ")[1].split(" (")[0],
        'job record 7: exit_code.return_code "x" is not a number',
        "job record 8: start_time: time 1998-07-09T16:00:00 is before 2000-01-01T00:00:00",
    ]


def test_slurm_22_05_array_task_with_four_a100_nodes():
    ok = _stored(SLURM / "SARC__slurm_22_5_9.json")
    assert ok.select(
        "job_id", "array_job_id", "array_task_id", "cluster", "state", "n_nodes", "n_cpus", "n_gpus"
    ).rows() == [("20247445_100", "20247445", "100", "narval", "FAILED", 4, 96, 16)]
    job = ok.row(0, named=True)
    assert job["nodes"] == ["ng30103", "ng30203", "ng30706", "ng30707"]
    assert job["start_time"] == datetime(2023, 9, 3, 11, 30, 41) and job["end_time"] == datetime(
        2023, 9, 4, 22, 4, 4
    )
    assert job["elapsed_s"] == 124403 and job["timelimit_s"] == 2880 * 60


def test_slurm_23_02_running_job_with_set_number_objects():
    ok = _stored(SLURM / "SARC__slurm_23_2_6.json")
    job = ok.row(0, named=True)
    assert (job["job_id"], job["array_job_id"], job["state"], job["user"]) == (
        "4",
        None,
        "RUNNING",
        "masterkohga",
    )
    assert job["end_time"] is None and job["start_time"] == datetime(
        2021, 2, 19, 9, 0, 9
    )  # end 0 = unset
    assert (job["n_nodes"], job["n_cpus"], job["n_gpus"], job["nodes"]) == (1, 4, 2, ["mila02"])
    assert job["timelimit_s"] == 7200 * 60  # {"set": true, "number": 7200} minutes


def test_slurm_22_05_8_failed_exit_codes_the_json_lost_are_unknown_not_zero():
    """A real 22.05.8 capture (tests/fixtures/slurm/PROVENANCE.md): its JSON says
    {"status": "SUCCESS", "return_code": 0} for jobs that exited 3, 1 and 2; the text of the
    same query says 3:0, 1:0, 2:0. Everything else of the two agrees."""
    from ingest.formats.sacct import parse as parse_text

    ok, q = _parse(SLURM / "sacct_json_22_05_8_job_mix.json")
    text = parse_text((SLURM / "sacct_parsable2_22_05_8_job_mix.txt").read_bytes(), ParseContext())
    txt = text.tables["job_attempts"]
    assert q.height == 0 and text.quarantine.height == 0
    cols = ["job_id", "attempt", "state", "nodes", "n_nodes", "n_gpus", "start_time", "end_time"]
    assert (
        ok.select(cols).sort("job_id", "attempt").equals(txt.select(cols).sort("job_id", "attempt"))
    )
    exits = dict(zip(ok["job_id"] + "/" + ok["state"], ok["exit_code"], strict=True))
    assert exits == {
        "1/TIMEOUT": 0,
        "2/COMPLETED": 0,
        "3/FAILED": None,
        "4/FAILED": None,
        "5/NODE_FAIL": 0,
        "5/COMPLETED": 0,
        "6_1/FAILED": None,
        "6_2/FAILED": None,
    }
    assert ok.filter(pl.col("job_id") == "4")["signal"].to_list() == [9]  # kill -9: SIGNALED, kept
    assert txt.filter(pl.col("state") == "FAILED").sort("job_id")["exit_code"].to_list() == [
        3,
        0,
        1,
        2,
    ]


def test_typed_gpus_slurm_lists_twice_are_counted_once_as_the_text_counts_them():
    """A real 22.05.8 capture of a cluster with typed GPUs (tests/fixtures/slurm/PROVENANCE.md):
    Slurm lists each job's GPUs as the untyped total and per type (``gpu`` 16 and ``gpu:h100``
    16 for two nodes of 8); the job has 16, in JSON as in the text of the same query."""
    from ingest.formats.sacct import parse as parse_text

    ok = _stored(SLURM / "sacct_json_22_05_8_typed_gpus.json").sort("job_id")
    text = parse_text(
        (SLURM / "sacct_parsable2_22_05_8_typed_gpus.txt").read_bytes(), ParseContext()
    )
    txt = text.tables["job_attempts"].sort("job_id")
    assert ok.select("job_id", "n_nodes", "n_gpus").rows() == [("1", 1, 2), ("2", 2, 16)]
    assert txt["n_gpus"].to_list() == ok["n_gpus"].to_list()


def test_gpu_tres_untyped_total_else_the_sum_of_typed_counts():
    def gpus(*allocated):
        tres = [{"type": "cpu", "name": "", "count": 8}]
        tres += [{"type": "gres", "name": n, "count": c} for n, c in allocated]
        return _stored({"jobs": [_plain_job(1, tres={"allocated": tres})]})["n_gpus"].item()

    assert gpus(("gpu", 8), ("gpu:h100", 8)) == 8  # typed after untyped
    assert gpus(("gpu:a100", 4), ("gpu", 8), ("gpu:h100", 4)) == 8  # two types, untyped between
    assert gpus(("gpu:a100", 4), ("gpu:h100", 4)) == 8  # types only: their sum
    assert gpus(("gpumem", 40), ("gpu:h100", 2)) == 2  # gres/gpumem is no GPU
    assert gpus() == 0  # something allocated, no GPU


def test_xdmod_alloc_tres_gpu_cases_as_json_tres_lists():
    """Open XDMoD's AllocTRES -> GPU count cases (fixtures/slurm), each TRES as the list --json
    prints: the counts XDMoD expects, as the text parser gives them (test_ingest_inputs)."""
    import json

    cases = json.loads((SLURM / "xdmod__alloc-tres-gpu-count.json").read_text())

    def tres_list(text):
        items = [kv.split("=") for kv in text.split(",") if kv]
        return [
            {"type": k.split("/")[0], "name": k.partition("/")[2], "count": int(v.rstrip("MG"))}
            for k, v in items
        ]

    jobs = [_plain_job(i, tres={"allocated": tres_list(t)}) for i, (t, _) in enumerate(cases, 1)]
    got = _stored({"jobs": jobs}).sort("source_line")["n_gpus"].fill_null(0).to_list()
    assert got == [gpus for _, gpus in cases] and len(got) == 9


def test_a_cluster_given_is_the_cluster_and_never_merges_the_clusters_of_one_dump():
    jobs = [_plain_job(1, cluster="a"), _plain_job(2, cluster="b"), _plain_job(3)]
    ok = _stored({"jobs": jobs})
    assert ok.select("cluster", "reported_cluster").rows() == [
        ("a", None), ("b", None), ("default", None)
    ]  # fmt: skip
    ok, q = _parse({"jobs": jobs}, cluster="b", cluster_given=True)
    assert ok.select("job_id", "cluster").rows() == [("2", "b"), ("3", "b")]
    assert q["error"].to_list() == [
        (
            "job record 1: this dump holds records of clusters a, b: the cluster given (b) would "
            "merge them; read it without a given cluster, or one cluster at a time (sacct -M a)"
        )
    ]
    jobs[1]["cluster"] = "a"
    ok = _stored({"jobs": jobs}, cluster="east", cluster_given=True)
    assert ok.select("cluster", "reported_cluster").rows() == [
        ("east", "a"), ("east", "a"), ("east", None)
    ]  # fmt: skip
