"""The contract every registered format keeps, checked over ``ingest.registry.formats()``:

- each format's real fixtures (``tests/fixtures/...``) are detected as that format;
- a parse conserves records (records read = primary rows + quarantine rows +
  ``ParseResult.duplicates``, the exact repeats a parser drops itself) and its tables
  conform to the declared schemas (``warehouse.schemas.conform`` leaves them unchanged);
- arbitrary bytes and mutated fixtures (hypothesis) never raise and always conserve.

A new format gets the last two by registering; ``FIXTURE_FORMATS`` says which fixture files are
whose, and every registered format must have at least one.

Cases that fail in parsers owned by other work are marked ``xfail(strict=True)`` with the
failure, so the mark must come off when the parser is fixed.
"""

import gzip
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import example
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ingest.base import CERTAIN
from ingest.base import FormatSpec
from ingest.base import ParseContext
from ingest.registry import SNIFF_BYTES
from ingest.registry import detect
from ingest.registry import format_modules
from ingest.registry import formats
from tests.conftest import FIXTURES
from tests.conftest import SAMPLE_FLEET
from warehouse.schemas import QUARANTINE_COLUMNS
from warehouse.schemas import conform

# glob under tests/fixtures -> the format its files are
FIXTURE_FORMATS = {
    "slurm/sacct_*.txt": "sacct",
    "slurm/xdmod__*.log": "sacct",
    "slurm/rug-cit-hpc_*sacct*": "sacct",
    "slurm/fasrc-slyme__*": "sacct",
    "slurm/SARC__*.json": "sacct-json",
    "slurm/clockwork__*.json": "sacct-json",
    "slurm/sacct-json__*": "sacct-json",
    "slurm/sacct_json_*.json": "sacct-json",
    "slurm/sacctmgr_*": "sacctmgr-events",
    "slurm/*slurmctld*": "slurmctld",
    "kubernetes/*": "k8s",
    "dcgm/dcgm-exporter*": "dcgm",
    "dcgm/datadog-*": "dcgm",
    "dcgm/nvidia-cloud-native-docs__*": "dcgm",
    "dcgm/nvidia-smi*": "nvidia-smi",
    "nvidia-smi/*": "nvidia-smi",
    "prometheus/*": "prom-json",
    "prometheus-rollups/*": "prom-rollup",
    "kernel/*.log": "kernel",
    "bmc/ipmitool_sel*": "ipmi-sel",
    "bmc/*sel_list*": "ipmi-sel",
    "bmc/*sdr*": "ipmi-sdr",
    "bmc/redfish-mockup__Systems_*": "redfish",
    "bmc/openbmc-docs__redfish-postcodes*": "redfish",
    "bmc/intel-bmc-psu-manager__EventLog*": "redfish",
    "bmc/redfish-mockup__Chassis_*": "redfish-sensors",
    "bmc/sushy__json_samples_power*": "redfish-sensors",
    "checkpoints/*": "checkpoints",
    "training_logs/*": "training-log",
    "component_history/*": "component-history",
    "titan/gc_*.csv": "component-history",
    "lanl/*.csv": "failure-log",
    "health_events/*": "health-events",
}
CASES = sorted(
    {(p, fmt) for glob, fmt in FIXTURE_FORMATS.items() for p in FIXTURES.glob(glob) if p.is_file()}
)
FORMATS = sorted(formats())


def _xfail(reason: str):
    return pytest.mark.xfail(strict=True, reason=reason)


# Failures found in formats this contract does not own: fixed where the parser lives.
KNOWN: dict[tuple[str, str], str] = {}


def _formats(test: str):
    return [
        pytest.param(f, marks=_xfail(KNOWN[(test, f)])) if (test, f) in KNOWN else f
        for f in FORMATS
    ]


def _check(fmt: str, data: bytes, ctx: ParseContext | None = None):
    spec = formats()[fmt]
    res = spec.parse(data, ctx or ParseContext(path="fuzz"))
    primary = res.tables.get(spec.primary)
    rows = 0 if primary is None else primary.height
    assert res.records == rows + res.quarantine.height + res.duplicates, (
        res.records,
        rows,
        res.quarantine.height,
        res.duplicates,
    )
    assert dict(res.quarantine.schema) == QUARANTINE_COLUMNS
    assert res.quarantine["error"].null_count() == 0
    for name, df in res.tables.items():
        assert conform(name, df).equals(df), name
    return res


def test_every_format_has_a_fixture():
    have = {fmt for _, fmt in CASES}
    missing = [f for f in FORMATS if f not in have]
    assert missing == []


