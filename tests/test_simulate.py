"""Synthetic fleet generator: determinism, ground-truth consistency, real-file layouts."""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import math
import re
from collections import Counter
from datetime import datetime
from datetime import timedelta
from pathlib import Path

import pytest

from ingest.sel_sensor_classes import SENSOR_TYPE_CLASS
from ingest.xid_catalog import lookup as xid_lookup
from pipelines.cli.sample import llama3_cause_mix
from sample_data.model import CLASSES
from sample_data.model import MODULE_CLASSES
from sample_data.simulation import simulate
from sample_data.writers.base import hostlist
from sample_data.writers.kernel import PRIMARY_KERNEL_MARKERS
from tests.conftest import SMALL_FLEET
from tests.conftest import TINY_FLEET

MIX = llama3_cause_mix()

SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|Partition|Account|User|Submit|Start|End|Elapsed|Timelimit|State|"
    "ExitCode|NNodes|AllocCPUS|AllocTRES|Reason|NodeList|Cluster"
)


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[Path, dict, dict]:
    out = tmp_path_factory.mktemp("fleet")
    summary = simulate(out, MIX, **SMALL_FLEET)
    truth = json.loads((out / "ground_truth.json").read_text())
    return out, summary, truth


def parse_time(s: str) -> datetime:
    return datetime.fromisoformat(s)


def test_same_seed_gives_identical_bytes(tmp_path):
    simulate(tmp_path / "a", MIX, **TINY_FLEET)
    simulate(tmp_path / "b", MIX, **TINY_FLEET)
    simulate(tmp_path / "c", MIX, **{**TINY_FLEET, "seed": 12})
    assert tree_hash(tmp_path / "a") == tree_hash(tmp_path / "b")
    assert tree_hash(tmp_path / "a") != tree_hash(tmp_path / "c")
    gz = next((tmp_path / "a" / "dcgm").rglob("*.prom.gz")).read_bytes()
    assert gz[4:8] == b"\x00\x00\x00\x00"  # gzip mtime field is zero


def test_hostlist_compression():
    names = [f"gpu-node-{i:03d}" for i in (1, 2, 3, 4, 10, 12, 13)]
    assert hostlist(names) == "gpu-node-[001-004,010,012-013]"
    assert hostlist(["gpu-node-007"]) == "gpu-node-007"


def test_summary_and_laws_match_fault_list(fleet):
    _, summary, truth = fleet
    assert summary["faults"] == len(truth["faults"]) > 20
    by_class = Counter(f["component_class"] for f in truth["faults"])
    for cls in CLASSES:
        law = truth["laws"][cls]
        assert law["n_failures"] == by_class.get(cls, 0)
        k, eta = law["shape"], law["scale_hours"]
        assert law["exposure_unit_days"] > 0
        # Weibull mean equals 1 / per-unit rate (scale chosen that way)
        assert eta * math.gamma(1 + 1 / k) > 0
    assert truth["laws"]["gpu"]["shape"] == 0.8 and truth["laws"]["psu"]["shape"] == 1.6
    assert truth["site_tz"] == "UTC" and truth["cluster"] == "simfleet"


def poisson_two_sided_p(k: int, mu: float) -> float:
    """Exact two-sided Poisson p-value (sum of probabilities <= P(k))."""
    if mu <= 0:
        return 1.0 if k == 0 else 0.0
    pk = math.exp(-mu + k * math.log(mu) - math.lgamma(k + 1))
    total, i = 0.0, 0
    while i < max(50, int(mu * 5 + 50)):
        p = math.exp(-mu + i * math.log(mu) - math.lgamma(i + 1))
        if p <= pk * (1 + 1e-9):
            total += p
        i += 1
    return min(1.0, total)


