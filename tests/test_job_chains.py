"""Job chains: the catalog's job_attempts view merges the same run seen twice (sacct text and
--json, overlapping dumps, a k8s restart seen by a pod and by an event), renumbers attempts in
time order, and job_chains summarises each chain. Checked against the synthetic fleet's truth."""

import json
from datetime import UTC
from datetime import datetime

import duckdb
import polars as pl
import pytest

from ingest.runner import ingest_paths
from pipelines.cli.sample import llama3_cause_mix
from sample_data.simulation import simulate
from tests.conftest import SAMPLE_FLEET
from tests.conftest import SMALL_FLEET
from warehouse.store import Warehouse

SACCT_TXT = """\
JobID|JobName|User|Start|End|State|ExitCode|NodeList|AllocTRES|Submit
500|train|ann|2026-01-01T00:00:00|2026-01-01T05:00:00|NODE_FAIL|0:0|g[1-2]|gres/gpu=16|2026-01-01T00:00:00
500.batch|batch||2026-01-01T00:00:00|2026-01-01T05:00:00|CANCELLED|0:15|g1||2026-01-01T00:00:00
500|train|ann|2026-01-01T05:10:00|2026-01-01T09:00:00|COMPLETED|0:0|g[2-3]|gres/gpu=16|2026-01-01T00:00:00
501_1|sweep|bob|2026-01-01T01:00:00|2026-01-01T02:00:00|COMPLETED|0:0|g4|gres/gpu=1|2026-01-01T00:30:00
501_2|sweep|bob|2026-01-01T01:00:00|Unknown|RUNNING|0:0|g5|gres/gpu=1|2026-01-01T00:30:00
"""


def _epoch(iso):
    return int((datetime.fromisoformat(iso) - datetime(1970, 1, 1)).total_seconds())


def _sacct_json(jobs):
    out = []
    for job_id, task, start, end, state, nodes in jobs:
        out.append(
            {
                "job_id": job_id,
                "name": "train" if not task else "sweep",
                "user": "ann" if not task else "bob",
                "array": {
                    "job_id": 501 if task else 0,
                    "task_id": {"set": bool(task), "number": task or 0},
                },
                "time": {
                    "start": _epoch(start),
                    "end": _epoch(end) if end else 0,
                    "submission": _epoch("2026-01-01T00:00:00"),
                },
                "state": {"current": [state], "reason": "None"},
                "nodes": nodes,
                "tres": {
                    "allocated": [{"type": "gres", "name": "gpu", "count": 16 if not task else 1}]
                },
            }
        )
    return json.dumps({"meta": {"plugin": {"data_parser": "data_parser/v0.0.40"}}, "jobs": out})


SACCT_JSON = _sacct_json([
    (500, 0, "2026-01-01T00:00:00", "2026-01-01T05:00:00", "NODE_FAIL", "g[1-2]"),
    (500, 0, "2026-01-01T05:10:00", "2026-01-01T09:00:00", "COMPLETED", "g[2-3]"),
    (502, 1, "2026-01-01T01:00:00", "2026-01-01T02:00:00", "COMPLETED", "g4"),
    (503, 2, "2026-01-01T01:00:00", "2026-01-01T03:00:00", "COMPLETED", "g5"),  # 501_2 ended since
])  # fmt: skip


def test_same_history_from_sacct_text_and_json_has_no_duplicate_attempts(wh, tmp_path):
    (tmp_path / "a.txt").write_text(SACCT_TXT)
    (tmp_path / "b.json").write_text(SACCT_JSON)
    reports = ingest_paths(wh, [tmp_path])
    assert sorted(r.format for r in reports) == ["sacct", "sacct-json"]
    raw = pl.read_parquet(wh.record_files("job_attempts"))
    assert raw.height == 8  # the source rows are kept apart (provenance)
    assert (
        pl.read_parquet(wh.files("job_attempts")).height == 4
    )  # the table's files: one row per attempt
    ja = wh.read("job_attempts").sort("job_id", "attempt")
    assert ja.select("job_id", "attempt", "state").rows() == [
        ("500", 1, "NODE_FAIL"), ("500", 2, "COMPLETED"),
        ("501_1", 1, "COMPLETED"), ("501_2", 1, "COMPLETED"),
    ]  # fmt: skip
    assert ja["end_time"][3] == datetime(
        2026, 1, 1, 3
    )  # the dump that saw it end wins over RUNNING
    assert ja["nodes"].to_list()[:2] == [["g1", "g2"], ["g2", "g3"]]
    wh.refresh_catalog()
    with duckdb.connect(
        str(wh.db_path), read_only=True, config={"file_search_path": str(wh.home)}
    ) as con:
        assert con.sql("select count(*) from job_attempts").fetchall() == [(4,)]
        chains = con.sql("select * from job_chains order by job_id").pl()
    assert chains["job_id"].to_list() == ["500", "501_1", "501_2"]  # array tasks stay separate jobs
    c = chains.row(0, named=True)
    assert (c["attempts"], c["final_state"], c["n_gpus"], c["name"], c["user"]) == (
        2,
        "COMPLETED",
        16,
        "train",
        "ann",
    )
    # the catalog shows times as instants (TIMESTAMPTZ)
    assert c["first_start"] == datetime(2026, 1, 1, tzinfo=UTC) and c["final_end"] == datetime(
        2026, 1, 1, 9, tzinfo=UTC
    )