@pytest.mark.parametrize("path, fmt", CASES, ids=[str(p.relative_to(FIXTURES)) for p, _ in CASES])
def test_fixture_detected_and_parsed_to_schema(path, fmt):
    data = path.read_bytes()
    found = detect(data[:SNIFF_BYTES], path.name)
    assert found is not None and found.name == fmt
    _check(
        fmt,
        data,
        ParseContext(path=str(path), time=datetime(2024, 5, 1), mtime=datetime(2024, 5, 1)),
    )


def test_declare_takes_each_function_from_the_module_by_its_name():
    """A format states its own facts; ``FormatSpec.declare`` binds ``parse``/``detect`` and the
    optional hooks by name, and a module missing one, or with half of extract/merge, fails."""

    def parse(data, ctx):
        return None

    def detect(head, name):
        return 0

    def merge(partials, ctx):
        return None

    spec = FormatSpec.declare(
        {"parse": parse, "detect": detect}, name="x", primary="failures", description="d"
    )
    assert (spec.parse, spec.detect, spec.extract, spec.merge, spec.parse_many) == (
        parse,
        detect,
        None,
        None,
        None,
    )
    both = {"parse": parse, "detect": detect, "extract": detect, "merge": merge}
    spec = FormatSpec.declare(both, name="x", primary="failures", description="d")
    assert (spec.extract, spec.merge) == (detect, merge)
    with pytest.raises(TypeError, match="defines no detect"):
        FormatSpec.declare({"parse": parse}, name="x", primary="failures", description="d")
    half = {"parse": parse, "detect": detect, "merge": merge}
    with pytest.raises(TypeError, match="extract and merge come together"):
        FormatSpec.declare(half, name="x", primary="failures", description="d")
    # every registered format's functions are its module's own names
    for name, module in format_modules().items():
        spec = module.FORMAT
        assert (spec.parse, spec.detect) == (module.parse, module.detect), name


def test_no_sniffer_beats_certain_so_detect_may_stop_there():
    """``detect`` stops at the first CERTAIN format: the same answer as asking every sniffer,
    for every fixture and the sample fleet's files, because none returns more."""
    by_dir: dict[Path, list[Path]] = {}
    for p in sorted(SAMPLE_FLEET.rglob("*")):
        if p.is_file() and p.name != "ground_truth.json":
            by_dir.setdefault(p.parent, []).append(p)
    paths = [p for p, _ in CASES] + [p for files in by_dir.values() for p in files[:2]]
    for path in paths:
        data = path.read_bytes()
        head = (gzip.decompress(data) if path.suffix == ".gz" else data)[:SNIFF_BYTES]
        scores = [(spec.detect(head, path.name), spec.name) for spec in formats().values()]
        top = max(s for s, _ in scores)
        assert top <= CERTAIN, path
        found = detect(head, path.name)
        assert (found.name if found else None) == next(
            (n for s, n in scores if s == top and top), None
        ), path


@pytest.mark.parametrize("fmt", _formats("arbitrary"))
def test_arbitrary_bytes_never_raise_and_conserve(fmt):
    @settings(
        max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    @given(st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
    @example(b"\x1f\x8b\x08\x00")  # a gzip header: decompressing is the runner's job
    @example(b"(\xb5/\xfd")  # a zstd frame header
    @example(b"\xef\xbb\xbf")  # a lone byte-order mark
    @example(b'"')
    @example(b"\n\n\n")
    def run(data):
        _check(fmt, data)

    run()


@pytest.mark.parametrize("fmt", _formats("mutated"))
def test_mutated_fixtures_never_raise_and_conserve(fmt):
    real = [p.read_bytes() for p, f in CASES if f == fmt]
    if not real:
        pytest.skip(f"no fixture for {fmt}")

    @settings(
        max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    @given(
        st.sampled_from(real), st.integers(0, 1 << 16), st.integers(0, 40), st.binary(max_size=12)
    )
    def run(data, pos, cut, insert):
        pos = pos % (len(data) + 1)
        _check(
            fmt,
            data[:pos] + insert + data[pos + cut :],
            ParseContext(path="fuzz", tz="Europe/Berlin"),
        )

    run()


def test_no_format_imports_another():
    """Parsers are pure and independent: a module under ``ingest/formats/`` imports what formats
    share from ``ingest/`` and nothing of another format (a package format may import its own
    modules)."""
    import ast

    root = Path(__file__).resolve().parent.parent / "ingest" / "formats"
    assert len(list(root.iterdir())) >= len(formats())
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        own = rel[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                # relative: only inside a package format, and only to its own modules
                assert len(rel) > 1 and node.level == len(rel) - 1, f"{path} imports {node.module}"
                continue
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:2] == ["ingest", "formats"] and len(parts) > 2:
                    assert parts[2] == own, f"{path} imports {name}"