def test_realised_failures_consistent_with_true_rate(fleet):
    _, _, truth = fleet
    total_k, total_mu = 0, 0.0
    for cls, law in truth["laws"].items():
        mu = law["true_rate_per_1k_unit_days"] * law["exposure_unit_days"] / 1000.0
        assert mu == pytest.approx(law["expected_failures"], rel=1e-3, abs=1e-3)
        assert poisson_two_sided_p(law["n_failures"], mu) > 0.001, cls
        total_k += law["n_failures"]
        total_mu += mu
    assert poisson_two_sided_p(total_k, total_mu) > 0.001


def read_sacct(out: Path) -> list[dict]:
    lines = (out / "slurm" / "sacct.txt").read_text().splitlines()
    header = lines[0].split("|")
    return [dict(zip(header, ln.split("|"))) for ln in lines[1:]]


def test_killed_attempts_are_node_fail_in_sacct(fleet):
    out, _, truth = fleet
    rows = [r for r in read_sacct(out) if "." not in r["JobID"]]
    by_id: dict[str, list[dict]] = {}
    for r in rows:
        by_id.setdefault(r["JobID"], []).append(r)
    n_checked = 0
    for f in truth["faults"]:
        t = parse_time(f["time"])
        for ka in f["killed_attempts"]:
            end = parse_time(ka["end_time"])
            assert timedelta(0) <= end - t <= timedelta(seconds=60)
            assert f["host"] in ka["nodes"]
            if ka["scheduler"] != "slurm":
                assert ka["job_id"].startswith("ml-train/")
                continue
            attempts = by_id[ka["job_id"]]
            row = attempts[ka["attempt"] - 1]  # ground truth counts attempts from 1
            assert row["State"] == "NODE_FAIL"
            assert row["End"] == ka["end_time"]
            n_checked += 1
    assert n_checked > 0
    # every NODE_FAIL row is explained by a fault
    killed = {(ka["job_id"], ka["attempt"]) for f in truth["faults"] for ka in f["killed_attempts"]}
    for jid, atts in by_id.items():
        for i, r in enumerate(atts):
            if r["State"] == "NODE_FAIL":
                assert (jid, i + 1) in killed


def test_requeued_training_jobs_share_jobid(fleet):
    out, _, truth = fleet
    rows = [r for r in read_sacct(out) if "." not in r["JobID"] and r["Partition"] == "train"]
    counts = Counter(r["JobID"] for r in rows)
    assert max(counts.values()) > 1
    assert set(truth["checkpoint_interval_s"]) >= set(counts)
    assert all(1800 <= v <= 3600 for v in truth["checkpoint_interval_s"].values())


def test_replacements_in_component_history(fleet):
    out, _, truth = fleet
    with open(out / "components" / "component_history.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "component_class",
        "serial",
        "slot",
        "installed_at",
        "removed_at",
        "removal_reason",
        "failed",
    ]
    by_serial = {r["serial"]: r for r in rows}
    assert len(by_serial) == len(rows)
    assert truth["replacements"]
    for rep in truth["replacements"]:
        old, new = by_serial[rep["old_serial"]], by_serial[rep["new_serial"]]
        assert old["removed_at"] == rep["time"] == new["installed_at"]
        assert old["slot"] == new["slot"] == rep["slot"]
        assert old["failed"] == ("true" if rep["old_failed"] else "false")
        if rep["component_class"] == "gpu":
            assert rep["new_uuid"] != rep["old_uuid"] and rep["new_uuid"].startswith("GPU-")
    failed = {r["serial"] for r in rows if r["failed"] == "true"}
    assert failed == {f["unit_serial"] for f in truth["faults"]}
    for f in truth["faults"]:
        if f["replacement_serial"] is None:  # repair not finished by the end of the window
            assert by_serial[f["unit_serial"]]["removal_reason"] == "failed_awaiting_replacement"


XID_RE = re.compile(r"NVRM: Xid \(PCI:[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\): (\d+), ")
DMESG_RE = re.compile(
    r"^\[(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\] "
)
JOURNAL_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000 gpu-node-\d{3} kernel: ")


