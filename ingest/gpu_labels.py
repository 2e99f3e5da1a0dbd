"""What the GPU telemetry formats (dcgm-exporter text, Prometheus JSON, nvidia-smi CSV) share:
the label names that map to ``gpu_samples`` columns, how a label value is escaped between its
double quotes (the one rule the text exposition, OpenMetrics and PromQL string literals share),
DCGM's blank sentinels, the label folded into the name of a metric with one series per value
of a label ``gpu_samples`` has no column for (``FOLDED_LABELS``: the XID count's code, the clock
events count's reason), and the host a scrape file's name or folder obviously gives."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath

import polars as pl

from warehouse.schemas import XID_COUNT_METRIC
from warehouse.signals import CLOCK_EVENTS_COUNT_METRIC

# DCGM blank values (dcgm_structs.h): DCGM_INT32_BLANK 0x7ffffff0 and DCGM_INT64_BLANK
# 0x7ffffffffffffff0 plus NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED ... just above them (the
# header reserves the 16 values BLANK..BLANK+15), DCGM_FP64_BLANK 140737488355328.0 (2**47) with
# the same 16, and DCGM_STR_BLANK "<<<NULL>>>".
INT32_BLANK = 2147483632
INT32_MAX = 2147483647
INT64_BLANK_FLOAT = 9223372036854775792.0  # rounds to 2**63 as a float, like its neighbours
FP64_BLANK = 140737488355328.0
STR_BLANK = "<<<NULL>>>"

# label name -> gpu_samples column
LABEL_COLUMNS = {
    "Hostname": "host",
    "gpu": "gpu",
    "UUID": "uuid",
    "pci_bus_id": "pci_bus",
    "modelName": "model",
    "GPU_I_PROFILE": "mig_profile",
    "GPU_I_ID": "mig_instance",
    "pod": "pod",
    "namespace": "namespace",
    "container": "container",
}
# why a series that no label ties to a GPU or a host cannot be stored (one wording everywhere)
NO_GPU_NO_HOST = (
    "series names no GPU and no host (no gpu, UUID, pci_bus_id, Hostname or instance label)"
)

# A label value between double quotes: a backslash, a double quote and a line feed are written
# as these escapes, every other character as itself (Prometheus' text exposition and
# OpenMetrics; a PromQL string literal reads the same escapes, and every other character but a
# line feed as itself). JSON answers carry label values already decoded.
LABEL_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"))


def quoted(value: str) -> str:
    """``value`` as a double-quoted label value (exposition) or PromQL string literal."""
    for char, escape in LABEL_ESCAPES:
        value = value.replace(char, escape)
    return f'"{value}"'


def unquoted(text: pl.Expr) -> pl.Expr:
    """Label values as written between their quotes (``LABEL_ESCAPES``) to the values. Split at
    escaped backslashes first, so ``\\\\n`` reads as a backslash and an ``n``; a backslash before
    any other character stays as written."""
    (backslash, escaped_backslash), *others = LABEL_ESCAPES
    part = pl.element()
    for char, escape in others:
        part = part.str.replace_all(escape, char, literal=True)
    return text.str.split(escaped_backslash).list.eval(part).list.join(backslash)


_HOSTLIKE = re.compile(r"^(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9][A-Za-z0-9._-]*$")
_NOT_HOST = re.compile(
    r"^\d{4}-?\d{2}-?\d{2}|^\d+$|^(dcgm|metrics|scrape|prom|export)", re.IGNORECASE
)


def host_from_path(path: str) -> str | None:
    """A host the file name or its folder obviously names (``node042.prom``,
    ``dcgm/node042/2024-05-01.prom.gz``), else None."""
    p = PurePath(path)
    candidates = [p.name.split(".")[0], p.parent.name]
    for c in candidates:
        if c and _HOSTLIKE.match(c) and not _NOT_HOST.match(c):
            return c
    return None


def sentinel_to_null(value: pl.Expr) -> pl.Expr:
    """DCGM blank/unsupported sentinels to null; every other number unchanged."""
    is_blank = value.is_not_nan() & (  # Polars orders NaN above every number
        (value >= INT64_BLANK_FLOAT)
        | ((value >= INT32_BLANK) & (value <= INT32_MAX) & (value == value.floor()))
        | ((value >= FP64_BLANK) & (value <= FP64_BLANK + 15))
    )
    return pl.when(is_blank).then(None).otherwise(value)


def is_str_blank(raw: pl.Expr) -> pl.Expr:
    return raw.str.strip_chars() == STR_BLANK


# metric -> the label whose every value is a series of its own, folded into the stored name
# (``DCGM_EXP_XID_ERRORS_COUNT{xid="79"}``,
# ``DCGM_EXP_CLOCK_EVENTS_COUNT{clock_event="hw_thermal"}``): without it the series of one GPU
# would be one sample with several values
FOLDED_LABELS = {XID_COUNT_METRIC: "xid", CLOCK_EVENTS_COUNT_METRIC: "clock_event"}


def folded_metric(metric: pl.Expr, label: Callable[[str], pl.Expr]) -> pl.Expr:
    """The stored metric name: ``metric`` with the value of the label ``FOLDED_LABELS`` names for
    it folded in (``label(name)``: the expression of that label's value; null: nothing folded)."""
    out = metric
    for name, lab in FOLDED_LABELS.items():
        value = label(lab)
        named = pl.format(f'{{}}{{{{{lab}="{{}}"}}}}', metric, value)
        out = pl.when((metric == name) & value.is_not_null()).then(named).otherwise(out)
    return out