def test_running_chain_has_no_final_end(wh, tmp_path):
    (tmp_path / "a.txt").write_text(SACCT_TXT)
    ingest_paths(wh, [tmp_path])
    wh.refresh_catalog()
    with duckdb.connect(
        str(wh.db_path), read_only=True, config={"file_search_path": str(wh.home)}
    ) as con:
        row = con.execute(
            "select final_state, final_end, attempts from job_chains where job_id = '501_2'"
        ).fetchone()
    assert row == ("RUNNING", None, 1)


def test_k8s_restart_seen_by_pod_and_by_event_is_one_attempt_with_all_nodes(wh, tmp_path):
    t = "2025-01-01T0{}:00:00Z"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pt-worker-0",
            "namespace": "ml",
            "labels": {"training.kubeflow.org/job-name": "pt"},
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
        },
        "status": {
            "containerStatuses": [
                {
                    "name": "c",
                    "restartCount": 1,
                    "lastState": {
                        "terminated": {
                            "reason": "Error",
                            "exitCode": 1,
                            "startedAt": t.format(1),
                            "finishedAt": t.format(2),
                        }
                    },
                    "state": {"running": {"startedAt": t.format(3)}},
                }
            ]
        },
    }
    events = [
        {
            "kind": "Event",
            "reason": "Scheduled",
            "involvedObject": {"kind": "Pod", "name": f"pt-worker-{w}", "namespace": "ml"},
            "message": f"Successfully assigned ml/pt-worker-{w} to n{w + 1}",
            "firstTimestamp": t.format(0),
        }
        for w in (0, 1)
    ] + [
        {
            "kind": "Event",
            "reason": "Killing",
            "involvedObject": {"kind": "Pod", "name": "pt-worker-1", "namespace": "ml"},
            "firstTimestamp": t.format(2),
        },
        {
            "kind": "Event",
            "reason": "PyTorchJobRestarting",
            "involvedObject": {"kind": "PyTorchJob", "name": "pt", "namespace": "ml"},
            "firstTimestamp": "2025-01-01T02:00:02Z",
        },
    ]
    (tmp_path / "pods.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod]})
    )
    (tmp_path / "events.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": events})
    )
    ingest_paths(wh, [tmp_path])
    ja = wh.read("job_attempts").sort("attempt")
    assert ja.height == 2
    failed = ja.row(0, named=True)
    assert failed["nodes"] == ["n1", "n2"]  # the event saw both workers, the pod only its own
    assert failed["start_time"] == datetime(2025, 1, 1, 1)  # the pod knew when it started
    assert failed["end_time"] == datetime(2025, 1, 1, 2) and failed["exit_code"] == 1
    assert ja["state"].to_list() == ["FAILED", "RUNNING"] and ja["attempt"].to_list() == [1, 2]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    if (SAMPLE_FLEET / "ground_truth.json").exists():
        return SAMPLE_FLEET
    out = tmp_path_factory.mktemp("fleet")
    simulate(out, llama3_cause_mix(), **SMALL_FLEET)
    return out