def test_kernel_xid_lines_match_ground_truth(fleet):
    out, _, truth = fleet
    codes, n45, primary = Counter(), 0, 0
    markers = PRIMARY_KERNEL_MARKERS
    for p in sorted((out / "kernel").glob("*.log")):
        for line in p.read_text().splitlines():
            assert DMESG_RE.match(line) or JOURNAL_RE.match(line), line
            m = XID_RE.search(line)
            if m and m.group(1) == "45":
                assert "caused by previous Xid" in line
                n45 += 1
                continue
            if m:
                codes[m.group(1)] += 1
            if any(k in line for k in markers):
                primary += 1
    kernel_faults = [
        f for f in truth["faults"] if any(e["source"] == "kernel" for e in f["evidence"])
    ]
    assert primary == len(kernel_faults) == truth["files"]["kernel"]["primary_lines"]
    assert n45 == truth["files"]["kernel"]["xid45_followups"]
    want = Counter(f["code"] for f in kernel_faults if f["code"].isdigit() and len(f["code"]) <= 3)
    assert codes == want
    for f in truth["faults"]:
        if f["component_class"] in MODULE_CLASSES:  # an XID the product files under its class
            assert xid_lookup(int(f["code"]))["component_class"] == f["component_class"]
            assert f["uuid"].startswith("GPU-") and f["gpu_index"] is not None


SEL_RE = re.compile(
    r"^ *[0-9a-f]+ \| \d\d/\d\d/\d{4} \| \d\d:\d\d:\d\d \| [^|]+ #0x[0-9a-f]{2} \| "
    r"[^|]+ \| (Asserted|Deasserted)( \| .+)?$"
)


def test_bmc_sel_and_redfish_mirror_faults(fleet):
    out, _, truth = fleet
    fault_desc = (
        "Failure detected",
        "Uncorrectable ECC",
        "IERR",
        "Lower Critical going low",
        "Lower Non-critical going low",
        "Drive Fault",
    )
    asserted, sensor_classes = 0, set()
    for p in sorted((out / "ipmi").glob("*.sel.txt")):
        lines = p.read_text().splitlines()
        for ln in lines:
            assert SEL_RE.match(ln), ln
            parts = [x.strip() for x in ln.split("|")]
            if parts[4] in fault_desc and parts[5] == "Asserted":
                asserted += 1
                sensor_classes.add(SENSOR_TYPE_CLASS[parts[3].rsplit(" #", 1)[0]])
        rf = json.loads(
            (out / "redfish" / p.name.replace(".sel.txt", ".LogEntries.json")).read_text()
        )
        assert rf["@odata.type"] == "#LogEntryCollection.LogEntryCollection"
        assert rf["Members@odata.count"] == len(rf["Members"]) == len(lines)
        for m in rf["Members"]:
            assert m["EntryType"] == "SEL" and m["Severity"] in ("OK", "Warning", "Critical")
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", m["Created"])
    bmc_classes = {"psu", "host_memory", "cpu", "cooling", "storage"}
    n_bmc = sum(f["component_class"] in bmc_classes for f in truth["faults"])
    assert asserted == n_bmc
    assert sensor_classes <= bmc_classes  # the product files each fault's sensor under its class
    for f in truth["faults"]:
        if f["component_class"] in bmc_classes:
            assert {e["source"] for e in f["evidence"]} >= {"ipmi", "redfish"}


PROM_RE = re.compile(r'^(# (HELP|TYPE) \w+ .+|[A-Z_]+\{(\w+="[^"]*",?)+\} [0-9.]+ \d{13})$')


def test_dcgm_prometheus_text(fleet):
    out, _, truth = fleet
    files = sorted((out / "dcgm").rglob("*.prom.gz"))
    assert files
    seen_sentinel, uuids = False, set()
    for p in files:
        text = gzip.decompress(p.read_bytes()).decode()
        for line in text.splitlines():
            assert PROM_RE.match(line), line
            if "9223372036854775794" in line:
                seen_sentinel = True
            m = re.search(r'UUID="(GPU-[0-9a-f-]{36})"', line)
            if m:
                uuids.add(m.group(1))
    assert seen_sentinel
    new_gpu = [r["new_uuid"] for r in truth["replacements"] if r["component_class"] == "gpu"]
    assert new_gpu and any(u in uuids for u in new_gpu)


