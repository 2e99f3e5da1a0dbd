"""Give kernel hardware events their GPU index and UUID.

The kernel names a GPU only by PCI bus id (``PCI:0000:cb:00``); telemetry (DCGM's
``pci_bus_id`` label, ``nvidia-smi --query-gpu=index,uuid,pci.bus_id``) knows which index and
UUID sit at that bus on each host. This is a pure join on host + normalized bus id.
"""

from __future__ import annotations

import polars as pl

IDENTITY_COLUMNS = ("host", "pci_bus", "gpu", "uuid")


def normalize_pci(expr: pl.Expr) -> pl.Expr:
    """``PCI:0019:01:00`` / ``00000000:CB:00.0`` / ``0000:cb:00.0`` -> ``0019:01:00.0``."""
    g = expr.str.to_lowercase().str.extract_groups(
        r"([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})(?:\.([0-7]))?"
    )
    return pl.format(
        "{}:{}:{}.{}",
        g.struct.field("1").str.slice(-4),
        g.struct.field("2"),
        g.struct.field("3"),
        g.struct.field("4").fill_null("0"),
    )


def attach_gpu_identity(hw_events: pl.DataFrame, gpu_pci: pl.DataFrame) -> pl.DataFrame:
    """Fill ``gpu`` and (where still null) ``uuid`` of ``hw_events`` from ``gpu_pci``, a frame
    of (host, pci_bus, gpu, uuid) in any PCI spelling. Rows already carrying a value keep it;
    a (host, bus) that telemetry maps to several GPUs over time (a replacement) takes the
    UUID the kernel printed when it did, else the most recent one telemetry saw."""
    ids = (
        gpu_pci.select(
            pl.col("host").cast(pl.Utf8),
            _bus=normalize_pci(pl.col("pci_bus").cast(pl.Utf8)),
            _gpu=pl.col("gpu").cast(pl.Int32),
            _uuid=pl.col("uuid").cast(pl.Utf8),
        )
        .drop_nulls(["host", "_bus"])
        .unique(["host", "_bus"], keep="last", maintain_order=True)
    )
    cols = hw_events.columns
    return (
        hw_events.with_columns(_bus=normalize_pci(pl.col("pci_bus")))
        .join(ids, on=["host", "_bus"], how="left", nulls_equal=False)
        .with_columns(
            gpu=pl.coalesce(pl.col("gpu"), pl.col("_gpu")),
            uuid=pl.coalesce(pl.col("uuid"), pl.col("_uuid")),
        )
        .select(cols)
    )
