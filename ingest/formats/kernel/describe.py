"""Event type, component class, severity, action and link of each event line: XIDs from the
catalogue, host faults from ``ingest.kernel_host_faults``, SXIDs by their own text."""

import polars as pl

from ingest.kernel_host_faults import HOST_FAULTS
from ingest.xid_catalog import SXID_CLASS
from ingest.xid_catalog import UNKNOWN_XID
from ingest.xid_catalog import xid_catalog

from .patterns import LINK


def describe(events: pl.DataFrame) -> pl.DataFrame:
    """Event type, class, severity and action: XIDs from the catalogue, the rest from tables."""
    cat = xid_catalog().select(
        xid="xid", cat_class="component_class", cat_severity="severity", cat_action="action"
    )
    host = pl.DataFrame(
        {
            "code": list(HOST_FAULTS),
            "h_type": [v[0] for v in HOST_FAULTS.values()],
            "h_class": [v[1] for v in HOST_FAULTS.values()],
            "h_severity": [v[2] for v in HOST_FAULTS.values()],
        }
    )
    ev = (
        events.with_columns(
            xid=pl.when(pl.col("kind") == "xid").then(pl.col("code").cast(pl.Int32, strict=False))
        )
        .join(cat, on="xid", how="left")
        .join(host, on="code", how="left")
    )
    is_xid = pl.col("kind") == "xid"
    is_sxid = pl.col("kind") == "sxid"
    # NVLink XIDs name their own severity (``Fatal`` / ``Nonfatal``) per line.
    nvlink_word = pl.col("message").str.extract(r"(?i)\b(non-?fatal|fatal)\b").str.to_lowercase()
    xid_sev = (
        pl.when((pl.col("cat_class") == "nvlink") & (nvlink_word == "fatal"))
        .then(pl.lit("fatal"))
        .when((pl.col("cat_class") == "nvlink") & nvlink_word.is_not_null())
        .then(pl.lit("warning"))
        .otherwise(pl.col("cat_severity").fill_null(UNKNOWN_XID["severity"]))
    )
    return ev.with_columns(
        event_type=pl.when(is_xid)
        .then(pl.lit("xid"))
        .when(is_sxid)
        .then(pl.lit("sxid"))
        .otherwise("h_type"),
        component_class=pl.when(is_xid)
        .then(pl.col("cat_class").fill_null(UNKNOWN_XID["component_class"]))
        .when(is_sxid)
        .then(pl.lit(SXID_CLASS))
        .otherwise("h_class"),
        severity=pl.when(is_xid)
        .then(xid_sev)
        .when(is_sxid)
        .then(pl.col("sxid_severity"))  # null on continuation lines: they do not vote
        .otherwise("h_severity"),
        action=pl.when(is_xid).then(pl.col("cat_action")),
        component_id=pl.when(is_xid)
        .then(pl.col("pci_bus"))
        .otherwise(pl.coalesce("component_id", "pci_bus")),
        device=pl.coalesce("pci_bus", "component_id", pl.lit("")),
        hk=pl.col("host").fill_null(""),
        link=pl.when(is_sxid | (is_xid & (pl.col("cat_class") == "nvlink"))).then(
            _link_number(pl.col("message"))
        ),
    )


def _link_number(message: pl.Expr) -> pl.Expr:
    """The link an NVLink XID or SXid line names (``Link 13``; SXid ``Severity`` lines say
    ``Engine instance 13``); ``Link -1`` (no particular link) is null."""
    g = message.str.extract_groups(LINK)
    n = pl.coalesce(g.struct.field("1"), g.struct.field("2")).cast(pl.Int32, strict=False)
    return pl.when(n >= 0).then(n)