def test_slurm_files_resemble_real_ones(fleet):
    out, _, _ = fleet
    lines = (out / "slurm" / "sacct.txt").read_text().splitlines()
    assert lines[0] == SACCT_HEADER
    states = Counter()
    names = SACCT_HEADER.split("|")
    for ln in lines[1:]:
        f = dict(zip(names, ln.split("|"), strict=True))
        jid = f["JobID"]
        assert re.match(r"^\d+(_\d+)?(\.(batch|extern|0))?$", jid), jid
        assert re.match(r"^gpu-node-(\d{3}|\[[\d,-]+\])$", f["NodeList"]), f["NodeList"]
        if "." not in jid:
            states[f["State"].split()[0]] += 1
            # as Slurm lists a typed GPU: the untyped total and the typed count
            assert re.search(r"gres/gpu=(\d+),gres/gpu:h100=\1,", f["AllocTRES"]), f["AllocTRES"]
            assert re.match(r"^(\d+-)?\d\d:\d\d:\d\d$", f["Timelimit"]) and f["Reason"] == "None"
    assert {"COMPLETED", "FAILED", "NODE_FAIL", "CANCELLED", "OUT_OF_MEMORY"} <= set(states)
    doc = json.loads((out / "slurm" / "sacct.json").read_text())
    assert doc["meta"]["slurm"]["release"].startswith("23.11")
    assert len(doc["jobs"]) == sum(states.values())
    j = doc["jobs"][0]
    assert isinstance(j["state"]["current"], list)
    assert set(j["time"]["limit"]) == {"set", "infinite", "number"}
    ctld = (out / "slurm" / "slurmctld.log").read_text().splitlines()
    assert all(re.match(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\] ", ln) for ln in ctld)
    assert any("requeue job JobId=" in ln and "due to failure of node" in ln for ln in ctld)
    assert any("state set to DOWN" in ln for ln in ctld)


def test_k8s_files_resemble_kubectl_output(fleet):
    out, _, truth = fleet
    pods = json.loads((out / "k8s" / "pods.json").read_text())
    events = json.loads((out / "k8s" / "events.json").read_text())
    pj = json.loads((out / "k8s" / "pytorchjob.json").read_text())
    assert pods["kind"] == events["kind"] == pj["kind"] == "List"
    assert pods["items"] and all(
        p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] for p in pods["items"]
    )
    for p in pods["items"]:
        cs = p["status"]["containerStatuses"][0]
        assert isinstance(cs["restartCount"], int) and p["spec"]["nodeName"] in truth["k8s_hosts"]
    assert all(e["eventTime"] is None and e["count"] >= 1 for e in events["items"])
    assert {c["type"] for j in pj["items"] for c in j["status"]["conditions"]} >= {
        "Created",
        "Running",
    }


COMMITTED = Path(__file__).resolve().parents[1] / "sample_data" / "fleet" / "ground_truth.json"


@pytest.mark.skipif(not COMMITTED.exists(), reason="committed sample fleet not present")
def test_committed_fleet_ground_truth():
    truth = json.loads(COMMITTED.read_text())
    assert (truth["nodes"], truth["gpus_per_node"], truth["seed"]) == (32, 8, 7)
    assert 100 <= len(truth["faults"]) <= 200
    for cls, law in truth["laws"].items():
        mu = law["true_rate_per_1k_unit_days"] * law["exposure_unit_days"] / 1000.0
        assert poisson_two_sided_p(law["n_failures"], mu) > 0.001, cls
    # the covariate is there to be found: failed GPUs sit in hotter slots on average
    off = truth["covariates"]["gpu"]["offsets"]
    hot = [off[f["slot"]] for f in truth["faults"] if f["component_class"] == "gpu"]
    assert sum(hot) / len(hot) > sum(off.values()) / len(off)