def test_every_fault_killed_attempt_is_a_failed_attempt_with_its_nodes_and_end(fleet, tmp_path):
    from warehouse.store import Warehouse

    wh = Warehouse(tmp_path / "home")
    reports = ingest_paths(wh, [fleet / "slurm", fleet / "k8s"])
    assert all(r.rows_quarantined == 0 and r.records == r.rows_ok for r in reports)
    truth = json.loads((fleet / "ground_truth.json").read_text())
    killed = [a for f in truth["faults"] for a in f["killed_attempts"]]
    assert {a["scheduler"] for a in killed} == {"slurm", "k8s"}
    # ground_truth.json numbers attempts from 1, as the warehouse does
    every = [a["attempt"] for a in killed] + [w["attempt"] for w in truth["workload_failures"]]
    assert min(every) == 1
    ja = wh.read("job_attempts")
    slurm_ids = set(ja.filter(pl.col("scheduler") == "slurm")["job_id"])
    for a in killed:
        rows = ja.filter(
            (pl.col("scheduler") == a["scheduler"]) & (pl.col("job_id") == a["job_id"])
            & (pl.col("end_time") == datetime.fromisoformat(a["end_time"]))
        )  # fmt: skip
        assert rows.height == 1, a
        row = rows.row(0, named=True)
        assert row["state"] in ("NODE_FAIL", "FAILED", "PREEMPTED"), (a, row["state"])
        assert sorted(row["nodes"]) == sorted(a["nodes"]), a
        assert row["attempt"] == a["attempt"], a
        if a["scheduler"] == "slurm":
            assert row["state"] == "NODE_FAIL"
    # sacct text and --json both hold every Slurm attempt: the view shows each once
    raw = pl.read_parquet(wh.record_files("job_attempts")).filter(pl.col("scheduler") == "slurm")
    assert raw.height == 2 * ja.filter(pl.col("scheduler") == "slurm").height
    assert ja.filter(pl.col("scheduler") == "slurm").select("job_id", "attempt").is_unique().all()
    # slurmctld's kill / requeue lines name the same jobs
    ne = wh.read("node_events").filter(pl.col("event").is_in(["job_killed", "job_requeue"]))
    assert set(ne["job_id"]) <= slurm_ids and ne.height > 0
    # ... and each links to the attempt it ended (slurmctld has milliseconds, sacct seconds)
    linked = ne.join(ja.select("job_id", "end_time", "nodes"), on="job_id").filter(
        (pl.col("time") - pl.col("end_time")).dt.total_milliseconds().abs() <= 1000
    )
    assert (
        linked.unique(["job_id", "time", "event"]).height
        == ne.unique(["job_id", "time", "event"]).height
    )
    assert linked.select(pl.col("nodes").list.contains(pl.col("host")).all()).item()


def test_two_clusters_whose_sacct_names_one_cluster_stay_two(tmp_path, capsys):
    """Two 16-node fleets whose sacct both say ClusterName simfleet, with overlapping job ids,
    ingested with --cluster east / west: two clusters with all their jobs and attempts (no chain
    joins two clusters' runs), the name sacct gave kept beside them, and one warning a file."""
    from pipelines.cli import main
    from sample_data.simulation import build_fleet
    from sample_data.writers import sacct as sacct_text
    from sample_data.writers import sacct_json
    from sample_data.writers.base import slurm_attempts

    home, truth, warned = tmp_path / "home", {}, {}
    for cluster, seed in (("east", 11), ("west", 12)):
        f = build_fleet(llama3_cause_mix(), nodes=16, gpus_per_node=8, days=20, seed=seed,
                        fault_scale=30.0, scrape_interval_s=0, k8s_nodes=0)  # fmt: skip
        sacct_text.write(f, tmp_path / cluster / "sacct.txt")
        sacct_json.write(f, tmp_path / cluster / "sacct.json")
        attempts = slurm_attempts(f)
        truth[cluster] = {a.job_id: sum(b.job_id == a.job_id for b in attempts) for a in attempts}
        argv = ["--home", str(home), "ingest", str(tmp_path / cluster), "--cluster", cluster]
        assert main(argv) == 0
        warned[cluster] = [ln for ln in capsys.readouterr().err.splitlines() if "Cluster" in ln]
    assert set(truth["east"]) & set(truth["west"])  # the same job ids in both
    assert main(["--home", str(home), "compare", "--json"]) == 0
    rows = {r["cluster"]: r["jobs"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows == {c: len(jobs) for c, jobs in truth.items()}
    wh = Warehouse(home)
    chains = wh.query("select cluster, job_id, attempts from job_chains")
    assert {c: dict(zip(g["job_id"], g["attempts"])) for (c,), g in chains.group_by("cluster")} == (
        truth
    )
    assert set(wh.read("job_attempts")["reported_cluster"]) == {"simfleet"}
    for cluster, lines in warned.items():
        n = sum(truth[cluster].values())
        assert sorted(lines) == [
            f"warning: {tmp_path / cluster / name}: job records whose own Cluster is not the "
            f"cluster given ({n:,} name 'simfleet') are stored as cluster '{cluster}' (their own "
            "name: job_attempts.reported_cluster)"
            for name in ("sacct.json", "sacct.txt")
        ]
