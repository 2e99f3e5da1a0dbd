"""sacct text dumps: pinned expectations on real fixtures and the layouts real sites produce."""

from datetime import datetime
from functools import partial

import polars as pl
import pytest

from ingest.base import ParseContext
from ingest.formats.sacct import detect
from ingest.formats.sacct import parse
from tests.conftest import SLURM
from tests.conftest import parse_rows
from tests.conftest import stored_rows

_parse = partial(parse_rows, parse, "job_attempts")  # (rows, quarantine)
_stored = partial(stored_rows, parse, "job_attempts")  # rows; no record quarantined


def test_xdmod_headerless_accounting_log():
    ok = _stored(SLURM / "xdmod__accounting-logs.log")
    assert ok.height == 4
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
    ok = _stored(SLURM / "xdmod__non-ended-job-state.log")
    assert ok["state"].to_list() == ["RUNNING", "PENDING"]
    assert ok["start_time"][1] is None and ok["end_time"][1] is not None


def test_examples_with_headers_steps_het_and_trailing_delimiter():
    ok = _stored(SLURM / "sacct_parsable2_with_header_examples.txt")
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
    text = (
        "123_4¦2026-03-08T01:30:00¦CA¦gpu[08-10]\n123_[5-7]¦Unknown¦WEIRD_NEW_STATE¦None assigned\n"
    )
    ok, q = _parse(
        text, fields=("JobID", "Start", "State", "NodeList"), delimiter="¦", tz="America/New_York"
    )
    assert q.height == 0
    a, b = ok.row(0, named=True), ok.row(1, named=True)
    assert (a["job_id"], a["array_job_id"], a["array_task_id"]) == ("123_4", "123", "4")
    assert a["state"] == "CANCELLED" and a["nodes"] == ["gpu08", "gpu09", "gpu10"]
    assert a["start_time"] == datetime(2026, 3, 8, 6, 30)  # EST is UTC-5
    assert b["array_task_id"] == "[5-7]" and b["state"] == "UNKNOWN"
    assert b["raw_state"] == "WEIRD_NEW_STATE" and b["nodes"] == []


def test_elapsed_forms():
    text = (
        "JobID|Elapsed|Timelimit\n"
        "1|1-02:03:04|UNLIMITED\n"
        "2|05:30|Partition_Limit\n"
        "3|10:00:00|00:30:00\n"
    )
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


@pytest.mark.parametrize("delim", ["|", "::", "¦"])
def test_parsable_trailing_delimiter_headerless_and_with_header(delim):
    body = f"7{delim}COMPLETED{delim}0:0{delim}\n8{delim}FAILED{delim}1:9{delim}\n"
    for text, ctx in (
        (body, {"fields": ("JobID", "State", "ExitCode"), "delimiter": delim}),
        (
            f"JobID{delim}State{delim}ExitCode{delim}\n" + body,
            {"delimiter": delim} if delim != "|" else {},
        ),
    ):
        ok = _stored(text, **ctx)
        assert ok.select("job_id", "state", "exit_code", "signal").rows() == [
            ("7", "COMPLETED", 0, 0),
            ("8", "FAILED", 1, 9),
        ]


def test_one_bad_gpu_count_quarantines_one_line_only():
    good = "".join(f"{i}|COMPLETED|gres/gpu=8,node=1\n" for i in range(1, 40))
    ok, q = _parse("JobID|State|AllocTRES\n" + good + "99|FAILED|gres/gpu=99999999999\n")
    assert ok.height == 39 and ok["n_gpus"].unique().to_list() == [8]
    assert q.rows() == [
        (41, "99|FAILED|gres/gpu=99999999999", "n_gpus 99999999999 is not in 0..10,000,000")
    ]


