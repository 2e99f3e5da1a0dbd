"""Cause links: ``caused by previous Xid N`` points ``caused_by`` at the event it names."""

import polars as pl


def link_causes(rows: pl.DataFrame) -> pl.DataFrame:
    """``caused by previous Xid N``: the latest earlier event with code N on the same GPU,
    else on the same host."""
    cause = rows["message"].str.extract(r"caused by previous Xid (\d+)")
    rows = rows.with_columns(cause_code=cause, hk=pl.col("host").fill_null(""))
    if rows["cause_code"].null_count() == rows.height:
        return rows.with_columns(caused_by=pl.lit(None, dtype=pl.Utf8))
    xids = (
        rows.filter(pl.col("event_type") == "xid")
        .select("hk", "time", cause_code="code", cause_pci="pci_bus", cause_id="event_id")
        .sort("time")
    )
    want = rows.filter(pl.col("cause_code").is_not_null()).select(
        "event_id", "hk", "time", "pci_bus", "cause_code"
    )
    same_gpu = (
        want.sort("time")
        .join_asof(
            xids.rename({"cause_pci": "pci_bus"}),
            on="time",
            by=["hk", "pci_bus", "cause_code"],
            strategy="backward",
            check_sortedness=False,
        )
        .select("event_id", gpu_cause="cause_id")
    )
    same_host = (
        want.sort("time")
        .join_asof(
            xids.drop("cause_pci"),
            on="time",
            by=["hk", "cause_code"],
            strategy="backward",
            check_sortedness=False,
        )
        .select("event_id", host_cause="cause_id")
    )
    return (
        rows.join(same_gpu, on="event_id", how="left")
        .join(same_host, on="event_id", how="left")
        .with_columns(caused_by=pl.coalesce("gpu_cause", "host_cause"))
    )
