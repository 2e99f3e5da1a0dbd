"""The XID catalogue: every published code mapped, the anchors the fleet relies on, the rules."""

import csv

import polars as pl
import pytest

from ingest.xid_catalog import ACTION_SEVERITY
from ingest.xid_catalog import CLASSES
from ingest.xid_catalog import SEVERITIES
from ingest.xid_catalog import lookup
from ingest.xid_catalog import xid_catalog
from tests.conftest import FIXTURES


def test_all_172_codes_with_class_severity_and_nvidia_action():
    cat = xid_catalog()
    with open(FIXTURES / "kernel" / "nvidia_xid_catalog.csv", newline="") as fh:
        src = {int(r["xid"]): r for r in csv.DictReader(fh)}
    assert cat.height == 172 == len(src)
    assert cat["xid"].to_list() == sorted(src)
    assert cat["component_class"].is_in(list(CLASSES)).all()
    assert cat["severity"].is_in(list(SEVERITIES)).all()
    for row in cat.iter_rows(named=True):
        assert row["action"] == (src[row["xid"]]["immediate_resolution"] or None)
        assert row["mnemonic"] == src[row["xid"]]["mnemonic"]


@pytest.mark.parametrize(
    "xid,cls",
    [(79, "gpu"), (119, "gpu"), (120, "gpu"), (48, "gpu_memory"), (63, "gpu_memory"),
     (64, "gpu_memory"), (94, "gpu_memory"), (95, "gpu_memory"), (74, "nvlink"),
     *[(x, "nvlink") for x in range(144, 151)], (13, "software"), (31, "software"),
     (43, "software"), (172, "gpu_sram"), (171, "gpu_memory"), (110, "host_os")],
)  # fmt: skip
def test_anchor_classes(xid, cls):
    assert lookup(xid)["component_class"] == cls


def test_severity_follows_the_immediate_action():
    cat = xid_catalog()
    with_rule = cat.filter(pl.col("action").is_in(list(ACTION_SEVERITY)) & (pl.col("xid") < 162))
    expected = with_rule["action"].replace_strict(ACTION_SEVERITY)
    assert with_rule["severity"].to_list() == expected.to_list()
    assert lookup(79)["severity"] == "fatal"  # RESTART_BM
    assert lookup(13)["severity"] == "critical"  # RESTART_APP
    assert lookup(63)["severity"] == "info"  # IGNORE
    assert lookup(48)["severity"] == "fatal"  # DBE workflow needs a reset
    assert lookup(171)["severity"] == "fatal"  # no published action: override


def test_unknown_code_keeps_its_number():
    hit = lookup(999)
    assert hit["xid"] == 999 and hit["component_class"] == "unknown" and hit["action"] is None