@pytest.mark.parametrize(
    "line, error",
    [
        (
            "1|99999999999|0:0|2026-01-01T00:00:00|2026-01-01T01:00:00",
            "n_nodes 99999999999 is not in 0..100,000",
        ),
        ("1|-2|0:0|2026-01-01T00:00:00|2026-01-01T01:00:00", "NNodes '-2' is not a count"),
        ("1|x|0:0|2026-01-01T00:00:00|2026-01-01T01:00:00", "NNodes 'x' is not a count"),
        (
            "1|2|999999999999:0|2026-01-01T00:00:00|2026-01-01T01:00:00",
            "exit_code 999999999999 is not in 0..255",
        ),
        ("1|2|1:300|2026-01-01T00:00:00|2026-01-01T01:00:00", "signal 300 is not in 0..255"),
        ("1|2|oops|2026-01-01T00:00:00|2026-01-01T01:00:00", "ExitCode 'oops'"),
        (
            "1|2|0:0|2026-01-02T00:00:00|2026-01-01T01:00:00",
            "end_time 2026-01-01T01:00:00 is before start_time 2026-01-02T00:00:00",
        ),
        (
            "1|2|0:0|2026-01-01T00:00:00|9999-01-01T01:00:00",
            "end_time: time 9999-01-01T01:00:00 is after",
        ),
        (
            "1|2|0:0|1970-01-01T00:00:00|2026-01-01T01:00:00",
            "start_time: time 1970-01-01T00:00:00 is before 2000-01-01",
        ),
        (
            "1|2|0:0|2026-13-01T00:00:00|2026-01-01T01:00:00",
            "unreadable Start '2026-13-01T00:00:00'",
        ),
    ],
)
def test_out_of_range_values_are_quarantined_not_nulled(line, error):
    ok, q = _parse(f"JobID|NNodes|ExitCode|Start|End\n2|1|0:0|Unknown|Unknown\n{line}\n")
    assert ok["job_id"].to_list() == ["2"] and ok["n_nodes"].to_list() == [1]
    assert q.height == 1 and q["line"][0] == 3 and error in q["error"][0]


def test_exact_duplicate_lines_are_stored_once_and_counted_as_duplicates(wh, tmp_path):
    from ingest.runner import ingest_paths

    line = "5|2026-01-01T00:00:00|2026-01-01T01:00:00|NODE_FAIL\n"
    # folds into its job: no record
    step = "5.batch|2026-01-01T00:00:00|2026-01-01T01:00:00|CANCELLED\n"
    requeued = "5|2026-01-01T02:00:00|2026-01-01T03:00:00|COMPLETED\n"
    p = tmp_path / "sacct.txt"
    p.write_text("JobID|Start|End|State\n" + line + step + line + step + requeued + line)
    (rep,) = ingest_paths(wh, [p], fmt="sacct")
    # the two repeats of the job line are neither attempts (a third attempt) nor rejected records
    assert (rep.records, rep.rows_ok, rep.rows_quarantined, rep.rows_duplicate) == (4, 2, 0, 2)
    ok = wh.read("job_attempts").sort("source_line")
    assert ok.select("attempt", "state", "source_line").rows() == [
        (1, "NODE_FAIL", 2),
        (2, "COMPLETED", 6),
    ]
    assert wh.read("quarantine").height == 0


def test_a_repeated_rejected_line_is_rejected_again_not_a_duplicate():
    bad = "7|2026-01-01T05:00:00|2026-01-01T04:00:00|FAILED\n"  # End before Start
    good = "8|2026-01-01T00:00:00|2026-01-01T01:00:00|COMPLETED\n"
    res = parse(("JobID|Start|End|State\n" + bad + good + bad + good).encode(), ParseContext())
    assert (
        res.records,
        res.tables["job_attempts"].height,
        res.quarantine.height,
        res.duplicates,
    ) == (4, 1, 2, 1)
    assert res.quarantine["line"].sort().to_list() == [2, 4]
    assert res.quarantine["error"][0] == res.quarantine["error"][1]


