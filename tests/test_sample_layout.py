"""sample_data's layout: a model, a simulation and one writer per ingest format, no import cycle,
no import of analysis or of a parser, and the same bytes as before the split."""

import ast
import hashlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ingest.registry import formats
from pipelines.cli.sample import llama3_cause_mix
from sample_data.model import class_counts
from sample_data.simulation import build_fleet
from sample_data.simulation import simulate
from tests.conftest import REPO
from tests.conftest import TINY_FLEET
from tests.conftest import simulate_with_cli

SAMPLE = REPO / "sample_data"
MODULES = sorted(
    ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
    for p in SAMPLE.rglob("*.py")
)


def project_imports(module: str) -> set[str]:
    """Project modules a sample_data module imports anywhere in its body (also inside functions)."""
    path = REPO / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = REPO / module.replace(".", "/") / "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    tops = {"sample_data", "ingest", "analysis", "warehouse", "dashboards", "pipelines"}
    return {m for m in found if m.split(".")[0] in tops}


def test_the_package_is_a_model_a_simulation_and_one_writer_per_parser():
    writers = {p.stem for p in (SAMPLE / "writers").glob("*.py")} | {
        p.parent.name for p in (SAMPLE / "writers").glob("*/__init__.py")
    }
    writers -= {
        "__init__",
        "base",
        "bmc_common",
    }
    parsers = {spec.parse.__module__.removeprefix("ingest.formats.") for spec in formats().values()}
    assert writers == {
        "sacct",
        "sacct_json",
        "slurmctld",
        "kernel",
        "dcgm",
        "ipmi_sel",
        "redfish",
        "kubernetes",
        "component_history",
        "training_log",
    }
    assert writers <= parsers  # each writer is named like the parser that reads its files
    assert {"sample_data.model", "sample_data.simulation"} <= set(MODULES)


def test_no_module_imports_analysis_a_parser_or_dagster_layers():
    parsers = {spec.parse.__module__ for spec in formats().values()}
    for module in MODULES:
        imports = project_imports(module)
        assert not {
            m for m in imports if m.split(".")[0] in ("analysis", "dashboards", "pipelines")
        }, module
        assert not imports & parsers, module


def test_the_import_graph_has_no_cycle():
    graph = {m: {i for i in project_imports(m) if i in MODULES} for m in MODULES}
    done: set[str] = set()

    def visit(m: str, path: tuple[str, ...]) -> None:
        assert m not in path, " -> ".join((*path, m))
        if m in done:
            return
        for nxt in graph[m]:
            visit(nxt, (*path, m))
        done.add(m)

    for m in MODULES:
        visit(m, ())
    # the one direction: writers read the model; the simulation drives both
    assert "sample_data.simulation" not in set().union(*graph.values())
    assert not {i for i in graph["sample_data.model"] if i.startswith("sample_data")}


def test_each_module_imports_alone():
    """In a fresh interpreter, each module is the first of the package to be imported."""
    code = (
        "import importlib, sys\n"
        f"for m in {MODULES!r}:\n"
        "    for k in [k for k in sys.modules if k.startswith('sample_data')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def file_hashes(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def digest_of(hashes: dict[str, str], names) -> str:
    digest = hashlib.sha256()
    for name in sorted(names):
        digest.update(name.encode())
        digest.update(hashes[name].encode())
    return digest.hexdigest()


def test_a_small_fleet_has_the_bytes_it_had_before_the_split(tmp_path):
    """Digest of every file's path and sha256, recorded with sample_data/fleet.py + formats.py
    (re-recorded when the Kubernetes events gained each container start and the operator's
    exit records, the ground truth each training chain's attempts and time budget, sacct's
    text each job's Timelimit and Reason, and the fleet its fail-slow episodes: DCGM clocks,
    reasons and link widths, training logs and their truth). The files fail-slow does not
    write keep the digest they had without it: its draws come from streams of their own."""
    simulate(tmp_path, llama3_cause_mix(), **TINY_FLEET)
    hashes = file_hashes(tmp_path)
    assert len(hashes) == 44
    assert digest_of(hashes, hashes) == (
        "2509cac749bc6d497008439a3ae13b65338fdb324e9186364fbd449f280e5b3d"
    )
    untouched = [n for n in hashes if not n.startswith(("dcgm/", "training/", "ground_truth"))]
    assert len(untouched) == 22
    assert digest_of(hashes, untouched) == (
        "015905dc5c1654c0e22d01aa81c1d2a7f5ef37ae00b3cc00f0159210d1fafdb0"
    )


def test_goodput_simulate_regenerates_the_committed_fleet_byte_for_byte(tmp_path, capsys):
    """The README's command, through the CLI that injects the Llama 3 mix."""
    out = tmp_path / "fleet"
    simulate_with_cli(
        out, "--nodes 32 --gpus-per-node 8 --days 60 --seed 7 --fault-scale 30 --scrape-interval 6h"
    )
    assert "faults: 148" in capsys.readouterr().out
    committed = file_hashes(SAMPLE / "fleet")
    regenerated = file_hashes(out)
    assert len(committed) == 2021
    assert regenerated == committed


def test_the_cause_mix_is_folded_into_the_simulated_classes():
    mix = llama3_cause_mix()
    counts = class_counts(mix)
    # Faulty GPU + GSP + SRAM (silent data corruption leaves no evidence and is not simulated);
    # the fabric's switch/cable 35 + NIC 7 become NVLink 12, NVSwitch 5 and IB links 25
    assert counts == {
        "gpu": 148 + 17 + 19,
        "gpu_memory": 72,
        "nvlink": 12,
        "nvswitch": 5,
        "ib_link": 25,
        "psu": 3,
        "cooling": 6,
        "cpu": 2,
        "host_memory": 2,
        "storage": 3,
    }
    no_psu = replace(mix, table=[row for row in mix.table if row[2] != "psu"])
    with pytest.raises(ValueError, match="no interruptions for psu"):
        build_fleet(no_psu, nodes=2, days=1)
