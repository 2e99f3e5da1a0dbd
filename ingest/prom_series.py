"""What the two Prometheus JSON formats (``prom_json``, ``prom_rollup``) share: the columns one
series' labels give. The ``gpu_labels.LABEL_COLUMNS`` labels fill their columns, the
``gpu_labels.FOLDED_LABELS`` stay labels of their own (folded into the metric name later), and
the ``instance`` label without its port is kept as the host of last resort (Prometheus adds it
to every scraped series)."""

from __future__ import annotations

import polars as pl

from ingest.gpu_labels import FOLDED_LABELS
from ingest.gpu_labels import LABEL_COLUMNS

# the columns ``label_columns`` fills, in its order
LABEL_SCHEMA = {
    **{c: pl.Utf8 for c in LABEL_COLUMNS.values()},
    "instance_host": pl.Utf8,
    **{label: pl.Utf8 for label in FOLDED_LABELS.values()},
}


def label_columns(labels: dict[str, str]) -> dict[str, str | None]:
    """The ``LABEL_SCHEMA`` columns of one series' labels (an empty label counts as absent);
    ``label_exprs`` says the same of a frame of series."""
    return {
        **{col: labels.get(lab) or None for lab, col in LABEL_COLUMNS.items()},
        "instance_host": labels.get("instance", "").rsplit(":", 1)[0] or None,
        **{label: labels.get(label) for label in FOLDED_LABELS.values()},
    }


# the labels ``label_columns`` reads (others are not stored)
RAW_LABELS = ("__name__", *LABEL_COLUMNS, "instance", *FOLDED_LABELS.values())


def label_exprs() -> dict[str, pl.Expr]:
    """``label_columns`` as expressions over a frame with a column per ``RAW_LABELS`` label
    (null: absent), for series read natively; ``metric`` from ``__name__`` beside them."""
    return {
        "metric": pl.col("__name__").replace("", None),
        **{col: pl.col(label).replace("", None) for label, col in LABEL_COLUMNS.items()},
        "instance_host": pl.col("instance").str.replace(r":[^:]*$", "").replace("", None),
        **{label: pl.col(label) for label in FOLDED_LABELS.values()},
    }