def test_wrong_delimiter_with_a_header_says_how_to_fix_it():
    ok, q = _parse("JobID|State|ExitCode\n1|COMPLETED|0:0\n2|FAILED|1:0\n", delimiter=",")
    assert ok.height == 0 and q["error"].unique().to_list() == [
        (
            "no JobID field in the field list (header: jobid|state|exitcode) split at ',': every "
            "record rejected; pass --fields with JobID, or the dump's --delimiter"
        )
    ]


@pytest.mark.parametrize(
    "ctx, error",
    [
        (
            {"fields": ("JobID", "State")},
            (
                "every line has 3 fields separated by '|' but the field list (--fields) has 2: "
                "every record rejected; pass the dump's field list with --fields"
            ),
        ),
        (
            {"fields": ("JobID", "State", "End"), "delimiter": ","},
            (
                "no line contains the delimiter ',': every record rejected; pass the dump's "
                "delimiter with --delimiter"
            ),
        ),
        (
            {},
            "but the field list (no header: Open XDMoD's 26 fields) has 26: every record rejected",
        ),
    ],
)
def test_wrong_options_give_one_clear_reason_on_every_row(ctx, error):
    ok, q = _parse("1|COMPLETED|0:0\n2|FAILED|1:0\n3|FAILED|1:0\n", **ctx)
    assert ok.height == 0 and q.height == 3
    assert q["error"].unique().to_list() == [q["error"][0]] and error in q["error"][0]


# Real headerless dumps in fixtures/slurm: file -> (its field list, as its sacct --format
# wrote it, and the zone of its site)
REAL_DUMPS = {
    "rug-cit-hpc_slurm-jobinfo__sacct.txt": (
        (
            "JobID,JobName,User,Partition,NodeList,NNodes,NCPUS,NTasks,State,Submit,Start,End,"
            "Timelimit,Elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,"
            "TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxDiskReadNode,MaxDiskWriteNode,"
            "Comment"
        ),
        "Europe/Amsterdam",
    ),
    "rug-cit-hpc_hb-jobinfo__sacct.txt": (
        (
            "JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,"
            "Timelimit,Elapsed,TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,"
            "AllocTRES,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,"
            "MaxRSSNode,MaxRSSTask,MaxVMSizeNode,MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,"
            "MaxDiskWriteNode,MaxDiskWriteTask,Comment"
        ),
        "Europe/Amsterdam",
    ),
    "fasrc-slyme__sacct_single_parallel_COMPLETED_parsable.out": (
        (
            "User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,"
            "ReqMem,MaxRSS,Submit,Start,End,NodeList"
        ),
        "America/New_York",
    ),
}


def _real_dump(name: str) -> tuple[bytes, pl.DataFrame]:
    """(bytes, rows) of the real dump ``name``: sniffed as sacct, and every record stored when
    read with its field list (--fields takes it as sacct --format wrote it) in its site's zone."""
    fields, tz = REAL_DUMPS[name]
    data = (SLURM / name).read_bytes()
    assert detect(data, name) > 0
    return data, _stored(data, fields=tuple(fields.split(",")), tz=tz)


def test_real_headerless_parsable_snowman_delimiter():
    # --parsable --noheader --delimiter=☃: every line ends with the (multi-byte) delimiter
    data, ok = _real_dump("rug-cit-hpc_slurm-jobinfo__sacct.txt")
    ids = ["20872560", "20940996", "20953257", "20963999_982", "21085537"]
    assert ok["job_id"].to_list() == ids
    assert ok["state"].to_list() == ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "RUNNING"]
    assert ok["n_cpus"].to_list() == [6, 1, 4, 8, 80] and ok["user"][1] == "user6"
    first, running = ok.row(0, named=True), ok.row(4, named=True)
    assert first["start_time"] == datetime(2021, 7, 12, 22, 28, 51)  # CEST is UTC+2
    assert (
        first["elapsed_s"] == 1 * 86400 + 6 * 3600 + 51 * 60 + 32
        and first["timelimit_s"] == 8 * 86400
    )
    assert running["end_time"] is None and running["n_nodes"] == 21 and len(running["nodes"]) == 21
    assert running["nodes"][:3] == [f"mycluster2-node{n:03d}" for n in (22, 23, 57)]
    # without --fields: one reason on every line, counting the fields without the trailing delimiter
    _, q = _parse(data)
    assert q.height == 13 and q["error"].unique().to_list() == [
        (
            "every line has 27 fields separated by '☃' but the field list (no header: Open "
            "XDMoD's 26 fields) "
            "has 26: every record rejected; pass the dump's field list with --fields f1,f2,... "
            "(and its --delimiter)"
        )
    ]


