"""sacct text dumps: pinned expectations on real fixtures and the layouts real sites produce."""

from datetime import datetime

import polars as pl
import pytest

from ingest.base import ParseContext
from ingest.sacct import detect, parse
from tests.conftest import FIXTURES

SLURM = FIXTURES / "slurm"


def _parse(text: str | bytes, **ctx):
    data = text.encode() if isinstance(text, str) else text
    res = parse(data, ParseContext(**ctx))
    ok = res.tables.get("job_attempts", pl.DataFrame())
    assert res.records == ok.height + res.quarantine.height  # conservation
    return ok, res.quarantine


def test_xdmod_headerless_accounting_log():
    ok, q = _parse((SLURM / "xdmod__accounting-logs.log").read_bytes())
    assert q.height == 0 and ok.height == 4
    first = ok.row(0, named=True)
    assert first["job_id"] == "4103947" and first["cluster"] == "ub-hpc"
    assert first["state"] == "TIMEOUT" and first["exit_code"] == 1 and first["signal"] == 0
    assert first["n_nodes"] == 32 and len(first["nodes"]) == 32  # 27 names + 2+2+5 from brackets
    assert first["nodes"][7:9] == ["d09n04s01", "d09n04s02"]
    assert first["elapsed_s"] == 3 * 86400 and first["timelimit_s"] == 3 * 86400
    assert first["start_time"] == datetime(2015, 6, 28, 2, 55, 50)
    cancelled = ok.row(1, named=True)
    assert cancelled["state"] == "CANCELLED" and cancelled["raw_state"] == "CANCELLED by 102216"
    assert cancelled["n_gpus"] == 0  # AllocTRES present without gres/gpu
    gpu_job = ok.row(3, named=True)
    assert gpu_job["n_gpus"] == 2  # nothing allocated: falls back to ReqTRES gres/gpu=2
    assert gpu_job["nodes"] == ["cpn-k16-35-01", "cpn-k16-37-01"]


def test_xdmod_non_ended_states_keep_unknown_times_null():
    ok, q = _parse((SLURM / "xdmod__non-ended-job-state.log").read_bytes())
    assert q.height == 0
    assert ok["state"].to_list() == ["RUNNING", "PENDING"]
    assert ok["start_time"][1] is None and ok["end_time"][1] is not None


def test_examples_with_headers_steps_het_and_trailing_delimiter():
    ok, q = _parse((SLURM / "sacct_parsable2_with_header_examples.txt").read_bytes())
    assert q.height == 0
    # steps (.batch/.extern/.0) fold into their job; het components stay separate jobs
    assert ok["job_id"].to_list() == ["2355542", "1853+0", "1853+1", "176+0"]
    assert ok["state"].to_list() == ["FAILED", "COMPLETED", "COMPLETED", "COMPLETED"]
    assert ok["exit_code"].to_list() == [1, 0, 0, 0]
    assert ok["n_cpus"].to_list() == [2, 1, 1, 1]
    assert ok["account"][0] == "csu-general"


def test_duplicates_give_one_attempt_per_requeue_in_time_order():
    text = (
        "JobID|Start|End|State|NodeList|AllocTRES\n"
        "77|2026-01-02T00:00:00|2026-01-02T05:00:00|COMPLETED|n[3-4]|gres/gpu=16\n"
        "77.batch|2026-01-02T00:00:00|2026-01-02T05:00:00|COMPLETED|n3|\n"
        "77|2026-01-01T00:00:00|2026-01-01T10:00:00|NODE_FAIL|n[1-2]|gres/gpu:h100=8,gres/gpu:a100=8\n"
    )
    ok, _ = _parse(text)
    rows = ok.sort("attempt").select("attempt", "state", "nodes", "n_gpus").to_dicts()
    assert rows == [
        {"attempt": 1, "state": "NODE_FAIL", "nodes": ["n1", "n2"], "n_gpus": 16},
        {"attempt": 2, "state": "COMPLETED", "nodes": ["n3", "n4"], "n_gpus": 16},
    ]


def test_arrays_multibyte_delimiter_fields_and_timezone():
    text = "123_4¦2026-03-08T01:30:00¦CA¦gpu[08-10]\n123_[5-7]¦Unknown¦WEIRD_NEW_STATE¦None assigned\n"
    ok, q = _parse(text, fields=("JobID", "Start", "State", "NodeList"), delimiter="¦", tz="America/New_York")
    assert q.height == 0
    a, b = ok.row(0, named=True), ok.row(1, named=True)
    assert (a["job_id"], a["array_job_id"], a["array_task_id"]) == ("123_4", "123", "4")
    assert a["state"] == "CANCELLED" and a["nodes"] == ["gpu08", "gpu09", "gpu10"]
    assert a["start_time"] == datetime(2026, 3, 8, 6, 30)  # EST is UTC-5
    assert b["array_task_id"] == "[5-7]" and b["state"] == "UNKNOWN"
    assert b["raw_state"] == "WEIRD_NEW_STATE" and b["nodes"] == []


def test_elapsed_forms():
    text = "JobID|Elapsed|Timelimit\n1|1-02:03:04|UNLIMITED\n2|05:30|Partition_Limit\n3|10:00:00|00:30:00\n"
    ok, _ = _parse(text)
    assert ok["elapsed_s"].to_list() == [93784.0, 330.0, 36000.0]
    assert ok["timelimit_s"].to_list() == [None, None, 1800.0]


@pytest.mark.parametrize(
    "text, error",
    [
        ("JobID|State|ExitCode\n1|COMPLETED\n", "expected 3 fields"),
        ("JobID|State\nnot-a-job|FAILED\n", "unrecognised JobID"),
        ("JobID|State\n5.batch|FAILED\n", "has no job line"),
        ("JobID|NodeList\n5|gpu[01-\n", "unbalanced"),
        ("5|FAILED\nJobID|State\n", "before any sacct header"),
    ],
)
def test_bad_records_are_quarantined_with_reasons(text, error):
    ok, q = _parse(text)
    assert ok.height == 0 and q.height == 1
    assert error in q["error"][0]


def test_garbage_never_raises():
    ok, q = _parse(b"\x00\xff\xfe garbage \n\x89PNG\r\n")
    assert ok.height == 0 and q.height == 2


def test_detect():
    assert detect(b"JobID|JobName|State\n1|x|COMPLETED\n", "dump.txt") >= 90
    assert detect((SLURM / "xdmod__accounting-logs.log").read_bytes(), "x.log") >= 50
    assert detect(b'{"jobs": []}', "x.json") == 0
