"""Give hardware events their GPU index.

The kernel names a GPU only by PCI bus id (``PCI:0000:cb:00``) and sometimes its UUID; the
index comes from telemetry (UUID or bus id -> index per host) and from events that carry both
a bus id and a known index (the board layout, learned per host and fleet-wide).
"""

from __future__ import annotations

import polars as pl


def fill_gpu_index(hw_events: pl.DataFrame, gpu_hourly: pl.DataFrame) -> pl.DataFrame:
    """Give events that name a GPU only by UUID or PCI bus their GPU index.

    First (host, uuid) -> index from telemetry. Then the board layout, bus -> index, from the
    telemetry that labels GPUs with their bus id (dcgm-exporter ``pci_bus_id``, nvidia-smi
    ``pci.bus_id``) and from events that carry both a bus and an index: per host, else
    fleet-wide when the bus maps to exactly one index across all hosts. Events whose GPU stays
    unknown keep a null."""
    gpus = gpu_hourly.select("host", "uuid", _bus="pci_bus", _g=pl.col("gpu").cast(pl.Int32))
    ids = gpus.select("host", "uuid", "_g").drop_nulls().unique(["host", "uuid"])
    ev = (
        hw_events.join(ids, on=["host", "uuid"], how="left")
        .with_columns(gpu=pl.coalesce(pl.col("gpu"), pl.col("_g")), _bus=pl.col("pci_bus"))
        .drop("_g")
    )
    known = pl.concat(
        [
            ev.filter(pl.col("gpu").is_not_null() & pl.col("_bus").is_not_null()).select(
                "host", "_bus", "gpu"
            ),
            gpus.select("host", "_bus", gpu="_g").drop_nulls(),
        ]
    ).unique()
    per_host = known.group_by("host", "_bus").agg(
        _gh=pl.col("gpu").first(), _nh=pl.col("gpu").n_unique()
    )
    fleet = known.group_by("_bus").agg(_gf=pl.col("gpu").first(), _nf=pl.col("gpu").n_unique())
    ev = ev.join(per_host, on=["host", "_bus"], how="left").join(fleet, on="_bus", how="left")
    return ev.with_columns(
        gpu=pl.coalesce(
            pl.col("gpu"),
            pl.when(pl.col("_nh") == 1).then(pl.col("_gh")),
            pl.when(pl.col("_nf") == 1).then(pl.col("_gf")),
        )
    ).select(hw_events.columns)