def test_real_gpu_cluster_dump_with_steps_and_typed_gres():
    # Habrok (rug-cit-hpc/hb-jobinfo): 37 fields, --parsable with '☃', steps, typed gres,
    # "None assigned"; 17 lines: 7 jobs, their 10 steps folded in
    _, ok = _real_dump("rug-cit-hpc_hb-jobinfo__sacct.txt")
    ids = ["4047445", "5908801_3", "7965768", "7939708", "7818766", "7951810", "6708912"]
    assert ok["job_id"].to_list() == ids
    assert ok["state"].to_list() == [
        "CANCELLED", "COMPLETED", "CANCELLED", "FAILED", "COMPLETED", "PENDING", "TIMEOUT",
    ]  # fmt: skip
    assert ok["raw_state"][0] == "CANCELLED by 10290820"
    # gres/gpu:v100=1 and gres/gpu=1 are the same GPU; no gres in AllocTRES is 0 GPUs; no AllocTRES
    # is unknown
    assert ok["n_gpus"].to_list() == [None, 0, 1, 1, 0, None, 0]
    assert ok["n_cpus"].to_list() == [0, 8, 8, 8, 128, 0, 256]
    assert ok["nodes"].to_list() == [
        [],
        ["v100gpu10"],
        ["v100gpu16"],
        ["a100gpu2"],
        ["omni2", "omni3"],
        [],
        ["omni11", "omni12"],
    ]
    gpu, never_ran, timeout = ok.row(2, named=True), ok.row(0, named=True), ok.row(6, named=True)
    assert gpu["start_time"] == datetime(2024, 4, 4, 19, 45, 17)  # CEST is UTC+2
    assert ok["submit_time"][1] == datetime(2023, 11, 2, 12, 47, 11)  # CET is UTC+1
    assert (
        gpu["elapsed_s"] == 15 * 3600 + 28 * 60 + 22
        and gpu["timelimit_s"] == 86400 + 23 * 3600 + 59 * 60
    )
    assert never_ran["start_time"] is None and never_ran["end_time"] == datetime(
        2023, 9, 1, 12, 55, 57
    )
    assert (
        ok["start_time"][5] is None and ok["end_time"][5] is None
    )  # PENDING: Unknown times stay null
    assert timeout["elapsed_s"] == 3 * 86400 + 25 and timeout["timelimit_s"] == 3 * 86400


def test_real_headerless_dump_whose_jobid_is_not_the_first_field():
    # Harvard FASRC (fasrc/slyme), Slurm 14.03: --noheader --parsable2 --format User,JobID,...
    # sniffed by its JobID column; one job: its .batch and .0 steps (empty User) fold into it
    _, ok = _real_dump("fasrc-slyme__sacct_single_parallel_COMPLETED_parsable.out")
    # a pipe table with 7+ fields but no .batch/.extern step id in any column is not sacct
    assert detect(b"a|1|x|y|z|2|3\nb|2.19|x|y|z|2|3\n", "t.txt") == 0
    job = ok.row(0, named=True)
    assert (job["job_id"], job["user"], job["name"], job["partition"], job["state"]) == (
        "77454", "jab", "cpu_user_parallel", "general", "COMPLETED",
    )  # fmt: skip
    assert (job["n_cpus"], job["n_nodes"], job["nodes"]) == (3, 2, ["hero4515", "hero4516"])
    assert job["start_time"] == datetime(2014, 6, 26, 15, 51, 28)  # EDT is UTC-4
    assert (
        job["end_time"] == datetime(2014, 6, 26, 15, 52, 31)
        and job["submit_time"] == job["start_time"]
    )


def test_typed_gpus_are_counted_once_and_a_count_too_large_is_quarantined():
    head = "JobID|Start|End|State|NodeList|AllocTRES\n"
    line = "{}|2026-01-02T00:00:00|2026-01-02T05:00:00|COMPLETED|n1|{}\n"
    tres = [
        "billing=1,cpu=1,gres/gpu:h100=2,gres/gpu=2,node=1",  # Slurm 22.05.8's order
        "cpu=1,gres/gpu=8,gres/gpu:a100=4,gres/gpu:h100=4,node=1",
        "cpu=1,gres/gpu:a100=4,gres/gpu:h100=4,node=1",
        "cpu=1,gres/gpu=99999999999999999999,node=1",  # not stored as 0 GPUs
    ]
    ok, q = _parse(head + "".join(line.format(i, t) for i, t in enumerate(tres, 1)))
    assert ok.sort("job_id")["n_gpus"].to_list() == [2, 8, 8]
    assert q["error"].to_list() == [f"TRES '{tres[3]}' holds a count too large to be one"]


def test_a_cluster_given_is_the_cluster_and_never_merges_the_clusters_of_one_dump():
    text = "JobID|Cluster|State|NodeList\n1|a|COMPLETED|n1\n2|b|COMPLETED|n2\n3||COMPLETED|n3\n"
    ok = _stored(text)  # no cluster given: each record's own
    assert ok.select("cluster", "reported_cluster").rows() == [
        ("a", None), ("b", None), ("default", None)
    ]  # fmt: skip
    ok, q = _parse(text, cluster="a", cluster_given=True)
    assert ok.select("job_id", "cluster", "reported_cluster").rows() == [
        ("1", "a", None), ("3", "a", None)
    ]  # fmt: skip
    assert q.select("line", "error").rows() == [
        (3, ("this dump holds records of clusters a, b: the cluster given (a) would merge them; "
            "read it without a given cluster, or one cluster at a time (sacct -M b)")),
    ]  # fmt: skip
    ok = _stored(text.replace("|b|", "|a|"), cluster="east", cluster_given=True)
    assert ok.select("cluster", "reported_cluster").rows() == [
        ("east", "a"), ("east", "a"), ("east", None)
    ]  # fmt: skip


def test_a_record_cut_by_line_breaks_in_its_name_is_joined_and_forges_nothing():
    """What sacct prints for a job whose name holds line breaks: with a delimiter its owner
    cannot know (the slurm source's random one), a header, a whole record, a blank and a comment
    line in the name are the name, and the job keeps it; with '|', a name with line breaks but
    no '|' keeps its job too."""
    d, fields = "@%+=:,./-@@", ["JobID", "JobName", "State", "AllocTRES", "NodeList"]
    forged = "999|forged|NODE_FAIL|gres/gpu=32|gpu[001-004]"
    name = f"x\n{'|'.join(fields)}\n{forged}\n\n# y"
    rows = [
        fields,
        ["1", name, "COMPLETED", "gres/gpu=2", "n1"],
        ["2", "a|b", "FAILED", "cpu=1", "n2"],
    ]
    ok = _stored("".join(d.join(r) + "\n" for r in rows))
    assert ok.select("job_id", "name", "source_line").rows() == [("1", name, 2), ("2", "a|b", 7)]
    assert ok["n_gpus"].to_list() == [2, 0]
    name = "multi\nline\n\nname"
    ok = _stored(f"JobID|JobName|State\n3|{name}|COMPLETED\n4|b|FAILED\n")
    assert ok.select("job_id", "name").rows() == [("3", name), ("4", "b")]
